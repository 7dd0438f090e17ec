"""One method's answer: tokens stream in; then [n] citations become links to the cited page.

Model output is untrusted: it is inserted as plain text, and links are made by
setting character formats on the ``[n]`` spans — never by building HTML from it. A
citation to a source the model was never given is flagged (red, struck through,
with a tooltip) instead of linked.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.types import Answer, Citation, Hit
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_tooltip
from rag_desktop.ui.present import citation_spans

LINK = QColor("#1F5FBF")
BAD = QColor("#B3261E")


class AnswerPane(QWidget):
    citation_clicked = Signal(object)  # Citation (valid ones only)

    def __init__(self, method: str, title_key: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.method = method
        self.title_key = title_key
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        top = QHBoxLayout()
        self.header = QLabel()
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        f = self.header.font()
        f.setBold(True)
        self.header.setFont(f)
        self.status = QLabel()
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # messages carry file names and titles
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setStyleSheet("color: #555;")
        # A long status must not widen the window: it is clipped here and whole in the tooltip.
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.sources_btn = QToolButton()
        self.sources_btn.setCheckable(True)
        self.sources_btn.toggled.connect(self._toggle_sources)
        top.addWidget(self.header)
        top.addWidget(self.status, 1)
        top.addWidget(self.sources_btn)
        self.browser = QTextBrowser()
        self.browser.setObjectName(f"answer_{method}")
        self.browser.setOpenLinks(False)
        self.browser.setOpenExternalLinks(False)
        self.browser.anchorClicked.connect(self._on_anchor)
        self.sources = QTableWidget(0, 4)
        self.sources.verticalHeader().setVisible(False)
        # n and Document sized to their text (a stretch of the other two squeezed them empty);
        # headers elide at the right instead of losing both ends.
        sh = self.sources.horizontalHeader()
        sh.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        sh.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        sh.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        sh.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        sh.setMinimumSectionSize(40)
        sh.setTextElideMode(Qt.TextElideMode.ElideRight)
        sh.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        sh.resizeSection(1, 140)
        self.sources.setWordWrap(True)
        self.sources.setVisible(False)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.browser)
        split.addWidget(self.sources)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        self.answer: Answer | None = None
        self.streaming = False
        self._originals: dict[int, Hit] = {}
        self._status_key = "answer.idle"
        self._status_args: dict[str, object] = {}
        self.retranslate()

    # -------------------------------------------------------------- state
    def _set_status(self, key: str, **args: object) -> None:
        self._status_key, self._status_args = key, args
        self.status.setText(tr(key, **args))
        self.status.setToolTip(plain_tooltip(self.status.text()))

    def reset(self, key: str = "answer.idle") -> None:
        self.answer = None
        self.streaming = False
        self.browser.clear()
        self.sources.setRowCount(0)
        self._set_status(key)

    def start(self) -> None:
        self.reset("answer.generating")
        self.streaming = True

    def append_token(self, text: str) -> None:
        if not self.streaming:
            self.start()
        cur = self.browser.textCursor()
        cur.movePosition(QTextCursor.MoveOperation.End)
        cur.insertText(text, QTextCharFormat())
        self.browser.setTextCursor(cur)
        self.browser.ensureCursorVisible()

    def set_progress(self, message: str) -> None:
        self.status.setText(message)
        self.status.setToolTip(plain_tooltip(message))

    def set_failed(self, message: str) -> None:
        self._set_status("answer.failed", msg=message)

    def set_stopped(self) -> None:
        self._set_status("answer.stopped")

    def text(self) -> str:
        return self.browser.toPlainText()

    def set_answer(self, answer: Answer, originals: Sequence[Hit] = ()) -> None:
        """Show the final text with clickable citations; ``originals`` are the untranslated hits."""
        self.answer = answer
        self.streaming = False
        self._originals = {h.unit_id: h for h in originals}
        self.browser.setPlainText(answer.text)
        by_n = {c.n: c for c in answer.citations}
        doc = self.browser.document()
        for start, end, n in citation_spans(answer.text):
            c = by_n.get(n)
            cur = QTextCursor(doc)
            cur.setPosition(start)
            cur.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
            fmt = QTextCharFormat()
            if c is not None and c.valid:
                fmt.setAnchor(True)
                fmt.setAnchorHref(f"cite:{n}")
                fmt.setForeground(LINK)
                fmt.setFontUnderline(True)
                fmt.setToolTip(plain_tooltip(tr("answer.cite_tip", title=c.title, page=c.page or 1)))
            else:
                fmt.setForeground(BAD)
                fmt.setFontStrikeOut(True)
                fmt.setToolTip(tr("answer.cite_invalid_tip", n=n))
            cur.mergeCharFormat(fmt)
        invalid = [c.n for c in answer.citations if not c.valid]
        if invalid:
            self._set_status("answer.done_invalid", n=len(answer.citations),
                             bad=", ".join(f"[{i}]" for i in invalid))
        elif not answer.text.strip():
            self._set_status("answer.empty")
        else:
            n = len(answer.citations)
            self._set_status("answer.done_one" if n == 1 else "answer.done", n=n)
        self._fill_sources()

    # -------------------------------------------------------------- citations
    def citation(self, n: int) -> Citation | None:
        if self.answer is None:
            return None
        return next((c for c in self.answer.citations if c.n == n), None)

    def activate_citation(self, n: int) -> bool:
        c = self.citation(n)
        if c is None or not c.valid:
            return False
        self.citation_clicked.emit(c)
        return True

    def _on_anchor(self, url: QUrl) -> None:
        s = url.toString()
        if s.startswith("cite:") and s[5:].isdigit():
            self.activate_citation(int(s[5:]))

    # -------------------------------------------------------------- sources (+ translations)
    def _fill_sources(self) -> None:
        srcs = self.answer.sources if self.answer is not None else ()
        self.sources.setRowCount(len(srcs))
        for i, h in enumerate(srcs):
            orig = self._originals.get(h.unit_id)
            given = " ".join(h.text.split())
            original = " ".join(orig.text.split()) if orig is not None else given
            cells = [f"[{i + 1}]", f"{h.title} — p. {h.page}", given[:600],
                     original[:600] if original != given else tr("answer.same_as_given")]
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)  # plain text item: never interpreted as HTML
                item.setToolTip(plain_tooltip(text if j < 2 else (given if j == 2 else original)[:1500]))
                self.sources.setItem(i, j, item)
        self.sources.resizeRowsToContents()

    def _toggle_sources(self, on: bool) -> None:
        self.sources.setVisible(on)

    def retranslate(self) -> None:
        self.header.setText(tr(self.title_key))
        self.status.setText(tr(self._status_key, **self._status_args))
        self.sources_btn.setText(tr("answer.sources"))
        self.sources_btn.setToolTip(tr("answer.sources_tip"))
        self.sources.setHorizontalHeaderLabels([tr("answer.src_n"), tr("answer.src_doc"),
                                                tr("answer.src_given"), tr("answer.src_original")])
