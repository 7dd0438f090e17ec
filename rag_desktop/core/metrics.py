"""Rank metrics as plain reference functions (paper 000 §4.1, §4.5).

``rag-desktop eval`` computes nDCG@10, P@5 and MRR@10 with ir-measures (which
agrees with trec_eval); these functions are the readable definitions its tests
compare against. They follow trec_eval's conventions:

* a ranking is a sequence of distinct document ids, best first (to hand one to
  ir-measures, give position i the score ``len(ranking) - i`` so no ties occur:
  evaluators break score ties by their own rule, not by list order);
* qrels map document id → graded relevance; a document is relevant iff its grade
  ≥ 1 (trec_eval's default relevance level), unjudged documents count as 0;
* nDCG uses linear gains (gain = grade, trec_eval's ``ndcg_cut``), discount
  1/log2(rank + 1), and the ideal DCG over *all* judged documents of the query;
* P@k divides by k even when fewer than k documents were retrieved;
* RR@k (MRR@10 when averaged) is 1/rank of the first relevant document in the
  top k, else 0.

Ranks are 1-based everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

DocId = Hashable


def _check(ranking: Sequence[DocId]) -> None:
    seen: set[DocId] = set()
    for d in ranking:
        if d in seen:
            raise ValueError(f"ranking contains the document id {d!r} twice")
        seen.add(d)


def _is_rel(grade: float) -> bool:
    return grade >= 1


def rank_of(ranking: Sequence[DocId], doc_id: DocId) -> int | None:
    """1-based position of ``doc_id`` in ``ranking``, or None if absent (e.g. a target rank)."""
    for i, d in enumerate(ranking, start=1):
        if d == doc_id:
            return i
    return None


def first_relevant_rank(ranking: Sequence[DocId], qrels: Mapping[Any, float]) -> int | None:
    """1-based rank of the first relevant document, or None if none was retrieved."""
    _check(ranking)
    for i, d in enumerate(ranking, start=1):
        if _is_rel(qrels.get(d, 0)):
            return i
    return None


def mean_rank(ranks: Iterable[int | None], *, missing_rank: int | None = None) -> float:
    """Mean of ranks (mean target rank of Table 2, mean stuffing rank, ...).

    A ``None`` (document not retrieved) is replaced by ``missing_rank``; without one
    it is an error, because silently dropping misses would flatter a method.
    """
    vals: list[int] = []
    for r in ranks:
        if r is None:
            if missing_rank is None:
                raise ValueError("mean_rank: a document was not retrieved and no missing_rank was given")
            r = missing_rank
        if r < 1:
            raise ValueError(f"mean_rank: ranks are 1-based, got {r}")
        vals.append(r)
    if not vals:
        raise ValueError("mean_rank: no ranks")
    return sum(vals) / len(vals)


def dcg_at_k(gains: Sequence[float], k: int) -> float:
    """Σ_{i=1..k} gain_i / log2(i + 1), linear gains."""
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains[:k], start=1) if g > 0)


def ndcg_at_k(ranking: Sequence[DocId], qrels: Mapping[Any, float], k: int = 10) -> float:
    """nDCG@k (trec_eval ``ndcg_cut_k``); 0.0 when the query has no relevant document."""
    _check(ranking)
    if k < 1:
        raise ValueError(f"ndcg_at_k: k must be >= 1, got {k}")
    gains = [max(float(qrels.get(d, 0)), 0.0) for d in ranking]
    ideal = sorted((max(float(g), 0.0) for g in qrels.values()), reverse=True)
    idcg = dcg_at_k(ideal, k)
    if idcg == 0:
        return 0.0
    return dcg_at_k(gains, k) / idcg


def precision_at_k(ranking: Sequence[DocId], qrels: Mapping[Any, float], k: int = 5) -> float:
    """P@k (trec_eval ``P_k``): relevant documents in the top k, divided by k."""
    _check(ranking)
    if k < 1:
        raise ValueError(f"precision_at_k: k must be >= 1, got {k}")
    return sum(1 for d in ranking[:k] if _is_rel(qrels.get(d, 0))) / k


def reciprocal_rank_at_k(ranking: Sequence[DocId], qrels: Mapping[Any, float], k: int = 10) -> float:
    """RR@k: 1 / rank of the first relevant document within the top k, else 0 (MRR@k averaged)."""
    if k < 1:
        raise ValueError(f"reciprocal_rank_at_k: k must be >= 1, got {k}")
    r = first_relevant_rank(ranking, qrels)
    return 1.0 / r if r is not None and r <= k else 0.0


def mean_over_queries(
    rankings: Mapping[str, Sequence[DocId]],
    qrels: Mapping[str, Mapping[Any, float]],
    metric: str,
) -> float:
    """Mean of ``metric`` ("nDCG@10", "P@5", "MRR@10" or e.g. "nDCG@5") over the judged queries.

    Like trec_eval, only queries present in ``qrels`` count; a judged query with no
    ranking scores 0.
    """
    name, _, ks = metric.partition("@")
    try:
        k = int(ks)
    except ValueError:
        raise ValueError(f"metric {metric!r}: expected NAME@K, e.g. nDCG@10") from None
    fns = {"ndcg": ndcg_at_k, "p": precision_at_k, "mrr": reciprocal_rank_at_k, "rr": reciprocal_rank_at_k}
    fn = fns.get(name.lower())
    if fn is None:
        raise ValueError(f"metric {metric!r}: unknown name {name!r} (nDCG, P, MRR)")
    if not qrels:
        raise ValueError("mean_over_queries: no judged queries")
    return sum(fn(rankings.get(q, ()), qrels[q], k) for q in qrels) / len(qrels)
