"""Question-answering metrics: strict EM, the authors' lenient containment match, token F1.

Paper 002 reports "Exact Match". The authors' public code counts a prediction as an
exact match when it merely *contains* the gold answer; that is a much more lenient
metric (a rambling answer that mentions every candidate scores 1). We therefore keep
the two apart and name them honestly:

* :func:`exact_match` — strict EM with the SQuAD v1.1 normalisation
  (lower-case, strip punctuation, drop the articles a/an/the, collapse whitespace),
  extended for Chinese (see :func:`normalize_answer`).
* :func:`containment_match` — LENIENT: 1 when a normalised gold answer occurs inside the
  normalised prediction. This is the authors' "EM"; report it only with that label.
* :func:`token_f1` — SQuAD token F1, with every CJK character counted as one token
  (Chinese has no spaces, so whitespace tokens would make F1 all-or-nothing).

All functions take one prediction and a sequence of gold answers and return the best
score over the golds, as SQuAD does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rag_desktop.core.citations import cited_numbers, strip_citations
from rag_desktop.core.text import answer_tokens, normalize_answer


def _golds(golds: str | Sequence[str]) -> list[str]:
    if isinstance(golds, str):
        return [golds]
    out = list(golds)
    if not out:
        raise ValueError("gold answers: the list is empty; each question needs at least one answer")
    return out


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """Strict EM: 1.0 when the normalised prediction equals some normalised gold answer."""
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in _golds(golds)) else 0.0


def containment_match(prediction: str, golds: str | Sequence[str]) -> float:
    """LENIENT match (the authors' code's "EM"): a normalised gold is a substring of the
    normalised prediction.

    Plain substring test, as in the usual "answer in prediction" accuracy, so "ann" is
    found inside "joanna": that leniency is the point of keeping it separate from
    :func:`exact_match`. Golds that normalise to the empty string are ignored (they
    would match anything).
    """
    pred = normalize_answer(prediction)
    for g in _golds(golds):
        ng = normalize_answer(g)
        if ng and ng in pred:
            return 1.0
    return 0.0


def _f1_tokens(pred: list[str], gold: list[str]) -> float:
    # SQuAD: if either side is empty, F1 is 1 only when both are empty.
    if not pred or not gold:
        return 1.0 if pred == gold else 0.0
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: str | Sequence[str]) -> float:
    """SQuAD token F1 (max over golds); CJK characters are single tokens."""
    pred = answer_tokens(prediction)
    return max(_f1_tokens(pred, answer_tokens(g)) for g in _golds(golds))


@dataclass(frozen=True)
class QAScores:
    """The three scores of one prediction (or their means over a set)."""

    exact_match: float
    containment: float
    f1: float
    n: int = 1


def citation_precision(answer_text: str, source_texts: Sequence[str],
                       golds: str | Sequence[str]) -> float | None:
    """The share of the answer's cited ``[n]`` that point at a source holding a gold answer.

    A cited number counts as correct when source n exists and some normalised gold answer is
    contained in its normalised text; a citation to a source that was never given counts as
    wrong. None when the answer cites nothing (precision is undefined; reported apart).
    Citations are read with the one grammar of :mod:`rag_desktop.core.citations`.
    """
    cited = cited_numbers(answer_text)
    if not cited:
        return None
    norm_golds = [g for g in (normalize_answer(x) for x in _golds(golds)) if g]
    good = 0
    for n in cited:
        if 1 <= n <= len(source_texts):
            src = normalize_answer(source_texts[n - 1])
            good += any(g in src for g in norm_golds)
    return good / len(cited)


def score_answer(prediction: str, golds: str | Sequence[str]) -> QAScores:
    """The three scores of an answer's words: its ``[n]`` markers are removed first.

    Without that, "600元 [1]" would fail strict EM against "600元" and "[5]" would count as a
    wrong token in F1, so asking the model to cite (as the app does) would lower its scores;
    whether the citations are right is measured separately by :func:`citation_precision`.
    """
    words = strip_citations(prediction)
    return QAScores(
        exact_match=exact_match(words, golds),
        containment=containment_match(words, golds),
        f1=token_f1(words, golds),
    )


def mean_scores(scores: Iterable[QAScores]) -> QAScores:
    """Mean of per-question scores, weighted by their ``n`` (so means of means work)."""
    items = list(scores)
    total = sum(s.n for s in items)
    if total == 0:
        return QAScores(0.0, 0.0, 0.0, n=0)
    return QAScores(
        exact_match=sum(s.exact_match * s.n for s in items) / total,
        containment=sum(s.containment * s.n for s in items) / total,
        f1=sum(s.f1 * s.n for s in items) / total,
        n=total,
    )
