"""A library's FAISS indexes: caches of the vectors stored in its catalog.

docs/architecture.md "Storage and crash safety": the catalog is the truth. An index file is
loaded when it agrees with the catalog (same ids, same dimension) and rebuilt from the catalog's
vectors when it does not (torn, foreign, another encoder); saving one is atomic (FaissIndex.save).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rag_desktop.app.catalog import CATALOG_NAME, Catalog, CatalogError
from rag_desktop.backends.faiss_index import FaissIndex
from rag_desktop.core.settings import Settings

log = logging.getLogger(__name__)

INDEX_FILES = {"chunk": "chunks.faiss", "doc": "docs.faiss"}


class IndexCache:
    """The chunk and document indexes of the library in ``folder``, opened on first use."""

    def __init__(self, folder: Path, settings: Settings, catalog: Catalog) -> None:
        self.folder = folder
        self.settings = settings
        self.catalog = catalog
        self._indexes: dict[str, FaissIndex] = {}
        self._last_save = 0.0

    def get(self, level: str, dim: int) -> FaissIndex:
        """The FAISS index for ``level``, reconciled with the catalog on first use."""
        if level in self._indexes:
            return self._indexes[level]
        path = self.folder / INDEX_FILES[level]
        idx: FaissIndex | None = None
        if path.exists():
            try:
                idx = FaissIndex.load(path, expected_dim=dim, flat_max=self.settings.ingest.flat_index_max)
            except Exception:  # a torn, foreign or other-dimension file: rebuild below
                idx = None
        want = self.catalog.unit_ids(level)
        if idx is None or idx.dim != dim or set(idx.ids().tolist()) != want:
            idx = self._rebuild(level, dim)
        self._indexes[level] = idx
        return idx

    def _rebuild(self, level: str, dim: int) -> FaissIndex:
        idx = FaissIndex.from_settings(dim, self.settings)
        ids: list[int] = []
        vecs: list[npt.NDArray[np.float32]] = []
        for uid, v in self.catalog.iter_vectors(level):
            ids.append(uid)
            vecs.append(v)
        if ids:
            idx.add(np.asarray(ids, dtype=np.int64), np.stack(vecs).astype(np.float32))
        try:
            idx.save(self.folder / INDEX_FILES[level])
        except OSError as exc:
            # The rebuilt index is right in memory; the file is only a cache (rebuilt again
            # next time). A full disk must not make a readable library unqueryable.
            log.warning("%s", exc)
        return idx

    def save(self, best_effort: bool = False) -> None:
        """Save the FAISS caches. A failure is a :class:`CatalogError` that says the catalog is
        intact; with ``best_effort`` (another error is already on its way out) it is only logged."""
        for level, idx in self._indexes.items():
            try:
                idx.save(self.folder / INDEX_FILES[level])
            except OSError as exc:
                if best_effort:
                    log.warning("%s", exc)
                    continue
                raise CatalogError(
                    f"{exc}. Everything ingested is safe in {CATALOG_NAME}; the index file was left as it "
                    "was and is rebuilt from the catalog when the library is next opened. "
                    "Free some disk space and run ingest again."
                ) from exc

    def save_every(self, seconds: float) -> None:
        """Save at most once per ``seconds``: a long ingest keeps its caches close to the catalog."""
        now = time.monotonic()
        if now - self._last_save >= seconds:
            self.save()
            self._last_save = now

    def clear(self) -> None:
        """Forget the indexes and delete their files (the catalog's vectors are gone)."""
        for name in INDEX_FILES.values():
            (self.folder / name).unlink(missing_ok=True)
        self._indexes.clear()
