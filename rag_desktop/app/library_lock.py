"""One writer per library: the ingest's lock file (docs/architecture.md "Storage and crash safety")."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from rag_desktop.app.catalog import CatalogError, printable

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock (see LibraryLock)
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "ingest.lock"


class LibraryLock:
    """One writer per library: an exclusive ``flock`` on ``<library>/ingest.lock``.

    Two ingests of one library (two terminals, or the desktop app and a terminal) would
    race on the same file rows (``UNIQUE constraint failed: documents.path``) and write
    the FAISS caches over each other. The second one is refused at once with the holder's
    pid instead of waiting behind an ingest that may take an hour. The kernel drops the
    lock when the holder exits, even after kill -9, so a stale lock cannot block anyone;
    the file itself stays (unlinking a flock file races with the next opener) and only
    says who holds it. Where ``fcntl`` does not exist (Windows) there is no lock.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._fd: int | None = None

    def holder(self) -> str:
        """What the lock file says about its holder ("pid 123: rag-desktop ingest ..."), or ''."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return ""
        return text.splitlines()[0] if text else ""

    def acquire(self) -> None:
        """Take the lock or raise :class:`CatalogError` naming the process that holds it."""
        if fcntl is None or self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise CatalogError(f"cannot create {printable(self.path)}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            who = self.holder() or "another process"
            raise CatalogError(
                f"the library {printable(self.path.parent)} is busy: an ingest is already writing to it "
                f"(held by {who}). Wait for it to finish (or stop it), then run this again."
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}: {_command_line()}\n".encode("utf-8", "replace"))
        except OSError:
            pass  # the lock holds even if the note about its holder cannot be written (disk full)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None or fcntl is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _command_line() -> str:
    """A one-line description of this process for the lock file (the program and its arguments)."""
    args = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    line = " ".join(args)
    return (line[:200] + "…") if len(line) > 200 else line
