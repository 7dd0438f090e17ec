"""Cleaning of parsed pages into one text with exact page offsets (paper 000 §4.1).

Paper 000 §4.1 cleans documents by "removal of table-of-contents dot leaders, URLs, and
parsing artifacts" before chunking. It names no rules, so these are the choices made here:

Per character (parsing artifacts)
    Ligatures (``ﬁ`` → ``fi``) are expanded; soft hyphens, zero-width spaces, byte-order
    marks, control characters, U+FFFD and private-use characters (glyphs of fonts without a
    Unicode map) are deleted; runs of spaces, tabs and exotic spaces collapse to one space.

Per line
    * A **table-of-contents entry** — a line of at most 200 characters whose tail is a dot
      leader (at least 4 dots, or 2 ``…``) followed by a page number — is dropped whole:
      TOC entries repeat the headings of the body, and a TOC page that holds every keyword
      of a document is exactly the keyword-stuffing that hurts retrieval (paper 000 §1).
      The price: a short line such as "Revenue ........ 1234" in a statement goes too.
      Long leader runs left inside longer lines (a TOC flattened into one line) are removed
      together with the page number that follows them.
    * **URLs** (``http://``, ``https://``, ``ftp://``, ``www.``) are *kept* in the text, and
      removed from what a chunk is indexed by (:func:`strip_urls`, applied where its terms are
      counted: app.doc_prepare). The paper removes them as noise for similarity; but the text
      is also what a person reads and what the model answers from, and in a manual a URL is
      often the answer ("where do I download it?": the TeX Live guide alone holds 112). So the
      keyword sets and BM25 see the paper's cleaned text, and the reader keeps the address.
      URL characters are ASCII, so a URL glued to Chinese text ends where the Chinese starts,
      and trailing sentence punctuation is not part of it.
    * **Page numbers**: lines that can only be page numbers (``- 3 -``, ``Page 3 of 9``,
      ``p. 3``, ``第3页``, ``第 3 页 共 9 页``) are dropped anywhere; a bare number (``3``,
      ``3/9``, ``iv``) is dropped only in a page's edge zone (its first and last two
      non-blank lines, fewer on pages so short that the zones would leave no body line) of a
      multi-page document, because inside a page it may be a table cell.
    * **Repeated headers/footers**: in documents of at least 3 pages, an edge-zone line whose
      shape (digits replaced by ``#``, case folded) appears in the top zone (or the bottom
      zone) of at least half of the pages, and of at least 2 pages, is dropped from the
      edge zones — so "Annual Report 2023 — page 7" goes, on every page, while the same
      words inside the body stay.

Joining lines into paragraphs
    A blank line is a paragraph break and becomes exactly ``"\\n\\n"``. Other line breaks are
    visual wraps and are joined: a lowercase word broken as ``inter-`` / ``national`` is
    re-joined without the hyphen; a hyphen after a letter or digit before anything else
    (``COVID-`` / ``19``) is kept with no space; if either side of the break is a CJK
    character or CJK punctuation the lines are joined with no space (Chinese and Japanese
    do not put spaces at wraps); otherwise (Latin words, Hangul, digits) with one space.
    A line that starts a list item (``•``, ``-``, ``1.``, ``(1)``, ``一、``), a Markdown heading
    or a Markdown table row keeps its line break (``"\\n"``) so structure is not glued into
    the previous line.

Pages
    Each page is cleaned on its own and the non-empty ones are joined with ``"\\n\\n"`` (a page
    boundary is treated as a paragraph boundary, which also lets the chunker prefer ending
    chunks there). ``page_offsets``/``page_numbers`` list only pages with text, so the offsets
    are strictly increasing and an offset maps to its page by bisection.

Every step is a single pass or a regular expression that cannot backtrack more than a
bounded amount (patterns that could are only applied to lines of bounded length), so the
whole function is linear in the input size — a 50 MB single-line file is fine.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence

from rag_desktop.core.text import HEADING_START, joins_without_space
from rag_desktop.core.types import CleanedText, Page

PARAGRAPH_BREAK = "\n\n"

# Lines longer than this are never headers, footers, TOC entries or page numbers; it also
# bounds the cost of the patterns that are applied per line.
_MAX_BOILERPLATE_LINE = 200
_MAX_PAGE_NUMBER_LINE = 40
# How many non-blank lines at each end of a page count as its header/footer zone.
_EDGE_LINES = 2
# Repeated-header detection needs enough pages to tell a header from a coincidence.
_MIN_PAGES_FOR_HEADERS = 3

_LIGATURES = {
    "\ufb00": "ff",
    "\ufb01": "fi",
    "\ufb02": "fl",
    "\ufb03": "ffi",
    "\ufb04": "ffl",
    "\ufb05": "st",
    "\ufb06": "st",
}
_LIGATURE_RE = re.compile("[\ufb00-\ufb06]")
# Deleted outright: soft hyphen, zero-width space, word joiner, BOM, C0/C1 controls (tabs and
# line breaks are handled before), U+FFFD and the private-use area.
_JUNK_RE = re.compile("[\u00ad\u200b\u2060\ufeff\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd\ue000-\uf8ff]+")
_SPACE_CHARS = " \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
# Only runs that need rewriting match: two or more spaces, or any tab/exotic space. A lone
# " " (most matches of a plain [ ]+ pattern) is left alone, which makes this pass ~3x faster.
_SPACES_RE = re.compile(f" [{_SPACE_CHARS}]+|[{_SPACE_CHARS[1:]}][{_SPACE_CHARS}]*")

# A URL: scheme or "www." (not glued to a preceding ASCII word; Chinese may touch it) then
# ASCII non-space characters, ending on a character that is not sentence punctuation.
# Greedy with a bounded give-back, so linear overall.
_URL_RE = re.compile(
    r" ?(?<![A-Za-z0-9.])(?:(?:https?|ftp)://|www\.)[!-~]*[A-Za-z0-9/#=_\-~+&%$@*]",
    re.IGNORECASE,
)
# A dot-leader run left inside a long line (TOC flattened into one line) plus the page number
# after it. Everything after the run is optional, so a found run never backtracks.
_INLINE_LEADER_RE = re.compile(r"(?:[.·•…‥⋯] ?){6,}\s*\d{0,4}")
_LEADER_CHARS = ".·•‥…⋯"
# Every leader run of _INLINE_LEADER_RE contains such a pair; finding one is a cheap pre-test.
_LEADER_PAIR_RE = re.compile("[.·•…‥⋯] ?[.·•…‥⋯]")
# "…" and "⋯" look like three dots, "‥" like two.
_LEADER_WEIGHT = {"…": 3, "⋯": 3, "‥": 2}
_MIN_LEADER_WEIGHT = 4
_PAGE_NUMBER_CHARS = frozenset("0123456789ivxlcdmIVXLCDM")

_CN_NUM = "0-9一二三四五六七八九十百零〇"
# Page-number lines recognised anywhere in a page.
_PAGE_NUMBER_RE = re.compile(
    r"[-–—~]\s*\d{1,4}\s*[-–—~]"
    r"|(?:page|p\.|pg\.?)\s*\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?"
    rf"|第\s*[{_CN_NUM}]+\s*页(?:\s*[,，/、]?\s*共\s*[{_CN_NUM}]+\s*页)?"
    rf"|共\s*[{_CN_NUM}]+\s*页\s*[,，/、]?\s*第\s*[{_CN_NUM}]+\s*页",
    re.IGNORECASE,
)
# Bare numbers, only recognised in the edge zone of a page.
_EDGE_NUMBER_RE = re.compile(
    r"\d{1,4}(?:\s*/\s*\d{1,4})?"
    r"|m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})",  # a well-formed roman numeral
    re.IGNORECASE,
)
_DIGITS_RE = re.compile(r"\d+")
# Lines whose break before them is kept: list items, Markdown headings and table rows.
_STRUCTURE_START_RE = re.compile(
    r"(?:[•·▪●○◦■□►‣⁃\-*–]\s"
    r"|\d{1,3}(?:[.)]\s|、)"
    r"|[(（]\d{1,3}[)）]"
    r"|[一二三四五六七八九十]{1,3}、"
    r"|#{1,6}\s"
    r"|\|)"
)


_STRUCTURE_FIRST_CHARS = frozenset("•·▪●○◦■□►‣⁃-*–(（#|0123456789一二三四五六七八九十")

# --------------------------------------------------------------------------- characters


def _normalise(text: str) -> str:
    """Artifact characters removed and spaces collapsed (whole page at once: one C pass each)."""
    text = _JUNK_RE.sub("", text)
    text = _LIGATURE_RE.sub(lambda m: _LIGATURES[m.group()], text)
    return _SPACES_RE.sub(" ", text)


def _split_lines(text: str) -> list[str]:
    """Normalised, stripped lines of a page ("" for a blank line)."""
    # str.splitlines splits on \r\n, \r, \f, \v, U+2028/2029 and friends: all are line ends.
    return [line.strip() for line in _normalise(text).splitlines()]


# --------------------------------------------------------------------------- line rules


def _leader_tail(line: str) -> bool:
    """True if ``line`` ends in a dot leader followed by a page number (a TOC entry)."""
    s = line.rstrip()
    number = s.rstrip("0123456789")
    if number == s:
        number = s.rstrip("ivxlcdmIVXLCDM")
    n_digits = len(s) - len(number)
    if not 1 <= n_digits <= 6:
        return False
    body = number.rstrip(" ")
    weight = 0
    i = len(body) - 1
    while i >= 0 and (body[i] in _LEADER_CHARS or body[i] == " "):
        weight += _LEADER_WEIGHT.get(body[i], 0 if body[i] == " " else 1)
        i -= 1
    return weight >= _MIN_LEADER_WEIGHT


def is_toc_entry(line: str) -> bool:
    """A short line ending in a dot leader and a page number ("Chapter 1 ........ 5")."""
    return (
        bool(line)
        and len(line) <= _MAX_BOILERPLATE_LINE
        and line[-1] in _PAGE_NUMBER_CHARS
        and _leader_tail(line)
    )


def is_page_number_line(line: str, *, edge: bool = False) -> bool:
    """A line that is only a page number; bare numbers count only when ``edge`` is true."""
    if len(line) > _MAX_PAGE_NUMBER_LINE:
        return False
    if _PAGE_NUMBER_RE.fullmatch(line):
        return True
    return edge and _EDGE_NUMBER_RE.fullmatch(line) is not None


def _shape(line: str) -> str | None:
    """Header/footer identity of a line: digits as '#', case folded; None if too long."""
    if len(line) > _MAX_BOILERPLATE_LINE:
        return None
    return _DIGITS_RE.sub("#", line).casefold()


def _url_replacement(m: re.Match[str]) -> str:
    """What a URL (with the space before it) becomes: a space only between two Latin words.

    "see https://x.org." → "see." (not "see ."); "访问https://x.org获取" → "访问获取".
    """
    after = m.string[m.end() : m.end() + 1]
    before = m.string[m.start() - 1 : m.start()]
    if not after.isalnum() or joins_without_space(after) or (before and joins_without_space(before)):
        return ""
    return " "


def strip_urls(text: str) -> str:
    """``text`` without its URLs (paper 000 §4.1): what a chunk's terms are counted from.

    "see https://x.org." → "see."; "访问https://x.org获取" → "访问获取". Linear: the substring test
    skips the pattern where no URL can start, and the pattern gives back a bounded amount.
    """
    if "://" not in text and "www." not in text and "WWW." not in text:
        return text
    return _SPACES_RE.sub(" ", _URL_RE.sub(_url_replacement, text)).strip()


def _scrub(line: str) -> str:
    """Inline leader runs removed from a kept line."""
    if _LEADER_PAIR_RE.search(line):
        return _SPACES_RE.sub(" ", _INLINE_LEADER_RE.sub(" ", line)).strip()
    return line


# --------------------------------------------------------------------------- headers/footers


def _edge_indices(lines: Sequence[str], *, keep_body: bool) -> tuple[list[int], list[int]]:
    """Indices of a page's top and bottom zones: up to ``_EDGE_LINES`` non-blank lines each.

    With ``keep_body`` (used for repeated headers/footers) the zones never cover the whole
    page: a page of k non-blank lines gets ``min(_EDGE_LINES, (k - 1) // 2)`` lines per zone,
    so a short page — a slide, a test document — keeps at least one line of body text.
    """
    filled = [i for i, line in enumerate(lines) if line]
    size = min(_EDGE_LINES, (len(filled) - 1) // 2) if keep_body else _EDGE_LINES
    if size <= 0:
        return [], []
    return filled[:size], filled[-size:]


def _repeated_shapes(pages: Sequence[Sequence[str]], *, top: bool) -> frozenset[str]:
    """Shapes that occur in the top (or bottom) zone of at least half of the pages."""
    if len(pages) < _MIN_PAGES_FOR_HEADERS:
        return frozenset()
    counts: Counter[str] = Counter()
    for lines in pages:
        zone = _edge_indices(lines, keep_body=True)[0 if top else 1]
        counts.update({s for i in zone if (s := _shape(lines[i])) is not None})
    need = max(2, (len(pages) + 1) // 2)
    return frozenset(s for s, n in counts.items() if n >= need)


def _edge_drops(
    lines: Sequence[str], headers: frozenset[str], footers: frozenset[str], multi_page: bool
) -> set[int]:
    """Indices of edge-zone lines that are repeated headers/footers or bare page numbers."""
    drops: set[int] = set()
    top, bottom = _edge_indices(lines, keep_body=True)
    drops.update(i for i in top if _shape(lines[i]) in headers)
    drops.update(i for i in bottom if _shape(lines[i]) in footers)
    if multi_page:
        top, bottom = _edge_indices(lines, keep_body=False)
        drops.update(i for i in (*top, *bottom) if is_page_number_line(lines[i], edge=True))
    return drops


# --------------------------------------------------------------------------- joining


def _line_separator(prev: str, nxt: str) -> tuple[str, str]:
    """How a wrapped line joins the next: returns (``prev`` possibly de-hyphenated, separator)."""
    if nxt[0] in _STRUCTURE_FIRST_CHARS and _STRUCTURE_START_RE.match(nxt):
        return prev, "\n"
    last, first = prev[-1], nxt[0]
    if last == "-" and len(prev) >= 2 and prev[-2].isalnum():
        if (prev[-2].islower() or prev[-2].isupper()) and first.islower():
            return prev[:-1], ""  # "inter-" + "national" → "international"
        return prev, ""  # "COVID-" + "19" → "COVID-19"
    if joins_without_space(last) or joins_without_space(first):
        return prev, ""
    return prev, " "


# The CJK marks that end a sentence or a clause of a list: a line ending on one is not wrapped into
# the next (wraps_into; a Latin mark never gets that far, joins_without_space is False for it).
_CLOSES_LINE = frozenset("。！？：；")


def wraps_into(prev: str, nxt: str) -> bool:
    """True when ``nxt`` reads as the next line of the Chinese/Japanese line ``prev``: ``prev`` ends on
    an ideograph or mid-sentence punctuation (not 。！？：；) and ``nxt`` starts with CJK text that opens
    no list item, heading or article (第…条). A line break there falls inside a word or a sentence
    ("…要求的其" / "他材料"). The PDF reader asks it of two text blocks its layout test puts one right
    under the other (backends/readers/pdf.py): typeset Chinese PDFs often give each line a block of
    its own, and a block is a paragraph here. Latin text is left as it is (a space or a hyphen would
    have to be decided, and such PDFs were not seen)."""
    if not prev or not nxt:
        return False
    last, first = prev[-1], nxt[0]
    if last in _CLOSES_LINE or not joins_without_space(last) or not joins_without_space(first):
        return False
    return not (_STRUCTURE_START_RE.match(nxt) or HEADING_START.match(nxt))


def join_lines(lines: Sequence[str]) -> str:
    """Join the non-blank lines of one paragraph (rules in the module doc)."""
    if not lines:
        return ""
    parts: list[str] = [lines[0]]
    for nxt in lines[1:]:
        prev, sep = _line_separator(parts[-1], nxt)
        parts[-1] = prev
        if sep:
            parts.append(sep)
        parts.append(nxt)
    return "".join(parts)


def _page_paragraphs(lines: Sequence[str], drops: set[int]) -> list[str]:
    paragraphs: list[str] = []
    current: list[str] = []
    for i, line in enumerate(lines):
        if not line:
            if current:
                paragraphs.append(join_lines(current))
                current = []
            continue
        if i in drops or is_toc_entry(line) or is_page_number_line(line):
            continue  # a dropped line does not end the paragraph around it
        kept = _scrub(line)
        if kept:
            current.append(kept)
    if current:
        paragraphs.append(join_lines(current))
    return paragraphs


# --------------------------------------------------------------------------- entry point


def clean_pages(pages: Sequence[Page]) -> CleanedText:
    """Clean parsed pages into one text; ``page_offsets`` say where each kept page starts."""
    page_lines = [_split_lines(page.text) for page in pages]
    headers = _repeated_shapes(page_lines, top=True)
    footers = _repeated_shapes(page_lines, top=False)
    multi_page = len(pages) > 1
    parts: list[str] = []
    offsets: list[int] = []
    numbers: list[int] = []
    position = 0
    for page, lines in zip(pages, page_lines, strict=True):
        drops = _edge_drops(lines, headers, footers, multi_page)
        text = PARAGRAPH_BREAK.join(_page_paragraphs(lines, drops))
        if not text:
            continue
        if parts:
            parts.append(PARAGRAPH_BREAK)
            position += len(PARAGRAPH_BREAK)
        offsets.append(position)
        numbers.append(page.number)
        parts.append(text)
        position += len(text)
    return CleanedText(text="".join(parts), page_offsets=tuple(offsets), page_numbers=tuple(numbers))


def page_at(cleaned: CleanedText, offset: int) -> int:
    """The page number holding character ``offset`` of ``cleaned.text`` (bisection).

    Offsets before the first listed page map to the first page; a text without listed pages
    maps everything to page 1.
    """
    if not cleaned.page_offsets:
        return 1
    i = bisect_right(cleaned.page_offsets, offset) - 1
    return cleaned.page_numbers[max(i, 0)]
