"""Answer passages for one ranked column: windows, pages, headings, scores.

The pure parts (windows, headings, selection) are in :mod:`rag_desktop.core.passages`; this
module reads what they need from the library: the chunks behind the column's top hits (for
document-level hits, the chunks of all of them that best match the question, by their stored vectors and
BM25), the
page each paragraph is on (a chunk spanning pages is located in the PDF's own page texts),
the PDF's printed page labels, and the question's BM25 in each window (the library's
tokenizer, stopwords and chunk-level IDF).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import numpy as np

from rag_desktop.app.library import Library
from rag_desktop.core import passages as P
from rag_desktop.core.cleaning import clean_pages
from rag_desktop.core.fusion import rrf_order
from rag_desktop.core.keywords import IdfTable
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.protocols import Embedder, Tokenizer
from rag_desktop.core.types import Chunk, Hit, Locator, Page

log = logging.getLogger(__name__)

# Document-level hits are read through the best chunks of all of them together, as many chunks as
# there are hits (a chunk-level column's answer reads that many), and at least this many.
MIN_DOC_CHUNKS = 2
_KEY_CHARS = 24  # leading non-space characters that find a paragraph in a page's text
_PDF_CACHE = 32  # documents whose page texts and labels are kept


def _squash(text: str) -> str:
    return "".join(text.split()).lower()


def best_chunks(by_similarity: Sequence[int], keyword: Mapping[int, float]) -> list[int]:
    """The chunks of a column's top documents in the order their answer passages are looked for: the reciprocal rank
    fusion (core.fusion, k = 60) of their order by similarity to the question and their BM25 order
    (only chunks holding a question term rank there). The page that names what the question names
    — a command, an option, a package — is found even where a small encoder puts a neighbouring
    page nearer (docs/evaluation.md, "Finding the page"). Without keyword scores: similarity order."""
    matched = sorted((c for c in by_similarity if keyword.get(c, 0.0) > 0), key=lambda c: -keyword[c])
    if not matched:
        return list(by_similarity)
    return rrf_order([list(by_similarity), matched])


@dataclass
class _PdfInfo:
    labels: dict[int, str] = field(default_factory=dict)
    pages: dict[int, str] = field(default_factory=dict)  # physical page → squashed cleaned text
    missing: bool = False  # the file is gone (moved or deleted since the ingest): nothing to read


@dataclass(frozen=True)
class PassageSet:
    """The passages of one column, ready for the prompt, with the time they took."""

    hits: tuple[Hit, ...]
    locators: tuple[Locator, ...]
    n_candidates: int
    seconds: float


@dataclass(eq=False, repr=False)
class PassageFinder:
    """Finds the answer passages for a question inside a column's top hits."""

    library: Library
    embedder: Embedder  # only for a document-level hit's best chunks (stored vectors)
    tokenizer: Tokenizer
    idf: IdfTable
    stopwords: frozenset[str]
    _: KW_ONLY
    max_passages: int = 8
    min_chars: int = P.DEFAULT_MIN_CHARS
    max_chars: int = P.DEFAULT_MAX_CHARS
    # BM25 of the question against every chunk (chunk id → score > 0; the retriever's keyword
    # leg at chunk level). None: a document-level hit is read through its chunks nearest the
    # question alone.
    keyword: Callable[[str], Mapping[int, float]] | None = None
    _pdf: OrderedDict[int, _PdfInfo] = field(default_factory=OrderedDict, init=False)
    # The last question's keyword scores: every answer column of a question looks for its passages
    # with the same question, and the scores cover the whole library.
    _kw_last: tuple[str, Mapping[int, float]] | None = field(default=None, init=False)

    # ------------------------------------------------------------------ chunks
    def _chunks_for(self, query: str, hits: Sequence[Hit], qv: np.ndarray) -> list[tuple[int, Chunk]]:
        """The chunks behind ``hits``, each with its own rank, in reading order.

        A chunk-level hit is its own chunk. Document-level hits are read through the chunks of all
        of them together: their chunks are ordered by :func:`best_chunks` (similarity fused with
        BM25) across the documents, and the first ``max(len(doc hits), MIN_DOC_CHUNKS)`` are read —
        so the documents the column ranks decide *what* is read, and the document that holds the
        answer gives as many chunks as it has good ones, as in a chunk-level column. (Two chunks
        from each document spread eight passages over ten chunks: one window each, often not the
        one that answers; docs/evaluation.md, "Finding the page".) The chunks are read in the
        column's order of their documents, a document's best first.
        """
        cat = self.library.catalog
        doc_hits = [h for h in hits if h.level == "doc"]
        rank_of = {h.doc_id: r for r, h in enumerate(hits, start=1) if h.level == "doc"}
        # (the hit's rank, the chunk's place among that hit's chunks, chunk id)
        order = [(r, 0, h.unit_id) for r, h in enumerate(hits, start=1) if h.level == "chunk"]
        if doc_hits:
            vecs = cat.chunk_vectors_of([h.doc_id for h in doc_hits])
            rows = [(cid, v, h.doc_id) for h in doc_hits for cid, v in vecs.get(h.doc_id, [])]
            if rows:
                sims = np.stack([v for _, v, _ in rows]) @ qv
                by_sim = [rows[int(i)][0] for i in np.argsort(-sims, kind="stable")]
                doc_of = {cid: d for cid, _, d in rows}
                best = best_chunks(by_sim, self._keyword_scores(query))[: max(len(doc_hits), MIN_DOC_CHUNKS)]
                order += [(rank_of[doc_of[c]], i, c) for i, c in enumerate(best)]
        order.sort()
        chunks = cat.chunks(cid for _, _, cid in order)
        out: list[tuple[int, Chunk]] = []
        seen: set[int] = set()
        for _, _, cid in order:
            if cid in chunks and cid not in seen:
                seen.add(cid)
                # each chunk its own rank (P.select takes turns by chunk and reads a chunk's windows
                # by their offsets in it), numbered in the column's order
                out.append((len(out) + 1, chunks[cid]))
        return out

    def _keyword_scores(self, query: str) -> Mapping[int, float]:
        if self.keyword is None:
            return {}
        if self._kw_last is None or self._kw_last[0] != query:
            self._kw_last = (query, self.keyword(query))
        return self._kw_last[1]

    # ------------------------------------------------------------------ pages
    def _pdf_info(self, doc_id: int, path: str, numbers: Sequence[int]) -> _PdfInfo | None:
        if Path(path).suffix.lower() != ".pdf":
            return None
        info = self._pdf.get(doc_id)
        if info is None:
            info = _PdfInfo(missing=not Path(path).is_file())
            if info.missing:  # said once per file as what it is, not as a damaged PDF
                log.warning("%s is no longer there (moved or deleted since it was added): pages as stored", path)
            else:
                try:
                    from rag_desktop.backends.pdf_pages import page_labels

                    info.labels = page_labels(path)
                except Exception as exc:  # an unreadable file: physical pages, no labels
                    log.warning("page labels of %s: %s", path, exc)
            self._pdf[doc_id] = info
            while len(self._pdf) > _PDF_CACHE:
                self._pdf.popitem(last=False)
        self._pdf.move_to_end(doc_id)
        missing = [n for n in numbers if n not in info.pages]
        if missing and info.missing:
            for n in missing:
                info.pages.setdefault(n, "")
        elif missing:
            try:
                from rag_desktop.backends.pdf_pages import read_pages

                for pg in read_pages(path, missing):
                    cleaned = clean_pages([Page(pg.number, pg.text)])
                    info.pages[pg.number] = _squash(cleaned.text)
            except Exception as exc:
                log.warning("pages %s of %s: %s", missing, path, exc)
                for n in missing:
                    info.pages.setdefault(n, "")
        return info

    def _paragraph_pages(self, chunk: Chunk, paras: Sequence[P.Window], info: _PdfInfo | None) -> list[int]:
        if chunk.page_start == chunk.page_end or info is None:
            return [chunk.page_start] * len(paras)
        out: list[int] = []
        current = chunk.page_start
        for w in paras:
            key = _squash(w.text)[:_KEY_CHARS]
            for n in range(current, chunk.page_end + 1):  # pages only move forward in a chunk
                if key and key in info.pages.get(n, ""):
                    current = n
                    break
            out.append(current)
        return out

    # ------------------------------------------------------------------ the passages
    def _scored(self, query: str, hits: Sequence[Hit]) -> list[tuple[P.Candidate, Chunk]]:
        """Every window of the chunks behind ``hits``, located and BM25-scored for ``query``."""
        # The question's vector only picks a document-level hit's best chunks.
        qv = self.embedder.embed_queries([query])[0] if any(h.level == "doc" for h in hits) else np.zeros(0)
        docs = {h.doc_id: h for h in hits}
        cands: list[tuple[P.Candidate, Chunk]] = []
        texts: list[str] = []
        for rank, chunk in self._chunks_for(query, hits, qv):
            hit = docs[chunk.doc_id]
            paras = P.paragraphs(chunk.text)
            info = self._pdf_info(chunk.doc_id, hit.path, range(chunk.page_start, chunk.page_end + 1))
            pages = self._paragraph_pages(chunk, paras, info)
            windows = P.split_windows(chunk.text, pages, min_chars=self.min_chars, max_chars=self.max_chars)
            para_texts = [p.text for p in paras]
            prev = self._previous_paragraphs(chunk)
            for w in windows:
                first = next((i for i, p in enumerate(paras) if p.end > w.start), 0)
                heading = P.window_locator([*prev, *para_texts], len(prev) + first, w.text)
                page = pages[first] if pages else chunk.page_start
                label = info.labels.get(page, "") if info is not None else ""
                cands.append((P.Candidate(rank, w, 0.0, heading, page, label), chunk))
                texts.append(w.text)
        if not cands:
            return []
        windows_terms = [self._terms(t) for t in texts]
        local = P.pool_idf(windows_terms)  # rare in the library AND telling among these windows
        scores = P.bm25_scores(self._terms(query), windows_terms,
                               lambda t: self.idf.idf(t, self.tokenizer.prior_idf) * local(t))
        return [(P.Candidate(c.chunk_rank, c.window, float(s), c.heading, c.page, c.page_label), ch)
                for (c, ch), s in zip(cands, scores, strict=True)]

    def find(self, query: str, hits: Sequence[Hit]) -> PassageSet:
        """Candidate windows of the top ``hits``, scored for ``query``, chosen and located."""
        t0 = time.perf_counter()
        if not hits:
            return PassageSet((), (), 0, 0.0)
        scored = self._scored(query, hits)
        if not scored:
            return PassageSet((), (), 0, time.perf_counter() - t0)
        docs = {h.doc_id: h for h in hits}
        chunk_of = {id(c): ch for c, ch in scored}
        lang = detect_lang(query)
        cands = [c for c, _ in scored]
        # A chunk without the question's words may go when it is in the question's language (another
        # language shares no words, which says nothing) and is not the column's first hit's: the unit
        # ranked best is read whatever its words (asked in everyday words, a statute's answering article
        # shares none with the question; docs/evaluation.md §1.4).
        first = hits[0]
        gone = P.termless_chunks(cands, {c.chunk_rank for c, ch in scored if ch.lang == lang and not (
            ch.doc_id == first.unit_id if first.level == "doc" else ch.chunk_id == first.unit_id)})
        chosen = [c for c in P.select(cands, self.max_passages) if c.chunk_rank not in gone]
        out_hits: list[Hit] = []
        locs: list[Locator] = []
        for i, c in enumerate(chosen, start=1):
            ch = chunk_of[id(c)]
            h = docs[ch.doc_id]
            out_hits.append(Hit(ch.chunk_id, ch.doc_id, "chunk", h.title, h.path, c.page, c.window.text,
                                c.score, i, ch.lang))
            locs.append(Locator(c.heading, c.page_label))
        return PassageSet(tuple(out_hits), tuple(locs), len(scored), time.perf_counter() - t0)

    def focus(self, query: str, hits: Sequence[Hit], per_hit: int = 1) -> tuple[Hit, ...]:
        """Each chunk-level hit read through its ``per_hit`` best windows for ``query``.

        One hit out per hit in, same order, ids and scores, so a prompt's ``[n]`` still points at
        the n-th hit; the text is the chosen windows in document order (joined by a blank line)
        and the page is the first chosen window's page. For CF-RAG's evidence: its
        hypotheses read each evidence chunk through the paragraph that answers the question
        instead of the chunk's first tokens that fit the budget. Unchanged: a document-level
        hit, a chunk not in the catalog, and a chunk with no more than ``per_hit`` windows (its
        text is already what the model would read).
        """
        if per_hit <= 0 or not hits:
            return tuple(hits)
        by_chunk: dict[int, list[P.Candidate]] = {}
        for c, ch in self._scored(query, [h for h in hits if h.level == "chunk"]):
            by_chunk.setdefault(ch.chunk_id, []).append(c)
        out: list[Hit] = []
        for h in hits:
            cands = by_chunk.get(h.unit_id, []) if h.level == "chunk" else []
            if len(cands) <= per_hit:
                out.append(h)
                continue
            # best score first; ties (a question term in no window) keep the chunk's own order
            best = sorted(sorted(cands, key=lambda c: (-c.score, c.window.start))[:per_hit],
                          key=lambda c: c.window.start)
            text = "\n\n".join(c.window.text for c in best)
            out.append(Hit(h.unit_id, h.doc_id, h.level, h.title, h.path, best[0].page, text, h.s_sim, h.rank,
                           h.lang))
        return tuple(out)

    def _terms(self, text: str) -> list[str]:
        lang = detect_lang(text)
        return [t for t in self.tokenizer.tokenize(text, lang) if t not in self.stopwords]

    def _previous_paragraphs(self, chunk: Chunk) -> list[str]:
        """Paragraphs of the chunk before this one (a heading may stand there)."""
        if chunk.ordinal == 0:
            return []
        for c in self.library.catalog.chunks_of(chunk.doc_id):
            if c.ordinal == chunk.ordinal - 1:
                # Only the part before the overlap: the overlap is this chunk's own start.
                head = c.text[: max(0, len(c.text) - (c.char_end - chunk.char_start))]
                return [p.text for p in P.paragraphs(head)]
        return []
