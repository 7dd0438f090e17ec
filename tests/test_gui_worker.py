"""ui/worker.py: generators become Qt signals on the GUI thread; errors become readable messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rag_desktop.backends.errors import MissingDependency, ModelUnavailable
from rag_desktop.core.settings import SettingsError
from rag_desktop.core.types import Answer, Cancelled, GenEvent, GenEventKind, Progress
from rag_desktop.ui import i18n
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError, describe_error

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def _english() -> None:
    i18n.set_language("en")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.threads: set[bool] = set()
        self.main = threading.get_ident()

    def cb(self, name: str) -> Any:
        def f(*args: Any) -> None:
            self.threads.add(threading.get_ident() == self.main)
            self.events.append((name, args[0] if args else None))
        return f

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    def hooks(self) -> dict[str, Any]:
        return {f"on_{n}": self.cb(n) for n in ("progress", "token", "result", "error", "cancelled", "finished")}


def test_events_arrive_in_order_on_the_gui_thread(qtbot: Any) -> None:
    runner = TaskRunner(serial=True)
    rec = Recorder()
    worker_threads: list[int] = []

    def job(ctx: TaskContext) -> Iterator[object]:
        worker_threads.append(threading.get_ident())
        yield Progress("scan", 1, 2, "a")
        yield GenEvent(GenEventKind.TOKEN, "Hello ")
        yield GenEvent(GenEventKind.TOKEN, "world")
        yield GenEvent(GenEventKind.DONE, finish_reason="stop")
        yield Answer("Hello world")

    runner.submit("t", job, **rec.hooks())
    qtbot.waitUntil(lambda: "finished" in rec.kinds(), timeout=5000)
    assert rec.kinds() == ["progress", "token", "token", "result", "finished"]
    assert [v for k, v in rec.events if k == "token"] == ["Hello ", "world"]
    assert rec.threads == {True}  # every callback on the GUI thread
    assert worker_threads and worker_threads[0] != rec.main  # the work itself was not
    assert not runner.busy


def test_a_plain_return_value(qtbot: Any) -> None:
    # Progress is yielded, never pushed (TaskContext.emit went with RagService.cfrag's callback).
    runner = TaskRunner()
    rec = Recorder()

    def job(ctx: TaskContext) -> int:
        return 42

    runner.submit("t", job, **rec.hooks())
    qtbot.waitUntil(lambda: "finished" in rec.kinds(), timeout=5000)
    assert rec.kinds() == ["result", "finished"]
    assert rec.events[0] == ("result", 42)


def test_exceptions_become_one_readable_message_with_a_next_step(qtbot: Any, caplog: Any) -> None:
    runner = TaskRunner()
    rec = Recorder()

    def job(ctx: TaskContext) -> Iterator[object]:
        yield Progress("embed", 1, 1)
        raise ModelUnavailable("the generator model file /x/model.gguf does not exist; choose a GGUF file")

    runner.submit("answer.causal", job, **rec.hooks())
    qtbot.waitUntil(lambda: "finished" in rec.kinds(), timeout=5000)
    assert rec.kinds() == ["progress", "error", "finished"]
    err = rec.events[1][1]
    assert isinstance(err, UserError)
    assert "/x/model.gguf" in err.message and "Settings" in err.hint
    assert "Traceback" in err.detail and "ModelUnavailable" in err.detail
    assert any("answer.causal" in r.getMessage() for r in caplog.records)  # the detail went to the log


@pytest.mark.parametrize("exc,needle_msg,needle_hint", [
    (MissingDependency("faiss", "Searching", "faiss-cpu"), "faiss", "Install"),
    (SettingsError("invalid setting retrieval.k: must be >= 1"), "retrieval.k", "Settings"),
    (PermissionError(13, "Permission denied", "/lib/catalog.sqlite"), "/lib/catalog.sqlite", "permission"),
    (FileNotFoundError(2, "No such file", "/docs/a.pdf"), "/docs/a.pdf", "Re-scan"),
    (ConnectionError("refused"), "refused", "server"),
    (ValueError("the question is empty"), "the question is empty", "Check"),
    (KeyError("boom"), "KeyError", "log"),
])
def test_describe_error_covers_the_usual_failures(exc: BaseException, needle_msg: str, needle_hint: str) -> None:
    msg, hint = describe_error(exc)
    assert needle_msg in msg
    assert needle_hint in hint
    i18n.set_language("zh")
    msg_zh, hint_zh = describe_error(exc)
    assert msg_zh != msg and hint_zh != hint


def test_cancel_stops_a_running_generator_and_drains_the_queue(qtbot: Any) -> None:
    runner = TaskRunner(serial=True)
    first, second = Recorder(), Recorder()
    started = threading.Event()
    produced: list[int] = []

    def slow(ctx: TaskContext) -> Iterator[object]:
        for i in range(200):
            started.set()
            ctx.cancel.raise_if_set()
            produced.append(i)
            time.sleep(0.01)
            yield Progress("embed", i, 200)

    def never(ctx: TaskContext) -> str:
        raise AssertionError("a cancelled queued task must not run")

    runner.submit("ingest", slow, **first.hooks())
    runner.submit("query.1.answer", never, **second.hooks())
    assert started.wait(5)
    assert runner.cancel_all() == 2
    qtbot.waitUntil(lambda: "finished" in first.kinds() and "finished" in second.kinds(), timeout=5000)
    assert first.kinds()[-2:] == ["cancelled", "finished"]
    assert "error" not in first.kinds()
    assert second.kinds() == ["cancelled", "finished"]
    assert len(produced) < 200


def test_cancel_by_prefix_leaves_other_tasks_alone(qtbot: Any) -> None:
    runner = TaskRunner(serial=True)
    a, b = Recorder(), Recorder()
    gate = threading.Event()
    runner.submit("ingest", lambda ctx: gate.wait(5) and "done", **a.hooks())
    runner.submit("query.7.cfrag", lambda ctx: "never", **b.hooks())
    assert runner.cancel("query.7") == 1
    gate.set()
    qtbot.waitUntil(lambda: "finished" in b.kinds(), timeout=5000)
    assert a.events[0] == ("result", "done")
    assert b.kinds() == ["cancelled", "finished"]


def test_an_error_after_cancel_counts_as_a_stop(qtbot: Any) -> None:
    runner = TaskRunner()
    rec = Recorder()
    go = threading.Event()

    def job(ctx: TaskContext) -> None:
        go.wait(5)
        raise RuntimeError("llama_decode returned -1")  # what a model may say when interrupted

    task = runner.submit("answer", job, **rec.hooks())
    task.cancel.set()
    go.set()
    qtbot.waitUntil(lambda: "finished" in rec.kinds(), timeout=5000)
    assert rec.kinds() == ["cancelled", "finished"]


def test_cancelled_exception_is_not_an_error(qtbot: Any) -> None:
    runner = TaskRunner()
    rec = Recorder()

    def job(ctx: TaskContext) -> None:
        raise Cancelled()

    runner.submit("x", job, **rec.hooks())
    qtbot.waitUntil(lambda: "finished" in rec.kinds(), timeout=5000)
    assert rec.kinds() == ["cancelled", "finished"]


def test_busy_changes_once_per_burst(qtbot: Any) -> None:
    runner = TaskRunner(serial=True)
    seen: list[bool] = []
    runner.busy_changed.connect(seen.append)
    for _ in range(3):
        runner.submit("x", lambda ctx: None)
    qtbot.waitUntil(lambda: seen == [True, False], timeout=5000)


def test_a_background_task_is_not_busy_and_gives_way_to_any_other(qtbot: Any) -> None:
    runner = TaskRunner(serial=True)
    seen: list[bool] = []
    runner.busy_changed.connect(seen.append)
    started = threading.Event()
    rec = Recorder()

    def ahead(ctx: TaskContext) -> str:
        started.set()
        while not ctx.cancel.is_set:
            time.sleep(0.01)
        return "stopped"

    runner.submit("read_ahead", ahead, background=True, **rec.hooks())
    assert started.wait(5) and not runner.busy and seen == []
    runner.submit("x", lambda ctx: "asked")
    qtbot.waitUntil(lambda: seen == [True, False], timeout=5000)
    assert "cancelled" in rec.kinds()


def test_an_adopted_background_task_is_busy_and_the_next_task_waits_for_it(qtbot: Any) -> None:
    runner = TaskRunner(serial=True)
    seen: list[bool] = []
    runner.busy_changed.connect(seen.append)
    release = threading.Event()
    order: list[str] = []

    def ahead(ctx: TaskContext) -> None:
        release.wait(5)
        order.append("cancelled" if ctx.cancel.is_set else "read ahead")

    task = runner.submit("read_ahead", ahead, background=True)
    runner.adopt(task)
    assert runner.busy and seen == [True]
    runner.submit("x", lambda ctx: order.append("asked"))
    release.set()
    qtbot.waitUntil(lambda: seen == [True, False], timeout=5000)
    assert order == ["read ahead", "asked"]


def test_describe_error_dispatches_on_the_kind_of_each_rag_error() -> None:
    """By kind (isinstance of the family), not by class name."""
    from rag_desktop.app.catalog import CatalogError
    from rag_desktop.app.library import EmbedderMismatch
    from rag_desktop.backends.http_client import EndpointError
    from rag_desktop.backends.readers import UnreadableDocument
    from rag_desktop.core.errors import ErrorKind, RagError, UserInputError
    from rag_desktop.core.prompting import PromptTooLong

    cases: list[tuple[BaseException, str, str]] = [
        (MissingDependency("faiss", "Searching", "faiss-cpu"), "err.missing_dependency", "err.hint.install"),
        (ModelUnavailable("no model"), "err.model_unavailable", "err.hint.models"),
        (SettingsError("retrieval.k"), "err.settings", "err.hint.settings"),
        (EmbedderMismatch("other embedder"), "err.embedder_mismatch", "err.hint.embedder_mismatch"),
        (CatalogError("busy"), "err.catalog", "err.hint.catalog"),
        (PromptTooLong("9000 tokens"), "err.prompt_too_long", "err.hint.prompt_too_long"),
        (UnreadableDocument("a.pdf", "broken"), "err.unreadable", "err.hint.unreadable"),
        (EndpointError("refused", "http://h:1"), "err.connection", "err.hint.connection"),
        (UserInputError("empty"), "err.value", "err.hint.value"),
        (RagError("odd", kind=ErrorKind.DATA), "err.value", "err.hint.value"),
    ]
    for exc, msg_key, hint_key in cases:
        assert describe_error(exc) == (i18n.tr(msg_key, detail=str(exc)), i18n.tr(hint_key)), exc

    class Renamed(CatalogError):  # a class name the old name-matching did not know
        pass

    assert describe_error(Renamed("busy"))[0] == i18n.tr("err.catalog", detail="busy")
    internal = RagError("a bug")
    assert "RagError" in describe_error(internal)[0]  # INTERNAL: worded as unexpected, with the log
