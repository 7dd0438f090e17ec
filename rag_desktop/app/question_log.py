"""The person's recent questions to a library (``RagService.compare``), kept in the catalog.

Written on every question; nothing in the app reads it yet (the calibration gate makes its probes
from the library's documents, docs/architecture.md, "The calibration gate"), so it is what a gate
whose probes are the person's own questions would start from.
"""

from __future__ import annotations

from rag_desktop.app.catalog import Catalog

# catalog meta: {"n": questions ever logged, "recent": [distinct, newest last]}
QUESTION_LOG_KEY = "question_log"
QUESTION_LOG_MAX = 200


def as_logged(question: str) -> str:
    """A question as the log keeps it: whitespace collapsed, so a re-typed question is the same one."""
    return " ".join(question.split())


def log_question(catalog: Catalog, question: str) -> None:
    """Remember a question asked of this library (RagService.compare)."""
    q = as_logged(question)
    if not q:
        return
    with catalog.transaction():  # read and written in one write transaction
        log_ = catalog.get_json(QUESTION_LOG_KEY) or {"n": 0, "recent": []}
        recent = ([x for x in log_.get("recent", []) if x != q] + [q])[-QUESTION_LOG_MAX:]
        catalog.set_json(QUESTION_LOG_KEY, {"n": int(log_.get("n", 0)) + 1, "recent": recent})

