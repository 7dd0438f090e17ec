"""Corpus-level calibration gate (paper 000 §4.6)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_desktop.core.gate import EPS, GateDecision, calibrate, decide

# Paper Table 2, per-theme target ranks (lower is better): baseline, s_c semantic, hybrid.
BASELINE = [5, 2, 3, 3, 4, 2, 2, 2]
CAUSAL = [2, 1, 2, 1, 1, 1, 1, 1]
HYBRID = [2, 1, 2, 1, 2, 1, 1, 1]


def ref_decide(gc: float, gh: float) -> str:
    """The documented rule, spelled out."""
    if gc <= EPS and gh <= EPS:
        return "neither"
    if gc > EPS and gh <= EPS:
        return "causal"
    if gh > EPS and gc <= EPS:
        return "hybrid"
    return "causal" if gc - gh > EPS else "hybrid"


def ref_calibrate(b, c, h, higher, n_draws, seed):
    """Bootstrap written as loops over the same seeded index draws."""
    sign = 1 if higher else -1
    n = len(b)
    full = ref_decide(
        sign * sum(ci - bi for ci, bi in zip(c, b, strict=True)) / n,
        sign * sum(hi - bi for hi, bi in zip(h, b, strict=True)) / n,
    )
    idx = np.random.default_rng(seed).integers(0, n, size=(n_draws, n))
    same = 0
    for row in idx:
        gc = sign * sum(c[i] - b[i] for i in row) / n
        gh = sign * sum(h[i] - b[i] for i in row) / n
        same += ref_decide(gc, gh) == full
    return full, same / n_draws


def test_paper_table2_ranks_enable_causal() -> None:
    g = calibrate(BASELINE, CAUSAL, HYBRID, metric="target rank", higher_is_better=False)
    assert g.decision == "causal"
    assert g.delta_causal == pytest.approx(1.25 - 2.875)
    assert g.delta_hybrid == pytest.approx(1.375 - 2.875)
    # Every theme improves under both: the binary enable decisions never flip (Table 4: 100 %).
    assert g.reliability_causal == 1.0 and g.reliability_hybrid == 1.0
    # Causal beats hybrid only through theme T5; resamples without T5 tie -> hybrid.
    assert g.reliability == pytest.approx(1 - (7 / 8) ** 8, abs=0.03)
    assert g.n_probes == 8 and g.n_draws == 2000


def test_factoid_regime_keeps_reranker_off() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.9, 30)
    causal = base - rng.uniform(0.0, 0.2, 30)
    hybrid = base - rng.uniform(-0.02, 0.08, 30)
    g = calibrate(base, causal, hybrid)
    assert g.decision == "neither"
    assert g.reliability >= 0.95


@pytest.mark.parametrize(
    ("gc", "gh", "expected"),
    [
        (-0.1, -0.2, "neither"),
        (0.0, 0.0, "neither"),  # a tie with the baseline keeps the baseline
        (0.2, -0.1, "causal"),
        (-0.1, 0.2, "hybrid"),
        (0.3, 0.2, "causal"),
        (0.2, 0.3, "hybrid"),
        (0.2, 0.2, "hybrid"),  # equal gains: the paper's recommended configuration
        (0.2, 0.2 + EPS / 2, "hybrid"),
        (EPS / 2, -1.0, "neither"),  # floating-point noise is not a gain
    ],
)
def test_decide(gc: float, gh: float, expected: str) -> None:
    assert decide(gc, gh) == expected == ref_decide(gc, gh)


def test_lower_is_better_flips_the_sign() -> None:
    up = calibrate([1, 1], [2, 2], [0, 0], higher_is_better=True)
    down = calibrate([1, 1], [2, 2], [0, 0], higher_is_better=False)
    assert up.decision == "causal" and down.decision == "hybrid"


values = st.floats(0, 1, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12).flatmap(lambda n: st.tuples(*[st.lists(values, min_size=n, max_size=n)] * 3)),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_bootstrap_agrees_with_reference(data, higher: bool, seed: int) -> None:
    b, c, h = data
    g = calibrate(b, c, h, higher_is_better=higher, n_draws=300, seed=seed)
    full, rel = ref_calibrate(b, c, h, higher, 300, seed)
    assert g.decision == full
    assert g.reliability == pytest.approx(rel, abs=1e-12)


def test_seeded_and_deterministic() -> None:
    rng = np.random.default_rng(1)
    b, c, h = rng.uniform(size=(3, 10))
    assert calibrate(b, c, h, seed=7) == calibrate(b, c, h, seed=7)


def test_json_round_trip() -> None:
    g = calibrate(BASELINE, CAUSAL, HYBRID, metric="target rank", higher_is_better=False)
    text = g.to_json()
    assert json.loads(text)["decision"] == "causal"
    assert GateDecision.from_json(text) == g
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.decision = "neither"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"decision": "maybe"}, "decision"),
        ({"reliability": "high"}, "reliability"),
        ({"n_probes": 3.5}, "n_probes"),
        ({"higher_is_better": 1}, "higher_is_better"),
        ({"delta_causal": float("nan")}, "delta_causal"),
    ],
)
def test_from_dict_rejects_bad_values(change: dict, key: str) -> None:
    d = calibrate([0.5], [0.6], [0.4]).to_dict()
    d.update(change)
    with pytest.raises(ValueError, match=key):
        GateDecision.from_dict(d)


def test_from_dict_missing_key_and_bad_json() -> None:
    d = calibrate([0.5], [0.6], [0.4]).to_dict()
    del d["seed"]
    with pytest.raises(ValueError, match="missing key 'seed'"):
        GateDecision.from_dict(d)
    with pytest.raises(ValueError, match="not valid JSON"):
        GateDecision.from_json("{")


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="no probes"):
        calibrate([], [], [])
    with pytest.raises(ValueError, match="lengths differ"):
        calibrate([1, 2], [1], [1, 2])
    with pytest.raises(ValueError, match="causal contains NaN"):
        calibrate([1.0], [float("nan")], [1.0])
    with pytest.raises(ValueError, match="n_draws"):
        calibrate([1.0], [1.0], [1.0], n_draws=0)


def test_single_probe_is_fully_reliable() -> None:
    g = calibrate([0.5], [0.7], [0.6])
    assert g.decision == "causal" and g.reliability == 1.0


def test_the_labelled_gate_can_count_only_the_answer_bearing_documents() -> None:
    """eval's gate over graded qrels: every grade > 0 relevant (the default), or only a query's top grade."""
    from rag_desktop.app.evaluation import BeirData, gate_on_queries

    # q1: the hybrid puts a near-relevant page (grade 1) first and the answer (grade 2) 3rd, the
    # baseline the answer 1st; q2: the hybrid lifts the answer from 2nd to 1st.
    qrels: dict[str, dict[str, float]] = {"q1": {"ans1": 2, "near1": 1}, "q2": {"ans2": 2}}
    data = BeirData(corpus={}, queries={"q1": "", "q2": ""}, qrels=qrels, stuffing={})
    runs = {
        "baseline": {"q1": ["ans1", "x", "near1"], "q2": ["x", "ans2"]},
        "causal": {"q1": ["x", "y", "z"], "q2": ["x", "y"]},
        "hybrid": {"q1": ["near1", "x", "ans1"], "q2": ["ans2", "x"]},
    }
    any_grade = gate_on_queries(runs, data)
    top_only = gate_on_queries(runs, data, top_grade_only=True)
    assert any_grade is not None and top_only is not None
    # any grade: q1 is a tie (1 vs 1), q2 +0.5 → Δ hybrid +0.25; top grade: q1 1/3 − 1, q2 +0.5 → −1/12
    assert any_grade.delta_hybrid == pytest.approx(0.25) and any_grade.decision == "hybrid"
    assert top_only.delta_hybrid == pytest.approx((1 / 3 - 1 + 0.5) / 2) and top_only.decision == "neither"
