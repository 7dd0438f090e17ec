"""The main window against an in-memory service (fast): columns, arrows, chips, the "Why" card,
streaming answers with citations, the viewer, the trace, settings, export, errors, cancel.

The service is a collaborator with canned results (test_gui_support.FakeService); the
window, its widgets and the worker bridge are real. test_gui_app.py repeats the main
path with the real service and models.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QTextCursor
from test_gui_support import ANSWER_TEXT, DEMO, FakeService, ScriptedGenerator, make_comparison
from window_helpers import shown_window, type_and_ask

from rag_desktop.app.config import load_settings, load_ui_state
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.chips import Chip
from rag_desktop.ui.columns import COL_CHANGE, COL_TITLE
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.main_window import MainWindow
from rag_desktop.ui.present import rank_change
from rag_desktop.ui.rank_chart import movements

pytestmark = pytest.mark.gui
QUESTION = "Why do people fail the Wason selection task?"


@pytest.fixture()
def env(qtbot: Any, tmp_path: Path) -> Iterator[tuple[MainWindow, FakeService, Path]]:
    i18n.set_language("en")
    settings = Settings()
    sfile = tmp_path / "settings.toml"
    svc = FakeService(tmp_path / "lib", settings)
    with shown_window(qtbot, svc, settings, sfile, auto_answer=True) as win:
        yield win, svc, sfile
    i18n.set_language("en")


def ask_and_wait(qtbot: Any, win: MainWindow, q: str = QUESTION) -> None:
    type_and_ask(qtbot, win, q)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)


def column_texts(win: MainWindow, method: str, col: int) -> list[str]:
    m = win.results.columns[method].model
    return [m.data(m.index(r, col)) for r in range(m.rowCount())]


def test_ingest_through_the_ui_lists_documents_and_skipped_files(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    win.libraries.start_ingest([DEMO])
    assert win.libraries.panel.progress.isVisibleTo(win)
    qtbot.waitUntil(lambda: win.libraries.last_ingest_report is not None and not win.runner.busy, timeout=10000)
    n_files = len([p for p in DEMO.iterdir() if p.suffix in (".pdf", ".docx")])
    docs = win.libraries.panel.document_items()
    assert len(docs) == n_files
    assert all(d.text(1) == "indexed" or d.text(1) == "file missing" for d in docs)
    skipped = win.libraries.panel.skipped_items()
    assert [s.text(0) for s in skipped] == ["broken.doc"]
    assert ".docx" in skipped[0].text(1)  # the reason is readable in place
    reason = skipped[0].child(0)  # and whole, on its own wrapped line under the file
    assert reason is not None and " ".join(reason.text(0).split()) == "old Word .doc format — save it as .docx"
    assert reason.isFirstColumnSpanned() and skipped[0].isExpanded()
    assert not win.libraries.panel.progress.isVisibleTo(win)
    assert f"{n_files} added" in win.statusBar().currentMessage()


def test_escape_cancels_an_ingest(qtbot: Any, env: Any) -> None:
    win, svc, _ = env
    svc.gate = threading.Event()
    seen: list[Any] = []
    win.libraries.start_ingest([DEMO])
    win.runner.tasks()[0].signals.progress.connect(seen.append)
    qtbot.waitUntil(lambda: bool(seen), timeout=15000)  # the first file event; slow under load
    assert "Checking" in win.libraries.panel.progress_label.text()
    assert "left" in win.libraries.panel.progress_label.text()  # the ETA
    qtbot.keyClick(win, Qt.Key.Key_Escape)
    svc.gate.set()
    qtbot.waitUntil(lambda: win.libraries.last_ingest_report is not None and not win.runner.busy, timeout=5000)
    assert win.libraries.last_ingest_report.cancelled
    assert len(win.libraries.last_ingest_report.added) < len([p for p in DEMO.iterdir()
                                                             if p.suffix in (".pdf", ".docx")])
    assert not win.libraries.panel.progress.isVisibleTo(win)
    assert win.error_bar.shown == []  # a cancel is not an error


def test_asking_fills_every_column_with_the_right_arrows(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask_and_wait(qtbot, win)
    comp = make_comparison()
    assert column_texts(win, "baseline", COL_TITLE) == [h.title for h in comp.baseline.hits]
    assert win.results.columns["baseline"].view.isColumnHidden(COL_CHANGE)
    arrows = column_texts(win, "causal", COL_CHANGE)
    assert arrows == [rank_change(comp.baseline, h).text for h in comp.causal.hits] == ["▲2", "▼1", "▲2", "▼2",
                                                                                        "▼1"]
    m = win.results.columns["causal"].model
    assert m.data(m.index(0, COL_CHANGE), Qt.ItemDataRole.ForegroundRole).color() == QColor("#1B7F3B")
    assert m.data(m.index(1, COL_CHANGE), Qt.ItemDataRole.ForegroundRole).color() == QColor("#B3261E")
    assert not win.results.stacks["cross_encoder"].isVisibleTo(win)  # no reranker configured
    # CF-RAG rows: winner's evidence first (docs 1, 3), then docs 2, 4; chunk rows matched by document;
    # then what CF-RAG filtered out (the duplicate of doc 1), last and marked
    assert column_texts(win, "cfrag", COL_TITLE)[:2] == ["Seminar on the Wason task", "Reasoning Lab Newsletter"]
    assert column_texts(win, "cfrag", COL_CHANGE) == ["=", "▲1", "▼1", "=", "▼4"]
    cf = win.results.columns["cfrag"].model
    assert [r.note for r in cf.rows][-1] == tr("col.cf_filtered", why=tr("trace.status.duplicate"))
    assert all(not r.note.startswith(tr("col.cf_filtered", why="")[:8]) for r in cf.rows[:4])
    # the snippet of the causal column carries the A/B spans
    assert any(m.rows[0].spans)


def test_chips_and_why_card_explain_the_selected_document(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask_and_wait(qtbot, win)
    win.results.columns["baseline"].select_row(0)  # doc 1: "research" absorbed by "task" at 0.903
    chips = win.results.chips.chips()
    assert {c.kind for c in chips} == {"A", "B"}
    research = next(c for c in chips if c.term == "research")
    assert "task" in research.toolTip() and "0.903" in research.toolTip()
    sel = next(c for c in chips if c.term == "select")
    assert sel.text() == "selection" and "same word" in sel.toolTip()  # readable word, exact match
    assert isinstance(chips[0], Chip)
    assert win.results.why.sentence.text() == ("Moved down from rank 1 to 2: of the question's words it only repeats "
                                       "“wason”, “selection”, “task”; the words of its own that carry it are "
                                       "“department”, “february”, “seminar”.")  # heaviest first
    assert not win.results.why.body_scroll.isVisible()  # the numbers are behind the fold, closed by default
    win.results.why.fold.click()
    assert win.results.why.body_scroll.isVisible()
    why = win.results.why.body.text()
    assert "moved down by 1: baseline rank 1 → causal rank 2" in why
    assert "research" in why and "cosine 0.90" in why and "No fallback" in why
    assert "Seminar on the Wason task" in win.results.why.title.text()
    assert win.results.chips.legend.a.text().startswith("A") and win.results.chips.legend.b.text().startswith("B")


def test_selecting_a_document_highlights_it_in_every_column(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask_and_wait(qtbot, win)
    win.results.columns["baseline"].select_row(1)  # doc 2
    for m in ("baseline", "causal", "cfrag"):
        col = win.results.columns[m]
        row = col.model.row_of_doc(2)
        assert col.model.selected_doc == 2
        assert col.model.data(col.model.index(row, 0), Qt.ItemDataRole.BackgroundRole) is not None
        assert col.view.selectionModel().currentIndex().row() == row
    assert win.results.chart.selected == 2
    win.results.hover_doc(4)
    assert all(c.model.hover_doc == 4 for c in win.results.columns.values())


def test_new_results_leave_every_column_at_its_top(qtbot: Any, env: Any) -> None:
    """The app selects the causal column's first document for the details; another column where it
    ranks lower is not scrolled down to it (that hid the column's own first places). A person's
    choice is scrolled into view."""
    win, _svc, _ = env
    for col in win.results.columns.values():
        col.view.setFixedHeight(40)  # a row or so: a lower-ranked row needs scrolling
    ask_and_wait(qtbot, win)
    first = win.results.columns["causal"].model.rows[0].hit.doc_id
    base = win.results.columns["baseline"]
    assert base.model.row_of_doc(first) > 0 and base.model.selected_doc == first
    assert all(c.view.verticalScrollBar().value() == 0 for c in win.results.columns.values())
    last = base.model.rows[-1].hit.doc_id
    win.results.columns["causal"].select_row(win.results.columns["causal"].model.row_of_doc(last))
    assert base.model.selected_doc == last and base.view.verticalScrollBar().value() > 0


def test_answers_stream_and_citations_open_the_viewer_at_the_page(qtbot: Any, env: Any) -> None:
    win, _, _ = env
    ask_and_wait(qtbot, win)
    pane = win.results.answers["causal"]
    assert pane.text() == ANSWER_TEXT.strip()
    assert "[9]" in pane.status.text()  # the invalid citation is flagged
    assert [c.valid for c in pane.answer.citations] == [True, True, False]
    # click on "[1]": causal source 1 is doc 3, a PDF, page 1
    doc = pane.browser.document()
    pos = pane.text().index("[1]") + 1
    cur = QTextCursor(doc)
    cur.setPosition(pos)
    rect = pane.browser.cursorRect(cur)
    qtbot.mouseClick(pane.browser.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(rect.right() + 2,
                                                                                     rect.center().y()))
    qtbot.waitUntil(lambda: win.viewer.isVisible() and win.viewer.pending == 0, timeout=10000)
    assert win.viewer.hit is not None and win.viewer.hit.doc_id == 3
    avail = win.viewer.screen().availableGeometry()  # the window fits its screen (1280 × 800 laptops)
    assert win.viewer.frameGeometry().bottom() <= avail.bottom() and win.viewer.width() <= avail.width()
    assert win.viewer.mode == "pdf" and win.viewer.current_page == 1
    assert win.viewer.image.pixmap() is not None and not win.viewer.image.pixmap().isNull()
    # the invalid one is not a link
    assert not pane.activate_citation(9)
    # a double-click on a row opens its page (doc 2 is on page 2)
    col = win.results.columns["causal"]
    row = col.model.row_of_doc(2)
    col.open_requested.emit(col.model.rows[row].hit)
    qtbot.waitUntil(lambda: win.viewer.pending == 0 and win.viewer.current_page == 2, timeout=10000)
    assert win.viewer.found.get("selection", 0) >= 1 or win.viewer.found.get("select", 0) >= 1


def test_columns_that_read_the_same_sources_get_one_answer_written_once(qtbot: Any, env: Any) -> None:
    # With the baseline order chosen for a question the causal column reads the baseline's
    # sources; the answer was generated twice (as long again for the person waiting).
    win, svc, _ = env
    ask_and_wait(qtbot, win)
    assert sorted(svc.answer_calls) == ["baseline", "hybrid"]  # different sources: two answers
    svc.answer_calls.clear()
    svc.causal_as_baseline = True
    ask_and_wait(qtbot, win)
    assert svc.answer_calls == ["baseline"]
    base, causal = win.results.answers["baseline"], win.results.answers["causal"]
    assert causal.text() == base.text() == ANSWER_TEXT.strip()
    assert causal.answer is not None and causal.answer.method == "baseline"
    assert [c.n for c in causal.answer.citations] == [c.n for c in base.answer.citations]  # type: ignore[union-attr]
    assert causal.status.text().startswith("Baseline's answer (same sources) · done")
    assert "same sources" not in base.status.text()
    i18n.set_language("zh")
    causal.retranslate()
    assert causal.status.text().startswith("同“基线”的答案（资料相同） · ")
    i18n.set_language("en")


def test_the_viewer_shows_a_pdfs_printed_page_labels(qtbot: Any, env: Any, tmp_path: Path) -> None:
    # the demo textbooks are chapters printed from page 87 and 141; the viewer said "2 of 3".
    from test_gui_pdf_render import labelled_pdf

    win, _svc, _ = env
    book = labelled_pdf(tmp_path / "chapter.pdf", 141)
    base = dataclasses.replace(make_comparison().baseline.hits[0], path=str(book), page=2,
                               text="Sheet 2 of the chapter")
    win.open_hit(base)
    qtbot.waitUntil(lambda: win.viewer.pending == 0 and win.viewer.mode == "pdf", timeout=10000)
    assert win.viewer.current_page == 2 and win.viewer.page_label == "142"
    assert win.viewer.page_of.text() == "/ 3 · p. 142"
    assert win.viewer.status.text().startswith("Page 142 (2 of 3 in this file)")
    i18n.set_language("zh")
    win.viewer.retranslate()
    assert win.viewer.page_of.text() == "/ 3 · 第 142 页"
    assert win.viewer.status.text().startswith("第 142 页（本文件第 2 页，共 3 页）")
    i18n.set_language("en")
    # a PDF without labels keeps the plain count
    plain = labelled_pdf(tmp_path / "plain.pdf", None)
    win.open_hit(dataclasses.replace(base, path=str(plain), page=1, text="Sheet 1 of the chapter"))
    qtbot.waitUntil(lambda: win.viewer.pending == 0 and win.viewer.page_label == "", timeout=10000)
    assert win.viewer.page_of.text().startswith("/ ") and "p." not in win.viewer.page_of.text()


def test_word_documents_show_as_text_with_the_same_marks(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask_and_wait(qtbot, win)
    hit = win.results.columns["baseline"].model.rows[0].hit  # doc 1, the .docx announcement
    win.open_hit(hit)
    qtbot.waitUntil(lambda: win.viewer.pending == 0 and win.viewer.mode == "text"
                    and bool(win.viewer.text.toPlainText()), timeout=10000)
    text = win.viewer.text.toPlainText()
    assert "Wason" in text
    sels = win.viewer.text.extraSelections()
    marked = {text[s.cursor.selectionStart():s.cursor.selectionEnd()].lower() for s in sels}
    assert "wason" in marked and any(w.startswith("seminar") for w in marked)
    # a passage whose cleaned text differs in line breaks and spaces is still located
    excerpt = "We are delighted   to announce\nthis spring's seminar series, \"Revisiting the Wason Selection Task"
    win.open_hit(dataclasses.replace(hit, text=excerpt))
    qtbot.waitUntil(lambda: win.viewer.pending == 0, timeout=10000)
    assert win.viewer.region is not None
    s, e = win.viewer.region
    assert " ".join(text[s:e].split()) == " ".join(excerpt.split())


def test_trace_view_shows_the_arbitration(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask_and_wait(qtbot, win)
    tv = win.results.trace_view
    assert tv.cf_table.rowCount() == 3
    assert tv.cf_table.item(2, 0).text() == "✘" and "θ_sim" in tv.cf_table.item(2, 5).text()
    assert tv.ev_table.rowCount() == 5
    assert tv.hy_table.rowCount() == 2
    assert tv.hy_table.item(0, 1).text() == "Matching bias <b>and</b> confirmation"  # model output stays text
    assert "select" in tv.de_label.text() or "selected" in tv.de_label.text()
    from rag_desktop.ui.trace_view import VALUE_ROLE

    assert tv.ev_table.item(0, 3).data(VALUE_ROLE) == pytest.approx(0.8)


def test_rank_chart_draws_one_line_per_document(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask_and_wait(qtbot, win)
    comp = make_comparison()
    moves = movements(comp.baseline, comp.causal)
    assert [(m.doc_id, m.before, m.after) for m in moves] == [(1, 1, 2), (2, 2, 4), (3, 3, 1), (4, 4, 5),
                                                              (5, 5, 3)]
    assert win.results.chart.moves == moves
    win.results.setCurrentWidget(win.results.chart)
    img = win.results.chart.grab().toImage()
    colors = {img.pixelColor(x, y).name() for x in range(0, img.width(), 3) for y in range(0, img.height(), 3)}
    assert "#1b7f3b" in colors and "#b3261e" in colors  # up and down lines


def test_settings_are_persisted_and_reach_the_service(qtbot: Any, env: Any) -> None:
    win, svc, sfile = env
    ask_and_wait(qtbot, win)
    win.open_settings()
    dlg = win.settings_dialog
    dlg.set_field("retrieval", "k", 7)
    dlg.set_field("retrieval", "tau", 0.7)
    dlg.set_field("cfrag", "lam", 0.25)
    dlg.set_field("ui", "language", "zh")
    dlg.accept()
    qtbot.waitUntil(lambda: bool(svc.updated) and not win.runner.busy, timeout=5000)
    saved = load_settings(sfile)
    assert (saved.retrieval.k, saved.retrieval.tau, saved.cfrag.lam, saved.ui.language) == (7, 0.7, 0.25, "zh")
    # the history lives beside the settings and survives a settings change
    assert load_ui_state(sfile.with_name("ui_state.toml")).recent_questions == (QUESTION,)
    assert svc.updated[-1].retrieval.k == 7
    assert win.query_bar.ask_btn.text() == "提问" and win.results.columns["causal"].header.text() == "因果重排序"
    assert "第" in win.results.why.body.text() or win.results.why.body.text() == ""


def test_an_invalid_setting_is_reported_and_the_dialog_stays_open(qtbot: Any, env: Any) -> None:
    win, svc, sfile = env
    win.open_settings()
    dlg = win.settings_dialog
    dlg.set_field("models", "generator", "")
    dlg.accept()
    assert dlg.isVisible()
    assert "models.generator" in dlg.error.text()
    assert not sfile.exists() and svc.updated == []
    dlg.reject()


def test_recent_questions_are_remembered(qtbot: Any, env: Any) -> None:
    win, _svc, sfile = env
    ask_and_wait(qtbot, win, "first question?")
    ask_and_wait(qtbot, win, "second question?")
    assert load_ui_state(sfile.with_name("ui_state.toml")).recent_questions == ("second question?",
                                                                               "first question?")
    box = win.query_bar.query
    assert [box.itemText(i) for i in range(box.count())] == ["second question?", "first question?"]


def test_export_writes_html_and_json(qtbot: Any, env: Any, tmp_path: Path) -> None:
    win, _svc, _ = env
    with pytest.raises(ValueError):
        win.export_report(tmp_path / "none.html")
    ask_and_wait(qtbot, win)
    html_path, json_path = win.export_report(tmp_path / "out" / "report.html")
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert data["question"] == QUESTION
    assert set(data["answers"]) == {"baseline", "causal", "cfrag"}
    assert "▲2" in html_path.read_text(encoding="utf-8")


def test_a_failing_search_is_reported_once_and_readably(qtbot: Any, env: Any) -> None:
    win, svc, _ = env
    svc.compare_error = FileNotFoundError(2, "No such file or directory", "/lib/chunks.faiss")
    line = win.query_bar.query.lineEdit()
    assert line is not None
    qtbot.keyClicks(line, QUESTION)
    qtbot.keyClick(line, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: bool(win.error_bar.shown) and not win.runner.busy, timeout=5000)
    assert len(win.error_bar.shown) == 1
    assert "/lib/chunks.faiss" in win.error_bar.label.text() and "Re-scan" in win.error_bar.label.text()
    assert win.results.columns["causal"].placeholder.isVisibleTo(win)


def test_a_missing_model_stops_the_remaining_generation_with_one_message(qtbot: Any, tmp_path: Path) -> None:
    i18n.set_language("en")
    gen = ScriptedGenerator(fail=ModelUnavailable("the generator model file /m/q.gguf does not exist"))
    svc = FakeService(tmp_path / "lib", Settings(), gen)
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "s.toml")
    qtbot.addWidget(win)
    win.ask(QUESTION)
    qtbot.waitUntil(lambda: bool(win.error_bar.shown) and not win.runner.busy, timeout=10000)
    assert len(win.error_bar.shown) == 1
    assert "/m/q.gguf" in win.error_bar.label.text()
    # the column whose ranking feeds the answers runs first (the hybrid, not calibrated yet)
    assert win.results.answers["causal"].status.text().startswith("failed")
    assert win.results.answers["baseline"].status.text() == "stopped"  # not run: same cause
    assert win.results.columns["causal"].model.rowCount() == 5  # the rankings are still there


def test_ask_again_while_the_question_is_prepared_is_ignored(qtbot: Any, tmp_path: Path) -> None:
    i18n.set_language("en")
    svc = FakeService(tmp_path / "lib", Settings(), ScriptedGenerator())
    calls = svc.compared
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "s.toml", auto_answer=False)
    qtbot.addWidget(win)
    win.ask(QUESTION)
    first = win.state
    win.ask(QUESTION)  # pressed again before the columns came: the work under way answers it
    assert win.state is first
    assert win.statusBar().currentMessage() == tr("query.preparing")
    qtbot.waitUntil(lambda: not win.runner.busy, timeout=10000)
    assert calls == [QUESTION]
    win.ask(QUESTION)  # once the columns are there, asking again asks again
    qtbot.waitUntil(lambda: not win.runner.busy, timeout=10000)
    assert calls == [QUESTION, QUESTION]


def test_the_first_window_and_a_restored_one_fit_the_screen_with_a_title_bar(qtbot: Any, tmp_path: Path) -> None:
    from PySide6.QtCore import QRect

    from rag_desktop.ui.main_window import FRAME_ALLOWANCE

    svc = FakeService(tmp_path / "lib", Settings(), ScriptedGenerator())
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "s.toml", auto_answer=False)
    qtbot.addWidget(win)
    screen = win.screen().availableGeometry()
    assert win.height() <= screen.height() - FRAME_ALLOWANCE and win.width() <= screen.width()
    # a geometry saved on a larger screen is clamped to this one
    win.setGeometry(QRect(0, 0, screen.width() + 900, screen.height() + 700))
    win.ui_state = dataclasses.replace(win.ui_state, window_geometry=bytes(win.saveGeometry().toBase64()).decode())
    win._restore_geometry()
    assert win.height() <= screen.height() - FRAME_ALLOWANCE and win.width() <= screen.width()


def test_a_file_deleted_since_it_was_indexed_is_marked_and_opening_it_says_so(qtbot: Any, env: Any,
                                                                             tmp_path: Path) -> None:
    win, _svc, _ = env
    ask_and_wait(qtbot, win)
    st = win.state
    assert st is not None and st.comparison is not None
    gone = str(tmp_path / "deleted.pdf")
    comp = st.comparison
    first = comp.baseline.hits[0]
    moved = dataclasses.replace(first, path=gone)

    def swap(r: Any) -> Any:
        return dataclasses.replace(r, hits=tuple(moved if h.unit_id == first.unit_id else h for h in r.hits))

    st.comparison = dataclasses.replace(comp, baseline=swap(comp.baseline), causal=swap(comp.causal))
    win.results.fill_columns(st)
    for m in ("baseline", "causal"):
        notes = {r.hit.unit_id: r.note for r in win.results.columns[m].model.rows}
        assert tr("col.file_missing") in notes[first.unit_id]
        assert all(tr("col.file_missing") not in n for u, n in notes.items() if u != first.unit_id)
    win.viewer.hide()
    win.open_hit(moved)  # no traceback, no viewer on a file that is not there: a sentence
    assert not win.viewer.isVisible()
    assert win.statusBar().currentMessage() == tr("viewer.file_missing", name="deleted.pdf")


def test_escape_stops_a_streaming_answer(qtbot: Any, tmp_path: Path) -> None:
    i18n.set_language("en")
    svc = FakeService(tmp_path / "lib", Settings(), ScriptedGenerator(delay=0.05))
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "s.toml")
    qtbot.addWidget(win)
    win.show()
    win.ask(QUESTION)
    qtbot.waitUntil(lambda: len(win.results.answers["baseline"].text()) > 0, timeout=10000)
    qtbot.keyClick(win, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not win.runner.busy, timeout=10000)
    assert win.results.answers["baseline"].status.text() == "stopped"
    assert len(win.results.answers["baseline"].text()) < len(ANSWER_TEXT)
    assert win.state is not None and win.state.cfrag is None
    assert win.error_bar.shown == []


def test_ctrl_l_focuses_the_question(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    win.activateWindow()
    win.libraries.panel.tree.setFocus()
    win.act_focus.trigger()
    box = win.query_bar.query
    assert box.hasFocus() or (box.lineEdit() is not None and box.lineEdit().hasFocus())
    assert win.act_focus.shortcut().toString() == "Ctrl+L"
    assert win.act_add.shortcut().toString() == "Ctrl+O"


def test_the_log_says_when_the_columns_and_the_first_answer_words_came(qtbot: Any, env: Any, caplog: Any) -> None:
    # What a person waits for, timed by the window itself (docs/benchmarks.md §5), once per question.
    win, _svc, _ = env
    with caplog.at_level(logging.INFO, logger="rag_desktop.ui.question_view"):
        ask_and_wait(qtbot, win)
    records = [r for r in caplog.records if r.name == "rag_desktop.ui.question_view"]
    qid = win.questions.state.qid
    cols = [r.args for r in records if r.getMessage().startswith(f"question {qid}: columns ")]
    words = [r.args for r in records if r.getMessage().startswith(f"question {qid}: first answer words ")]
    assert len(cols) == 1 and len(words) == 1, [r.getMessage() for r in records]
    secs = words[0][1]
    assert 0 <= cols[0][1] <= secs
    assert win.questions.state.first_words == pytest.approx(secs, abs=0.01)
