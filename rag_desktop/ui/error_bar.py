"""The error strip at the top of the main window: the error, what to do, and Details on click."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QMessageBox, QPushButton, QWidget

from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_label
from rag_desktop.ui.worker import UserError


class ErrorBar(QFrame):
    """A non-modal strip at the top of the window: the error, what to do, and Details on click."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("error_bar")
        self.setStyleSheet("#error_bar { background: #FDECEA; border: 1px solid #F5C2C0; }")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        self.label = plain_label()
        self.details_btn = QPushButton()
        self.close_btn = QPushButton("✕")
        self.close_btn.setFlat(True)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.details_btn)
        lay.addWidget(self.close_btn)
        self.details_btn.clicked.connect(self._details)
        self.close_btn.clicked.connect(self.dismiss)
        self.error: UserError | None = None
        self.shown: list[UserError] = []
        self.hide()
        self.retranslate()

    def show_error(self, err: UserError) -> None:
        # "Errors reach the user once": the same message from several tasks is shown once
        # (until the user dismisses it).
        if self.error is not None and self.error.message == err.message:
            return
        self.error = err
        self.shown.append(err)
        self.label.setText(err.text())
        self.show()

    def dismiss(self) -> None:
        self.error = None
        self.hide()

    def _details(self) -> None:
        if self.error is None:
            return
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Information)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setWindowTitle(tr("error.details_title"))
        box.setText(self.error.text())
        box.setDetailedText(self.error.detail)
        box.open()

    def retranslate(self) -> None:
        self.details_btn.setText(tr("error.details"))
