"""Splitting cleaned text into overlapping chunks (paper 000 §4.1: 4,096 characters, 512 overlap).

Paper 000 only gives the sizes. The choices made here:

* A chunk is at most ``size`` characters. When more text remains, the chunk ends at the best
  break point inside a **bounded window** ``[start + min_len, start + size]`` where
  ``min_len = max(size // 2, overlap + 1)``, preferring, in order:

  1. the last paragraph end (the position of a ``"\\n\\n"``);
  2. the last sentence end — after ``。！？；`` (CJK punctuation ends a sentence wherever it
     stands: Chinese puts no space after it) or after ``.!?`` followed by whitespace or the end
     of the text; closing quotes/brackets right after the mark stay in the sentence; only
     marks inside the chunk count;
  3. the last whitespace;
  4. otherwise a hard cut at ``start + size``.

  Searching only that window keeps the work per chunk O(size), so the whole split is O(n).
* Chunks never start or end with whitespace and are never empty; ``char_start``/``char_end``
  index ``cleaned.text`` exactly (``cleaned.text[char_start:char_end] == text``).
* The next chunk starts ``overlap`` characters before the previous end. If that lands inside a
  word it moves forward to the next word start, looking at most ``_ALIGN_WINDOW`` characters
  ahead (so the real overlap is at most ``overlap``); in CJK text without spaces it stays
  put. It always moves forward by at least one character.
* ``page_start``/``page_end`` are the pages of the first and last character
  (``CleanedText.page_offsets``); ``lang`` is :func:`rag_desktop.core.lang.detect_lang` of the
  chunk.
"""

from __future__ import annotations

import re

from rag_desktop.core.cleaning import page_at
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.types import ChunkSpan, CleanedText

DEFAULT_SIZE = 4096  # paper 000 §4.1
DEFAULT_OVERLAP = 512  # paper 000 §4.1

CLOSERS = "\"'”’)）」』]】》"
CJK_SENTENCE_ENDS = "。！？；"
LATIN_SENTENCE_ENDS = ".!?"
_C = re.escape(CLOSERS)
# Sentence ends searched in the *reversed* window, so the first match is the last sentence end.
# Read right to left: the character after the end (whitespace for .!?, anything but a closer
# for CJK marks — closers belong to the sentence), then the closers, then the mark.
_REVERSED_SENTENCE_END_RE = re.compile(
    rf"(?<=\s)[{_C}]*[{re.escape(LATIN_SENTENCE_ENDS)}]|(?<=[^{_C}])[{_C}]*[{CJK_SENTENCE_ENDS}]"
)
_WHITESPACE_RE = re.compile(r"\s")
_LEADING_SPACE_RE = re.compile(r"\s*")
# How far ahead a chunk start may move to reach the start of a word.
_ALIGN_WINDOW = 32


def _check_sizes(size: int, overlap: int) -> None:
    if size < 1:
        raise ValueError(f"chunk size must be at least 1 character, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be >= 0 and < size ({size}), got {overlap}")


def _last_sentence_end(text: str, start: int, lo: int, hi: int) -> int:
    """The last sentence end ``e`` with ``lo <= e <= hi < len(text)`` whose mark is in the chunk.

    ``reversed_window[j] == text[hi - j]``, so a match starting at ``j`` is the end
    ``e = hi + 1 - j``; searching from ``j = 1`` keeps ``e <= hi`` and lets the look-behind see
    ``text[e]``. One reversed copy of the chunk plus a left-to-right search: O(size).
    """
    reversed_window = text[start : hi + 1][::-1]
    m = _REVERSED_SENTENCE_END_RE.search(reversed_window, 1)
    if m is None:
        return -1
    end = hi + 1 - m.start()
    return end if end >= lo else -1


def _last_whitespace(text: str, lo: int, hi: int) -> int:
    """The last whitespace position in ``[lo, hi]``, or -1 (searched from the end, in C)."""
    m = _WHITESPACE_RE.search(text[lo : hi + 1][::-1])
    return hi - m.start() if m else -1


def _break_point(text: str, start: int, size: int, min_len: int) -> int:
    """Where the chunk starting at ``start`` ends, given that more than ``size`` chars remain."""
    lo, hi = start + min_len, start + size
    paragraph = text.rfind("\n\n", lo, hi + 2)
    if paragraph != -1:
        return paragraph
    sentence = _last_sentence_end(text, start, lo, hi)
    if sentence != -1:
        return sentence
    space = _last_whitespace(text, lo, hi)
    if space != -1:
        return space
    return hi


def _next_start(text: str, start: int, end: int, overlap: int) -> int:
    """Start of the chunk after ``[start, end)``: ``overlap`` back, moved to a word start."""
    nxt = max(end - overlap, start + 1)
    if 0 < nxt < end and not text[nxt - 1].isspace() and not text[nxt].isspace():
        m = _WHITESPACE_RE.search(text, nxt, min(nxt + _ALIGN_WINDOW, end))
        if m:
            nxt = m.start()
    return _skip_space(text, nxt)


def _skip_space(text: str, i: int) -> int:
    m = _LEADING_SPACE_RE.match(text, i)
    return m.end() if m else i


def chunk_text(
    cleaned: CleanedText, size: int = DEFAULT_SIZE, overlap: int = DEFAULT_OVERLAP
) -> list[ChunkSpan]:
    """Split ``cleaned.text`` into overlapping chunks (rules in the module doc)."""
    _check_sizes(size, overlap)
    text = cleaned.text
    n = len(text.rstrip())
    min_len = max(size // 2, overlap + 1)
    chunks: list[ChunkSpan] = []
    start = _skip_space(text, 0)
    while start < n:
        end = n if n - start <= size else _break_point(text, start, size, min_len)
        piece = text[start:end].rstrip()
        end = start + len(piece)
        chunks.append(
            ChunkSpan(
                ordinal=len(chunks),
                text=piece,
                char_start=start,
                char_end=end,
                page_start=page_at(cleaned, start),
                page_end=page_at(cleaned, end - 1),
                lang=detect_lang(piece),
            )
        )
        if end >= n:
            break
        start = _next_start(text, start, end, overlap)
    return chunks
