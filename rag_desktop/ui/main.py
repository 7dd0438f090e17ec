"""``run_gui``: the desktop app's entry point (the CLI's ``gui`` command calls it).

``--demo`` opens the demo library in the user data folder and, the first time, builds
it from the bundled ``resources/demo`` documents with a visible progress bar.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rag_desktop
from rag_desktop.app.service_api import LibraryService
from rag_desktop.core.settings import Settings

log = logging.getLogger(__name__)


def demo_source_folder() -> Path:
    """The bundled demo documents (repository root / resources / demo)."""
    return Path(rag_desktop.__file__).resolve().parents[1] / "resources" / "demo"


def _message(title: str, text: str) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(QMessageBox.Icon.Warning, title, text)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.exec()


def load_settings_or_defaults(path: Path | None = None) -> tuple[Settings, str | None]:
    """The saved settings, or the defaults plus a readable reason when the file is broken."""
    from rag_desktop.app.config import load_settings, settings_path
    from rag_desktop.core.settings import SettingsError

    try:
        return load_settings(path), None
    except (SettingsError, OSError) as exc:
        from rag_desktop.ui.i18n import tr

        return Settings(), tr("startup.bad_settings", path=str(path or settings_path()), detail=str(exc))


def last_library(libraries_file: Path | None = None) -> Path | None:
    """The library open when the app was last closed, if it still exists (else None: the default)."""
    from rag_desktop.app.config import load_libraries
    from rag_desktop.core.settings import SettingsError

    try:
        current = load_libraries(libraries_file).current
    except (SettingsError, OSError) as exc:  # the window reports the broken list
        log.warning("the list of libraries is unreadable: %s", exc)
        return None
    return Path(current) if current and Path(current).is_dir() else None


def build_window(library: Path | None, demo: bool, *, settings: Settings | None = None,
                 settings_file: Path | None = None,
                 service_factory: Callable[[Path, Settings], LibraryService] | None = None,
                 auto_answer: bool = True) -> Any:
    """Create the service and the main window (a QApplication must exist). Raises on failure."""
    from rag_desktop.app.config import default_library_dir, demo_library_dir
    from rag_desktop.ui import i18n
    from rag_desktop.ui.main_window import MainWindow

    if settings is None:
        settings, problem = load_settings_or_defaults(settings_file)
    else:
        problem = None
    i18n.set_language(settings.ui.language)
    libraries_file = settings_file.with_name("libraries.toml") if settings_file else None
    lib = demo_library_dir() if demo else (library or last_library(libraries_file) or default_library_dir())
    from rag_desktop.app.session import Session

    # The Session owns the models and the open library; the window only asks it to switch.
    session = Session.start(lib, settings) if service_factory is None else Session(service_factory(lib, settings))
    win = MainWindow(session, settings, settings_file=settings_file, auto_answer=auto_answer,
                     libraries_file=libraries_file)
    if problem:
        from rag_desktop.ui.worker import UserError

        win.show_error(UserError("settings", problem, i18n.tr("err.hint.settings"), problem))
    if demo:
        source = demo_source_folder()

        def maybe_ingest(listing: Any) -> None:
            if not listing.documents:
                win.libraries.start_ingest([source])

        win.libraries.refresh_library(then=maybe_ingest)
    return win


def _choose_platform() -> None:
    """On Linux with no display server (a headless machine, CI), run offscreen instead of
    failing: the window still opens, renders and answers, it just is not visible."""
    if sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM") \
            and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        log.warning("no display found (DISPLAY/WAYLAND_DISPLAY unset): running offscreen")
        print("rag-desktop: no display found, so the window runs offscreen "
              "(set DISPLAY or QT_QPA_PLATFORM to show it)", file=sys.stderr)


def run_gui(library: Path | None, demo: bool) -> int:
    _choose_platform()
    from PySide6.QtWidgets import QApplication

    from rag_desktop.ui.i18n import tr
    from rag_desktop.ui.logs import setup_logging

    log_path = setup_logging()
    app = QApplication.instance() or QApplication(sys.argv)
    assert isinstance(app, QApplication)
    app.setApplicationName("rag-desktop")
    try:
        win = build_window(library, demo)
    except Exception as exc:  # the library cannot be opened, the settings are unusable, …
        from rag_desktop.ui.worker import describe_error

        log.error("start-up failed", exc_info=exc)
        msg, hint = describe_error(exc)
        _message(tr("startup.failed_title"), f"{msg}\n{hint}\n\n{tr('startup.log', path=str(log_path))}")
        return 1
    win.show()
    win.prepare_model_in_background()  # never silently at the first question
    code = int(app.exec())
    win.runner.cancel_all()  # however the loop ended, no task may outlive the service
    win.runner.wait(30000)
    win.render_runner.wait(5000)
    try:
        win.session.close()  # the library, then the models
    except Exception:  # closing must never turn a clean exit into a crash
        log.exception("while closing the session")
    return code
