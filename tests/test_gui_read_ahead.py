"""The question's first answer prompt read while it is typed, in the window (ui.query_bar.QueryBar.paused,
ui.question_view.QuestionView.read_ahead, app.read_ahead). The service is a collaborator with canned results
(test_gui_support.FakeService); the window, its timer and the worker bridge are real."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from test_gui_support import FakeService, make_comparison
from window_helpers import shown_window

from rag_desktop.app.question_flow import QuestionFlow
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.main_window import MainWindow
from rag_desktop.ui.query_bar import PAUSE_MS

pytestmark = pytest.mark.gui
QUESTION = "Why do people fail the Wason selection task?"


@pytest.fixture()
def env(qtbot: Any, tmp_path: Path) -> Iterator[tuple[MainWindow, FakeService]]:
    i18n.set_language("en")
    settings = Settings()
    svc = FakeService(tmp_path / "lib", settings)
    with shown_window(qtbot, svc, settings, tmp_path / "settings.toml", auto_answer=True) as win:
        yield win, svc


def _type(qtbot: Any, win: MainWindow, text: str) -> None:
    line = win.query_bar.query.lineEdit()
    assert line is not None
    qtbot.keyClicks(line, text)


def test_a_pause_in_typing_reads_the_words_so_far_in_the_background(qtbot: Any, env: Any) -> None:
    win, svc = env
    svc.read_ahead_gate = threading.Event()  # the read ahead runs until set
    _type(qtbot, win, "Why do people fail")
    assert svc.read_aheads == []  # not while the keys come
    qtbot.waitUntil(lambda: len(svc.read_aheads) == 1, timeout=PAUSE_MS * 10)
    first = QuestionFlow(svc, "Why do people fail").answer_groups(make_comparison("Why do people fail"))[0]
    assert svc.read_aheads == [("Why do people fail", first.ranked.method)]  # the list the first answer reads
    assert not win.runner.busy and not win.query_bar.stop_btn.isEnabled()  # nobody waits for it
    _type(qtbot, win, " the Wason")  # a pause on other words while it runs: it stops, and they are read
    qtbot.waitUntil(lambda: len(svc.read_aheads) == 2, timeout=PAUSE_MS * 10)
    assert svc.read_aheads[1][0] == "Why do people fail the Wason"
    _type(qtbot, win, " selection task?")
    qtbot.waitUntil(lambda: len(svc.read_aheads) == 3, timeout=PAUSE_MS * 10)
    assert svc.read_aheads[2][0] == QUESTION
    svc.read_ahead_gate.set()
    qtbot.wait(PAUSE_MS * 2)
    assert len(svc.read_aheads) == 3 and not win.runner.busy


def test_enter_on_the_words_read_ahead_takes_it_over_and_other_words_stop_it(qtbot: Any, env: Any) -> None:
    win, svc = env
    svc.read_ahead_gate = threading.Event()  # the read ahead runs until set (or stopped)
    compared = svc.compared
    _type(qtbot, win, QUESTION)
    qtbot.waitUntil(lambda: len(svc.read_aheads) == 1, timeout=PAUSE_MS * 10)
    line = win.query_bar.query.lineEdit()
    qtbot.keyClick(line, Qt.Key.Key_Return)
    # the columns at once, from the read ahead's ranking; its reading goes on, the answers behind it
    assert win.state is not None and win.state.comparison is not None and compared == [QUESTION]
    assert win.runner.busy and not svc.answer_calls
    qtbot.wait(PAUSE_MS)
    assert not svc.answer_calls  # nothing stopped it: the answers wait for it
    svc.read_ahead_gate.set()
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert svc.answer_calls and compared == [QUESTION]
    # other words than the ones read ahead: the read ahead is stopped and the question ranked anew
    svc.read_ahead_gate = threading.Event()
    line.clear()
    _type(qtbot, win, "What does the CardLogic app do?")
    qtbot.waitUntil(lambda: len(svc.read_aheads) == 2, timeout=PAUSE_MS * 10)
    _type(qtbot, win, " Briefly.")
    qtbot.keyClick(line, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert compared[-1] == "What does the CardLogic app do? Briefly." and len(svc.read_aheads) == 2
    # a question asked while a read ahead it took over still runs stops it, as the rest of its work
    svc.read_ahead_gate = threading.Event()  # never set
    line.clear()
    _type(qtbot, win, QUESTION)
    qtbot.waitUntil(lambda: len(svc.read_aheads) == 3, timeout=PAUSE_MS * 10)
    qtbot.keyClick(line, Qt.Key.Key_Return)
    assert win.runner.busy  # taken over: its answers wait for it
    line.clear()
    _type(qtbot, win, "What caused the outage?")
    win.ask()
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert compared[-1] == "What caused the outage?"


def test_nothing_is_read_ahead_with_answers_off_or_the_setting_off(qtbot: Any, env: Any) -> None:
    win, svc = env
    win.query_bar.auto_answer.setChecked(False)
    _type(qtbot, win, "Why do people fail")
    qtbot.wait(PAUSE_MS * 3)
    assert svc.read_aheads == []
    win.query_bar.auto_answer.setChecked(True)
    win.settings = win.settings.replace("generation", read_ahead=False)
    _type(qtbot, win, " the Wason")
    qtbot.wait(PAUSE_MS * 3)
    assert svc.read_aheads == []


def test_a_recent_question_picked_from_the_list_is_read_ahead(qtbot: Any, env: Any) -> None:
    win, svc = env
    win.query_bar.set_history([QUESTION, "What does the CardLogic app do?"])
    win.query_bar.query.setCurrentIndex(1)
    win.query_bar.query.activated.emit(1)  # what the list emits when a person picks an item
    qtbot.waitUntil(lambda: len(svc.read_aheads) == 1, timeout=PAUSE_MS * 10)
    assert svc.read_aheads[0][0] == "What does the CardLogic app do?"
