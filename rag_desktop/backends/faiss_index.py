"""The vector index: FAISS inner product over L2-normalised vectors with stable int64 ids.

Implements :class:`rag_desktop.core.protocols.VectorIndex`. ``faiss`` is imported lazily
(inside the first method that needs it) so that importing this module stays cheap.

Index layouts (``kind``):

* ``"flat"`` — ``IndexIDMap2(IndexFlatIP)``: exact search, O(n·d) per query. The
  default while the index holds at most ``flat_max`` vectors
  (``settings.ingest.flat_index_max`` = 200,000). At that size the vectors take 0.3 GB
  (384-d e5-small) or 0.8 GB (1,024-d BGE-M3) and one exact query took 85 ms / 276 ms
  with one thread on this project's busy 2-core machine (measured with this class):
  past that point exact search stops feeling instant.
* ``"ivf"`` — ``IndexIVFFlat`` (inner-product metric) with
  ``nlist ≈ 4·sqrt(n)`` lists, trained on the vectors themselves, ids stored natively
  in the inverted lists and a hashtable direct map so vectors can be removed and
  reconstructed by id. With ``kind="auto"`` (the default) a flat index converts itself
  to IVF the first time an ``add`` would take it past ``flat_max``; it never converts
  back (a shrinking library keeps its trained lists — cheap and still exact enough).
* ``"hnsw"`` — ``IndexIDMap2(IndexHNSWFlat)``, opt-in (``large_kind="hnsw"``). HNSW
  graphs cannot delete nodes, so :meth:`remove` rebuilds the graph from the stored
  vectors: fine for append-mostly libraries, slow for frequent edits — hence IVF is
  the default large layout.

Every vector is L2-normalised on the way in (``add``) and every query on the way into
``search``, so inner product equals cosine whatever the caller passes (per-file
mean-pooled vectors, paper 000 §4.1, are not unit length until renormalised).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.errors import require

if TYPE_CHECKING:
    from rag_desktop.core.settings import Settings

FloatArray = npt.NDArray[np.float32]
IdArray = npt.NDArray[np.int64]
Kind = Literal["flat", "ivf", "hnsw"]

# IVF training: faiss wants at least ~39 points per list and gains little beyond ~256;
# we train on at most this many points per list (a fixed-seed sample) to bound the time.
_IVF_TRAIN_POINTS_PER_LIST = 100
_HNSW_M = 32
_HNSW_EF_CONSTRUCTION = 80
_HNSW_EF_SEARCH = 64


P = ParamSpec("P")
R = TypeVar("R")


def _locked(method: Callable[P, R]) -> Callable[P, R]:
    """Serialise calls on one index: FAISS allows concurrent searches but not a search
    racing an add/remove (the UI may query while an ingest writes)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with args[0]._lock:  # type: ignore[attr-defined]
            return method(*args, **kwargs)

    return wrapper


def _faiss() -> Any:
    return require("faiss", "The vector index", "faiss-cpu")


def ivf_nlist(n: int) -> int:
    """Number of IVF lists for ``n`` vectors: ≈ 4·sqrt(n) (the FAISS wiki's 4–16·sqrt(n) rule,
    at its low end because our queries are few and recall matters more than speed)."""
    if n < 1:
        raise ValueError("ivf_nlist: need at least one vector")
    return max(1, min(n, round(4.0 * math.sqrt(n))))


def ivf_nprobe(nlist: int) -> int:
    """Lists visited per query: nlist/32, at least 16 (or all lists when there are fewer).

    With nlist ≈ 4·sqrt(n) this scans ~3 % of a 200k-vector index (≈ 56 of 1,789 lists),
    which keeps recall@10 above 0.95 on clustered data (tested)."""
    return max(1, min(nlist, max(16, math.ceil(nlist / 32))))


class FaissIndex:
    """A FAISS-backed :class:`~rag_desktop.core.protocols.VectorIndex`.

    ``threads`` > 0 caps FAISS's OpenMP threads for every call made through this object
    (applied in the calling thread, because OpenMP's thread count is a per-thread
    setting and searches may run on a UI worker thread); 0 leaves FAISS's default
    (``OMP_NUM_THREADS`` or all cores).
    """

    def __init__(
        self,
        dim: int,
        *,
        kind: Literal["auto", "flat", "ivf", "hnsw"] = "auto",
        flat_max: int = 200_000,
        large_kind: Literal["ivf", "hnsw"] = "ivf",
        threads: int = 0,
        nprobe: int | None = None,
        ef_search: int = _HNSW_EF_SEARCH,
        seed: int = 1234,
    ) -> None:
        if dim < 1:
            raise ValueError(f"FaissIndex: dim must be >= 1, got {dim}")
        if kind not in ("auto", "flat", "ivf", "hnsw"):
            raise ValueError(f"FaissIndex: kind must be auto, flat, ivf or hnsw, got {kind!r}")
        if large_kind not in ("ivf", "hnsw"):
            raise ValueError(f"FaissIndex: large_kind must be ivf or hnsw, got {large_kind!r}")
        if flat_max < 1:
            raise ValueError(f"FaissIndex: flat_max must be >= 1, got {flat_max}")
        if threads < 0:
            raise ValueError(f"FaissIndex: threads must be >= 0, got {threads}")
        self._dim = dim
        self._auto = kind == "auto"
        self._flat_max = flat_max
        self._large_kind: Kind = large_kind
        self._threads = threads
        self._nprobe = nprobe
        self._ef_search = ef_search
        self._seed = seed
        # kind="ivf" needs training data: it is built on the first add.
        self._target: Kind = "flat" if kind == "auto" else kind
        self._index: Any = None  # created lazily (faiss import) on first use
        self._kind: Kind = "flat"
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_settings(cls, dim: int, settings: Settings, **kwargs: Any) -> FaissIndex:
        """An index using ``settings.ingest.flat_index_max`` and ``settings.models.threads``."""
        return cls(dim, flat_max=settings.ingest.flat_index_max, threads=settings.models.threads, **kwargs)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def kind(self) -> Kind:
        """The layout currently in use ("flat" until an IVF/HNSW index has been built)."""
        with self._lock:
            self._ensure()
            return self._kind

    @property
    def ntotal(self) -> int:
        if self._index is None:
            return 0
        return int(self._index.ntotal)

    def _set_threads(self) -> Any:
        faiss = _faiss()
        if self._threads > 0:
            faiss.omp_set_num_threads(self._threads)
        return faiss

    def _ensure(self) -> None:
        if self._index is not None:
            return
        faiss = self._set_threads()
        if self._target == "hnsw":
            self._index = self._new_hnsw(faiss)
            self._kind = "hnsw"
        else:
            # "flat", "auto", and "ivf" before its first (training) add.
            self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(self._dim))
            self._kind = "flat"

    def _new_hnsw(self, faiss: Any) -> Any:
        inner = faiss.IndexHNSWFlat(self._dim, _HNSW_M, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = _HNSW_EF_CONSTRUCTION
        inner.hnsw.efSearch = self._ef_search
        return faiss.IndexIDMap2(inner)

    def _new_ivf(self, faiss: Any, train: FloatArray) -> Any:
        n = train.shape[0]
        nlist = ivf_nlist(n)
        quantizer = faiss.IndexFlatIP(self._dim)
        # (faiss's Python wrapper keeps ``quantizer`` alive as long as ``ivf``.)
        ivf = faiss.IndexIVFFlat(quantizer, self._dim, nlist, faiss.METRIC_INNER_PRODUCT)
        limit = nlist * _IVF_TRAIN_POINTS_PER_LIST
        if n > limit:
            rng = np.random.default_rng(self._seed)
            train = train[np.sort(rng.choice(n, size=limit, replace=False))]
        ivf.cp.seed = self._seed
        ivf.cp.spherical = True  # unit-norm centroids: the right k-means for cosine data
        ivf.train(np.ascontiguousarray(train))
        # Hashtable direct map: arbitrary int64 ids, remove_ids and reconstruct by id.
        ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
        ivf.nprobe = self._nprobe if self._nprobe is not None else ivf_nprobe(nlist)
        return ivf

    # ------------------------------------------------------------------ validation

    def _vectors(self, vectors: Any, what: str) -> FloatArray:
        arr = np.asarray(vectors)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self._dim:
            raise ValueError(f"FaissIndex: {what} must have shape (n, {self._dim}), got {np.shape(vectors)}")
        if not np.issubdtype(arr.dtype, np.floating):
            raise ValueError(f"FaissIndex: {what} must be floating point, got dtype {arr.dtype}")
        out = np.array(arr, dtype=np.float32, order="C", copy=True)
        if not np.all(np.isfinite(out)):
            raise ValueError(f"FaissIndex: {what} contain NaN or infinite values")
        norms = np.linalg.norm(out, axis=1)
        if np.any(norms == 0.0):
            raise ValueError(f"FaissIndex: {what} contain an all-zero vector (no direction to compare)")
        out /= norms[:, None]
        return out

    @staticmethod
    def _ids(ids: Any, n: int | None = None) -> IdArray:
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise ValueError(f"FaissIndex: ids must be a 1-D array, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"FaissIndex: ids must be integers, got dtype {arr.dtype}")
        out = arr.astype(np.int64, copy=False)
        if n is not None and out.shape[0] != n:
            raise ValueError(f"FaissIndex: {out.shape[0]} ids for {n} vectors")
        if np.any(out < 0):
            raise ValueError("FaissIndex: ids must be >= 0 (-1 marks 'no result' in FAISS)")
        return np.ascontiguousarray(out)

    # ------------------------------------------------------------------ VectorIndex

    @_locked
    def ids(self) -> IdArray:
        """All stored ids (unordered)."""
        if self._index is None or self._index.ntotal == 0:
            return np.empty(0, dtype=np.int64)
        faiss = _faiss()
        if self._kind == "ivf":
            inv = self._index.invlists
            parts = [
                faiss.rev_swig_ptr(inv.get_ids(lst), inv.list_size(lst)).copy()
                for lst in range(self._index.nlist)
                if inv.list_size(lst) > 0
            ]
            return np.concatenate(parts).astype(np.int64, copy=False)
        return faiss.vector_to_array(self._index.id_map).astype(np.int64, copy=False)

    @_locked
    def add(self, ids: npt.NDArray[np.int64], vectors: FloatArray) -> None:
        """Add vectors under new ids. An id already present (or repeated) is an error:
        silently keeping two vectors under one id would return duplicates forever."""
        x = self._vectors(vectors, "vectors")
        ids64 = self._ids(ids, x.shape[0])
        if x.shape[0] == 0:
            return
        uniq, counts = np.unique(ids64, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"FaissIndex.add: repeated ids in one call: {uniq[counts > 1][:10].tolist()}")
        self._ensure()
        present = np.intersect1d(uniq, self.ids())
        if present.size:
            raise ValueError(f"FaissIndex.add: ids already in the index: {present[:10].tolist()} "
                             "(remove them first to replace their vectors)")
        faiss = self._set_threads()
        n_after = self.ntotal + x.shape[0]
        if self._kind == "flat" and (
            self._target == "ivf" or (self._auto and n_after > self._flat_max)
        ):
            target: Kind = "ivf" if self._target == "ivf" else self._large_kind
            old_ids, old_x = self._all_vectors()
            self._rebuild(faiss, target, np.concatenate([old_ids, ids64]), np.concatenate([old_x, x]))
            return
        self._index.add_with_ids(x, ids64)

    def _all_vectors(self) -> tuple[IdArray, FloatArray]:
        ids = self.ids()
        if ids.size == 0:
            return ids, np.empty((0, self._dim), dtype=np.float32)
        return ids, np.asarray(self._index.reconstruct_batch(ids), dtype=np.float32)

    def _rebuild(self, faiss: Any, kind: Kind, ids: IdArray, x: FloatArray) -> None:
        if kind == "ivf":
            new = self._new_ivf(faiss, x)
        elif kind == "hnsw":
            new = self._new_hnsw(faiss)
        else:
            new = faiss.IndexIDMap2(faiss.IndexFlatIP(self._dim))
        if ids.size:
            new.add_with_ids(np.ascontiguousarray(x), np.ascontiguousarray(ids))
        self._index = new
        self._kind = kind
        self._target = kind

    @_locked
    def rebuild(self, kind: Kind | None = None) -> None:
        """Rebuild from the stored vectors (e.g. retrain IVF lists after the library grew
        tenfold, or switch layout). ``kind=None`` keeps the current layout."""
        self._ensure()
        faiss = self._set_threads()
        ids, x = self._all_vectors()
        target = kind or self._kind
        if target == "ivf" and ids.size == 0:
            raise ValueError("FaissIndex.rebuild: an IVF index needs vectors to train on")
        self._rebuild(faiss, target, ids, x)

    @_locked
    def remove(self, ids: npt.NDArray[np.int64]) -> None:
        """Remove the given ids; ids not in the index are ignored (removal is idempotent,
        so a resumed ingest may repeat it)."""
        ids64 = self._ids(ids)
        if ids64.size == 0 or self.ntotal == 0:
            return
        faiss = self._set_threads()
        if self._kind == "hnsw":
            keep_ids, keep_x = self._all_vectors()
            mask = ~np.isin(keep_ids, ids64)
            if mask.all():
                return
            self._rebuild(faiss, "hnsw", keep_ids[mask], keep_x[mask])
            return
        if self._kind == "ivf":
            # The hashtable direct map only accepts an explicit id array.
            self._index.remove_ids(faiss.IDSelectorArray(ids64.size, faiss.swig_ptr(ids64)))
        else:
            self._index.remove_ids(faiss.IDSelectorBatch(ids64.size, faiss.swig_ptr(ids64)))

    def search(self, query: FloatArray, k: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Top-``k`` (cosine scores, ids) for one query vector, best first; fewer than ``k``
        when the index holds fewer vectors (FAISS's -1 padding is dropped)."""
        q = np.asarray(query)
        if q.ndim == 2 and q.shape[0] == 1:
            q = q[0]
        if q.ndim != 1:
            raise ValueError(f"FaissIndex.search: one query vector of shape ({self._dim},) expected, "
                             f"got {np.shape(query)}; use search_batch for several")
        scores, ids = self.search_batch(q.reshape(1, -1), k)
        keep = ids[0] >= 0
        return scores[0][keep], ids[0][keep]

    @_locked
    def search_batch(
        self, queries: FloatArray, k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """(m, k) scores and ids for m queries; missing results are id -1 with score -inf."""
        if k < 1:
            raise ValueError(f"FaissIndex.search: k must be >= 1, got {k}")
        qs = self._vectors(queries, "queries")
        m = qs.shape[0]
        if self.ntotal == 0:
            return (np.full((m, k), -np.inf, dtype=np.float32), np.full((m, k), -1, dtype=np.int64))
        self._set_threads()
        kk = min(k, self.ntotal)
        scores, ids = self._index.search(qs, kk)
        scores = np.asarray(scores, dtype=np.float32)
        ids = np.asarray(ids, dtype=np.int64)
        scores[ids < 0] = -np.inf
        if kk < k:
            scores = np.pad(scores, ((0, 0), (0, k - kk)), constant_values=-np.inf)
            ids = np.pad(ids, ((0, 0), (0, k - kk)), constant_values=-1)
        return scores, ids

    @_locked
    def reconstruct(self, ids: npt.NDArray[np.int64]) -> FloatArray:
        """The stored (normalised) vectors for ``ids``; an unknown id is an error."""
        ids64 = self._ids(ids)
        if ids64.size == 0:
            return np.empty((0, self._dim), dtype=np.float32)
        missing = np.setdiff1d(ids64, self.ids())
        if missing.size:
            raise KeyError(f"FaissIndex.reconstruct: ids not in the index: {missing[:10].tolist()}")
        self._set_threads()
        return np.asarray(self._index.reconstruct_batch(ids64), dtype=np.float32)

    # ------------------------------------------------------------------ persistence

    @_locked
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index atomically: to ``<path>.tmp``, fsync, close, then ``os.replace``.

        A crash or a failed write leaves the previous file at ``path`` untouched. Every step
        before the rename is checked: ``faiss.write_index(index, filename)`` writes through a
        C ``FILE*`` and only *prints* a failing ``fclose`` (a destructor cannot throw), so on a
        full disk the last buffered bytes — all of them for a small index — were lost without
        an error and the rename put a 0-byte file in place of a good one.
        Here faiss streams the bytes through ``PyCallbackIOWriter`` into our own ``write(2)``
        calls (one block in memory at a time); the size on disk must equal what was written.
        """
        self._ensure()
        faiss = self._set_threads()
        dest = Path(path)
        tmp = dest.with_name(dest.name + ".tmp")
        failure: list[OSError] = []
        written = 0
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:

                def write(block: bytes) -> None:
                    # Never raise into faiss (its C++ would turn it into a bare "py err"):
                    # remember the first failure and drop the rest.
                    nonlocal written
                    if failure:
                        return
                    view = memoryview(block)
                    try:
                        while view:
                            n = os.write(fd, view)
                            view = view[n:]
                            written += n
                    except OSError as exc:
                        failure.append(exc)

                faiss.write_index(self._index, faiss.PyCallbackIOWriter(write))
                if failure:
                    raise failure[0]
                os.fsync(fd)
            finally:
                os.close(fd)  # raises if the close fails (NFS, quota): checked, not ignored
            size = os.stat(tmp).st_size
            if written == 0 or size != written:
                raise OSError(f"the file on disk has {size} bytes but {written} were written")
            os.replace(tmp, dest)
        except (OSError, RuntimeError) as exc:
            with contextlib.suppress(OSError):
                if tmp.is_file():
                    tmp.unlink()
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise OSError(f"could not write the vector index to {dest}: {reason}") from exc
        # Make the rename itself durable (POSIX: fsync the directory entry).
        with contextlib.suppress(OSError):
            dfd = os.open(dest.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        expected_dim: int | None = None,
        flat_max: int = 200_000,
        large_kind: Literal["ivf", "hnsw"] = "ivf",
        threads: int = 0,
    ) -> FaissIndex:
        """Read an index written by :meth:`save`; the layout is recovered from the file."""
        src = Path(path)
        if not src.is_file():
            raise FileNotFoundError(f"vector index file not found: {src}")
        faiss = _faiss()
        if threads > 0:
            faiss.omp_set_num_threads(threads)
        try:
            raw = faiss.read_index(str(src))
        except RuntimeError as exc:
            raise ValueError(f"{src} is not a readable FAISS index (corrupt or truncated?): {exc}") from exc
        # read_index already returns the concrete class and owns the C++ object; a second
        # wrapper from downcast_index would not own it and would dangle once ``raw`` dies.
        index = raw
        if isinstance(index, faiss.IndexIDMap2):
            inner = faiss.downcast_index(index.index)
            if isinstance(inner, faiss.IndexHNSWFlat):
                kind: Kind = "hnsw"
            elif isinstance(inner, faiss.IndexFlat):
                kind = "flat"
            else:
                raise ValueError(f"{src}: unsupported FAISS layout IDMap2({type(inner).__name__})")
        elif isinstance(index, faiss.IndexIVFFlat):
            kind = "ivf"
        else:
            raise ValueError(f"{src}: unsupported FAISS layout {type(index).__name__}")
        if index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"{src}: the index does not use the inner-product metric")
        if expected_dim is not None and index.d != expected_dim:
            raise ValueError(f"{src}: the index holds {index.d}-dimensional vectors but the embedder "
                             f"produces {expected_dim}; re-embed the library")
        obj = cls(int(index.d), kind=kind, flat_max=flat_max, large_kind=large_kind, threads=threads)
        obj._auto = kind == "flat"  # a loaded flat index keeps growing into IVF/HNSW as usual
        obj._index = index
        obj._kind = kind
        obj._target = kind
        if kind == "ivf":
            obj._nprobe = int(index.nprobe)
        return obj
