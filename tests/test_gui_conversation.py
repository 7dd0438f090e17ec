"""The conversation panel in the main window: a follow-up is rewritten and shown,
editable, before retrieval; the thread is kept, cleared and exported; answer panes show what
they are doing. The service is the widget tests' FakeService with a scripted rewrite (a
collaborator); the window, the panel, the worker bridge and the conversation logic are real.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from test_gui_support import FakeService
from window_helpers import shown_window, type_and_ask

from rag_desktop.core.conversation import Conversation, Rewrite, Turn
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Progress
from rag_desktop.ui import i18n
from rag_desktop.ui.main_window import MainWindow
from rag_desktop.ui.present import progress_text

pytestmark = pytest.mark.gui

FIRST = "Why do people fail the Wason selection task?"
FOLLOW = "and in the drinking-age version?"
STANDALONE = "Why do people pass the drinking-age version of the Wason selection task?"


class ConversingService(FakeService):
    def __init__(self, folder: Path, settings: Settings) -> None:
        super().__init__(folder, settings)
        self.saved = Conversation()
        self.rewrites: list[tuple[str, int]] = []

    def load_conversation(self) -> Conversation:
        return self.saved

    def save_conversation(self, conversation: Conversation) -> None:
        self.saved = conversation

    def rewrite_followup(self, question: str, conversation: Conversation, cancel: Any = None) -> Rewrite:
        self.rewrites.append((question, len(conversation.turns)))
        return Rewrite(question, STANDALONE, True, seconds=0.4)


@pytest.fixture()
def env(qtbot: Any, tmp_path: Path) -> Iterator[tuple[MainWindow, ConversingService]]:
    i18n.set_language("en")
    svc = ConversingService(tmp_path / "lib", Settings())
    with shown_window(qtbot, svc, Settings(), tmp_path / "settings.toml", auto_answer=True) as win:
        yield win, svc


def test_follow_up_is_shown_rewritten_and_asked_only_when_confirmed(qtbot: Any, env: Any, tmp_path: Path) -> None:
    win, svc = env
    panel = win.conversation_dock.panel
    type_and_ask(qtbot, win, FIRST)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert svc.rewrites == []  # the first question is standalone
    assert [t.question for t in svc.saved.turns] == [FIRST] and svc.saved.turns[0].answer  # causal answer kept
    first_state = win.state

    type_and_ask(qtbot, win, FOLLOW)
    qtbot.waitUntil(lambda: panel.edit.isEnabled() and panel.edit.text() == STANDALONE, timeout=5000)
    assert svc.rewrites == [(FOLLOW, 1)]
    assert win.state is first_state  # nothing retrieved before the user confirms
    # the last question's columns do not stand under the new one: each says where it is
    for col in win.results.columns.values():
        assert col.model.rowCount() == 0 and col.placeholder.text().startswith("Your question follows the conv")
        assert col.subtitle.text() == "" and "\n" not in col.header.text()  # no heading left of the last question
    panel.edit.setText(STANDALONE + " ")  # editable: the user may change it
    qtbot.keyClick(panel.edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.state is not first_state and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert win.state.question == STANDALONE
    turns = svc.saved.turns
    assert [(t.question, t.standalone) for t in turns] == [(FIRST, FIRST), (FOLLOW, STANDALONE)]
    assert panel.history.count() == 2 and STANDALONE in panel.history.item(1).text()

    out = win.conversation_dock.export(tmp_path / "thread.md")
    md = out.read_text(encoding="utf-8")
    assert f"## 2. {FOLLOW}" in md and f"*Asked as:* {STANDALONE}" in md

    panel.new_btn.click()
    assert svc.saved == Conversation() and panel.history.count() == 0
    type_and_ask(qtbot, win, FOLLOW)  # a new thread: asked as typed, no rewrite
    qtbot.waitUntil(lambda: win.state.question == FOLLOW and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert len(svc.rewrites) == 1


def test_use_my_words_asks_the_typed_question(qtbot: Any, env: Any) -> None:
    win, svc = env
    svc.saved = Conversation().add(Turn(FIRST, FIRST))
    win.conversation_dock.panel.set_conversation(svc.saved)
    type_and_ask(qtbot, win, FOLLOW)
    qtbot.waitUntil(lambda: win.conversation_dock.panel.own_btn.isEnabled(), timeout=5000)
    win.conversation_dock.panel.own_btn.click()
    qtbot.waitUntil(lambda: win.state is not None and win.state.question == FOLLOW and not win.runner.busy,
                    timeout=10000)


def test_progress_lines_name_the_model_bytes_eta_and_tokens() -> None:
    i18n.set_language("en")
    p = Progress("join_model", 412_000_000, 1_117_320_768, "Preparing Qwen2.5-Coder-1.5B-Instruct Q4_K_M", 35.2)
    assert progress_text(p) == "Preparing Qwen2.5-Coder-1.5B-Instruct Q4_K_M: 412 of 1,117 MB, about 35 s left"
    assert progress_text(Progress("reading", 1240, 1240, "model")) == "reading 1,240 tokens…"
    i18n.set_language("zh")
    assert progress_text(Progress("reading", 1240, 1240, "model")) == "正在阅读 1,240 个词元…"
    i18n.set_language("en")


def test_one_return_asks_once_and_a_quick_re_ask_is_not_dropped(qtbot: Any, env: Any) -> None:
    """An editable QComboBox emits returnPressed twice per key press: one question per press,
    yet the same words asked again right away (a person re-asking) are asked again."""
    win, _svc = env
    calls: list[str] = []
    win.ask = lambda *a, **k: calls.append(win.query_bar.query.currentText())  # what the Return handler calls
    type_and_ask(qtbot, win, FIRST)
    assert calls == [FIRST]
    qtbot.wait(1)  # the event loop turns once; no time window is needed
    type_and_ask(qtbot, win, FIRST)
    assert calls == [FIRST, FIRST]


def test_the_conversation_panel_docks_beside_the_columns_at_1280(qtbot: Any, env: Any) -> None:
    """At 1280 px a right-hand dock made the window wider than the screen, and the floating panel
    that replaced it covered the columns; it now docks under the library, in the window's own
    layout, and neither widens the window nor covers a column."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QWidget

    win, _svc = env
    win.resize(1280, 770)
    type_and_ask(qtbot, win, FIRST)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    qtbot.wait(50)
    before = win.width()
    dock = win.conversation_dock
    assert not dock.isVisible()  # hidden until wanted
    win.conversation_dock.show_in_side()
    qtbot.waitUntil(dock.isVisible, timeout=3000)
    qtbot.wait(50)

    def in_window(w: QWidget) -> QRect:
        return QRect(w.mapTo(win, w.rect().topLeft()), w.size())

    assert not dock.isFloating() and dock.window() is win
    assert win.width() == before == 1280
    assert dock.width() >= 150 and dock.height() >= 150  # room to read the thread
    for m in ("baseline", "causal", "cfrag"):
        assert not in_window(dock).intersects(in_window(win.results.stacks[m])), m
    assert not in_window(dock).intersects(in_window(win.results.columns_split))
    win.conversation_dock.toggleViewAction().trigger()  # View → Conversation closes it again
    assert not dock.isVisible()
