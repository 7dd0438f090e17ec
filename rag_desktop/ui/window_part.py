"""The base of the main window's parts (ui/library_actions.py, ui/conversation_actions.py).

Each part is a mixin of ui.main_window.MainWindow; it declares, as annotations, what it uses
of the window, so mypy checks every part. All of them reach the open library the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QMainWindow

if TYPE_CHECKING:
    from rag_desktop.app.service_api import LibraryService
    from rag_desktop.app.session import Session


class WindowPart(QMainWindow):
    session: Session  # owns the models and the open library (app.session)

    @property
    def service(self) -> LibraryService:
        """The open library's service (the Session's: a library switch replaces it)."""
        return self.session.service
