"""Which ranking the causal column shows and which one the answers read, and why: the gate's verdict.

The setting (``retrieval.default_method``), the calibration gate's stored decision (app.auto_gate,
app.calibration) or a person's choice for one question decide it (docs/architecture.md, "The
question's path"). RagService.verdict and RagService.compare read it from here, and start the
background calibration that stores the gate's decision through :func:`start_calibration`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from rag_desktop.app import auto_gate
from rag_desktop.app.catalog import Catalog
from rag_desktop.core.errors import UserInputError
from rag_desktop.core.gate import EPS as GATE_EPS
from rag_desktop.core.settings import RetrievalSettings

log = logging.getLogger(__name__)


class CausalOffCode(StrEnum):
    """Why the answers read the baseline order instead of a re-ranking (the causal column still
    shows its re-ranked order: it is what a person came to inspect)."""

    CHOSEN = "chosen"  # the user chose it: retrieval.default_method = "baseline"
    GATE = "gate"  # the calibration gate decided that neither re-ranking helps this library


@dataclass(frozen=True)
class CausalOff:
    """A typed reason (the UI words it in its own language). The gate's numbers are those of the
    stored :class:`rag_desktop.core.gate.GateDecision` when ``code`` is GATE, else None."""

    code: CausalOffCode
    metric: str = ""
    n_probes: int | None = None
    delta_causal: float | None = None
    delta_hybrid: float | None = None
    reliability: float | None = None


def causal_off_reason(default_method: str, gate: dict[str, Any] | None) -> CausalOff | None:
    """The reason the answers read the baseline order, or None when they read a re-ranking."""
    if default_method == "baseline":
        return CausalOff(CausalOffCode.CHOSEN)
    if default_method != "gated":
        return None
    g = gate or {}
    if g.get("decision") in ("causal", "hybrid"):
        return None

    def num(key: str) -> float | None:
        v = g.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    n = g.get("n_probes")
    return CausalOff(CausalOffCode.GATE, str(g.get("metric", "")), n if isinstance(n, int) else None,
                     num("delta_causal"), num("delta_hybrid"), num("reliability"))


OVERRIDES = ("baseline", "causal", "hybrid")  # what a person may ask the causal column to show for one question


@dataclass(frozen=True)
class Verdict:
    """Which ranking the causal column shows (``shown``: causal or hybrid; baseline only when a
    person overrides it for one question), which one feeds the answers (``answer``), and why.
    The gate decides ``answer``, never whether the column can be inspected.

    ``reason``: ``"gate"`` (the stored calibration decided), ``"not_calibrated"`` (gated, no
    decision yet: the hybrid is shown), ``"calibrating"`` (same, a calibration is running),
    ``"setting"`` (retrieval.default_method names a ranking), ``"override"`` (this question).
    """

    shown: str
    reason: str
    gate: dict[str, Any] | None
    answer: str = ""

    @property
    def effect(self) -> str:
        """For a gate decision that shows the baseline: "hurts" when both re-rankings lost on the
        probes, "no_gain" when the better one changed nothing (Δ = 0: "would hurt" would overstate
        it); "helps" when a re-ranking is shown; "" for the other reasons."""
        if self.reason != "gate":
            return ""
        if self.answer != "baseline":
            return "helps"
        g = self.gate or {}
        deltas = [float(g[k]) for k in ("delta_causal", "delta_hybrid") if g.get(k) is not None]
        return "no_gain" if deltas and max(deltas) >= -GATE_EPS else "hurts"

    def label(self) -> str:
        g = self.gate or {}
        if self.reason == "gate":
            n, rel = int(g.get("n_probes", 0)), float(g.get("reliability", 0.0))
            und = auto_gate.undecided_probes(g)
            if und is not None:
                return (f"Answers read the baseline order: the automatic check could not decide (the local "
                        f"model could not tell the documents apart on {und[0]} of {und[1]} disputed probes)")
            if self.effect == "no_gain":
                return (f"Re-ranking did not help on this library ({n} probes, {rel:.0%} reliable): "
                        f"answers read the baseline order; {self.shown} shown for inspection")
            if self.answer == "baseline":
                return (f"Re-ranking would hurt on this library ({n} probes, {rel:.0%} reliable): "
                        f"answers read the baseline order; {self.shown} shown for inspection")
            return (f"Re-ranking helps on this library ({n} probes, {rel:.0%} reliable): "
                    f"{self.shown} shown and used for the answers")
        if self.reason in ("not_calibrated", "calibrating"):
            return ("Hybrid shown and used for the answers: not calibrated yet"
                    + (" (calibrating…)" if self.reason == "calibrating" else ""))
        if self.reason == "override":
            return f"{self.shown} chosen for this question"
        return f"{self.shown} shown, answers read the {self.answer} order (retrieval.default_method)"

    def to_json(self) -> dict[str, Any]:
        g = self.gate or {}
        return {
            "shown": self.shown,
            "answer": self.answer,
            "reason": self.reason,
            "decision": g.get("decision"),
            "reliability": g.get("reliability"),
            "n_probes": g.get("n_probes"),
            # (undecided, disputed) probes when the automatic judge could not tell: see undecided_probes
            "undecided": auto_gate.undecided_probes(g) if self.reason == "gate" else None,
            "labels": g.get("labels", "typed or wizard" if g else None),
            "calibrated_at": g.get("calibrated_at"),
            "delta_causal": g.get("delta_causal"),
            "delta_hybrid": g.get("delta_hybrid"),
            "effect": self.effect,
            "text": self.label(),
        }


def decide_verdict(catalog: Catalog, default_method: str, override: str | None = None) -> Verdict:
    """The verdict of the library whose catalog is ``catalog``: ``override`` for one question, else
    the setting, else the stored gate decision (hybrid while none is stored)."""
    gate = catalog.get_json("gate")
    m = default_method
    if override is not None:
        if override not in OVERRIDES:
            raise UserInputError(f"unknown ranking {override!r}; choose from {', '.join(OVERRIDES)}")
        return Verdict(override, "override", gate, override)
    if m != "gated":  # "baseline": the answers read it, the column still shows the hybrid
        return Verdict("hybrid" if m == "baseline" else m, "setting", gate, m)
    if not gate:
        running = auto_gate.progress(catalog)["status"] == "running"
        return Verdict("hybrid", "calibrating" if running else "not_calibrated", None, "hybrid")
    decision = gate.get("decision", "neither")
    return Verdict("causal" if decision == "causal" else "hybrid", "gate", gate,
                   {"causal": "causal", "hybrid": "hybrid"}.get(decision, "baseline"))


def answers_off(verdict: Verdict) -> CausalOff | None:
    """Why the answers read the baseline order under ``verdict``, or None when they read a re-ranking."""
    if verdict.answer != "baseline":
        return None
    return causal_off_reason("gated", verdict.gate) if verdict.reason == "gate" else CausalOff(CausalOffCode.CHOSEN)


def start_calibration(folder: Path, catalog: Catalog, retrieval: RetrievalSettings, force: bool = False) -> int | None:
    """Start the background calibration of the library in ``folder`` if it needs one (app.auto_gate);
    its pid or None. Never raises for a process that cannot start: an ingest must not fail for it."""
    if not force and (retrieval.default_method != "gated" or not retrieval.auto_calibrate):
        return None  # not asked for, or the answers do not follow the gate: no need to spend the CPU
    try:
        return auto_gate.start_background(folder, catalog, force=force)
    except OSError as exc:  # never let the calibration break an ingest
        log.warning("could not start the background calibration: %s", exc)
        return None
