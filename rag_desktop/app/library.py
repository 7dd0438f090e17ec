"""A library is a folder: ``catalog.sqlite`` plus the FAISS files beside it.

``Library.ingest`` is a generator of :class:`Progress` events that ends with an
:class:`IngestReport`. Guarantees (docs/architecture.md "Storage and crash safety"):

* one SQLite transaction per file, so a kill -9 at any moment leaves every file
  either fully in or fully out;
* unchanged files are skipped by (size, mtime) without reading them, and by
  content hash when only the mtime moved;
* the FAISS indexes are caches of the vectors stored in the catalog: saved
  atomically, checked against the catalog at open and rebuilt when they disagree;
* a bad file is recorded with its reason and the rest of the folder goes on.

The ingest's parts live beside this module, one job each: folder_scan (which files),
library_lock (one writer), ingest_run (each file checked, read, embedded, stored),
doc_prepare (a file read and chunked), embed_step, ingest_meter, index_cache (the FAISS files).
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rag_desktop.app.catalog import Catalog, CatalogError, printable
from rag_desktop.app.doc_prepare import TEXT_VERSION, teach_user_words
from rag_desktop.app.folder_scan import scan_folder as scan_folder
from rag_desktop.app.index_cache import IndexCache
from rag_desktop.app.ingest_run import IngestReport as IngestReport
from rag_desktop.app.ingest_run import IngestRun, IngestTools
from rag_desktop.app.library_lock import LibraryLock
from rag_desktop.app.ocr import OcrCache
from rag_desktop.backends.faiss_index import FaissIndex
from rag_desktop.core import keywords as kw
from rag_desktop.core.causal import calibrate_tau
from rag_desktop.core.errors import ErrorKind
from rag_desktop.core.protocols import Embedder, OcrEngine, Tokenizer
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, Keyword, Progress

log = logging.getLogger(__name__)

# Catalog meta keys that hold values measured with the library's encoder; a re-embed drops them.
# ("gate": the calibration gate's record, app.library_gate; "score_means": μ_T / μ_D of
# app.retrieval.Retriever.score_means.)
ENCODER_SCALE_KEYS = ("embedder", "dim", "tau_auto", "cos_baseline", "gate", "score_means")
CATALOG_FILE = "catalog.sqlite"


def library_folder_problem(folder: Path) -> tuple[str, str] | None:
    """Why ``folder`` cannot be opened as a library, as (kind, detail), or None if it can.

    A library folder holds a catalog, or is empty or missing (a new library). ``kind`` is
    ``"not_folder"``, ``"unreadable"`` or ``"not_empty"`` — the last most likely a folder of
    documents picked by mistake, refused rather than filled with a catalog and index files.
    """
    if not folder.exists():
        return None
    if not folder.is_dir():
        return "not_folder", f"{printable(folder)} is not a folder"
    if (folder / CATALOG_FILE).is_file():
        return None
    try:
        empty = next(folder.iterdir(), None) is None
    except OSError as exc:
        return "unreadable", f"cannot read {printable(folder)}: {exc.strerror or exc}"
    if not empty:
        return "not_empty", f"{printable(folder)} holds files but no {CATALOG_FILE}"
    return None


class EmbedderMismatch(CatalogError):
    """The library was built with another embedder; querying it would compare apples with pears."""

    kind = ErrorKind.EMBEDDER_MISMATCH


class Library:
    """Open (or create) the library in ``folder``. Cheap; models arrive through ``attach``."""

    def __init__(self, folder: Path, settings: Settings) -> None:
        self.folder = folder
        self.settings = settings
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CatalogError(f"cannot create the library folder {printable(folder)}: {exc.strerror or exc}") from exc
        if not os.access(folder, os.W_OK):
            raise CatalogError(f"the library folder {folder} is not writable")
        self.catalog = Catalog(folder / CATALOG_FILE)
        self.ocr_cache = OcrCache(folder)
        self.indexes = IndexCache(folder, settings, self.catalog)

    def close(self) -> None:
        self.catalog.close()

    def text_outdated(self) -> bool:
        """Whether documents here were read by an older text version (doc_prepare.TEXT_VERSION): the
        next ingest of the library's folders reads them again (app.ingest_run)."""
        return self.catalog.count_text_older(TEXT_VERSION) > 0

    # ------------------------------------------------------------------ identity
    def check_embedder(self, embedder: Embedder) -> None:
        """Refuse to mix vectors of two encoders in one library."""
        stored = self.catalog.get_meta("embedder")
        if stored is None:
            return
        if stored != embedder.identity:
            raise EmbedderMismatch(
                f"this library was built with the embedder '{stored}', but '{embedder.identity}' is "
                f"configured. Switch back to '{stored}', or re-embed the library "
                f"(rag-desktop ingest --reembed) to use the new one."
            )
        # Same name, other vectors: a server (models.embedder_backend = "openai") can serve one
        # model name at several dimensions (Matryoshka truncation) or swap the weights behind it.
        stored_dim = self.catalog.get_meta("dim")
        if stored_dim is not None and int(stored_dim) != embedder.dim:
            raise EmbedderMismatch(
                f"this library holds {stored_dim}-dimensional vectors from '{stored}', but the configured "
                f"embedder gives {embedder.dim}-dimensional ones. Restore the embedder's dimension, or "
                f"re-embed the library (rag-desktop ingest --reembed)."
            )

    def index(self, level: str, dim: int) -> FaissIndex:
        """The FAISS index for ``level`` ("chunk" or "doc"), reconciled with the catalog on first use."""
        return self.indexes.get(level, dim)

    # ------------------------------------------------------------------ ingest
    def ingest(
        self,
        folders: Sequence[Path],
        embedder: Embedder,
        tokenizer: Tokenizer,
        cancel: CancelToken | None = None,
        reembed: bool = False,
        ocr: OcrEngine | None = None,
    ) -> Iterator[Progress | IngestReport]:
        """Bring the library in line with ``folders``; yields progress, then the report.

        Holds the library's :class:`LibraryLock` from the first event to the last (a second
        ingest of the same library raises :class:`CatalogError` naming this process).
        With ``ocr``, PDF pages without a usable text layer and image files are recognised
        (app/ocr.py: per-page progress, cached per page so a cancelled run resumes).
        """
        lock = LibraryLock(self.folder)
        lock.acquire()
        try:
            yield from self._ingest(folders, embedder, tokenizer, cancel, reembed, ocr)
        finally:
            lock.release()

    def _ingest(
        self,
        folders: Sequence[Path],
        embedder: Embedder,
        tokenizer: Tokenizer,
        cancel: CancelToken | None,
        reembed: bool,
        ocr: OcrEngine | None,
    ) -> Iterator[Progress | IngestReport]:
        """Open the library for ``embedder``, run the file steps (app.ingest_run), then the keyword sets."""
        t0 = time.monotonic()
        if reembed:
            self._drop_all_vectors()
        kfilter = self._open_for(embedder, tokenizer)
        tools = IngestTools(self.catalog, self.settings, self.indexes, self.ocr_cache, embedder, tokenizer,
                            kfilter, ocr)
        run = IngestRun(tools, cancel or CancelToken())
        yield from run.files(folders)
        report, meter = run.report, run.meter
        if not report.cancelled and (run.changed or self.catalog.get_meta("keywords_dirty") == "1"):
            yield meter.tag(Progress("keywords", 0, 1, "updating keyword sets"), "", 0.0)
            self.refresh_keywords(tokenizer, embedder)
            yield meter.finish(Progress("keywords", 1, 1, "keyword sets up to date"))
        report.seconds = time.monotonic() - t0
        yield report

    def _open_for(self, embedder: Embedder, tokenizer: Tokenizer) -> kw.KeywordFilter:
        """Check and record the library's embedder, load the models; the ingest's keyword filter."""
        self.check_embedder(embedder)
        embedder.load()
        tokenizer.load()
        teach_user_words(self.catalog, tokenizer)
        kfilter = kw.build_filter(self.settings.retrieval.keyword_variant, tokenizer)
        with self.catalog.transaction():
            self.catalog.set_meta("embedder", embedder.identity)
            self.catalog.set_meta("dim", str(embedder.dim))
        return kfilter

    def _drop_all_vectors(self) -> None:
        with self.catalog.transaction() as db:
            db.execute("DELETE FROM documents")
            db.execute("DELETE FROM term_vectors")
            db.execute("DELETE FROM staged_vectors")
            db.execute("DELETE FROM keywords")
            # Everything measured on the old encoder's scale goes with its vectors (the
            # key 'tau' was never written, τ is 'tau_auto'; the cached cos_baseline and the stored
            # gate decision survived a re-embed with another encoder).
            db.execute(f"DELETE FROM meta WHERE key IN ({','.join('?' * len(ENCODER_SCALE_KEYS))})", ENCODER_SCALE_KEYS)
        self.indexes.clear()

    def _embed_sorted(self, embedder: Embedder, texts: list[str], cancel: CancelToken) -> npt.NDArray[np.float32]:
        """Embed in batches of similar length (less padding), returned in input order."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
        bs = self.settings.ingest.embed_batch_size
        for start in range(0, len(order), bs):
            cancel.raise_if_set()
            idx = order[start : start + bs]
            out[idx] = embedder.embed_passages([texts[i] for i in idx])
        return out

    def cosine_baseline(self) -> float:
        """b: the mean cosine of random chunk pairs in this library (the encoder's "unrelated" level).

        Computed once per library state from up to 400 stored chunk vectors (seeded) and cached
        in the catalog; 0.0 for a library with fewer than two chunks.
        """
        n = self.catalog.count("chunks")
        cached = self.catalog.get_json("cos_baseline")
        if cached and cached.get("n") == n:
            return float(cached["b"])
        ids = sorted(self.catalog.unit_ids("chunk"))
        if len(ids) < 2:
            return 0.0
        rng = np.random.default_rng(0)
        pick = set(rng.choice(ids, size=min(400, len(ids)), replace=False).tolist())
        vecs = np.stack([v for uid, v in self.catalog.iter_vectors("chunk") if uid in pick]).astype(np.float64)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        sims = vecs @ vecs.T
        b = float(sims[np.triu_indices(len(vecs), k=1)].mean())
        with self.catalog.transaction():
            self.catalog.set_json("cos_baseline", {"n": n, "b": b})
        return b

    # ------------------------------------------------------------------ keyword sets
    def refresh_keywords(self, tokenizer: Tokenizer, embedder: Embedder | None = None) -> None:
        """Recompute K_d for every chunk and document with the library's current IDF.

        kw(·) is TF-IDF with IDF learned from this library (issue "Library ingestion"),
        so adding documents moves every weight a little; recomputing from stored term
        counts keeps the sets exact without re-reading any file. Terms that newly enter
        a set get their E(t) here, so query time never encodes document terms.

        Memory is bounded by one document's term counts, one batch of keyword rows and the
        set of terms that enter a keyword set (strings), not by the library: chunk term counts
        stream from the catalog in document order and each document's counts are aggregated
        and dropped before the next. The rows are computed twice (TF-IDF is cheap next to
        the encoder): once to learn which terms need an E(t), embedded before the write
        transaction opens so that no write lock is held while the encoder runs; once more to
        write them in batches inside that transaction.
        """
        top_n = self.settings.ingest.keywords_per_chunk
        n_c, df_c = self.catalog.document_frequencies("c")
        idf_c = kw.IdfTable(n_docs=n_c, df=df_c)
        n_d, df_d = self.catalog.document_frequencies("d")
        idf_d = kw.IdfTable(n_docs=n_d, df=df_d)
        prior = tokenizer.prior_idf

        def rows() -> Iterator[tuple[str, int, tuple[Keyword, ...]]]:
            return _keyword_rows(self.catalog, idf_c, idf_d, top_n, prior)

        needed: set[str] = set()
        for _, _, kws in rows():
            needed.update(k.term for k in kws)
        missing = sorted(needed - self.catalog.known_terms())
        del needed
        learn_surfaces(self.catalog, tokenizer, missing)
        surfaces = [tokenizer.surface_form(t) for t in missing]
        vecs = embedder.embed_terms(surfaces) if (missing and embedder is not None) else None
        with self.catalog.transaction():
            self.catalog.delete_keywords("c")
            self.catalog.delete_keywords("d")
            batch: list[tuple[str, int, tuple[Keyword, ...]]] = []
            for row in rows():
                batch.append(row)
                if len(batch) >= _KEYWORD_BATCH:
                    self.catalog.add_keywords(batch)
                    batch = []
            self.catalog.add_keywords(batch)
            if vecs is not None:
                self.catalog.put_term_vectors(missing, surfaces, vecs)
            if embedder is not None:
                # Only if the catalog changed between the two passes (another writer): keep
                # "every stored keyword has its E(t)" rather than leave a torn library.
                late = self.catalog.keyword_terms_without_vector()
                if late:
                    late_surfaces = [tokenizer.surface_form(t) for t in late]
                    self.catalog.put_term_vectors(late, late_surfaces, embedder.embed_terms(late_surfaces))
            self.catalog.set_meta("keywords_dirty", "0")
            sample = self.catalog.sample_term_vectors(2000, seed=0)
            if len(sample) >= 2:
                tau = calibrate_tau(sample, self.settings.retrieval.tau_percentile, np.random.default_rng(0))
                self.catalog.set_meta("tau_auto", f"{tau:.6f}")


_KEYWORD_BATCH = 2000  # keyword sets per INSERT batch in refresh_keywords


def learn_surfaces(catalog: Catalog, tokenizer: Tokenizer, terms: Sequence[str], per_term: int = 1) -> None:
    """Let ``tokenizer`` see the words behind stemmed ``terms`` it has not met in this session.

    E(t) must embed the word ("series"), not its Snowball stem ("seri"): the tokenizer knows a
    stem's surface only from text it tokenized itself, and a term that enters a keyword set at a
    later refresh comes from a file ingested in an earlier session. Re-tokenizing one
    stored chunk that holds the term teaches it; terms whose surface is already known cost nothing.
    """
    unknown = [t for t in terms if tokenizer.surface_form(t) == t and t.isascii() and t.isalpha()]
    if not unknown:
        return
    chunk_ids: set[int] = set()
    for t in unknown:
        rows = catalog.db.execute("SELECT chunk_id FROM chunk_terms WHERE term=? LIMIT ?", (t, per_term))
        chunk_ids.update(r[0] for r in rows)
    for c in catalog.chunks(sorted(chunk_ids)).values():
        tokenizer.tokenize(c.text, c.lang)


def tfidf_from_counts(
    counts: Mapping[str, int], idf: kw.IdfTable, top_n: int, prior: kw.PriorIdf | None
) -> tuple[Keyword, ...]:
    """``kw.tfidf_keywords`` over the multiset ``counts`` without expanding it into a term list.

    Same weights, bit for bit — ``(count / total) · idf`` — and the same order (weight
    descending, ties by term), top ``top_n``.
    """
    total = sum(c for c in counts.values() if c > 0)
    if total == 0:
        return ()
    weights = ((t, (c / total) * idf.idf(t, prior)) for t, c in counts.items() if c > 0)
    return tuple(Keyword(t, w) for t, w in heapq.nsmallest(top_n, weights, key=lambda kv: (-kv[1], kv[0])))


def _keyword_rows(
    catalog: Catalog, idf_c: kw.IdfTable, idf_d: kw.IdfTable, top_n: int, prior: kw.PriorIdf | None
) -> Iterator[tuple[str, int, tuple[Keyword, ...]]]:
    """("c", chunk_id, K) for every chunk with terms and ("d", doc_id, K) for every document,
    streamed in document order: a document's row follows its last chunk's."""
    doc: int | None = None
    agg: dict[str, int] = {}
    for cid, did, counts in catalog.iter_chunk_term_counts(by_doc=True):
        if did != doc:
            if doc is not None:
                yield "d", doc, tfidf_from_counts(agg, idf_d, top_n, prior)
            doc, agg = did, {}
        yield "c", cid, tfidf_from_counts(counts, idf_c, top_n, prior)
        for t, c in counts.items():
            agg[t] = agg.get(t, 0) + c
    if doc is not None:
        yield "d", doc, tfidf_from_counts(agg, idf_d, top_n, prior)


ProgressCallback = Callable[[Progress], None]
