"""The result columns: Baseline | Causal rerank | Cross-encoder | CF-RAG, side by side.

Each column is a table (rank, change vs baseline, title, page, the column's scores, a
snippet with the A/B terms highlighted). Selecting or hovering a row announces its
document; the window then highlights that document in every column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPainter, QTextCharFormat, QTextCursor, QTextDocument, QTextOption
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.gate import MIN_PROBES_FOR_RELIABILITY
from rag_desktop.core.types import Hit
from rag_desktop.ui.i18n import has_tr, tr
from rag_desktop.ui.present import COLOR_A, COLOR_B, RankChange, SpanKind, fmt, highlight_spans, snippet

COL_RANK, COL_CHANGE, COL_TITLE, COL_PAGE, COL_SCORES, COL_SNIPPET = range(6)
HEADER_KEYS = ("col.rank", "col.change", "col.title", "col.page", "col.scores", "col.snippet")

SPANS_ROLE = Qt.ItemDataRole.UserRole + 1
HIT_ROLE = Qt.ItemDataRole.UserRole + 2
DOC_ROLE = Qt.ItemDataRole.UserRole + 3

SELECTED_BG = QColor("#FFE2C6")
HOVER_BG = QColor("#ECEFF4")
UP = QColor("#1B7F3B")
DOWN = QColor("#B3261E")
NEW = QColor("#6A3FB5")


def verdict_text(verdict: dict[str, Any] | None) -> str:
    """app.service.Verdict.to_json() in words and numbers, in the UI language ("" for none)."""
    if not verdict:
        return ""
    reason, shown = verdict.get("reason"), str(verdict.get("shown", ""))
    name = tr(f"verdict.name.{shown}") if has_tr(f"verdict.name.{shown}") else shown
    if reason == "gate":
        n = int(verdict.get("n_probes") or 0)
        rel = round(100 * float(verdict.get("reliability") or 0.0))
        text = tr("verdict.hurts" if shown == "baseline" else "verdict.helps", n=n, rel=rel, shown=name)
        if n < MIN_PROBES_FOR_RELIABILITY:
            text += tr("verdict.few")
        return text
    if reason in ("not_calibrated", "calibrating", "override", "setting"):
        return tr(f"verdict.{reason}", shown=name)
    return ""


def heading_text(title_key: str, verdict: dict[str, Any] | None) -> str:
    """A column's heading: its title, and for the causal column the verdict on a second line."""
    text = verdict_text(verdict)
    return tr(title_key) + (f"\n{text}" if text else "")


@dataclass(frozen=True)
class Row:
    """What one table row shows. ``scores`` are (label, value) pairs for this column."""

    hit: Hit
    change: RankChange | None
    scores: tuple[tuple[str, float | None], ...]
    terms: tuple[tuple[str, SpanKind], ...] = ()
    note: str = ""
    snippet: str = field(default="", compare=False)
    spans: tuple[tuple[int, int, SpanKind], ...] = field(default=(), compare=False)


def make_row(hit: Hit, change: RankChange | None, scores: Sequence[tuple[str, float | None]],
             terms: Sequence[tuple[str, SpanKind]] = (), note: str = "") -> Row:
    """Build a row with its snippet centred on the first highlighted term."""
    flat = " ".join(hit.text.split())
    spans = highlight_spans(flat, terms)
    text = snippet(flat, focus=spans[0][0] if spans else None)
    return Row(hit, change, tuple(scores), tuple(terms), note, text, tuple(highlight_spans(text, terms)))


class RankedModel(QAbstractTableModel):
    def __init__(self, show_change: bool, parent: Any = None) -> None:
        super().__init__(parent)
        self.rows: list[Row] = []
        self.show_change = show_change
        self.selected_doc: int | None = None
        self.hover_doc: int | None = None

    def set_rows(self, rows: Sequence[Row]) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else 6

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return tr(HEADER_KEYS[section])
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return tr(HEADER_KEYS[section] + "_tip")
        return None

    def _set_doc(self, attr: str, doc_id: int | None) -> None:
        if getattr(self, attr) == doc_id:
            return
        setattr(self, attr, doc_id)
        if self.rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self.rows) - 1, 5),
                                  [Qt.ItemDataRole.BackgroundRole])

    def set_selected_doc(self, doc_id: int | None) -> None:
        self._set_doc("selected_doc", doc_id)

    def set_hover_doc(self, doc_id: int | None) -> None:
        self._set_doc("hover_doc", doc_id)

    def row_of_doc(self, doc_id: int) -> int:
        for i, r in enumerate(self.rows):
            if r.hit.doc_id == doc_id:
                return i
        return -1

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        col = index.column()
        h = row.hit
        if role == Qt.ItemDataRole.DisplayRole:
            if col == COL_RANK:
                return str(h.rank)
            if col == COL_CHANGE:
                return row.change.text if row.change is not None else ""
            if col == COL_TITLE:
                return h.title
            if col == COL_PAGE:
                return str(h.page)
            if col == COL_SCORES:
                return "\n".join(f"{label} {fmt(v)}" for label, v in row.scores)
            if col == COL_SNIPPET:
                return row.snippet
        elif role == Qt.ItemDataRole.ToolTipRole:
            if col == COL_TITLE:
                return f"{h.title}\n{h.path}" + (f"\n{row.note}" if row.note else "")
            if col == COL_SNIPPET:
                return " ".join(h.text.split())[:1200]
            if col == COL_CHANGE and row.change is not None:
                d = row.change.delta
                if d is None:
                    return tr("rank.new_tip")
                return tr("rank.delta_tip", n=d)
            if col == COL_SCORES:
                return "\n".join(f"{label} = {fmt(v, 4)}" for label, v in row.scores)
        elif role == Qt.ItemDataRole.ForegroundRole and col == COL_CHANGE and row.change is not None:
            d = row.change.delta
            return QBrush(NEW if d is None else UP if d > 0 else DOWN if d < 0 else QColor("#555"))
        elif role == Qt.ItemDataRole.BackgroundRole:
            if self.selected_doc is not None and h.doc_id == self.selected_doc:
                return QBrush(SELECTED_BG)
            if self.hover_doc is not None and h.doc_id == self.hover_doc:
                return QBrush(HOVER_BG)
        elif role == Qt.ItemDataRole.TextAlignmentRole and col in (COL_RANK, COL_CHANGE, COL_PAGE):
            return int(Qt.AlignmentFlag.AlignCenter)
        elif role == SPANS_ROLE:
            return row.spans
        elif role == HIT_ROLE:
            return h
        elif role == DOC_ROLE:
            return h.doc_id
        return None


class SnippetDelegate(QStyledItemDelegate):
    """Paints a snippet with A/B spans coloured, from plain text (never HTML)."""

    LINES = 3

    def _document(self, text: str, spans: Sequence[tuple[int, int, SpanKind]], width: float,
                  option: QStyleOptionViewItem) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(option.font)
        opt = QTextOption()
        opt.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        doc.setDefaultTextOption(opt)
        doc.setPlainText(text)
        doc.setTextWidth(width)
        doc.setDocumentMargin(2)
        cur = QTextCursor(doc)
        if option.state & QStyle.StateFlag.State_Selected:
            whole = QTextCharFormat()
            whole.setForeground(option.palette.highlightedText())
            cur.select(QTextCursor.SelectionType.Document)
            cur.mergeCharFormat(whole)
        for s, e, kind in spans:
            fmt_ = QTextCharFormat()
            fmt_.setBackground(QColor(COLOR_A if kind == "A" else COLOR_B))
            fmt_.setForeground(QColor("#111"))
            cur.setPosition(s)
            cur.setPosition(e, QTextCursor.MoveMode.KeepAnchor)
            cur.mergeCharFormat(fmt_)
        return doc

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        text = opt.text
        opt.text = ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        rect = opt.rect
        doc = self._document(text, index.data(SPANS_ROLE) or (), rect.width(), opt)
        painter.save()
        painter.translate(rect.topLeft())
        painter.setClipRect(QRectF(0, 0, rect.width(), rect.height()))
        doc.drawContents(painter, QRectF(0, 0, rect.width(), rect.height()))
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        h = option.fontMetrics.lineSpacing() * self.LINES + 6
        return QSize(260, h)


class ResultColumn(QWidget):
    """One method's ranking. Emits the document under selection / hover, and open requests."""

    doc_selected = Signal(object)  # Hit
    doc_hovered = Signal(object)  # int | None (doc_id)
    open_requested = Signal(object)  # Hit

    def __init__(self, method: str, title_key: str, show_change: bool = True,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.method = method
        self.title_key = title_key
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        font = self.header.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.1)
        self.header.setFont(font)
        self.subtitle = QLabel()
        self.subtitle.setTextFormat(Qt.TextFormat.PlainText)
        self.subtitle.setWordWrap(True)
        self.subtitle.setStyleSheet("color: #555;")
        self.model = RankedModel(show_change, self)
        self.view = QTableView()
        self.view.setObjectName(f"column_{method}")
        self.view.setMinimumWidth(280)
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setMouseTracking(True)
        self.view.setWordWrap(True)
        self.view.verticalHeader().setVisible(False)
        self.view.setItemDelegateForColumn(COL_SNIPPET, SnippetDelegate(self.view))
        hh = self.view.horizontalHeader()
        for c in (COL_RANK, COL_CHANGE, COL_PAGE, COL_SCORES):
            hh.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        hh.setSectionResizeMode(COL_TITLE, QHeaderView.ResizeMode.Interactive)
        hh.setSectionResizeMode(COL_SNIPPET, QHeaderView.ResizeMode.Stretch)
        hh.resizeSection(COL_TITLE, 130)
        self.view.setColumnHidden(COL_CHANGE, not show_change)
        self.view.verticalHeader().setDefaultSectionSize(SnippetDelegate.LINES * self.fontMetrics().lineSpacing() + 8)
        self.placeholder = QLabel()
        self.placeholder.setTextFormat(Qt.TextFormat.PlainText)
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setStyleSheet("color: #777; padding: 12px;")
        lay.addWidget(self.header)
        lay.addWidget(self.subtitle)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.placeholder)
        self._placeholder_key = "col.placeholder"
        self._placeholder_args: dict[str, Any] = {}
        self._subtitle = ""
        self._verdict: dict[str, Any] | None = None  # the causal column's "why this order" (set_verdict)
        sm = self.view.selectionModel()
        sm.currentRowChanged.connect(self._on_current)
        self.view.entered.connect(self._on_entered)
        self.view.doubleClicked.connect(self._on_double)
        self.view.viewport().installEventFilter(self)
        self.retranslate()
        self.set_placeholder("col.placeholder")

    # -------------------------------------------------------------- content
    def set_rows(self, rows: Sequence[Row], subtitle: str = "") -> None:
        self.model.set_rows(rows)
        self._subtitle = subtitle
        self.subtitle.setText(subtitle)
        self.subtitle.setVisible(bool(subtitle))
        self.view.setVisible(True)
        self.placeholder.setVisible(not rows)
        if not rows:
            self.set_placeholder("col.empty")

    def set_placeholder(self, key: str, **args: Any) -> None:
        """Show a message instead of rows (waiting, running, failed, …)."""
        self._placeholder_key = key
        self._placeholder_args = args
        self.placeholder.setText(tr(key, **args))
        self.placeholder.setVisible(True)
        if not self.model.rows:
            self.view.setVisible(False)

    def clear(self, key: str = "col.placeholder", **args: Any) -> None:
        self.model.set_rows([])
        self._subtitle = ""
        self.subtitle.setVisible(False)
        self.set_placeholder(key, **args)

    def hits(self) -> list[Hit]:
        return [r.hit for r in self.model.rows]

    def set_verdict(self, verdict: dict[str, Any] | None) -> None:
        """State in the heading which ranking this column shows and why (RagService.verdict)."""
        self._verdict = verdict
        self.header.setWordWrap(True)  # the verdict is a sentence; it must not widen the column
        self.header.setText(heading_text(self.title_key, verdict))

    def retranslate(self) -> None:
        self.header.setText(heading_text(self.title_key, self._verdict))
        self.placeholder.setText(tr(self._placeholder_key, **self._placeholder_args))
        self.model.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, 5)

    # -------------------------------------------------------------- selection sync
    def highlight_doc(self, doc_id: int | None, select: bool = True) -> None:
        """Mark ``doc_id``'s rows; move the current row to it without re-announcing."""
        self.model.set_selected_doc(doc_id)
        if not select or doc_id is None:
            return
        row = self.model.row_of_doc(doc_id)
        sm = self.view.selectionModel()
        if row >= 0 and sm.currentIndex().row() != row:
            sm.blockSignals(True)
            sm.setCurrentIndex(self.model.index(row, COL_TITLE),
                               sm.SelectionFlag.ClearAndSelect | sm.SelectionFlag.Rows)
            sm.blockSignals(False)
            self.view.scrollTo(self.model.index(row, COL_TITLE))
            self.view.viewport().update()
        elif row < 0:
            sm.blockSignals(True)
            sm.clearSelection()
            sm.blockSignals(False)

    def hover_doc(self, doc_id: int | None) -> None:
        self.model.set_hover_doc(doc_id)

    def _on_current(self, current: QModelIndex, _prev: QModelIndex) -> None:
        if current.isValid():
            self.doc_selected.emit(self.model.rows[current.row()].hit)

    def _on_entered(self, index: QModelIndex) -> None:
        self.doc_hovered.emit(self.model.rows[index.row()].hit.doc_id if index.isValid() else None)

    def _on_double(self, index: QModelIndex) -> None:
        if index.isValid():
            self.open_requested.emit(self.model.rows[index.row()].hit)

    def eventFilter(self, obj: Any, event: Any) -> bool:
        from PySide6.QtCore import QEvent

        if event.type() == QEvent.Type.Leave:
            self.doc_hovered.emit(None)
        return False

    def select_row(self, row: int) -> None:
        self.view.selectionModel().setCurrentIndex(
            self.model.index(row, COL_TITLE),
            self.view.selectionModel().SelectionFlag.ClearAndSelect
            | self.view.selectionModel().SelectionFlag.Rows)

