"""Watched folders with real file operations: create, modify, rename, delete, a burst of 200
files, a folder that disappears and comes back; and a library that follows the edits."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.app.watcher import FolderWatcher
from rag_desktop.core.settings import Settings


class Calls:
    def __init__(self) -> None:
        self.calls: list[frozenset[Path]] = []
        self.event = threading.Event()

    def __call__(self, roots: frozenset[Path]) -> None:
        self.calls.append(roots)
        self.event.set()

    def wait(self, timeout: float = 15.0) -> frozenset[Path]:
        assert self.event.wait(timeout), "no change reported"
        self.event.clear()
        return self.calls[-1]

    def quiet(self, seconds: float) -> bool:
        return not self.event.wait(seconds)


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[FolderWatcher, Calls, Path]]:
    root = tmp_path / "docs"
    root.mkdir()
    calls = Calls()
    w = FolderWatcher(calls, debounce_s=0.4, recheck_s=0.3, ignore=[root / "library"])
    w.start([root])
    time.sleep(0.2)
    yield w, calls, root
    w.stop()


def test_create_modify_rename_delete_each_report_the_root(watched: tuple[FolderWatcher, Calls, Path]) -> None:
    _, calls, root = watched
    f = root / "a.txt"
    f.write_text("one", encoding="utf-8")
    assert calls.wait() == {root}
    with f.open("a", encoding="utf-8") as fh:
        fh.write(" two")
    assert calls.wait() == {root}
    f.rename(root / "b.txt")
    assert calls.wait() == {root}
    (root / "b.txt").unlink()
    assert calls.wait() == {root}
    sub = root / "sub"
    sub.mkdir()
    (sub / "deep.md").write_text("# deep", encoding="utf-8")
    assert calls.wait() == {root}  # recursive


def test_irrelevant_files_are_ignored(watched: tuple[FolderWatcher, Calls, Path]) -> None:
    _, calls, root = watched
    (root / ".hidden.txt").write_text("x", encoding="utf-8")
    (root / "~$lock.docx").write_text("x", encoding="utf-8")
    (root / "data.xyz").write_text("x", encoding="utf-8")
    (root / "library").mkdir()  # the library's own folder inside a watched folder...
    (root / "library" / "notes.txt").write_text("x", encoding="utf-8")  # ...is not watched
    # Only the creation of the library folder itself counted (a folder event), nothing inside it.
    calls.wait()
    calls.calls.clear()
    (root / "library" / "more.txt").write_text("x", encoding="utf-8")
    assert calls.quiet(1.2), calls.calls


def test_a_burst_of_200_files_is_one_change(watched: tuple[FolderWatcher, Calls, Path]) -> None:
    w, calls, root = watched
    for i in range(200):
        (root / f"f{i:03d}.txt").write_text(f"file {i}", encoding="utf-8")
    assert calls.wait() == {root}
    assert calls.quiet(1.0) and len(calls.calls) == 1
    assert w.events_seen >= 200


def test_a_long_burst_still_reports_within_max_wait(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    calls = Calls()
    w = FolderWatcher(calls, debounce_s=0.5, max_wait_s=1.0, recheck_s=5)
    w.start([root])
    try:
        t0 = time.monotonic()
        i = 0
        while not calls.event.is_set() and time.monotonic() - t0 < 5:
            (root / f"f{i}.txt").write_text("x", encoding="utf-8")  # every 0.1 s: never quiet for 0.5 s
            i += 1
            time.sleep(0.1)
        assert calls.event.is_set() and time.monotonic() - t0 < 3
    finally:
        w.stop()


def test_a_folder_that_disappears_and_comes_back(watched: tuple[FolderWatcher, Calls, Path]) -> None:
    w, calls, root = watched
    (root / "a.txt").write_text("x", encoding="utf-8")
    calls.wait()
    shutil.rmtree(root)
    deadline = time.monotonic() + 5
    while root not in w.missing and time.monotonic() < deadline:
        time.sleep(0.05)
    assert w.missing == (root,) and w.watching == ()
    assert all(root not in c for c in calls.calls[1:])  # a missing folder is never handed on
    root.mkdir()
    (root / "back.txt").write_text("x", encoding="utf-8")
    assert calls.wait() == {root}
    assert w.missing == () and w.watching == (root,)
    (root / "again.txt").write_text("x", encoding="utf-8")  # watched again, not only re-found
    assert calls.wait() == {root}


def test_a_root_missing_from_the_start_is_picked_up_later(tmp_path: Path) -> None:
    root = tmp_path / "usb"
    calls = Calls()
    w = FolderWatcher(calls, debounce_s=0.3, recheck_s=0.2)
    w.start([root])
    try:
        assert w.missing == (root,)
        root.mkdir()
        assert calls.wait() == {root}
        w.set_roots([])
        assert w.watching == () and w.missing == ()
    finally:
        w.stop()


def test_polling_observer_for_network_drives(tmp_path: Path) -> None:
    root = tmp_path / "share"
    root.mkdir()
    calls = Calls()
    w = FolderWatcher(calls, debounce_s=0.3, poll_s=0.3)
    w.start([root])
    try:
        time.sleep(0.5)
        (root / "x.md").write_text("# x", encoding="utf-8")
        assert calls.wait() == {root}
    finally:
        w.stop()


@pytest.mark.slow
def test_a_watched_library_follows_edits(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "tea.txt").write_text("Green tea is steamed soon after picking.", encoding="utf-8")
    svc = RagService(tmp_path / "library", Settings())
    reports: list[IngestReport] = []
    done = threading.Event()

    def reingest(roots: frozenset[Path]) -> None:
        for ev in svc.ingest(sorted(roots)):
            if isinstance(ev, IngestReport):
                reports.append(ev)
        done.set()

    def wait_report() -> IngestReport:
        assert done.wait(60), "no re-ingest"
        done.clear()
        return reports[-1]

    list(svc.ingest([root]))
    w = FolderWatcher(reingest, debounce_s=0.5, recheck_s=0.5)
    w.start([root])
    try:
        time.sleep(0.2)
        (root / "bikes.txt").write_text("A bicycle chain must be greased every ninety days.", encoding="utf-8")
        assert [Path(p).name for p in wait_report().added] == ["bikes.txt"]
        time.sleep(0.05)
        (root / "bikes.txt").write_text("A bicycle chain must be oiled every thirty days.", encoding="utf-8")
        assert [Path(p).name for p in wait_report().updated] == ["bikes.txt"]
        assert "oiled" in svc.compare("bicycle chain", level="doc", k=2).baseline.hits[0].text
        os.rename(root / "tea.txt", root / "green-tea.txt")
        r = wait_report()
        assert [Path(p).name for p in r.added] == ["green-tea.txt"] and [Path(p).name for p in r.removed] == ["tea.txt"]
        for i in range(200):
            (root / f"note{i:03d}.txt").write_text(f"Note {i}: the meeting room {i} is booked.", encoding="utf-8")
        n_before = len(reports)
        r = wait_report()
        time.sleep(1.5)  # the burst may split in two debounced runs at most; the library ends complete
        assert len(reports) - n_before <= 2
        assert len(svc.library.catalog.documents()) == 202
        (root / "bikes.txt").unlink()
        r = wait_report()
        assert [Path(p).name for p in r.removed] == ["bikes.txt"]
    finally:
        w.stop()
        svc.close()
