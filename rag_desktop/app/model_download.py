"""One model download as a task the UI's worker runs: Progress events, then an outcome.

:func:`download` runs :func:`rag_desktop.app.fetch.fetch_model` — the one downloader, with its
per-file resume, checksums and staging folder — on a helper thread and yields what it reports as
:class:`~rag_desktop.core.types.Progress` (bytes on disk of the whole model, with an ETA from this
session's throughput), then a :class:`DownloadDone` or a :class:`DownloadFailed` that says which
failure it was, so the page words it in the person's language. A cancel (the token, or the
consumer closing the generator) stops the transfer mid-file and raises
:class:`~rag_desktop.core.types.Cancelled`; the partial file stays for the next Download to resume.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rag_desktop.app.fetch import (
    STAGING_DIR,
    ChecksumError,
    FetchError,
    FetchResult,
    InterruptedDownload,
    ModelSource,
    OfflineError,
    Role,
    fetch_model,
)
from rag_desktop.core.types import Cancelled, CancelToken, Progress

STAGE = "download_model"
POLL_S = 0.1

Reason = Literal["offline", "interrupted", "checksum", "hub"]


@dataclass(frozen=True)
class DownloadDone:
    role: Role
    path: Path
    bytes: int
    reused: bool  # already there and verified: nothing was downloaded


@dataclass(frozen=True)
class DownloadFailed:
    role: Role
    reason: Reason
    detail: str  # fetch's own message: names the file, the endpoint and the reason
    kept_bytes: int  # what stays under the staging folder for the next Download to resume


# Each failure fetch tells apart, by its class; any other FetchError is the hub's.
_REASONS: tuple[tuple[type[FetchError], Reason], ...] = (
    (OfflineError, "offline"), (InterruptedDownload, "interrupted"), (ChecksumError, "checksum"))


def _reason(exc: FetchError) -> Reason:
    return next((reason for kind, reason in _REASONS if isinstance(exc, kind)), "hub")


def kept_bytes(source: ModelSource, dest: Path) -> int:
    """Bytes of an unfinished download of ``source`` under ``dest`` (what a resume starts from)."""
    staging = dest / STAGING_DIR / source.target
    if not staging.is_dir():
        return 0
    return sum(p.stat().st_size for p in staging.rglob("*")
               if p.is_file() and (p.suffix == ".incomplete" or ".cache" not in p.parts))


class _Eta:
    """Remaining seconds from the throughput since the first report (a resumed download's
    earlier bytes are not counted as speed)."""

    def __init__(self) -> None:
        self.start: tuple[float, int] | None = None

    def __call__(self, done: int, total: int) -> float | None:
        now = time.monotonic()
        if self.start is None:
            self.start = (now, done)
            return None
        t0, d0 = self.start
        if done <= d0 or now <= t0:
            return None
        return (total - done) * (now - t0) / (done - d0)


def download(source: ModelSource, dest: Path, *, endpoint: str | None = None, cancel: CancelToken | None = None,
             cache_dir: Path | None = None, max_attempts: int = 5,
             retry_wait: float = 2.0) -> Iterator[Progress | DownloadDone | DownloadFailed]:
    """Fetch ``source`` into ``dest`` (the person asked: the network is allowed for this call)."""
    events: queue.Queue[tuple[int, int] | FetchResult | BaseException] = queue.Queue()
    stop = CancelToken()  # ours, so closing this generator stops the transfer too

    def run() -> None:
        try:
            events.put(fetch_model(source, dest, endpoint=endpoint, cache_dir=cache_dir, max_attempts=max_attempts,
                                   retry_wait=retry_wait, progress=lambda d, t: events.put((d, t)), cancel=stop,
                                   allow_network=True))
        except BaseException as exc:  # handed to the consumer's thread, raised or worded there
            events.put(exc)

    worker = threading.Thread(target=run, name=f"download-{source.role}", daemon=True)
    eta = _Eta()
    name = source.repo_id
    final = str(dest / source.target)
    yield Progress(STAGE, kept_bytes(source, dest), source.approx_bytes, name, None, final)
    worker.start()
    try:
        while True:
            if cancel is not None and cancel.is_set:
                stop.set()
            try:
                item = events.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if isinstance(item, tuple):
                done, total = item
                yield Progress(STAGE, done, total, name, eta(done, total), final)
            elif isinstance(item, FetchResult):
                yield DownloadDone(source.role, item.path, item.bytes, item.reused)
                return
            elif isinstance(item, Cancelled):
                raise Cancelled()
            elif isinstance(item, FetchError):
                yield DownloadFailed(source.role, _reason(item), str(item), kept_bytes(source, dest))
                return
            else:
                raise item
    finally:
        stop.set()
        worker.join()
