"""The causal column's heading states the verdict, in both languages."""

from __future__ import annotations

import pytest

from rag_desktop.app.service import Verdict
from rag_desktop.ui import i18n
from rag_desktop.ui.columns import ResultColumn, heading_text, verdict_text


def _gate(decision: str, n: int = 30, rel: float = 0.97, dc: float = -0.2, dh: float = -0.05) -> dict[str, object]:
    if decision != "neither":
        dh = abs(dh)
    return {"decision": decision, "n_probes": n, "reliability": rel, "labels": "llm-judged pool",
            "delta_causal": dc, "delta_hybrid": dh}


def _neither(gate: dict[str, object]) -> Verdict:
    """The gate said neither re-ranking helps: the column shows the hybrid, the answers the baseline."""
    return Verdict("hybrid", "gate", gate, "baseline")


def test_verdict_text_in_words_and_numbers() -> None:
    with i18n.using("en"):
        helps = verdict_text(Verdict("hybrid", "gate", _gate("hybrid"), "hybrid").to_json())
        assert helps == ("Re-ranking helps on this library (30 probes, 97 % reliable): hybrid rerank shown and used "
                         "for the answers")
        hurts = verdict_text(_neither(_gate("neither", 16, 1.0)).to_json())
        assert hurts.startswith("Re-ranking would hurt on this library (16 probes, 100 % reliable)")
        # the column still shows its own re-ranking: the gate decides what the answers read
        assert "answers read the baseline order; hybrid rerank shown for inspection" in hurts
        few = verdict_text(Verdict("causal", "gate", _gate("causal", 4, 1.0), "causal").to_json())
        assert few.endswith("too few probes to call it reliable")
        not_yet = verdict_text(Verdict("hybrid", "not_calibrated", None, "hybrid").to_json())
        assert not_yet == "hybrid rerank shown and used for the answers: not calibrated yet"
        assert "calibrating" in verdict_text(Verdict("hybrid", "calibrating", None, "hybrid").to_json())
        assert verdict_text(Verdict("causal", "override", None, "causal").to_json()) == (
            "causal rerank chosen for this question")
        chosen = verdict_text(Verdict("hybrid", "setting", None, "baseline").to_json())
        assert chosen == "hybrid rerank shown, answers read the baseline order (Settings → Retrieval)"
        assert verdict_text(None) == ""
        # ties from a judge that could not tell the documents apart are not "100 % reliable"
        ties = _gate("neither", 6, 1.0) | {"n_agreed": 1, "n_undecided": 5}
        undecided = verdict_text(_neither(ties).to_json())
        assert undecided == ("hybrid rerank shown: the automatic check could not decide (the local model could not "
                             "tell the documents apart on 5 of 5 disputed probes)")
        assert _neither(ties).label().startswith("Answers read the baseline order: the automatic check")
        # a judge that decided most disputed probes keeps the plain verdict
        decided = _gate("neither", 6, 1.0) | {"n_agreed": 1, "n_undecided": 2}
        assert verdict_text(_neither(decided).to_json()).startswith("Re-ranking would hurt")
        # "would hurt" only when both re-rankings lost on the probes; one that changed nothing did not help
        flat = _gate("neither", 11, 0.52, dc=-0.22, dh=0.0)
        assert _neither(flat).effect == "no_gain"
        assert verdict_text(_neither(flat).to_json()).startswith(
            "Re-ranking did not help on this library (11 probes, 52 % reliable): answers read the baseline order")
        assert _neither(flat).label().startswith("Re-ranking did not help on this library")
        assert _neither(_gate("neither")).effect == "hurts"
        # a record without deltas (an older library) reads as before
        old = {"decision": "neither", "n_probes": 12, "reliability": 1.0}
        assert _neither(old).effect == "hurts"
    with i18n.using("zh"):
        assert verdict_text(_neither(flat).to_json()).startswith("重排序没有改善")
        assert "自动校准无法判断" in verdict_text(_neither(ties).to_json())
        assert verdict_text(_neither(_gate("neither")).to_json()).startswith("重排序会降低")
        assert "尚未校准" in verdict_text(Verdict("hybrid", "not_calibrated", None, "hybrid").to_json())


@pytest.mark.parametrize("key", [f"verdict.{r}" for r in ("helps", "hurts", "no_gain", "few", "not_calibrated",
                                                           "calibrating", "override", "setting", "undecided")]
                         + [f"verdict.name.{s}" for s in ("baseline", "causal", "hybrid")]
                         + [f"lib.calib.{s}" for s in ("running", "interrupted", "cancelled", "failed", "done")]
                         + [f"override.{s}" for s in ("auto", "baseline", "causal", "hybrid", "tip")])
def test_keys_built_at_run_time_exist(key: str) -> None:
    assert i18n.has_tr(key)


def test_column_heading_follows_the_verdict_and_the_language(qtbot) -> None:  # type: ignore[no-untyped-def]
    col = ResultColumn("causal", "col.causal")
    qtbot.addWidget(col)
    v = _neither(_gate("neither")).to_json()
    with i18n.using("en"):
        col.set_verdict(v)
        assert col.header.text() == heading_text("col.causal", v)
        assert "Re-ranking would hurt" in col.header.text()
    i18n.set_language("zh")
    try:
        col.retranslate()
        assert "重排序会降低" in col.header.text()
    finally:
        i18n.set_language("en")


def test_first_rows_line_up_when_one_heading_has_a_verdict(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The causal column's verdict line and longer subtitle pushed its rows below the
    baseline's; align_headings gives every heading and subtitle the tallest one's height."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QHBoxLayout, QWidget
    from test_gui_support import make_lists

    from rag_desktop.ui.columns import make_row

    host = QWidget()
    qtbot.addWidget(host)
    lay = QHBoxLayout(host)
    cols = [ResultColumn("baseline", "col.baseline", show_change=False), ResultColumn("causal", "col.causal"),
            ResultColumn("cfrag", "col.cfrag", collapsible=True)]
    for c in cols:
        c.peers = tuple(cols)
        lay.addWidget(c)
    host.resize(1200, 600)
    host.show()
    base, causal = make_lists()
    with i18n.using("en"):
        cols[0].set_rows([make_row(h, None, []) for h in base.hits], "Dense similarity s_sim")
        cols[1].set_verdict(Verdict("hybrid", "calibrating", None).to_json())
        cols[1].set_rows([make_row(h, None, []) for h in causal.hits],
                         "hybrid (s_sim and s_c) · τ = 0.886, calibrated at ingest: 97th percentile of term-pair "
                         "cosines · A share 0.15 · empty B: 0 — long enough to wrap in a narrow column")
        cols[2].set_placeholder("col.placeholder")
    qtbot.waitUntil(lambda: cols[0].view.isVisible() and cols[1].view.isVisible())
    qtbot.wait(50)  # let the layouts settle

    def top(w: QWidget) -> int:
        return w.mapTo(host, QPoint(0, 0)).y()

    assert top(cols[0].view) == top(cols[1].view)
    assert top(cols[2].placeholder) == top(cols[0].view)  # the folded column's message starts there too
    host.resize(700, 600)  # narrower: the causal subtitle wraps onto more lines
    qtbot.wait(50)
    assert top(cols[0].view) == top(cols[1].view)
