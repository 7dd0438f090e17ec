"""``catalog.sqlite``: the source of truth of a library.

Everything needed to answer (documents, chunks, their vectors, term counts,
keyword sets, term vectors) is stored here, one SQLite transaction per file, so
a crash or kill -9 at any moment leaves the previous state intact. The FAISS
files beside it are derived caches: when they disagree with the catalog (a crash
between the commit and the index save) they are rebuilt from the stored vectors.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.types import Chunk, ChunkSpan, Document, FileProblem, Keyword, Lang

SCHEMA_VERSION = 1
CATALOG_NAME = "catalog.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    title TEXT NOT NULL,
    lang TEXT NOT NULL,
    n_pages INTEGER NOT NULL,
    kind TEXT NOT NULL,
    warnings TEXT NOT NULL DEFAULT '[]',
    vector BLOB,
    text_version INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    page_start INTEGER NOT NULL,
    page_end INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    lang TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
-- term counts per chunk: kw(·) weights are recomputed from these when the corpus IDF moves
CREATE TABLE IF NOT EXISTS chunk_terms (
    chunk_id INTEGER NOT NULL REFERENCES chunks(chunk_id) ON DELETE CASCADE,
    term TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (chunk_id, term)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunk_terms_term ON chunk_terms(term);
-- the stored keyword sets K_d (top-n by TF-IDF), per chunk (unit_kind 'c') and per document ('d')
CREATE TABLE IF NOT EXISTS keywords (
    unit_kind TEXT NOT NULL,
    unit_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    term TEXT NOT NULL,
    weight REAL NOT NULL,
    PRIMARY KEY (unit_kind, unit_id, rank)
) WITHOUT ROWID;
-- E(t) of each stored term; ``surface`` is the readable word embedded (terms may be stems)
CREATE TABLE IF NOT EXISTS term_vectors (term TEXT PRIMARY KEY, surface TEXT NOT NULL, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS problems (
    path TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS roots (path TEXT PRIMARY KEY);
-- vectors of a large file being embedded, committed in parts so an interrupt keeps the work;
-- keyed by the chunk text's hash, never searched: the file enters documents/chunks (and the
-- index) in one transaction once every chunk has its vector, and these rows go then.
CREATE TABLE IF NOT EXISTS staged_vectors (
    path TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (path, text_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS translations (
    chunk_id INTEGER NOT NULL REFERENCES chunks(chunk_id) ON DELETE CASCADE,
    target_lang TEXT NOT NULL,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (chunk_id, target_lang, model)
);
"""


class CatalogError(RagError, RuntimeError):
    """The catalog cannot be used (wrong embedder, newer schema, not writable)."""

    kind = ErrorKind.LIBRARY


_RAW_PREFIX = "fsb64:"


def encode_path(path: Path | str) -> str:
    """A path as catalog text. Names that are not valid UTF-8 (possible on Linux) are kept
    exactly, as base64 of their bytes, since SQLite text cannot hold lone surrogates."""
    s = str(path)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return _RAW_PREFIX + base64.b64encode(os.fsencode(path)).decode("ascii")


def decode_path(text: str) -> Path:
    if text.startswith(_RAW_PREFIX):
        return Path(os.fsdecode(base64.b64decode(text[len(_RAW_PREFIX) :])))
    return Path(text)


def printable(path: Path | str) -> str:
    """The path as text a person (and JSON, Qt, a log) can take: undecodable bytes become U+FFFD."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _blob(v: npt.NDArray[np.float32]) -> bytes:
    return np.ascontiguousarray(v, dtype=np.float32).tobytes()


def _vec(b: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(b, dtype=np.float32)


@dataclass(frozen=True)
class FileState:
    doc_id: int
    sha256: str
    size: int
    mtime_ns: int
    text_version: int = 1  # the text version the file was read with (app.doc_prepare.TEXT_VERSION)


class Catalog:
    """Thin typed wrapper around the SQLite file. One instance per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we open transactions explicitly (BEGIN IMMEDIATE),
        # so a file's rows land all together or not at all.
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")
        version = self._schema_version()
        if version is None:
            # A new catalog gets its schema and version row in one transaction: a kill -9 while
            # a library is being created leaves either no tables (the WAL pragma above already
            # made the file) or all of them with the version.
            self.db.executescript(
                "BEGIN IMMEDIATE;" + _SCHEMA
                + f"INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');COMMIT;"
            )
            version = self.get_meta("schema_version")
        else:
            # An existing catalog gets the tables added since it was made (IF NOT EXISTS: the
            # ones it has are left alone, without taking the write lock), and the columns.
            self.db.executescript(_SCHEMA)
            self._add_columns()
        if version is not None and int(version) > SCHEMA_VERSION:
            raise CatalogError(f"{path}: made by a newer rag_desktop (schema {version}); update the app")

    def _add_columns(self) -> None:
        """Columns added to a table after catalogs were made with it. documents.text_version: the
        text version each file was read with (app.doc_prepare.TEXT_VERSION); files read before it
        was recorded count as version 1."""
        cols = {str(r[1]) for r in self.db.execute("PRAGMA table_info(documents)")}
        if "text_version" not in cols:
            self.db.execute("ALTER TABLE documents ADD COLUMN text_version INTEGER NOT NULL DEFAULT 1")

    def _schema_version(self) -> str | None:
        """The stored schema version, or None while the schema has not been created."""
        try:
            return self.get_meta("schema_version")
        except sqlite3.OperationalError:  # no meta table yet
            return None

    def close(self) -> None:
        # Closing checkpoints the WAL into the main file, which fails on a full disk: the WAL
        # then stays and SQLite replays it at the next open, so nothing is lost — and the error
        # that stopped the ingest (already on its way to the user) must not be replaced by this one.
        try:
            self.db.close()
        except sqlite3.Error as exc:
            logging.getLogger(__name__).warning("closing %s: %s", printable(self.path), exc)

    # ------------------------------------------------------------------ meta
    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def get_json(self, key: str) -> Any:
        raw = self.get_meta(key)
        return None if raw is None else json.loads(raw)

    def set_json(self, key: str, value: Any) -> None:
        self.set_meta(key, json.dumps(value, ensure_ascii=False))

    # ------------------------------------------------------------------ transactions
    def transaction(self) -> _Tx:
        return _Tx(self.db, self.path)

    # ------------------------------------------------------------------ documents
    def file_states(self) -> dict[str, FileState]:
        rows = self.db.execute("SELECT path, doc_id, sha256, size, mtime_ns, text_version FROM documents")
        return {r[0]: FileState(r[1], r[2], r[3], r[4], r[5]) for r in rows}

    def set_text_version(self, doc_id: int, version: int) -> None:
        self.db.execute("UPDATE documents SET text_version=? WHERE doc_id=?", (version, doc_id))

    def count_text_older(self, version: int) -> int:
        """Documents read with a text version older than ``version``."""
        return int(self.db.execute("SELECT COUNT(*) FROM documents WHERE text_version < ?", (version,)).fetchone()[0])

    def problem_states(self) -> dict[str, tuple[int, int, str]]:
        rows = self.db.execute("SELECT path, size, mtime_ns, reason FROM problems")
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def problems(self) -> list[FileProblem]:
        rows = self.db.execute("SELECT path, reason FROM problems ORDER BY path")
        return [FileProblem(r[0], r[1]) for r in rows]

    def roots(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT path FROM roots ORDER BY path")]

    def add_root(self, path: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO roots(path) VALUES (?)", (path,))

    def insert_document(
        self,
        *,
        path: str,
        root: str,
        sha256: str,
        size: int,
        mtime_ns: int,
        title: str,
        lang: Lang,
        n_pages: int,
        kind: str,
        warnings: Sequence[str],
        doc_vector: npt.NDArray[np.float32],
        chunks: Sequence[ChunkSpan],
        chunk_vectors: npt.NDArray[np.float32],
        chunk_term_counts: Sequence[dict[str, int]],
        text_version: int = 1,
    ) -> tuple[int, list[int]]:
        """Insert one file's rows (inside the caller's transaction); returns doc and chunk ids."""
        cur = self.db.execute(
            "INSERT INTO documents(path, root, sha256, size, mtime_ns, title, lang, n_pages, kind, warnings,"
            " vector, text_version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                path,
                root,
                sha256,
                size,
                mtime_ns,
                title,
                lang,
                n_pages,
                kind,
                json.dumps(list(warnings), ensure_ascii=False),
                _blob(doc_vector),
                text_version,
            ),
        )
        doc_id = int(cur.lastrowid or 0)
        ids: list[int] = []
        for span, vec, counts in zip(chunks, chunk_vectors, chunk_term_counts, strict=True):
            c = self.db.execute(
                "INSERT INTO chunks(doc_id, ordinal, text, page_start, page_end, char_start, char_end, lang,"
                " vector) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    doc_id,
                    span.ordinal,
                    span.text,
                    span.page_start,
                    span.page_end,
                    span.char_start,
                    span.char_end,
                    span.lang,
                    _blob(vec),
                ),
            )
            cid = int(c.lastrowid or 0)
            ids.append(cid)
            self.db.executemany(
                "INSERT INTO chunk_terms(chunk_id, term, count) VALUES (?,?,?)",
                [(cid, t, n) for t, n in counts.items()],
            )
        self.db.execute("DELETE FROM problems WHERE path=?", (path,))
        return doc_id, ids

    def delete_document(self, doc_id: int) -> list[int]:
        """Delete a document and everything hanging off it; returns its chunk ids."""
        ids = [r[0] for r in self.db.execute("SELECT chunk_id FROM chunks WHERE doc_id=?", (doc_id,))]
        self.db.execute(
            "DELETE FROM keywords WHERE unit_kind='c' AND unit_id IN (SELECT chunk_id FROM chunks WHERE doc_id=?)",
            (doc_id,),
        )
        self.db.execute("DELETE FROM keywords WHERE unit_kind='d' AND unit_id=?", (doc_id,))
        self.db.execute("DELETE FROM documents WHERE doc_id=?", (doc_id,))
        return ids

    def touch_document(self, doc_id: int, size: int, mtime_ns: int) -> None:
        self.db.execute("UPDATE documents SET size=?, mtime_ns=? WHERE doc_id=?", (size, mtime_ns, doc_id))

    def record_problem(self, path: str, reason: str, size: int, mtime_ns: int) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO problems(path, reason, size, mtime_ns) VALUES (?,?,?,?)",
            (path, reason, size, mtime_ns),
        )

    def forget_problem(self, path: str) -> None:
        self.db.execute("DELETE FROM problems WHERE path=?", (path,))

    def documents(self) -> list[Document]:
        rows = self.db.execute("SELECT doc_id, path, sha256, title, lang, n_pages, kind FROM documents ORDER BY path")
        return [Document(r[0], r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]

    def document_warnings(self) -> dict[int, tuple[str, ...]]:
        """The warnings stored with each document at ingest (only documents that have some)."""
        out: dict[int, tuple[str, ...]] = {}
        for doc_id, raw in self.db.execute("SELECT doc_id, warnings FROM documents WHERE warnings != '[]'"):
            warnings = tuple(str(w) for w in json.loads(raw))
            if warnings:
                out[int(doc_id)] = warnings
        return out

    def document(self, doc_id: int) -> Document | None:
        r = self.db.execute(
            "SELECT doc_id, path, sha256, title, lang, n_pages, kind FROM documents WHERE doc_id=?", (doc_id,)
        ).fetchone()
        return None if r is None else Document(r[0], r[1], r[2], r[3], r[4], r[5], r[6])

    def language_counts(self) -> dict[str, int]:
        """Documents per detected language ("zh", "en", "other"): one grouped count, no rows read."""
        return {str(lang): int(n) for lang, n in self.db.execute("SELECT lang, COUNT(*) FROM documents GROUP BY lang")}

    def count(self, table: str) -> int:
        assert table in ("documents", "chunks", "term_vectors", "problems")
        return int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    # ------------------------------------------------------------------ staged vectors (large files)
    def staged_vectors(self, path: str) -> dict[str, npt.NDArray[np.float32]]:
        """text hash → vector of the chunks of ``path`` embedded by an interrupted ingest."""
        rows = self.db.execute("SELECT text_hash, vector FROM staged_vectors WHERE path=?", (path,))
        return {str(h): _vec(v) for h, v in rows}

    def stage_vectors(self, path: str, rows: Iterable[tuple[str, npt.NDArray[np.float32]]]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO staged_vectors(path, text_hash, vector) VALUES (?,?,?)",
            [(path, h, _blob(v)) for h, v in rows],
        )

    def delete_staged(self, path: str) -> None:
        self.db.execute("DELETE FROM staged_vectors WHERE path=?", (path,))

    def staged_counts(self) -> dict[str, int]:
        """Files with staged (embedded, not yet searchable) chunks, and how many."""
        rows = self.db.execute("SELECT path, COUNT(*) FROM staged_vectors GROUP BY path ORDER BY path")
        return {str(p): int(n) for p, n in rows}

    # ------------------------------------------------------------------ chunks and vectors
    def chunks(self, chunk_ids: Iterable[int]) -> dict[int, Chunk]:
        ids = list(chunk_ids)
        out: dict[int, Chunk] = {}
        for part in _batches(ids, 500):
            q = ",".join("?" * len(part))
            for r in self.db.execute(
                "SELECT chunk_id, doc_id, ordinal, text, page_start, page_end, char_start, char_end, lang"
                f" FROM chunks WHERE chunk_id IN ({q})",
                part,
            ):
                out[r[0]] = Chunk(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8])
        return out

    def chunks_of(self, doc_id: int) -> list[Chunk]:
        rows = self.db.execute(
            "SELECT chunk_id, doc_id, ordinal, text, page_start, page_end, char_start, char_end, lang"
            " FROM chunks WHERE doc_id=? ORDER BY ordinal",
            (doc_id,),
        )
        return [Chunk(*r) for r in rows]

    def chunk_vectors_of(self, doc_ids: Sequence[int]) -> dict[int, list[tuple[int, npt.NDArray[np.float32]]]]:
        out: dict[int, list[tuple[int, npt.NDArray[np.float32]]]] = {}
        for part in _batches(list(doc_ids), 500):
            q = ",".join("?" * len(part))
            for doc_id, cid, blob in self.db.execute(
                f"SELECT doc_id, chunk_id, vector FROM chunks WHERE doc_id IN ({q}) ORDER BY ordinal", part
            ):
                out.setdefault(doc_id, []).append((cid, _vec(blob)))
        return out

    def vectors_of_chunks(self, chunk_ids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        """The stored embedding of each chunk id that has one."""
        out: dict[int, npt.NDArray[np.float32]] = {}
        for part in _batches(list(dict.fromkeys(chunk_ids)), 500):
            q = ",".join("?" * len(part))
            for cid, blob in self.db.execute(f"SELECT chunk_id, vector FROM chunks WHERE chunk_id IN ({q})", part):
                out[int(cid)] = _vec(blob)
        return out

    def iter_vectors(self, level: str) -> Iterator[tuple[int, npt.NDArray[np.float32]]]:
        sql = (
            "SELECT chunk_id, vector FROM chunks"
            if level == "chunk"
            else "SELECT doc_id, vector FROM documents WHERE vector IS NOT NULL"
        )
        for uid, blob in self.db.execute(sql):
            yield int(uid), _vec(blob)

    def unit_ids(self, level: str) -> set[int]:
        sql = "SELECT chunk_id FROM chunks" if level == "chunk" else "SELECT doc_id FROM documents"
        return {int(r[0]) for r in self.db.execute(sql)}

    # ------------------------------------------------------------------ terms and keywords
    def document_frequencies(self, unit: str) -> tuple[int, dict[str, int]]:
        """df over chunks (unit 'c') or documents ('d') and the number of units."""
        if unit == "c":
            n = self.count("chunks")
            rows = self.db.execute("SELECT term, COUNT(*) FROM chunk_terms GROUP BY term")
        else:
            n = self.count("documents")
            rows = self.db.execute(
                "SELECT ct.term, COUNT(DISTINCT c.doc_id) FROM chunk_terms ct JOIN chunks c USING(chunk_id)"
                " GROUP BY ct.term"
            )
        return n, {r[0]: int(r[1]) for r in rows}

    def iter_chunk_term_counts(self, *, by_doc: bool = False) -> Iterator[tuple[int, int, dict[str, int]]]:
        """(chunk_id, doc_id, counts) for every chunk that has terms, one chunk at a time.

        Ordered by chunk id, or with ``by_doc`` by (doc id, chunk id), so that a caller can
        aggregate one document at a time. Both orders come from an index (no sort of the
        whole table); only the current chunk's counts are held.
        """
        if by_doc:
            # CROSS JOIN keeps chunks as the outer loop: its doc_id index yields (doc_id, chunk_id) order.
            sql = (
                "SELECT c.chunk_id, c.doc_id, ct.term, ct.count FROM chunks c CROSS JOIN chunk_terms ct"
                " ON ct.chunk_id = c.chunk_id ORDER BY c.doc_id, c.chunk_id"
            )
        else:
            sql = (
                "SELECT c.chunk_id, c.doc_id, ct.term, ct.count FROM chunk_terms ct JOIN chunks c USING(chunk_id)"
                " ORDER BY c.chunk_id"
            )
        cur = self.db.execute(sql)
        current: int | None = None
        doc = 0
        counts: dict[str, int] = {}
        for cid, did, term, n in cur:
            if cid != current:
                if current is not None:
                    yield current, doc, counts
                current, doc, counts = cid, did, {}
            counts[term] = n
        if current is not None:
            yield current, doc, counts

    def chunks_holding(self, doc_id: int, terms: Iterable[str]) -> dict[int, set[str]]:
        """Which of ``terms`` each chunk of ``doc_id`` holds (chunk id → terms; chunks holding none
        are left out), from the stored term counts."""
        want = sorted(set(terms))
        out: dict[int, set[str]] = {}
        for part in _batches(want, 500):
            q = ",".join("?" * len(part))
            for cid, term in self.db.execute(
                "SELECT ct.chunk_id, ct.term FROM chunks c JOIN chunk_terms ct ON ct.chunk_id = c.chunk_id"
                f" WHERE c.doc_id=? AND ct.term IN ({q})",
                [doc_id, *part],
            ):
                out.setdefault(int(cid), set()).add(str(term))
        return out

    def replace_keywords(self, unit_kind: str, rows: Sequence[tuple[int, Sequence[Keyword]]]) -> None:
        self.delete_keywords(unit_kind)
        self.add_keywords([(unit_kind, uid, kws) for uid, kws in rows])

    def delete_keywords(self, unit_kind: str) -> None:
        self.db.execute("DELETE FROM keywords WHERE unit_kind=?", (unit_kind,))

    def add_keywords(self, rows: Iterable[tuple[str, int, Sequence[Keyword]]]) -> None:
        """Insert keyword sets given as (unit_kind, unit_id, ranked keywords); inside the caller's transaction."""
        self.db.executemany(
            "INSERT INTO keywords(unit_kind, unit_id, rank, term, weight) VALUES (?,?,?,?,?)",
            [(kind, uid, i, kw.term, kw.weight) for kind, uid, kws in rows for i, kw in enumerate(kws)],
        )

    def keyword_terms_without_vector(self) -> list[str]:
        """Stored keyword terms that have no E(t) (none in a consistent library), sorted."""
        return [
            r[0]
            for r in self.db.execute(
                "SELECT DISTINCT k.term FROM keywords k WHERE NOT EXISTS"
                " (SELECT 1 FROM term_vectors tv WHERE tv.term = k.term) ORDER BY k.term"
            )
        ]

    def keywords(self, unit_kind: str, unit_ids: Sequence[int]) -> dict[int, list[Keyword]]:
        out: dict[int, list[Keyword]] = {u: [] for u in unit_ids}
        for part in _batches(list(unit_ids), 500):
            q = ",".join("?" * len(part))
            for uid, term, w in self.db.execute(
                f"SELECT unit_id, term, weight FROM keywords WHERE unit_kind=? AND unit_id IN ({q})"
                " ORDER BY unit_id, rank",
                (unit_kind, *part),
            ):
                out[uid].append(Keyword(term, float(w)))
        return out

    def all_keyword_terms(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT DISTINCT term FROM keywords")}

    def term_vectors(self, terms: Iterable[str]) -> dict[str, npt.NDArray[np.float32]]:
        out: dict[str, npt.NDArray[np.float32]] = {}
        for part in _batches(list(terms), 500):
            q = ",".join("?" * len(part))
            for t, blob in self.db.execute(f"SELECT term, vector FROM term_vectors WHERE term IN ({q})", part):
                out[t] = _vec(blob)
        return out

    def known_terms(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT term FROM term_vectors")}

    def put_term_vectors(self, terms: Sequence[str], surfaces: Sequence[str], vectors: npt.NDArray[np.float32]) -> None:
        self.db.executemany(
            "INSERT OR REPLACE INTO term_vectors(term, surface, vector) VALUES (?, ?, ?)",
            [(t, s, _blob(v)) for t, s, v in zip(terms, surfaces, vectors, strict=True)],
        )

    def surfaces(self, terms: Iterable[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for part in _batches(list(terms), 500):
            q = ",".join("?" * len(part))
            out.update(self.db.execute(f"SELECT term, surface FROM term_vectors WHERE term IN ({q})", part))
        return out

    def sample_term_vectors(self, n: int, seed: int) -> npt.NDArray[np.float32]:
        """Up to ``n`` term vectors drawn with ``seed``, in table order.

        Only the row ids are read for the draw and only the drawn vectors are loaded, so the
        memory is ``n`` vectors, not the whole term table.
        """
        rowids = np.fromiter(
            (r[0] for r in self.db.execute("SELECT rowid FROM term_vectors ORDER BY rowid")), dtype=np.int64
        )
        if not len(rowids):
            return np.zeros((0, 0), dtype=np.float32)
        rng = np.random.default_rng(seed)
        pick = rng.choice(len(rowids), size=min(n, len(rowids)), replace=False)
        chosen = rowids[np.sort(pick)].tolist()
        out: list[npt.NDArray[np.float32]] = []
        for part in _batches(chosen, 500):
            q = ",".join("?" * len(part))
            out.extend(
                _vec(r[0])
                for r in self.db.execute(f"SELECT vector FROM term_vectors WHERE rowid IN ({q}) ORDER BY rowid", part)
            )
        return np.stack(out)

    # ------------------------------------------------------------------ translations
    def translation(self, chunk_id: int, target: str, model: str) -> str | None:
        r = self.db.execute(
            "SELECT text FROM translations WHERE chunk_id=? AND target_lang=? AND model=?",
            (chunk_id, target, model),
        ).fetchone()
        return None if r is None else str(r[0])

    def put_translation(self, chunk_id: int, target: str, model: str, text: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO translations(chunk_id, target_lang, model, text) VALUES (?,?,?,?)",
            (chunk_id, target, model, text),
        )


_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_IOERR, _SQLITE_FULL = 5, 6, 10, 13


def storage_error(exc: sqlite3.Error, path: Path | str) -> CatalogError | None:
    """A person's message for a write that SQLite could not do, or None for other errors.

    Disk full (``database or disk is full``, SQLITE_FULL), an I/O error (SQLITE_IOERR, e.g.
    a file size limit or a failing disk) and a lock held by another program are things the
    user can act on; the transaction they interrupted is rolled back, so nothing of it is
    half-written and everything committed before stays.
    """
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else int(code) & 0xFF
    where = printable(path)
    kept = "the change was rolled back and everything saved before is kept"
    if primary == _SQLITE_FULL:
        return CatalogError(f"the disk holding {where} is full ({exc}); {kept}. Free some space and try again.")
    if primary == _SQLITE_IOERR:
        return CatalogError(f"could not write {where} ({exc}: disk full, a file size limit or a failing disk?); "
                            f"{kept}. Free some space and try again.")
    if primary in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return CatalogError(f"{where} is locked by another program ({exc}); {kept}. Close it and try again.")
    return None


class _Tx:
    def __init__(self, db: sqlite3.Connection, path: Path | str = CATALOG_NAME) -> None:
        self.db = db
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            err = storage_error(exc, self.path)
            if err is None:
                raise
            raise err from exc
        return self.db

    def _rollback(self) -> None:
        # SQLite may already have rolled back by itself (after SQLITE_FULL, for one): a
        # second ROLLBACK then fails with "no transaction is active" and would hide the
        # real error.
        if self.db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
            except sqlite3.Error as err:
                self._rollback()
                mapped = storage_error(err, self.path)
                if mapped is None:
                    raise
                raise mapped from err
            return
        self._rollback()
        if isinstance(exc, sqlite3.Error):
            mapped = storage_error(exc, self.path)
            if mapped is not None:
                raise mapped from exc


def _batches(items: list[Any], n: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]
