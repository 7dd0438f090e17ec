"""Folders that stay current: watch a library's folders and say when to re-ingest them.

Why ``watchdog`` in ``app`` rather than Qt's ``QFileSystemWatcher`` in ``ui``: watchdog
watches a tree recursively with one native watch per OS mechanism (inotify, FSEvents,
ReadDirectoryChangesW) and tells which path changed; QFileSystemWatcher needs one watch
per sub-folder (inotify's per-user limit is 8,192 by default on many systems) and reports
only "this folder changed". Keeping it out of ``ui`` also lets the CLI and tests use it
without an event loop. For network drives, where the OS delivers no change events for
edits made on other machines, ``poll_s > 0`` uses watchdog's polling observer instead.

Behaviour:

* Events for hidden files, Office lock files, unsupported types and anything under
  ``ignore`` (the library's own folder, if it lies inside a watched folder) are dropped;
  folder events always count (a folder of documents moved in or out).
* Debounce: ``on_change(roots)`` is called once the watched folders have been quiet for
  ``debounce_s`` (a burst of 200 files is one call), and at the latest ``max_wait_s`` after
  the first event of a burst (a long copy still gets ingested while it goes on).
* A folder that disappears (unplugged disk, network drive gone, deleted) is dropped from
  the watch without an error and reported in :attr:`FolderWatcher.missing`; it is never
  passed to ``on_change`` while missing — an ingest of a missing folder would drop its
  documents from the library. A supervisor re-checks every ``recheck_s`` seconds; when the
  folder is back it is watched again and ``on_change`` is called for it (changes made
  while it was away are caught up by the incremental ingest).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rag_desktop.backends.errors import require
from rag_desktop.backends.readers import is_readable_name

log = logging.getLogger(__name__)

ChangeCallback = Callable[[frozenset[Path]], None]


class FolderWatcher:
    """Watches folders recursively; calls ``on_change(roots)`` (from a worker thread) after changes."""

    def __init__(
        self,
        on_change: ChangeCallback,
        *,
        debounce_s: float = 2.0,
        max_wait_s: float = 30.0,
        recheck_s: float = 5.0,
        poll_s: float = 0.0,
        ignore: Iterable[Path] = (),
    ) -> None:
        self._on_change = on_change
        self.debounce_s = debounce_s
        self.max_wait_s = max_wait_s
        self.recheck_s = recheck_s
        self.poll_s = poll_s
        self._ignore = tuple(Path(os.path.abspath(p)) for p in ignore)
        self._roots: tuple[Path, ...] = ()
        self._watches: dict[Path, Any] = {}  # root → watchdog ObservedWatch
        self._missing: set[Path] = set()
        self._pending: set[Path] = set()
        self._first_event = 0.0
        self._last_event = 0.0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._check_now = threading.Event()
        self._stop = threading.Event()
        self._observer: Any = None
        self._thread: threading.Thread | None = None
        self.events_seen = 0  # events that counted (tests, the log)

    # ------------------------------------------------------------------ public
    @property
    def roots(self) -> tuple[Path, ...]:
        return self._roots

    @property
    def missing(self) -> tuple[Path, ...]:
        with self._lock:
            return tuple(sorted(self._missing))

    @property
    def watching(self) -> tuple[Path, ...]:
        with self._lock:
            return tuple(sorted(self._watches))

    def start(self, roots: Sequence[Path]) -> None:
        """Start watching ``roots`` (idempotent; a second call replaces the set)."""
        if self._observer is None:
            obs_mod: Any = require("watchdog.observers", "Watching library folders", "watchdog")
            if self.poll_s > 0:
                polling: Any = require("watchdog.observers.polling", "Watching library folders", "watchdog")
                self._observer = polling.PollingObserver(timeout=self.poll_s)
            else:
                self._observer = obs_mod.Observer()
            self._observer.daemon = True
            self._observer.start()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="folder-watcher", daemon=True)
            self._thread.start()
        self.set_roots(roots)

    def set_roots(self, roots: Sequence[Path]) -> None:
        new = tuple(dict.fromkeys(Path(os.path.abspath(r)) for r in roots))
        with self._lock:
            for root in [r for r in self._watches if r not in new]:
                self._unschedule(root)
            self._missing &= set(new)
            self._roots = new
        for root in new:
            self._ensure_watched(root, announce=False)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        with self._lock:
            self._watches.clear()

    # ------------------------------------------------------------------ watches
    def _unschedule(self, root: Path) -> None:
        watch = self._watches.pop(root, None)
        if watch is not None and self._observer is not None:
            with contextlib.suppress(KeyError, OSError, ValueError):  # its emitter died with the folder
                self._observer.unschedule(watch)

    def _ensure_watched(self, root: Path, announce: bool) -> None:
        """Watch ``root`` if it exists and is not watched; mark it missing otherwise."""
        with self._lock:
            if root in self._watches or root not in self._roots or self._observer is None:
                return
            if not root.is_dir():
                self._missing.add(root)
                return
            try:
                self._watches[root] = self._observer.schedule(_Handler(self, root), os.fspath(root), recursive=True)
            except OSError as exc:  # permission denied, too many watches, vanished meanwhile
                log.warning("cannot watch %s: %s", root, exc)
                self._missing.add(root)
                return
            came_back = root in self._missing
            self._missing.discard(root)
        if announce and came_back:
            self._note(root)

    def _check_roots(self) -> None:
        for root in self._roots:
            if not root.is_dir():
                with self._lock:
                    if root not in self._missing:
                        log.info("watched folder %s disappeared", root)
                    self._unschedule(root)
                    self._missing.add(root)
                    self._pending.discard(root)
            else:
                self._ensure_watched(root, announce=True)

    # ------------------------------------------------------------------ events
    def _counts(self, path: str, is_directory: bool) -> bool:
        p = Path(path)
        if any(p == ig or ig in p.parents for ig in self._ignore):
            return False
        if p.name.startswith((".", "~$")):
            return False
        return is_directory or is_readable_name(p)

    def _note(self, root: Path) -> None:
        now = time.monotonic()
        with self._lock:
            if not self._pending:
                self._first_event = now
            self._pending.add(root)
            self._last_event = now
            self.events_seen += 1
        self._wake.set()

    def _run(self) -> None:
        next_check = time.monotonic() + self.recheck_s
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                due = None
                if self._pending:
                    due = min(self._last_event + self.debounce_s, self._first_event + self.max_wait_s)
            timeout = min(x for x in (due, next_check) if x is not None) - now
            if timeout > 0 and not self._check_now.is_set():
                self._wake.wait(timeout)
                self._wake.clear()
                continue
            if time.monotonic() >= next_check or self._check_now.is_set():
                self._check_now.clear()
                self._check_roots()
                next_check = time.monotonic() + self.recheck_s
            fire: frozenset[Path] = frozenset()
            with self._lock:
                if self._pending and due is not None and time.monotonic() >= due:
                    fire = frozenset(r for r in self._pending if r not in self._missing)
                    self._pending.clear()
            if fire:
                try:
                    self._on_change(fire)
                except Exception:  # the callback's failure must not stop the watching
                    log.exception("folder watcher callback failed")


class _Handler:
    """A watchdog event handler for one root (duck-typed: watchdog calls ``dispatch``)."""

    def __init__(self, watcher: FolderWatcher, root: Path) -> None:
        self._watcher = watcher
        self._root = root

    def dispatch(self, event: Any) -> None:
        kind = getattr(event, "event_type", "")
        if kind in ("opened", "closed_no_write"):
            return  # reads (our own ingest reading the file) change nothing
        paths = [os.fsdecode(event.src_path)]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(os.fsdecode(dest))
        if os.fsdecode(event.src_path) == os.fspath(self._root) and kind == "deleted":
            self._watcher._check_now.set()  # the root itself went: the supervisor handles it now
            self._watcher._wake.set()
            return
        if any(self._watcher._counts(p, bool(event.is_directory)) for p in paths):
            self._watcher._note(self._root)
