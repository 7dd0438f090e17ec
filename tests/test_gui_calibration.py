"""The calibration wizard end to end: typed or generated probe questions, labels given with
clicks, Δ and the bootstrap reliability shown, and "Apply" storing the decision and
switching the causal column to the gate.

The library, embedder, retrieval, re-ranking, scoring and gate are the real ones (a tiny
library of three text files); the generator is the scripted collaborator.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from library_helpers import MIXED_DOCS, built_library
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QCheckBox
from test_gui_support import FakeService, ScriptedGenerator, ScriptedRuntime

from rag_desktop.app.config import load_settings
from rag_desktop.app.service import RagService
from rag_desktop.core.gate import calibrate
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.calibration_wizard import PAGE_LABELS, PAGE_PROBES, PAGE_RESULT, CalibrationWizard, percent
from rag_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.integration]

TYPED = {
    "Why do people choose the matching cards?": "wason_en.txt",
    "久咳用什么药？": "cough_zh.txt",
    "How long do the noodles cook?": "noodles_en.txt",
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library with three documents, built once (the window tests reopen it)."""
    return built_library(tmp_path_factory.mktemp("cal"), MIXED_DOCS)


@pytest.fixture()
def env(qtbot: Any, library: Path, tmp_path: Path) -> Iterator[tuple[MainWindow, RagService, Path, ScriptedGenerator]]:
    i18n.set_language("en")
    settings = Settings()
    gen = ScriptedGenerator()
    svc = RagService(library, settings, runtime=ScriptedRuntime(settings, gen))
    with svc.library.catalog.transaction():
        svc.library.catalog.set_json("gate", None)  # each test starts uncalibrated
    sfile = tmp_path / "settings.toml"
    win = MainWindow(svc, settings, settings_file=sfile, auto_answer=False)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.libraries.listing is not None and not win.runner.busy, timeout=30000)
    yield win, svc, sfile, gen
    win.runner.cancel_all()
    win.runner.wait(30000)
    win.service.close()
    win.service.runtime.close()


def click(qtbot: Any, box: QCheckBox) -> None:
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))


def open_wizard(qtbot: Any, win: MainWindow) -> CalibrationWizard:
    win.act_calibrate.trigger()  # Library → Calibration wizard…
    wiz = win.libraries.calibration_wizard
    qtbot.waitUntil(wiz.isVisible, timeout=5000)
    assert wiz.page() == PAGE_PROBES
    return wiz


def reference_rr(svc: RagService, question: str, relevant: int) -> tuple[float, float, float]:
    """RR@10 of the relevant document under baseline, causal and hybrid, spelled out."""
    r = svc.retriever()
    ctx = r.context(question, "doc")
    out = []
    for ranked in (ctx.baseline, r.rerank(ctx, "causal")[0], r.rerank(ctx, "hybrid")[0]):
        docs = [h.doc_id for h in ranked.hits][:10]
        out.append(1.0 / (docs.index(relevant) + 1) if relevant in docs else 0.0)
    return out[0], out[1], out[2]


def test_typed_probes_labelled_with_clicks_show_delta_and_reliability_and_apply(qtbot: Any, env: Any) -> None:
    win, svc, sfile, _gen = env
    wiz = open_wizard(qtbot, win)
    click_radio = wiz.type_radio
    qtbot.mouseClick(click_radio, Qt.MouseButton.LeftButton, pos=QPoint(8, click_radio.height() // 2))
    assert wiz.type_radio.isChecked() and not wiz.n_spin.isEnabled()
    wiz.text.setPlainText("\n".join(TYPED) + "\n\n")
    qtbot.mouseClick(wiz.next_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: wiz.page() == PAGE_LABELS, timeout=60000)
    assert wiz.probe_list.count() == 3
    by_name = {Path(d.path).name: d.doc_id for d in svc.library.catalog.documents()}
    for row, (question, name) in enumerate(TYPED.items()):
        wiz.probe_list.setCurrentRow(row)
        assert question in wiz.question.text()
        # the candidates are the documents any method ranks in its top 10: all three here
        assert sorted(Path(b.toolTip()).name for b in wiz.checks) == sorted(MIXED_DOCS)
        assert not any(b.isChecked() for b in wiz.checks)  # typed probes start unlabelled
        box = next(b for b in wiz.checks if Path(b.toolTip()).name == name)
        click(qtbot, box)
        assert box.isChecked() and wiz.labels[row] == {by_name[name]}
        assert "(1 ticked)" in wiz.probe_list.item(row).text()
    assert wiz.label_count.text() == "3 of 3 questions have a document ticked."
    # a second click un-ticks, a third ticks again
    wiz.probe_list.setCurrentRow(0)
    box = next(b for b in wiz.checks if b.isChecked())
    click(qtbot, box)
    assert wiz.labels[0] == set()
    click(qtbot, box)
    assert wiz.labels[0] == {by_name["wason_en.txt"]}

    qtbot.mouseClick(wiz.next_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: wiz.page() == PAGE_RESULT or not win.runner.busy, timeout=60000)
    assert wiz.page() == PAGE_RESULT, wiz.status.text()
    d = wiz.outcome.decision
    rr = [reference_rr(svc, q, by_name[n]) for q, n in TYPED.items()]
    ref = calibrate([x[0] for x in rr], [x[1] for x in rr], [x[2] for x in rr], metric="MRR@10", seed=0)
    assert d == ref and d.n_draws == 2000 and d.n_probes == 3
    # the table: mean MRR@10 and Δ per method, in the order baseline, causal, hybrid
    cells = [[wiz.table.item(r, c).text() for c in range(4)] for r in range(3)]
    assert [row[1] for row in cells] == [f"{d.mean_baseline:.3f}", f"{d.mean_causal:.3f}", f"{d.mean_hybrid:.3f}"]
    assert [row[2] for row in cells] == ["", f"{d.delta_causal:+.3f}", f"{d.delta_hybrid:+.3f}"]
    assert cells[1][3] == percent(d.reliability_causal)
    assert wiz.decision_label.text().startswith(
        {"causal": "Decision: use the causal rerank", "hybrid": "Decision: use the hybrid rerank",
         "neither": "Decision: keep the baseline order"}[d.decision])
    assert percent(d.reliability) in wiz.reliability_label.text() and "2,000" in wiz.reliability_label.text()
    assert wiz.per_probe.rowCount() == 3
    assert svc.library.catalog.get_json("gate") is None  # nothing stored before Apply

    assert wiz.apply_btn.isVisible() and wiz.apply_btn.isEnabled()
    qtbot.mouseClick(wiz.apply_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not wiz.isVisible() and not win.runner.busy, timeout=30000)
    stored = svc.library.catalog.get_json("gate")
    # The gate's record (app.library_gate): the decision, how its probes were labelled, when, and
    # the library's fingerprint, so the library's own gate leaves it alone until the documents change.
    from rag_desktop.app.library_gate import fingerprint

    evidence = ("decision", "metric", "n_probes", "mean_baseline", "mean_causal", "mean_hybrid", "delta_causal",
                "delta_hybrid", "reliability")
    assert {k: stored[k] for k in evidence} == {k: getattr(d, k) for k in evidence}
    assert stored["labels"] == "typed or wizard" and stored["calibrated_at"]
    assert stored["fingerprint"] == fingerprint(svc.library.catalog)
    assert load_settings(sfile).retrieval.default_method == "gated"
    assert win.settings.retrieval.default_method == "gated"
    assert svc.settings.retrieval.default_method == "gated"
    assert svc.verdict().answer == {"causal": "causal", "hybrid": "hybrid", "neither": "baseline"}[d.decision]
    assert win.error_bar.shown == []
    # opened again, the wizard says what is stored
    again = open_wizard(qtbot, win)
    qtbot.waitUntil(lambda: "from 3 questions" in again.stored.text(), timeout=10000)
    assert percent(d.reliability) in again.stored.text()
    again.reject()


def test_generated_probes_come_labelled_with_their_source_document(qtbot: Any, env: Any) -> None:
    win, svc, _sfile, gen = env
    wiz = open_wizard(qtbot, win)
    assert wiz.gen_radio.isChecked()
    qtbot.waitUntil(lambda: wiz.stored.text() == "No decision is stored for this library yet.", timeout=10000)
    wiz.n_spin.setValue(2)
    qtbot.mouseClick(wiz.next_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: wiz.page() == PAGE_LABELS, timeout=60000)
    assert gen.calls.count("answer") == 2  # the scripted model wrote two questions
    assert len(wiz.items) == 2
    for row, it in enumerate(wiz.items):
        assert it.probe.source == "generated" and len(it.probe.relevant) == 1
        wiz.probe_list.setCurrentRow(row)
        ticked = [b for b in wiz.checks if b.isChecked()]
        (src,) = it.probe.relevant
        assert [Path(b.toolTip()).name for b in ticked] == [Path(svc.library.catalog.document(src).path).name]
        assert wiz.labels[row] == {src}
    # the pre-labels are editable: move question 1's label to another document
    wiz.probe_list.setCurrentRow(0)
    on = next(b for b in wiz.checks if b.isChecked())
    off = next(b for b in wiz.checks if not b.isChecked())
    click(qtbot, on)
    click(qtbot, off)
    assert len(wiz.labels[0]) == 1 and wiz.labels[0] != set(wiz.items[0].probe.relevant)
    qtbot.mouseClick(wiz.next_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: wiz.page() == PAGE_RESULT, timeout=60000)
    assert wiz.outcome is not None and wiz.outcome.decision.n_probes == 2
    # Back returns to the labels, unchanged
    qtbot.mouseClick(wiz.back_btn, Qt.MouseButton.LeftButton)
    assert wiz.page() == PAGE_LABELS and wiz.probe_list.count() == 2
    wiz.reject()
    assert svc.library.catalog.get_json("gate") is None  # closed without Apply: nothing stored


def test_stop_while_the_model_writes_questions(qtbot: Any, env: Any) -> None:
    win, svc, _sfile, gen = env
    gen.delay = 0.1  # a few seconds per question: time to press Stop
    wiz = open_wizard(qtbot, win)
    wiz.n_spin.setValue(5)
    qtbot.mouseClick(wiz.next_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: wiz.stop_btn.isVisible() and wiz.progress.isVisible(), timeout=10000)
    qtbot.waitUntil(lambda: "Writing question 1 of 3" in wiz.status.text(), timeout=30000)  # 3 passages
    assert not wiz.next_btn.isEnabled()
    qtbot.mouseClick(wiz.stop_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not win.runner.busy, timeout=30000)
    assert wiz.status.text() == "Stopped; nothing was changed."
    assert wiz.page() == PAGE_PROBES and wiz.next_btn.isEnabled() and not wiz.stop_btn.isVisible()
    assert svc.library.catalog.get_json("gate") is None


def test_typed_mode_needs_a_question_and_an_empty_library_is_explained(qtbot: Any, tmp_path: Path) -> None:
    i18n.set_language("en")
    svc = FakeService(tmp_path / "lib", Settings())
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "s.toml")
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.libraries.listing is not None and not win.runner.busy, timeout=5000)
    wiz = open_wizard(qtbot, win)
    wiz.type_radio.setChecked(True)
    qtbot.mouseClick(wiz.next_btn, Qt.MouseButton.LeftButton)
    assert wiz.status.text() == "Type at least one question, one per line." and wiz.page() == PAGE_PROBES
    wiz.text.setPlainText("What is this?")
    qtbot.mouseClick(wiz.next_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not win.runner.busy and wiz.next_btn.isEnabled(), timeout=5000)
    assert wiz.status.text() == "This library has no documents yet: add a folder first, then calibrate."
    assert wiz.page() == PAGE_PROBES
    with i18n.using("zh"):
        wiz.retranslate()
        assert wiz.next_btn.text() == "下一步 >" and "校准" in wiz.windowTitle()
    wiz.reject()
    win.runner.wait(5000)


def test_reliability_is_not_called_reliable_on_a_handful_of_questions() -> None:
    from rag_desktop.ui.calibration_wizard import MIN_PROBES_FOR_RELIABILITY, reliability_level

    assert reliability_level(0.99, 3) == "few"
    assert reliability_level(0.99, MIN_PROBES_FOR_RELIABILITY) == "high"
    assert reliability_level(0.75, 40) == "medium" and reliability_level(0.5, 40) == "low"
    i18n.set_language("en")
    assert "at least 10" in i18n.tr("cal.level.few", min=MIN_PROBES_FOR_RELIABILITY)
