"""The documented substitute for a cross-encoder: s(q, e) = cos(E(q), E(e)).

Paper 002's phi_causal (``mean_e [ s(q,e) − max_q' s(q',e) ]``) and paper 000's
comparison column both call for a trained cross-encoder (bge-reranker-v2-m3). No
registry package ships one, so when none is configured the app scores pairs with the
embedder it already has and says so: ``is_substitute`` is True and the identity reads
"embedding-cosine (substitute for a cross-encoder)", which the UI shows as the label.

Choices where the papers are silent:

* The query side is embedded with ``embed_queries`` and the evidence with
  ``embed_passages`` — the same asymmetric use the encoder was trained for and the
  baseline similarity s_sim uses — so s(q, e) of an original query and of a
  counterfactual query q' are on one scale and their difference is meaningful.
* CF-RAG scores one evidence pool against the original query and each of its N
  counterfactuals, so passage vectors are cached (bounded, least recently used) by
  text: the pool is embedded once, not N + 1 times.

Pure core: only the :class:`~rag_desktop.core.protocols.Embedder` protocol and numpy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rag_desktop.core.checks import at_least, score_inputs
from rag_desktop.core.protocols import Embedder

SUBSTITUTE_IDENTITY = "embedding-cosine (substitute for a cross-encoder)"


class EmbeddingCosineScorer:
    """:class:`~rag_desktop.core.protocols.CrossEncoder` substitute: cosine of E(q) and E(e)."""

    def __init__(self, embedder: Embedder, *, cache_size: int = 4096) -> None:
        at_least("EmbeddingCosineScorer", cache_size=(cache_size, 0))
        self._embedder = embedder
        self._cache_size = cache_size
        self._cache: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return SUBSTITUTE_IDENTITY

    @property
    def is_substitute(self) -> bool:
        return True

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    def load(self) -> None:
        self._embedder.load()

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def remember(self, passages: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Keep passage vectors that this scorer's own embedder already made elsewhere (CF-RAG's
        pool, the library's stored chunk vectors), so scoring them does not embed them again."""
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.shape != (len(passages), self._embedder.dim):
            raise ValueError(f"EmbeddingCosineScorer.remember: {vecs.shape} vectors for {len(passages)} passages "
                             f"of dimension {self._embedder.dim}")
        if not self._cache_size:
            return
        with self._lock:
            for t, v in zip(passages, vecs, strict=True):
                self._cache[t] = v.copy()
                self._cache.move_to_end(t)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _passage_vectors(self, passages: list[str]) -> npt.NDArray[np.float32]:
        dim = self._embedder.dim
        out = np.empty((len(passages), dim), dtype=np.float32)
        with self._lock:
            missing = [t for t in dict.fromkeys(passages) if t not in self._cache]
        fresh: dict[str, npt.NDArray[np.float32]] = {}
        if missing:
            vecs = np.asarray(self._embedder.embed_passages(missing), dtype=np.float32)
            if vecs.shape != (len(missing), dim):
                raise ValueError(f"embedder {self._embedder.identity!r} returned shape {vecs.shape} "
                                 f"for {len(missing)} passages of dimension {dim}")
            fresh = dict(zip(missing, vecs, strict=True))
        with self._lock:
            for i, t in enumerate(passages):
                v = fresh.get(t)
                if v is None:
                    v = self._cache.get(t)
                if v is None:  # evicted between the two locks by a concurrent caller
                    v = np.asarray(self._embedder.embed_passages([t]), dtype=np.float32)[0]
                out[i] = v
            if self._cache_size:
                for i, t in enumerate(passages):
                    self._cache[t] = out[i].copy()
                    self._cache.move_to_end(t)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float64]:
        """cos(E(q), E(e)) per passage in (−1, 1), in the order given."""
        items = score_inputs("EmbeddingCosineScorer.score", query, passages)
        if not items:
            return np.empty(0, dtype=np.float64)
        q = np.asarray(self._embedder.embed_queries([query]), dtype=np.float64).reshape(-1)
        p = self._passage_vectors(items).astype(np.float64)
        # Embedder outputs are unit rows by contract; normalising again costs nothing and
        # keeps the score a true cosine if an embedder drifts.
        qn = np.linalg.norm(q)
        pn = np.linalg.norm(p, axis=1)
        denom = np.where(pn * qn > 0, pn * qn, 1.0)
        return np.asarray((p @ q) / denom, dtype=np.float64)
