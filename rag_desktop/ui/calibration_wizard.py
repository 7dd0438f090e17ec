"""Calibration wizard: the §4.6 gate of paper 000 for the open library, point and click.

Three pages in one dialog:

1. probe questions — written by the local model from sampled passages (a worker task with
   progress and Stop), or typed by the user, one per line;
2. labelling — for each question, the documents any method ranks in its top 10 (baseline ∪
   causal ∪ hybrid, the only ones that can change MRR@10) as check boxes: one click marks a
   document relevant; generated questions come with their passage's document ticked;
3. result — mean MRR@10 and Δ per method, the 2,000-draw bootstrap reliability, the decision in
   words, and "Apply", which stores the decision in the library and sets the causal column to
   follow it (``retrieval.default_method = "gated"``, saved by the window).

The arithmetic is Qt-free in ``app.calibration`` (ranking, scoring from labels) and
``core.gate`` (Δ, bootstrap, decision); every service call runs on the window's worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QCheckBox,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.app.calibration import (
    METHODS,
    CalibrationOutcome,
    Probe,
    ProbeCandidates,
    generate_probes,
    iter_probe_candidates,
    questions_from_text,
    score_labels,
    store_decision,
)
from rag_desktop.app.library_gate import GATE_KEY, read_record
from rag_desktop.app.self_gate import SELF_LABELS, GateRecord
from rag_desktop.core.gate import MIN_PROBES_FOR_RELIABILITY, GateDecision
from rag_desktop.core.types import Progress
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_label
from rag_desktop.ui.worker import Task, TaskContext, TaskRunner, UserError

log = logging.getLogger(__name__)

PAGE_PROBES, PAGE_LABELS, PAGE_RESULT = range(3)
DEFAULT_N = 10
SEED = 0


class _NoDecision:
    """The library has no stored gate record."""


class _EmptyLibrary:
    """Returned by the probe task when the library has no documents (a user mistake, not an error)."""


def reliability_level(r: float, n_probes: int = MIN_PROBES_FOR_RELIABILITY) -> str:
    """How to read a bootstrap reliability: high (≥ 90 %), medium (≥ 70 %), low; "few" when
    fewer than MIN_PROBES_FOR_RELIABILITY questions were scored."""
    if n_probes < MIN_PROBES_FOR_RELIABILITY:
        return "few"
    return "high" if r >= 0.9 else "medium" if r >= 0.7 else "low"


def percent(x: float) -> str:
    return f"{100 * x:.1f} %" if x < 0.9995 else "100 %"


def signed(x: float) -> str:
    return f"{x:+.3f}"


class CalibrationWizard(QDialog):
    def __init__(self, service: Any, runner: TaskRunner, on_apply: Callable[[GateDecision], None],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("calibration_wizard")
        self.service = service
        self.runner = runner
        self.on_apply = on_apply
        self.items: list[ProbeCandidates] = []
        self.labels: list[set[int]] = []
        self.outcome: CalibrationOutcome | None = None
        self.task: Task | None = None
        self.running = False  # a task of the wizard is queued or running
        self.applied = False
        self.current_probe = -1
        self.checks: list[QCheckBox] = []
        self.stored_gate: GateRecord | None = None
        self.stored_known = False  # the stored decision has been read
        self._build()
        self.resize(980, 640)
        self.show_page(PAGE_PROBES)
        self._read_stored()

    def _read_stored(self) -> None:
        """Show the decision stored in the library now, if any (read on the worker)."""
        svc = self.service

        def job(ctx: TaskContext) -> object:
            return read_record(svc.library.catalog.get_json(GATE_KEY)) or _NoDecision()

        def shown(res: object) -> None:
            self.stored_gate = res if isinstance(res, GateRecord) else None
            self.stored_known = True
            self._show_stored()

        self.runner.submit("calibration.stored", job, on_result=shown,
                           on_error=lambda err: log.info("no stored gate shown: %s", err.message))

    def _show_stored(self) -> None:
        g = self.stored_gate
        if not self.stored_known:
            self.stored.clear()
            return
        key = "cal.stored_self" if g is not None and g.labels == SELF_LABELS else "cal.stored"
        self.stored.setText(tr("cal.stored_none") if g is None else
                            tr(key, decision=tr(f"cal.d.{g.decision}"), n=g.n_probes, pct=percent(g.reliability)))

    # ================================================================== layout
    def _build(self) -> None:
        self.step = QLabel()
        f = self.step.font()
        f.setBold(True)
        f.setPointSizeF(f.pointSizeF() * 1.15)
        self.step.setFont(f)
        self.stack = QStackedWidget()
        self.stack.addWidget(self._probes_page())
        self.stack.addWidget(self._labels_page())
        self.stack.addWidget(self._result_page())

        self.progress = QProgressBar()
        self.status = plain_label()
        self.back_btn = QPushButton()
        self.next_btn = QPushButton()
        self.stop_btn = QPushButton()
        self.apply_btn = QPushButton()
        self.close_btn = QPushButton()
        self.next_btn.setDefault(True)
        self.back_btn.clicked.connect(self.back)
        self.next_btn.clicked.connect(self.next)
        self.stop_btn.clicked.connect(self.stop)
        self.apply_btn.clicked.connect(self.apply)
        self.close_btn.clicked.connect(self.reject)
        btns = QHBoxLayout()
        btns.addWidget(self.progress, 2)
        btns.addStretch(1)
        for b in (self.stop_btn, self.back_btn, self.next_btn, self.apply_btn, self.close_btn):
            btns.addWidget(b)
        lay = QVBoxLayout(self)
        lay.addWidget(self.step)
        lay.addWidget(self.stack, 1)
        lay.addWidget(self.status)
        lay.addLayout(btns)
        self.retranslate()

    def _probes_page(self) -> QWidget:
        page = QWidget()
        self.intro = plain_label()
        self.gen_radio = QRadioButton()
        self.type_radio = QRadioButton()
        self.mode = QButtonGroup(page)
        self.mode.addButton(self.gen_radio)
        self.mode.addButton(self.type_radio)
        self.n_label = QLabel()
        self.n_spin = QSpinBox()
        self.n_spin.setRange(1, 200)
        self.n_spin.setValue(DEFAULT_N)
        self.text = QPlainTextEdit()
        self.text.setObjectName("probe_text")
        self.gen_radio.toggled.connect(self._mode_changed)
        self.text.textChanged.connect(lambda: self.type_radio.setChecked(True) if self.text.toPlainText() else None)
        n_row = QHBoxLayout()
        n_row.addSpacing(24)
        n_row.addWidget(self.n_label)
        n_row.addWidget(self.n_spin)
        n_row.addStretch(1)
        self.stored = plain_label()
        self.stored.setObjectName("stored_decision")
        lay = QVBoxLayout(page)
        lay.addWidget(self.intro)
        lay.addWidget(self.stored)
        lay.addSpacing(8)
        lay.addWidget(self.gen_radio)
        lay.addLayout(n_row)
        lay.addWidget(self.type_radio)
        lay.addWidget(self.text, 1)
        self.gen_radio.setChecked(True)
        return page

    def _labels_page(self) -> QWidget:
        page = QWidget()
        self.label_intro = plain_label()
        self.probe_list = QListWidget()
        self.probe_list.setObjectName("probe_list")
        self.probe_list.setWordWrap(True)
        self.probe_list.currentRowChanged.connect(self.show_probe)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        self.question = plain_label()
        self.cand_holder = QWidget()
        self.cand_layout = QVBoxLayout(self.cand_holder)
        self.cand_layout.setAlignment(Qt.AlignmentFlag.AlignTop)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.cand_holder)
        rl.addWidget(self.question)
        rl.addWidget(scroll, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.probe_list)
        split.addWidget(right)
        split.setSizes([330, 620])
        self.label_count = QLabel()
        lay = QVBoxLayout(page)
        lay.addWidget(self.label_intro)
        lay.addWidget(split, 1)
        lay.addWidget(self.label_count)
        return page

    def _result_page(self) -> QWidget:
        page = QWidget()
        self.decision_label = plain_label()
        self.decision_label.setObjectName("decision")
        f = self.decision_label.font()
        f.setBold(True)
        self.decision_label.setFont(f)
        self.reliability_label = plain_label()
        self.table = QTableWidget(len(METHODS), 4)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.summary = plain_label()
        self.per_probe = QTableWidget(0, 4)
        self.per_probe.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        ph = self.per_probe.horizontalHeader()
        ph.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        ph.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        lay = QVBoxLayout(page)
        lay.addWidget(self.decision_label)
        lay.addWidget(self.reliability_label)
        lay.addWidget(self.table)
        lay.addWidget(self.summary)
        lay.addWidget(self.per_probe, 1)
        return page

    def retranslate(self) -> None:
        self.setWindowTitle(tr("cal.title"))
        self.intro.setText(tr("cal.intro"))
        self.gen_radio.setText(tr("cal.generate"))
        self.type_radio.setText(tr("cal.type"))
        self.n_label.setText(tr("cal.n_probes"))
        self.text.setPlaceholderText(tr("cal.type_placeholder"))
        self.label_intro.setText(tr("cal.label_intro"))
        self.back_btn.setText(tr("cal.back"))
        self.next_btn.setText(tr("cal.next"))
        self.stop_btn.setText(tr("cal.stop"))
        self.apply_btn.setText(tr("cal.apply"))
        self.apply_btn.setToolTip(tr("cal.apply_tip"))
        self.close_btn.setText(tr("cal.close"))
        self.table.setHorizontalHeaderLabels([tr("cal.h.method"), tr("cal.h.mrr"), tr("cal.h.delta"),
                                              tr("cal.h.reliability")])
        self.per_probe.setHorizontalHeaderLabels([tr("cal.h.question"), tr("cal.m.baseline"), tr("cal.m.causal"),
                                                  tr("cal.m.hybrid")])
        self.step.setText(tr(("cal.step1", "cal.step2", "cal.step3")[self.stack.currentIndex()]))
        self._show_stored()

    # ================================================================== navigation
    def page(self) -> int:
        return self.stack.currentIndex()

    def show_page(self, index: int) -> None:
        self.stack.setCurrentIndex(index)
        self.step.setText(tr(("cal.step1", "cal.step2", "cal.step3")[index]))
        self._update_buttons()

    def _busy(self) -> bool:
        return self.running

    def _update_buttons(self) -> None:
        busy = self._busy()
        p = self.page()
        self.back_btn.setVisible(p != PAGE_PROBES)
        self.back_btn.setEnabled(not busy)
        self.next_btn.setVisible(p != PAGE_RESULT)
        self.next_btn.setEnabled(not busy)
        self.apply_btn.setVisible(p == PAGE_RESULT)
        self.apply_btn.setEnabled(not busy and self.outcome is not None and not self.applied)
        self.stop_btn.setVisible(busy)
        self.progress.setVisible(busy)

    def _mode_changed(self) -> None:
        self.n_spin.setEnabled(self.gen_radio.isChecked())

    def back(self) -> None:
        if not self._busy() and self.page() > PAGE_PROBES:
            self.status.clear()
            self.show_page(self.page() - 1)

    def next(self) -> None:
        if self._busy():
            return
        if self.page() == PAGE_PROBES:
            self.start_probes()
        elif self.page() == PAGE_LABELS:
            self.start_scoring()

    def stop(self) -> None:
        if self.task is not None and self.running:
            self.task.cancel.set()

    def reject(self) -> None:
        self.stop()  # closing the wizard stops its work; nothing is stored
        super().reject()

    # ================================================================== tasks
    def _run(self, name: str, fn: Callable[[TaskContext], Any], on_result: Callable[[Any], None],
             on_done: Callable[[], None] | None = None) -> None:
        state = {"ok": True}

        def error(err: UserError) -> None:
            state["ok"] = False
            self.status.setText(tr("cal.failed", msg=err.text()))

        def cancelled() -> None:
            state["ok"] = False
            self.status.setText(tr("cal.stopped"))

        def finished() -> None:
            self.running = False
            self._update_buttons()
            if state["ok"] and on_done is not None:
                on_done()

        self.progress.setRange(0, 0)
        self.running = True
        self.task = self.runner.submit(name, fn, on_progress=self._on_progress, on_result=on_result,
                                       on_error=error, on_cancelled=cancelled, on_finished=finished)
        self._update_buttons()

    def _on_progress(self, p: Progress) -> None:
        if p.total > 0:
            self.progress.setRange(0, p.total)
            self.progress.setValue(min(p.current, p.total))
        key = {"probes": "cal.writing", "rank_probes": "cal.ranking"}.get(p.stage)
        if key is not None:
            self.status.setText(tr(key, cur=p.current, total=p.total))

    # ------------------------------------------------------------------ page 1 → 2
    def start_probes(self) -> None:
        typed = self.type_radio.isChecked()
        questions = questions_from_text(self.text.toPlainText()) if typed else []
        if typed and not questions:
            self.status.setText(tr("cal.no_questions"))
            return
        n = self.n_spin.value()
        svc = self.service
        self.items = []
        self.labels = []

        def job(ctx: TaskContext) -> Iterator[object]:
            if not svc.library.catalog.documents():
                yield _EmptyLibrary()
                return
            if typed:
                probes = [Probe(q, frozenset(), "typed") for q in questions]
            else:
                probes = []
                for ev in generate_probes(svc, n, seed=SEED, cancel=ctx.cancel):
                    if isinstance(ev, Probe):
                        probes.append(ev)
                    else:
                        yield ev
            yield from iter_probe_candidates(svc, probes, ctx.cancel)

        empty: list[bool] = []

        def result(ev: object) -> None:
            if isinstance(ev, _EmptyLibrary):
                empty.append(True)
            elif isinstance(ev, ProbeCandidates):
                self.items.append(ev)
                self.labels.append(set(ev.probe.relevant))

        def done() -> None:
            if not self.items:
                self.status.setText(tr("cal.empty_library") if empty else tr("cal.no_probes"))
                return
            self.status.clear()
            self._fill_probes()
            self.show_page(PAGE_LABELS)

        self.status.setText(tr("cal.writing", cur=0, total=n) if not typed else
                            tr("cal.ranking", cur=0, total=len(questions)))
        self._run("calibration.probes", job, result, done)

    # ------------------------------------------------------------------ page 2: labelling
    def _fill_probes(self) -> None:
        self.probe_list.blockSignals(True)
        self.probe_list.clear()
        for it in self.items:
            item = QListWidgetItem()
            item.setToolTip(tr("cal.generated_tip") if it.probe.source == "generated" else tr("cal.typed_tip"))
            self.probe_list.addItem(item)
        self.probe_list.blockSignals(False)
        self._refresh_probe_texts()
        self.current_probe = -1
        self.probe_list.setCurrentRow(0)

    def _refresh_probe_texts(self) -> None:
        for i, it in enumerate(self.items):
            item = self.probe_list.item(i)
            if item is not None:
                item.setText(tr("cal.probe_item", q=it.probe.question, n=len(self.labels[i])))
        n = sum(1 for lab in self.labels if lab)
        self.label_count.setText(tr("cal.labelled", n=n, total=len(self.items)))

    def show_probe(self, row: int) -> None:
        self.current_probe = row
        for c in self.checks:
            self.cand_layout.removeWidget(c)
            c.deleteLater()
        self.checks = []
        if not 0 <= row < len(self.items):
            self.question.clear()
            return
        it = self.items[row]
        self.question.setText(tr("cal.candidates", q=it.probe.question) if it.candidates
                              else tr("cal.no_candidates"))
        for cand in it.candidates:
            ranks = {m: (tr("cal.rank", n=r) if r is not None else tr("cal.rank_none")) for m, r in cand.ranks}
            box = QCheckBox(f"{cand.title}   ·   "
                            + tr("cal.ranks", b=ranks["baseline"], c=ranks["causal"], h=ranks["hybrid"]))
            box.setToolTip(cand.path)
            box.setChecked(cand.doc_id in self.labels[row])
            box.toggled.connect(lambda on, d=cand.doc_id, r=row: self.set_label(r, d, on))
            self.cand_layout.addWidget(box)
            self.checks.append(box)

    def set_label(self, row: int, doc_id: int, relevant: bool) -> None:
        """Mark (or unmark) ``doc_id`` as answering probe ``row``."""
        if relevant:
            self.labels[row].add(doc_id)
        else:
            self.labels[row].discard(doc_id)
        self._refresh_probe_texts()

    # ------------------------------------------------------------------ page 2 → 3
    def start_scoring(self) -> None:
        if not any(self.labels):
            self.status.setText(tr("cal.need_label"))
            return
        items = list(self.items)
        labels = [frozenset(lab) for lab in self.labels]
        self.outcome = None
        self.applied = False

        def result(out: object) -> None:
            if isinstance(out, CalibrationOutcome):
                self.outcome = out

        def done() -> None:
            if self.outcome is not None:
                self.status.clear()
                self._fill_result(self.outcome)
                self.show_page(PAGE_RESULT)

        self.status.setText(tr("cal.scoring"))
        self._run("calibration.score", lambda ctx: score_labels(items, labels, seed=SEED), result, done)

    def _fill_result(self, out: CalibrationOutcome) -> None:
        d = out.decision
        delta = {"causal": d.delta_causal, "hybrid": d.delta_hybrid}.get(d.decision, 0.0)
        self.decision_label.setText(tr(f"cal.decision.{d.decision}", delta=signed(delta)))
        level = tr(f"cal.level.{reliability_level(d.reliability, d.n_probes)}", min=MIN_PROBES_FOR_RELIABILITY)
        self.reliability_label.setText(tr("cal.reliability", pct=percent(d.reliability), draws=f"{d.n_draws:,}",
                                          n=d.n_probes, level=level))
        rows = (("baseline", d.mean_baseline, None, None),
                ("causal", d.mean_causal, d.delta_causal, d.reliability_causal),
                ("hybrid", d.mean_hybrid, d.delta_hybrid, d.reliability_hybrid))
        for r, (m, mean, dl, rel) in enumerate(rows):
            cells = [tr(f"cal.m.{m}"), f"{mean:.3f}", "" if dl is None else signed(dl),
                     "" if rel is None else percent(rel)]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if m == d.decision:
                    f = item.font()
                    f.setBold(True)
                    item.setFont(f)
                self.table.setItem(r, c, item)
        self.table.resizeRowsToContents()  # exactly the three rows, whatever the font
        self.table.setFixedHeight(self.table.horizontalHeader().height() + 2 * self.table.frameWidth()
                                  + sum(self.table.rowHeight(r) for r in range(self.table.rowCount())))
        summary = tr("cal.summary", n=d.n_probes)
        if out.n_unlabelled:
            summary += " " + tr("cal.unlabelled", n=out.n_unlabelled)
        self.summary.setText(summary)
        self.per_probe.setRowCount(len(out.scores))
        for r, s in enumerate(out.scores):
            self.per_probe.setItem(r, 0, QTableWidgetItem(s.question))
            for c, v in enumerate(s.rr, start=1):
                self.per_probe.setItem(r, c, QTableWidgetItem(f"{v:.2f}"))

    # ------------------------------------------------------------------ apply
    def apply(self) -> None:
        if self._busy() or self.outcome is None or self.applied:
            return
        decision = self.outcome.decision
        svc = self.service

        def done() -> None:
            self.applied = True
            self.status.setText(tr("cal.applied"))
            self.on_apply(decision)
            self._update_buttons()
            self.accept()

        self.status.setText(tr("cal.storing"))
        self._run("calibration.store", lambda ctx: store_decision(svc, decision), lambda _r: None, done)
