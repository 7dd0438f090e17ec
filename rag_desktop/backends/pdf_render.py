"""Render one PDF page to PNG with text snippets highlighted, through PyMuPDF (lazy import).

The viewer opens a document at the page that matters and marks the chunk's text region
and the A/B keyword terms in their colours. Highlights are real highlight annotations
added to an in-memory copy of the document (opened from the file's bytes and never
saved), so the user's file is never touched.

Matching uses MuPDF's own ``search_for`` (case-insensitive, across line breaks within a
line's text); a piece of the passage it cannot find is looked for in the page's characters with
whitespace left out (char_quads: a Chinese sentence that wraps on the page). A snippet that cannot
be found on the page is simply not marked, and the count per snippet is reported so callers (and
tests) can tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from rag_desktop.backends.errors import MissingDependency
from rag_desktop.backends.readers.base import UnreadableDocument
from rag_desktop.core.highlight import RGB, Highlight, LineMatcher, RenderedPage
from rag_desktop.core.types import OcrLine


def _pymupdf() -> ModuleType:
    try:
        import pymupdf

        return pymupdf
    except ImportError:
        try:
            import fitz

            return fitz
        except ImportError as exc:
            raise MissingDependency("pymupdf", "Showing PDF pages", "pymupdf") from exc


def _open(path: Path) -> Any:
    fitz = _pymupdf()
    if not path.is_file():
        raise FileNotFoundError(2, "the file was moved or deleted since it was added", str(path))
    try:
        # From bytes: annotations then live only in this in-memory copy. Image files (OCR'd as
        # one-page documents) open as documents too.
        suffix = path.suffix.lower().lstrip(".")
        kind = suffix if suffix in ("png", "jpg", "jpeg", "tif", "tiff") else "pdf"
        doc = fitz.open(stream=path.read_bytes(), filetype=kind)
        if kind != "pdf":  # highlight annotations need a PDF page
            image_doc, doc = doc, fitz.open("pdf", doc.convert_to_pdf())
            image_doc.close()
        return doc
    except Exception as exc:
        raise UnreadableDocument(path, f"cannot open the PDF to show it ({exc})") from exc


def page_count(path: Path | str) -> int:
    doc = _open(Path(path))
    try:
        return int(doc.page_count)
    finally:
        doc.close()


Box = tuple[float, float, float, float]


def page_lines(pg: Any) -> list[list[tuple[str, Box]]]:
    """The page's text lines as (character, box) lists, from MuPDF's rawdict."""
    return [[(ch["c"], tuple(ch["bbox"])) for span in line.get("spans", []) for ch in span.get("chars", [])]
            for block in pg.get_text("rawdict").get("blocks", []) for line in block.get("lines", [])]


def _mark_words(fitz: ModuleType, pg: Any, lines: Sequence[Sequence[tuple[str, Box]]], words: LineMatcher,
                colors: dict[str, RGB], opacity: float, found: dict[str, int]) -> int:
    """Mark the spans ``words`` finds in each text line of the page (page_lines), from the characters'
    boxes; counts each marked word (lower-cased) in ``found``."""
    n = 0
    for chars in lines:
        text = "".join(c for c, _b in chars)
        for s, e, kind in words(text):
            if kind not in colors or not (0 <= s < e <= len(chars)):
                continue
            rect = fitz.Rect(chars[s][1])
            for _c, b in chars[s + 1 : e]:
                rect |= fitz.Rect(b)
            annot = pg.add_highlight_annot(rect)
            annot.set_colors(stroke=colors[kind])
            annot.set_opacity(opacity)
            annot.update()
            n += 1
            key = text[s:e].lower()
            found[key] = found.get(key, 0) + 1
    return n


def ocr_quads(lines: Sequence[OcrLine], text: str) -> list[tuple[float, float, float, float]]:
    """Rectangles of ``text`` in recognised lines (case-insensitive, within one line): the
    line's box cut in proportion to the character offsets (OCR gives no glyph positions)."""
    needle = text.casefold()
    out: list[tuple[float, float, float, float]] = []
    for ln in lines:
        hay = ln.text.casefold()
        if not needle or len(hay) != len(ln.text):  # casefold changed lengths (ß): skip the line
            continue
        x0, y0, x1, y1 = ln.box
        start = hay.find(needle)
        while start >= 0:
            a = x0 + (x1 - x0) * start / len(hay)
            b = x0 + (x1 - x0) * (start + len(needle)) / len(hay)
            out.append((a, y0, b, y1))
            start = hay.find(needle, start + len(needle))
    return out


def char_quads(lines: Sequence[Sequence[tuple[str, Box]]], text: str) -> list[Box]:
    """Rectangles of ``text`` in the page's lines (page_lines), whitespace and case ignored: one per
    line the text runs over. MuPDF's search_for does not find a Chinese sentence that wraps (its two
    lines meet without a space in the cleaned text a passage comes from, with one on the page)."""
    chars = [(c.casefold(), i, box) for i, line in enumerate(lines) for c, box in line if not c.isspace()]
    needle = "".join(text.split()).casefold()
    if not needle or any(len(c) != 1 for c, _, _ in chars):  # casefold changed a length (ß): not searched
        return []
    hay = "".join(c for c, _, _ in chars)
    out: list[Box] = []
    start = hay.find(needle)
    while start >= 0:
        by_line: dict[int, list[float]] = {}
        for _c, line, (x0, y0, x1, y1) in chars[start:start + len(needle)]:
            r = by_line.setdefault(line, [x0, y0, x1, y1])
            r[:] = [min(r[0], x0), min(r[1], y0), max(r[2], x1), max(r[3], y1)]
        out.extend((r[0], r[1], r[2], r[3]) for r in by_line.values())
        start = hay.find(needle, start + len(needle))
    return out


def render_page(path: Path | str, page: int, highlights: Sequence[Highlight] = (), zoom: float = 1.5,
                words: LineMatcher | None = None, word_colors: dict[str, RGB] | None = None,
                word_opacity: float = 0.6, ocr_lines: Sequence[OcrLine] = ()) -> RenderedPage:
    """PNG of ``page`` (1-based, clamped to the document) with ``highlights`` marked.

    With ``words`` the keyword terms are marked by that matcher on each line's text (whole
    words, coloured by ``word_colors[kind]``) instead of being passed as ``highlights``.
    ``ocr_lines`` (the page's recognised lines, from the library's OCR cache): on a scanned
    page with no text to search, highlights are found in these lines instead.
    """
    if not (0.1 <= zoom <= 8.0):
        raise ValueError(f"render_page: zoom {zoom} is outside 0.1..8")
    fitz = _pymupdf()
    p = Path(path)
    doc = _open(p)
    try:
        n = int(doc.page_count)
        if n == 0:
            raise UnreadableDocument(p, "the PDF has no pages")
        number = min(max(1, int(page)), n)
        pg = doc[number - 1]
        found: dict[str, int] = {}
        region_y: float | None = None  # the passage's top on the page, in PDF points
        lines: list[list[tuple[str, Box]]] | None = None  # page_lines, read once when first needed
        for h in highlights:
            text = h.text.strip()
            if not text:
                continue
            quads = pg.search_for(text, quads=True)
            if not quads and h.kind == "region":  # the passage's piece wraps: found in the page's characters
                lines = page_lines(pg) if lines is None else lines
                quads = [fitz.Rect(*r).quad for r in char_quads(lines, text)]
            if not quads and ocr_lines:
                quads = [fitz.Rect(*r).quad for r in ocr_quads(ocr_lines, text)]
            found[h.text] = found.get(h.text, 0) + len(quads)
            if not quads:
                continue
            if h.kind == "region":
                top = min(min(q.ul.y, q.ur.y) for q in quads)
                region_y = top if region_y is None else min(region_y, top)
            annot = pg.add_highlight_annot(quads)
            annot.set_colors(stroke=h.color)
            annot.set_opacity(h.opacity)
            annot.update()
        marked = 0
        if words is not None:
            lines = page_lines(pg) if lines is None else lines
            marked = _mark_words(fitz, pg, lines, words, word_colors or {}, word_opacity, found)
        pix = pg.get_pixmap(matrix=fitz.Matrix(zoom, zoom), annots=True, alpha=False)
        return RenderedPage(pix.tobytes("png"), number, n, int(pix.width), int(pix.height), found, marked,
                            str(pg.get_label() or ""),
                            None if region_y is None else int((region_y - pg.rect.y0) * zoom))
    finally:
        doc.close()
