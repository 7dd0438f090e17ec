"""Which of its sources an answer needs: the counterfactual question asked of the person's own answer.

For each source the answer cites, the same question is answered again from the same sources without
that one (same prompt otherwise, same seed and temperature). If the answer without it says something
else, the answer needed it; if it says the same, another source carries the claim (or the model
answered from elsewhere). "The same" is token F1 between the two answers, citation markers removed,
at least SAME_F1 — the rule CF-RAG's counterfactual step uses for L(q) = L(q′) (core.cfrag
``answer_same_f1``), with the same default. Decided from the texts alone: no model call judges it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_desktop.core.citations import strip_citations
from rag_desktop.core.qa_metrics import token_f1

SAME_F1 = 0.5


@dataclass(frozen=True)
class SourceNeed:
    """Source ``n`` (1-based, as the answer cites it) and what the answer became without it."""

    n: int
    title: str
    needed: bool
    agreement: float  # token F1 between the answer and the answer without this source
    answer_without: str
    seconds: float


def agreement(answer: str, other: str) -> float:
    """Token F1 of two answers' words (CJK characters one token each), citation markers removed."""
    return token_f1(strip_citations(other), strip_citations(answer))


def need_of(n: int, title: str, answer: str, answer_without: str, seconds: float,
            same_f1: float = SAME_F1) -> SourceNeed:
    a = agreement(answer, answer_without)
    return SourceNeed(n, title, a < same_f1, a, answer_without, seconds)
