"""The results of the question on screen, in three tabs: Compare (the side-by-side columns, each
over its answer pane — CF-RAG's with its run in plain words between the two — and under them the
selected document's keyword chips and "Why" card), Trace (CF-RAG's trace) and Chart (the rank changes).

It owns those widgets and draws what it is given (a ui.query_state.QueryState, a CF-RAG step);
it runs nothing. A document opened or a citation clicked is said through its signals; the main
window opens it (docs/architecture.md, "The question's path").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSplitter, QTabWidget, QWidget

from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, Explanation, Hit, Progress, RankedList
from rag_desktop.ui.answer_pane import AnswerPane
from rag_desktop.ui.cf_notes import cf_note
from rag_desktop.ui.cf_plain import CFPlainCard
from rag_desktop.ui.chips import ChipsPanel
from rag_desktop.ui.columns import ResultColumn, Row, flat_text, make_row
from rag_desktop.ui.i18n import has_tr, tr
from rag_desktop.ui.present import (
    SpanKind,
    WordSpan,
    causal_off_text,
    ce_label_text,
    cfrag_row_note,
    cfrag_rows,
    explanation_for,
    fmt,
    found_by_translation,
    gate_evidence_text,
    rank_change,
    split_terms,
    tau_source_text,
    variant_text,
)
from rag_desktop.ui.query_state import QueryState
from rag_desktop.ui.rank_chart import RankChart
from rag_desktop.ui.trace_view import TraceView
from rag_desktop.ui.why_card import WhyCard

CF_COLLAPSED_WIDTH = 170  # the empty CF-RAG column folds to a strip this wide (heading and status)
CF_CARD_SHARE = 0.3  # of the CF-RAG column's height: its run in plain words, between its rows and its answer
METHODS = ("baseline", "causal", "cross_encoder", "cfrag")
TITLE_KEYS = {"baseline": "col.baseline", "causal": "col.causal", "cross_encoder": "col.cross_encoder",
              "cfrag": "col.cfrag"}


def shared_note(column: str) -> str:
    """The note of a pane whose answer was written once for ``column`` (same sources)."""
    return tr("answer.shared_done", column=tr(TITLE_KEYS[column]))


def expand_terms(terms: list[tuple[str, SpanKind]], surfaces: Mapping[str, str]) -> list[tuple[str, SpanKind]]:
    """Each term plus its readable surface form (stems such as "secur" highlight "security")."""
    out: list[tuple[str, SpanKind]] = []
    for t, k in terms:
        out.append((t, k))
        s = surfaces.get(t)
        if s and s != t:
            out.append((s, k))
    return out


class ResultsPanel(QTabWidget):
    open_requested = Signal(object)  # a Hit the person opened from a column
    citation_clicked = Signal(object)  # a Citation clicked in an answer

    def __init__(self, settings: Callable[[], Settings], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._settings = settings  # read when drawing: the settings may change between questions
        self.shown: QueryState | None = None
        self.selected_doc: int | None = None
        self.columns: dict[str, ResultColumn] = {}
        self.answers: dict[str, AnswerPane] = {}
        self.stacks: dict[str, QSplitter] = {}
        self.columns_split = QSplitter(Qt.Orientation.Horizontal)
        self.columns_split.setChildrenCollapsible(False)
        self.cf_card = CFPlainCard()
        for m in METHODS:
            self._add_column(m)
        for col in self.columns.values():
            col.peers = tuple(self.columns.values())
        self.stacks["cross_encoder"].setVisible(False)
        self.columns["cfrag"].collapsed_changed.connect(self.set_cf_collapsed)
        self.chips = ChipsPanel()
        self.why = WhyCard()
        self.details = QSplitter(Qt.Orientation.Horizontal)
        self.details.setObjectName("details")
        self.compare_split = QSplitter(Qt.Orientation.Vertical)
        for split, parts in ((self.details, (self.chips, self.why)),
                             (self.compare_split, (self.columns_split, self.details))):
            split.setChildrenCollapsible(False)
            for w in parts:
                split.addWidget(w)
        self.details.setStretchFactor(0, 1)
        self.details.setStretchFactor(1, 1)
        self.compare_split.setStretchFactor(0, 3)
        self.compare_split.setStretchFactor(1, 1)
        self.set_cf_collapsed(True)
        self.trace_view = TraceView()
        self.chart = RankChart()
        self.chart.doc_clicked.connect(lambda doc_id: self.select_doc_id(doc_id))
        self._choosing = False  # select_first is choosing the row
        self._chosen_by_app = False  # the selected document was the app's choice, not a person's
        for tab in (self.compare_split, self.trace_view, self.chart):
            self.addTab(tab, "")

    def _add_column(self, m: str) -> None:
        """The column of method ``m`` over its answer pane, in a splitter of their own."""
        col = ResultColumn(m, TITLE_KEYS[m], show_change=(m != "baseline"), collapsible=(m == "cfrag"))
        pane = AnswerPane(m, "answer." + m)
        stack = QSplitter(Qt.Orientation.Vertical)
        stack.setChildrenCollapsible(False)
        stack.addWidget(col)
        if m == "cfrag":
            stack.addWidget(self.cf_card)
        stack.addWidget(pane)
        stack.setStretchFactor(0, 3)
        stack.setStretchFactor(stack.count() - 1, 2)
        col.doc_selected.connect(self.select_hit)
        col.doc_hovered.connect(self.hover_doc)
        col.open_requested.connect(self.open_requested.emit)
        pane.citation_clicked.connect(self.citation_clicked.emit)
        self.columns[m], self.answers[m], self.stacks[m] = col, pane, stack
        self.columns_split.addWidget(stack)

    # ------------------------------------------------------------------ a question's stages
    def reset(self, placeholder: str = "col.placeholder") -> None:
        """Nothing shown (a library is being switched; a follow-up waits for its rewrite to be
        checked), each column saying ``placeholder``."""
        self.shown = None
        self.selected_doc = None
        for m in METHODS:
            self.columns[m].clear(placeholder)
            self.columns[m].set_verdict(None)
            self.answers[m].reset()
        self.stacks["cross_encoder"].setVisible(False)
        self.cf_card.set_trace(None)
        self.trace_view.clear()
        self.chart.clear()
        self.chips.set_split(None)
        self.why.set_explanation(None, None)
        self.why.set_verdict(None)

    def begin(self, answers_on: bool, cf_on: bool) -> None:
        """A new question: the columns say they are ranking, the panes whether answers follow."""
        self.shown = None  # until its columns are filled, nothing of the last question is redrawn
        for m in METHODS:
            self.columns[m].clear("col.running" if m != "cfrag" else "col.cf_waiting")
            self.answers[m].reset("answer.waiting" if answers_on else "answer.off")
        self.cf_card.set_trace(None)
        self.trace_view.clear("trace.waiting" if answers_on else "trace.off")
        if answers_on and not cf_on:
            self.show_cf_disabled()
        self.chart.clear()
        self.chips.set_split(None)
        self.why.set_explanation(None, None)

    def compare_failed(self) -> None:
        for m in METHODS:
            self.columns[m].clear("col.failed")
            self.answers[m].reset("answer.not_run")
        self.cf_card.set_trace(None)
        self.trace_view.clear("trace.not_run")

    def show_cf_disabled(self) -> None:
        self.columns["cfrag"].clear("col.cf_disabled")
        self.answers["cfrag"].reset("answer.cf_disabled")
        self.cf_card.set_trace(None)
        self.trace_view.clear("trace.cf_disabled")

    def cf_queued(self) -> None:
        self.answers["cfrag"].reset("answer.waiting")
        self.cf_card.set_trace(None)
        self.trace_view.clear("trace.waiting")

    def show_cf_progress(self, p: Progress) -> None:
        key = f"stage.{p.stage}"
        stage = tr(key) if has_tr(key) else p.stage
        if not p.stage.startswith("cfrag."):
            # the model being made ready first (its counts are bytes, not CF-RAG's steps)
            self.columns["cfrag"].set_placeholder("col.cf_preparing", stage=stage)
            self.answers["cfrag"].set_progress(stage)
            self.trace_view.clear("trace.preparing", stage=stage)
            return
        self.columns["cfrag"].set_placeholder("col.cf_running", stage=stage, cur=p.current, total=p.total)
        self.answers["cfrag"].set_progress(tr("answer.cf_step", stage=stage, cur=p.current, total=p.total))
        # the trace tab follows the run live instead of saying "queued" until the end
        self.trace_view.clear("trace.running", stage=stage, cur=p.current, total=p.total)

    def cf_stopped(self, st: QueryState) -> None:
        self.answers["cfrag"].set_stopped()
        if st.cfrag is None:
            self.columns["cfrag"].clear("col.cf_stopped")
            self.trace_view.clear("trace.stopped")

    def show_answer(self, column: str, answer: Answer, sources: tuple[Hit, ...], shared_from: str = "") -> None:
        self.answers[column].set_answer(answer, sources)
        if shared_from:
            self.answers[column].add_note(partial(shared_note, shared_from))

    def show_failed(self, column: str, message: str) -> None:
        self.answers[column].set_failed(message)
        if column == "cfrag":
            self.columns["cfrag"].clear("col.failed")
            self.cf_card.set_trace(None)
            self.trace_view.clear("trace.not_run")

    def show_abstained(self, answer: Answer) -> None:
        """CF-RAG did not run: the library holds no answer (core.abstain). Said in the column too: it
        stays a folded strip (no rows), whose words would otherwise still say CF-RAG is to run."""
        self.answers["cfrag"].set_answer(answer)
        self.cf_card.set_trace(None)
        self.trace_view.clear("trace.abstained")
        self.columns["cfrag"].clear("trace.abstained")

    def show_cfrag(self, st: QueryState) -> None:
        assert st.cfrag is not None
        self.cf_card.set_trace(st.cfrag.trace)
        self.fill_cfrag(st)
        self.cf_card.setVisible(not self.columns["cfrag"].is_collapsed())  # a folded strip has no room
        self.answers["cfrag"].set_answer(st.cfrag.answer, self._cf_sources(st))
        self.trace_view.set_trace(st.cfrag.trace)
        self._size_stack("cfrag", answers_on=True)

    # ------------------------------------------------------------------ the columns
    def fill_columns(self, st: QueryState) -> None:
        c = st.comparison
        assert c is not None
        self.shown = st
        base: RankedList = c.baseline
        words = st.words

        def row_words(h: Hit) -> tuple[WordSpan, ...] | None:
            # no words (a service without a tokenizer): None, and the marks fall back to prefixes
            return words.get(flat_text(h.text)) or None

        cross = c.cross_language
        missing = {h.path for r in (base, c.causal, c.cross_encoder) if r is not None for h in r.hits
                   if h.path and not Path(h.path).exists()}  # deleted or moved since it was indexed

        def found_note(column: str, h: Hit, note: str = "") -> str:
            mark = tr("crosslang.found_by") if found_by_translation(cross, column, h.unit_id) else ""
            gone = tr("col.file_missing") if h.path in missing else ""
            return " · ".join(p for p in (note, mark, gone) if p)

        self.columns["baseline"].set_rows(
            [make_row(h, None, [(tr("score.s_sim"), h.s_sim)], note=found_note("baseline", h)) for h in base.hits],
            tr("col.baseline_sub", level=tr("level." + c.level), k=len(base.hits),
               ms=int(1000 * c.timings.get("baseline_total", 0.0))))
        rows: list[Row] = []
        for h in c.causal.hits:
            e = explanation_for(c.causal, h.unit_id)
            scores: list[tuple[str, float | None]] = [(tr("score.s_sim"), h.s_sim)]
            if e is not None:
                scores.append((tr("score.s_c"), e.s_c))
                if e.s_hybrid is not None:
                    scores.append((tr("score.hybrid"), e.s_hybrid))
            terms = expand_terms(split_terms(e.split if e else None), st.surfaces)
            note = found_note("causal", h, tr("why.fallback_used") if e is not None and e.fallback_used else "")
            rows.append(make_row(h, rank_change(base, h), scores, terms, note, row_words(h)))
        d = c.diagnostics
        sub = [tr("col.causal_sub", variant=variant_text(c.causal_variant), tau=fmt(c.tau, 3),
                  source=tau_source_text(c.tau_source, self._settings().retrieval.tau_percentile),
                  a=fmt(d.a_share, 2), empty=d.n_empty_b)]
        why_off = causal_off_text(c.causal_off) if c.causal_off is not None else ""
        if why_off and not c.verdict:  # with a verdict the heading says it; its numbers are the tooltip
            sub.append(why_off)
        sub += ["⚠ " + cf_note(w) for w in (*d.warnings, *c.causal.warnings)]
        self.columns["causal"].set_rows(rows, "\n".join(sub))
        self.columns["causal"].set_verdict(c.verdict)
        evidence = gate_evidence_text(c.verdict)
        self.columns["causal"].header.setToolTip("\n\n".join(t for t in (why_off, evidence) if t) if c.verdict else "")
        self.why.set_verdict(c.verdict)
        self.chart.set_data(base, c.causal, tr("chart.causal"))
        ce = c.cross_encoder
        self.stacks["cross_encoder"].setVisible(ce is not None)
        if ce is not None:
            ce_scores: tuple[float | None, ...] = ce.scores or (None,) * len(ce.hits)
            self.columns["cross_encoder"].set_rows(
                [make_row(h, rank_change(base, h), [(tr("score.s_qe"), v), (tr("score.s_sim"), h.s_sim)],
                          note=found_note("cross_encoder", h))
                 for h, v in zip(ce.hits, ce_scores, strict=True)], ce_label_text(ce.label))
        if st.cfrag is not None:
            self.fill_cfrag(st)
        if self.selected_doc is not None:
            self.select_doc_id(self.selected_doc, self._chosen_by_app)

    def fill_cfrag(self, st: QueryState) -> None:
        assert st.cfrag is not None
        t = st.cfrag.trace
        base = st.comparison.baseline if st.comparison is not None else RankedList("baseline", ())
        rows = []
        for r in cfrag_rows(t):
            h = dataclasses.replace(r.evidence.hit, rank=r.rank)
            key, args = cfrag_row_note(t, r)
            note = tr(key, **args) if key else ""
            rows.append(make_row(h, rank_change(base, h), [
                ("s(q,e)", r.evidence.s_q), ("max s(q',e)", r.evidence.max_s_cf), ("Δ", r.margin)], note=note))
        if not rows and t.decision.kind == "standard":
            # The standard answer stood before any path ran (core.cfrag.anchor): its passages are the
            # evidence, in the order its [n] count them.
            # (no score: a passage's s_sim is its window's score, not the similarity the columns show)
            rows = [make_row(dataclasses.replace(h, rank=i), rank_change(base, h), [], note=tr("col.cf_standard_read"))
                    for i, h in enumerate(self._cf_sources(st), start=1)]
        # No subtitle: the decision, the counts and Δ's noise are behind the card's "Details" fold
        # (present.cf_detail_lines), under the run said in plain words.
        self.columns["cfrag"].set_rows(rows)

    @staticmethod
    def _cf_sources(st: QueryState) -> list[Hit]:
        """What CF-RAG's answer cites from: its evidence, or the standard answer's passages where it stood."""
        assert st.cfrag is not None
        t = st.cfrag.trace
        if t.decision.kind == "standard":
            return list(st.cfrag.answer.sources)
        return [e.hit for e in t.evidence]

    # ------------------------------------------------------------------ selection
    def causal_for_doc(self, doc_id: int) -> tuple[Hit | None, Explanation | None]:
        st = self.shown
        if st is None or st.comparison is None:
            return None, None
        causal: RankedList = st.comparison.causal
        h = next((h for h in causal.hits if h.doc_id == doc_id), None)
        return h, (explanation_for(causal, h.unit_id) if h is not None else None)

    def terms_for_doc(self, doc_id: int) -> list[tuple[str, SpanKind]]:
        _h, e = self.causal_for_doc(doc_id)
        return split_terms(e.split) if e is not None else []

    def select_first(self, method: str) -> None:
        """New results: the first row of ``method``'s column chosen for the details, every column left
        at its top (scrolled to that document, another column hid its own first places)."""
        self._choosing = True
        try:
            self.columns[method].select_row(0)
        finally:
            self._choosing = False

    def select_hit(self, hit: Hit) -> None:
        self._chosen_by_app = self._choosing
        self.select_doc_id(hit.doc_id, self._chosen_by_app)

    def select_doc_id(self, doc_id: int, by_app: bool = False) -> None:
        """Show ``doc_id`` in every column and the details; a document a person chose is scrolled
        into view in each column, one the app chose (:meth:`select_first`) is not."""
        self._chosen_by_app = by_app
        self.selected_doc = doc_id
        for col in self.columns.values():
            col.highlight_doc(doc_id, scroll=not by_app)
        self.chart.set_selected(doc_id)
        h, e = self.causal_for_doc(doc_id)
        surfaces = self.shown.surfaces if self.shown is not None else {}
        self.chips.set_split(e.split if e else None, h.title if h else "", surfaces)
        w = self._settings().retrieval.hybrid_weight
        causal = self.shown.comparison.causal if self.shown is not None and self.shown.comparison else None
        self.why.set_explanation(e, h, w if e is not None and e.s_hybrid is not None else None, surfaces, causal)

    def hover_doc(self, doc_id: int | None) -> None:
        for col in self.columns.values():
            col.hover_doc(doc_id)

    # ------------------------------------------------------------------ sizes
    def fit(self, width: int, height: int, answers_on: bool) -> None:
        """Rankings over details; the Why card's sentences need the width."""
        self.compare_split.setSizes([int(height * 0.62), int(height * 0.25)])
        self.details.setSizes([int(width * 0.42), int(width * 0.58)])
        self.size_stacks(answers_on)

    def size_stacks(self, answers_on: bool) -> None:
        for m in METHODS:
            self._size_stack(m, answers_on)

    def _size_stack(self, m: str, answers_on: bool) -> None:
        """Rankings over answers: answers get a third while on, a strip when off; CF-RAG's run in
        words, when shown, takes its share between the two."""
        stack = self.stacks[m]
        total = sum(stack.sizes()) or stack.height()
        pane = self.answers[m].minimumSizeHint().height()
        answer = int(total * 0.35) if answers_on else min(pane + 10, total // 3)
        if m != "cfrag":
            stack.setSizes([total - answer, answer])
            return
        card = int(total * CF_CARD_SHARE) if not self.cf_card.isHidden() else 0
        stack.setSizes([total - answer - card, card, answer])

    def set_cf_collapsed(self, collapsed: bool) -> None:
        """The CF-RAG column folds to a narrow strip (heading and status) until it has rows."""
        self.answers["cfrag"].setVisible(not collapsed)
        self.cf_card.setVisible(not collapsed and self.cf_card.trace is not None)
        # on the column, not the stack: a QSplitter resets the maximum of its own children when shown
        if collapsed:
            self.columns["cfrag"].setMaximumWidth(CF_COLLAPSED_WIDTH)
        else:
            self.columns["cfrag"].setMaximumWidth(16777215)
            n = sum(1 for m in METHODS if self.stacks[m].isVisibleTo(self.columns_split)) or 1
            total = sum(self.columns_split.sizes())
            self.columns_split.setSizes([total // n if self.stacks[m].isVisibleTo(self.columns_split) else 0
                                         for m in METHODS])

    def retranslate(self) -> None:
        for i, key in enumerate(("tab.compare", "tab.trace", "tab.chart")):
            self.setTabText(i, tr(key))
        for c in self.columns.values():
            c.retranslate()
        for p in self.answers.values():
            p.retranslate()
        self.chips.retranslate()
        self.why.retranslate()
        self.cf_card.retranslate()
        self.trace_view.retranslate()
        self.chart.update()
        if self.shown is not None and self.shown.comparison is not None:
            self.fill_columns(self.shown)
