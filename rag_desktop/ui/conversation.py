"""The conversation panel: the thread of follow-up questions of the open library.

Shows the history (what was typed, what it was asked as), the standalone form of a follow-up
for the user to check or edit before retrieval, and New conversation / Export. It only shows
and emits; the main window runs the rewrite and the questions. Model text is shown as plain
text only.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.conversation import Conversation, Rewrite
from rag_desktop.ui.i18n import tr


class ConversationPanel(QWidget):
    ask_standalone = Signal(str, str)  # (the standalone question to retrieve for, what the user typed)
    new_requested = Signal()
    export_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conversation")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        # No heading of its own: the dock's title bar names it, and the buttons alone fit the
        # library's width in the left column where the window docks it (ui.conversation_dock).
        top = QHBoxLayout()
        self.new_btn = QPushButton()
        self.new_btn.clicked.connect(self.new_requested.emit)
        self.export_btn = QPushButton()
        self.export_btn.clicked.connect(self.export_requested.emit)
        top.addWidget(self.new_btn)
        top.addWidget(self.export_btn)
        top.addStretch(1)
        self.history = QListWidget()
        self.history.setWordWrap(True)
        # the standalone question, editable, before retrieval
        self.proposal = QWidget()
        pl = QVBoxLayout(self.proposal)
        pl.setContentsMargins(0, 0, 0, 0)
        self.asked_as = QLabel()
        self.asked_as.setWordWrap(True)  # the left column is narrow
        self.edit = QLineEdit()
        self.edit.setObjectName("standalone_question")
        self.edit.returnPressed.connect(self._confirm)
        self.note = QLabel()
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #8a5a00;")
        row = QHBoxLayout()
        self.ask_btn = QPushButton()
        self.ask_btn.clicked.connect(self._confirm)
        self.own_btn = QPushButton()
        self.own_btn.clicked.connect(self._use_own_words)
        row.addWidget(self.ask_btn)
        row.addWidget(self.own_btn)
        row.addStretch(1)
        pl.addWidget(self.asked_as)
        pl.addWidget(self.edit)
        pl.addWidget(self.note)
        pl.addLayout(row)
        self.proposal.setVisible(False)
        lay.addLayout(top)
        lay.addWidget(self.history, 1)
        lay.addWidget(self.proposal)
        self.conversation = Conversation()
        self.pending: str | None = None  # the follow-up the user typed, while it is rewritten/checked
        self.retranslate()

    # -------------------------------------------------------------- state
    def set_conversation(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.history.clear()
        for i, t in enumerate(conversation.turns, start=1):
            text = f"{i}. {t.question}"
            if t.standalone != t.question:
                text += "\n   → " + t.standalone
            if t.answer:
                text += "\n   " + " ".join(t.answer.split())[:160]
            item = QListWidgetItem(text)
            item.setToolTip(t.answer[:1500] if t.answer else "")
            self.history.addItem(item)
        self.history.scrollToBottom()
        self.export_btn.setEnabled(bool(conversation.turns))

    def show_rewriting(self, question: str) -> None:
        self.pending = question
        self.proposal.setVisible(True)
        self.edit.setText(question)
        self.edit.setEnabled(False)
        self.ask_btn.setEnabled(False)
        self.own_btn.setEnabled(False)
        self.note.setText(tr("conv.rewriting"))

    def show_proposal(self, rw: Rewrite) -> None:
        """The standalone question, editable; Enter or Ask retrieves for it."""
        self.pending = rw.question
        self.proposal.setVisible(True)
        self.edit.setEnabled(True)
        self.ask_btn.setEnabled(True)
        self.own_btn.setEnabled(True)
        self.edit.setText(rw.standalone)
        if rw.reason:
            self.note.setText(tr("conv.fallback", note=tr(f"conv.note.{rw.reason}")))
        elif rw.rewritten:
            self.note.setText(tr("conv.rewritten_in", s=f"{rw.seconds:.1f}"))
        else:
            self.note.setText(tr("conv.unchanged"))
        self.edit.setFocus()
        self.edit.selectAll()

    def clear_proposal(self) -> None:
        self.pending = None
        self.proposal.setVisible(False)

    def _confirm(self) -> None:
        text = self.edit.text().strip()
        if self.pending is None or not text or not self.edit.isEnabled():
            return
        typed = self.pending
        self.clear_proposal()
        self.ask_standalone.emit(text, typed)

    def _use_own_words(self) -> None:
        if self.pending is None:
            return
        typed = self.pending
        self.clear_proposal()
        self.ask_standalone.emit(typed, typed)

    def retranslate(self) -> None:
        self.new_btn.setText(tr("conv.new"))
        self.new_btn.setToolTip(tr("conv.new_tip"))
        self.export_btn.setText(tr("conv.export"))
        self.asked_as.setText(tr("conv.asked_as"))
        self.ask_btn.setText(tr("conv.ask"))
        self.own_btn.setText(tr("conv.own_words"))
