"""A library is a folder: ``catalog.sqlite`` plus the FAISS files beside it.

``Library.ingest`` is a generator of :class:`Progress` events that ends with an
:class:`IngestReport`. Guarantees (issue "Library ingestion"):

* one SQLite transaction per file, so a kill -9 at any moment leaves every file
  either fully in or fully out;
* unchanged files are skipped by (size, mtime) without reading them, and by
  content hash when only the mtime moved;
* the FAISS indexes are caches of the vectors stored in the catalog: saved
  atomically, checked against the catalog at open and rebuilt when they disagree;
* a bad file is recorded with its reason and the rest of the folder goes on.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import heapq
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rag_desktop.app.catalog import Catalog, CatalogError, FileState, decode_path, encode_path, printable
from rag_desktop.app.embed_step import content_key, embed_file, text_hash
from rag_desktop.app.ingest_meter import PARSE_SHARE, IngestMeter, work_sizes
from rag_desktop.app.ocr import OcrCache, ocr_document
from rag_desktop.backends.errors import MissingDependency, ModelUnavailable
from rag_desktop.backends.faiss_index import FaissIndex
from rag_desktop.backends.readers import (
    OCR_SUFFIXES,
    UnreadableDocument,
    display_name,
    is_readable_name,
    read_document,
)
from rag_desktop.backends.readers.pdf import SCANNED_REASON
from rag_desktop.backends.scan_pages import OCR_OFF_REASON, is_image
from rag_desktop.core import keywords as kw
from rag_desktop.core.causal import calibrate_tau
from rag_desktop.core.chunking import chunk_text
from rag_desktop.core.cleaning import clean_pages
from rag_desktop.core.errors import ErrorKind
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.protocols import Embedder, OcrEngine, Tokenizer
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Cancelled, CancelToken, ChunkSpan, FileProblem, Keyword, Lang, Progress

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock (see LibraryLock)
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

SIZE_LIMIT_REASON = "larger than the per-file size limit"

INDEX_FILES = {"chunk": "chunks.faiss", "doc": "docs.faiss"}
# Catalog meta keys that hold values measured with the library's encoder; a re-embed drops them.
# ("gate", "gate_auto": the calibration gate's decisions and the background calibration's state;
# "score_means": μ_T / μ_D of app.retrieval.Retriever.score_means.)
ENCODER_SCALE_KEYS = ("embedder", "dim", "tau_auto", "cos_baseline", "gate", "gate_auto", "score_means")
OCR_RETRY_REASONS = frozenset({SCANNED_REASON, OCR_OFF_REASON})
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


LOCK_FILE = "ingest.lock"


class LibraryLock:
    """One writer per library: an exclusive ``flock`` on ``<library>/ingest.lock``.

    Two ingests of one library (two terminals, or the desktop app and a terminal) would
    race on the same file rows (``UNIQUE constraint failed: documents.path``) and write
    the FAISS caches over each other. The second one is refused at once with the holder's
    pid instead of waiting behind an ingest that may take an hour. The kernel drops the
    lock when the holder exits, even after kill -9, so a stale lock cannot block anyone;
    the file itself stays (unlinking a flock file races with the next opener) and only
    says who holds it. Where ``fcntl`` does not exist (Windows) there is no lock.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._fd: int | None = None

    def holder(self) -> str:
        """What the lock file says about its holder ("pid 123: rag-desktop ingest ..."), or ''."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return ""
        return text.splitlines()[0] if text else ""

    def acquire(self) -> None:
        """Take the lock or raise :class:`CatalogError` naming the process that holds it."""
        if fcntl is None or self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise CatalogError(f"cannot create {printable(self.path)}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            who = self.holder() or "another process"
            raise CatalogError(
                f"the library {printable(self.path.parent)} is busy: an ingest is already writing to it "
                f"(held by {who}). Wait for it to finish (or stop it), then run this again."
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()}: {_command_line()}\n".encode("utf-8", "replace"))
        except OSError:
            pass  # the lock holds even if the note about its holder cannot be written (disk full)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None or fcntl is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _command_line() -> str:
    """A one-line description of this process for the lock file (the program and its arguments)."""
    args = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    line = " ".join(args)
    return (line[:200] + "…") if len(line) > 200 else line


class EmbedderMismatch(CatalogError):
    """The library was built with another embedder; querying it would compare apples with pears."""

    kind = ErrorKind.EMBEDDER_MISMATCH


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


def sha256_file(path: Path, cancel: CancelToken | None = None) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
            if cancel is not None:
                cancel.raise_if_set()
    return h.hexdigest()


IGNORE_FILE = ".ragignore"


def _ignored(path: Path, rules: list[tuple[Path, str]]) -> bool:
    """True if a ``.ragignore`` pattern (fnmatch, relative to its folder) matches ``path``."""
    for folder, pattern in rules:
        try:
            rel = path.relative_to(folder).as_posix()
        except ValueError:
            continue
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
            return True
    return False


def scan_folder(root: Path, images: bool = False) -> tuple[list[Path], list[FileProblem]]:
    """Supported files under ``root`` (sorted), and the entries that cannot be visited.

    A ``.ragignore`` file in a folder lists fnmatch patterns (one per line, ``#`` comments)
    of files that are not documents (the demo folder uses it for its SOURCES and QUESTIONS
    notes). Symlinked directories are not followed (a symlink loop cannot trap us); a
    symlinked file is read through its link when the target exists. Image files are
    documents only with ``images`` (OCR on).
    """
    found: list[Path] = []
    problems: list[FileProblem] = []

    def onerror(err: OSError) -> None:
        problems.append(FileProblem(printable(err.filename or root), f"cannot open folder: {err.strerror}"))

    ignore: list[tuple[Path, str]] = []  # (folder of the .ragignore, pattern)
    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        if IGNORE_FILE in filenames:
            try:
                lines = (here / IGNORE_FILE).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(FileProblem(printable(here / IGNORE_FILE), f"cannot read: {exc}"))
                lines = []
            ignore.extend((here, ln.strip()) for ln in lines if ln.strip() and not ln.startswith("#"))
        for name in sorted(filenames):
            p = here / name
            if is_readable_name(p) and (images or not is_image(p)) and not _ignored(p, ignore):
                found.append(p)
        for name in dirnames:
            p = Path(dirpath) / name
            if p.is_symlink():
                problems.append(FileProblem(printable(p), "symbolic link to a folder — not followed"))
    return found, problems


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
        self._indexes: dict[str, FaissIndex] = {}

    def close(self) -> None:
        self.catalog.close()

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

    # ------------------------------------------------------------------ indexes
    def index(self, level: str, dim: int) -> FaissIndex:
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
            idx = self._rebuild_index(level, dim)
        self._indexes[level] = idx
        return idx

    def _rebuild_index(self, level: str, dim: int) -> FaissIndex:
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

    def _save_indexes(self, best_effort: bool = False) -> None:
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
                    f"{exc}. Everything ingested is safe in {CATALOG_FILE}; the index file was left as it "
                    "was and is rebuilt from the catalog when the library is next opened. "
                    "Free some disk space and run ingest again."
                ) from exc

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
        t0 = time.monotonic()
        cancel = cancel or CancelToken()
        report = IngestReport()
        if reembed:
            self._drop_all_vectors()
        self.check_embedder(embedder)
        embedder.load()
        tokenizer.load()
        self._teach_user_words(tokenizer)
        kfilter = kw.build_filter(self.settings.retrieval.keyword_variant, tokenizer)
        with self.catalog.transaction():
            self.catalog.set_meta("embedder", embedder.identity)
            self.catalog.set_meta("dim", str(embedder.dim))
        chunk_index = self.index("chunk", embedder.dim)
        doc_index = self.index("doc", embedder.dim)

        roots = [Path(os.path.abspath(f)) for f in folders]
        files: list[tuple[Path, Path]] = []
        for root in roots:
            if not root.is_dir():
                report.skipped.append(FileProblem(printable(root), "not a folder (or it does not exist)"))
                continue
            with self.catalog.transaction():
                self.catalog.add_root(str(root))
            found, problems = scan_folder(root, images=ocr is not None)
            report.skipped.extend(problems)
            files.extend((root, p) for p in found)

        states = self.catalog.file_states()
        problem_states = self.catalog.problem_states()
        seen: set[str] = set()
        changed = False
        n = len(files)
        meter = IngestMeter(work_sizes(files, states))
        key = ""
        try:
            for i, (root, path) in enumerate(files, start=1):
                cancel.raise_if_set()
                meter.file_done(key)  # the previous file: stored, skipped or unchanged
                key = encode_path(path)
                seen.add(key)
                yield meter.tag(Progress("scan", i, n, display_name(path), None, key), key, 0.0)
                old = states.get(key)
                try:
                    st = path.stat()
                except OSError as exc:
                    reason = f"cannot read: {exc.strerror or exc}"
                    changed |= self._drop_stale(key, old, reason, None, chunk_index, doc_index, report)
                    report.skipped.append(FileProblem(printable(path), reason))
                    continue
                too_big = self._size_problem(st.st_size)
                if too_big is not None:
                    changed |= self._drop_stale(key, old, too_big, st, chunk_index, doc_index, report)
                    report.skipped.append(FileProblem(printable(path), too_big))
                    continue
                if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                    report.unchanged.append(printable(path))
                    continue
                prob = problem_states.get(key)
                if prob is not None and prob[2].startswith(SIZE_LIMIT_REASON):
                    prob = None  # the file fits the limit now (or the limit was raised): read it
                # A scan skipped while OCR was off is tried again once OCR is on.
                if prob is not None and prob[0] == st.st_size and prob[1] == st.st_mtime_ns \
                        and not (ocr is not None and prob[2] in OCR_RETRY_REASONS):
                    changed |= self._drop_stale(key, old, prob[2], None, chunk_index, doc_index, report)
                    report.skipped.append(FileProblem(printable(path), prob[2]))
                    continue
                try:
                    digest = sha256_file(path, cancel)
                except OSError as exc:
                    reason = f"cannot read: {exc.strerror or exc}"
                    changed |= self._drop_stale(key, old, reason, None, chunk_index, doc_index, report)
                    report.skipped.append(FileProblem(printable(path), reason))
                    continue
                if old is not None and old.sha256 == digest:
                    with self.catalog.transaction():
                        self.catalog.touch_document(old.doc_id, st.st_size, st.st_mtime_ns)
                    report.unchanged.append(printable(path))
                    continue
                try:
                    ocr_text = None
                    if ocr is not None and path.suffix.lower() in OCR_SUFFIXES:
                        try:
                            ocr_text = yield from meter.follow(ocr_document(
                                path, digest, ocr, self.ocr_cache, self.settings.ingest.ocr_dpi, cancel, key),
                                key, 0.0, PARSE_SHARE)
                        except (MissingDependency, ModelUnavailable) as exc:
                            # OCR cannot run here: the text pages are still read; a scan-only file is
                            # skipped as without OCR, and tried again by the next ingest.
                            log.warning("OCR unavailable for %s: %s", printable(path), exc)
                            ocr_text = None
                    yield meter.tag(Progress("parse", i, n, display_name(path), None, key), key,
                                    PARSE_SHARE if ocr_text else 0.0)
                    prepared = self._prepare(path, tokenizer, kfilter, cancel, ocr_text)
                except UnreadableDocument as exc:
                    changed |= self._drop_stale(key, old, exc.reason, st, chunk_index, doc_index, report)
                    report.skipped.append(FileProblem(printable(path), exc.reason))
                    continue
                vecs = yield from meter.follow(embed_file(
                    self.catalog, key, f"{display_name(path)} ({i}/{n})", [c.text for c in prepared.chunks], embedder,
                    self.settings.ingest.embed_batch_size, cancel, content_key(digest)), key, PARSE_SHARE, 1.0)
                changed = True  # set first: a failure after the commit below still saves the indexes
                self._store_file(key, root, path, digest, st, prepared, vecs, old, tokenizer, embedder, cancel,
                                 (chunk_index, doc_index), report)

            meter.file_done(key)
            changed |= self._forget_vanished(roots, states, problem_states, seen, chunk_index, doc_index, report)
        except Cancelled:
            report.cancelled = True
        except BaseException:
            # Disk full, Ctrl-C, the consumer closing the generator: save what is committed
            # if possible, but never let a second failure hide the first.
            if changed:
                self._save_indexes(best_effort=True)
            raise
        if changed:
            self._save_indexes()
        if not report.cancelled and (changed or self.catalog.get_meta("keywords_dirty") == "1"):
            yield meter.tag(Progress("keywords", 0, 1, "updating keyword sets"), "", 0.0)
            self.refresh_keywords(tokenizer, embedder)
            yield meter.finish(Progress("keywords", 1, 1, "keyword sets up to date"))
        report.seconds = time.monotonic() - t0
        yield report

    def _store_file(self, key: str, root: Path, path: Path, digest: str, st: os.stat_result,
                    prepared: Library._Prepared, vecs: npt.NDArray[np.float32], old: FileState | None,
                    tokenizer: Tokenizer, embedder: Embedder, cancel: CancelToken,
                    indexes: tuple[FaissIndex, FaissIndex], report: IngestReport) -> None:
        """One read and embedded file enters the library in one transaction (replacing its previous
        version), then the chunk and document indexes (``indexes``) and the report."""
        doc_vec = vecs.mean(axis=0)  # paper 000 §4.1: mean-pooled per file
        doc_vec = (doc_vec / max(float(np.linalg.norm(doc_vec)), 1e-12)).astype(np.float32)
        new_terms = self._missing_terms(prepared.candidate_terms)
        surfaces = [tokenizer.surface_form(t) for t in new_terms]
        term_vecs = embedder.embed_terms(surfaces) if new_terms else None
        cancel.raise_if_set()
        with self.catalog.transaction():
            removed_chunks: list[int] = []
            if old is not None:
                removed_chunks = self.catalog.delete_document(old.doc_id)
            doc_id, chunk_ids = self.catalog.insert_document(
                path=key,
                root=str(root),
                sha256=digest,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                title=prepared.title,
                lang=prepared.lang,
                n_pages=prepared.n_pages,
                kind=prepared.kind,
                warnings=prepared.warnings,
                doc_vector=doc_vec,
                chunks=prepared.chunks,
                chunk_vectors=vecs,
                chunk_term_counts=prepared.counts,
            )
            if term_vecs is not None:
                self.catalog.put_term_vectors(new_terms, surfaces, term_vecs)
            self.catalog.delete_staged(key)
            self.catalog.delete_staged(content_key(digest))
            self.catalog.set_meta("keywords_dirty", "1")
        if old is not None and old.sha256 != digest:
            self.ocr_cache.discard(old.sha256)
        if old is not None:
            indexes[0].remove(np.asarray(removed_chunks, dtype=np.int64))
            indexes[1].remove(np.asarray([old.doc_id], dtype=np.int64))
            report.updated.append(printable(path))
        else:
            report.added.append(printable(path))
        report.warnings.extend(FileProblem(printable(path), w) for w in prepared.warnings)
        indexes[0].add(np.asarray(chunk_ids, dtype=np.int64), vecs)
        indexes[1].add(np.asarray([doc_id], dtype=np.int64), doc_vec[None, :])
        report.chunks_embedded += len(chunk_ids)
        if len(report.added) + len(report.updated) >= 1:
            self._save_indexes_every(30.0)

    def _forget_vanished(self, roots: Sequence[Path], states: dict[str, FileState],
                         problem_states: dict[str, tuple[int, int, str]], seen: set[str],
                         chunk_index: FaissIndex, doc_index: FaissIndex, report: IngestReport) -> bool:
        """Files that disappeared from the ingested folders leave the library, and so do their
        recorded problems and staged vectors; returns whether the library changed."""
        changed = False
        kept_before = [p for p in self.catalog.staged_counts() if p.startswith(content_key(""))]
        root_set = {str(r) for r in roots}
        for path_s, state in states.items():
            if path_s in seen:
                continue
            doc_root = self._root_of(path_s, root_set)
            if doc_root is None or decode_path(path_s).exists():
                continue
            with self.catalog.transaction():
                self._keep_vectors(state)
                removed_chunks = self.catalog.delete_document(state.doc_id)
                self.catalog.set_meta("keywords_dirty", "1")
            chunk_index.remove(np.asarray(removed_chunks, dtype=np.int64))
            doc_index.remove(np.asarray([state.doc_id], dtype=np.int64))
            report.removed.append(printable(decode_path(path_s)))
            changed = True
        with self.catalog.transaction():
            for p in kept_before:  # a removed file's vectors wait one ingest for its bytes to come back
                self.catalog.delete_staged(p)
            for p in list(problem_states):
                if p not in seen and self._root_of(p, root_set) is not None and not decode_path(p).exists():
                    self.catalog.forget_problem(p)
            for p in self.catalog.staged_counts():
                if p not in seen and self._root_of(p, root_set) is not None and not decode_path(p).exists():
                    self.catalog.delete_staged(p)
        return changed

    def _keep_vectors(self, state: FileState) -> None:
        """A vanished file's chunk vectors, staged under its content hash (embed_step.content_key): the
        same bytes added back — a file moved out and back, a folder re-attached — reuse them instead of
        being embedded again. They are kept until the end of the next ingest (one chance; the bound)."""
        vecs = dict(self.catalog.chunk_vectors_of([state.doc_id]).get(state.doc_id, []))
        texts = {c.chunk_id: c.text for c in self.catalog.chunks_of(state.doc_id)}
        self.catalog.stage_vectors(content_key(state.sha256),
                                   ((text_hash(texts[cid]), v) for cid, v in vecs.items() if cid in texts))

    def _drop_stale(
        self,
        key: str,
        old: FileState | None,
        reason: str,
        st: os.stat_result | None,
        chunk_index: FaissIndex,
        doc_index: FaissIndex,
        report: IngestReport,
    ) -> bool:
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
        chunk_index.remove(np.asarray(removed_chunks, dtype=np.int64))
        doc_index.remove(np.asarray([old.doc_id], dtype=np.int64))
        report.removed.append(printable(decode_path(key)))
        return True

    _last_save = 0.0

    def _save_indexes_every(self, seconds: float) -> None:
        now = time.monotonic()
        if now - self._last_save >= seconds:
            self._save_indexes()
            self._last_save = now

    @staticmethod
    def _root_of(path: str, roots: set[str]) -> str | None:
        full = str(decode_path(path))
        for r in roots:
            if full.startswith(r.rstrip(os.sep) + os.sep):
                return r
        return None

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
        for name in INDEX_FILES.values():
            (self.folder / name).unlink(missing_ok=True)
        self._indexes.clear()

    @dataclass(frozen=True)
    class _Prepared:
        title: str
        lang: Lang
        n_pages: int
        kind: str
        warnings: tuple[str, ...]
        chunks: list[ChunkSpan]
        counts: list[dict[str, int]]
        candidate_terms: list[str]

    def _teach_user_words(self, tokenizer: Tokenizer) -> None:
        words = self.catalog.get_json("user_words") or []
        if words:
            tokenizer.add_words(words)

    def _learn_user_words(self, text: str, tokenizer: Tokenizer) -> None:
        """Improved kw(·): grow the library's CJK user dictionary from this document.

        jieba splits domain words (久咳 → 久/咳); frequent, cohesive Han sequences of
        the document become dictionary words before it is segmented. The dictionary
        is stored in the library so queries are segmented the same way. (Documents
        ingested earlier keep their segmentation until re-ingested: an order
        dependence we accept rather than re-tokenising the whole library.)
        """
        if self.settings.retrieval.keyword_variant != "improved":
            return
        # discover_cjk_terms holds every distinct n-gram: bound the sample it sees.
        found = kw.discover_cjk_terms([text[:200_000]], min_count=3)
        if not found:
            return
        known = set(self.catalog.get_json("user_words") or [])
        new = [w for w in found if w not in known]
        if new:
            tokenizer.add_words(new)
            with self.catalog.transaction():
                self.catalog.set_json("user_words", sorted(known | set(new)))

    def _prepare(
        self, path: Path, tokenizer: Tokenizer, kfilter: kw.KeywordFilter, cancel: CancelToken,
        ocr_text: Mapping[int, str] | None = None,
    ) -> Library._Prepared:
        parsed = read_document(path, cancel, ocr_text=ocr_text)
        cleaned = clean_pages(parsed.pages)
        ing = self.settings.ingest
        spans = chunk_text(cleaned, size=ing.chunk_size, overlap=ing.chunk_overlap)
        if not spans:
            raise UnreadableDocument(path, "no text after cleaning (empty document?)")
        self._learn_user_words(cleaned.text, tokenizer)
        counts = [
            dict(Counter(kw.filter_terms(tokenizer.tokenize(s.text, s.lang), kfilter, query=False))) for s in spans
        ]
        # Terms that may enter a keyword set: the most frequent per chunk, generously
        # (the final top-n depends on the corpus IDF, known only after the whole ingest).
        cand: set[str] = set()
        for c in counts:
            cand.update(t for t, _ in sorted(c.items(), key=lambda x: (-x[1], x[0]))[: 3 * ing.keywords_per_chunk])
        lang = detect_lang(cleaned.text[:20000])
        return Library._Prepared(
            title=parsed.title,
            lang=lang,
            n_pages=len(parsed.pages),
            kind=parsed.kind,
            warnings=parsed.warnings,
            chunks=spans,
            counts=counts,
            candidate_terms=sorted(cand),
        )

    def _size_problem(self, size: int) -> str | None:
        """The reason to skip a file of ``size`` bytes under ``ingest.max_file_mb``, or None."""
        limit = self.settings.ingest.max_file_mb
        if limit <= 0 or size <= limit * 1_000_000:
            return None
        mb = size / 1_000_000
        shown = f"{mb:,.0f}" if mb >= 10 else f"{mb:.2g}"
        return (f"{SIZE_LIMIT_REASON} ({shown} MB > ingest.max_file_mb = {limit:g} MB) — "
                "raise max_file_mb under [ingest] in settings.toml (0: no limit) to include it")

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

    def _missing_terms(self, terms: Sequence[str]) -> list[str]:
        if not terms:
            return []
        have = self.catalog.term_vectors(terms)
        return [t for t in terms if t not in have]

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
