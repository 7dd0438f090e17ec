"""Corpus-level calibration gate (paper 000 §4.6).

On n labelled probe queries, Δ = mean(re-ranked − baseline) of a per-query
metric; the re-ranker is enabled iff it improves on the baseline (Δ > 0 for a
higher-is-better metric such as nDCG@10, Δ < 0 for a rank). The decision's
reliability is the fraction of 2,000 seeded bootstrap resamples of the probes
whose decision equals the full-sample one (Table 4).

Decision rule with two re-rankers (the paper gates each separately; the app must
pick one), in "gain" terms (gain = Δ, or −Δ for lower-is-better metrics):

* neither gain > 0 → ``"neither"`` (a tie with the baseline keeps the baseline:
  the paper enables "iff Δ > 0", and re-ranking with no measured benefit only
  adds risk);
* otherwise the method with the larger gain; equal gains → ``"hybrid"``, the
  configuration the paper recommends in practice (§4.4: it never ranked the target
  below the baseline).

Gains within ``EPS`` of each other or of zero count as equal, so floating-point
noise in a mean cannot flip a decision. Resamples are paired: one draw of probe
indices is applied to all three methods.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Decision = Literal["causal", "hybrid", "neither"]
DECISIONS: tuple[Decision, ...] = ("causal", "hybrid", "neither")
N_DRAWS = 2_000  # paper §4.6
EPS = 1e-12
# Below this many probes a bootstrap mostly resamples the same few values (3 probes give 10
# distinct resamples), so its reliability says little whatever its number: the CLI and the
# wizard say so instead of calling the decision reliable. Our choice; §4.6 gives no minimum.
MIN_PROBES_FOR_RELIABILITY = 10


@dataclass(frozen=True)
class GateDecision:
    """The stored outcome of a calibration (``to_json`` / ``from_json`` round-trip)."""

    decision: Decision
    metric: str
    higher_is_better: bool
    n_probes: int
    mean_baseline: float
    mean_causal: float
    mean_hybrid: float
    delta_causal: float  # mean(causal − baseline), raw (not sign-adjusted)
    delta_hybrid: float
    reliability: float  # share of resamples whose 3-way decision equals `decision`
    reliability_causal: float  # same for the binary "enable causal" decision (Table 4, 1st value)
    reliability_hybrid: float  # same for "enable hybrid" (Table 4, 2nd value)
    n_draws: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GateDecision:
        """Inverse of :meth:`to_dict`; a missing or ill-typed key raises ValueError naming it."""
        if not isinstance(data, Mapping):
            raise ValueError("GateDecision: expected a mapping")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                raise ValueError(f"GateDecision: missing key {f.name!r}")
            v = data[f.name]
            if f.name == "decision":
                if v not in DECISIONS:
                    raise ValueError(f"GateDecision key 'decision': expected one of {DECISIONS}, got {v!r}")
            elif f.name == "metric":
                if not isinstance(v, str):
                    raise ValueError(f"GateDecision key 'metric': expected a string, got {v!r}")
            elif f.name == "higher_is_better":
                if not isinstance(v, bool):
                    raise ValueError(f"GateDecision key 'higher_is_better': expected a bool, got {v!r}")
            elif f.name in ("n_probes", "n_draws", "seed"):
                if not isinstance(v, int) or isinstance(v, bool):
                    raise ValueError(f"GateDecision key {f.name!r}: expected an int, got {v!r}")
            else:
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                    raise ValueError(f"GateDecision key {f.name!r}: expected a finite number, got {v!r}")
                v = float(v)
            values[f.name] = v
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> GateDecision:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"GateDecision: not valid JSON ({exc})") from exc
        return cls.from_dict(data)


def decide(gain_causal: float, gain_hybrid: float) -> Decision:
    """The decision rule of the module docstring, on sign-adjusted gains."""
    c_on = gain_causal > EPS
    h_on = gain_hybrid > EPS
    if not (c_on or h_on):
        return "neither"
    if c_on and h_on:
        return "causal" if gain_causal > gain_hybrid + EPS else "hybrid"
    return "causal" if c_on else "hybrid"


def _decide_vec(gc: npt.NDArray[np.float64], gh: npt.NDArray[np.float64]) -> npt.NDArray[np.int8]:
    # Same rule as `decide`, over arrays; codes index DECISIONS.
    c_on = gc > EPS
    h_on = gh > EPS
    out = np.full(gc.shape, 2, dtype=np.int8)  # neither
    out[h_on] = 1
    out[c_on & ~h_on] = 0
    out[c_on & h_on & (gc > gh + EPS)] = 0
    return out


def _as_scores(name: str, values: Sequence[float] | npt.ArrayLike) -> npt.NDArray[np.float64]:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"calibrate: {name} must be a 1-D sequence of per-probe values")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"calibrate: {name} contains NaN or infinity")
    return a


def calibrate(
    baseline: Sequence[float] | npt.ArrayLike,
    causal: Sequence[float] | npt.ArrayLike,
    hybrid: Sequence[float] | npt.ArrayLike,
    *,
    metric: str = "nDCG@10",
    higher_is_better: bool = True,
    n_draws: int = N_DRAWS,
    seed: int = 0,
) -> GateDecision:
    """Gate decision and bootstrap reliability from per-probe metric values.

    ``baseline[i]``, ``causal[i]``, ``hybrid[i]`` are the metric on probe i under
    each ordering (same probes, same order).
    """
    b = _as_scores("baseline", baseline)
    c = _as_scores("causal", causal)
    h = _as_scores("hybrid", hybrid)
    n = b.shape[0]
    if n == 0:
        raise ValueError("calibrate: no probes (baseline is empty)")
    if c.shape[0] != n or h.shape[0] != n:
        raise ValueError(
            f"calibrate: per-probe lengths differ (baseline {n}, causal {c.shape[0]}, hybrid {h.shape[0]})"
        )
    if n_draws < 1:
        raise ValueError(f"calibrate: n_draws must be >= 1, got {n_draws}")
    sign = 1.0 if higher_is_better else -1.0
    dc = c - b
    dh = h - b
    delta_c = float(dc.mean())
    delta_h = float(dh.mean())
    decision = decide(sign * delta_c, sign * delta_h)

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_draws, n))
    gc = sign * dc[idx].mean(axis=1)
    gh = sign * dh[idx].mean(axis=1)
    codes = _decide_vec(gc, gh)
    reliability = float(np.mean(codes == DECISIONS.index(decision)))
    rel_c = float(np.mean((gc > EPS) == (sign * delta_c > EPS)))
    rel_h = float(np.mean((gh > EPS) == (sign * delta_h > EPS)))
    return GateDecision(
        decision=decision,
        metric=metric,
        higher_is_better=higher_is_better,
        n_probes=n,
        mean_baseline=float(b.mean()),
        mean_causal=float(c.mean()),
        mean_hybrid=float(h.mean()),
        delta_causal=delta_c,
        delta_hybrid=delta_h,
        reliability=reliability,
        reliability_causal=rel_c,
        reliability_hybrid=rel_h,
        n_draws=n_draws,
        seed=seed,
    )
