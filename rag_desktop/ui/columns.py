"""The result columns: Baseline | Causal rerank | Cross-encoder | CF-RAG, side by side.

Each column is a list of two-part rows: a line with rank, change vs baseline, title, page
and the column's scores, then the passage across the row's full width with the A/B terms
highlighted on whole words. Selecting or hovering a row announces its
document; the window then highlights that document in every column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QRectF,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetrics,
    QHelpEvent,
    QPainter,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.app.question_flow import flat_text
from rag_desktop.core.gate import MIN_PROBES_FOR_RELIABILITY
from rag_desktop.core.types import Hit
from rag_desktop.ui.i18n import has_tr, tr
from rag_desktop.ui.plaintext import plain_tooltip
from rag_desktop.ui.present import (
    COLOR_A,
    COLOR_B,
    RankChange,
    SpanKind,
    WordSpan,
    fmt,
    highlight_spans,
    snippet_bounds,
)

COL_RANK, COL_CHANGE, COL_TITLE, COL_PAGE, COL_SCORES, COL_SNIPPET = range(6)
HEADER_KEYS = ("col.rank", "col.change", "col.title", "col.page", "col.scores", "col.snippet")

SPANS_ROLE = Qt.ItemDataRole.UserRole + 1
HIT_ROLE = Qt.ItemDataRole.UserRole + 2
DOC_ROLE = Qt.ItemDataRole.UserRole + 3
NOTE_ROLE = Qt.ItemDataRole.UserRole + 4
SNIPPET_CHARS = 420  # more than three lines of the widest column hold; the rest is clipped

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
        effect = str(verdict.get("effect") or ("hurts" if verdict.get("answer") == "baseline" else "helps"))
        if effect in ("echoes", "no_echoes") and verdict.get("echo_count") is not None:
            return tr(f"verdict.{effect}", k=verdict["echo_count"], n=n, rel=rel, shown=name)
        probes = tr("verdict.probes.person" if verdict.get("calibrated_by") == "person" else "verdict.probes.library",
                    n=n)
        text = tr(f"verdict.{effect}", probes=probes, rel=rel, shown=name)
        if n < MIN_PROBES_FOR_RELIABILITY:
            text += tr("verdict.few")
        return text
    if reason in ("not_calibrated", "override", "setting"):
        answer = str(verdict.get("answer") or shown)
        return tr(f"verdict.{reason}", shown=name,
                  answer=tr(f"verdict.name.{answer}") if has_tr(f"verdict.name.{answer}") else answer)
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
             terms: Sequence[tuple[str, SpanKind]] = (), note: str = "",
             words: Sequence[WordSpan] | None = None) -> Row:
    """Build a row with its snippet starting near the first highlighted term.

    ``words`` are the words of ``flat_text(hit.text)`` (RagService.word_spans): with them the
    terms light whole words only.
    """
    flat = flat_text(hit.text)
    spans = highlight_spans(flat, terms, words)
    start, end = snippet_bounds(flat, SNIPPET_CHARS, spans[0][0] if spans else None)
    pre = "…" if start > 0 else ""
    text = pre + flat[start:end] + ("…" if end < len(flat) else "")
    shift = len(pre) - start
    shown = tuple((s + shift, e + shift, k) for s, e, k in spans if s >= start and e <= end)
    return Row(hit, change, tuple(scores), tuple(terms), note, text, shown)


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
            if col == COL_TITLE:  # document text: plain_tooltip, or Qt renders its markup
                return plain_tooltip(f"{h.title}\n{h.path}" + (f"\n{row.note}" if row.note else ""))
            if col == COL_SNIPPET:
                return plain_tooltip(" ".join(h.text.split())[:1200])
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
        elif role == NOTE_ROLE:
            return row.note
        return None


class RowDelegate(QStyledItemDelegate):
    """Paints one whole row: a line with rank, change, title and page (and the scores, when
    there is one), a line of scores when there are several, then the passage across the full
    width with its A/B terms coloured (from plain text, never HTML). The passage gets the
    row's width instead of a narrow table column.
    """

    LINES = 3  # passage lines

    def __init__(self, show_change: bool, score_line: bool = False, parent: Any = None) -> None:
        super().__init__(parent)
        self.show_change = show_change
        self.score_line = score_line  # several scores: a line of their own under the title

    # -------------------------------------------------------------- geometry
    def zones(self, rect: QRect, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> dict[int, QRect]:
        """Where each model column's content is drawn inside the row ``rect`` (for tooltips)."""
        fm = option.fontMetrics
        pad = 4
        line = fm.lineSpacing() + 2
        top = QRect(rect.left() + pad, rect.top() + 2, rect.width() - 2 * pad, line)
        x = top.left()
        out: dict[int, QRect] = {}
        w = fm.horizontalAdvance("88") + 8
        out[COL_RANK] = QRect(x, top.top(), w, line)
        x += w
        if self.show_change:
            w = fm.horizontalAdvance("▲88") + 8
            out[COL_CHANGE] = QRect(x, top.top(), w, line)
            x += w
        page_w = fm.horizontalAdvance(self._page_text(index)) + 10
        if self.score_line:
            out[COL_PAGE] = QRect(top.right() - page_w, top.top(), page_w, line)
            out[COL_SCORES] = QRect(x, top.bottom() + 1, top.right() - x, line)
            body_top = top.bottom() + 1 + line
        else:
            scores = self._scores_text(index)
            sw = min(fm.horizontalAdvance(scores) + 6, max(0, (top.right() - x) // 2))
            out[COL_SCORES] = QRect(top.right() - sw, top.top(), sw, line)
            out[COL_PAGE] = QRect(out[COL_SCORES].left() - page_w, top.top(), page_w, line)
            body_top = top.bottom() + 1
        out[COL_TITLE] = QRect(x, top.top(), max(0, out[COL_PAGE].left() - x), line)
        out[COL_SNIPPET] = QRect(rect.left() + pad - 2, body_top, rect.width() - 2 * pad + 4,
                                 rect.bottom() - body_top)
        return out

    @staticmethod
    def _scores_text(index: QModelIndex | QPersistentModelIndex) -> str:
        text = _sib(index, COL_SCORES).data(Qt.ItemDataRole.DisplayRole) or ""
        return "  ·  ".join(str(text).split("\n"))

    @staticmethod
    def _page_text(index: QModelIndex | QPersistentModelIndex) -> str:
        return tr("col.page_n", n=_sib(index, COL_PAGE).data(Qt.ItemDataRole.DisplayRole) or "")

    def zone_at(self, rect: QRect, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex,
                pos: QPoint) -> int:
        for col, r in self.zones(rect, option, index).items():
            if r.contains(pos):
                return col
        return COL_SNIPPET

    def height(self, fm: QFontMetrics) -> int:
        """Title line (+ score line) + LINES passage lines; the passage's lines are a little
        taller than the font's when a fallback font (CJK) joins in, hence the slack."""
        head = (fm.lineSpacing() + 2) * (2 if self.score_line else 1)
        return head + int(fm.lineSpacing() * 1.2 * self.LINES) + 10

    # -------------------------------------------------------------- painting
    def _document(self, text: str, spans: Sequence[tuple[int, int, SpanKind]], width: float,
                  option: QStyleOptionViewItem, selected: bool) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(option.font)
        opt = QTextOption()
        opt.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        doc.setDefaultTextOption(opt)
        doc.setPlainText(text)
        doc.setTextWidth(width)
        doc.setDocumentMargin(2)
        cur = QTextCursor(doc)
        whole = QTextCharFormat()
        whole.setForeground(option.palette.highlightedText() if selected else QBrush(QColor("#333")))
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

    @staticmethod
    def whole_lines_height(doc: QTextDocument, limit: float) -> float:
        """The height of the passage's lines that fit entirely within ``limit`` (a half-cut
        last line reads as a rendering fault)."""
        best = 0.0
        doc.size()  # lays the document out
        block = doc.begin()
        while block.isValid():
            layout = block.layout()
            if layout is not None:
                y0 = layout.position().y()
                for i in range(layout.lineCount()):
                    ln = layout.lineAt(i)
                    bottom = y0 + ln.y() + ln.height()
                    if bottom > limit:
                        return best
                    best = bottom
            block = block.next()
        return best

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        text_pen = opt.palette.highlightedText().color() if selected else opt.palette.text().color()
        muted = text_pen if selected else QColor("#555")
        rect = opt.rect
        z = self.zones(rect, opt, index)
        fm = opt.fontMetrics
        painter.save()
        painter.setClipRect(rect)
        align = int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft)
        right = int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight)
        bold = QFont(opt.font)
        bold.setBold(True)
        bfm = QFontMetrics(bold)
        painter.setFont(bold)
        painter.setPen(text_pen)
        painter.drawText(z[COL_RANK], align, str(_sib(index, COL_RANK).data() or ""))
        if COL_CHANGE in z:
            ch = _sib(index, COL_CHANGE)
            brush = ch.data(Qt.ItemDataRole.ForegroundRole)
            painter.setPen(brush.color() if isinstance(brush, QBrush) and not selected else text_pen)
            painter.drawText(z[COL_CHANGE], align, str(ch.data() or ""))
            painter.setPen(text_pen)
        title_rect = z[COL_TITLE]
        title = str(_sib(index, COL_TITLE).data() or "")
        note = str(index.data(NOTE_ROLE) or "")
        painter.drawText(title_rect, align,
                         bfm.elidedText(title, Qt.TextElideMode.ElideRight, max(0, title_rect.width() - 4)))
        painter.setFont(opt.font)
        painter.setPen(muted)
        painter.drawText(z[COL_PAGE], right, self._page_text(index))
        sc = z[COL_SCORES]
        scores = self._scores_text(index)
        if self.score_line:
            sw = min(fm.horizontalAdvance(scores) + 6, sc.width())
            painter.drawText(QRect(sc.left(), sc.top(), sw, sc.height()), align,
                             fm.elidedText(scores, Qt.TextElideMode.ElideRight, sw))
            if note and sc.width() - sw > 40:  # e.g. "given to the winning hypothesis"
                painter.setPen(text_pen if selected else QColor("#6A3FB5"))
                painter.drawText(QRect(sc.left() + sw + 6, sc.top(), sc.width() - sw - 6, sc.height()), align,
                                 fm.elidedText("● " + note, Qt.TextElideMode.ElideRight, sc.width() - sw - 6))
        else:
            painter.drawText(sc, right, fm.elidedText(scores, Qt.TextElideMode.ElideLeft, sc.width()))
        sn = z[COL_SNIPPET]
        doc = self._document(str(_sib(index, COL_SNIPPET).data() or ""), index.data(SPANS_ROLE) or (), sn.width(),
                             opt, selected)
        shown = self.whole_lines_height(doc, sn.height())
        painter.translate(sn.topLeft())
        painter.setClipRect(QRectF(0, 0, sn.width(), shown))
        doc.drawContents(painter, QRectF(0, 0, sn.width(), shown))
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        return QSize(260, self.height(option.fontMetrics))


def _sib(index: QModelIndex | QPersistentModelIndex, col: int) -> QModelIndex:
    """The same row's index in model column ``col``."""
    model = index.model()
    return model.index(index.row(), col) if model is not None else QModelIndex()


class RowView(QTableView):
    """The table with one visible column (the whole row, painted by RowDelegate). Tooltips come
    from the model column under the mouse, so each part of the row keeps its own tooltip."""

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            assert isinstance(event, QHelpEvent)
            index = self.indexAt(event.pos())
            delegate = self.itemDelegateForColumn(COL_TITLE)
            if index.isValid() and isinstance(delegate, RowDelegate):
                opt = QStyleOptionViewItem()
                self.initViewItemOption(opt)
                col = delegate.zone_at(self.visualRect(index), opt, index, event.pos())
                tip = _sib(index, col).data(Qt.ItemDataRole.ToolTipRole)
                if tip:
                    QToolTip.showText(event.globalPos(), str(tip), self.viewport())
                else:
                    QToolTip.hideText()
                return True
        return super().viewportEvent(event)


class ResultColumn(QWidget):
    """One method's ranking. Emits the document under selection / hover, and open requests."""

    doc_selected = Signal(object)  # Hit
    doc_hovered = Signal(object)  # int | None (doc_id)
    open_requested = Signal(object)  # Hit
    collapsed_changed = Signal(bool)  # a collapsible column with nothing to show folds to a strip

    def __init__(self, method: str, title_key: str, show_change: bool = True, collapsible: bool = False,
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
        self.subtitle.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.model = RankedModel(show_change, self)
        self.view = RowView()
        self.view.setObjectName(f"column_{method}")
        self.view.setMinimumWidth(220)
        self.view.setModel(self.model)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setMouseTracking(True)
        self.view.setShowGrid(False)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.view.verticalHeader().setVisible(False)
        self.view.horizontalHeader().setVisible(False)
        self.delegate = RowDelegate(show_change, score_line=(method != "baseline"), parent=self.view)
        self.view.setItemDelegateForColumn(COL_TITLE, self.delegate)
        # One visible column holds the whole row; the others stay in the model for their
        # data and tooltips (RowView shows the tooltip of the part under the mouse).
        for c in (COL_RANK, COL_CHANGE, COL_PAGE, COL_SCORES, COL_SNIPPET):
            self.view.setColumnHidden(c, True)
        self.view.horizontalHeader().setSectionResizeMode(COL_TITLE, QHeaderView.ResizeMode.Stretch)
        self.view.verticalHeader().setDefaultSectionSize(self.delegate.height(self.fontMetrics()))
        self.placeholder = QLabel()
        self.placeholder.setTextFormat(Qt.TextFormat.PlainText)
        self.placeholder.setWordWrap(True)
        # At the top, so every column's heading and message line up whatever their heights.
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.placeholder.setStyleSheet("color: #777; padding: 12px;")
        self.placeholder.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self.header.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.header)
        lay.addWidget(self.subtitle)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.placeholder, 1)
        self.collapsible = collapsible
        self._placeholder_key = "col.placeholder"
        self._placeholder_args: dict[str, Any] = {}
        self._subtitle = ""
        self._verdict: dict[str, Any] | None = None  # the causal column's "why this order" (set_verdict)
        # The columns shown side by side (align_headings): their headings and subtitles take the
        # same height, so the first rows line up whatever each heading says.
        self.peers: Sequence[ResultColumn] = ()
        self._aligning = False
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
        self._announce_collapse()
        align_headings(self.peers)

    def is_collapsed(self) -> bool:
        """A collapsible column (CF-RAG) folds while it has no rows to show."""
        return self.collapsible and not self.model.rows

    def _announce_collapse(self) -> None:
        c = self.is_collapsed()
        if c != getattr(self, "_collapsed", None):
            self._collapsed = c
            self.collapsed_changed.emit(c)

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
        self.subtitle.setText("")  # align_headings may show the label again, as room under the heading
        self.subtitle.setVisible(False)
        self.set_placeholder(key, **args)
        self._announce_collapse()
        align_headings(self.peers)

    def hits(self) -> list[Hit]:
        return [r.hit for r in self.model.rows]

    def set_verdict(self, verdict: dict[str, Any] | None) -> None:
        """State in the heading which ranking this column shows and why (RagService.verdict)."""
        self._verdict = verdict
        self.header.setWordWrap(True)  # the verdict is a sentence; it must not widen the column
        self.header.setText(heading_text(self.title_key, verdict))
        align_headings(self.peers)

    def retranslate(self) -> None:
        self.header.setText(heading_text(self.title_key, self._verdict))
        self.placeholder.setText(tr(self._placeholder_key, **self._placeholder_args))
        self.model.headerDataChanged.emit(Qt.Orientation.Horizontal, 0, 5)
        align_headings(self.peers)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        align_headings(self.peers)  # a narrower column may wrap its subtitle onto another line

    def heading_heights(self) -> tuple[int, int]:
        """(heading, subtitle) heights this column needs at its width (0 for a hidden subtitle)."""
        lay = self.layout()
        m = lay.contentsMargins() if lay is not None else None
        w = max(1, self.width() - (m.left() + m.right() if m is not None else 0))

        def need(label: QLabel) -> int:
            # heightForWidth is -1 for an empty label
            return max(0, label.heightForWidth(w) if label.wordWrap() else label.sizeHint().height())

        # a shown subtitle also takes the layout's spacing above it
        return need(self.header), (need(self.subtitle) + self._spacing() if not self.subtitle.isHidden() else 0)

    def _spacing(self) -> int:
        lay = self.layout()
        return max(0, lay.spacing()) if lay is not None else 0

    # -------------------------------------------------------------- selection sync
    def highlight_doc(self, doc_id: int | None, select: bool = True, scroll: bool = True) -> None:
        """Mark ``doc_id``'s rows; move the current row to it without re-announcing (and into view
        with ``scroll``)."""
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
            if scroll:
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


def align_headings(columns: Sequence[ResultColumn]) -> None:
    """Give every column's heading block (title, verdict, subtitle) the height of the tallest,
    so the columns' first rows start at one height (before, the causal column's verdict line
    pushed its rows below the others'). Each subtitle stays right under its own heading; the
    space a shorter block leaves goes under its subtitle, so no heading floats in a gap.

    A column without a subtitle (the folded CF-RAG strip, a column still waiting) keeps the
    space empty, so its message starts where the others' rows do."""
    shown = [c for c in columns if not c.isHidden()]
    if len(shown) < 2 or any(c._aligning for c in shown):
        return
    heights = [c.heading_heights() for c in shown]
    total = max(h + s for h, s in heights)
    for c, (h, _s) in zip(shown, heights, strict=True):
        c._aligning = True
        try:
            room = total - h - c._spacing()  # what is left for the subtitle under this heading
            c.subtitle.setMinimumHeight(max(0, room))
            c.subtitle.setVisible(room > 0)
        finally:
            c._aligning = False
