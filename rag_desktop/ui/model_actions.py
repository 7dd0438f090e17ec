"""The window's model chores: preparing the generator at launch, and the Models page (ui/models_page.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from PySide6.QtWidgets import QStatusBar, QWidget

from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, Progress
from rag_desktop.ui.models_page import ModelsPage
from rag_desktop.ui.present import progress_text
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError


def prepare_in_background(parent: QWidget, prepare: Callable[[CancelToken | None], Iterator[Progress]],
                          status: QStatusBar, on_error: Callable[[UserError], None]) -> TaskRunner:
    """Join/verify the embedded generator at launch on its own thread, so the first question does not
    wait for it silently; the status bar shows name, MB done and ETA. Returns the runner (its own:
    retrieval must not queue behind the join)."""
    runner = TaskRunner(parent, serial=True)

    def job(ctx: TaskContext) -> Iterator[object]:
        yield from prepare(ctx.cancel)

    runner.submit("model.prepare", job, on_error=on_error,
                  on_progress=lambda p: status.showMessage(progress_text(p), 5000 if p.stage == "model_ready" else 0))
    return runner


def show_models_page(parent: QWidget, page: ModelsPage | None, settings: Settings,
                     apply: Callable[[Settings], None]) -> ModelsPage:
    """The Models page, made once; its Use goes through ``apply`` like the settings dialog's OK."""
    if page is None:
        page = ModelsPage(settings, parent)
        page.settings_chosen.connect(apply)
    page.set_settings(settings)
    page.show()
    page.raise_()
    return page
