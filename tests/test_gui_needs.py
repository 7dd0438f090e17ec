"""An answer's "Which sources does it need?": offered with an answer that cites a source, run on the
window's worker through the question's flow (app.source_needs over the scripted generator), and drawn
as one plain line per cited source, in both languages. The window, its panes, the flow and the
needs logic are real; the generator is the scripted collaborator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_gui_support import FakeService
from window_helpers import shown_window, type_and_ask

from rag_desktop.core.needs import SourceNeed
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.main_window import MainWindow
from rag_desktop.ui.needs_view import needs_lines

pytestmark = pytest.mark.gui

QUESTION = "Why do people fail the Wason selection task?"


@pytest.fixture()
def win(qtbot: Any, tmp_path: Path) -> Iterator[MainWindow]:
    i18n.set_language("en")
    settings = Settings()
    with shown_window(qtbot, FakeService(tmp_path / "lib", settings), settings, tmp_path / "s.toml",
                      auto_answer=True) as w:
        yield w
    i18n.set_language("en")


def test_the_needs_button_answers_again_without_each_cited_source_and_says_which_are_needed(
        qtbot: Any, win: MainWindow) -> None:
    pane = win.results.answers["baseline"]
    assert not pane.needs.button.isVisibleTo(win)  # nothing to ask before an answer
    type_and_ask(qtbot, win, QUESTION)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    answer = win.state.answers["baseline"] if win.state is not None else None
    assert answer is not None and any(c.valid for c in answer.citations)
    assert pane.needs.button.isVisibleTo(win) and pane.needs.button.isEnabled()
    assert win.minimumSizeHint().width() <= 1280  # the offer fits a laptop screen, in both panes
    pane.needs.button.click()
    qtbot.waitUntil(lambda: pane.needs._needs is not None and not win.runner.busy, timeout=10000)
    cited = sorted({c.n for c in answer.citations if c.valid})
    lines = pane.needs.label.text().splitlines()
    # The scripted model writes the same answer without any one source: none is needed.
    assert [ln.split("]")[0] for ln in lines] == [f"[{n}" for n in cited]
    assert all("not needed" in ln for ln in lines) and "answers again" in lines[-1]
    assert pane.needs.label.isVisibleTo(win) and not pane.needs.button.isVisibleTo(win)  # its lines take the width
    qtbot.waitUntil(lambda: pane.needs.label.width() >= pane.width() - 40, timeout=3000)  # once laid out
    i18n.set_language("zh")
    win.retranslate()
    assert "非必需" in pane.needs.label.text() and pane.needs.button.text() == "哪些资料是必需的？"
    assert win.minimumSizeHint().width() <= 1280
    type_and_ask(qtbot, win, "What is matching bias?")  # a new answer forgets the old result
    qtbot.waitUntil(lambda: not pane.needs.label.isVisibleTo(win), timeout=10000)


def test_a_needed_source_is_said_with_what_the_answer_became_without_it() -> None:
    i18n.set_language("en")
    lines = needs_lines((SourceNeed(1, "Guide", True, 0.1, "It is valid for one year.", 3.2),
                         SourceNeed(2, "Notice", False, 0.9, "Valid for two years [1].", 2.9)))
    assert lines[0] == "[1] Guide: needed: without it the answer says “It is valid for one year.”"
    assert lines[1].startswith("[2] Notice: not needed") and "0.90" in lines[1]
    assert lines[1].endswith(" · 2 answers again, 6 s") and len(lines) == 2
    assert needs_lines(()) == ["the answer cites no source it was given"]


def test_the_check_in_progress_says_which_source_is_left_out_never_source_1_of_0() -> None:
    from rag_desktop.core.types import Progress
    from rag_desktop.ui.present import progress_text

    i18n.set_language("en")
    assert progress_text(Progress("needs", 0, 0, "")) == "checking which sources the answer needs…"
    assert progress_text(Progress("needs", 1, 2, "Guide")) == "answering again without source 2 of 2: Guide…"
    assert progress_text(Progress("needs", 2, 2, "")).startswith("answering again without source 2 of 2")


def test_a_check_stopped_midway_offers_the_button_again(qtbot: Any, tmp_path: Path) -> None:
    from test_gui_support import ScriptedGenerator

    i18n.set_language("en")
    settings = Settings()
    gen = ScriptedGenerator()
    svc = FakeService(tmp_path / "lib", settings, gen)
    with shown_window(qtbot, svc, settings, tmp_path / "s.toml", auto_answer=True) as w:
        type_and_ask(qtbot, w, QUESTION)
        qtbot.waitUntil(lambda: w.state is not None and w.state.cfrag is not None and not w.runner.busy,
                        timeout=10000)
        pane = w.results.answers["baseline"]
        gen.delay = 0.05  # each word of the answers written again takes a while: time to press Stop
        pane.needs.button.click()
        qtbot.waitUntil(lambda: w.runner.busy, timeout=5000)
        w.query_bar.stop_btn.click()
        qtbot.waitUntil(lambda: not w.runner.busy, timeout=10000)
        assert pane.needs._needs is None
        assert pane.needs.button.isVisibleTo(w) and pane.needs.button.isEnabled()  # can be asked again
