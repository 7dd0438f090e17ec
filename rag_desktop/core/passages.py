"""Answer passages: rank coarse, read fine (docs/architecture.md, "Data flow").

The 4,096/512 chunks of paper 000 stay the unit the columns rank. What the model reads, and
what ``[n]`` points at, is a *passage*: a paragraph-sized window inside a top-ranked chunk,
on one page, chosen for the question and given with what locates it (document title,
section heading or article, printed page label), so that the model can say *where*
("《职业病防治法》第五十条", "§7.3") and a citation can open the viewer on that paragraph.

This module is pure: splitting a chunk into windows, finding headings, choosing windows by
their scores and formatting locators. Scores (query–window cosines from the library's own
encoder) and pages arrive from the ``app`` layer.

Choices (the issue leaves them open):

* Windows follow the cleaned text's paragraphs (``"\\n\\n"``: the cleaner joins wrapped lines
  and never lets a paragraph cross a page). Paragraphs are merged, on one page, until the
  window holds ``min_chars`` and ends at a sentence end (a heading or list item joins what
  follows it; a PDF whose every wrapped line came out as a paragraph still gives whole
  sentences), but never beyond ``max_chars``; a single paragraph longer than that is
  cut at sentence ends into pieces of at most ``max_chars`` (a piece holds at least one whole
  sentence, so a very long sentence stays whole).
* Windows are scored at query time, not stored, and lexically: Okapi BM25 (Robertson &
  Zaragoza 2009, Eq. 3.15 with k1 = 1.2, b = 0.75) of the question's terms (the library's
  tokenizer, stopwords removed) in each window, weighted by the library's own chunk-level IDF
  times the term's IDF among the candidate windows themselves (:func:`pool_idf`). Chosen
  because the windows compete *inside* the top chunks: a term that is rare in the library but
  stands in every window of the answering document (数据出境安全评估 in the guideline) says
  nothing about which paragraph answers, and with the library IDF alone it outweighed the
  term that does (有效期, 申报书). Measured on the 13 demo questions (scripts/passage_prompt_sizes.py,
  docs/evaluation.md §4): the answering paragraph was read in 10/13 with the library IDF, 12/13
  with the product (and with the pool IDF alone). The
  dense alternative was measured first: embedding the ~37 windows of one question's top
  chunks with the embedded e5-small took 57–78 s on the shared 2-core machine (1.5 s per
  window, docs/evaluation.md), far too slow per question; storing window vectors at ingest
  would move that cost to ingest (about 8 windows per chunk) and need every library
  re-ingested. BM25 over the windows takes milliseconds, and the columns' dense / causal
  ranking still decides *which chunks* are read (rank coarse, read fine).
* Selection keeps the column's ranking (:func:`select`): scores are compared only inside a
  chunk, and the chunks take turns in rank order, each giving its best window, then the one
  after it, then its next best.
  Passages are then numbered in reading order (chunk rank, then position in the chunk), so
  neighbouring windows of a chunk read as one text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from rag_desktop.core.prompting import split_sentences
from rag_desktop.core.text import CN_NUMERALS, HEADING_START

PARAGRAPH_BREAK = re.compile(r"\n\s*\n")

# Paragraph-sized: a Chinese paragraph of 300–900 characters is a few sentences, an English one a
# short paragraph (measured on the demo set: 160-character windows split CJK PDF lists apart).
DEFAULT_MIN_CHARS = 300
DEFAULT_MAX_CHARS = 900

# A heading: a short line that starts with a section number or a Chinese structural marker
# (core.text.HEADING_START).
# An article number at the start of a paragraph of a statute: "第五十条 用人单位应当……".
_ARTICLE = re.compile(rf"^第[{CN_NUMERALS}\d]+条")
MAX_HEADING_CHARS = 60
_SENTENCE_END = re.compile(r"[。！？!?；;]$|[.](?<!\d\.)$")
_CLAUSE_MARK = re.compile(r"[。！？；，,;]")  # a heading has no clause punctuation inside
_ENDS_SENTENCE = re.compile(r"[。！？!?；;.…:：”’\"')）」』]$")


@dataclass(frozen=True)
class Window:
    """A paragraph-sized span ``[start, end)`` of a chunk's text."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Candidate:
    """A window of one ranked chunk, with what the app layer found out about it."""

    chunk_rank: int  # 1-based rank of its chunk in the column
    window: Window
    score: float  # BM25 of the question in the window (:func:`bm25_scores`)
    heading: str = ""  # the section heading or article it stands under ("" if none)
    page: int = 1  # physical page (1-based)
    page_label: str = ""  # printed page label, "" when the PDF defines none


def is_heading(paragraph: str) -> bool:
    """A short paragraph that starts like a section heading and is not a sentence."""
    p = " ".join(paragraph.split())
    return (0 < len(p) <= MAX_HEADING_CHARS and bool(HEADING_START.match(p))
            and not _SENTENCE_END.search(p) and not _CLAUSE_MARK.search(p))


def leading_label(paragraph: str) -> str:
    """The article number a paragraph starts with ("第八条"), else ""."""
    m = _ARTICLE.match(paragraph.lstrip())
    return m.group(0) if m else ""


def paragraphs(text: str) -> list[Window]:
    """The non-empty paragraphs of ``text`` as windows (offsets into ``text``)."""
    out: list[Window] = []
    pos = 0
    for m in [*PARAGRAPH_BREAK.finditer(text), None]:
        end = m.start() if m is not None else len(text)
        raw = text[pos:end]
        stripped = raw.strip()
        if stripped:
            s = pos + (len(raw) - len(raw.lstrip()))
            out.append(Window(s, s + len(stripped), stripped))
        if m is not None:
            pos = m.end()
    return out


def _cut_long(w: Window, max_chars: int) -> list[Window]:
    if len(w.text) <= max_chars:
        return [w]
    out: list[Window] = []
    start = 0
    length = 0
    for piece in split_sentences(w.text):
        if length and length + len(piece) > max_chars:
            seg = w.text[start:start + length]
            lead = len(seg) - len(seg.lstrip())
            out.append(Window(w.start + start + lead, w.start + start + len(seg.rstrip()), seg.strip()))
            start += length
            length = 0
        length += len(piece)
    seg = w.text[start:]
    if seg.strip():
        lead = len(seg) - len(seg.lstrip())
        out.append(Window(w.start + start + lead, w.start + start + len(seg.rstrip()), seg.strip()))
    return out


def split_windows(text: str, pages: Sequence[int] | None = None, *, min_chars: int = DEFAULT_MIN_CHARS,
                  max_chars: int = DEFAULT_MAX_CHARS) -> list[Window]:
    """Paragraph-sized windows of a chunk's text.

    ``pages`` (one per paragraph of :func:`paragraphs`, optional) keeps a merge on one page.
    A heading is merged with the paragraph that follows it, so a window carries its heading.
    """
    paras = paragraphs(text)
    if pages is not None and len(pages) != len(paras):
        raise ValueError(f"split_windows: {len(pages)} pages for {len(paras)} paragraphs")
    merged: list[Window] = []
    cur: Window | None = None
    cur_page: int | None = None
    for i, p in enumerate(paras):
        page = pages[i] if pages is not None else None
        # A new section or article starts a new window (a citation then names one article),
        # unless the window so far is only a heading (it stays with what it heads).
        starts_unit = is_heading(p.text) or bool(leading_label(p.text))
        if cur is not None and (page != cur_page or len(cur.text) + len(p.text) + 2 > max_chars
                                or (starts_unit and not _only_headings(cur.text))):
            merged.append(cur)
            cur = None
        if cur is None:
            cur, cur_page = p, page
        else:
            cur = Window(cur.start, p.end, text[cur.start:p.end])
        # Close a window at a sentence end once it is long enough: a PDF whose cleaned text
        # keeps every wrapped line as its own paragraph then still gives whole sentences.
        if len(cur.text) >= min_chars and not is_heading(p.text) and _ENDS_SENTENCE.search(p.text):
            merged.append(cur)
            cur = None
    if cur is not None:
        merged.append(cur)
    out: list[Window] = []
    for w in merged:
        out.extend(_cut_long(w, max_chars))
    return out


def _only_headings(text: str) -> bool:
    return all(is_heading(p.text) for p in paragraphs(text))


def window_locator(paras: Sequence[str], first: int, window_text: str) -> str:
    """What to call a window: the heading it stands under and the article it starts with,
    e.g. "第四章 住宿费和伙食补助 第八条", "7.3 The Wason selection task"."""
    article = next((lbl for p in paragraphs(window_text) if (lbl := leading_label(p.text))), "")
    heading = ""
    for p in reversed(paras[: first + 1]):
        if is_heading(p):
            heading = " ".join(p.split())
            break
        if not article and (lbl := leading_label(p)):
            return lbl
    if article and heading:
        return f"{heading} {article}"
    return article or heading


def heading_before(paras: Sequence[str], upto: int) -> str:
    """The last heading among ``paras[:upto + 1]``, or ""; an article that starts the
    paragraph at ``upto`` itself (第八条 …) wins, since that is what a citation should name."""
    if 0 <= upto < len(paras):
        label = leading_label(paras[upto])
        if label:
            return label
    for p in reversed(paras[: upto + 1]):
        if is_heading(p):
            return " ".join(p.split())
        label = leading_label(p)
        if label:
            return label
    return ""


def select(candidates: Sequence[Candidate], max_passages: int, min_share: float = 0.1) -> list[Candidate]:
    """The windows the model reads, in reading order (chunk rank, then position).

    Rank coarse, read fine: window scores are compared only *inside* a chunk; which chunks are
    read, and how much of each, follows the column's ranking. Round robin over the chunks in
    rank order: each turn a chunk gives its best window not yet taken — first its best, then the
    window right after its best (an answer often continues in the next paragraph: a heading's
    section, a list), then the next best — until ``max_passages``. Comparing lexical scores
    across chunks would undo the column's ranking: a keyword-stuffed distractor scores highest
    in every window (measured on the demo set: it filled the slots of the answering document).

    A window below ``min_share`` of its chunk's best score, a window without any question term
    (score 0) when its chunk has one, and a window that is only headings (a chunk ending on a
    heading: nothing to read) are left out.
    """
    if max_passages <= 0:
        return []
    by_chunk: dict[int, list[Candidate]] = {}
    for c in candidates:
        if not _only_headings(c.window.text):
            by_chunk.setdefault(c.chunk_rank, []).append(c)
    if not by_chunk:
        by_chunk = {c.chunk_rank: [c] for c in candidates}
    queues: dict[int, list[Candidate]] = {}
    for rank, cs in by_chunk.items():
        best = max(c.score for c in cs)
        keep = [c for c in cs if best <= 0 or c.score >= max(min_share * best, 1e-12)]
        top = max(keep, key=lambda c: c.score)
        after = sorted((c for c in keep if c.window.start >= top.window.end), key=lambda c: c.window.start)
        order = [top, *after[:1]]
        order += sorted((c for c in keep if c not in order), key=lambda c: -c.score)
        queues[rank] = order
    chosen: list[Candidate] = []
    while len(chosen) < max_passages and any(queues.values()):
        for rank in sorted(queues):
            if queues[rank] and len(chosen) < max_passages:
                chosen.append(queues[rank].pop(0))
    return sorted(chosen, key=lambda c: (c.chunk_rank, c.window.start))


def termless_chunks(candidates: Sequence[Candidate], droppable: Collection[int]) -> set[int]:
    """The chunks (by rank) in ``droppable`` none of whose windows holds a question term, when some
    chunk's window does: the answer leaves their passages out.

    :func:`select`'s rule for windows inside a chunk (no question term: left out when the chunk has
    one), applied across the chunks a column hands the answer: dense similarity puts a chunk in the
    top ranks that shares no word with the question (a report's project list under a question on a
    card task), and the model reads it before its first token for nothing. The caller says which
    chunks may go: those in the question's language (a chunk in another language shares no word with
    it, which says nothing about whether it answers) outside the column's first hit (what dense
    similarity ranked best in other words: a statute's article under a question in everyday words).
    When no chunk holds a term, none goes. The other chunks' passages are those :func:`select` chose
    with these present: their slots are not refilled (more windows of one document, with other
    figures, misled the embedded model on a demo question), so the prompt is only shorter.
    """
    best: dict[int, float] = {}
    for c in candidates:
        best[c.chunk_rank] = max(best.get(c.chunk_rank, 0.0), c.score)
    if not any(v > 0 for v in best.values()):
        return set()
    return {r for r, v in best.items() if v <= 0 and r in droppable}


BM25_K1 = 1.2
BM25_B = 0.75


def bm25_scores(query_terms: Sequence[str], windows_terms: Sequence[Sequence[str]],
                idf: Callable[[str], float]) -> list[float]:
    """Okapi BM25 of each window for the query (Robertson & Zaragoza 2009, Eq. 3.15):

        score(q, w) = Σ_{t ∈ q} idf(t) · tf(t, w)·(k1 + 1) / (tf(t, w) + k1·(1 − b + b·|w|/avgdl))

    with each distinct query term counted once and avgdl the mean window length in terms.
    """
    if not windows_terms:
        return []
    lengths = [len(w) for w in windows_terms]
    avgdl = (sum(lengths) / len(lengths)) or 1.0
    qset = list(dict.fromkeys(query_terms))
    weights = {t: idf(t) for t in qset}
    out = []
    for terms, dl in zip(windows_terms, lengths, strict=True):
        tf: dict[str, int] = {}
        for t in terms:
            if t in weights:
                tf[t] = tf.get(t, 0) + 1
        norm = BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl)
        out.append(sum(weights[t] * f * (BM25_K1 + 1) / (f + norm) for t, f in tf.items()))
    return out


def pool_idf(windows_terms: Sequence[Sequence[str]]) -> Callable[[str], float]:
    """BM25's IDF of a term among the candidate windows (Robertson & Zaragoza 2009, Eq. 3.3,
    with the +1 inside the log so that it stays positive):

        idf_pool(t) = ln(1 + (N − n_t + 0.5) / (n_t + 0.5)),  N windows, n_t of them holding t.

    A term in every window keeps a small positive weight (ln(1 + 0.5 / (N + 0.5))), so with a
    single window, or a question whose terms stand everywhere, term frequency still decides.
    """
    n = len(windows_terms)
    df: dict[str, int] = {}
    for terms in windows_terms:
        for t in set(terms):
            df[t] = df.get(t, 0) + 1

    def idf(t: str) -> float:
        d = df.get(t, 0)
        return math.log(1.0 + (n - d + 0.5) / (d + 0.5))

    return idf


def page_text(page: int, label: str, lang: str) -> str:
    """"page 88" / "第 88 页" with the printed label when there is one, else the physical page."""
    shown = label or str(page)
    return f"第 {shown} 页" if lang == "zh" else f"page {shown}"


__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MIN_CHARS",
    "Candidate",
    "Window",
    "bm25_scores",
    "heading_before",
    "is_heading",
    "leading_label",
    "page_text",
    "paragraphs",
    "select",
    "split_windows",
    "window_locator",
]
