"""The window's line for questions across languages, with the fake service:
"also searched as: …" when the columns fused two phrasings, the fallback's reason when the question
was ranked as typed only, nothing for a single-language library; both UI languages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_gui_support import FakeService

from rag_desktop.app.crosslang import CrossLanguage, CrossStatus
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.main_window import MainWindow
from rag_desktop.ui.present import crosslang_text

pytestmark = pytest.mark.gui

TRANSLATED = "How does ColBERT's late interaction score passages?"


def _window(qtbot: Any, svc: Any, tmp_path: Path) -> MainWindow:
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "settings.toml", auto_answer=False)
    qtbot.addWidget(win)
    qtbot.waitUntil(lambda: win.libraries.listing is not None and not win.runner.busy, timeout=5000)
    return win


def _ask(qtbot: Any, win: MainWindow, q: str) -> None:
    win.ask(q)
    qtbot.waitUntil(lambda: win.state is not None and win.state.comparison is not None and not win.runner.busy,
                    timeout=10000)


def test_the_window_says_what_else_the_question_was_searched_as(qtbot: Any, tmp_path: Path) -> None:
    i18n.set_language("en")
    svc = FakeService(tmp_path / "lib", Settings())
    first_doc = 1  # make_lists' baseline: doc ids 1..; the translation ranked doc 1 best
    svc.cross_language = CrossLanguage(CrossStatus.FUSED, "zh", "en", TRANSLATED, 1.24, 30.0, fused=True,
                                       translated_found={"baseline": (first_doc,)})
    win = _window(qtbot, svc, tmp_path)
    _ask(qtbot, win, "ColBERT 的后期交互是如何给段落打分的？")
    assert not win.query_bar.crosslang_line.isHidden()
    assert win.query_bar.crosslang_line.text() == f"also searched as: {TRANSLATED} (translated in 1.2 s)"
    assert "also searched as" in win.statusBar().currentMessage()
    # the row the translated question found best is marked; the others are not
    notes = {r.hit.doc_id: r.note for r in win.results.columns["baseline"].model.rows}
    assert notes[first_doc] == "found by the translated question"
    assert all(n == "" for d, n in notes.items() if d != first_doc)
    i18n.set_language("zh")
    try:
        win.retranslate()
        assert win.query_bar.crosslang_line.text() == f"同时检索：{TRANSLATED}（翻译用时 1.2 秒）"
    finally:
        i18n.set_language("en")
        win.retranslate()

    # a fallback says why the question was ranked as typed only
    svc.cross_language = CrossLanguage(CrossStatus.TIMEOUT, "zh", "en", "", 30.2, 30.0)
    _ask(qtbot, win, "另一个问题？")
    assert win.query_bar.crosslang_line.text() == "ranked as typed only: translating the question took over 30 s"
    svc.cross_language = CrossLanguage(CrossStatus.NO_GENERATOR, "zh", "en")
    _ask(qtbot, win, "第三个问题？")
    assert "no local model" in win.query_bar.crosslang_line.text()
    assert win.query_bar.crosslang_line.toolTip() == ""
    # a refused translation: the line says it failed, the hover says why
    svc.cross_language = CrossLanguage(CrossStatus.FAILED, "en", "zh", "", 4.0, 30.0,
                                       "the reply answered the question instead of translating it")
    _ask(qtbot, win, "What did the Wason selection task show?")
    assert win.query_bar.crosslang_line.text() == "ranked as typed only: translating the question failed"
    assert "answered the question instead of translating it" in win.query_bar.crosslang_line.toolTip()

    # a single-language library: no line at all
    svc.cross_language = CrossLanguage(CrossStatus.SINGLE, "en")
    _ask(qtbot, win, "Why do people fail the Wason selection task?")
    line = win.query_bar.crosslang_line
    assert line.isHidden() and line.text() == "" and line.toolTip() == ""


def test_every_status_has_words_in_both_languages() -> None:
    for lang in ("en", "zh"):
        i18n.set_language(lang)
        try:
            for status in (CrossStatus.FUSED, CrossStatus.TIMEOUT, CrossStatus.NO_GENERATOR, CrossStatus.FAILED):
                text = crosslang_text(CrossLanguage(status, "zh", "en", TRANSLATED, 0.0, 30.0))
                assert text and "{" not in text and not text.startswith("crosslang.")
            for status in (CrossStatus.OFF, CrossStatus.SINGLE, CrossStatus.OTHER):
                assert crosslang_text(CrossLanguage(status, "zh")) == ""
            assert crosslang_text(None) == ""
        finally:
            i18n.set_language("en")
