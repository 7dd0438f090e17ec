"""FaissIndex against a brute-force numpy reference, plus persistence and bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_desktop.backends.faiss_index import FaissIndex, ivf_nlist, ivf_nprobe
from rag_desktop.core.protocols import VectorIndex
from rag_desktop.core.settings import Settings

DIM = 16


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _random(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def _clustered(n: int, dim: int = DIM, centers: int = 20, seed: int = 0) -> np.ndarray:
    """Embedding-like data: points around a few directions (uniform noise is IVF's worst case)."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, dim))
    labels = rng.integers(0, centers, n)
    return (c[labels] + 0.35 * rng.standard_normal((n, dim))).astype(np.float32)


def reference_search(ids: np.ndarray, x: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Obviously-correct exact search: cosine = dot product of unit vectors, sorted descending."""
    xu = _unit(x)
    qu = q / np.linalg.norm(q)
    scores = (xu.astype(np.float64) @ qu.astype(np.float64)).tolist()
    order = sorted(range(len(ids)), key=lambda i: -scores[i])[:k]
    scores = np.asarray(scores)
    return scores[order].astype(np.float32), ids[order]


def _ids(n: int, seed: int = 1) -> np.ndarray:
    # Sparse, non-contiguous, large ids, as chunk row ids become after deletes.
    rng = np.random.default_rng(seed)
    return rng.choice(10**12, size=n, replace=False).astype(np.int64)


def test_protocol_and_cheap_import() -> None:
    assert isinstance(FaissIndex(DIM), VectorIndex)
    code = "import sys, rag_desktop.backends.faiss_index as m; m.FaissIndex(8); print('faiss' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("k", [1, 5, 37])
def test_flat_agrees_with_reference(k: int) -> None:
    x, ids = _random(300), _ids(300)
    index = FaissIndex(DIM)
    index.add(ids, x)
    assert index.kind == "flat" and index.ntotal == 300
    for qi, q in enumerate(_random(10, seed=7)):
        scores, got = index.search(q, k)
        ref_scores, ref_ids = reference_search(ids, x, q, k)
        np.testing.assert_array_equal(got, ref_ids, err_msg=f"query {qi}")
        np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
    assert sorted(index.ids().tolist()) == sorted(ids.tolist())


def test_inputs_are_normalised_so_scores_are_cosines() -> None:
    x, ids = _random(50), _ids(50)
    index = FaissIndex(DIM)
    index.add(ids, (x * 7.5).astype(np.float32))  # not unit length
    scores, got = index.search(_random(1, seed=3)[0] * 0.01, 50)
    assert np.all(scores <= 1.0 + 1e-5) and np.all(scores >= -1.0 - 1e-5)
    _, ref_ids = reference_search(ids, x, _random(1, seed=3)[0], 50)
    np.testing.assert_array_equal(got, ref_ids)
    np.testing.assert_allclose(index.reconstruct(ids[:3]), _unit(x[:3]), atol=1e-6)


def test_fewer_results_than_k_and_empty_index() -> None:
    index = FaissIndex(DIM)
    s, i = index.search(_random(1)[0], 5)
    assert s.shape == (0,) and i.shape == (0,)
    index.add(np.array([3, 9], dtype=np.int64), _random(2))
    s, i = index.search(_random(1, seed=2)[0], 10)
    assert sorted(i.tolist()) == [3, 9] and s.shape == (2,)
    bs, bi = index.search_batch(_random(3, seed=4), 4)
    assert bs.shape == (3, 4) and (bi[:, 2:] == -1).all() and np.isneginf(bs[:, 2:]).all()


def test_remove_then_search_matches_reference() -> None:
    x, ids = _random(200), _ids(200)
    index = FaissIndex(DIM)
    index.add(ids, x)
    gone = ids[::3]
    index.remove(gone)
    index.remove(np.concatenate([gone[:5], np.array([424242], dtype=np.int64)]))  # idempotent
    keep = ~np.isin(ids, gone)
    assert index.ntotal == int(keep.sum())
    for q in _random(5, seed=11):
        _, got = index.search(q, 20)
        assert not np.isin(got, gone).any()
        _, ref_ids = reference_search(ids[keep], x[keep], q, 20)
        np.testing.assert_array_equal(got, ref_ids)
    # A removed id can be added again with a new vector.
    index.add(gone[:1], x[:1])
    assert gone[0] in index.ids()


def test_bad_input_is_named() -> None:
    index = FaissIndex(DIM)
    index.add(np.array([1], dtype=np.int64), _random(1))
    with pytest.raises(ValueError, match="already in the index"):
        index.add(np.array([1], dtype=np.int64), _random(1))
    with pytest.raises(ValueError, match="repeated ids"):
        index.add(np.array([5, 5], dtype=np.int64), _random(2))
    with pytest.raises(ValueError, match=r"shape \(n, 16\)"):
        index.add(np.array([2], dtype=np.int64), np.ones((1, 8), dtype=np.float32))
    with pytest.raises(ValueError, match="NaN"):
        index.add(np.array([2], dtype=np.int64), np.full((1, DIM), np.nan, dtype=np.float32))
    with pytest.raises(ValueError, match="all-zero"):
        index.add(np.array([2], dtype=np.int64), np.zeros((1, DIM), dtype=np.float32))
    with pytest.raises(ValueError, match=">= 0"):
        index.add(np.array([-1], dtype=np.int64), _random(1))
    with pytest.raises(ValueError, match="2 ids for 1 vectors"):
        index.add(np.array([7, 8], dtype=np.int64), _random(1))
    with pytest.raises(ValueError, match="k must be >= 1"):
        index.search(_random(1)[0], 0)
    with pytest.raises(KeyError, match="99"):
        index.reconstruct(np.array([99], dtype=np.int64))
    assert index.ntotal == 1  # nothing half-added


def test_auto_switches_to_ivf_above_flat_max_and_stays_exact_with_all_probes() -> None:
    x, ids = _clustered(1500), _ids(1500)
    index = FaissIndex(DIM, flat_max=1000)
    index.add(ids[:900], x[:900])
    assert index.kind == "flat"
    index.add(ids[900:], x[900:])  # crosses flat_max: retrains as IVF over all 1,500
    assert index.kind == "ivf" and index.ntotal == 1500
    assert sorted(index.ids().tolist()) == sorted(ids.tolist())
    nlist = ivf_nlist(1500)
    assert nlist == round(4 * np.sqrt(1500))
    exact = FaissIndex(DIM, kind="ivf", nprobe=nlist)
    exact.add(ids, x)
    for q in _clustered(5, seed=9):
        _, got = exact.search(q, 10)
        _, ref_ids = reference_search(ids, x, q, 10)
        np.testing.assert_array_equal(got, ref_ids)


def test_ivf_default_nprobe_recall_and_remove() -> None:
    x, ids = _clustered(2500, seed=5), _ids(2500, seed=6)
    index = FaissIndex(DIM, kind="ivf")
    index.add(ids, x)
    assert index.kind == "ivf"
    queries = _clustered(30, seed=8)
    hits = 0
    for q in queries:
        _, got = index.search(q, 10)
        _, ref_ids = reference_search(ids, x, q, 10)
        hits += len(set(got.tolist()) & set(ref_ids.tolist()))
    assert hits / (10 * len(queries)) >= 0.95
    index.remove(ids[:1000])
    assert index.ntotal == 1500
    assert not np.isin(index.ids(), ids[:1000]).any()
    _, got = index.search(x[0], 5)
    assert not np.isin(got, ids[:1000]).any()


def test_ivf_nprobe_rule() -> None:
    assert ivf_nprobe(1) == 1
    assert ivf_nprobe(10) == 10  # fewer lists than the floor: visit them all
    assert ivf_nprobe(200) == 16
    assert ivf_nprobe(ivf_nlist(200_000)) == int(np.ceil(ivf_nlist(200_000) / 32))


def test_hnsw_agrees_with_reference_and_removes_by_rebuilding(tmp_path: Path) -> None:
    x, ids = _clustered(600, seed=2), _ids(600, seed=3)
    index = FaissIndex(DIM, kind="hnsw")
    index.add(ids, x)
    assert index.kind == "hnsw"
    for q in _clustered(5, seed=4):
        scores, got = index.search(q, 10)
        _, ref_ids = reference_search(ids, x, q, 10)
        assert len(set(got.tolist()) & set(ref_ids.tolist())) >= 9
        assert np.all(np.diff(scores) <= 1e-6)  # best first
    index.remove(ids[:100])
    assert index.ntotal == 500 and not np.isin(index.ids(), ids[:100]).any()
    index.save(tmp_path / "h.faiss")
    back = FaissIndex.load(tmp_path / "h.faiss")
    assert back.kind == "hnsw" and back.ntotal == 500


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_save_load_round_trip(tmp_path: Path, kind: str) -> None:
    x, ids = _clustered(1200), _ids(1200)
    index = FaissIndex(DIM, kind=kind)  # type: ignore[arg-type]
    index.add(ids, x)
    path = tmp_path / "lib" / "chunks.faiss"
    path.parent.mkdir()
    index.save(path)
    assert not (tmp_path / "lib" / "chunks.faiss.tmp").exists()
    back = FaissIndex.load(path, expected_dim=DIM)
    assert back.kind == kind and back.ntotal == 1200
    assert sorted(back.ids().tolist()) == sorted(ids.tolist())
    for q in _clustered(5, seed=3):
        s1, i1 = index.search(q, 10)
        s2, i2 = back.search(q, 10)
        np.testing.assert_array_equal(i1, i2)
        np.testing.assert_allclose(s1, s2)
    back.remove(ids[:10])
    back.add(ids[:10], x[:10])
    assert back.ntotal == 1200


def test_atomic_save_keeps_old_file_when_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "chunks.faiss"
    old = FaissIndex(DIM)
    old.add(np.array([1, 2], dtype=np.int64), _random(2))
    old.save(path)
    before = path.read_bytes()

    new = FaissIndex(DIM)
    new.add(np.arange(100, 150, dtype=np.int64), _random(50))
    # 1) The temporary path cannot be written (a directory sits there).
    (tmp_path / "chunks.faiss.tmp").mkdir()
    with pytest.raises(OSError, match=r"chunks\.faiss"):
        new.save(path)
    assert path.read_bytes() == before
    (tmp_path / "chunks.faiss.tmp").rmdir()

    # 2) The disk fills half way: the OS-level write fails after some bytes (faiss is real).
    import errno
    import os as real_os

    from rag_desktop.backends import faiss_index as module

    class FullDisk:
        """``os`` as faiss_index sees it, with a write(2) that hits a full disk after 10 bytes
        (or a close(2) that fails, as on NFS or a quota)."""

        def __init__(self, fail: str) -> None:
            self.fail = fail
            self.budget = 10

        def __getattr__(self, name: str) -> object:
            return getattr(real_os, name)

        def write(self, fd: int, data: bytes) -> int:
            if self.fail == "write":
                if self.budget <= 0:
                    raise OSError(errno.ENOSPC, "No space left on device")
                n = min(self.budget, len(data))
                self.budget -= n
                return real_os.write(fd, bytes(data[:n]))
            return real_os.write(fd, data)

        def close(self, fd: int) -> None:
            real_os.close(fd)
            if self.fail == "close":
                raise OSError(errno.EIO, "Input/output error")

    for fail, message in (("write", "No space left"), ("close", "Input/output error")):
        monkeypatch.setattr(module, "os", FullDisk(fail))
        with pytest.raises(OSError, match=message):
            new.save(path)
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert not (tmp_path / "chunks.faiss.tmp").exists()
    assert sorted(FaissIndex.load(path).ids().tolist()) == [1, 2]


_FSIZE_CHILD = r"""
import resource, signal, sys
import numpy as np
from rag_desktop.backends.faiss_index import FaissIndex

path = sys.argv[1]
idx = FaissIndex(16)
idx.add(np.array([1, 2], dtype=np.int64), np.eye(2, 16, dtype=np.float32))
idx.save(path)
# From here on no file of this process may grow past 100 bytes (a full disk, in effect):
# write(2) returns short, then EFBIG instead of killing the process with SIGXFSZ.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
idx.add(np.array([3], dtype=np.int64), np.eye(3, 16, dtype=np.float32)[2:])
try:
    idx.save(path)
except OSError as exc:
    print("refused:", exc)
    sys.exit(0)
print("saved")
"""


def test_save_on_a_full_disk_never_leaves_a_torn_file(tmp_path: Path) -> None:
    """The real failure: a small index sits in faiss's stdio buffer until
    ``fclose``, whose error faiss only prints — and the file was renamed over a good one."""
    path = tmp_path / "docs.faiss"
    res = subprocess.run([sys.executable, "-c", _FSIZE_CHILD, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("refused: could not write the vector index to"), res.stdout + res.stderr
    assert "File too large" in res.stdout
    assert not (tmp_path / "docs.faiss.tmp").exists()
    assert sorted(FaissIndex.load(path).ids().tolist()) == [1, 2]  # the previous save, intact


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.faiss"):
        FaissIndex.load(tmp_path / "nope.faiss")
    bad = tmp_path / "bad.faiss"
    bad.write_bytes(b"this is not an index")
    with pytest.raises(ValueError, match=r"bad\.faiss"):
        FaissIndex.load(bad)
    good = tmp_path / "good.faiss"
    index = FaissIndex(DIM)
    index.add(np.array([1], dtype=np.int64), _random(1))
    index.save(good)
    truncated = tmp_path / "trunc.faiss"
    truncated.write_bytes(good.read_bytes()[:40])
    with pytest.raises(ValueError, match=r"trunc\.faiss"):
        FaissIndex.load(truncated)
    with pytest.raises(ValueError, match="re-embed"):
        FaissIndex.load(good, expected_dim=384)


def test_threads_from_settings_apply_in_calling_thread() -> None:
    import faiss

    original = faiss.omp_get_max_threads()
    try:
        settings = Settings().replace("models", threads=1).replace("ingest", flat_index_max=3)
        index = FaissIndex.from_settings(DIM, settings)
        index.add(np.array([1], dtype=np.int64), _random(1))
        index.search(_random(1)[0], 1)
        assert faiss.omp_get_max_threads() == 1
        index.add(np.arange(10, 20, dtype=np.int64), _clustered(10))  # past flat_index_max
        assert index.kind == "ivf"
    finally:
        faiss.omp_set_num_threads(original)


def test_searches_while_another_thread_adds_and_removes() -> None:
    import threading

    index = FaissIndex(DIM, flat_max=300)  # the writer also crosses into IVF mid-way
    x, ids = _clustered(600), _ids(600)
    index.add(ids[:50], x[:50])
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        q = _clustered(1, seed=99)[0]
        while not stop.is_set():
            try:
                _, got = index.search(q, 5)
                assert len(got) == 5 and np.isin(got, ids).all()
            except BaseException as exc:  # surfaced below
                errors.append(exc)
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for start in range(50, 600, 50):
        index.add(ids[start:start + 50], x[start:start + 50])
        index.remove(ids[start - 50:start - 40])
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert index.kind == "ivf" and index.ntotal == 600 - 110
