"""The question on screen, as the window keeps it while the flow's events arrive (ui.question_view)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rag_desktop.core.causal_context import WordSpan
from rag_desktop.core.cfrag.types import CFResult
from rag_desktop.core.types import Answer

if TYPE_CHECKING:
    from rag_desktop.app.question_flow import QuestionFlow
    from rag_desktop.app.service import Comparison


@dataclass
class QueryState:
    """Mutable on purpose: it gathers what the events of one question (``qid``) brought so far."""

    qid: int
    question: str
    flow: QuestionFlow | None = None
    started: float = field(default_factory=time.monotonic)
    first_words: float | None = None  # seconds from Enter to the first answer token on screen
    typed: str = ""  # what the user typed, when ``question`` is its standalone rewrite
    comparison: Comparison | None = None
    surfaces: dict[str, str] = field(default_factory=dict)
    words: dict[str, tuple[WordSpan, ...]] = field(default_factory=dict)
    answers: dict[str, Answer] = field(default_factory=dict)
    cfrag: CFResult | None = None
    errors: dict[str, str] = field(default_factory=dict)

    def since_asked(self) -> float:
        """Seconds since the question was asked (Enter)."""
        return time.monotonic() - self.started
