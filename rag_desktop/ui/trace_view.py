"""The CF-RAG trace (paper 002): counterfactuals, evidence, clusters, hypotheses, decision.

Every number the arbitration used is on screen: V(q,q') components and Info for each
counterfactual (kept or rejected, and why), s(q,e) against max_q' s(q',e) as bars for
each passage (their difference is what φ_causal averages), the spectral clusters, each
hypothesis with φ_coh, φ_causal and Ψ = (1−λ)·φ_coh + λ·φ_causal, and the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, Qt
from PySide6.QtGui import QColor, QPainter
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

from rag_desktop.core.cfrag_types import CFTrace, CounterfactualCandidate
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import fmt

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


def _item(text: str, tooltip: str = "", value: float | None = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)  # plain text: counterfactuals and answers are model output
    it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if tooltip:
        it.setToolTip(tooltip)
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


def reject_reason(c: CounterfactualCandidate) -> str:
    """The core's reason text, prefixed with a short label in the UI language."""
    if c.kept:
        return tr("trace.kept")
    if not c.valid:
        return tr("trace.invalid", why=c.reason)
    return tr("trace.not_top", why=c.reason)


class TraceView(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        body = QWidget()
        self.setWidget(body)
        lay = QVBoxLayout(body)
        self.summary = QLabel()
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.cf_box = QGroupBox()
        self.cf_table = _table(6)
        QVBoxLayout(self.cf_box).addWidget(self.cf_table)
        self.ev_box = QGroupBox()
        self.ev_table = _table(8)
        self.ev_table.setItemDelegateForColumn(3, BarDelegate(BAR_Q, parent=self.ev_table))
        self.ev_table.setItemDelegateForColumn(4, BarDelegate(BAR_CF, parent=self.ev_table))
        self.ev_table.setItemDelegateForColumn(5, BarDelegate(QColor("#009E73"), -1.0, 1.0, self.ev_table))
        ev_lay = QVBoxLayout(self.ev_box)
        self.ev_note = QLabel()
        self.ev_note.setWordWrap(True)
        self.ev_note.setTextFormat(Qt.TextFormat.PlainText)
        ev_lay.addWidget(self.ev_note)
        ev_lay.addWidget(self.ev_table)
        self.cl_box = QGroupBox()
        self.cl_label = QLabel()
        self.cl_label.setTextFormat(Qt.TextFormat.PlainText)
        self.cl_label.setWordWrap(True)
        QVBoxLayout(self.cl_box).addWidget(self.cl_label)
        self.hy_box = QGroupBox()
        self.hy_table = _table(7)
        for col in (3, 4, 5):
            self.hy_table.setItemDelegateForColumn(col, BarDelegate(QColor("#E69F00"), parent=self.hy_table))
        self.hy_table.setItemDelegateForColumn(4, BarDelegate(QColor("#009E73"), -1.0, 1.0, self.hy_table))
        QVBoxLayout(self.hy_box).addWidget(self.hy_table)
        self.de_box = QGroupBox()
        self.de_label = QLabel()
        self.de_label.setTextFormat(Qt.TextFormat.PlainText)
        self.de_label.setWordWrap(True)
        self.de_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        QVBoxLayout(self.de_box).addWidget(self.de_label)
        self.empty = QLabel()
        self.empty.setTextFormat(Qt.TextFormat.PlainText)
        for w in (self.empty, self.summary, self.cf_box, self.ev_box, self.cl_box, self.hy_box, self.de_box):
            lay.addWidget(w)
        lay.addStretch(1)
        self.trace: CFTrace | None = None
        self._empty_key = "trace.empty"
        self.retranslate()

    # -------------------------------------------------------------- content
    def clear(self, key: str = "trace.empty") -> None:
        self.trace = None
        self._empty_key = key
        self.retranslate()

    def set_trace(self, trace: CFTrace) -> None:
        self.trace = trace
        self.retranslate()

    def _fill(self, t: CFTrace) -> None:
        self.summary.setText(tr("trace.summary", n=len(t.counterfactuals), rejected=len(t.rejected_counterfactuals),
                                pool=len(t.evidence), kept=len(t.kept_evidence), k=t.spectral.k_used,
                                m=len(t.hypotheses), lam=fmt(t.lam, 2),
                                scorer=t.scorer + (tr("trace.substitute") if t.scorer_is_substitute else ""))
                             + ("\n" + "\n".join("⚠ " + w for w in t.warnings) if t.warnings else ""))
        cands: Sequence[CounterfactualCandidate] = (*t.counterfactuals, *t.rejected_counterfactuals)
        self.cf_table.setRowCount(len(cands))
        for r, c in enumerate(cands):
            status = "✔" if c.kept else "✘"
            cells = [
                _item(status, reject_reason(c)),
                _item(c.text, tr("trace.cf_tip", a=c.answer_q, b=c.answer_cf, f1=fmt(c.answer_f1, 2))),
                _item(c.transformation),
                _item(fmt(c.sim_sem), tr("trace.sim_tip")),
                _item(fmt(c.info), tr("trace.info_tip", d=fmt(c.div_sem), a=fmt(c.div_ans), r=fmt(c.rel_dom))),
                _item(reject_reason(c)),
            ]
            for col, it in enumerate(cells):
                if not c.kept:
                    it.setForeground(QColor("#888"))
                self.cf_table.setItem(r, col, it)
        self.cf_table.resizeRowsToContents()

        qnames = ["q", *(f"q'{i}" for i in range(1, len(t.queries)))]
        self.ev_table.setRowCount(len(t.evidence))
        order = sorted(t.evidence, key=lambda e: (e.status != "kept", -(e.s_q - (e.max_s_cf or 0.0)), e.pool_id))
        for r, e in enumerate(order):
            margin = e.s_q - (e.max_s_cf if e.max_s_cf is not None else 0.0)
            by = ", ".join(qnames[i] if 0 <= i < len(qnames) else str(i) for i in e.retrieved_by)
            arg = qnames[e.argmax_cf] if 0 < e.argmax_cf < len(qnames) else "—"
            cells = [
                _item(str(e.pool_id)),
                _item(f"{e.hit.title} — p. {e.hit.page}", " ".join(e.hit.text.split())[:1200]),
                _item(by),
                _item("", tr("trace.s_q_tip", raw=fmt(e.s_q_raw, 3)), e.s_q),
                _item("", tr("trace.max_cf_tip", q=arg), e.max_s_cf),
                _item("", tr("trace.margin_tip"), margin),
                _item(tr(f"trace.status.{e.status}") + (f" → {e.duplicate_of}" if e.duplicate_of >= 0 else "")),
                _item(str(e.cluster) if e.cluster >= 0 else "—"),
            ]
            for col, it in enumerate(cells):
                self.ev_table.setItem(r, col, it)
        self.ev_table.resizeColumnsToContents()
        self.ev_table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        for col in (3, 4, 5):
            self.ev_table.setColumnWidth(col, 120)

        titles = {e.pool_id: e.hit.title for e in t.evidence}
        lines = [tr("trace.spectral", k=t.spectral.k_used, asked=t.spectral.k_requested,
                    sigma=fmt(t.spectral.sigma, 2),
                    eig=", ".join(fmt(v, 3) for v in t.spectral.eigenvalues))]
        for cl in t.clusters:
            lines.append(tr("trace.cluster", k=cl.cluster, n=len(cl.members),
                            members="; ".join(f"#{m} {titles.get(m, '')}" for m in cl.members)))
        for s in t.subsets:
            lines.append(tr("trace.subset", j=s.index, members=", ".join(f"#{m}" for m in s.members),
                            w=", ".join(fmt(w, 2) for w in s.weights) or "—"))
        self.cl_label.setText("\n".join(lines))

        self.hy_table.setRowCount(len(t.hypotheses))
        for r, h in enumerate(sorted(t.hypotheses, key=lambda h: h.rank)):
            cells = [
                _item(str(h.rank)),
                _item(h.answer, h.rationale),
                _item(h.rationale),
                _item("", tr("trace.coh_tip", a=fmt(h.sim_answer_evidence), r=fmt(h.query_relevance),
                             p=fmt(h.presence)), h.phi_coh),
                _item("", tr("trace.causal_tip"), h.phi_causal),
                _item("", tr("trace.psi_tip", lam=fmt(t.lam, 2)), h.psi),
                _item(f"E{h.subset}"),
            ]
            for col, it in enumerate(cells):
                self.hy_table.setItem(r, col, it)
        self.hy_table.resizeRowsToContents()

        d = t.decision
        kind = tr(f"trace.decision.{d.kind}")
        chosen = tr("trace.chosen", j=d.chosen) if d.chosen >= 0 else \
            tr("trace.synth_from", js=", ".join(str(j) for j in d.synthesized_from) or "—")
        self.de_label.setText("\n".join([
            tr("trace.decision_line", kind=kind, agr=fmt(d.agreement, 2), measure=d.agreement_measure,
               thr=fmt(d.threshold, 2)),
            chosen,
            tr("trace.final", a=d.final_answer),
            tr("trace.rationale", r=d.final_rationale),
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
        self.hy_table.setHorizontalHeaderLabels(["#", tr("trace.h.answer"), tr("trace.h.rationale"),
                                                 "φ_coh", "φ_causal", "Ψ", tr("trace.h.subset")])
        self.de_box.setTitle(tr("trace.decision"))
        has = self.trace is not None
        for w in (self.summary, self.cf_box, self.ev_box, self.cl_box, self.hy_box, self.de_box):
            w.setVisible(has)
        self.empty.setVisible(not has)
        self.empty.setText(tr(self._empty_key))
        if self.trace is not None:
            self._fill(self.trace)
