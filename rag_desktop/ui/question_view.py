"""The question on screen: runs the steps of its app.question_flow.QuestionFlow on the window's
one worker (ui/worker.py) and draws their events in the results panel.

Each step is one task named ``query.<id>.<step>``, so a new question cancels the old one's
remaining work and a failed generation stops the rest of its question's; results of an older
question that arrive after a newer one was asked are dropped (docs/architecture.md, "The
question's path"). The order of the steps is the flow's: columns first, then the answers (one per
set of columns reading the same passages), then CF-RAG.

While the question is typed, each pause in the typing (ui.query_bar.QueryBar.paused) ranks the words so
far and reads the prompt their first answer would read into the model's cache (QuestionFlow.read_ahead,
app.read_ahead): one background task at a time, named ``read_ahead``, which any other task stops; a pause
on other words stops the one under way (keeping what it read whole) and reads them next. Enter on the very
words being read ahead stops nothing: the question takes that task over (renamed as one of its own steps),
shows its columns at once and queues its answers behind it, so no piece it was reading is lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from functools import partial

from PySide6.QtCore import QObject, Signal

from rag_desktop.app import flow_events as fe
from rag_desktop.app.question_flow import QuestionFlow
from rag_desktop.app.service_api import LibraryService
from rag_desktop.core.conversation import needs_rewrite
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Progress
from rag_desktop.ui.conversation_dock import ConversationDock
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import crosslang_text, fmt, progress_text
from rag_desktop.ui.query_bar import QueryBar
from rag_desktop.ui.query_state import QueryState
from rag_desktop.ui.results_panel import TITLE_KEYS, ResultsPanel
from rag_desktop.ui.worker import Task, TaskContext, TaskRunner, UserError

log = logging.getLogger(__name__)


class QuestionView(QObject):
    status = Signal(str, int)  # a status-bar message and how long it stays (ms; 0: until replaced)
    error = Signal(object)  # a UserError for the error bar
    asked = Signal(str)  # a question was asked (the window remembers it)

    def __init__(self, service: Callable[[], LibraryService], settings: Callable[[], Settings],
                 runner: TaskRunner, bar: QueryBar, results: ResultsPanel, conversation: ConversationDock,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._service = service  # read when a question starts: a library switch replaces it
        self._settings = settings
        self.runner = runner
        self.bar = bar
        self.results = results
        self.conversation = conversation
        self.state: QueryState | None = None
        self._qid = 0
        for column, pane in results.answers.items():
            pane.needs.requested.connect(partial(self.ask_needs, column))
        self._ahead: Task | None = None  # the read ahead running
        self._ahead_flow: QuestionFlow | None = None  # its flow (its words, level and ranking), and the columns
        self._ahead_ready: fe.ColumnsReady | None = None  # it ranked
        self._ahead_next = ""  # words typed since it started, read when it ends
        bar.paused.connect(self.read_ahead)

    def _answers_on(self) -> bool:
        return self.bar.auto_answer.isChecked()

    # ------------------------------------------------------------------ asking
    def ask(self, q: str, typed: str | None = None) -> None:
        """Ask ``q``. A follow-up in a conversation is first rewritten into a standalone question
        for the user to check; ``typed`` marks a question that already is that standalone form of
        what the user typed."""
        if self._preparing(q):
            # Ask again while the same question's columns are still being prepared: the work under
            # way answers it, so the press is ignored (a changed question restarts, as before).
            self.status.emit(tr("query.preparing"), 5000)
            return
        self.runner.cancel("query.")  # a new question supersedes the old one's remaining work
        self._ahead_next = ""  # (its tasks stop a read ahead under way: TaskRunner.submit)
        if typed is None and self.conversation.propose_rewrite(q, self._answers_on()):
            # The last question's columns would stand under the new one for as long as the person
            # takes to check its rewrite: say where the question is instead.
            self.results.reset("col.followup")
            return
        self._qid += 1
        taken = self._take_over(q)
        flow = taken[0] if taken is not None else QuestionFlow(
            self._service(), q, level=self.bar.level(), ranking=self.bar.ranking(),
            cross_language=self._settings().retrieval.cross_language)
        st = QueryState(self._qid, q, flow, typed=typed or q)
        self.conversation.record_turn(st.typed, st.question)
        self.state = st
        self.asked.emit(q)
        self.results.begin(self._answers_on(), self.bar.run_cf.isChecked())
        self.bar.show_crosslang(None)
        self.status.emit(tr("status.retrieving"), 0)
        if taken is not None:
            self._on_event(st.qid, taken[1])
        else:
            self._submit_compare(st, translate=False)

    # ------------------------------------------------------------------ reading ahead
    def read_ahead(self, text: str) -> None:
        """A pause in typing ``text``: its first answer prompt read into the model's cache in the background
        (app.read_ahead), unless answers are off, other work is running, or it is a follow-up that will be
        rewritten first (the rewrite is what will be read)."""
        q = text.strip()
        s = self._settings()
        # (with cross_language on, the answers read the translated question's ranking: not known while typing)
        if not q or not self._answers_on() or not s.generation.read_ahead or s.retrieval.cross_language \
                or self.runner.busy:
            return
        if needs_rewrite(self.conversation.panel.conversation, q):
            return
        self._ahead_next = q
        if self._ahead is None:
            self._next_ahead()
        elif self._ahead.background and self._ahead_flow is not None and self._ahead_flow.question != q:
            # the newest words are the better guess: the one under way stops, keeping the pieces it read whole,
            # and these are read when it has (_next_ahead)
            self._ahead.cancel.set()

    def _next_ahead(self) -> None:
        self._ahead = None
        q, self._ahead_next = self._ahead_next, ""
        if not q or self.runner.busy:
            return
        flow = QuestionFlow(self._service(), q, level=self.bar.level(), ranking=self.bar.ranking())
        self._ahead_flow, self._ahead_ready = flow, None
        t0 = time.perf_counter()

        def got(ev: object) -> None:
            if isinstance(ev, fe.ColumnsReady):
                if self._ahead_flow is flow:
                    self._ahead_ready = ev
            else:
                log.info("read ahead: %s prompt tokens in %.2f s for %r", ev, time.perf_counter() - t0, q[:60])

        self._ahead = self.runner.submit("read_ahead", lambda ctx: flow.read_ahead(ctx.cancel), background=True,
                                         on_result=got, on_finished=self._next_ahead,
                                         on_error=lambda err: log.warning("read ahead failed: %s", err.message))

    def _take_over(self, q: str) -> tuple[QuestionFlow, fe.ColumnsReady] | None:
        """The flow and columns of the read ahead of ``q`` still under way, its task now the question's (no
        longer in the background: nothing stops it and the answers queue behind it); None when there is none."""
        task, flow, ready = self._ahead, self._ahead_flow, self._ahead_ready
        if (task is None or task.done or task.cancel.is_set or flow is None or ready is None
                or not self._answers_on()
                or (flow.question, flow.level, flow.ranking) != (q, self.bar.level(), self.bar.ranking())):
            return None
        task.name = f"query.{self._qid}.read_ahead"  # the next question stops it, as the rest of this one's work
        self.runner.adopt(task)
        return flow, ready

    def _submit_compare(self, st: QueryState, *, translate: bool) -> None:
        """Rank ``st``'s question: first as typed, so the columns show at once; then, when
        ``retrieval.cross_language`` is on, with its translation, which feeds the answers."""
        flow = st.flow
        assert flow is not None
        self.runner.submit(f"query.{st.qid}.compare" + (".translated" if translate else ""),
                           lambda ctx: flow.retrieve(translate=translate, cancel=ctx.cancel),
                           on_result=partial(self._on_event, st.qid), on_error=partial(self._on_compare_error, st.qid))

    def _preparing(self, q: str) -> bool:
        """Whether ``q`` is the question on screen and its rankings are still being prepared."""
        st = self.state
        if st is None or st.question != q or st.comparison is not None:
            return False
        prefix = f"query.{st.qid}.compare"
        return any(t.name.startswith(prefix) for t in self.runner.tasks())

    def _current(self, qid: int) -> QueryState | None:
        return self.state if self.state is not None and self.state.qid == qid else None

    def reset(self) -> None:
        self.state = None
        self.results.reset()

    # ------------------------------------------------------------------ the flow's events
    def _on_event(self, qid: int, ev: object) -> None:
        st = self._current(qid)
        if st is None:
            return
        if isinstance(ev, fe.ColumnsReady):
            self._on_columns(st, ev)
        elif isinstance(ev, fe.AnswerProgress):
            self.results.answers[ev.group.lead].set_progress(progress_text(ev.progress))
        elif isinstance(ev, fe.Token):
            if st.first_words is None:
                # What a person waits for, in the log (docs/benchmarks.md §5 times the window by it).
                st.first_words = st.since_asked()
                log.info("question %d: first answer words %.2f s after Enter (%s column)", st.qid,
                         st.first_words, ev.group.lead)
            for m in ev.group.members:  # a column sharing the sources watches the same answer being written
                self.results.answers[m].append_token(ev.text)
        elif isinstance(ev, fe.AnswerDone):
            st.answers[ev.column] = ev.answer
            self.results.show_answer(ev.column, ev.answer, ev.ranked.hits, ev.shared_from)
            self.conversation.record_answer(st.question, ev.column, ev.answer, "causal" in st.answers)
        elif isinstance(ev, fe.CFProgress):
            self.results.show_cf_progress(ev.progress)
        elif isinstance(ev, fe.Abstained):  # the library holds no answer: CF-RAG did not run (core.abstain)
            st.answers["cfrag"] = ev.answer
            self.results.show_abstained(ev.answer)
        elif isinstance(ev, fe.NeedsProgress):
            self.results.answers[ev.column].needs.show_progress(ev.progress)
        elif isinstance(ev, fe.NeedsDone):
            self.results.answers[ev.column].needs.show_needs(ev.needs)
        elif isinstance(ev, fe.CFDone):
            st.cfrag = ev.result
            st.answers["cfrag"] = ev.result.answer
            self.results.show_cfrag(st)
            self.status.emit(tr("status.done", s=fmt(st.since_asked(), 1)), 10000)

    def _on_columns(self, st: QueryState, ev: fe.ColumnsReady) -> None:
        assert st.flow is not None
        # the columns now; the translated question's rankings (a model call) join before the answers
        wait = st.flow.translates_next(ev, answers=self._answers_on())
        if wait:
            self._submit_compare(st, translate=True)
        c = st.comparison = ev.comparison
        log.info("question %d: columns %.2f s after Enter", st.qid, st.since_asked())
        st.surfaces, st.words = dict(ev.surfaces), dict(ev.words)
        self.results.fill_columns(st)
        self.bar.show_crosslang(c.cross_language)
        status = tr("status.compared", n=len(c.baseline.hits), ms=int(1000 * sum(c.timings.values())))
        line = crosslang_text(c.cross_language)
        self.status.emit(f"{status} · {line}" if line else status, 8000)
        if c.causal.hits:
            self.results.select_first("causal")
        if wait:
            return  # the answers wait for the translated rankings
        if self._answers_on():
            self._queue_generation(st)
        else:
            self.results.columns["cfrag"].clear("col.cf_off")

    def _on_compare_error(self, qid: int, err: UserError) -> None:
        if self._current(qid) is not None:
            self.results.compare_failed()
            self.error.emit(err)

    # ------------------------------------------------------------------ generation
    def _queue_generation(self, st: QueryState) -> None:
        flow = st.flow
        assert flow is not None and st.comparison is not None
        for group in flow.answer_groups(st.comparison):
            for x in group.members[1:]:
                self.results.answers[x].set_progress(tr("answer.shared_wait", column=tr(TITLE_KEYS[group.lead])))

            def job(ctx: TaskContext, group: fe.AnswerGroup = group) -> Iterator[object]:
                yield from flow.answer(group, ctx.cancel)

            self.runner.submit(
                f"query.{st.qid}.answer.{group.lead}", job,
                on_result=partial(self._on_event, st.qid),
                on_error=partial(self._on_gen_errors, st.qid, group.members),
                on_cancelled=partial(self._gen_stopped, st.qid, group.members),
            )
        if self.bar.run_cf.isChecked():
            self._queue_cfrag(st)
        else:
            self.results.show_cf_disabled()

    def _queue_cfrag(self, st: QueryState) -> None:
        """CF-RAG for ``st``'s question, after whatever is queued (the answers)."""
        flow = st.flow
        assert flow is not None
        self.results.cf_queued()
        self.runner.submit(
            f"query.{st.qid}.cfrag", lambda ctx: flow.cfrag(ctx.cancel),
            on_result=partial(self._on_event, st.qid),
            on_error=partial(self._on_gen_error, st.qid, "cfrag"),
            on_cancelled=partial(self._cf_stopped, st.qid),
        )

    def ask_needs(self, column: str) -> None:
        """Which of ``column``'s cited sources its answer needs: the answer asked again without each
        (core.needs), queued after the question's other work on the one worker."""
        st = self.state
        answer = st.answers.get(column) if st is not None else None
        if st is None or st.flow is None or answer is None:
            return
        flow, pane = st.flow, self.results.answers[column]
        pane.needs.show_progress(Progress("needs", 0, 0, ""))
        qid = st.qid

        def failed(err: UserError) -> None:
            if self._current(qid) is not None:  # a newer question's pane is not this answer's
                pane.needs.show_failed(err.message)

        def stopped() -> None:
            if self._current(qid) is not None:  # stopped, the answer stays: offered again
                pane.needs.offer(answer)

        self.runner.submit(f"query.{qid}.needs.{column}", lambda ctx: flow.needs(column, answer, ctx.cancel),
                           on_result=partial(self._on_event, qid), on_error=failed, on_cancelled=stopped)

    def toggle_cfrag(self, on: bool) -> None:
        """The CF-RAG switch: off stops a running CF-RAG (its minutes of CPU), on runs it for the
        question on screen if it has not run yet."""
        st = self.state
        if st is None or st.comparison is None or not self._answers_on():
            return
        if not on:
            if st.cfrag is None:
                self.runner.cancel(f"query.{st.qid}.cfrag")
                self.results.show_cf_disabled()
        elif st.cfrag is None:
            self._queue_cfrag(st)

    def _gen_stopped(self, qid: int, members: tuple[str, ...]) -> None:
        if self._current(qid) is not None:
            for m in members:
                self.results.answers[m].set_stopped()  # a partial answer stays readable, marked as stopped

    def _cf_stopped(self, qid: int) -> None:
        st = self._current(qid)
        if st is None:
            return
        if not self.bar.run_cf.isChecked():  # stopped by the switch: say it is off, not "stopped"
            self.results.show_cf_disabled()
            return
        self.results.cf_stopped(st)

    def _on_gen_errors(self, qid: int, members: tuple[str, ...], err: UserError) -> None:
        for m in members:
            self._on_gen_error(qid, m, err)

    def _on_gen_error(self, qid: int, m: str, err: UserError) -> None:
        st = self._current(qid)
        if st is None:
            return
        st.errors[m] = err.message
        self.results.show_failed(m, err.message)
        self.error.emit(err)
        # The same cause (no model, server down) would fail every remaining generation: stop them.
        self.runner.cancel(f"query.{qid}.answer")
        self.runner.cancel(f"query.{qid}.cfrag")
