"""The files of one ingest, step by step (``Library.ingest``; docs/architecture.md "Storage and crash safety").

The steps, in order: gather the folders' files; for each file, check it (unchanged, skipped with
its reason, or to read: this is where it is hashed), then read it (OCR first where it needs it),
embed its chunks and store it in one transaction; then the files that disappeared leave. The
library around the run (opening the embedder, the keyword sets at the end) is app.library's.

A file read by an older text version (doc_prepare.TEXT_VERSION, recorded per document) is read
again though unchanged: if its text comes out the same it stays as it is (its version recorded), if
the text changed it is stored anew, with the vectors of its unchanged chunks kept (keep_vectors).

A cancel stops between steps and never inside a file's transaction: every file is fully in (its
new version or its old one) or not in.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rag_desktop.app.catalog import Catalog, FileState, decode_path, encode_path, printable
from rag_desktop.app.doc_prepare import TEXT_VERSION, Prepared, prepare_file, same_text
from rag_desktop.app.embed_step import content_key, embed_file, text_hash
from rag_desktop.app.folder_scan import scan_folder, sha256_file
from rag_desktop.app.index_cache import IndexCache
from rag_desktop.app.ingest_meter import PARSE_SHARE, IngestMeter, work_sizes
from rag_desktop.app.ocr import OcrCache, ocr_document
from rag_desktop.backends.errors import MissingDependency, ModelUnavailable
from rag_desktop.backends.readers import OCR_SUFFIXES, UnreadableDocument, display_name
from rag_desktop.backends.readers.pdf import SCANNED_REASON
from rag_desktop.backends.scan_pages import OCR_OFF_REASON
from rag_desktop.core import keywords as kw
from rag_desktop.core.protocols import Embedder, OcrEngine, Tokenizer
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Cancelled, CancelToken, FileProblem, Progress

log = logging.getLogger(__name__)

SIZE_LIMIT_REASON = "larger than the per-file size limit"
OCR_RETRY_REASONS = frozenset({SCANNED_REASON, OCR_OFF_REASON})


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[FileProblem] = field(default_factory=list)
    # Read, but with a caveat the person should see ("the PDF is damaged and was repaired on
    # opening; some text may be missing"): one entry per (file, warning) added or updated now.
    warnings: list[FileProblem] = field(default_factory=list)
    cancelled: bool = False
    seconds: float = 0.0
    chunks_embedded: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": len(self.unchanged),
            "skipped": [{"path": p.path, "reason": p.reason} for p in self.skipped],
            "warnings": [{"path": p.path, "warning": p.reason} for p in self.warnings],
            "cancelled": self.cancelled,
            "seconds": round(self.seconds, 3),
            "chunks_embedded": self.chunks_embedded,
        }


@dataclass(frozen=True)
class FileWork:
    """A file the check found new or changed: what reading and storing it needs."""

    root: Path
    path: Path
    key: str
    old: FileState | None
    st: os.stat_result
    digest: str
    reread: bool = False  # unchanged on disk, read again for a newer text version


@dataclass(frozen=True)
class IngestTools:
    """What one run works with: the library's parts and the models (opened by ``Library.ingest``)."""

    catalog: Catalog
    settings: Settings
    indexes: IndexCache
    ocr_cache: OcrCache
    embedder: Embedder
    tokenizer: Tokenizer
    kfilter: kw.KeywordFilter
    ocr: OcrEngine | None


def size_problem(size: int, limit_mb: float) -> str | None:
    """The reason to skip a file of ``size`` bytes under ``ingest.max_file_mb``, or None."""
    if limit_mb <= 0 or size <= limit_mb * 1_000_000:
        return None
    mb = size / 1_000_000
    shown = f"{mb:,.0f}" if mb >= 10 else f"{mb:.2g}"
    return (f"{SIZE_LIMIT_REASON} ({shown} MB > ingest.max_file_mb = {limit_mb:g} MB) — "
            "raise max_file_mb under [ingest] in settings.toml (0: no limit) to include it")


def root_of(path: str, roots: set[str]) -> str | None:
    """The ingested folder (of ``roots``) that holds the file stored as ``path``, or None."""
    full = str(decode_path(path))
    for r in roots:
        if full.startswith(r.rstrip(os.sep) + os.sep):
            return r
    return None


def keep_vectors(catalog: Catalog, state: FileState) -> None:
    """A vanished file's chunk vectors, staged under its content hash (embed_step.content_key): the
    same bytes added back — a file moved out and back, a folder re-attached — reuse them instead of
    being embedded again. They are kept until the end of the next ingest (one chance; the bound)."""
    vecs = dict(catalog.chunk_vectors_of([state.doc_id]).get(state.doc_id, []))
    texts = {c.chunk_id: c.text for c in catalog.chunks_of(state.doc_id)}
    catalog.stage_vectors(content_key(state.sha256),
                          ((text_hash(texts[cid]), v) for cid, v in vecs.items() if cid in texts))


class IngestRun:
    """The file steps of one ingest (module doc); :meth:`files` yields their events."""

    def __init__(self, tools: IngestTools, cancel: CancelToken) -> None:
        self.t = tools
        self.catalog = tools.catalog
        self.cancel = cancel
        self.report = IngestReport()
        self.changed = False  # a document entered or left: the indexes are saved, the keyword sets redone
        self.seen: set[str] = set()
        self.meter = IngestMeter({})
        dim = tools.embedder.dim
        self.chunk_index = tools.indexes.get("chunk", dim)
        self.doc_index = tools.indexes.get("doc", dim)

    def files(self, folders: Sequence[Path]) -> Iterator[Progress]:
        """Check, read and store every file of ``folders``, then drop the vanished ones; the indexes
        are saved at the end, also when the run fails (best effort, never hiding the failure)."""
        roots, files = self._gather(folders)
        states = self.catalog.file_states()
        problem_states = self.catalog.problem_states()
        n = len(files)
        current = {k: v for k, v in states.items() if v.text_version >= TEXT_VERSION}  # the others are read again
        self.meter = meter = IngestMeter(work_sizes(files, current))
        key = ""
        try:
            for i, (root, path) in enumerate(files, start=1):
                self.cancel.raise_if_set()
                meter.file_done(key)  # the previous file: stored, skipped or unchanged
                key = encode_path(path)
                self.seen.add(key)
                yield meter.tag(Progress("scan", i, n, display_name(path), None, key), key, 0.0)
                work = self._check(root, path, key, states.get(key), problem_states.get(key))
                if work is not None:
                    yield from self._add_file(work, i, n)
            meter.file_done(key)
            self._forget_vanished(roots, states, problem_states)
        except Cancelled:
            self.report.cancelled = True
        except BaseException:
            # Disk full, Ctrl-C, the consumer closing the generator: save what is committed
            # if possible, but never let a second failure hide the first.
            if self.changed:
                self.t.indexes.save(best_effort=True)
            raise
        if self.changed:
            self.t.indexes.save()

    def _gather(self, folders: Sequence[Path]) -> tuple[list[Path], list[tuple[Path, Path]]]:
        """The ingested folders (absolute) and their documents as (folder, file)."""
        roots = [Path(os.path.abspath(f)) for f in folders]
        files: list[tuple[Path, Path]] = []
        for root in roots:
            if not root.is_dir():
                self.report.skipped.append(FileProblem(printable(root), "not a folder (or it does not exist)"))
                continue
            with self.catalog.transaction():
                self.catalog.add_root(str(root))
            found, problems = scan_folder(root, images=self.t.ocr is not None)
            self.report.skipped.extend(problems)
            files.extend((root, p) for p in found)
        return roots, files

    # ------------------------------------------------------------------ check
    def _check(self, root: Path, path: Path, key: str, old: FileState | None,
               prob: tuple[int, int, str] | None) -> FileWork | None:
        """The file to read, or None when it is unchanged or skipped (its reason recorded)."""
        try:
            st = path.stat()
        except OSError as exc:
            self._skip(path, key, old, f"cannot read: {exc.strerror or exc}", None)
            return None
        too_big = size_problem(st.st_size, self.t.settings.ingest.max_file_mb)
        if too_big is not None:
            self._skip(path, key, old, too_big, st)
            return None
        if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
            if old.text_version < TEXT_VERSION:
                return FileWork(root, path, key, old, st, old.sha256, reread=True)
            self.report.unchanged.append(printable(path))
            return None
        if prob is not None and prob[2].startswith(SIZE_LIMIT_REASON):
            prob = None  # the file fits the limit now (or the limit was raised): read it
        # A scan skipped while OCR was off is tried again once OCR is on.
        if prob is not None and prob[0] == st.st_size and prob[1] == st.st_mtime_ns \
                and not (self.t.ocr is not None and prob[2] in OCR_RETRY_REASONS):
            self._skip(path, key, old, prob[2], None)
            return None
        try:
            digest = sha256_file(path, self.cancel)
        except OSError as exc:
            self._skip(path, key, old, f"cannot read: {exc.strerror or exc}", None)
            return None
        if old is not None and old.sha256 == digest:
            with self.catalog.transaction():
                self.catalog.touch_document(old.doc_id, st.st_size, st.st_mtime_ns)
            if old.text_version < TEXT_VERSION:
                return FileWork(root, path, key, old, st, digest, reread=True)
            self.report.unchanged.append(printable(path))
            return None
        return FileWork(root, path, key, old, st, digest)

    def _skip(self, path: Path, key: str, old: FileState | None, reason: str, st: os.stat_result | None) -> None:
        self.changed |= self._drop_stale(key, old, reason, st)
        self.report.skipped.append(FileProblem(printable(path), reason))

    def _drop_stale(self, key: str, old: FileState | None, reason: str, st: os.stat_result | None) -> bool:
        """A file that can no longer be read leaves the library.

        Its old text would otherwise stay searchable — and, being the only copy, keep coming
        up as the top hit — while the file on disk says something else (or nothing). The
        document, its chunks, vectors and keyword sets go in one transaction, and the reason
        is recorded as the file's problem (shown with the skipped files) when ``st`` is known.
        Returns True if a document was removed.
        """
        with self.catalog.transaction():
            removed_chunks = self.catalog.delete_document(old.doc_id) if old is not None else []
            self.catalog.delete_staged(key)
            if st is not None:
                self.catalog.record_problem(key, reason, st.st_size, st.st_mtime_ns)
            if old is not None:
                self.catalog.set_meta("keywords_dirty", "1")
        if old is None:
            return False
        self._unindex(old.doc_id, removed_chunks)
        self.report.removed.append(printable(decode_path(key)))
        return True

    def _unindex(self, doc_id: int, chunk_ids: list[int]) -> None:
        self.chunk_index.remove(np.asarray(chunk_ids, dtype=np.int64))
        self.doc_index.remove(np.asarray([doc_id], dtype=np.int64))

    # ------------------------------------------------------------------ read, embed, store
    def _add_file(self, w: FileWork, i: int, n: int) -> Iterator[Progress]:
        """Read the ``i``-th of ``n`` files, embed its chunks and store it (or skip it if unreadable)."""
        meter, t = self.meter, self.t
        if w.reread and t.ocr is None and t.ocr_cache.has(w.digest):
            # Its recognised pages need OCR, off now: kept as read, and read again once OCR is back.
            self.report.unchanged.append(printable(w.path))
            return
        try:
            ocr_text = yield from self._ocr(w)
            yield meter.tag(Progress("parse", i, n, display_name(w.path), None, w.key), w.key,
                            PARSE_SHARE if ocr_text else 0.0)
            prepared = prepare_file(w.path, self.catalog, t.settings, t.tokenizer, t.kfilter, self.cancel, ocr_text)
        except UnreadableDocument as exc:
            if w.reread and w.old is not None:  # the file did not change, the reader did: its text stays
                log.warning("kept as read before, the present reader fails on %s: %s", printable(w.path), exc.reason)
                self._mark_read(w.old)
                self.report.unchanged.append(printable(w.path))
                return
            self._skip(w.path, w.key, w.old, exc.reason, w.st)
            return
        if w.reread and w.old is not None and not self._reread_changed(w.old, prepared):
            self._mark_read(w.old)
            self.report.unchanged.append(printable(w.path))
            return
        vecs = yield from meter.follow(embed_file(
            self.catalog, w.key, f"{display_name(w.path)} ({i}/{n})", [c.text for c in prepared.chunks], t.embedder,
            t.settings.ingest.embed_batch_size, self.cancel, content_key(w.digest)), w.key, PARSE_SHARE, 1.0)
        self.changed = True  # set first: a failure after the commit below still saves the indexes
        self._store(w, prepared, vecs)

    def _mark_read(self, old: FileState) -> None:
        """A file read again for a newer text version that stays as it was: read by this version."""
        with self.catalog.transaction():
            self.catalog.set_text_version(old.doc_id, TEXT_VERSION)

    def _reread_changed(self, old: FileState, prepared: Prepared) -> bool:
        """Whether a file read again for a newer text version reads differently; if so, its chunks'
        vectors wait under its content key (embed_file reuses those of the chunks that stayed)."""
        doc = self.catalog.document(old.doc_id)
        if doc is not None and same_text(prepared, doc, self.catalog.chunks_of(old.doc_id)):
            return False
        with self.catalog.transaction():
            keep_vectors(self.catalog, old)
        return True

    def _ocr(self, w: FileWork) -> Generator[Progress, None, Mapping[int, str] | None]:
        """The recognised text of the pages that need OCR (app/ocr.py), its steps relayed; None
        without OCR or where it cannot run."""
        t = self.t
        if t.ocr is None or w.path.suffix.lower() not in OCR_SUFFIXES:
            return None
        try:
            return (yield from self.meter.follow(ocr_document(
                w.path, w.digest, t.ocr, t.ocr_cache, t.settings.ingest.ocr_dpi, self.cancel, w.key),
                w.key, 0.0, PARSE_SHARE))
        except (MissingDependency, ModelUnavailable) as exc:
            # OCR cannot run here: the text pages are still read; a scan-only file is
            # skipped as without OCR, and tried again by the next ingest.
            log.warning("OCR unavailable for %s: %s", printable(w.path), exc)
            return None

    def _missing_terms(self, terms: Sequence[str]) -> list[str]:
        if not terms:
            return []
        have = self.catalog.term_vectors(terms)
        return [t for t in terms if t not in have]

    def _store(self, w: FileWork, prepared: Prepared, vecs: npt.NDArray[np.float32]) -> None:
        """One read and embedded file enters the library in one transaction (replacing its previous
        version), then the chunk and document indexes and the report."""
        doc_vec = vecs.mean(axis=0)  # paper 000 §4.1: mean-pooled per file
        doc_vec = (doc_vec / max(float(np.linalg.norm(doc_vec)), 1e-12)).astype(np.float32)
        new_terms = self._missing_terms(prepared.candidate_terms)
        surfaces = [self.t.tokenizer.surface_form(t) for t in new_terms]
        term_vecs = self.t.embedder.embed_terms(surfaces) if new_terms else None
        self.cancel.raise_if_set()
        old, st, report = w.old, w.st, self.report
        with self.catalog.transaction():
            removed_chunks: list[int] = []
            if old is not None:
                removed_chunks = self.catalog.delete_document(old.doc_id)
            doc_id, chunk_ids = self.catalog.insert_document(
                path=w.key, root=str(w.root), sha256=w.digest, size=st.st_size, mtime_ns=st.st_mtime_ns,
                title=prepared.title, lang=prepared.lang, n_pages=prepared.n_pages, kind=prepared.kind,
                warnings=prepared.warnings, doc_vector=doc_vec, chunks=prepared.chunks, chunk_vectors=vecs,
                chunk_term_counts=prepared.counts, text_version=TEXT_VERSION,
            )
            if term_vecs is not None:
                self.catalog.put_term_vectors(new_terms, surfaces, term_vecs)
            self.catalog.delete_staged(w.key)
            self.catalog.delete_staged(content_key(w.digest))
            self.catalog.set_meta("keywords_dirty", "1")
        if old is not None and old.sha256 != w.digest:
            self.t.ocr_cache.discard(old.sha256)
        if old is not None:
            self._unindex(old.doc_id, removed_chunks)
            report.updated.append(printable(w.path))
        else:
            report.added.append(printable(w.path))
        report.warnings.extend(FileProblem(printable(w.path), x) for x in prepared.warnings)
        self.chunk_index.add(np.asarray(chunk_ids, dtype=np.int64), vecs)
        self.doc_index.add(np.asarray([doc_id], dtype=np.int64), doc_vec[None, :])
        report.chunks_embedded += len(chunk_ids)
        if len(report.added) + len(report.updated) >= 1:
            self.t.indexes.save_every(30.0)

    # ------------------------------------------------------------------ files that left
    def _forget_vanished(self, roots: Sequence[Path], states: Mapping[str, FileState],
                         problem_states: Mapping[str, tuple[int, int, str]]) -> None:
        """Files that disappeared from the ingested folders leave the library (their vectors kept one
        ingest by content hash: keep_vectors), and so do their recorded problems and staged vectors."""
        kept_before = [p for p in self.catalog.staged_counts() if p.startswith(content_key(""))]
        root_set = {str(r) for r in roots}
        for path_s, state in states.items():
            if path_s in self.seen:
                continue
            if root_of(path_s, root_set) is None or decode_path(path_s).exists():
                continue
            with self.catalog.transaction():
                keep_vectors(self.catalog, state)
                removed_chunks = self.catalog.delete_document(state.doc_id)
                self.catalog.set_meta("keywords_dirty", "1")
            self._unindex(state.doc_id, removed_chunks)
            self.report.removed.append(printable(decode_path(path_s)))
            self.changed = True
        with self.catalog.transaction():
            for p in kept_before:  # a removed file's vectors wait one ingest for its bytes to come back
                self.catalog.delete_staged(p)
            for p in list(problem_states):
                if p not in self.seen and root_of(p, root_set) is not None and not decode_path(p).exists():
                    self.catalog.forget_problem(p)
            for p in self.catalog.staged_counts():
                if p not in self.seen and root_of(p, root_set) is not None and not decode_path(p).exists():
                    self.catalog.delete_staged(p)
