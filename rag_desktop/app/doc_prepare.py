"""One file made ready for the catalog: read, cleaned, chunked, its terms counted (before embedding).

A step of the ingest (app.ingest_run; docs/architecture.md "Storage and crash safety"). Also grows
the library's CJK user dictionary from the document (improved kw(·)), so queries are segmented the
way the documents were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rag_desktop.app.catalog import Catalog
from rag_desktop.backends.readers import UnreadableDocument, read_document
from rag_desktop.core import keywords as kw
from rag_desktop.core.chunking import chunk_text
from rag_desktop.core.cleaning import clean_pages, strip_urls
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.protocols import Tokenizer
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, Chunk, ChunkSpan, Document, Lang

# The version of the text a file gives: the readers, the cleaning and the chunking together. Raise
# it when a change makes a file already in a library read differently (a PDF's typeset lines joined,
# say): the next ingest reads each file of an older version again and keeps the vectors of every
# chunk whose text stayed (app.ingest_run; docs/architecture.md "Storage and crash safety"). Each
# document records its version (catalog documents.text_version); files read before that count as 1.
# 3: URLs are kept in the text (core.cleaning).
TEXT_VERSION = 3


@dataclass(frozen=True)
class Prepared:
    title: str
    lang: Lang
    n_pages: int
    kind: str
    warnings: tuple[str, ...]
    chunks: list[ChunkSpan]
    counts: list[dict[str, int]]
    candidate_terms: list[str]


def same_text(prepared: Prepared, doc: Document, chunks: Sequence[Chunk]) -> bool:
    """Whether ``prepared`` gives what the library holds for the file (``doc`` and its ``chunks``):
    title, language, kind, pages and every chunk's text and place (a file read again because
    TEXT_VERSION moved)."""
    held = (doc.title, doc.lang, doc.kind, doc.n_pages)
    return (prepared.title, prepared.lang, prepared.kind, prepared.n_pages) == held and [
        (s.text, s.page_start, s.page_end, s.char_start, s.char_end, s.lang) for s in prepared.chunks
    ] == [(c.text, c.page_start, c.page_end, c.char_start, c.char_end, c.lang) for c in chunks]


def teach_user_words(catalog: Catalog, tokenizer: Tokenizer) -> None:
    """The library's user dictionary (learn_user_words) into ``tokenizer`` before it segments."""
    words = catalog.get_json("user_words") or []
    if words:
        tokenizer.add_words(words)


def learn_user_words(catalog: Catalog, settings: Settings, text: str, tokenizer: Tokenizer) -> None:
    """Improved kw(·): grow the library's CJK user dictionary from this document.

    jieba splits domain words (久咳 → 久/咳); frequent, cohesive Han sequences of
    the document become dictionary words before it is segmented. The dictionary
    is stored in the library so queries are segmented the same way. (Documents
    ingested earlier keep their segmentation until re-ingested: an order
    dependence we accept rather than re-tokenising the whole library.)
    """
    if settings.retrieval.keyword_variant != "improved":
        return
    # discover_cjk_terms holds every distinct n-gram: bound the sample it sees.
    found = kw.discover_cjk_terms([text[:200_000]], min_count=3)
    if not found:
        return
    known = set(catalog.get_json("user_words") or [])
    new = [w for w in found if w not in known]
    if new:
        tokenizer.add_words(new)
        with catalog.transaction():
            catalog.set_json("user_words", sorted(known | set(new)))


def prepare_file(
    path: Path, catalog: Catalog, settings: Settings, tokenizer: Tokenizer, kfilter: kw.KeywordFilter,
    cancel: CancelToken, ocr_text: Mapping[int, str] | None = None,
) -> Prepared:
    """``path`` read (with ``ocr_text`` for its scanned pages), cleaned, chunked and its terms counted."""
    parsed = read_document(path, cancel, ocr_text=ocr_text)
    cleaned = clean_pages(parsed.pages)
    ing = settings.ingest
    spans = chunk_text(cleaned, size=ing.chunk_size, overlap=ing.chunk_overlap)
    if not spans:
        raise UnreadableDocument(path, "no text after cleaning (empty document?)")
    learn_user_words(catalog, settings, cleaned.text, tokenizer)
    # A chunk is indexed (BM25, keyword sets) by its text without URLs, as paper 000 §4.1 cleans; the
    # text itself keeps them for the person and the model (core.cleaning).
    counts = [
        dict(Counter(kw.filter_terms(tokenizer.tokenize(strip_urls(s.text), s.lang), kfilter, query=False)))
        for s in spans
    ]
    # Terms that may enter a keyword set: the most frequent per chunk, generously
    # (the final top-n depends on the corpus IDF, known only after the whole ingest).
    cand: set[str] = set()
    for c in counts:
        cand.update(t for t, _ in sorted(c.items(), key=lambda x: (-x[1], x[0]))[: 3 * ing.keywords_per_chunk])
    lang = detect_lang(cleaned.text[:20000])
    return Prepared(
        title=parsed.title,
        lang=lang,
        n_pages=len(parsed.pages),
        kind=parsed.kind,
        warnings=parsed.warnings,
        chunks=spans,
        counts=counts,
        candidate_terms=sorted(cand),
    )
