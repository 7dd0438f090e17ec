"""The main window for a GUI test: opened over a service and shown, and a question typed into it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from rag_desktop.core.settings import Settings
from rag_desktop.ui.main_window import MainWindow


@contextmanager
def shown_window(qtbot: Any, svc: Any, settings: Settings, settings_file: Path, *, auto_answer: bool,
                 size: tuple[int, int] | None = None) -> Iterator[MainWindow]:
    """The window over ``svc``, shown (at ``size``) once it has listed the library; on leaving,
    its remaining work is cancelled and waited for."""
    win = MainWindow(svc, settings, settings_file=settings_file, auto_answer=auto_answer)
    qtbot.addWidget(win)
    if size is not None:
        win.resize(*size)
    win.show()
    qtbot.waitUntil(lambda: win.libraries.listing is not None and not win.runner.busy, timeout=5000)
    try:
        yield win
    finally:
        win.runner.cancel_all()
        win.runner.wait(5000)
        win.render_runner.wait(5000)


def type_and_ask(qtbot: Any, win: MainWindow, q: str) -> None:
    """Type ``q`` into the question box, replacing what it held, and press Return."""
    line = win.query_bar.query.lineEdit()
    assert line is not None
    line.clear()
    qtbot.keyClicks(line, q)
    qtbot.keyClick(line, Qt.Key.Key_Return)
