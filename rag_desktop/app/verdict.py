"""Which ranking the causal column shows and which one the answers read, and why: the gate's verdict.

The setting (``retrieval.default_method``), the calibration gate's record (app.library_gate: the
library's own, or a person's from app.calibration) or a person's choice for one question decide it
(docs/architecture.md, "The calibration gate" and "The question's path"). RagService.verdict and
RagService.compare read it from here; the record comes from ``app.library_gate.LibraryGate.record``,
which passes only a record that still holds for the library.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rag_desktop.app.library_gate import by_person
from rag_desktop.app.self_gate import echo_count
from rag_desktop.core.errors import UserInputError
from rag_desktop.core.gate import EPS as GATE_EPS


class CausalOffCode(StrEnum):
    """Why the answers read the baseline order instead of a re-ranking (the causal column still
    shows its re-ranked order: it is what a person came to inspect)."""

    CHOSEN = "chosen"  # the user chose it: retrieval.default_method = "baseline"
    GATE = "gate"  # the calibration gate decided that neither re-ranking helps this library


@dataclass(frozen=True)
class CausalOff:
    """A typed reason (the UI words it in its own language). The gate's numbers are those of the
    stored gate record (app.library_gate) when ``code`` is GATE, else None; ``own_probes``: the
    library's own gate made its probes (else a person labelled them)."""

    code: CausalOffCode
    metric: str = ""
    n_probes: int | None = None
    delta_causal: float | None = None
    delta_hybrid: float | None = None
    reliability: float | None = None
    own_probes: bool = False
    echo_share: float | None = None  # the library's own gate: the share of documents that echo another


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
                     num("delta_causal"), num("delta_hybrid"), num("reliability"), bool(g) and not by_person(g),
                     num("echo_share"))


OVERRIDES = ("baseline", "causal", "hybrid")  # what a person may ask the causal column to show for one question


# The gate's evidence, as the stored record holds it (app.self_gate.GateRecord's fields).
EVIDENCE = ("metric", "n_probes", "mean_baseline", "mean_causal", "mean_hybrid", "delta_causal", "delta_hybrid",
            "reliability", "labels", "fingerprint", "seconds", "calibrated_at", "echo_share", "echo_threshold",
            "echoes")


@dataclass(frozen=True)
class Verdict:
    """Which ranking the causal column shows (``shown``: causal or hybrid; baseline only when a
    person overrides it for one question), which one feeds the answers (``answer``), and why.
    The gate decides ``answer``, never whether the column can be inspected.

    ``reason``: ``"gate"`` (the stored calibration decided), ``"not_calibrated"`` (gated, no record
    that holds for the library: the hybrid is shown and read), ``"setting"`` (retrieval.default_method
    names a ranking), ``"override"`` (this question). ``gate``: the record that holds, if any, also
    when it did not decide (its evidence is still shown).
    """

    shown: str
    reason: str
    gate: dict[str, Any] | None
    answer: str = ""

    @property
    def decision(self) -> str:
        """What decided the answers' ranking, in one word: the gate's decision (causal, hybrid, or
        neither: no re-ranking helps, the answers read the baseline) when it decided, else the
        ranking the answers read (baseline, causal or hybrid)."""
        return str((self.gate or {}).get("decision", "neither")) if self.reason == "gate" else self.answer

    @property
    def calibrated_by(self) -> str | None:
        """"person" (labelled probes: the wizard, typed probes), "library" (its own gate), None (no record)."""
        if not self.gate:
            return None
        return "person" if by_person(self.gate) else "library"

    @property
    def echo_count(self) -> int | None:
        """The library's own gate's evidence: how many documents echo another's key terms (app.self_gate)."""
        return echo_count(self.gate or {})

    @property
    def effect(self) -> str:
        """For a gate decision: from the library's own gate, "echoes" (enough documents echo another:
        a re-ranking feeds the answers) or "no_echoes"; from labelled probes, "helps" when a
        re-ranking feeds the answers, "hurts" when both lost on the probes, "no_gain" when the better
        one changed nothing (Δ = 0: "would hurt" would overstate it); "" for the other reasons."""
        if self.reason != "gate":
            return ""
        if self.echo_count is not None and self.calibrated_by == "library":
            return "no_echoes" if self.answer == "baseline" else "echoes"
        if self.answer != "baseline":
            return "helps"
        g = self.gate or {}
        deltas = [float(g[k]) for k in ("delta_causal", "delta_hybrid") if g.get(k) is not None]
        return "no_gain" if deltas and max(deltas) >= -GATE_EPS else "hurts"

    def label(self) -> str:
        g = self.gate or {}
        if self.reason == "gate":
            n, rel = int(g.get("n_probes", 0)), float(g.get("reliability", 0.0))
            if self.effect in ("echoes", "no_echoes"):
                k = self.echo_count
                if self.effect == "echoes":
                    return (f"{self.shown} shown and used for the answers: {k} of {n} documents echo another's "
                            f"key terms ({rel:.0%} reliable)")
                return (f"Answers read the baseline order, {self.shown} shown: {k} of {n} documents echo "
                        f"another's key terms ({rel:.0%} reliable)")
            probes = f"{n} labelled questions" if self.calibrated_by == "person" else f"{n} probes from its documents"
            if self.effect == "no_gain":
                return (f"Re-ranking did not help on this library ({probes}, {rel:.0%} reliable): "
                        f"answers read the baseline order; {self.shown} shown for inspection")
            if self.answer == "baseline":
                return (f"Re-ranking would hurt on this library ({probes}, {rel:.0%} reliable): "
                        f"answers read the baseline order; {self.shown} shown for inspection")
            return (f"Re-ranking helps on this library ({probes}, {rel:.0%} reliable): "
                    f"{self.shown} shown and used for the answers")
        if self.reason == "not_calibrated":
            return "Hybrid shown and used for the answers: not calibrated yet"
        if self.reason == "override":
            return f"{self.shown} chosen for this question"
        return f"{self.shown} shown, answers read the {self.answer} order (retrieval.default_method)"

    def to_json(self) -> dict[str, Any]:
        """``decision`` (hybrid, causal, baseline or neither) and the gate's evidence, flat: its
        decision (``gate_decision``), who labelled its probes (``calibrated_by``), and the record's
        numbers (None without a record)."""
        g = self.gate or {}
        return {
            "shown": self.shown,
            "answer": self.answer,
            "reason": self.reason,
            "decision": self.decision,
            "gate_decision": g.get("decision"),
            "calibrated_by": self.calibrated_by,
            **{k: g.get(k) for k in EVIDENCE},
            "echo_count": self.echo_count,
            "effect": self.effect,
            "text": self.label(),
        }


def decide_verdict(gate: dict[str, Any] | None, default_method: str, override: str | None = None) -> Verdict:
    """The verdict under the gate record ``gate`` (one that holds for the library, or None):
    ``override`` for one question, else the setting, else the gate's decision (hybrid without one)."""
    m = default_method
    if override is not None:
        if override not in OVERRIDES:
            raise UserInputError(f"unknown ranking {override!r}; choose from {', '.join(OVERRIDES)}")
        return Verdict(override, "override", gate, override)
    if m != "gated":  # "baseline": the answers read it, the column still shows the hybrid
        return Verdict("hybrid" if m == "baseline" else m, "setting", gate, m)
    if not gate:
        return Verdict("hybrid", "not_calibrated", None, "hybrid")
    decision = gate.get("decision", "neither")
    return Verdict("causal" if decision == "causal" else "hybrid", "gate", gate,
                   {"causal": "causal", "hybrid": "hybrid"}.get(decision, "baseline"))


def answers_off(verdict: Verdict) -> CausalOff | None:
    """Why the answers read the baseline order under ``verdict``, or None when they read a re-ranking."""
    if verdict.answer != "baseline":
        return None
    return causal_off_reason("gated", verdict.gate) if verdict.reason == "gate" else CausalOff(CausalOffCode.CHOSEN)
