"""Reciprocal rank fusion of one column's rankings for several phrasings of a question.

A question asked in Chinese about an English document is ranked twice: as typed, and as the local
model translated it into the library's other language. Each column (baseline, causal/hybrid,
cross-encoder) then has two rankings of its candidates, and they are merged here by reciprocal
rank fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and
individual Rank Learning Methods", SIGIR 2009):

    RRF(d) = Σ_{r ∈ R} 1 / (k + r(d)),   k = 60

where r(d) is d's 1-based rank in ranking r (a ranking that does not hold d adds nothing).

Why RRF and not a merge of scores: the two rankings come from different query vectors, and
cross-lingual cosines sit on another scale than same-language ones (e5 puts a Chinese question
and an English passage several hundredths lower than the same question and a Chinese passage),
so s_sim, s_c and the cross-encoder's s(q, e) of the two queries are not comparable; ranks are.
RRF needs no training and no per-library calibration, and k = 60 is the paper's value (they
found it robust from 10 to 100): large enough that a document ranked 1st by one query and
absent from the other does not beat a document ranked 2nd and 3rd by both.

Ties (a document ranked 1st by one query and one ranked 1st by the other) go to the better
single rank, then to the earlier query (the question as typed), then the lower unit id, so the
order is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_desktop.core.types import Explanation, Hit, RankedList

RRF_K = 60  # Cormack et al. 2009, §3: k = 60 "was fixed during a pilot investigation"


def rrf_scores(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """RRF(d) = Σ_r 1 / (k + r(d)) over the rankings that hold d (each a list of ids, best first)."""
    if k < 0:
        raise ValueError(f"the RRF constant k must be ≥ 0, got {k}")
    out: dict[int, float] = {}
    for ranking in rankings:
        for rank, uid in enumerate(ranking, start=1):
            out[uid] = out.get(uid, 0.0) + 1.0 / (k + rank)
    return out


def rrf_order(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Ids by RRF score; ties by best single rank, then the earlier ranking, then the id."""
    scores = rrf_scores(rankings, k)
    best: dict[int, tuple[int, int]] = {}
    for i, ranking in enumerate(rankings):
        for rank, uid in enumerate(ranking, start=1):
            if uid not in best or (rank, i) < best[uid]:
                best[uid] = (rank, i)
    return sorted(scores, key=lambda u: (-scores[u], best[u][0], best[u][1], u))


@dataclass(frozen=True)
class Fused:
    """A fused column: the list, and for each of its hits the index of the query that ranked it best."""

    ranked: RankedList
    found_by: tuple[int, ...]


def fuse(lists: Sequence[RankedList], limit: int, k: int = RRF_K,
         baseline_ranks: Mapping[int, int] | None = None, keep: int = 0) -> Fused:
    """One column's rankings (one per phrasing of the question, the typed one first) merged by RRF.

    Each hit, its explanation and its own score are those of the ranking that placed it best, so
    the Why card reads the scores that earned the place; the explanation's ``new_rank`` becomes
    the fused rank and its ``baseline_rank`` the unit's rank in ``baseline_ranks`` (the fused
    baseline column), so "moved up from 3 to 1" compares two columns the user sees. At most
    ``limit`` hits are kept (the column's k).

    ``keep``: the first ``keep`` hits of ``lists[0]`` stay first, in its order, and RRF orders the
    rest. RRF alone lets a unit that a second ranking holds at all outrank the first ranking's best
    unit that it does not hold (1/(k+r₁) + 1/(k+r₂) > 1/(k+1) for any r₁, r₂ ≤ k): right for two
    phrasings of one question, which rank the same candidates, not for a keyword leg that ranks only
    the units sharing a word with the question (docs/evaluation.md §1.4).
    """
    if not lists:
        raise ValueError("nothing to fuse")
    if len(lists) == 1:  # one phrasing: the column exactly as ranked (a single-language library)
        return Fused(lists[0], (0,) * len(lists[0].hits))
    order = rrf_order([[h.unit_id for h in r.hits] for r in lists], k)
    if keep > 0:
        head = [h.unit_id for h in lists[0].hits[:keep]]
        kept = set(head)
        order = head + [u for u in order if u not in kept]
    order = order[:limit]
    where: dict[int, tuple[int, int]] = {}  # unit id -> (list index, position) of its best rank
    for i, r in enumerate(lists):
        for pos, h in enumerate(r.hits):
            if h.unit_id not in where or pos < where[h.unit_id][1]:
                where[h.unit_id] = (i, pos)
    expl = [{e.unit_id: e for e in r.explanations} for r in lists]
    hits: list[Hit] = []
    explanations: list[Explanation] = []
    scores: list[float] = []
    found: list[int] = []
    have_scores = all(len(r.scores) == len(r.hits) for r in lists) and any(r.scores for r in lists)
    for rank, uid in enumerate(order, start=1):
        i, pos = where[uid]
        src = lists[i]
        hits.append(src.hits[pos].with_rank(rank))
        found.append(i)
        if have_scores:
            scores.append(src.scores[pos])
        e = expl[i].get(uid)
        if e is not None:
            base_rank = baseline_ranks.get(uid, e.baseline_rank) if baseline_ranks is not None else e.baseline_rank
            explanations.append(Explanation(e.unit_id, base_rank, rank, e.s_sim, e.s_c, e.s_hybrid, e.split,
                                            e.fallback_used, e.size_a))
    warnings = tuple(dict.fromkeys(w for r in lists for w in r.warnings))
    first = lists[0]
    return Fused(RankedList(first.method, tuple(hits), tuple(explanations), warnings, first.label, tuple(scores)),
                 tuple(found))
