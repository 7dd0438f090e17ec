"""The one bridge between the service's long operations and Qt (docs/architecture.md, "Data flow").

A task is a function of a :class:`TaskContext` that either returns a value or returns a
generator of events. The bridge runs it on a worker thread and turns each event into a
Qt signal delivered on the GUI thread:

* :class:`~rag_desktop.core.types.Progress` → ``progress``
* :class:`~rag_desktop.core.types.GenEvent` tokens → ``token`` (``DONE`` is dropped: the
  final Answer follows it)
* anything else (IngestReport, Answer, Comparison, CFResult, …) → ``result``
* a :class:`~rag_desktop.core.types.Cancelled` (or a set token at the end) → ``cancelled``
* any other exception → ``failed`` with a :class:`UserError` worded for a person, while
  the traceback goes to the log — this module is the one place that translation happens.

``finished`` is always the last signal of a task.

Service tasks share ONE worker thread (``TaskRunner(serial=True)``): the catalog is one
SQLite connection and the generator one llama.cpp context, so running two service
operations at once would race; queued tasks simply wait their turn, and cancelling
sets every queued task's token so the queue drains at once. A *background* task (the
question's prompt read while it is typed, app.read_ahead) is work nobody waits for: it
does not make the runner busy, and any other task submitted stops it.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.types import Cancelled, CancelToken, GenEvent, GenEventKind, Progress
from rag_desktop.ui.i18n import tr

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UserError:
    """An error as the user sees it: what happened, what to do next; ``detail`` is for the log."""

    task: str
    message: str
    hint: str
    detail: str

    def text(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message


def _log_path_hint() -> str:
    from rag_desktop.ui.logs import log_file

    return str(log_file())


# The message and hint keys (ui/i18n.py) of each kind of RagError. A kind not listed here
# (download, internal) is worded by its builtin base below, as any other exception.
_KIND_KEYS: dict[ErrorKind, tuple[str, str]] = {
    ErrorKind.MISSING_DEPENDENCY: ("err.missing_dependency", "err.hint.install"),
    ErrorKind.MODEL: ("err.model_unavailable", "err.hint.models"),
    ErrorKind.SETTINGS: ("err.settings", "err.hint.settings"),
    ErrorKind.EMBEDDER_MISMATCH: ("err.embedder_mismatch", "err.hint.embedder_mismatch"),
    ErrorKind.LIBRARY: ("err.catalog", "err.hint.catalog"),
    ErrorKind.PROMPT_TOO_LONG: ("err.prompt_too_long", "err.hint.prompt_too_long"),
    ErrorKind.DOCUMENT: ("err.unreadable", "err.hint.unreadable"),
    ErrorKind.ENDPOINT: ("err.connection", "err.hint.connection"),
    ErrorKind.USER_INPUT: ("err.value", "err.hint.value"),
    ErrorKind.DATA: ("err.value", "err.hint.value"),
}


def describe_error(exc: BaseException) -> tuple[str, str]:
    """(message, what to do next) for an exception, in the current UI language.

    Lower layers already word their messages for a person (they name the file or the
    key and the reason), so the message keeps ``str(exc)`` and adds the kind of problem;
    the hint is the next step. A :class:`RagError` is dispatched on its ``kind`` (never on
    its class name); other exceptions on their builtin type.
    """
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, RagError) and exc.kind in _KIND_KEYS:
        message_key, hint_key = _KIND_KEYS[exc.kind]
        return tr(message_key, detail=text), tr(hint_key)
    return _describe_builtin(exc, text)


def _describe_builtin(exc: BaseException, text: str) -> tuple[str, str]:
    if isinstance(exc, MemoryError):
        return tr("err.memory"), tr("err.hint.memory")
    if isinstance(exc, ConnectionError | TimeoutError):
        return tr("err.connection", detail=text), tr("err.hint.connection")
    if isinstance(exc, PermissionError):
        return tr("err.permission", path=str(exc.filename or ""), detail=exc.strerror or text), \
            tr("err.hint.permission")
    if isinstance(exc, FileNotFoundError):
        return tr("err.not_found", path=str(exc.filename or ""), detail=exc.strerror or text), \
            tr("err.hint.not_found")
    if isinstance(exc, OSError):
        return tr("err.os", detail=text), tr("err.hint.os")
    if isinstance(exc, ValueError):
        return tr("err.value", detail=text), tr("err.hint.value")
    return tr("err.unexpected", kind=type(exc).__name__, detail=text), tr("err.hint.unexpected", log=_log_path_hint())


class TaskContext:
    """What a task function receives: the cancel token. Events are yielded, never pushed:
    a task that reports progress is a generator (like ``RagService.ingest`` / ``cfrag``)."""

    def __init__(self, cancel: CancelToken) -> None:
        self.cancel = cancel


TaskFn = Callable[[TaskContext], Any]


class TaskSignals(QObject):
    progress = Signal(object)
    token = Signal(str)
    result = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    finished = Signal()


class Task(QRunnable):
    """One unit of long work; its signals object lives on the GUI thread."""

    def __init__(self, name: str, fn: TaskFn) -> None:
        super().__init__()
        self.setAutoDelete(False)  # Python owns it: the runner drops it after ``finished``
        self.name = name
        self.fn = fn
        self.cancel = CancelToken()
        self.signals = TaskSignals()
        self.done = False
        self.background = False  # TaskRunner.submit(background=True)

    def _dispatch(self, event: object) -> None:
        if isinstance(event, Progress):
            self.signals.progress.emit(event)
        elif isinstance(event, GenEvent):
            if event.kind == GenEventKind.TOKEN and event.text:
                self.signals.token.emit(event.text)
        else:
            self.signals.result.emit(event)

    def run(self) -> None:  # worker thread
        try:
            self.cancel.raise_if_set()  # cancelled while still queued
            ctx = TaskContext(self.cancel)
            out = self.fn(ctx)
            if isinstance(out, Iterator):
                for event in out:
                    self._dispatch(event)
            elif out is not None:
                self.signals.result.emit(out)
            if self.cancel.is_set:
                self.signals.cancelled.emit()
        except Cancelled:
            self.signals.cancelled.emit()
        except BaseException as exc:  # every failure reaches the user once, readable
            if self.cancel.is_set and not isinstance(exc, MemoryError):
                # Stopping a model mid-call can surface as the library's own error; the
                # user asked for the stop, so it is a cancellation, not a failure.
                log.info("task %s stopped with %s after cancel", self.name, type(exc).__name__)
                self.signals.cancelled.emit()
            else:
                log.error("task %s failed", self.name, exc_info=exc)
                message, hint = describe_error(exc)
                detail = "".join(traceback.format_exception(exc))
                self.signals.failed.emit(UserError(self.name, message, hint, detail))
        finally:
            self.signals.finished.emit()


class TaskRunner(QObject):
    """Submits tasks to a private thread pool and keeps them alive until they finish.

    ``serial=True`` (service work) runs one task at a time in submission order.
    """

    busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None, serial: bool = True) -> None:
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1 if serial else max(2, QThreadPool.globalInstance().maxThreadCount()))
        self._live: list[Task] = []

    def submit(
        self,
        name: str,
        fn: TaskFn,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        on_token: Callable[[str], None] | None = None,
        on_result: Callable[[Any], None] | None = None,
        on_error: Callable[[UserError], None] | None = None,
        on_cancelled: Callable[[], None] | None = None,
        on_finished: Callable[[], None] | None = None,
        background: bool = False,
    ) -> Task:
        """Queue ``fn``. A ``background`` task leaves :attr:`busy` as it is, and is stopped (its token set)
        by any task submitted after it that is not one: what a person asked for never waits behind it."""
        task = Task(name, fn)
        task.background = background
        if not background:
            for t in self._live:
                if t.background:
                    t.cancel.set()
        s = task.signals
        if on_progress is not None:
            s.progress.connect(on_progress)
        if on_token is not None:
            s.token.connect(on_token)
        if on_result is not None:
            s.result.connect(on_result)
        if on_error is not None:
            s.failed.connect(on_error)
        if on_cancelled is not None:
            s.cancelled.connect(on_cancelled)
        if on_finished is not None:
            s.finished.connect(on_finished)
        s.finished.connect(lambda t=task: self._retire(t))
        was_busy = self.busy
        self._live.append(task)
        self.pool.start(task)
        if not was_busy and self.busy:
            self.busy_changed.emit(True)
        return task

    def _retire(self, task: Task) -> None:
        task.done = True
        was_busy = self.busy
        if task in self._live:
            self._live.remove(task)
        if was_busy and not self.busy:
            self.busy_changed.emit(False)

    def adopt(self, task: Task) -> None:
        """``task``, a background one, is now waited for: it keeps the runner busy, and the tasks submitted
        after it queue behind it instead of stopping it."""
        was_busy = self.busy
        task.background = False
        if not was_busy and self.busy:
            self.busy_changed.emit(True)

    @property
    def busy(self) -> bool:
        """Whether a task that is not a background one is queued or running."""
        return any(not t.background for t in self._live)

    def tasks(self) -> list[Task]:
        return list(self._live)

    def cancel_all(self) -> int:
        """Set every live task's token; returns how many were asked to stop."""
        for t in self._live:
            t.cancel.set()
        return len(self._live)

    def cancel(self, name_prefix: str) -> int:
        n = 0
        for t in self._live:
            if t.name.startswith(name_prefix):
                t.cancel.set()
                n += 1
        return n

    def wait(self, msecs: int = -1) -> bool:
        """Block until the pool is idle (used at shutdown and in tests)."""
        return bool(self.pool.waitForDone(msecs))
