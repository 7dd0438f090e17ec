"""The comparison workspace at laptop sizes: rows that give the passage the width,
the CF-RAG column folding while empty, whole-word highlights, one numbering in the CF-RAG
trace, honest labels in both languages, the window state kept apart from the settings, and
Quit asking first while work runs.

The service is the in-memory collaborator of test_gui_support (canned rankings, a scripted
generator); the tokenizer behind the whole-word highlights is the real JiebaTokenizer.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox
from test_gui_support import FakeService, ScriptedGenerator, make_cf_result, make_comparison
from window_helpers import shown_window

from rag_desktop.app.config import load_settings, load_ui_state, save_settings
from rag_desktop.app.service import CausalOff, CausalOffCode, Comparison, causal_off_reason
from rag_desktop.backends.jieba_tokenizer import JiebaTokenizer
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import AbsorbedTerm, Keyword, KeywordSplit
from rag_desktop.ui import i18n
from rag_desktop.ui.columns import COL_CHANGE, COL_SCORES, COL_SNIPPET, COL_TITLE, RowDelegate, make_row
from rag_desktop.ui.main_window import MainWindow
from rag_desktop.ui.present import fmt, highlight_spans, hold_lines, why_lines
from rag_desktop.ui.results_panel import CF_COLLAPSED_WIDTH
from rag_desktop.ui.trace_view import DeltaBarDelegate, TraceView, signed

pytestmark = pytest.mark.gui
QUESTION = "Why do people fail the Wason selection task?"


@pytest.fixture(scope="module")
def tokenizer() -> JiebaTokenizer:
    tok = JiebaTokenizer("improved")
    tok.load()
    return tok


class WordService(FakeService):
    """The in-memory service plus the real tokenizer's word spans (as RagService.word_spans)."""

    def __init__(self, folder: Path, settings: Settings, tok: JiebaTokenizer,
                 generator: ScriptedGenerator | None = None) -> None:
        super().__init__(folder, settings, generator)
        self.tok = tok
        self.comparison: Comparison | None = None

    def word_spans(self, text: str) -> list[tuple[int, int, str, str]]:
        return self.tok.word_spans(text)

    def compare(self, query: str, level: str | None = None, k: int | None = None,
                ranking: str | None = None, *, translate: bool = True) -> Comparison:
        if self.comparison is not None:
            return self.comparison
        return super().compare(query, level, k, ranking, translate=translate)


@pytest.fixture()
def env(qtbot: Any, tmp_path: Path, tokenizer: JiebaTokenizer) -> Iterator[tuple[MainWindow, WordService, Path]]:
    i18n.set_language("en")
    sfile = tmp_path / "settings.toml"
    svc = WordService(tmp_path / "lib", Settings(), tokenizer)
    with shown_window(qtbot, svc, Settings(), sfile, auto_answer=False, size=(1280, 800)) as win:
        yield win, svc, sfile
    i18n.set_language("en")


def ask(qtbot: Any, win: MainWindow, q: str = QUESTION, cfrag: bool = False) -> None:
    win.ask(q)
    if cfrag:
        qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                        timeout=10000)
    else:
        qtbot.waitUntil(lambda: win.state is not None and win.state.comparison is not None and not win.runner.busy,
                        timeout=10000)


# --------------------------------------------------------------------------- whole-word highlights


def lit(text: str, terms: list[tuple[str, str]], tok: JiebaTokenizer) -> list[str]:
    return [text[s:e] for s, e, _k in highlight_spans(text, terms, tok.word_spans(text))]  # type: ignore[arg-type]


def test_latin_terms_light_whole_words_by_their_stem(tokenizer: JiebaTokenizer) -> None:
    text = "Someone was alone; one participant, then all participants. One more."
    assert lit(text, [("one", "A")], tokenizer) == ["one", "One"]  # never inside "someone", "alone"
    # the stored term is the stem: it lights every whole word with that stem
    assert lit(text, [("particip", "B")], tokenizer) == ["participant", "participants"]
    # a surface form lights only itself, never the start of a longer word
    assert lit(text, [("participant", "B")], tokenizer) == ["participant"]


def test_chinese_terms_light_jieba_words(tokenizer: JiebaTokenizer) -> None:
    text = "数据库的数据出境需要安全评估"
    words = [w for _s, _e, w, _k in tokenizer.word_spans(text)]
    assert "数据库" in words  # jieba keeps 数据库 as one word …
    got = lit(text, [("数据", "A")], tokenizer)
    assert got == ["数据"] and text.index("数据") not in [s for s, _e, _k in highlight_spans(
        text, [("数据", "A")], tokenizer.word_spans(text))]  # … so 数据 lights the 数据 of 数据出境 only
    # a domain term that jieba splits lights the run of words that spell it
    assert lit(text, [("安全评估", "B")], tokenizer) == ["安全评估"]
    assert lit(text, [("全评", "B")], tokenizer) == []  # never a piece of a word


def test_word_spans_offsets_are_those_of_the_text(tokenizer: JiebaTokenizer) -> None:
    text = "Ｗason 任务：selection tasks, 数据出境 ok"
    for s, e, word, key in tokenizer.word_spans(text):
        assert unicodedata.normalize("NFKC", text[s:e]).casefold() == word  # offsets into the text itself
        assert e > s and key
    assert ("tasks", "task") in [(w, k) for _s, _e, w, k in tokenizer.word_spans(text)]


def test_rows_in_the_window_highlight_whole_words(qtbot: Any, env: Any) -> None:
    win, svc, _ = env
    comp = make_comparison()
    text = "Someone alone asked one participant; the participants agreed."
    h0 = dataclasses.replace(comp.causal.hits[0], text=text)
    e0 = comp.causal.explanations[0]
    sp = KeywordSplit(e0.split.query_terms, (AbsorbedTerm("one", 0.2, "one", None),), (Keyword("particip", 0.1),))
    causal = dataclasses.replace(comp.causal, hits=(h0, *comp.causal.hits[1:]),
                                 explanations=(dataclasses.replace(e0, split=sp), *comp.causal.explanations[1:]))
    svc.comparison = dataclasses.replace(comp, causal=causal)
    ask(qtbot, win)
    row = win.results.columns["causal"].model.rows[0]
    shown = [(row.snippet[s:e], k) for s, e, k in row.spans]
    assert shown == [("one", "A"), ("participant", "B"), ("participants", "B")]


# --------------------------------------------------------------------------- layout


def test_rows_give_the_passage_the_full_width(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask(qtbot, win)
    col = win.results.columns["causal"]
    view = col.view
    assert [c for c in range(6) if not view.isColumnHidden(c)] == [COL_TITLE]  # one column: the whole row
    index = col.model.index(0, COL_TITLE)
    rect = view.visualRect(index)
    from PySide6.QtWidgets import QStyleOptionViewItem

    opt = QStyleOptionViewItem()
    view.initViewItemOption(opt)
    zones = col.delegate.zones(rect, opt, index)
    assert zones[COL_SNIPPET].width() >= rect.width() - 10  # the passage spans the row
    assert zones[COL_SCORES].top() > zones[COL_TITLE].top()  # several scores: a line of their own
    assert rect.height() >= col.delegate.height(view.fontMetrics()) - 1
    # the baseline row has no change column (no movement to show) but its score sits on the title line
    bcol = win.results.columns["baseline"]
    bindex = bcol.model.index(0, COL_TITLE)
    bz = bcol.delegate.zones(bcol.view.visualRect(bindex), opt, bindex)
    assert COL_CHANGE not in bz and bz[COL_SCORES].top() == bz[COL_TITLE].top()
    # tooltips still come from the part under the mouse
    assert col.delegate.zone_at(rect, opt, index, zones[COL_SCORES].center()) == COL_SCORES
    assert col.delegate.zone_at(rect, opt, index, zones[COL_SNIPPET].center()) == COL_SNIPPET


def test_cfrag_column_folds_until_it_has_rows(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    stack = win.results.stacks["cfrag"]
    assert win.results.columns["cfrag"].is_collapsed()
    assert stack.width() <= CF_COLLAPSED_WIDTH
    assert not win.results.answers["cfrag"].isVisibleTo(win)
    ask(qtbot, win)  # answers off: still nothing to show
    assert win.results.columns["cfrag"].is_collapsed() and stack.width() <= CF_COLLAPSED_WIDTH
    assert win.results.columns["cfrag"].placeholder.isVisibleTo(win)  # the strip says why it is empty
    win.query_bar.auto_answer.setChecked(True)
    ask(qtbot, win, cfrag=True)
    qtbot.waitUntil(lambda: stack.width() > CF_COLLAPSED_WIDTH, timeout=3000)
    assert not win.results.columns["cfrag"].is_collapsed() and win.results.answers["cfrag"].isVisibleTo(win)
    win.ask("another question")  # cleared for the new question: folds again
    qtbot.waitUntil(lambda: not win.runner.busy, timeout=10000)
    assert win.results.columns["cfrag"].model.rowCount() > 0 or win.results.columns["cfrag"].is_collapsed()


def test_cfrag_switch_gives_the_answers_without_cfrag_and_is_remembered(qtbot: Any, env: Any) -> None:
    """CF-RAG switched on and off independently of the answers."""
    win, svc, sfile = env
    assert not win.query_bar.run_cf.isEnabled()  # answers off: CF-RAG (which writes with the same model) too
    win.query_bar.auto_answer.setChecked(True)
    assert win.query_bar.run_cf.isEnabled() and win.query_bar.run_cf.isChecked()  # on by default
    win.query_bar.run_cf.setChecked(False)
    assert load_ui_state(sfile.with_name("ui_state.toml")).run_cfrag is False  # remembered at once
    ask(qtbot, win)
    qtbot.waitUntil(lambda: win.state is not None and bool(win.state.answers) and not win.runner.busy,
                    timeout=10000)
    assert svc.answer_calls and win.state.cfrag is None  # the answers ran, CF-RAG did not
    assert "switched off" in win.results.columns["cfrag"].placeholder.text()
    assert "off" in win.results.trace_view.empty.text()
    n = len(svc.answer_calls)
    win.query_bar.run_cf.setChecked(True)  # on again: CF-RAG runs for the question on screen
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert len(svc.answer_calls) == n  # the answers were not asked again
    win.query_bar.run_cf.setChecked(False)  # a finished CF-RAG answer stays
    assert win.state.cfrag is not None and win.results.columns["cfrag"].model.rowCount() > 0
    assert len(svc.answer_calls) == n
    assert load_ui_state(sfile.with_name("ui_state.toml")).run_cfrag is False
    i18n.set_language("zh")
    win.retranslate()
    run_cf = win.query_bar.run_cf
    assert run_cf.text() == "CF-RAG" and "CF-RAG" in run_cf.toolTip() and "只生成回答" in run_cf.toolTip()


def test_switching_cfrag_off_stops_it_and_says_so(qtbot: Any, env: Any) -> None:
    import threading

    win, svc, _ = env
    release = threading.Event()
    started = threading.Event()
    plain = svc.cfrag_or_abstain

    def slow_cfrag(query: str, cancel: Any = None, standard: Any = None) -> Iterator[Any]:
        started.set()
        while not release.is_set():  # CF-RAG's minutes, until the switch cancels it
            if cancel is not None:
                cancel.raise_if_set()
            release.wait(0.02)
        yield from plain(query, cancel, standard)

    svc.cfrag_or_abstain = slow_cfrag
    win.query_bar.auto_answer.setChecked(True)
    win.ask(QUESTION)
    qtbot.waitUntil(started.is_set, timeout=10000)
    win.query_bar.run_cf.setChecked(False)
    qtbot.waitUntil(lambda: not win.runner.busy, timeout=3000)  # stopped within the wait, not at the end
    release.set()
    assert win.state is not None and win.state.cfrag is None
    assert "switched off" in win.results.columns["cfrag"].placeholder.text()  # not "CF-RAG was stopped"
    assert win.state.answers  # the answers are kept


def test_headings_line_up_before_the_first_question(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ys = {m: win.results.columns[m].header.mapTo(win, QPoint(0, 0)).y() for m in ("baseline", "causal", "cfrag")}
    assert len(set(ys.values())) == 1, ys


def test_chips_scroll_instead_of_cutting_off(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    comp = make_comparison()
    e0 = comp.causal.explanations[0]
    many = tuple(Keyword(f"term{i:02d}", 0.01) for i in range(60))
    sp = KeywordSplit(e0.split.query_terms, e0.split.a_terms, many)
    win.results.chips.set_split(sp, "Doc", {})
    qtbot.wait(50)
    scroll = win.results.chips.chip_scroll
    area = win.results.chips.chip_area
    last = win.results.chips.chips()[-1]
    assert area.minimumHeight() >= last.geometry().bottom()  # every chip is inside the scrolled area
    assert scroll.verticalScrollBar().maximum() > 0  # and the scrollbar shows there is more


# --------------------------------------------------------------------------- the Why card


def test_why_card_fits_at_1280_by_770_without_scrolling(qtbot: Any, env: Any) -> None:
    """The card opens with its sentence and a closed fold; both fit the strip under the columns."""
    win, _svc, _ = env
    win.resize(1280, 770)
    for lang in ("en", "zh"):
        win.apply_settings(win.settings.replace("ui", language=lang))
        ask(qtbot, win)
        for row in range(win.results.columns["causal"].model.rowCount()):
            win.results.columns["causal"].select_row(row)
            qtbot.wait(10)
            card = win.results.why
            assert card.sentence.text() and not card.body_scroll.isVisible()
            inside = card.contentsRect()
            for part in (card.title, card.sentence, card.fold):
                assert part.isVisible() and inside.contains(part.geometry()), (lang, row, part.objectName())
                if part is not card.fold:
                    assert part.height() >= part.heightForWidth(part.width()), (lang, row)  # no line cut off


def test_why_card_says_what_held_a_rank() -> None:
    from test_gui_support import make_lists

    _base, causal = make_lists()
    flat = tuple(dataclasses.replace(e, s_c=0.81 + 0.001 * i, baseline_rank=e.new_rank)
                 for i, e in enumerate(causal.explanations))
    ranked = dataclasses.replace(causal, explanations=flat)
    e = flat[1]  # rank 2, kept
    lines = why_lines(e, None, 0.5, None, ranked)
    text = "\n".join(lines)
    assert "kept its baseline rank 2" in text
    assert "s_c of every candidate lies within 0.810–0.814" in text and "cannot separate them" in text
    assert f"below the {fmt(flat[0].s_hybrid)} of rank 1" in text and f"above the {fmt(flat[2].s_hybrid)} of rank 3" \
        in text
    off = dataclasses.replace(ranked, method="gated_off")
    assert hold_lines(e, off) == [i18n.tr("why.hold_baseline_order")]
    i18n.set_language("zh")
    try:
        zh = "\n".join(why_lines(e, None, 0.5, None, ranked))
        assert "重排序无法区分它们" in zh and "s_c of" not in zh
    finally:
        i18n.set_language("en")


# --------------------------------------------------------------------------- CF-RAG trace


def test_trace_numbers_hypotheses_and_passages_one_way(qtbot: Any) -> None:
    i18n.set_language("en")
    tv = TraceView()
    qtbot.addWidget(tv)
    res = make_cf_result()
    tv.set_trace(res.trace)
    first = [tv.hy_table.item(r, 0).text() for r in range(tv.hy_table.rowCount())]
    assert first == ["✔ H1", "H2"]  # hypothesis index 0 is H1 in the table …
    assert "Chosen hypothesis: H1" in tv.de_label.text()  # … and in the decision
    assert "#0" not in tv.de_label.text() and "#0" not in tv.cl_label.text()
    ids = [tv.ev_table.item(r, 0).text() for r in range(tv.ev_table.rowCount())]
    assert sorted(ids) == ["#1", "#2", "#3", "#4", "#5"]  # passages from #1, as in the clusters
    assert "#1 " in tv.cl_label.text() and "E1" in tv.cl_label.text() and "C1" in tv.cl_label.text()
    dup = next(r for r in range(tv.ev_table.rowCount()) if tv.ev_table.item(r, 0).text() == "#5")
    assert tv.ev_table.item(dup, 6).text().endswith("→ #1")
    # one-line explanations next to the numbers
    assert "Div_ans" in tv.cf_note.text() and "φ_coh" in tv.hy_note.text() and "λ = 0.40" in tv.hy_note.text()
    assert "Div_ans 1.00" in tv.cf_table.item(0, 4).text()
    # the header and the "kept" status agree: kept does not claim Δ > 0
    assert "whatever its Δ" in tv.ev_note.text()


def test_trace_delta_bars_are_proportional_and_signed(qtbot: Any) -> None:
    tv = TraceView()
    qtbot.addWidget(tv)
    res = make_cf_result()
    ev = list(res.trace.evidence)
    ev[0] = dataclasses.replace(ev[0], s_q=0.502, max_s_cf=0.5)  # Δ = +0.002
    ev[1] = dataclasses.replace(ev[1], s_q=0.498, max_s_cf=0.5)  # Δ = −0.002
    tv.set_trace(dataclasses.replace(res.trace, evidence=tuple(ev)))
    d = tv.ev_table.itemDelegateForColumn(5)
    assert isinstance(d, DeltaBarDelegate)
    margins = [e.s_q - (e.max_s_cf or 0.0) for e in ev]
    assert d.scale == pytest.approx(max(abs(m) for m in margins))
    assert signed(0.002) == "+0.002" and signed(-0.002) == "−0.002" and signed(-0.0001) == "0.000"
    assert fmt(-0.0004) == "0.000" and fmt(-0.2) == "-0.200"


def test_trace_says_an_empty_rationale_and_follows_the_run(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    tv = win.results.trace_view
    res = make_cf_result()
    hyps = (dataclasses.replace(res.trace.hypotheses[0], rationale=""), *res.trace.hypotheses[1:])
    dec = dataclasses.replace(res.trace.decision, final_rationale="  ")
    tv.set_trace(dataclasses.replace(res.trace, hypotheses=hyps, decision=dec))
    assert tv.hy_table.item(0, 2).text() == "(the model gave no rationale)"
    assert "Rationale: (the model gave no rationale)" in tv.de_label.text()
    # live: the trace tab shows the step CF-RAG is at, not "queued"
    win.query_bar.auto_answer.setChecked(True)
    seen: list[str] = []
    orig = win.results.show_cf_progress

    def spy(p: Any) -> None:
        orig(p)
        seen.append(tv.empty.text())

    win.results.show_cf_progress = spy  # type: ignore[method-assign]  # read when each CF-RAG step arrives
    ask(qtbot, win, cfrag=True)
    assert any("CF-RAG is running" in s and "/4" in s for s in seen), seen


# --------------------------------------------------------------------------- honest labels


def test_chinese_labels_are_chinese(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    win.apply_settings(win.settings.replace("ui", language="zh"))
    ask(qtbot, win)
    sub = win.results.columns["causal"].subtitle.text()
    assert "calibrated" not in sub and "hybrid" not in sub and "入库时校准" in sub and "混合" in sub
    win.apply_settings(win.settings.replace("ui", language="en"))
    assert win.query_bar.level_box.currentText() == "whole documents"
    fm = win.query_bar.level_box.fontMetrics()
    qtbot.waitUntil(lambda: win.query_bar.level_box.width() >= fm.horizontalAdvance("whole documents"),
                    timeout=3000)  # not "whole dc…"
    assert "calibrated at ingest: 97th percentile" in win.results.columns["causal"].subtitle.text()


def test_labels_are_plain_text(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    ask(qtbot, win)
    res = win.results
    for lab in (res.columns["causal"].header, res.columns["causal"].subtitle, res.columns["causal"].placeholder,
                res.why.title, res.why.body, res.chips.title, res.trace_view.ev_note, res.trace_view.de_label):
        assert lab.textFormat() == Qt.TextFormat.PlainText, lab
    # a passage is painted as text: markup in a document stays visible characters
    d = win.results.columns["causal"].delegate
    assert isinstance(d, RowDelegate)
    from PySide6.QtWidgets import QStyleOptionViewItem

    opt = QStyleOptionViewItem()
    opt.font = win.font()
    doc = d._document("<b>bold</b> & co", [], 300, opt, False)
    assert doc.toPlainText() == "<b>bold</b> & co"
    row = make_row(win.results.columns["causal"].model.rows[0].hit, None, [("s", 0.5)], [("bold", "A")])
    assert row.snippet  # built from the flat text


def test_one_citation_is_singular(qtbot: Any, env: Any) -> None:
    from rag_desktop.core.types import Answer, Citation

    win, _svc, _ = env
    pane = win.results.answers["baseline"]
    h = make_comparison().baseline.hits[0]
    pane.set_answer(Answer("Text [1].", (Citation(1, True, h.doc_id, h.unit_id, h.title, h.path, 1),), (h,)))
    assert pane.status.text() == "done · 1 citation"
    pane.sources_btn.setChecked(True)
    hh = pane.sources.horizontalHeader()
    assert pane.sources.item(0, 0).text() == "[1]" and hh.sectionSize(0) >= pane.sources.fontMetrics() \
        .horizontalAdvance("[1]")
    assert hh.sectionSize(1) >= 100  # the document column is never squeezed empty
    # A long passage wraps into a tall row: n and Document sit at its top (centred, they fell below
    # the visible part of the row and looked empty) and the row is capped (the tooltip has it all).
    from PySide6.QtCore import Qt

    from rag_desktop.ui.answer_pane import SOURCE_ROW_LINES

    long_hit = dataclasses.replace(h, text="A long passage about the Wason selection task. " * 40)
    pane.set_answer(Answer("Text [1].", (Citation(1, True, h.doc_id, h.unit_id, h.title, h.path, 1),), (long_hit,)))
    for j in range(4):
        assert pane.sources.item(0, j).textAlignment() & Qt.AlignmentFlag.AlignTop
    assert pane.sources.rowHeight(0) <= SOURCE_ROW_LINES * pane.sources.fontMetrics().lineSpacing() + 8


def test_causal_off_reason_is_typed_and_worded_in_the_ui(qtbot: Any, env: Any) -> None:
    assert causal_off_reason("hybrid", None) is None
    chosen = causal_off_reason("baseline", {"decision": "neither"})
    assert chosen == CausalOff(CausalOffCode.CHOSEN)  # the user's choice, whatever the gate said
    gate = causal_off_reason("gated", {"decision": "neither", "metric": "MRR@10", "n_probes": 12,
                                       "delta_causal": -0.05, "delta_hybrid": -0.01, "reliability": 0.9})
    assert gate == CausalOff(CausalOffCode.GATE, "MRR@10", 12, -0.05, -0.01, 0.9)
    assert causal_off_reason("gated", {"decision": "hybrid"}) is None
    win, svc, _ = env
    comp = make_comparison()
    svc.comparison = dataclasses.replace(comp, causal_variant="baseline", causal_off=chosen,
                                         causal=dataclasses.replace(comp.causal, method="baseline"))
    ask(qtbot, win)
    sub = win.results.columns["causal"].subtitle.text()
    assert "chosen in Settings" in sub and "gate" not in sub
    svc.comparison = dataclasses.replace(svc.comparison, causal_off=gate)
    i18n.set_language("zh")
    win.retranslate()
    ask(qtbot, win)
    sub = win.results.columns["causal"].subtitle.text()
    assert "校准门控" in sub and "MRR@10" in sub and "-0.050" in sub and "90%" in sub
    assert "switched off" not in sub
    # With the verdict in the heading the subtitle does not say it again (at 1280×800 the
    # repeat pushed the rows of every column down); its numbers move to the heading's tooltip.
    from rag_desktop.app.service import Verdict

    svc.comparison = dataclasses.replace(svc.comparison, verdict=Verdict("baseline", "gate", {
        "decision": "neither", "n_probes": 12, "reliability": 0.9}).to_json())
    ask(qtbot, win)
    col = win.results.columns["causal"]
    assert "MRR@10" not in col.subtitle.text() and "MRR@10" in col.header.toolTip()
    i18n.set_language("en")


def test_settings_explain_symbols_and_hide_server_fields(qtbot: Any, env: Any) -> None:
    from rag_desktop.ui.settings_dialog import SettingsDialog

    dlg = SettingsDialog(Settings())
    qtbot.addWidget(dlg)
    dlg.show()
    assert not dlg.row_visible("models", "openai_base_url") and not dlg.row_visible("models", "openai_model")
    dlg.set_field("models", "generator_backend", "openai")
    assert dlg.row_visible("models", "openai_base_url") and dlg.row_visible("models", "openai_model")
    threads = dlg.editors[("models", "threads")]
    assert threads.text().startswith("automatic")
    texts = [w.text() for w in dlg.findChildren(QLabel)]
    assert any(t.startswith("τ: a document term") for t in texts)  # shown, not only on hover
    assert any("keywords K_q are taken from the question" in t for t in texts)


# --------------------------------------------------------------------------- window state


def test_asking_never_rewrites_the_settings_file(qtbot: Any, env: Any) -> None:
    win, _svc, sfile = env
    save_settings(Settings(), sfile)
    # a hand edit while the app is open
    sfile.write_text(sfile.read_text(encoding="utf-8").replace("k = 20", "k = 7"), encoding="utf-8")
    edited = sfile.read_text(encoding="utf-8")
    ask(qtbot, win, "first question?")
    ask(qtbot, win, "second question?")
    assert sfile.read_text(encoding="utf-8") == edited and load_settings(sfile).retrieval.k == 7
    state = load_ui_state(sfile.with_name("ui_state.toml"))
    assert state.recent_questions == ("second question?", "first question?")


def test_an_old_history_in_settings_toml_is_taken_over(qtbot: Any, tmp_path: Path,
                                                       tokenizer: JiebaTokenizer) -> None:
    sfile = tmp_path / "settings.toml"
    sfile.write_text('[retrieval]\nk = 9\n\n[ui]\nlanguage = "en"\nrecent_questions = ["old one?", "older?"]\n',
                     encoding="utf-8")
    settings = load_settings(sfile)  # the legacy key is accepted, not an "unknown setting"
    assert settings.retrieval.k == 9
    win = MainWindow(WordService(tmp_path / "lib", settings, tokenizer), settings, settings_file=sfile,
                     auto_answer=False)
    qtbot.addWidget(win)
    assert [win.query_bar.query.itemText(i) for i in range(win.query_bar.query.count())] == ["old one?", "older?"]
    ask(qtbot, win, "new?")
    assert load_ui_state(tmp_path / "ui_state.toml").recent_questions == ("new?", "old one?", "older?")
    win.close()


def test_the_window_size_is_restored(qtbot: Any, tmp_path: Path, tokenizer: JiebaTokenizer) -> None:
    sfile = tmp_path / "settings.toml"
    win = MainWindow(WordService(tmp_path / "lib", Settings(), tokenizer), Settings(), settings_file=sfile,
                     auto_answer=False)
    qtbot.addWidget(win)
    win.show()
    # the offscreen screen is 800×800 and the window's minimum is wider: a height shows the restore
    w = win.width()
    win.resize(w, 612)
    qtbot.waitUntil(lambda: win.height() == 612, timeout=3000)
    win.close()
    assert load_ui_state(tmp_path / "ui_state.toml").window_geometry
    again = MainWindow(WordService(tmp_path / "lib", Settings(), tokenizer), Settings(), settings_file=sfile,
                       auto_answer=False)
    qtbot.addWidget(again)
    assert again.height() == 612 and again.width() >= min(w, 798)  # width: clamped to the 800 px screen


def test_a_broken_state_file_is_named_and_loses_nothing_else(tmp_path: Path) -> None:
    from rag_desktop.core.settings import SettingsError

    p = tmp_path / "ui_state.toml"
    p.write_text("recent_questions = 3\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"ui_state\.toml.*recent_questions"):
        load_ui_state(p)
    p.write_text("colour = 'red'\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="unknown key colour"):
        load_ui_state(p)
    p.write_text("run_cfrag = 'no'\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="run_cfrag: expected true or false"):
        load_ui_state(p)
    p.write_text("recent_questions = []\n", encoding="utf-8")  # a state file from before the switch
    assert load_ui_state(p).run_cfrag is True


def test_the_window_says_so_and_keeps_a_broken_state_file(qtbot: Any, tmp_path: Path,
                                                          tokenizer: JiebaTokenizer) -> None:
    i18n.set_language("en")
    state = tmp_path / "ui_state.toml"
    state.write_text("recent_questions = [\n", encoding="utf-8")  # broken by hand
    win = MainWindow(WordService(tmp_path / "lib", Settings(), tokenizer), Settings(),
                     settings_file=tmp_path / "settings.toml", auto_answer=False)
    qtbot.addWidget(win)
    assert win.error_bar.shown and "ui_state.toml" in win.error_bar.label.text()
    ask(qtbot, win, "a question")
    win.close()
    assert state.read_text(encoding="utf-8") == "recent_questions = [\n"  # nothing lost


# --------------------------------------------------------------------------- Quit


def test_quit_asks_while_work_runs(qtbot: Any, tmp_path: Path, tokenizer: JiebaTokenizer) -> None:
    i18n.set_language("en")
    svc = WordService(tmp_path / "lib", Settings(), tokenizer, ScriptedGenerator(delay=0.05))
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "s.toml", auto_answer=True)
    qtbot.addWidget(win)
    win.show()
    actions = win.file_menu.actions()
    assert actions[-1] is win.act_quit and actions[-2].isSeparator()  # not right under Settings…
    win.ask(QUESTION)
    qtbot.waitUntil(lambda: len(win.results.answers["baseline"].text()) > 0, timeout=10000)
    assert win.work_running()

    def answer(button: str) -> None:
        box = QApplication.activeModalWidget()
        assert isinstance(box, QMessageBox) and "still running" in box.text()
        target = next(b for b in box.buttons() if b.text() == button)
        target.click()

    QTimer.singleShot(100, lambda: answer("Keep working"))
    assert win.request_quit() is False and win.isVisible()
    QTimer.singleShot(100, lambda: answer("Stop and quit"))
    assert win.request_quit() is True and not win.isVisible()
    win.runner.wait(5000)


def test_quit_when_idle_does_not_ask(qtbot: Any, env: Any) -> None:
    win, _svc, _ = env
    assert not win.work_running()
    assert win.request_quit() is True


def test_model_preparation_is_not_shown_as_cfrag_steps(qtbot: Any, env: Any) -> None:
    from rag_desktop.core.types import Progress

    win, _svc, _ = env
    ask(qtbot, win)
    assert win.state is not None
    win.results.show_cf_progress(Progress("model_ready", 491400064, 491400064, "ready"))
    text = win.results.trace_view.empty.text() + win.results.columns["cfrag"].placeholder.text()
    assert "491400064" not in text and "starting" in text  # bytes of the model file are not "step n/N"
    # and the status line says the model's name and size, not its bytes
    from rag_desktop.ui.present import progress_text

    ready = Progress("model_ready", 491400064, 491400064, "Qwen2.5 0.5B")
    assert progress_text(ready) == "Qwen2.5 0.5B is ready (491 MB)"
    win.results.show_cf_progress(Progress("cfrag.hypotheses", 8, 10, ""))
    assert "step 8/10" in win.results.trace_view.empty.text()
