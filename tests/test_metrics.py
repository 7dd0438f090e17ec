"""Reference rank metrics: hand-computed cases and agreement with ir-measures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_desktop.core import metrics as M


def test_rank_of_and_first_relevant() -> None:
    ranking = ["a", "b", "c", "d"]
    assert M.rank_of(ranking, "c") == 3
    assert M.rank_of(ranking, "z") is None
    assert M.first_relevant_rank(ranking, {"c": 1, "d": 2, "a": 0}) == 3
    assert M.first_relevant_rank(ranking, {"z": 1}) is None


def test_mean_rank() -> None:
    # Paper Table 2: the baseline's per-theme target ranks average 2.88 (23 / 8).
    assert M.mean_rank([5, 2, 3, 3, 4, 2, 2, 2]) == pytest.approx(2.875)
    assert M.mean_rank([1, None], missing_rank=21) == 11
    with pytest.raises(ValueError, match="not retrieved"):
        M.mean_rank([1, None])
    with pytest.raises(ValueError, match="1-based"):
        M.mean_rank([0])
    with pytest.raises(ValueError, match="no ranks"):
        M.mean_rank([])


def test_ndcg_hand_computed() -> None:
    qrels = {"d1": 2, "d2": 1, "d9": 1}
    ranking = ["d2", "d5", "d1"]
    dcg = 1 / math.log2(2) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert M.ndcg_at_k(ranking, qrels, 10) == pytest.approx(dcg / idcg)
    assert M.ndcg_at_k(["d1", "d2", "d9"], qrels, 10) == pytest.approx(1.0)
    assert M.ndcg_at_k(["x"], {"d1": 0}, 10) == 0.0
    # Cut-off: a relevant document at rank 3 does not count at k = 2.
    assert M.ndcg_at_k(["x", "y", "d1"], {"d1": 1}, 2) == 0.0


def test_precision_divides_by_k() -> None:
    assert M.precision_at_k(["a", "b"], {"a": 1, "b": 1}, 5) == pytest.approx(0.4)
    assert M.precision_at_k(["a", "b", "c", "d", "e", "f"], {"f": 1, "a": 2}, 5) == pytest.approx(0.2)


def test_reciprocal_rank_cutoff() -> None:
    ranking = [f"d{i}" for i in range(12)]
    assert M.reciprocal_rank_at_k(ranking, {"d2": 1}, 10) == pytest.approx(1 / 3)
    assert M.reciprocal_rank_at_k(ranking, {"d10": 1}, 10) == 0.0


def test_duplicates_rejected() -> None:
    with pytest.raises(ValueError, match="twice"):
        M.ndcg_at_k(["a", "a"], {"a": 1})


def test_mean_over_queries_counts_judged_queries_only() -> None:
    rankings = {"q1": ["d1"], "q4": ["d3"]}
    qrels = {"q1": {"d1": 2}, "q2": {"d3": 1}, "q3": {"d3": 0}}
    assert M.mean_over_queries(rankings, qrels, "nDCG@10") == pytest.approx(1 / 3)
    assert M.mean_over_queries(rankings, qrels, "P@5") == pytest.approx(0.2 / 3)
    assert M.mean_over_queries(rankings, qrels, "MRR@10") == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="unknown name"):
        M.mean_over_queries(rankings, qrels, "MAP@10")
    with pytest.raises(ValueError, match="NAME@K"):
        M.mean_over_queries(rankings, qrels, "nDCG")


DOCS = [f"d{i}" for i in range(15)]


@st.composite
def runs(draw):
    n_q = draw(st.integers(1, 4))
    rankings, qrels = {}, {}
    for qi in range(n_q):
        q = f"q{qi}"
        rankings[q] = draw(st.lists(st.sampled_from(DOCS), unique=True, max_size=14))
        judged = draw(st.lists(st.sampled_from(DOCS), unique=True, min_size=1, max_size=6))
        qrels[q] = {d: draw(st.integers(0, 3)) for d in judged}
    return rankings, qrels


@settings(max_examples=60, deadline=None)
@given(runs())
def test_agrees_with_ir_measures(data) -> None:
    ir = pytest.importorskip("ir_measures")
    rankings, qrels = data
    run = [ir.ScoredDoc(q, d, float(len(r) - i)) for q, r in rankings.items() for i, d in enumerate(r)]
    qrel_list = [ir.Qrel(q, d, g) for q, js in qrels.items() for d, g in js.items()]
    measures = {"nDCG@10": ir.nDCG @ 10, "P@5": ir.P @ 5, "MRR@10": ir.RR @ 10}
    per_query = {
        (m.query_id, str(m.measure)): m.value for m in ir.iter_calc(list(measures.values()), qrel_list, run)
    }
    for name, measure in measures.items():
        for q in qrels:
            mine = {"nDCG@10": M.ndcg_at_k, "P@5": M.precision_at_k, "MRR@10": M.reciprocal_rank_at_k}[name](
                rankings[q], qrels[q], int(name.split("@")[1])
            )
            theirs = per_query[(q, str(measure))]
            assert mine == pytest.approx(theirs, abs=1e-9), (name, q)
