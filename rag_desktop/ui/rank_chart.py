"""Rank-movement chart: one line per document from its baseline rank to its causal rank.

Painted with QPainter (no chart library). Green lines moved up, red down, grey stayed;
the selected document is drawn thick; clicking a line's end label selects its document.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from rag_desktop.core.types import RankedList
from rag_desktop.ui.i18n import tr

UP = QColor("#1B7F3B")
DOWN = QColor("#B3261E")
SAME = QColor("#8A8A8A")


@dataclass(frozen=True)
class Movement:
    doc_id: int
    title: str
    before: int  # baseline rank
    after: int  # re-ranked rank


def movements(baseline: RankedList, reranked: RankedList, limit: int = 20) -> list[Movement]:
    """Baseline → re-ranked rank per unit, for units in the top ``limit`` of either list."""
    after = {h.unit_id: h.rank for h in reranked.hits}
    out = [Movement(h.doc_id, h.title, h.rank, after[h.unit_id]) for h in baseline.hits if h.unit_id in after]
    return [m for m in out if m.before <= limit or m.after <= limit]


class RankChart(QWidget):
    doc_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rank_chart")
        self.setMinimumHeight(180)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.moves: list[Movement] = []
        self.selected: int | None = None
        self.right_title = ""
        self._label_rects: list[tuple[QRectF, int]] = []

    def sizeHint(self) -> QSize:
        return QSize(520, 360)

    def set_data(self, baseline: RankedList, reranked: RankedList, right_title: str = "") -> None:
        self.moves = movements(baseline, reranked)
        self.right_title = right_title
        self.update()

    def clear(self) -> None:
        self.moves = []
        self.update()

    def set_selected(self, doc_id: int | None) -> None:
        self.selected = doc_id
        self.update()

    def _geometry(self) -> tuple[float, float, float, float, int]:
        n = max((max(m.before, m.after) for m in self.moves), default=1)
        fm = QFontMetrics(self.font())
        label_w = min(220.0, max(80.0, self.width() * 0.28))
        left = label_w + 16
        right = self.width() - label_w - 16
        top = fm.height() * 2.2
        bottom = self.height() - fm.height()
        return left, right, top, bottom, n

    def _y(self, rank: int, top: float, bottom: float, n: int) -> float:
        return top if n <= 1 else top + (rank - 1) * (bottom - top) / (n - 1)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.fillRect(self.rect(), QColor("#FFFFFF"))
        fm = QFontMetrics(self.font())
        if not self.moves:
            p.setPen(QColor("#777"))
            p.drawText(self.rect(), int(Qt.AlignmentFlag.AlignCenter), tr("chart.empty"))
            return
        left, right, top, bottom, n = self._geometry()
        p.setPen(QColor("#333"))
        p.drawText(QRectF(left - 60, 2, 120, fm.height() * 1.5), int(Qt.AlignmentFlag.AlignCenter),
                   tr("chart.baseline"))
        p.drawText(QRectF(right - 80, 2, 160, fm.height() * 1.5), int(Qt.AlignmentFlag.AlignCenter),
                   self.right_title or tr("chart.causal"))
        p.setPen(QPen(QColor("#CCC"), 1))
        p.drawLine(QPointF(left, top), QPointF(left, bottom))
        p.drawLine(QPointF(right, top), QPointF(right, bottom))
        self._label_rects = []
        label_w = left - 16
        order = sorted(self.moves, key=lambda m: m.doc_id == self.selected)  # selected drawn last, on top
        for m in order:
            y0 = self._y(m.before, top, bottom, n)
            y1 = self._y(m.after, top, bottom, n)
            color = UP if m.after < m.before else DOWN if m.after > m.before else SAME
            sel = m.doc_id == self.selected
            p.setPen(QPen(color, 4 if sel else 1.6))
            p.drawLine(QPointF(left, y0), QPointF(right, y1))
            p.setBrush(color)
            p.drawEllipse(QPointF(left, y0), 3, 3)
            p.drawEllipse(QPointF(right, y1), 3, 3)
            f = p.font()
            f.setBold(sel)
            p.setFont(f)
            p.setPen(QColor("#111") if sel else QColor("#333"))
            title = fm.elidedText(m.title, Qt.TextElideMode.ElideRight, int(label_w - 30))
            lr = QRectF(4, y0 - fm.height() / 2, label_w, fm.height())
            p.drawText(lr, int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), f"{title}  {m.before}")
            rr = QRectF(right + 8, y1 - fm.height() / 2, label_w, fm.height())
            p.drawText(rr, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), f"{m.after}  {title}")
            self._label_rects += [(lr, m.doc_id), (rr, m.doc_id)]
        p.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        for rect, doc_id in self._label_rects:
            if rect.contains(pos):
                self.doc_clicked.emit(doc_id)
                return
        super().mousePressEvent(event)
