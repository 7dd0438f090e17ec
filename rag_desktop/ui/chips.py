"""A/B keyword chips (paper 000, Eq. 3) with a legend, and a flow layout to hold them.

A chips are the document terms shared with the query — exactly, or absorbed by a query
term at cosine ≥ τ; B chips are the residual terms whose weighted centroid gives s_c
(Eq. 4–5). The tooltip of an A chip names the absorbing query term and the cosine.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.types import AbsorbedTerm, Keyword, KeywordSplit
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_label, plain_tooltip
from rag_desktop.ui.present import COLOR_A, COLOR_B, fmt


class FlowLayout(QLayout):
    """Lays children left to right, wrapping to new lines (the classic Qt example)."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 4) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self.setContentsMargins(QMargins(0, 0, 0, 0))

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._do_layout(QRect(0, 0, width, 0), test=True)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._do_layout(rect, test=False)

    def sizeHint(self) -> QSize:
        return self.minimumSize()

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        m = self.contentsMargins()
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    def _do_layout(self, rect: QRect, test: bool) -> int:
        m = self.contentsMargins()
        r = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, line_h = r.x(), r.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            next_x = x + hint.width() + self._spacing
            if next_x - self._spacing > r.right() and line_h > 0:
                x = r.x()
                y += line_h + self._spacing
                next_x = x + hint.width() + self._spacing
                line_h = 0
            if not test:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x = next_x
            line_h = max(line_h, hint.height())
        return y + line_h - rect.y() + m.bottom()


def _chip_style(color: str) -> str:
    return (f"QLabel {{ background: {color}; color: #111; border-radius: 8px; padding: 1px 7px; }}")


class Chip(QLabel):
    """One keyword: plain text only (document terms are untrusted)."""

    def __init__(self, term: str, shown: str, kind: str, color: str, tooltip: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(shown)
        self.kind = kind
        self.term = term
        self.setToolTip(plain_tooltip(tooltip))  # terms come from documents: never markup
        self.setStyleSheet(_chip_style(color))
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)


def _shown(term: str, display: Mapping[str, str]) -> str:
    """The readable word for a (possibly stemmed) term, with the stem when they differ."""
    word = display.get(term, term)
    return word if word == term else f"{word} ({term})"


def a_tooltip(a: AbsorbedTerm, display: Mapping[str, str] | None = None) -> str:
    d = display or {}
    if a.cosine is None:
        return tr("chips.tip_exact", term=_shown(a.term, d), q=d.get(a.absorbed_by, a.absorbed_by),
                  w=fmt(a.weight, 3))
    return tr("chips.tip_absorbed", term=_shown(a.term, d), q=d.get(a.absorbed_by, a.absorbed_by),
              cos=fmt(a.cosine, 3), w=fmt(a.weight, 3))


def b_tooltip(b: Keyword, display: Mapping[str, str] | None = None) -> str:
    return tr("chips.tip_b", term=_shown(b.term, display or {}), w=fmt(b.weight, 3))


class Legend(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.a = QLabel()
        self.b = QLabel()
        for lab, color in ((self.a, COLOR_A), (self.b, COLOR_B)):
            lab.setTextFormat(Qt.TextFormat.PlainText)
            lab.setStyleSheet(_chip_style(color))
            lay.addWidget(lab)
        lay.addStretch(1)
        self.retranslate()

    def retranslate(self) -> None:
        self.a.setText(tr("legend.a"))
        self.a.setToolTip(tr("legend.a_tip"))
        self.b.setText(tr("legend.b"))
        self.b.setToolTip(tr("legend.b_tip"))


class ChipScroll(QScrollArea):
    """Holds the chips: as tall as they need, with a visible scrollbar when the panel is shorter.

    QScrollArea does not follow a height-for-width child by itself, so on every resize the
    chip area is given the height its flow layout needs at the viewport's width.
    """

    def __init__(self, area: QWidget, flow: FlowLayout, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.area = area
        self.flow = flow
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(area)
        # the panel's own background shows through (a grey viewport looked like an empty box)
        self.setStyleSheet("QScrollArea { background: transparent; }")
        vp = self.viewport()
        if vp is not None:
            vp.setAutoFillBackground(False)
        area.setAutoFillBackground(False)

    def fit(self) -> None:
        vp = self.viewport()
        width = vp.width() if vp is not None else self.width()
        self.area.setMinimumHeight(self.flow.heightForWidth(max(1, width)))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit()


class ChipsPanel(QFrame):
    """The A and B sets of the selected candidate, as chips, with the legend."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        self.title = plain_label()
        self.legend = Legend()
        self.chip_area = QWidget()
        self.flow = FlowLayout(self.chip_area)
        self.chip_scroll = ChipScroll(self.chip_area, self.flow)
        self.empty = plain_label(wrap=False)
        lay.addWidget(self.title)
        lay.addWidget(self.legend)
        lay.addWidget(self.chip_scroll, 1)
        lay.addWidget(self.empty)
        self._split: KeywordSplit | None = None
        self._display: Mapping[str, str] = {}
        self._doc_title = ""
        self.retranslate()

    def chips(self) -> list[Chip]:
        out: list[Chip] = []
        for i in range(self.flow.count()):
            item = self.flow.itemAt(i)
            w = item.widget() if item is not None else None
            if isinstance(w, Chip):
                out.append(w)
        return out

    def _clear(self) -> None:
        while self.flow.count():
            item = self.flow.takeAt(0)
            w = item.widget() if item is not None else None
            if w is not None:
                # Hide and detach now: deleteLater only runs when the event loop gets to it.
                w.hide()
                w.setParent(None)
                w.deleteLater()

    def set_split(self, split: KeywordSplit | None, doc_title: str = "",
                  display: Mapping[str, str] | None = None) -> None:
        """Show ``split``'s A and B terms; ``display`` maps stems to readable words."""
        self._split = split
        self._doc_title = doc_title
        self._display = display or {}
        d = self._display
        self._clear()
        if split is not None:
            for a in split.a_terms:
                self.flow.addWidget(Chip(a.term, d.get(a.term, a.term), "A", COLOR_A, a_tooltip(a, d),
                                         self.chip_area))
            for b in split.b_terms:
                self.flow.addWidget(Chip(b.term, d.get(b.term, b.term), "B", COLOR_B, b_tooltip(b, d),
                                         self.chip_area))
        for c in self.chips():
            c.show()
        # "no keyword sets" only for a selected document that has none (before: "select a document")
        self.empty.setVisible(bool(doc_title) and (split is None or not (split.a_terms or split.b_terms)))
        self.chip_area.updateGeometry()
        self.chip_scroll.fit()
        self.retranslate()

    def retranslate(self) -> None:
        self.legend.retranslate()
        self.title.setText(tr("chips.title", title=self._doc_title) if self._doc_title else tr("chips.title_none"))
        self.empty.setText(tr("chips.empty"))
        for c in self.chips():
            if self._split is None:
                continue
            if c.kind == "A":
                a = next((a for a in self._split.a_terms if a.term == c.term), None)
                if a is not None:
                    c.setToolTip(a_tooltip(a, self._display))
            else:
                b = next((b for b in self._split.b_terms if b.term == c.term), None)
                if b is not None:
                    c.setToolTip(b_tooltip(b, self._display))
