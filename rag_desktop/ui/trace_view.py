"""The CF-RAG trace (paper 002): counterfactuals, evidence, clusters, hypotheses, decision.

It opens with the run in plain words, one sentence per stage (core.cfrag.plain, ui.cf_plain); behind
its "Details" fold, closed at first, every number the arbitration used: V(q,q') components and Info
for each counterfactual (kept or rejected, and why), s(q,e) against max_q' s(q',e) as bars for
each passage (their difference is what φ_causal averages), the spectral clusters, each
hypothesis with φ_coh, φ_causal and Ψ = (1−λ)·φ_coh + λ·φ_causal, and the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, Qt
from PySide6.QtGui import QColor, QPainter, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHeaderView,
    QLabel,
    QScrollArea,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.cfrag.plain import hypothesis_name, passage_name
from rag_desktop.core.cfrag.types import CFTrace, CounterfactualCandidate
from rag_desktop.ui.cf_notes import cf_note, cf_plain, cf_reasons, cf_tag
from rag_desktop.ui.cf_plain import PlainFold
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_label, plain_tooltip
from rag_desktop.ui.present import decision_line, fmt, paths_ran, scorer_text

VALUE_ROLE = Qt.ItemDataRole.UserRole + 10
BAR_Q = QColor("#0072B2")
BAR_CF = QColor("#CC79A7")


class BarDelegate(QStyledItemDelegate):
    """Draws the cell's value (VALUE_ROLE, clamped to [lo, hi]) as a horizontal bar with its number."""

    def __init__(self, color: QColor, lo: float = 0.0, hi: float = 1.0, parent: Any = None) -> None:
        super().__init__(parent)
        self.color = color
        self.lo, self.hi = lo, hi

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        value = index.data(VALUE_ROLE)
        rect: QRect = option.rect
        painter.save()
        if value is not None:
            frac = (min(max(float(value), self.lo), self.hi) - self.lo) / ((self.hi - self.lo) or 1.0)
            bar = QRect(rect.left() + 2, rect.top() + 4, int((rect.width() - 4) * frac), rect.height() - 8)
            c = QColor(self.color)
            c.setAlpha(150)
            painter.fillRect(bar, c)
        painter.setPen(QColor("#111"))
        painter.drawText(rect.adjusted(4, 0, -4, 0), int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight),
                         fmt(value, 3) if value is not None else "—")
        painter.restore()


class DeltaBarDelegate(QStyledItemDelegate):
    """Draws a signed value (VALUE_ROLE) as a bar from a zero line in the middle of the cell:
    right and green when positive, left and red when negative, its length proportional to the
    value (scaled to the largest |value| in the column, ``scale``), with the number."""

    POS = QColor("#009E73")
    NEG = QColor("#D55E00")

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.scale = 1.0

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        value = index.data(VALUE_ROLE)
        rect: QRect = option.rect
        painter.save()
        mid = rect.left() + rect.width() // 2
        painter.setPen(QColor("#999"))
        painter.drawLine(mid, rect.top() + 2, mid, rect.bottom() - 2)
        if value is not None and self.scale > 0:
            half = rect.width() // 2 - 2
            length = round(half * min(1.0, abs(float(value)) / self.scale))
            c = QColor(self.POS if value > 0 else self.NEG)
            c.setAlpha(150)
            left = mid if value > 0 else mid - length
            painter.fillRect(QRect(left, rect.top() + 4, length, rect.height() - 8), c)
        painter.setPen(QColor("#111"))
        # the number on the side the bar does not take
        side = Qt.AlignmentFlag.AlignLeft if value is not None and value > 0 else Qt.AlignmentFlag.AlignRight
        painter.drawText(rect.adjusted(4, 0, -4, 0), int(Qt.AlignmentFlag.AlignVCenter | side),
                         signed(value) if value is not None else "—")
        painter.restore()


def signed(x: float | None, digits: int = 3) -> str:
    """+0.002 / −0.002 / 0.000: the sign says which way a difference goes (never "-0.000")."""
    text = fmt(x, digits)
    if x is None or text in ("—", fmt(0.0, digits)):
        return text
    return ("+" + text) if x > 0 else text.replace("-", "−")


def _set_scale(table: QTableWidget, col: int, values: Sequence[float | None]) -> None:
    d = table.itemDelegateForColumn(col)
    if isinstance(d, DeltaBarDelegate):
        d.scale = max((abs(v) for v in values if v is not None), default=0.0) or 1.0


def _item(text: str, tooltip: str = "", value: float | None = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)  # plain text: counterfactuals and answers are model output
    it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if tooltip:
        it.setToolTip(plain_tooltip(tooltip))  # model output and passages: never markup
    if value is not None:
        it.setData(VALUE_ROLE, float(value))
    return it


def _table(headers: int) -> QTableWidget:
    t = QTableWidget(0, headers)
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setWordWrap(True)
    t.horizontalHeader().setStretchLastSection(True)
    return t


def _layout(table: QTableWidget, stretch: Sequence[int], fixed: Sequence[int] = ()) -> None:
    """Text columns share the width, number columns fit their contents, and the table is as tall
    as its rows: the trace tab scrolls as a whole instead of each table hiding rows."""
    hh = table.horizontalHeader()
    hh.setStretchLastSection(False)
    for c in range(table.columnCount()):
        mode = QHeaderView.ResizeMode.Stretch if c in stretch else QHeaderView.ResizeMode.ResizeToContents
        if c in fixed:
            mode = QHeaderView.ResizeMode.Fixed
        hh.setSectionResizeMode(c, mode)
    table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    _fit_rows(table)


def _fit_rows(table: QTableWidget) -> None:
    """Rows as tall as their wrapped text at the current column widths; the table as tall as its rows."""
    table.resizeRowsToContents()
    rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
    table.setFixedHeight(table.horizontalHeader().height() + rows + 2 * table.frameWidth() + 2)


def _note() -> QLabel:
    lab = plain_label()
    lab.setStyleSheet("color: #555;")
    return lab


def reject_reason(c: CounterfactualCandidate) -> str:
    """The core's reason text, prefixed with a short label in the UI language."""
    if c.kept:
        return tr("trace.kept")
    if not c.valid:
        return tr("trace.invalid", why=cf_reasons(c.reason))
    return tr("trace.not_top", why=cf_reasons(c.reason))


class TraceView(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        body = QWidget()
        self.setWidget(body)
        lay = QVBoxLayout(body)
        self.summary = plain_label()
        self.cf_box = QGroupBox()
        self.cf_table = _table(6)
        self.cf_note = _note()
        cf_lay = QVBoxLayout(self.cf_box)
        cf_lay.addWidget(self.cf_note)
        cf_lay.addWidget(self.cf_table)
        self.ev_box = QGroupBox()
        self.ev_table = _table(8)
        self.ev_table.setItemDelegateForColumn(3, BarDelegate(BAR_Q, parent=self.ev_table))
        self.ev_table.setItemDelegateForColumn(4, BarDelegate(BAR_CF, parent=self.ev_table))
        self.ev_table.setItemDelegateForColumn(5, DeltaBarDelegate(self.ev_table))
        ev_lay = QVBoxLayout(self.ev_box)
        self.ev_note = plain_label()
        ev_lay.addWidget(self.ev_note)
        ev_lay.addWidget(self.ev_table)
        self.cl_box = QGroupBox()
        self.cl_label = plain_label()
        QVBoxLayout(self.cl_box).addWidget(self.cl_label)
        self.hy_box = QGroupBox()
        self.hy_table = _table(7)
        for col in (3, 4, 5):
            self.hy_table.setItemDelegateForColumn(col, BarDelegate(QColor("#E69F00"), parent=self.hy_table))
        self.hy_table.setItemDelegateForColumn(4, DeltaBarDelegate(self.hy_table))
        self.hy_note = _note()
        hy_lay = QVBoxLayout(self.hy_box)
        hy_lay.addWidget(self.hy_note)
        hy_lay.addWidget(self.hy_table)
        self.de_box = QGroupBox()
        self.de_label = plain_label(selectable=True)
        QVBoxLayout(self.de_box).addWidget(self.de_label)
        self.empty = plain_label(wrap=False)
        tables = QWidget()  # the numbers, behind the plain sentences' "Details" fold
        tables_lay = QVBoxLayout(tables)
        tables_lay.setContentsMargins(0, 0, 0, 0)
        for w in (self.summary, self.cf_box, self.ev_box, self.cl_box, self.hy_box, self.de_box):
            tables_lay.addWidget(w)
        self.plain = PlainFold(tables, "trace_fold")
        self.plain.fold.toggled.connect(self._opened)
        lay.addWidget(self.empty)
        lay.addWidget(self.plain)
        lay.addStretch(1)
        self.trace: CFTrace | None = None
        self._empty_key = "trace.empty"
        self._empty_args: dict[str, Any] = {}
        self.retranslate()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.trace is not None:  # wrapped cells change height with the width
            for t in (self.cf_table, self.ev_table, self.hy_table):
                _fit_rows(t)

    def _opened(self, on: bool) -> None:
        if on and self.trace is not None:  # laid out while hidden: the rows take their wrapped height now
            for t in (self.cf_table, self.ev_table, self.hy_table):
                _fit_rows(t)

    # -------------------------------------------------------------- content
    def clear(self, key: str = "trace.empty", **args: Any) -> None:
        self.trace = None
        self._empty_key = key
        self._empty_args = args
        self.retranslate()

    def set_trace(self, trace: CFTrace) -> None:
        self.trace = trace
        self.retranslate()

    def _fill(self, t: CFTrace) -> None:
        self.plain.set_sentences(cf_plain(t))
        ran = paths_ran(t)
        # The counts of the paths' steps, where they ran (zeros of steps that never ran say nothing).
        counts = [tr("trace.summary", n=len(t.counterfactuals), rejected=len(t.rejected_counterfactuals),
                     pool=len(t.evidence), kept=len(t.kept_evidence), k=t.spectral.k_used,
                     m=len(t.hypotheses), lam=fmt(t.lam, 2),
                     scorer=scorer_text(t.scorer, t.scorer_is_substitute))] if ran else []
        self.summary.setText("\n".join([*counts, *("⚠ " + cf_note(w) for w in t.warnings)]))
        self.summary.setVisible(bool(counts or t.warnings))
        cands: Sequence[CounterfactualCandidate] = (*t.counterfactuals, *t.rejected_counterfactuals)
        self.cf_table.setRowCount(len(cands))
        for r, c in enumerate(cands):
            status = "✔" if c.kept else "✘"
            cells = [
                _item(status, reject_reason(c)),
                _item(c.text, tr("trace.cf_tip", a=c.answer_q, b=c.answer_cf, f1=fmt(c.answer_f1, 2))),
                _item(cf_tag(c.transformation)),
                _item(fmt(c.sim_sem), tr("trace.sim_tip")),
                _item(tr("trace.info_cell", info=fmt(c.info), d=fmt(c.div_sem, 2), a=fmt(c.div_ans, 2),
                         r=fmt(c.rel_dom, 2)),
                      tr("trace.info_tip", d=fmt(c.div_sem), a=fmt(c.div_ans), r=fmt(c.rel_dom))),
                _item(reject_reason(c)),
            ]
            for col, it in enumerate(cells):
                if not c.kept:
                    it.setForeground(QColor("#888"))
                self.cf_table.setItem(r, col, it)
        _layout(self.cf_table, stretch=(1, 5))
        for box in (self.cf_box, self.ev_box, self.cl_box, self.hy_box):  # empty where the paths did not run
            box.setVisible(ran)
        self._fill_evidence(t)
        self._fill_clusters(t)
        self._fill_hypotheses(t)
        self._fill_decision(t)

    def _fill_evidence(self, t: CFTrace) -> None:
        qnames = ["q", *(f"q'{i}" for i in range(1, len(t.queries)))]
        self.ev_table.setRowCount(len(t.evidence))
        order = sorted(t.evidence, key=lambda e: (e.status != "kept", -(e.s_q - (e.max_s_cf or 0.0)), e.pool_id))
        for r, e in enumerate(order):
            margin = e.s_q - (e.max_s_cf if e.max_s_cf is not None else 0.0)
            by = ", ".join(qnames[i] if 0 <= i < len(qnames) else str(i) for i in e.retrieved_by)
            arg = qnames[e.argmax_cf] if 0 < e.argmax_cf < len(qnames) else "—"
            cells = [
                _item(passage_name(e.pool_id)),
                _item(f"{e.hit.title} — p. {e.hit.page}", " ".join(e.hit.text.split())[:1200]),
                _item(by),
                _item("", tr("trace.s_q_tip", raw=fmt(e.s_q_raw, 3)), e.s_q),
                _item("", tr("trace.max_cf_tip", q=arg), e.max_s_cf),
                _item("", tr("trace.margin_tip"), margin),
                _item(tr(f"trace.status.{e.status}")
                      + (f" → {passage_name(e.duplicate_of)}" if e.duplicate_of >= 0 else "")),
                _item(f"C{e.cluster + 1}" if e.cluster >= 0 else "—"),
            ]
            for col, it in enumerate(cells):
                self.ev_table.setItem(r, col, it)
        _set_scale(self.ev_table, 5, [e.s_q - (e.max_s_cf or 0.0) for e in order])
        _layout(self.ev_table, stretch=(1,), fixed=(3, 4, 5))
        for col in (3, 4, 5):
            self.ev_table.setColumnWidth(col, 120)

    def _fill_clusters(self, t: CFTrace) -> None:
        titles = {e.pool_id: e.hit.title for e in t.evidence}
        lines = [tr("trace.spectral", k=t.spectral.k_used, asked=t.spectral.k_requested,
                    sigma=fmt(t.spectral.sigma, 2),
                    eig=", ".join(fmt(v, 3) for v in t.spectral.eigenvalues))]
        for cl in t.clusters:
            lines.append(tr("trace.cluster", k=f"C{cl.cluster + 1}", n=len(cl.members),
                            members="; ".join(f"{passage_name(m)} {titles.get(m, '')}" for m in cl.members)))
        for s in t.subsets:
            lines.append(tr("trace.subset", j=f"E{s.index + 1}",
                            members=", ".join(passage_name(m) for m in s.members),
                            w=", ".join(fmt(w, 2) for w in s.weights) or "—"))
        self.cl_label.setText("\n".join(lines))

    def _fill_hypotheses(self, t: CFTrace) -> None:
        self.hy_table.setRowCount(len(t.hypotheses))
        d = t.decision
        chosen_ids = {d.chosen} if d.chosen >= 0 else set(d.synthesized_from)
        hyps = sorted(t.hypotheses, key=lambda h: h.rank)
        for r, h in enumerate(hyps):
            rationale = h.rationale.strip() or tr("trace.no_rationale")
            mark = "✔ " if h.index in chosen_ids else ""
            cells = [
                _item(mark + hypothesis_name(h.index), tr("trace.hyp_rank_tip", rank=h.rank)),
                _item(h.answer.strip() or tr("trace.no_answer"), rationale),
                _item(rationale),
                _item("", tr("trace.coh_tip", a=fmt(h.sim_answer_evidence), r=fmt(h.query_relevance),
                             p=fmt(h.presence)), h.phi_coh),
                _item("", tr("trace.causal_tip"), h.phi_causal),
                _item("", tr("trace.psi_tip", lam=fmt(t.lam, 2)), h.psi),
                _item(f"E{h.subset + 1}"),
            ]
            for col, it in enumerate(cells):
                if not h.rationale.strip() and col == 2:
                    it.setForeground(QColor("#888"))
                self.hy_table.setItem(r, col, it)
        _set_scale(self.hy_table, 4, [h.phi_causal for h in hyps])
        _layout(self.hy_table, stretch=(1, 2), fixed=(3, 4, 5))
        for col in (3, 4, 5):
            self.hy_table.setColumnWidth(col, 110)

    def _fill_decision(self, t: CFTrace) -> None:
        d = t.decision
        final = tr("trace.final", a=d.final_answer.strip() or tr("trace.no_answer"))
        if not paths_ran(t):  # no hypothesis was chosen or synthesised, and no rationale asked for
            self.de_label.setText("\n".join([decision_line(t), final]))
            return
        if d.chosen >= 0:
            chosen = tr("trace.chosen", j=hypothesis_name(d.chosen))
        elif d.synthesis_style == "reread":
            chosen = tr("trace.reread_from", ps=", ".join(passage_name(p) for p in d.read_ids) or "—")
        else:
            chosen = tr("trace.synth_from", js=", ".join(hypothesis_name(j) for j in d.synthesized_from) or "—")
        self.de_label.setText("\n".join([
            decision_line(t),
            chosen,
            final,
            tr("trace.rationale", r=d.final_rationale.strip() or tr("trace.no_rationale")),
        ]))

    def retranslate(self) -> None:
        self.cf_box.setTitle(tr("trace.counterfactuals"))
        self.cf_table.setHorizontalHeaderLabels([tr("trace.h.kept"), tr("trace.h.question"), tr("trace.h.kind"),
                                                 tr("trace.h.sim"), tr("trace.h.info"), tr("trace.h.reason")])
        self.ev_box.setTitle(tr("trace.evidence"))
        self.ev_note.setText(tr("trace.evidence_note"))
        self.ev_table.setHorizontalHeaderLabels([tr("trace.h.id"), tr("trace.h.passage"), tr("trace.h.by"),
                                                 "s(q,e)", "max s(q',e)", "Δ", tr("trace.h.status"),
                                                 tr("trace.h.cluster")])
        self.cl_box.setTitle(tr("trace.clusters"))
        self.hy_box.setTitle(tr("trace.hypotheses"))
        self.cf_note.setText(tr("trace.cf_note"))
        self.hy_note.setText(tr("trace.hy_note", lam=fmt(self.trace.lam, 2) if self.trace is not None else "λ"))
        self.hy_table.setHorizontalHeaderLabels([tr("trace.h.hyp"), tr("trace.h.answer"), tr("trace.h.rationale"),
                                                 "φ_coh", "φ_causal", "Ψ", tr("trace.h.subset")])
        self.de_box.setTitle(tr("trace.decision"))
        self.plain.retranslate()
        has = self.trace is not None
        self.plain.setVisible(has)
        self.empty.setVisible(not has)
        self.empty.setText(tr(self._empty_key, **self._empty_args))
        if self.trace is not None:
            self._fill(self.trace)
