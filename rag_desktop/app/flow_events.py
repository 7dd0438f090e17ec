"""What a question's flow (app.question_flow) reports: frozen events, in the order they happen.

A window draws them, the CLI prints them, a test reads them (docs/architecture.md, "The
question's path"). None carries a widget or a callback: Qt stays in ``ui/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rag_desktop.core.causal_context import WordSpan
from rag_desktop.core.cfrag.types import CFResult
from rag_desktop.core.needs import SourceNeed
from rag_desktop.core.types import Answer, Progress, RankedList

if TYPE_CHECKING:  # annotations only: the flow never builds a Comparison, the service does
    from rag_desktop.app.service import Comparison


@dataclass(frozen=True)
class ColumnsReady:
    """The rankings, drawn before any generator call; ``translated`` when this is the second pass
    with the question's translation (``retrieval.cross_language``)."""

    comparison: Comparison
    surfaces: Mapping[str, str] = field(default_factory=dict)  # a stemmed term's readable word
    # The words of each hit's passage (keyed by ``flat_text`` of it), for whole-word highlights.
    words: Mapping[str, tuple[WordSpan, ...]] = field(default_factory=dict)
    translated: bool = False


@dataclass(frozen=True)
class AnswerGroup:
    """Answer columns that hand the model the same passages in the same order: one answer is
    written, for ``lead``, and shown in every one of ``members`` (``lead`` first)."""

    members: tuple[str, ...]
    lists: tuple[RankedList, ...]  # each member's own list (its method, its hits), in the same order

    @property
    def lead(self) -> str:
        return self.members[0]

    @property
    def ranked(self) -> RankedList:
        """What the one answer reads: the lead column's list."""
        return self.lists[0]


@dataclass(frozen=True)
class AnswerProgress:
    """The model being made ready (or a step before the first token) for ``group``'s answer."""

    group: AnswerGroup
    progress: Progress


@dataclass(frozen=True)
class Token:
    """A piece of ``group``'s answer, shown in each of its columns."""

    group: AnswerGroup
    text: str


@dataclass(frozen=True)
class AnswerDone:
    """``column``'s answer; ``shared_from`` names the column it was written for when it is
    another column's answer (same sources), else it is empty."""

    column: str
    answer: Answer
    ranked: RankedList
    shared_from: str = ""


@dataclass(frozen=True)
class CFProgress:
    """A CF-RAG step (``cfrag.<step>``), or the model being made ready first (``preparing``:
    its counts are bytes, not steps)."""

    progress: Progress

    @property
    def preparing(self) -> bool:
        return not self.progress.stage.startswith("cfrag.")


@dataclass(frozen=True)
class CFDone:
    result: CFResult


@dataclass(frozen=True)
class Abstained:
    """The library holds no answer (core.abstain): CF-RAG did not run; ``answer`` says so."""

    answer: Answer
    column: str = "cfrag"


@dataclass(frozen=True)
class NeedsProgress:
    """``column``'s answer being asked again without one of its cited sources (k of n)."""

    column: str
    progress: Progress


@dataclass(frozen=True)
class NeedsDone:
    """Which of ``column``'s cited sources its answer needs (core.needs), one per cited source."""

    column: str
    needs: tuple[SourceNeed, ...]


@dataclass(frozen=True)
class Failed:
    """A step failed (``step``: "compare", "answer" or "cfrag"; ``columns``: whose work it was).
    Only :meth:`QuestionFlow.events` reports failures as events; its single steps raise."""

    step: str
    columns: tuple[str, ...]
    error: Exception


FlowEvent = ColumnsReady | AnswerProgress | Token | AnswerDone | CFProgress | CFDone | Abstained | Failed
