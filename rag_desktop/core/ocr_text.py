"""From OCR output to page text: normalisation, word boundaries, reading order, junk text layers.

Pure functions (no image or model library): the OCR backend hands over words with their
boxes, these rules make the text the rest of the pipeline reads.

Why each rule (measured on pages the tests render, see docs/evaluation.md "OCR"):

* PP-OCRv4's recogniser (RapidOCR) emits full-width Latin letters and digits for some
  glyphs ("musｔbｅ") — NFKC folds them to ASCII; full-width punctuation after a Chinese
  character ("，" "；") is kept, it is the correct Chinese form (:func:`fold_width`).
* It drops spaces between English words — some in proportional fonts ("shallreturnthe"),
  nearly all in Latin text set in a CJK font's full-width cells ("Ａbiｃyｃｌｅｃｈａiｎ").
  The page still shows them: blank columns in the line's pixels. The backend measures the
  blank runs of each line's ink profile (``backends/rapid_ocr.py``); :func:`join_chars`
  inserts a space where a run wider than the word-gap threshold (:func:`word_gap_threshold`)
  lies between two characters, placed by the recogniser's per-character positions. The
  recogniser's per-character boxes alone are too coarse for this (CTC columns 8 px apart
  at its input scale: letter gaps and word gaps overlap), the pixels are not.
"""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Sequence

from rag_desktop.core.text import NO_SPACE_CLASS, joins_without_space
from rag_desktop.core.types import OcrLine

_SPACE_RE = re.compile(r"\s+")
_NO_SPACE_BEFORE = set(",.;:!?%)]}")
_NO_SPACE_AFTER = set("([{")


_SPACE_BEFORE_PUNCT_RE = re.compile(r"(?<=[A-Za-z0-9]) (?=[,.;:!?](?:\s|$))")


def fold_width(text: str) -> str:
    """NFKC, except that full-width punctuation after a CJK character stays full-width.

    NFKC folds the recogniser's full-width Latin letters and digits ("ｍｕｓｔ" → "must") and
    ligatures; applied blindly it would also turn Chinese "，" and "；" into ASCII, which
    changes correct Chinese text (measured: 1.00 → 0.91 character accuracy on a Chinese page)."""
    out: list[str] = []
    prev = ""
    for ch in text:
        if "\uff01" <= ch <= "\uff5e" and not ch.isalnum() and prev and joins_without_space(prev) \
                and not ("\uff01" <= prev <= "\uff5e"):
            out.append(ch)
        else:
            out.append(unicodedata.normalize("NFKC", ch))
        if not ch.isspace():
            prev = out[-1][-1:] if out[-1] else prev
    return "".join(out)


def normalise_ocr_text(text: str) -> str:
    """Width folding (:func:`fold_width`), single spaces, no space between a word and its comma or stop."""
    return _SPACE_BEFORE_PUNCT_RE.sub("", _SPACE_RE.sub(" ", fold_width(text)).strip())


# Word-gap threshold: at least MIN_GAP_EM × the line height (a space is 0.25–0.33 em in Latin
# fonts, a line box ≈ 1.2–1.4 em; gaps between letters are ≤ 0.15 em), and at least GAP_RATIO ×
# the line's median blank run (full-width cells leave ≈ 0.3–0.5 em around narrow letters
# inside words, ≥ 1 em between words).
MIN_GAP_EM = 0.2
GAP_RATIO = 1.8
_AFTER_PUNCT = set(".,;:!?)")


def word_gap_threshold(gaps: Sequence[tuple[float, float]], line_height: float) -> float:
    """The width above which a blank run in a line is a word space (see the constants)."""
    widths = sorted(b - a for a, b in gaps if b > a)
    median = statistics.median(widths) if widths else 0.0
    return max(MIN_GAP_EM * line_height, GAP_RATIO * median)


def join_chars(chars: Sequence[str], centers: Sequence[float], gaps: Sequence[tuple[float, float]],
               line_height: float) -> str:
    """One line from its characters, their horizontal centres and the line's blank runs
    (x0, x1): NFKC-normalised, with a space wherever a word-wide blank run lies between two
    characters and none is there yet. Spaces go only before a letter that follows a letter
    or closing punctuation (never between digits — "1" has wide side bearings — nor between
    two CJK characters)."""
    limit = word_gap_threshold(gaps, line_height)
    wide = [(a + b) / 2 for a, b in gaps if b - a > limit]
    out: list[str] = []
    prev: tuple[str, float] | None = None
    for raw, cx in zip(chars, centers, strict=False):
        ch = fold_width(raw) if not out else fold_width(out[-1][-1] + raw)[1:]
        if not ch.strip():
            if out and out[-1] != " ":
                out.append(" ")
            prev = None
            continue
        if prev is not None:
            a, b = prev[0][-1], ch[0]
            # Only Latin words are separated by spaces (CJK characters are isalpha() too).
            latin = b.isascii() and b.isalpha() and ((a.isascii() and a.isalpha()) or a in _AFTER_PUNCT)
            if latin and any(prev[1] < g < cx for g in wide):
                out.append(" ")
        out.append(ch)
        prev = (ch, cx)
    return normalise_ocr_text("".join(out))


def join_words(words: Sequence[str]) -> str:
    """One line from its word groups: a space between groups unless CJK meets CJK or the
    next group is closing punctuation (",", ".", ")") or the previous one opening ("(")."""
    out = ""
    for raw in words:
        w = normalise_ocr_text(raw)
        if not w:
            continue
        if out:
            a, b = out[-1], w[0]
            glue = (joins_without_space(a) and joins_without_space(b)) or b in _NO_SPACE_BEFORE \
                or a in _NO_SPACE_AFTER
            if not glue:
                out += " "
        out += w
    return out


def _same_row(a: OcrLine, b: OcrLine) -> bool:
    """Boxes that overlap vertically by more than half the smaller height sit on one row."""
    top, bottom = max(a.box[1], b.box[1]), min(a.box[3], b.box[3])
    smaller = min(a.box[3] - a.box[1], b.box[3] - b.box[1])
    return smaller > 0 and (bottom - top) > 0.5 * smaller


def reading_order(lines: Sequence[OcrLine]) -> list[list[OcrLine]]:
    """Rows top to bottom, each left to right (single-column pages; a two-column scan is read
    row by row across both columns — a known limit, stated in docs/evaluation.md)."""
    rows: list[list[OcrLine]] = []
    for line in sorted(lines, key=lambda ln: (ln.box[1] + ln.box[3]) / 2):
        if rows and _same_row(rows[-1][-1], line):
            rows[-1].append(line)
        else:
            rows.append([line])
    return [sorted(r, key=lambda ln: ln.box[0]) for r in rows]


def page_text(lines: Sequence[OcrLine]) -> str:
    """A page's text: rows joined by line breaks, a blank line where the vertical gap between
    rows exceeds the median row height (a paragraph break, as PyMuPDF's blocks give for
    text PDFs, so the cleaner and chunker see the same shape)."""
    rows = reading_order([ln for ln in lines if ln.text.strip()])
    if not rows:
        return ""
    heights = [max(ln.box[3] for ln in r) - min(ln.box[1] for ln in r) for r in rows]
    median_h = statistics.median(heights) if heights else 0.0
    parts: list[str] = []
    prev_bottom: float | None = None
    for row in rows:
        top = min(ln.box[1] for ln in row)
        text = join_words([ln.text for ln in row])
        if prev_bottom is not None:
            parts.append("\n\n" if top - prev_bottom > median_h else "\n")
        parts.append(text)
        prev_bottom = max(ln.box[3] for ln in row)
    return "".join(parts)


# --------------------------------------------------------------------------- junk text layers

# A text layer is junk — the page is OCR'd as if it had none — when either holds:
#  1. more than JUNK_BAD_FRACTION of its visible characters cannot be real text: U+FFFD,
#     private-use code points, controls, unassigned code points (a font without a usable
#     ToUnicode map: the PDF "has text" that no reader can use);
#  2. images cover at least SCAN_COVERAGE of the page and the text layer holds fewer than
#     SCAN_MAX_CHARS visible characters (a scan with a stamped page number, a Bates number,
#     or a scanner's one-line header: real pages of text hold hundreds).
JUNK_BAD_FRACTION = 0.3
SCAN_COVERAGE = 0.5
SCAN_MAX_CHARS = 40


def junk_text_reason(text: str, image_coverage: float) -> str | None:
    """Why a page's text layer should be replaced by OCR (None: keep it). Empty text is
    "no text layer"; ``image_coverage`` is the fraction of the page area images cover."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return "no text layer"
    bad = sum(1 for c in chars if c == "\ufffd" or unicodedata.category(c) in ("Co", "Cc", "Cn", "Cs"))
    if bad / len(chars) > JUNK_BAD_FRACTION:
        return f"text layer is {100 * bad // len(chars)}% undecodable characters"
    if image_coverage >= SCAN_COVERAGE and len(chars) < SCAN_MAX_CHARS:
        return f"a page-sized image with only {len(chars)} characters of text"
    return None


# --------------------------------------------------------------------------- measuring


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions of one character)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i]
        for j, cb in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


# a space between two characters of scripts written without spaces (core.text) is not an error
_CJK_BREAK_RE = re.compile(rf"(?<=[{NO_SPACE_CLASS}])\s+(?=[{NO_SPACE_CLASS}])")


def _comparable(text: str) -> str:
    return _CJK_BREAK_RE.sub("", " ".join(text.split()))


def char_accuracy(reference: str, hypothesis: str) -> float:
    """1 − CER: 1 − edit distance / reference length, both with whitespace runs collapsed to
    one space (so a lost word space counts as one error) and none between two CJK characters
    (a line break inside Chinese text is not a space), floored at 0."""
    ref = _comparable(reference)
    hyp = _comparable(hypothesis)
    if not ref:
        return 1.0 if not hyp else 0.0
    return max(0.0, 1.0 - edit_distance(ref, hyp) / len(ref))
