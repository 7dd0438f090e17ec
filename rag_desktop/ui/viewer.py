"""The document viewer: a PDF page as an image, or a Word/text document as plain text.

Both show the same marks: the chunk's text region, A terms and B terms, in the legend's
colours. Rendering and reading run on a worker (they can take a moment on big files);
the document's text is shown with ``setPlainText`` and extra selections — never as HTML.
Opening the file in another program happens only when the user clicks "Open file".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import QColor, QDesktopServices, QPixmap, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QStackedWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.causal_context import WordSpan
from rag_desktop.core.highlight import Highlight, hex_to_rgb, region_segments
from rag_desktop.core.types import Hit, OcrLine
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import COLOR_A, COLOR_B, COLOR_REGION, SpanKind, highlight_spans
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError

ZOOMS = (1.0, 1.25, 1.5, 2.0, 2.5)
PAGE_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff"})


def _normalised_with_map(text: str) -> tuple[str, list[int]]:
    """Whitespace-collapsed ``text`` and, per output character, its offset in ``text``."""
    out: list[str] = []
    where: list[int] = []
    prev_space = True
    for i, ch in enumerate(text):
        if ch.isspace():
            if not prev_space:
                out.append(" ")
                where.append(i)
            prev_space = True
        else:
            out.append(ch)
            where.append(i)
            prev_space = False
    return "".join(out), where


def find_region(full_text: str, chunk_text: str) -> tuple[int, int] | None:
    """Where (start, end) in ``full_text`` a chunk's text lies, tolerant of whitespace changes.

    The chunk is cleaned text (lines joined, headers dropped), the viewer shows the raw
    reader text; we look for the chunk's first and last searchable pieces and span the
    region between them.
    """
    norm, where = _normalised_with_map(full_text)
    low = norm.lower()
    segs = region_segments(chunk_text, max_len=50, max_n=400)
    if not segs:
        return None
    first = next(((low.find(s.lower()), s) for s in segs[:20] if low.find(s.lower()) >= 0), None)
    if first is None:
        return None
    start = first[0]
    end = start + len(first[1])
    for s in reversed(segs[-20:]):
        j = low.find(s.lower(), start)
        if j >= 0:
            end = max(end, j + len(s))
            break
    return where[start], where[min(end, len(where)) - 1] + 1


class ViewerDialog(QDialog):
    """Non-modal; one instance reused for every "open" (row double-click or citation)."""

    def __init__(self, runner_for: Callable[[], TaskRunner], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("viewer")
        self.setModal(False)
        self.resize(820, 900)
        self._runner_for = runner_for
        self.hit: Hit | None = None
        self.terms: list[tuple[str, SpanKind]] = []
        # text → its words (RagService.word_spans, set by the window): whole-word marks
        self.words_fn: Callable[[str], Sequence[WordSpan]] | None = None
        self.current_page = 1
        self.n_pages = 1
        self.page_label = ""  # the shown PDF page's printed label when it differs from its number
        self.mode = ""
        self.found: dict[str, int] = {}
        self.region: tuple[int, int] | None = None
        self.pending = 0
        # (doc_id, page) → the page's OCR lines; set by the main window (RagService.ocr_lines).
        self.ocr_lookup: Callable[[int, int], Sequence[OcrLine]] | None = None
        self.last_error: UserError | None = None
        self._status_key = ""
        self._status_args: dict[str, Any] = {}
        lay = QVBoxLayout(self)
        bar = QHBoxLayout()
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        # a long title must not widen the window past a small screen: it is cut, and its tool tip
        # holds it whole
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.title.setMinimumWidth(120)
        self.prev_btn = QPushButton("◀")
        self.next_btn = QPushButton("▶")
        self.page_box = QSpinBox()
        self.page_box.setMinimum(1)
        self.page_of = QLabel()
        self.zoom_box = QComboBox()
        for z in ZOOMS:
            self.zoom_box.addItem(f"{int(z * 100)}%", z)
        self.zoom_box.setCurrentIndex(ZOOMS.index(1.5))
        self.open_btn = QPushButton()
        bar.addWidget(self.title, 1)
        bar.addWidget(self.prev_btn)
        bar.addWidget(self.page_box)
        bar.addWidget(self.page_of)
        bar.addWidget(self.next_btn)
        bar.addWidget(self.zoom_box)
        bar.addWidget(self.open_btn)
        legend = QHBoxLayout()
        self.legend_labels: list[QLabel] = []
        for color in (COLOR_REGION, COLOR_A, COLOR_B):
            lab = QLabel()
            lab.setTextFormat(Qt.TextFormat.PlainText)
            lab.setStyleSheet(f"QLabel {{ background: {color}; color: #111; border-radius: 6px; padding: 1px 6px; }}")
            self.legend_labels.append(lab)
            legend.addWidget(lab)
        legend.addStretch(1)
        self.status = QLabel()
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.stack = QStackedWidget()
        self.image = QLabel()
        self.image.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.page_scroll = QScrollArea()
        self.page_scroll.setWidget(self.image)
        self.page_scroll.setWidgetResizable(True)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.stack.addWidget(self.page_scroll)
        self.stack.addWidget(self.text)
        lay.addLayout(bar)
        lay.addLayout(legend)
        lay.addWidget(self.status)
        lay.addWidget(self.stack, 1)
        self.prev_btn.clicked.connect(lambda: self.goto_page(self.current_page - 1))
        self.next_btn.clicked.connect(lambda: self.goto_page(self.current_page + 1))
        self.page_box.editingFinished.connect(lambda: self.goto_page(self.page_box.value()))
        self.zoom_box.currentIndexChanged.connect(lambda _i: self._render())
        self.open_btn.clicked.connect(self.open_externally)
        self.retranslate()

    # -------------------------------------------------------------- public
    def show_hit(self, hit: Hit, terms: Sequence[tuple[str, SpanKind]] = (),
                 display: Mapping[str, str] | None = None, page: int | None = None) -> None:
        """Open ``hit``'s document at ``page`` (default: the chunk's page) with its marks."""
        d = display or {}
        self.hit = hit
        # Readable words search better than stems; keep the stem too when it differs.
        expanded: list[tuple[str, SpanKind]] = []
        for t, k in terms:
            expanded.append((d.get(t, t), k))
            if d.get(t, t) != t:
                expanded.append((t, k))
        self.terms = expanded
        self.current_page = max(1, page if page is not None else hit.page)
        self.title.setText(f"{hit.title} — {Path(hit.path).name}")
        self.title.setToolTip(self.title.text())
        self.setWindowTitle(hit.title)
        self.found = {}
        self.last_error = None
        if Path(hit.path).suffix.lower() in PAGE_SUFFIXES:  # PDFs and OCR'd images are shown as pages
            self.mode = "pdf"
            self.stack.setCurrentWidget(self.page_scroll)
            self._render()
        else:
            self.mode = "text"
            self.stack.setCurrentWidget(self.text)
            self._load_text()
        if not self.isVisible():
            self._fit_screen()
        self.show()
        self.raise_()

    def _fit_screen(self) -> None:
        """Keep the window on its screen: the page-sized default (820 × 900, wider once the
        tool bar is laid out) is taller than a 1280 × 800 laptop screen, whose bottom rows
        would be out of reach. 40 px are left for the window manager's title bar."""
        scr = self.screen()
        if scr is None:
            return
        avail = scr.availableGeometry()
        w = min(max(self.width(), self.sizeHint().width()), avail.width())
        h = min(self.height(), avail.height() - 40)
        self.resize(w, h)
        x = min(max(self.x(), avail.left()), avail.right() - w)
        y = min(max(self.y(), avail.top()), avail.bottom() - h - 40)
        self.move(max(x, avail.left()), max(y, avail.top()))

    def goto_page(self, page: int) -> None:
        if self.hit is None or self.mode != "pdf":
            return
        page = min(max(1, page), max(1, self.n_pages))
        if page != self.current_page:
            self.current_page = page
            self._render()

    def open_externally(self) -> None:
        if self.hit is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(self.hit.path))

    # -------------------------------------------------------------- PDF
    def _render(self) -> None:
        if self.hit is None or self.mode != "pdf":
            return
        hit, page = self.hit, self.current_page
        zoom = float(self.zoom_box.currentData() or 1.5)
        marks = [Highlight(s, hex_to_rgb(COLOR_REGION), "region", 0.35)
                 for s in region_segments(hit.text)] if page == hit.page else []
        words_fn, terms = self.words_fn, list(self.terms)
        colors = {"A": hex_to_rgb(COLOR_A), "B": hex_to_rgb(COLOR_B)}
        if words_fn is None:  # no tokenizer: MuPDF's substring search
            marks += [Highlight(t, colors[k], k, 0.6) for t, k in terms if k in colors]

        def line_marks(text: str) -> list[tuple[int, int, str]]:
            assert words_fn is not None
            return [(s, e, k) for s, e, k in highlight_spans(text, terms, words_fn(text) or None)]

        lookup = self.ocr_lookup

        def job(ctx: TaskContext) -> Any:
            from rag_desktop.app.documents import render_page

            # On a scanned page the marks are placed from the OCR line boxes (no text layer for
            # the whole-word matcher: the terms are searched in the recognised lines instead).
            lines = lookup(hit.doc_id, page) if lookup is not None else ()
            extra = [Highlight(t, colors[k], k, 0.6) for t, k in terms if k in colors] \
                if lines and words_fn is not None else []
            return render_page(hit.path, page, marks + extra, zoom,
                               words=line_marks if words_fn is not None else None,
                               word_colors=colors, ocr_lines=lines)

        self.pending += 1
        self._set_status("viewer.loading")
        self._runner_for().submit("render", job, on_result=self._on_rendered, on_error=self._on_error,
                                  on_finished=self._done)

    def _on_rendered(self, rp: Any) -> None:
        pix = QPixmap()
        pix.loadFromData(rp.png, "PNG")
        self.image.setPixmap(pix)
        self.n_pages = rp.n_pages
        self.current_page = rp.page
        self.page_box.blockSignals(True)
        self.page_box.setMaximum(rp.n_pages)
        self.page_box.setValue(rp.page)
        self.page_box.blockSignals(False)
        self.found = dict(rp.found)
        n_terms = rp.word_marks or sum(v for k, v in rp.found.items() if any(k == t for t, _ in self.terms))
        self.page_label = rp.label if rp.label and rp.label != str(rp.page) else ""
        if self.page_label:
            self.page_of.setText(tr("viewer.page_of_printed", n=rp.n_pages, label=self.page_label))
            self._set_status("viewer.page_status_printed", label=self.page_label, page=rp.page, n=rp.n_pages,
                             terms=n_terms)
        else:
            self.page_of.setText(f"/ {rp.n_pages}")
            self._set_status("viewer.page_status", page=rp.page, n=rp.n_pages, terms=n_terms)
        self.prev_btn.setEnabled(rp.page > 1)
        self.next_btn.setEnabled(rp.page < rp.n_pages)
        # The passage's start near the top, every time: a passage low on a page was below the fold.
        # The scroll range follows the new pixmap only after the layout pass, hence the timer.
        top = rp.region_top
        bar = self.page_scroll.verticalScrollBar()
        QTimer.singleShot(0, lambda: bar.setValue(0 if top is None else max(0, top - self._context_px())))

    def _context_px(self) -> int:
        """Room left above a passage's first line for what leads into it: a tenth of the view."""
        return self.page_scroll.viewport().height() // 10

    # -------------------------------------------------------------- Word / text
    def _load_text(self) -> None:
        assert self.hit is not None
        hit = self.hit

        words_fn = self.words_fn

        def job(ctx: TaskContext) -> Any:
            from rag_desktop.app.documents import page_texts

            pages = page_texts(hit.path, ctx.cancel)
            # the words of the whole text, on the worker (segmenting a long document takes a moment)
            return pages, (tuple(words_fn("\n\n".join(pages))) or None if words_fn is not None else None)

        self.pending += 1
        self._set_status("viewer.loading")
        self._runner_for().submit("read", job, on_result=self._on_text, on_error=self._on_error,
                                  on_finished=self._done)

    def _on_text(self, result: tuple[list[str], tuple[WordSpan, ...] | None]) -> None:
        assert self.hit is not None
        pages, words = result
        full = "\n\n".join(pages)
        self.text.setPlainText(full)
        self.n_pages = len(pages) or 1
        self.page_box.setMaximum(self.n_pages)
        self.page_label = ""
        self.page_of.setText(f"/ {self.n_pages}")
        sels: list[QTextEdit.ExtraSelection] = []
        doc = self.text.document()
        region = find_region(full, self.hit.text)
        if region is not None:
            sels.append(self._selection(doc, region[0], region[1], COLOR_REGION, 0x60))
        spans = highlight_spans(full, self.terms, words)
        for s, e, kind in spans:
            sels.append(self._selection(doc, s, e, COLOR_A if kind == "A" else COLOR_B, 0xFF))
        self.text.setExtraSelections(sels)
        self.found = {}
        for s, e, _k in spans:
            key = full[s:e].lower()
            self.found[key] = self.found.get(key, 0) + 1
        self.region = region
        if region is not None:
            self._scroll_text_to(region[0])
        self._set_status("viewer.text_status", terms=len(spans),
                         region=tr("viewer.region_found") if region else tr("viewer.region_missing"))

    def _scroll_text_to(self, pos: int) -> None:
        """Put the line holding ``pos`` near the top of the view (a tenth of it left above), not in the
        middle where a long passage runs past the fold: scrolled to the end first, so that making the
        cursor visible brings its line to the top edge, then back by the context."""
        cur = QTextCursor(self.text.document())
        cur.setPosition(pos)
        self.text.setTextCursor(cur)
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())
        self.text.ensureCursorVisible()
        line_h = max(1, self.text.fontMetrics().lineSpacing())
        bar.setValue(max(0, bar.value() - self.text.viewport().height() // 10 // line_h))

    @staticmethod
    def _selection(doc: Any, start: int, end: int, color: str, alpha: int) -> QTextEdit.ExtraSelection:
        sel = QTextEdit.ExtraSelection()
        cur = QTextCursor(doc)
        cur.setPosition(start)
        cur.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        sel.cursor = cur
        fmt = QTextCharFormat()
        c = QColor(color)
        c.setAlpha(alpha)
        fmt.setBackground(c)
        sel.format = fmt
        return sel

    # -------------------------------------------------------------- shared
    def _on_error(self, err: UserError) -> None:
        self.last_error = err
        self.status.setText(err.text())
        self.image.clear()

    def _done(self) -> None:
        self.pending -= 1

    def _set_status(self, key: str, **args: Any) -> None:
        self._status_key, self._status_args = key, args
        self.status.setText(tr(key, **args))

    def retranslate(self) -> None:
        self.open_btn.setText(tr("viewer.open_file"))
        self.open_btn.setToolTip(tr("viewer.open_file_tip"))
        self.prev_btn.setToolTip(tr("viewer.prev"))
        self.next_btn.setToolTip(tr("viewer.next"))
        for lab, key in zip(self.legend_labels, ("viewer.legend_region", "legend.a", "legend.b"), strict=True):
            lab.setText(tr(key))
        if self._status_key:
            self.status.setText(tr(self._status_key, **self._status_args))
        if self.page_label:
            self.page_of.setText(tr("viewer.page_of_printed", n=self.n_pages, label=self.page_label))
        if self.hit is None:
            self.setWindowTitle(tr("viewer.title"))

