"""The conversation dock: the follow-up thread of the open library in the window's left column.

It owns the conversation panel, proposes the standalone form of a follow-up (the model rewrites
it on the worker, ui/worker.py), records each question and the answer the thread keeps, and saves
the thread with the library. A question to retrieve is said through ``ask``; the window asks it
(docs/architecture.md, "The question's path": a follow-up goes to the model first only when it
cannot stand alone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDockWidget, QFileDialog, QSplitter, QWidget

from rag_desktop.app.service_api import LibraryService
from rag_desktop.core.conversation import Conversation, Rewrite, Turn, needs_rewrite
from rag_desktop.core.types import Answer
from rag_desktop.ui.conversation import ConversationPanel
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import progress_text
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError


class ConversationDock(QDockWidget):
    ask = Signal(str, str)  # (the standalone question to retrieve for, what the user typed)
    status = Signal(str, int)  # a status-bar message and how long it stays (ms; 0: until replaced)

    def __init__(self, service: Callable[[], LibraryService], runner: TaskRunner, side: QSplitter,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._service = service  # read at each use: a library switch replaces the service
        self.runner = runner
        self.side = side
        self.setObjectName("conversation_dock")
        self.panel = ConversationPanel()
        self.panel.ask_standalone.connect(self.ask.emit)
        self.panel.new_requested.connect(self.new_conversation)
        self.panel.export_requested.connect(self.choose_export)
        self.setWidget(self.panel)
        # Docked in the left column under the library, never beside or over the columns: at
        # 1280 px the three columns and the question bar leave no width for a right-hand dock, and
        # a floating one covered the columns. It can be closed (View → Conversation), not floated.
        self.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable)
        side.addWidget(self)
        side.setStretchFactor(0, 1)
        side.setStretchFactor(1, 1)
        # Hidden until wanted (View → Conversation, or a follow-up to confirm).
        self.hide()
        self.panel.set_conversation(service().load_conversation())

    def propose_rewrite(self, q: str, answers_on: bool) -> bool:
        """Start rewriting a follow-up (True), or False when ``q`` is asked as it stands: no
        previous question, or answers off (no model to rewrite with)."""
        svc = self._service()
        conv = self.panel.conversation
        if not needs_rewrite(conv, q) or not answers_on:
            return False
        self.panel.show_rewriting(q)
        self.status.emit(tr("conv.rewriting"), 0)

        def job(ctx: TaskContext) -> Iterator[object]:
            yield from svc.prepare_generator(ctx.cancel)  # the model may still be joining (first launch)
            yield svc.rewrite_followup(q, conv, ctx.cancel)

        def done(rw: Rewrite) -> None:
            if self.panel.pending != q:
                return
            if not rw.rewritten:
                # Nothing to confirm (the model kept the question, or its rewrite was unusable): the
                # user's words are asked at once and the note says why. Only a real rewrite waits
                # for a person to check it — a new question is not held up behind a dialog.
                self.panel.clear_proposal()
                if rw.reason:
                    self.status.emit(tr("conv.fallback", note=tr(f"conv.note.{rw.reason}")), 8000)
                self.ask.emit(q, q)
                return
            self.show_in_side()
            self.panel.show_proposal(rw)

        def failed(err: UserError) -> None:  # the service falls back itself; this is a crash
            if self.panel.pending == q:
                self.panel.show_proposal(Rewrite(q, q, False, err.message, reason="failed"))

        self.runner.submit("rewrite", job, on_progress=lambda p: self.status.emit(progress_text(p), 0),
                           on_result=done, on_error=failed)
        return True

    def show_in_side(self) -> None:
        """Open the conversation in the left column, sharing its height with the library."""
        if not self.isVisible():
            self.show()
            h = self.side.height()
            self.side.setSizes([h - h // 2, h // 2])

    def record_turn(self, typed: str, question: str) -> None:
        self._save(self.panel.conversation.add(Turn(typed or question, question)))

    def record_answer(self, question: str, column: str, answer: Answer, has_causal: bool) -> None:
        """The thread keeps the causal column's answer (the baseline's when there is none)."""
        if column not in ("causal", "baseline") or (column == "baseline" and has_causal):
            return
        turns = self.panel.conversation.turns
        if turns and turns[-1].standalone == question:
            self._save(self.panel.conversation.with_answer(answer.text))

    def reload(self) -> None:
        """The open library changed: its own conversation (each library has one)."""
        self.panel.clear_proposal()
        self.panel.set_conversation(self._service().load_conversation())

    def _save(self, conv: Conversation) -> None:
        self.panel.set_conversation(conv)
        try:
            self._service().save_conversation(conv)
        except OSError as exc:
            self.status.emit(str(exc), 8000)

    def new_conversation(self) -> None:
        self.panel.clear_proposal()
        self._save(Conversation())

    def choose_export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, tr("conv.export_title"), "conversation.md", "Markdown (*.md)")
        if path:
            self.export(Path(path))

    def export(self, path: Path) -> Path:
        name = Path(self._service().library.folder).name or "library"
        path.write_text(self.panel.conversation.to_markdown(f"{tr('conv.title')} — {name}"), encoding="utf-8")
        self.status.emit(tr("conv.exported", path=str(path)), 8000)
        return path

    def retranslate(self) -> None:
        self.panel.retranslate()
        self.setWindowTitle(tr("conv.title"))

