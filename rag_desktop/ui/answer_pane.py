"""One method's answer: tokens stream in; then [n] citations become links to the cited page.

Model output is untrusted: it is inserted as plain text, and links are made by
setting character formats on the ``[n]`` spans — never by building HTML from it. A
citation to a source the model was never given is flagged (red, struck through,
with a tooltip) instead of linked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
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

from rag_desktop.core.abstain import MIN_JUDGED, MIN_QUESTION_LIFT, Abstention, yes_share
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.types import Answer, Citation, Hit
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.needs_view import NeedsView
from rag_desktop.ui.plaintext import plain_tooltip
from rag_desktop.ui.present import abstention_key, citation_spans

LINK = QColor("#1F5FBF")
BAD = QColor("#B3261E")


SOURCE_ROW_LINES = 4  # a source row shows this many lines of its passage; the tooltip has all


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
        self.status.setStyleSheet("color: #555;")
        # A long status must not widen the window, and in a narrow pane its end is what matters
        # ("done · 2 citations", "⚠ the passages may not answer this"): it has the pane's whole
        # width under the title and wraps onto more lines instead of being clipped (beside the
        # title it was clipped to a few words at 1280 pixels); the tooltip has it too.
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.status.setWordWrap(True)
        self.sources_btn = QToolButton()
        self.sources_btn.setCheckable(True)
        self.sources_btn.toggled.connect(self._toggle_sources)
        top.addWidget(self.header, 1)
        top.addWidget(self.sources_btn)
        # "Which sources does it need?" (ui.needs_view), offered under the answer: in the header its
        # width would widen both answer panes past a 1280-pixel screen.
        self.needs = NeedsView(self)
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
        lay.addWidget(self.status)
        lay.addWidget(split, 1)
        needs_row = QHBoxLayout()
        needs_row.addWidget(self.needs.label, 1)
        needs_row.addWidget(self.needs.button, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(needs_row)
        self.answer: Answer | None = None
        self.streaming = False
        self._originals: dict[int, Hit] = {}
        self._status_key = "answer.idle"
        self._status_args: dict[str, object] = {}
        self._notes: list[Callable[[], str]] = []  # add_note's, after the status
        # Elapsed seconds beside what the pane is doing ("reading 1,240 tokens… · 4 s").
        self._t0: float | None = None  # time.monotonic() when this answer started
        self._ticker = QTimer(self)
        self._ticker.setInterval(1000)
        self._ticker.timeout.connect(self._tick)
        self._doing = ""
        self.retranslate()

    # -------------------------------------------------------------- state
    def _set_status(self, key: str, **args: object) -> None:
        self._status_key, self._status_args = key, args
        self._notes = []
        self.status.setText(tr(key, **args))
        self.status.setToolTip(plain_tooltip(self.status.text()))

    def _running(self, doing: str) -> None:
        """Show what the answer is doing now, with the seconds since it started."""
        if self._t0 is None:
            self._t0 = time.monotonic()
        if not self._ticker.isActive():
            self._ticker.start()
        self._doing = doing
        self._tick()

    def _tick(self) -> None:
        if self._t0 is not None:
            text = tr("answer.elapsed", doing=self._doing, s=int(time.monotonic() - self._t0))
            self.status.setText(text)
            self.status.setToolTip(plain_tooltip(text))

    def _finish_clock(self) -> str:
        """Stop the clock; the total seconds as a suffix for the final status ("" if never started)."""
        self._ticker.stop()
        if self._t0 is None:
            return ""
        secs = time.monotonic() - self._t0
        self._t0 = None
        return tr("answer.took", s=f"{secs:.1f}")

    def elapsed_text(self) -> str:
        return self.status.text()

    def reset(self, key: str = "answer.idle") -> None:
        self.answer = None
        self.streaming = False
        self._ticker.stop()
        self._t0 = None
        self._set_plain("")
        self.sources.setRowCount(0)
        self.needs.clear()
        self._set_status(key)

    def _set_plain(self, text: str) -> None:
        """``text`` in the browser as plain text. QTextEdit writes new text in its current character
        format, which after a click on a citation is that citation's link: a refusal shown next came
        out blue and underlined."""
        self.browser.setCurrentCharFormat(QTextCharFormat())
        self.browser.setPlainText(text)

    def start(self) -> None:
        t0 = self._t0
        self.reset("answer.generating")
        self.streaming = True
        self._t0 = t0  # keep counting from when the answer started, not from its first word
        self._running(tr("answer.generating"))

    def append_token(self, text: str) -> None:
        if not self.streaming:
            self.start()
        cur = self.browser.textCursor()
        cur.movePosition(QTextCursor.MoveOperation.End)
        cur.insertText(text, QTextCharFormat())
        self.browser.setTextCursor(cur)
        self.browser.ensureCursorVisible()

    def set_progress(self, message: str) -> None:
        self._running(message)

    def set_failed(self, message: str) -> None:
        self._finish_clock()
        self._set_status("answer.failed", msg=message)

    def set_stopped(self) -> None:
        self._finish_clock()
        self._set_status("answer.stopped")

    def text(self) -> str:
        return self.browser.toPlainText()

    def set_answer(self, answer: Answer, originals: Sequence[Hit] = ()) -> None:
        """Show the final text with clickable citations; ``originals`` are the untranslated hits."""
        took = self._finish_clock()
        self.answer = answer
        self.streaming = False
        self._originals = {h.unit_id: h for h in originals}
        if answer.abstention is not None and answer.abstained:
            self._show_abstention(answer.abstention, took)
            return
        self._set_plain(answer.text)
        by_n = {c.n: c for c in answer.citations}
        matched = {(a, b) for a, b, _n in answer.matched}
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
                page = self._page_label(c.n, c.page or 1)
                if (start, end) in matched:  # added after generation (core.attribution), not the model's
                    fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
                    fmt.setToolTip(plain_tooltip(tr("answer.cite_matched_tip", n=n, title=c.title, page=page)))
                else:
                    fmt.setToolTip(plain_tooltip(tr("answer.cite_tip", title=c.title, page=page)))
            else:
                fmt.setForeground(BAD)
                fmt.setFontStrikeOut(True)
                fmt.setToolTip(tr("answer.cite_invalid_tip", n=n))
            cur.mergeCharFormat(fmt)
        invalid = [c.n for c in answer.citations if not c.valid]
        if "copied_example" in answer.warnings:
            self._set_status("answer.copied_example")
        elif invalid:
            self._set_status("answer.done_invalid", n=len(answer.citations),
                             bad=", ".join(f"[{i}]" for i in invalid))
        elif not answer.text.strip():
            self._set_status("answer.empty")
        else:
            n = len(answer.citations)
            if answer.matched:  # both counted as sources cited, as answer.citations counts them
                m = len({k for _a, _b, k in answer.matched})
                self._set_status("answer.done_matched_one" if n == 1 else "answer.done_matched", n=n, m=m)
            else:
                self._set_status("answer.done_one" if n == 1 else "answer.done", n=n)
        if "unsupported" in answer.warnings:  # what it adds is in no passage it read (core.cfrag.anchor): said first
            self.add_note(lambda: tr("answer.unsupported"))
        if "doubted" in answer.warnings:  # its passages judged not to hold it (app.abstention.judge)
            self.add_note(lambda: tr("answer.doubted"))
        self._note_asked_as(answer)
        if answer.dropped_citations:  # the model's markers whose passage does not hold the sentence
            self.status.setText(f"{self.status.text()} · "
                                + tr("answer.cite_dropped", n=len(answer.dropped_citations)))
        if took:
            self.status.setText(f"{self.status.text()} · {took}")
        tip = self.status.text()
        if "unsupported" in answer.warnings:
            tip += "\n" + tr("answer.unsupported_tip")
        yes = answer.abstention.judged_yes if answer.abstention is not None else None
        if "doubted" in answer.warnings and yes is not None:
            tip += "\n" + tr("answer.doubted_tip", yes=f"{yes:.0%}", need=f"{yes_share(MIN_JUDGED):.0%}")
        if answer.dropped_citations:
            tip += "\n" + "\n".join(tr("answer.cite_dropped_tip", n=n, sentence=sent)
                                     for n, sent in answer.dropped_citations)
        self.status.setToolTip(plain_tooltip(tip))
        self._fill_sources()
        self.needs.offer(answer)

    def _show_abstention(self, abstention: Abstention, took: str) -> None:
        """The library holds no answer (core.abstain): said in words, the evidence in the tooltip; the
        passages the model judged are listed as an answer's sources are."""
        key = abstention_key(abstention)
        text = tr(key + "_text")
        # Where else to ask, before any kept text: below a long answer a 1280×800 pane hid it.
        if abstention.other_language:
            text += "\n\n" + tr("answer.other_language", lang=tr("lang." + abstention.other_language))
        if abstention.written:  # decided on the written answer (core.abstain.after_answer): shown below the verdict
            text += "\n\n" + (self.answer.text if self.answer is not None else "")
        self._set_plain(text)
        self._set_status(key)
        if self.answer is not None:
            self._note_asked_as(self.answer)
        if took:
            self.status.setText(f"{self.status.text()} · {took}")
        s, yes = abstention.support, abstention.judged_yes
        if key == "answer.abstained":  # the library's words decided
            cov = s.coverage
            tip = tr("answer.abstained_tip", known=s.n_known, terms=s.n_terms,
                     coverage="–" if cov is None else f"{cov:.0%}", lift=f"{s.lift:.3f}")
        elif key == "answer.unrelated":  # the question's lift
            lift = abstention.question_lift
            tip = tr("answer.unrelated_tip", lift="–" if lift is None else f"{lift:+.2f}",
                     need=f"{MIN_QUESTION_LIFT:+.2f}")
        else:  # the model's judgement, before the answer or after it
            tip = tr(key + "_tip", yes="–" if yes is None else f"{yes:.0%}", need=f"{yes_share(MIN_JUDGED):.0%}")
        self.status.setToolTip(plain_tooltip(tip))
        self._fill_sources()

    def _note_asked_as(self, answer: Answer) -> None:
        """Which question the answer asked, where it was asked again in the library's other language
        (app.asked_across): the answer and its sources are in that language."""
        if answer.asked_as:
            q = answer.asked_as
            self.add_note(lambda: tr("answer.asked_as", q=q, lang=tr("lang." + detect_lang(q))))

    def add_note(self, note: Callable[[], str]) -> None:
        """A note before the final status ("Baseline's answer (same sources)"); ``note``
        words it in the current language, again on a language switch; dropped with the answer."""
        # First: it is what tells the panes apart.
        self._notes.append(note)
        self.status.setText(f"{note()} · {self.status.text()}")
        self.status.setToolTip(plain_tooltip(self.status.text()))

    def _page_label(self, n: int, page: int) -> str:
        """The printed page label of source n when its PDF defines one, else the page number."""
        locs = self.answer.locators if self.answer is not None else ()
        return (locs[n - 1].page_label if 0 < n <= len(locs) else "") or str(page)

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
        assert self.answer is not None or not srcs
        texts = self.answer.original_texts if self.answer is not None else ()
        locs = self.answer.locators if self.answer is not None else ()
        for i, h in enumerate(srcs):
            orig = self._originals.get(h.unit_id)
            given = " ".join(h.text.split())
            if i < len(texts):  # answer passages carry their own original
                original = " ".join(texts[i].split()) or given
            else:
                original = " ".join(orig.text.split()) if orig is not None else given
            heading = f" — {locs[i].heading}" if i < len(locs) and locs[i].heading else ""
            cells = [f"[{i + 1}]", f"{h.title}{heading} — p. {self._page_label(i + 1, h.page)}", given[:600],
                     original[:600] if original != given else tr("answer.same_as_given")]
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)  # plain text item: never interpreted as HTML
                item.setToolTip(plain_tooltip(text if j < 2 else (given if j == 2 else original)[:1500]))
                # At the top: a passage wraps into a tall row, and centred n / Document cells then
                # sat below the visible part of the row and looked empty.
                item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
                self.sources.setItem(i, j, item)
        self.sources.resizeRowsToContents()
        cap = SOURCE_ROW_LINES * self.sources.fontMetrics().lineSpacing() + 8  # the rest is in the tooltip
        for i in range(len(srcs)):
            self.sources.setRowHeight(i, min(self.sources.rowHeight(i), cap))

    def _toggle_sources(self, on: bool) -> None:
        self.sources.setVisible(on)

    def retranslate(self) -> None:
        self.header.setText(tr(self.title_key))
        # newest note first, as add_note puts each in front of the status
        self.status.setText(" · ".join([*(note() for note in reversed(self._notes)),
                                        tr(self._status_key, **self._status_args)]))
        self.needs.retranslate()
        self.sources_btn.setText(tr("answer.sources"))
        self.sources_btn.setToolTip(tr("answer.sources_tip"))
        self.sources.setHorizontalHeaderLabels([tr("answer.src_n"), tr("answer.src_doc"),
                                                tr("answer.src_given"), tr("answer.src_original")])
