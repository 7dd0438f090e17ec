"""The "Why" card: one candidate's journey from the baseline rank to the causal rank, in words."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QVBoxLayout, QWidget

from rag_desktop.core.types import Explanation, Hit, RankedList
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import why_lines


class WhyCard(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("why_card")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#why_card { background: #FAFAF5; }")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 6)
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setWordWrap(True)
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.body = QLabel()
        self.body.setTextFormat(Qt.TextFormat.PlainText)  # document terms are untrusted
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        scroll = QScrollArea()  # the card can be longer than the space the splitter gives it
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body_scroll = scroll
        scroll.setStyleSheet("QScrollArea, QWidget#qt_scrollarea_viewport, QLabel { background: transparent; }")
        vp = scroll.viewport()
        if vp is not None:
            vp.setAutoFillBackground(False)
        self.body.setAutoFillBackground(False)
        scroll.setWidget(self.body)
        lay.addWidget(self.title)
        lay.addWidget(scroll, 1)
        self._expl: Explanation | None = None
        self._hit: Hit | None = None
        self._weight: float | None = None
        self._display: dict[str, str] = {}
        self._ranked: RankedList | None = None
        self.retranslate()

    def set_explanation(self, expl: Explanation | None, hit: Hit | None, hybrid_weight: float | None = None,
                        display: dict[str, str] | None = None, ranked: RankedList | None = None) -> None:
        """``ranked`` is the causal list: its other candidates' scores explain a rank that held."""
        self._expl, self._hit, self._weight = expl, hit, hybrid_weight
        self._display = display or {}
        self._ranked = ranked
        self.retranslate()

    def lines(self) -> list[str]:
        if self._expl is None:
            return []
        return why_lines(self._expl, self._hit, self._weight, self._display, self._ranked)

    def retranslate(self) -> None:
        if self._expl is None:
            self.title.setText(tr("why.title_none"))
            self.body.setText(tr("why.none") if self._hit is not None else "")
            return
        self.title.setText(tr("why.title", title=self._hit.title if self._hit else ""))
        self.body.setText("\n".join("• " + line for line in self.lines()))
