"""Embedding one file's chunks during an ingest, resumable (docs/architecture.md, "Storage and crash safety")."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Generator

import numpy as np
import numpy.typing as npt

from rag_desktop.app.catalog import Catalog
from rag_desktop.core.protocols import Embedder
from rag_desktop.core.types import CancelToken, Progress

# A large file commits its vectors every STAGE_CHUNKS chunks (or STAGE_SECONDS): at e5-small's
# ~0.6 s per 4,096-character chunk on two cores an interrupt loses at most a couple of minutes.
STAGE_CHUNKS = 256
STAGE_SECONDS = 60.0


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def content_key(sha256: str) -> str:
    """Where a removed file's chunk vectors wait in ``staged_vectors`` for the same bytes to come back."""
    return f"content:{sha256}"


def embed_file(
    catalog: Catalog, key: str, label: str, texts: list[str], embedder: Embedder, batch_size: int,
    cancel: CancelToken, also: str = "",
) -> Generator[Progress, None, npt.NDArray[np.float32]]:
    """Embed one file's chunks (returned in input order), with progress inside the file.

    A file of more than ``STAGE_CHUNKS`` chunks commits its vectors in parts (every
    ``STAGE_CHUNKS`` chunks or ``STAGE_SECONDS``) to ``staged_vectors``, keyed by the chunk
    text's hash; an interrupted run keeps them, and the next run embeds only the chunks
    that have no staged vector (also after an edit: unchanged chunks are reused). Staged
    vectors are never searched — the file enters the library in one transaction when all
    its chunks have vectors — so the one-file-one-state promise holds: a file is fully in
    (its new version) or its previous version is. ``also``: another staged key to reuse vectors from
    (a removed file's content key, :func:`content_key`: the same bytes added back are not embedded again).
    """
    total = len(texts)
    out = np.zeros((total, embedder.dim), dtype=np.float32)
    hashes = [text_hash(t) for t in texts]
    staged = {**catalog.staged_vectors(also), **catalog.staged_vectors(key)} if also else catalog.staged_vectors(key)
    todo: list[int] = []
    for j, h in enumerate(hashes):
        v = staged.get(h)
        if v is not None and v.shape[0] == embedder.dim:
            out[j] = v
        else:
            todo.append(j)
    del staged
    resumed = total - len(todo)
    stage = total > STAGE_CHUNKS or resumed > 0
    msg = label if not resumed else f"{label}: resuming, {resumed:,} of {total:,} chunks kept from before"
    yield Progress("embed", resumed, total, msg, None, key)
    todo.sort(key=lambda j: len(texts[j]))  # batches of similar length: less padding
    bs = batch_size
    t0 = last = time.monotonic()
    pending: list[int] = []
    done = resumed
    for start in range(0, len(todo), bs):
        cancel.raise_if_set()
        idx = todo[start : start + bs]
        out[idx] = embedder.embed_passages([texts[j] for j in idx])
        done += len(idx)
        pending.extend(idx)
        now = time.monotonic()
        if stage and done < total and (len(pending) >= STAGE_CHUNKS or now - last >= STAGE_SECONDS):
            with catalog.transaction():
                catalog.stage_vectors(key, ((hashes[j], out[j]) for j in pending))
            pending, last = [], now
        rate = (done - resumed) / max(now - t0, 1e-9)
        yield Progress("embed", done, total, label, (total - done) / rate if rate > 0 else None, key)
    return out
