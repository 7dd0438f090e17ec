"""Several libraries in the sidebar: create one, switch to it and back, remove one from the
list (its files stay), the list and the open library survive a restart, and switching is
refused clearly while files are being added.

The switching test uses the real service (real catalog, embedder, retrieval; the generator
is the scripted collaborator); the refusal test uses the in-memory service so an ingest
can be held in the middle.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from test_gui_support import DEMO, FakeService, ScriptedGenerator, ScriptedRuntime

from rag_desktop.app.config import data_dir, load_libraries
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.main import build_window
from rag_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.integration]

FIRST = {"wason_en.txt": "The Wason selection task asks which cards must be turned to test a rule. " * 4,
         "noodles_en.txt": "Boil water, add the noodles, cook five minutes, drain and serve with sauce. " * 4}
SECOND = {"cough_zh.txt": "中医治疗久咳，先辨寒热虚实。风寒咳嗽用止嗽散，肺阴亏虚用沙参麦冬汤。" * 6}


def folder_with(root: Path, name: str, docs: dict[str, str]) -> Path:
    folder = root / name
    folder.mkdir()
    for n, text in docs.items():
        (folder / n).write_text(text, encoding="utf-8")
    return folder


def factory(gen: ScriptedGenerator) -> Callable[[Path, Settings], RagService]:
    def make(lib: Path, s: Settings) -> RagService:
        return RagService(lib, s, runtime=ScriptedRuntime(s, gen))
    return make


def idle(qtbot: Any, win: MainWindow, timeout: int = 120000) -> None:
    qtbot.waitUntil(lambda: not win.runner.busy and not win.libraries.switching and win.libraries.listing is not None,
                    timeout=timeout)
    assert win.error_bar.shown == [], [e.text() for e in win.error_bar.shown]


def doc_names(win: MainWindow) -> list[str]:
    return sorted(Path(it.toolTip(0).splitlines()[1]).name for it in win.libraries.panel.document_items())


def shown_libraries(win: MainWindow) -> list[str]:
    """The names in the list (● marks the open one)."""
    return [it.text().split("  ·  ")[0] for it in win.libraries.panel.library_items()]


def summaries(win: MainWindow) -> list[str]:
    """What the list says each library holds."""
    return [it.text().split("  ·  ")[1] if "  ·  " in it.text() else "" for it in win.libraries.panel.library_items()]


def close(win: MainWindow) -> None:
    win.close()
    win.service.close()
    win.service.runtime.close()


def test_create_switch_back_remove_and_restart(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    i18n.set_language("en")
    first_docs = folder_with(tmp_path, "first_docs", FIRST)
    second_docs = folder_with(tmp_path, "second_docs", SECOND)
    first_lib = (tmp_path / "First").resolve()
    sfile = tmp_path / "config" / "settings.toml"
    gen = ScriptedGenerator()
    win = build_window(first_lib, False, settings=Settings(), settings_file=sfile, service_factory=factory(gen),
                       auto_answer=False)
    qtbot.addWidget(win)
    win.show()
    idle(qtbot, win)
    assert shown_libraries(win) == ["● First"]
    win.libraries.start_ingest([first_docs])
    idle(qtbot, win)
    assert doc_names(win) == sorted(FIRST)
    assert summaries(win) == ["documents: 2"]
    first_service, runtime = win.service, win.service.runtime

    # New library… (the name dialog answered) → an empty library, opened on the worker
    monkeypatch.setattr("rag_desktop.ui.library_controller.QInputDialog.getText", lambda *a, **k: ("Second", True))
    win.act_new_library.trigger()
    assert win.libraries.switching and win.libraries.listing is None
    win.ask("anything")  # refused while the library opens
    assert win.state is None and "being opened" in win.statusBar().currentMessage()
    idle(qtbot, win)
    second_lib = data_dir() / "libraries" / "Second"
    assert win.libraries.current_library() == second_lib.resolve() and (second_lib / "catalog.sqlite").exists()
    assert doc_names(win) == [] and "Second" in win.windowTitle()
    assert shown_libraries(win) == ["   First", "● Second"]
    assert summaries(win) == ["documents: 2", "documents: 0"]  # First read from its catalog, on the worker
    assert str(first_docs) in win.libraries.panel.library_items()[0].toolTip()
    assert win.service.runtime is runtime  # the models stay loaded across the switch
    with pytest.raises(sqlite3.ProgrammingError):  # the old library was closed
        first_service.library.catalog.db.execute("SELECT 1")
    win.libraries.start_ingest([second_docs])
    idle(qtbot, win)
    assert doc_names(win) == sorted(SECOND)
    assert summaries(win) == ["documents: 2", "documents: 1"]
    win.ask("久咳用什么药？")
    idle(qtbot, win)
    assert {r.hit.title for r in win.results.columns["baseline"].model.rows} <= {"cough_zh"}

    # back to the first one: select it in the list, Open
    panel = win.libraries.panel
    assert not panel.open_lib_btn.isEnabled()  # the open library is selected
    panel.select_library(str(first_lib))
    assert panel.open_lib_btn.isEnabled() and panel.remove_lib_btn.isEnabled()
    qtbot.mouseClick(panel.open_lib_btn, Qt.MouseButton.LeftButton)
    idle(qtbot, win)
    assert win.libraries.current_library() == first_lib and doc_names(win) == sorted(FIRST)
    assert win.state is None and win.results.columns["baseline"].model.rowCount() == 0  # old results cleared
    win.ask("How long do the noodles cook?")
    idle(qtbot, win)
    assert "noodles_en" in {r.hit.title for r in win.results.columns["baseline"].model.rows}
    known = load_libraries(sfile.with_name("libraries.toml"))
    assert known.libraries == (str(first_lib), str(second_lib.resolve())) and known.current == str(first_lib)

    # the list and the open library survive a restart
    close(win)
    win2 = build_window(None, False, settings=Settings(), settings_file=sfile, service_factory=factory(gen),
                        auto_answer=False)
    qtbot.addWidget(win2)
    win2.show()
    try:
        idle(qtbot, win2)
        assert win2.libraries.current_library() == first_lib and doc_names(win2) == sorted(FIRST)
        assert shown_libraries(win2) == ["● First", "   Second"]
        assert summaries(win2) == ["documents: 2", "documents: 1"]
        # a double-click on a library opens it
        item = win2.libraries.panel.library_items()[1]
        win2.libraries.panel.lib_list.itemDoubleClicked.emit(item)
        idle(qtbot, win2)
        assert win2.libraries.current_library() == second_lib.resolve() and doc_names(win2) == sorted(SECOND)

        # remove "First" from the list: asks first, deletes nothing
        win2.libraries.panel.select_library(str(first_lib))
        asked: list[str] = []

        def answer(reply: QMessageBox.StandardButton) -> Callable[..., QMessageBox.StandardButton]:
            def ask(_parent: Any, _title: str, text: str, *a: Any) -> QMessageBox.StandardButton:
                asked.append(text)
                return reply
            return ask

        monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.No))
        qtbot.mouseClick(win2.libraries.panel.remove_lib_btn, Qt.MouseButton.LeftButton)
        assert len(shown_libraries(win2)) == 2 and "Nothing is deleted" in asked[0] and str(first_lib) in asked[0]
        monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
        qtbot.mouseClick(win2.libraries.panel.remove_lib_btn, Qt.MouseButton.LeftButton)
        assert shown_libraries(win2) == ["● Second"]
        assert (first_lib / "catalog.sqlite").exists() and (first_docs / "wason_en.txt").exists()
        assert load_libraries(sfile.with_name("libraries.toml")).libraries == (str(second_lib.resolve()),)
        assert not win2.libraries.remove_library(second_lib)  # the open one cannot be removed
        assert "open another one first" in win2.statusBar().currentMessage()
    finally:
        close(win2)


def test_switching_is_refused_while_files_are_added(qtbot: Any, tmp_path: Path) -> None:
    i18n.set_language("en")
    svc = FakeService(tmp_path / "lib", Settings())
    svc.gate = threading.Event()  # holds the ingest between files
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "settings.toml")
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.libraries.listing is not None and not win.runner.busy, timeout=5000)
    try:
        win.libraries.start_ingest([DEMO])
        qtbot.waitUntil(lambda: win.libraries.panel.progress.isVisible(), timeout=5000)
        assert not win.libraries.switch_library(tmp_path / "other")
        assert win.error_bar.isVisible()
        assert "cannot be switched now" in win.error_bar.label.text() and "Cancel (Esc)" in win.error_bar.label.text()
        assert win.service is svc and svc.opened == []
        assert not win.libraries.create_library("x/y")  # an impossible name is explained, nothing is created
        assert "cannot be a library name" in win.error_bar.shown[-1].message
        win.act_cancel.trigger()
        svc.gate.set()
        qtbot.waitUntil(lambda: not win.runner.busy and not win.libraries.ingesting, timeout=10000)
        assert win.libraries.switch_library(tmp_path / "other")
        qtbot.waitUntil(lambda: not win.libraries.switching and win.libraries.listing is not None, timeout=10000)
        assert win.service is svc.opened[0] and svc.closed
        assert win.libraries.current_library() == (tmp_path / "other").resolve()
        # a library that cannot be opened: the error is shown once and the open library stays
        def broken(folder: Path, settings: Settings) -> FakeService:
            raise PermissionError(13, "Permission denied", str(folder))

        current = win.service
        current.with_library = broken
        assert win.libraries.switch_library(tmp_path / "locked")
        qtbot.waitUntil(lambda: not win.libraries.switching and win.libraries.listing is not None, timeout=10000)
        assert win.service is current and not current.closed
        assert "No permission" in win.error_bar.shown[-1].message
        assert [Path(p).name for p in win.libraries.known_libraries.libraries] == ["lib", "other"]
        assert win.libraries.panel.library_items()[0].text().endswith("lib  ·  not found")  # nothing on disk
        assert "no library in this folder" in win.libraries.panel.library_items()[0].toolTip()
        with i18n.using("zh"):
            win.retranslate()
            assert win.libraries.panel.new_lib_btn.text() == "新建文档库…"
            assert "当前已打开" in win.libraries.panel.library_items()[1].toolTip()
    finally:
        win.runner.cancel_all()
        win.runner.wait(5000)
        i18n.set_language("en")


def test_open_library_accepts_a_library_or_an_empty_folder_and_refuses_a_document_folder(
    qtbot: Any, tmp_path: Path
) -> None:
    from rag_desktop.app.library import CATALOG_FILE, library_folder_problem

    i18n.set_language("en")
    docs = folder_with(tmp_path, "my_documents", FIRST)
    existing = tmp_path / "copied_library"
    existing.mkdir()
    (existing / CATALOG_FILE).write_bytes(b"")
    assert library_folder_problem(docs) == ("not_empty", f"{docs} holds files but no {CATALOG_FILE}")
    assert library_folder_problem(existing) is None and library_folder_problem(tmp_path / "new") is None
    assert (library_folder_problem(docs / "wason_en.txt") or ("",))[0] == "not_folder"

    svc = FakeService(tmp_path / "lib", Settings())
    win = MainWindow(svc, Settings(), settings_file=tmp_path / "settings.toml")
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.libraries.listing is not None and not win.runner.busy, timeout=5000)
    try:
        assert not win.libraries.open_library_folder(docs)
        err = win.error_bar.shown[-1]
        assert str(docs) in err.message and "holds files but no catalog.sqlite" in err.message
        assert "Add folder" in err.hint
        assert sorted(p.name for p in docs.iterdir()) == sorted(FIRST)  # nothing written into it
        assert win.service is svc
        assert win.libraries.open_library_folder(existing)
        qtbot.waitUntil(lambda: not win.libraries.switching and win.libraries.listing is not None, timeout=10000)
        assert win.libraries.current_library() == existing.resolve()
        assert existing.resolve() in [Path(p) for p in win.libraries.known_libraries.libraries]
        with i18n.using("zh"):
            win.retranslate()
            assert win.act_open_library.text() == "打开文档库…"
    finally:
        win.runner.cancel_all()
        win.runner.wait(5000)
