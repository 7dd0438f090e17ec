"""The app keeps a watched folder current: a file created, edited or deleted while the window is
open is ingested in the background and the library panel says so; ingest.watch = false stops it.

Real service (catalog, embedder, watcher on real files); the generator is the scripted collaborator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_gui_libraries import close, doc_names, factory, folder_with, idle
from test_gui_support import ScriptedGenerator

from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.main import build_window

pytestmark = [pytest.mark.gui, pytest.mark.integration]


def test_watched_folder_follows_edits_while_the_app_is_open(qtbot: Any, tmp_path: Path) -> None:
    i18n.set_language("en")
    docs = folder_with(tmp_path, "docs", {"tea.txt": "Green tea is steamed soon after picking. " * 3})
    settings = Settings().replace("ingest", watch_debounce_s=0.5)
    win = build_window((tmp_path / "lib").resolve(), False, settings=settings,
                       settings_file=tmp_path / "config" / "settings.toml",
                       service_factory=factory(ScriptedGenerator()), auto_answer=False)
    qtbot.addWidget(win)
    win.show()
    try:
        idle(qtbot, win)
        win.libraries.start_ingest([docs])
        idle(qtbot, win)
        assert doc_names(win) == ["tea.txt"]
        qtbot.waitUntil(lambda: win.libraries.watcher is not None and win.libraries.watcher.watching == (docs,),
                        timeout=10000)
        assert win.libraries.panel.watch_label.text() == "Watching its folder for changes"

        (docs / "bikes.txt").write_text("A bicycle chain must be greased every ninety days. " * 3, encoding="utf-8")
        qtbot.waitUntil(lambda: doc_names(win) == ["bikes.txt", "tea.txt"], timeout=60000)
        qtbot.waitUntil(lambda: "updated automatically: 1 added" in win.libraries.panel.watch_label.text(),
                        timeout=10000)
        (docs / "tea.txt").unlink()
        qtbot.waitUntil(lambda: doc_names(win) == ["bikes.txt"], timeout=60000)
        assert "1 removed" in win.libraries.panel.watch_label.text()

        win.apply_settings(win.settings.replace("ingest", watch=False))
        assert win.libraries.watcher is None
        assert win.libraries.panel.watch_label.text().startswith("Folder watching is off")
        (docs / "new.txt").write_text("Not watched any more. " * 3, encoding="utf-8")
        qtbot.wait(1500)
        idle(qtbot, win)
        assert doc_names(win) == ["bikes.txt"]
    finally:
        close(win)
