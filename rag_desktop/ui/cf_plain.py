"""CF-RAG's run in plain words: one sentence per stage (core.cfrag.plain, said by ui.cf_notes.cf_plain),
with the numbers behind a "Details" fold, closed by default.

``PlainFold`` is a title, the sentences, the fold's button and whatever the fold opens; the CF-RAG
column's card (``CFPlainCard``, between its evidence rows and its answer) opens the column's numbers
(present.cf_detail_lines), and the CF-RAG trace tab (ui.trace_view) opens its tables with it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QToolButton, QVBoxLayout, QWidget

from rag_desktop.core.cfrag.types import CFTrace
from rag_desktop.ui.cf_notes import cf_plain
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_label
from rag_desktop.ui.present import cf_detail_lines


def bullets(lines: list[str]) -> str:
    return "\n".join("• " + line for line in lines)


class PlainFold(QWidget):
    """The sentences, then a "Details" button that shows or hides ``body`` (hidden at first)."""

    def __init__(self, body: QWidget, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.title = plain_label()
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.sentences = plain_label(selectable=True)  # questions and titles in them are untrusted
        self.sentences.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.fold = QToolButton()
        self.fold.setObjectName(name)
        self.fold.setCheckable(True)
        self.fold.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.fold.setAutoRaise(True)
        self.fold.toggled.connect(self._set_open)
        self.body = body
        for w in (self.title, self.sentences, self.fold, body):
            lay.addWidget(w)
        self._set_open(False)
        self.retranslate()

    def _set_open(self, on: bool) -> None:
        self.fold.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body.setVisible(on)

    def is_open(self) -> bool:
        return self.fold.isChecked()

    def set_sentences(self, lines: list[str]) -> None:
        self.sentences.setText(bullets(lines))

    def retranslate(self) -> None:
        self.title.setText(tr("trace.plain_title"))
        self.fold.setText(tr("trace.details"))
        self.fold.setToolTip(tr("trace.details_tip"))


class CFPlainCard(QScrollArea):
    """The CF-RAG column's account of its answer: the plain sentences, the numbers behind the fold.
    Scrolls as a whole when the column gives it less height than it needs; hidden without a run."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("cf_plain_card")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.numbers: QLabel = plain_label(selectable=True)
        self.numbers.setStyleSheet("color: #555;")
        self.plain = PlainFold(self.numbers, "cf_plain_fold")
        inner = QWidget()
        lay = QVBoxLayout(inner)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.addWidget(self.plain)
        lay.addStretch(1)
        self.setWidget(inner)
        self.trace: CFTrace | None = None
        self.setVisible(False)

    def set_trace(self, trace: CFTrace | None) -> None:
        """Say ``trace`` in words (the fold stays as the person left it, as the Why card's does);
        None hides the card (the column's owner shows it, when the column has room for it)."""
        self.trace = trace
        self.retranslate()
        if trace is None:
            self.setVisible(False)

    def retranslate(self) -> None:
        self.plain.retranslate()
        t = self.trace
        self.plain.set_sentences(cf_plain(t) if t is not None else [])
        self.numbers.setText(bullets(cf_detail_lines(t)) if t is not None else "")
