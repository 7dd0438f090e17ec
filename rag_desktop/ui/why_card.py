"""The "Why" card: one candidate's journey from the baseline rank to the causal rank, in words.

It opens with one plain sentence (present.why_sentence); the scores, the formula and the A
terms' cosines (present.why_lines) are behind a fold, closed by default, so the card fits the
strip under the columns of a 1280 × 800 window without scrolling. Before a candidate is chosen it
says how the calibration gate decided which ranking the answers read (present.gate_evidence_text;
docs/architecture.md, "The calibration gate").
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QToolButton, QVBoxLayout, QWidget

from rag_desktop.core.types import Explanation, Hit, RankedList
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_label
from rag_desktop.ui.present import gate_evidence_text, why_lines, why_sentence


class WhyCard(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("why_card")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#why_card { background: #FAFAF5; }")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 6, 8, 6)
        self.title = plain_label()
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.sentence = self._text_label()
        self.fold = QToolButton()
        self.fold.setObjectName("why_fold")
        self.fold.setCheckable(True)
        self.fold.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.fold.setAutoRaise(True)
        self.fold.toggled.connect(self._set_open)
        self.body = self._text_label()
        scroll = QScrollArea()  # the opened fold can be longer than the space the splitter gives it
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body_scroll = scroll
        scroll.setStyleSheet("QScrollArea, QWidget#qt_scrollarea_viewport, QLabel { background: transparent; }")
        vp = scroll.viewport()
        if vp is not None:
            vp.setAutoFillBackground(False)
        scroll.setWidget(self.body)
        lay.addWidget(self.title)
        lay.addWidget(self.sentence)
        lay.addWidget(self.fold)
        lay.addWidget(scroll, 1)
        lay.addStretch(0)
        self._expl: Explanation | None = None
        self._hit: Hit | None = None
        self._weight: float | None = None
        self._display: dict[str, str] = {}
        self._ranked: RankedList | None = None
        self._verdict: dict[str, Any] | None = None
        self._set_open(False)
        self.retranslate()

    @staticmethod
    def _text_label() -> QLabel:
        lab = plain_label(selectable=True)  # document terms are untrusted
        lab.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        lab.setAutoFillBackground(False)
        return lab

    def _set_open(self, on: bool) -> None:
        self.fold.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)
        self.body_scroll.setVisible(on)

    def set_explanation(self, expl: Explanation | None, hit: Hit | None, hybrid_weight: float | None = None,
                        display: dict[str, str] | None = None, ranked: RankedList | None = None) -> None:
        """``ranked`` is the causal list: its other candidates' scores explain a rank that held."""
        self._expl, self._hit, self._weight = expl, hit, hybrid_weight
        self._display = display or {}
        self._ranked = ranked
        self.retranslate()

    def set_verdict(self, verdict: dict[str, Any] | None) -> None:
        """The question's verdict (app.verdict.Verdict.to_json): its evidence is the card's text
        while no candidate is chosen."""
        self._verdict = verdict
        self.retranslate()

    def lines(self) -> list[str]:
        if self._expl is None:
            return []
        return why_lines(self._expl, self._hit, self._weight, self._display, self._ranked)

    def retranslate(self) -> None:
        self.fold.setText(tr("why.fold"))
        self.fold.setToolTip(tr("why.fold_tip"))
        if self._expl is None:
            self.title.setText(tr("why.title_none"))
            self.sentence.setText(tr("why.none") if self._hit is not None else gate_evidence_text(self._verdict))
            self.body.setText("")
            self.fold.setVisible(False)
            return
        self.title.setText(tr("why.title", title=self._hit.title if self._hit else ""))
        self.sentence.setText(why_sentence(self._expl, self._display))
        self.body.setText("\n".join("• " + line for line in self.lines()))
        self.fold.setVisible(True)
