"""The person's questions to a library and what they did with their results (``RagService.compare``,
``RagService.note_relevant``), kept in the catalog as the automatic gate's probes and labels (app.auto_gate).

Written on every question whether or not the gate runs, so it lives apart from the gate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rag_desktop.app.catalog import Catalog

# catalog meta: {"n": questions ever logged, "recent": [distinct, newest last],
#                "labels": {question: {"cited": [doc ids], "opened": [doc ids]}}, "n_labels": label events}
QUESTION_LOG_KEY = "question_log"
QUESTION_LOG_MAX = 200
# What the person did with a question's results, kept as its relevance labels (log_label).
LABEL_KINDS = ("cited", "opened")


def as_logged(question: str) -> str:
    """A question as the log keeps it: whitespace collapsed, so a re-typed question is the same one."""
    return " ".join(question.split())


def _labels_of(log_: dict[str, Any], recent: Sequence[str]) -> dict[str, dict[str, list[int]]]:
    """The question log's labels of the questions still in its recent list (the others are dropped)."""
    return {k: v for k, v in (log_.get("labels") or {}).items() if k in recent}


def log_question(catalog: Catalog, question: str) -> None:
    """Remember a question asked of this library (RagService.compare): future probes, and a reason to re-calibrate."""
    q = as_logged(question)
    if not q:
        return
    # read and written in one write transaction (the app and a background gate may both log); the
    # labels stay: a new question used to replace the whole entry and lost every earlier label
    with catalog.transaction():
        log_ = catalog.get_json(QUESTION_LOG_KEY) or {"n": 0, "recent": []}
        recent = ([x for x in log_.get("recent", []) if x != q] + [q])[-QUESTION_LOG_MAX:]
        catalog.set_json(QUESTION_LOG_KEY, log_ | {"n": int(log_.get("n", 0)) + 1, "recent": recent,
                                                   "labels": _labels_of(log_, recent)})


def log_label(catalog: Catalog, question: str, doc_ids: Iterable[int], how: str) -> None:
    """Keep what the person did with the results of a question they asked, as its labels.

    ``how``: "cited" — the documents the answer to it cites (``RagService.answer``; an answer
    flagged as not from the documents is not logged); "opened" — a document the person opened
    from a result or a citation (the app's viewer). Both are the person's own relevance
    signal for their own question, the probe the paper's gate wants (§4.6: labelled probes that
    represent the library), with no model asked. Our choice, and its limits: a cited document is
    one the model read and used, which is what "relevant" means for a RAG answer; an opened one
    carries a position bias (people open what is on top), but the gate compares *rankings of the
    same documents*, so a label biased towards one column's top still only counts where the other
    column ranks it lower. Labels of questions that fell out of the recent log are dropped.
    """
    q = as_logged(question)
    ids = sorted({int(d) for d in doc_ids if d})
    if how not in LABEL_KINDS:
        raise ValueError(f"unknown label kind {how!r}; one of {', '.join(LABEL_KINDS)}")
    if not q or not ids:
        return
    with catalog.transaction():  # one read-modify-write, as log_question
        log_ = catalog.get_json(QUESTION_LOG_KEY) or {"n": 0, "recent": []}
        recent = [str(x) for x in log_.get("recent", [])]
        if q not in recent:
            return  # asked elsewhere (not through compare): not one of this library's probes
        labels = _labels_of(log_, recent)
        entry = labels.setdefault(q, {})
        new = sorted(set(entry.get(how, [])) | set(ids))
        if new == entry.get(how):
            return
        entry[how] = new
        log_["labels"] = labels
        log_["n_labels"] = int(log_.get("n_labels", 0)) + 1
        catalog.set_json(QUESTION_LOG_KEY, log_)


def user_labels(catalog: Catalog) -> dict[str, list[int]]:
    """Per asked question, the documents the person's answers cited or they opened (still in the library)."""
    log_ = catalog.get_json(QUESTION_LOG_KEY) or {}
    present = {d.doc_id for d in catalog.documents()}
    out: dict[str, list[int]] = {}
    for q, entry in (log_.get("labels") or {}).items():
        ids = sorted({int(d) for how in LABEL_KINDS for d in entry.get(how, []) if int(d) in present})
        if ids:
            out[str(q)] = ids
    return out


def question_log(catalog: Catalog) -> tuple[int, list[str]]:
    log_ = catalog.get_json(QUESTION_LOG_KEY) or {}
    return int(log_.get("n", 0)), [str(x) for x in log_.get("recent", [])]
