"""The main window's follow-up thread: the conversation dock, rewriting a
follow-up into a standalone question, recording turns (a mixin of ui.main_window.MainWindow,
split out of it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QFileDialog

from rag_desktop.core.types import Answer
from rag_desktop.ui.answer_pane import progress_text
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.window_part import WindowPart
from rag_desktop.ui.worker import TaskContext, UserError

if TYPE_CHECKING:
    from PySide6.QtWidgets import QCheckBox, QDockWidget, QSplitter

    from rag_desktop.ui.conversation import ConversationPanel
    from rag_desktop.ui.main_window import QueryState
    from rag_desktop.ui.worker import TaskRunner


class ConversationActions(WindowPart):
    # What this part uses of the window (ui.main_window.MainWindow builds and defines them).
    runner: TaskRunner
    auto_answer: QCheckBox
    conversation_panel: ConversationPanel
    conversation_dock: QDockWidget
    side: QSplitter  # the left column: the library panel, then this dock
    ask: Callable[..., None]

    # ================================================================== conversation
    def _build_conversation(self) -> None:
        from PySide6.QtWidgets import QDockWidget

        from rag_desktop.ui.conversation import ConversationPanel

        self.conversation_panel = ConversationPanel()
        self.conversation_panel.ask_standalone.connect(lambda q, typed: self.ask(q, typed=typed))
        self.conversation_panel.new_requested.connect(self.new_conversation)
        self.conversation_panel.export_requested.connect(self.choose_conversation_export)
        self.conversation_dock = QDockWidget()
        self.conversation_dock.setObjectName("conversation_dock")
        self.conversation_dock.setWidget(self.conversation_panel)
        # Docked in the left column under the library, never beside or over the columns: at
        # 1280 px the three columns and the question bar leave no width for a right-hand dock, and
        # a floating one covered the columns. It can be closed (View → Conversation), not floated.
        self.conversation_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.side.addWidget(self.conversation_dock)
        self.side.setStretchFactor(0, 1)
        self.side.setStretchFactor(1, 1)
        # Hidden until wanted (View → Conversation, or a follow-up to confirm).
        self.conversation_dock.hide()
        self.conversation_panel.set_conversation(self.service.load_conversation())

    def _propose_rewrite(self, q: str) -> bool:
        """Start rewriting a follow-up (True), or False when ``q`` is asked as it stands: no
        previous question, or answers off (no model to rewrite with)."""
        from rag_desktop.core.conversation import needs_rewrite

        svc = self.service
        conv = self.conversation_panel.conversation
        if not needs_rewrite(conv, q) or not self.auto_answer.isChecked():
            return False
        self.conversation_panel.show_rewriting(q)
        self.statusBar().showMessage(tr("conv.rewriting"), 0)

        def job(ctx: TaskContext) -> Iterator[object]:
            yield from svc.prepare_generator(ctx.cancel)  # the model may still be joining (first launch)
            yield svc.rewrite_followup(q, conv, ctx.cancel)

        def done(rw: Any) -> None:
            if self.conversation_panel.pending != q:
                return
            if not rw.rewritten:
                # Nothing to confirm (the model kept the question, or its rewrite was unusable): the
                # user's words are asked at once and the note says why. Only a real rewrite waits
                # for a person to check it — a new question is not held up behind a dialog.
                self.conversation_panel.clear_proposal()
                if rw.reason:
                    self.statusBar().showMessage(tr("conv.fallback", note=tr(f"conv.note.{rw.reason}")), 8000)
                self.ask(q, typed=q)
                return
            self.show_conversation()
            self.conversation_panel.show_proposal(rw)

        def failed(err: UserError) -> None:  # the service falls back itself; this is a crash
            from rag_desktop.core.conversation import Rewrite

            if self.conversation_panel.pending == q:
                self.conversation_panel.show_proposal(Rewrite(q, q, False, err.message, reason="failed"))

        self.runner.submit("rewrite", job, on_progress=lambda p: self.statusBar().showMessage(progress_text(p)),
                           on_result=done, on_error=failed)
        return True

    def show_conversation(self) -> None:
        """Open the conversation panel in the left column, sharing its height with the library."""
        dock = self.conversation_dock
        if not dock.isVisible():
            dock.show()
            h = self.side.height()
            self.side.setSizes([h - h // 2, h // 2])

    def _record_turn(self, st: QueryState) -> None:
        from rag_desktop.core.conversation import Turn

        conv = self.conversation_panel.conversation.add(Turn(st.typed or st.question, st.question))
        self._save_conversation(conv)

    def _record_answer(self, st: QueryState, m: str, answer: Answer) -> None:
        """The thread keeps the causal column's answer (the baseline's when there is none)."""
        if m not in ("causal", "baseline") or (m == "baseline" and "causal" in st.answers):
            return
        turns = self.conversation_panel.conversation.turns
        if turns and turns[-1].standalone == st.question:
            self._save_conversation(self.conversation_panel.conversation.with_answer(answer.text))

    def _save_conversation(self, conv: Any) -> None:
        self.conversation_panel.set_conversation(conv)
        try:
            self.service.save_conversation(conv)
        except OSError as exc:
            self.statusBar().showMessage(str(exc), 8000)

    def new_conversation(self) -> None:
        from rag_desktop.core.conversation import Conversation

        self.conversation_panel.clear_proposal()
        self._save_conversation(Conversation())

    def choose_conversation_export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, tr("conv.export_title"), "conversation.md", "Markdown (*.md)")
        if path:
            self.export_conversation(Path(path))

    def export_conversation(self, path: Path) -> Path:
        name = Path(self.service.library.folder).name or "library"
        path.write_text(self.conversation_panel.conversation.to_markdown(f"{tr('conv.title')} — {name}"),
                        encoding="utf-8")
        self.statusBar().showMessage(tr("conv.exported", path=str(path)), 8000)
        return path
