"""The causal column's heading states the verdict, and the Why card its evidence, in both languages."""

from __future__ import annotations

import pytest

from rag_desktop.app.self_gate import ECHO_METRIC, ECHO_SHARE, SELF_LABELS
from rag_desktop.app.service import Verdict
from rag_desktop.ui import i18n
from rag_desktop.ui.columns import ResultColumn, heading_text, verdict_text
from rag_desktop.ui.present import gate_evidence_text


def _gate(decision: str, n: int = 30, rel: float = 0.97, dc: float = -0.2, dh: float = -0.05,
          labels: str = SELF_LABELS) -> dict[str, object]:
    """A stored record: the library's own (its echo share, app.self_gate) or a person's labelled probes."""
    if labels == SELF_LABELS:
        return {"decision": decision, "metric": ECHO_METRIC, "n_probes": n, "reliability": rel, "labels": labels,
                "mean_baseline": 0.0, "mean_causal": 0.0, "mean_hybrid": 0.0, "delta_causal": 0.0,
                "delta_hybrid": 0.0, "fingerprint": "f" * 64, "seconds": 0.02,
                "calibrated_at": "2026-03-01T10:00:00+00:00", "echo_share": 0.2 if decision != "neither" else 0.0,
                "echo_threshold": ECHO_SHARE, "echoes": [[1, 2, 0.5]] if decision != "neither" else []}
    if decision != "neither":
        dh = abs(dh)
    return {"decision": decision, "metric": "MRR@10", "n_probes": n, "reliability": rel, "labels": labels,
            "mean_baseline": 0.5, "mean_causal": 0.5 + dc, "mean_hybrid": 0.5 + dh, "delta_causal": dc,
            "delta_hybrid": dh, "fingerprint": "f" * 64, "seconds": 2.5, "calibrated_at": "2026-03-01T10:00:00+00:00"}


def _neither(gate: dict[str, object]) -> Verdict:
    """The gate said neither re-ranking helps: the column shows the hybrid, the answers the baseline."""
    return Verdict("hybrid", "gate", gate, "baseline")


def test_verdict_text_in_words_and_numbers() -> None:
    with i18n.using("en"):
        helps = verdict_text(Verdict("hybrid", "gate", _gate("hybrid"), "hybrid").to_json())
        assert helps == ("hybrid rerank shown and used for the answers: 6 of 30 documents echo another's key terms "
                         "(97 % reliable)")
        none = verdict_text(_neither(_gate("neither", 16, 1.0)).to_json())
        # the column still shows its own re-ranking: the gate decides what the answers read
        assert none == ("Answers read the baseline order, hybrid rerank shown: 0 of 16 documents echo another's key "
                        "terms (100 % reliable)")
        hurts = verdict_text(_neither(_gate("neither", 16, 1.0, labels="typed")).to_json())
        assert hurts.startswith("Re-ranking would hurt on this library (16 questions you labelled, 100 % reliable)")
        few = verdict_text(Verdict("causal", "gate", _gate("causal", 4, 1.0, labels="typed"), "causal").to_json())
        assert few.endswith("too few probes to call it reliable")
        mine = verdict_text(Verdict("causal", "gate", _gate("causal", 12, 0.9, labels="typed"), "causal").to_json())
        assert mine.startswith("Re-ranking helps on this library (12 questions you labelled, 90 % reliable)")
        not_yet = verdict_text(Verdict("hybrid", "not_calibrated", None, "hybrid").to_json())
        assert not_yet == "hybrid rerank shown and used for the answers: not calibrated yet"
        assert verdict_text(Verdict("causal", "override", None, "causal").to_json()) == (
            "causal rerank chosen for this question")
        chosen = verdict_text(Verdict("hybrid", "setting", None, "baseline").to_json())
        assert chosen == "hybrid rerank shown, answers read the baseline order (Settings → Retrieval)"
        assert verdict_text(None) == ""
        # "would hurt" only when both re-rankings lost on the probes; one that changed nothing did not help
        flat = _gate("neither", 11, 0.52, dc=-0.22, dh=0.0, labels="typed")
        assert _neither(flat).effect == "no_gain"
        assert verdict_text(_neither(flat).to_json()).startswith(
            "Re-ranking did not help on this library (11 questions you labelled, 52 % reliable): answers "
            "read the baseline order")
        assert _neither(flat).label().startswith("Re-ranking did not help on this library")
        assert _neither(_gate("neither", labels="typed")).effect == "hurts"
        assert _neither(_gate("neither")).effect == "no_echoes"
        assert _neither(_gate("neither")).label().startswith("Answers read the baseline order, hybrid shown: 0 of 30")
        # a record without deltas (an older library) reads as before
        old = {"decision": "neither", "n_probes": 12, "reliability": 1.0}
        assert _neither(old).effect == "hurts"
    with i18n.using("zh"):
        assert verdict_text(_neither(flat).to_json()).startswith("重排序没有改善")
        assert verdict_text(_neither(_gate("neither", labels="typed")).to_json()).startswith("重排序会降低")
        assert "重复另一篇的关键词" in verdict_text(_neither(_gate("neither")).to_json())
        assert "由你标注" in verdict_text(_neither(_gate("neither", labels="typed")).to_json())
        assert "尚未校准" in verdict_text(Verdict("hybrid", "not_calibrated", None, "hybrid").to_json())


def test_the_verdict_json_names_the_decision_and_carries_the_evidence() -> None:
    gate = _gate("neither", 16, 1.0)
    v = _neither(gate).to_json()
    assert (v["decision"], v["gate_decision"], v["answer"], v["calibrated_by"]) == ("neither", "neither", "baseline",
                                                                                    "library")
    assert {k: v[k] for k in ("n_probes", "delta_causal", "delta_hybrid", "reliability", "labels", "fingerprint",
                              "seconds", "metric", "mean_baseline", "calibrated_at")} == \
        {k: gate[k] for k in ("n_probes", "delta_causal", "delta_hybrid", "reliability", "labels", "fingerprint",
                              "seconds", "metric", "mean_baseline", "calibrated_at")}
    assert "probes" not in v and "undecided" not in v
    # a setting or a person's choice decides in the ranking's own name; the gate's word stays beside it
    chosen = Verdict("hybrid", "setting", gate, "baseline").to_json()
    assert (chosen["decision"], chosen["gate_decision"]) == ("baseline", "neither")
    assert Verdict("causal", "override", None, "causal").to_json()["decision"] == "causal"
    none = Verdict("hybrid", "not_calibrated", None, "hybrid").to_json()
    assert (none["decision"], none["calibrated_by"], none["n_probes"]) == ("hybrid", None, None)
    # a person's labels, and a record from before labels were stored, are a person's
    assert Verdict("causal", "gate", _gate("causal", labels="typed"), "causal").to_json()["calibrated_by"] == "person"
    assert _neither({"decision": "neither", "n_probes": 3, "reliability": 1.0}).to_json()["calibrated_by"] == "person"


def test_the_evidence_in_words_in_both_languages() -> None:
    lib = _neither(_gate("neither", 32, 0.95)).to_json()
    echoes = Verdict("hybrid", "gate", _gate("hybrid", 40, 0.9), "hybrid").to_json()
    mine = Verdict("causal", "gate", _gate("causal", 12, 0.9, labels="typed"), "causal").to_json()
    with i18n.using("en"):
        text = gate_evidence_text(lib)
        assert text.startswith("How this was decided, with no model: 0 of the library's 32 documents (0 %) draw a "
                               "third or more of their key-term weight from one other document")
        assert "re-ranking feeds the answers from 10 %" in text
        assert "95 % of bootstrap resamples" in text and "2026-03-01" in text and "0.020 s" in text
        assert "8 of the library's 40 documents (20 %)" in gate_evidence_text(echoes)
        labelled = gate_evidence_text(Verdict("causal", "gate", _gate("causal", 12, 0.9, dc=0.2, dh=0.05,
                                                                     labels="typed"), "causal").to_json())
        assert "MRR@10: baseline 0.500, causal 0.700 (Δ 0.200), hybrid 0.550 (Δ 0.050)" in labelled
        assert "model could not tell" not in text
        assert gate_evidence_text(mine).startswith("How this was decided: 12 questions whose answering documents "
                                                   "you marked")
        none = gate_evidence_text(Verdict("hybrid", "not_calibrated", None, "hybrid").to_json())
        assert none.startswith("No calibration holds for the documents this library holds now")
        assert gate_evidence_text(Verdict("causal", "override", None, "causal").to_json()) == ""
        assert gate_evidence_text(None) == ""
        old = gate_evidence_text(_neither({"decision": "neither", "n_probes": 3, "reliability": 1.0}).to_json())
        assert "an earlier date" in old and "3 questions" in old
    with i18n.using("zh"):
        text = gate_evidence_text(lib)
        assert text.startswith("判定依据（不调用任何模型）：本文档库 32 篇文档中有 0 篇") and "95%" in text
        assert gate_evidence_text(mine).startswith("判定依据：12 个由你标出答案文档的问题")
        assert "还没有有效的校准" in gate_evidence_text(Verdict("hybrid", "not_calibrated", None, "hybrid").to_json())


@pytest.mark.parametrize("key", [f"verdict.{r}" for r in ("helps", "hurts", "no_gain", "few", "not_calibrated",
                                                           "override", "setting", "probes.library", "probes.person",
                                                           "echoes", "no_echoes")]
                         + [f"verdict.name.{s}" for s in ("baseline", "causal", "hybrid")]
                         + [f"gate.evidence.{s}" for s in ("library", "person", "none")]
                         + ["gate.when_unknown", "stage.gate", "col.causal_off_gate_self"]
                         + [f"override.{s}" for s in ("auto", "baseline", "causal", "hybrid", "tip")])
def test_keys_built_at_run_time_exist(key: str) -> None:
    assert i18n.has_tr(key)


def test_the_why_card_says_how_the_gate_decided_until_a_document_is_chosen(qtbot) -> None:  # type: ignore[no-untyped-def]
    from test_gui_support import make_lists

    from rag_desktop.ui.why_card import WhyCard

    card = WhyCard()
    qtbot.addWidget(card)
    v = _neither(_gate("neither", 32, 0.95)).to_json()
    with i18n.using("en"):
        card.set_verdict(v)
        assert card.sentence.text() == gate_evidence_text(v) and "32 documents" in card.sentence.text()
        _, causal = make_lists()
        h = causal.hits[0]
        card.set_explanation(causal.explanations[0], h, None, {}, causal)
        assert "32 documents" not in card.sentence.text()  # the chosen document's own story
        card.set_explanation(None, None)
        assert "32 documents" in card.sentence.text()
    i18n.set_language("zh")
    try:
        card.retranslate()
        assert card.sentence.text().startswith("判定依据")
    finally:
        i18n.set_language("en")


def test_column_heading_follows_the_verdict_and_the_language(qtbot) -> None:  # type: ignore[no-untyped-def]
    col = ResultColumn("causal", "col.causal")
    qtbot.addWidget(col)
    v = _neither(_gate("neither")).to_json()
    with i18n.using("en"):
        col.set_verdict(v)
        assert col.header.text() == heading_text("col.causal", v)
        assert "Answers read the baseline order" in col.header.text()
    i18n.set_language("zh")
    try:
        col.retranslate()
        assert "回答使用基线顺序" in col.header.text()
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
        cols[1].set_verdict(Verdict("hybrid", "not_calibrated", None).to_json())
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
