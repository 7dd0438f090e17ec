"""The desktop app end to end with the real service and the embedded models (slow).

The demo library is built through the UI exactly as ``rag-desktop gui --demo`` does on
first launch (visible progress bar), then questions are asked through the query bar.
The generator is scripted (a collaborator: answers are not what is under test here);
the embedder, tokenizer, keyword sets, causal rerank, CF-RAG pipeline, catalog and
index are the real ones.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication
from test_gui_support import DEMO, ScriptedGenerator, ScriptedRuntime

from rag_desktop.app.config import demo_library_dir, load_settings, load_ui_state
from rag_desktop.app.library import scan_folder
from rag_desktop.app.service import RagService
from rag_desktop.core.highlight import region_segments
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Progress
from rag_desktop.ui import i18n
from rag_desktop.ui.columns import COL_CHANGE
from rag_desktop.ui.main import build_window, demo_source_folder
from rag_desktop.ui.main_window import MainWindow
from rag_desktop.ui.present import rank_change

pytestmark = [pytest.mark.gui, pytest.mark.slow, pytest.mark.integration]

EN_Q = "Why do people fail the Wason selection task?"
ZH_Q = "出差住宿费标准是多少？"


def demo_files() -> list[str]:
    """The documents the library itself finds in the demo folder (it honours .ragignore)."""
    found, _problems = scan_folder(DEMO)
    return sorted(str(p) for p in found)


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        QApplication.processEvents()
        time.sleep(0.02)


def factory_with(gen: ScriptedGenerator) -> Callable[[Path, Settings], RagService]:
    def make(lib: Path, s: Settings) -> RagService:
        return RagService(lib, s, runtime=ScriptedRuntime(s, gen))
    return make


def close(win: MainWindow) -> None:
    win.close()
    win.service.close()
    win.service.runtime.close()


@pytest.fixture(scope="module")
def demo(qapp: QApplication, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    i18n.set_language("en")
    base = tmp_path_factory.mktemp("demo_user")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_DESKTOP_DATA_DIR", str(base / "data"))
        mp.setenv("RAG_DESKTOP_CONFIG_DIR", str(base / "config"))
        sfile = base / "config" / "settings.toml"
        gen = ScriptedGenerator()
        win = build_window(None, True, settings=Settings(), settings_file=sfile, service_factory=factory_with(gen))
        win.show()
        progress: list[Progress] = []
        bar_seen: list[bool] = []

        def watch() -> bool:
            if win.libraries.ingesting and win.runner.tasks():
                t = next((t for t in win.runner.tasks() if t.name == "ingest"), None)
                if t is not None and not bar_seen:
                    t.signals.progress.connect(progress.append)
                    bar_seen.append(win.libraries.panel.progress.isVisibleTo(win))
            return bool(bar_seen)

        wait_until(watch, 60, "the first-launch ingest to start")
        wait_until(lambda: win.libraries.last_ingest_report is not None and not win.runner.busy, 1500,
                   "the demo ingest")
        yield {"win": win, "gen": gen, "sfile": sfile, "progress": progress, "bar_seen": bar_seen[0],
               "library": demo_library_dir()}
        close(win)


def ask(win: MainWindow, q: str, level: str = "doc", answers: bool = True, timeout: float = 900) -> None:
    win.query_bar.level_box.setCurrentIndex(win.query_bar.level_box.findData(level))
    win.query_bar.auto_answer.setChecked(answers)
    line = win.query_bar.query.lineEdit()
    assert line is not None
    line.setText(q)
    line.returnPressed.emit()  # Enter
    if answers:
        wait_until(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                   timeout, f"answers to {q!r}")
    else:
        wait_until(lambda: win.state is not None and win.state.comparison is not None and not win.runner.busy,
                   timeout, f"ranking of {q!r}")
    assert win.error_bar.shown == [], [e.detail for e in win.error_bar.shown]


def test_first_demo_launch_builds_the_library_with_a_progress_bar(demo: dict[str, Any]) -> None:
    win: MainWindow = demo["win"]
    assert demo_source_folder() == DEMO
    rep = win.libraries.last_ingest_report
    files = demo_files()
    assert sorted(rep.added) == files and not rep.cancelled
    assert demo["bar_seen"] is True
    stages = {p.stage for p in demo["progress"]}
    assert {"scan", "parse", "embed"} <= stages
    assert all(p.total == len(files) for p in demo["progress"] if p.stage == "scan")
    listing = win.libraries.panel.document_items()
    assert len(listing) == len(files)
    assert {d.text(1) for d in listing} == {"indexed"}
    assert win.libraries.listing is not None and Path(win.libraries.listing.library) == demo["library"]
    assert not win.libraries.panel.progress.isVisibleTo(win)


def test_asking_in_english_fills_the_columns_arrows_chips_and_answers(demo: dict[str, Any]) -> None:
    win: MainWindow = demo["win"]
    ask(win, EN_Q)
    st = win.state
    assert st is not None and st.cfrag is not None
    comp = st.comparison
    assert len(comp.baseline.hits) > 3
    base_titles = [r.hit.title for r in win.results.columns["baseline"].model.rows]
    assert base_titles == [h.title for h in comp.baseline.hits]
    assert "Wason" in base_titles[0] or "Conditionals" in base_titles[0]
    m = win.results.columns["causal"].model
    got = [m.data(m.index(r, COL_CHANGE)) for r in range(m.rowCount())]
    # reference: the baseline rank minus the causal rank of the same document
    base_rank = {h.unit_id: h.rank for h in comp.baseline.hits}
    want = []
    for h in comp.causal.hits:
        d = base_rank[h.unit_id] - h.rank
        want.append(f"▲{d}" if d > 0 else f"▼{-d}" if d < 0 else "=")
    assert got == want == [rank_change(comp.baseline, h).text for h in comp.causal.hits]
    # chips and the "Why" card for the selected document
    win.results.columns["causal"].select_row(0)
    chips = win.results.chips.chips()
    assert chips and {c.kind for c in chips} <= {"A", "B"} and any(c.kind == "B" for c in chips)
    expl = comp.causal.explanations[0] if comp.causal.explanations[0].unit_id == comp.causal.hits[0].unit_id else \
        next(e for e in comp.causal.explanations if e.unit_id == comp.causal.hits[0].unit_id)
    assert [c.term for c in chips if c.kind == "B"] == [b.term for b in expl.split.b_terms]
    for c, a in zip([c for c in chips if c.kind == "A"], expl.split.a_terms, strict=True):
        assert a.absorbed_by in c.toolTip() or st.surfaces.get(a.absorbed_by, "") in c.toolTip()
    assert f"causal rank {comp.causal.hits[0].rank}" in win.results.why.body.text() or "kept its baseline rank" in \
        win.results.why.body.text()
    # answers streamed for every column, with the scripted citations; CF-RAG ran for real
    for method in ("baseline", "causal"):
        pane = win.results.answers[method]
        assert pane.answer is not None and "[9]" in pane.status.text()
        # each scripted marker is shown, or removed as unsupported by its passage and said so
        dropped = {n for n, _ in pane.answer.dropped_citations}
        assert {1, 2} <= {c.n for c in pane.answer.citations} | dropped
        assert not dropped or "unsupported citation" in pane.status.text()
    trace = st.cfrag.trace
    assert trace.counterfactuals, "the scripted counterfactuals should survive validation"
    assert win.results.trace_view.ev_table.rowCount() == len(trace.evidence)
    # what CF-RAG used first, then the other kept evidence, then filtered passages (marked).
    assert win.results.columns["cfrag"].model.rowCount() == len(trace.evidence)
    kinds = set(demo["gen"].calls)
    assert {"answer", "counterfactual", "closed_book", "hypothesis"} <= kinds


def test_asking_in_chinese_finds_the_travel_rules(demo: dict[str, Any]) -> None:
    win: MainWindow = demo["win"]
    ask(win, ZH_Q, answers=False)
    top = win.results.columns["baseline"].model.rows[0].hit
    assert "差旅" in top.title
    assert win.results.columns["cfrag"].placeholder.isVisibleTo(win)  # answers were off: CF-RAG did not run


def expected_page(pdf: Path, chunk_text: str) -> int:
    """Reference: the first page whose own text contains the chunk's first searchable piece."""
    import pymupdf

    first = region_segments(chunk_text)[0]
    with pymupdf.open(pdf) as doc:
        for i, page in enumerate(doc, start=1):
            if page.search_for(first):
                return i
    raise AssertionError(f"{first!r} is on no page of {pdf.name}")


def test_the_viewer_opens_a_passage_at_its_page_with_marks(demo: dict[str, Any]) -> None:
    win: MainWindow = demo["win"]
    ask(win, "Oaksford and Chater optimal data selection rational analysis", level="chunk", answers=False)
    rows = win.results.columns["baseline"].model.rows
    pdf_rows = [r.hit for r in rows if r.hit.path.endswith(".pdf")]
    target = max(pdf_rows, key=lambda h: (h.page, -h.rank))  # prefer a passage that starts after page 1
    win.open_hit(target)
    wait_until(lambda: win.viewer.pending == 0 and win.viewer.mode == "pdf", 120, "the page render")
    assert win.viewer.last_error is None
    assert win.viewer.current_page == target.page == expected_page(Path(target.path), target.text)
    assert not win.viewer.image.pixmap().isNull()
    assert sum(win.viewer.found.values()) > 0  # the passage (and terms) are marked
    # a citation opens the cited page too
    win.query_bar.auto_answer.setChecked(True)
    ask(win, "Oaksford and Chater optimal data selection rational analysis", level="chunk")
    pane = win.results.answers["baseline"]
    cited = pane.citation(1)
    assert cited is not None and cited.valid
    assert pane.activate_citation(1)
    wait_until(lambda: win.viewer.pending == 0, 120, "the cited page")
    assert win.viewer.hit is not None and win.viewer.hit.unit_id == cited.unit_id
    assert win.viewer.current_page == cited.page


def test_settings_persist_and_reach_the_service(demo: dict[str, Any]) -> None:
    win: MainWindow = demo["win"]
    win.open_settings()
    dlg = win.settings_dialog
    dlg.set_field("retrieval", "k", 4)
    dlg.set_field("retrieval", "level", "doc")
    dlg.accept()
    wait_until(lambda: not win.runner.busy, 60, "the settings update")
    assert load_settings(demo["sfile"]).retrieval.k == 4
    assert win.service.settings.retrieval.k == 4
    ask(win, EN_Q, answers=False)
    # the dense top k = 4, joined by the keyword leg's units the dense search did not find
    rows = win.results.columns["baseline"].model.rows
    assert 4 <= len(rows) <= 4 + win.service.settings.retrieval.keyword_k
    assert win.state is not None and "dense top 4" in win.state.comparison.baseline.label
    assert EN_Q in load_ui_state(demo["sfile"].with_name("ui_state.toml")).recent_questions


def test_export_the_decision_report(demo: dict[str, Any], tmp_path: Path) -> None:
    win: MainWindow = demo["win"]
    ask(win, EN_Q)
    html_path, json_path = win.export_report(tmp_path / "decision.html")
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert data["question"] == EN_Q
    assert win.state is not None
    assert len(data["comparison"]["baseline"]["hits"]) == len(win.state.comparison.baseline.hits)
    kind = data["cfrag"]["trace"]["decision"]["kind"]
    assert kind in ("select", "synthesize", "synthesis_fallback", "single", "standard")
    if kind == "standard":  # the standard answer stood (cfrag.keep_standard): the report says so
        assert data["cfrag"]["trace"]["decision"]["standard"]["outcome"] in ("confident", "agrees", "unsupported")
    page = html_path.read_text(encoding="utf-8")
    assert "<script" not in page and "Causal rerank" in page


def test_cancelling_an_ingest_keeps_what_was_added(qapp: QApplication, tmp_path: Path) -> None:
    i18n.set_language("en")
    win = build_window(tmp_path / "lib", False, settings=Settings(), settings_file=tmp_path / "s.toml",
                       service_factory=factory_with(ScriptedGenerator()))
    win.show()
    try:
        wait_until(lambda: win.libraries.listing is not None and not win.runner.busy, 60, "the empty listing")
        seen: list[Progress] = []
        win.libraries.start_ingest([DEMO])
        win.runner.tasks()[0].signals.progress.connect(seen.append)
        wait_until(lambda: any(p.stage == "embed" for p in seen), 600, "the first file")
        win.act_cancel.trigger()  # Esc
        wait_until(lambda: win.libraries.last_ingest_report is not None and not win.runner.busy, 600, "the cancel")
        rep = win.libraries.last_ingest_report
        assert rep.cancelled
        n_files = len(demo_files())
        assert len(rep.added) < n_files
        assert len(win.libraries.panel.document_items()) == len(rep.added)
        assert win.error_bar.shown == []
        assert not win.libraries.panel.progress.isVisibleTo(win)
        assert "cancelled" in win.statusBar().currentMessage()
    finally:
        close(win)
