"""Scanned pages through PyMuPDF: which pages need OCR, their images, and image files as documents.

* A PDF page needs OCR when its text layer is missing or junk
  (:func:`rag_desktop.core.ocr_text.junk_text_reason`: mostly undecodable characters, or a
  page-sized image with a few stray characters on it). Pages with real text keep it — a
  mixed document is OCR'd only where it has to be.
* Pages are rendered at ``dpi`` (RGB, no alpha); boxes come back in PDF points.
* ``.png``/``.jpg``/``.jpeg``/``.tif``/``.tiff`` files are one-page documents (each frame of a
  multi-page TIFF is a page) read at their own pixel size, capped at :data:`MAX_PIXELS`
  so a huge image cannot exhaust memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.readers.base import UnreadableDocument, heading_like_line
from rag_desktop.backends.readers.pdf import load_pymupdf
from rag_desktop.core.ocr_text import junk_text_reason
from rag_desktop.core.protocols import OcrEngine
from rag_desktop.core.types import CancelToken, OcrPage, Page, ParsedDocument

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff"})
OCR_OFF_REASON = "an image file — turn OCR on (Settings: ingest.ocr) to read it"
NO_TEXT_REASON = "OCR found no text in the image"
MAX_PIXELS = 40_000_000  # ≈ an A3 page at 300 dpi; beyond, the page is downscaled


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def open_document(path: Path) -> Any:
    """The PDF or image as a PyMuPDF document (by content: any file name opens)."""
    fitz = load_pymupdf()
    kind = path.suffix.lower().lstrip(".")
    what = "PDF" if kind == "pdf" else "image"
    try:
        doc = fitz.open(stream=path.read_bytes(), filetype="pdf" if kind == "pdf" else kind)
    except (RuntimeError, ValueError) as exc:
        raise UnreadableDocument(path, f"not a valid {what} — the file is damaged or not really a .{kind}") from exc
    if kind != "pdf":
        try:  # MuPDF opens any bytes as an image document and decodes them on first page load
            doc.load_page(0)
        except Exception as exc:  # MuPDF's FzError* types are not RuntimeErrors
            doc.close()
            raise UnreadableDocument(path, f"not a valid {what} — the file is damaged or not really "
                                           f"a .{kind}") from exc
    return doc


def _image_coverage(page: Any) -> float:
    """Fraction of the page covered by images (overlaps counted twice, capped at 1)."""
    area = float(page.rect.width * page.rect.height) or 1.0
    covered = 0.0
    for info in page.get_image_info():
        x0, y0, x1, y1 = info["bbox"]
        r = page.rect
        w = max(0.0, min(x1, r.x1) - max(x0, r.x0))
        h = max(0.0, min(y1, r.y1) - max(y0, r.y0))
        covered += w * h
    return min(1.0, covered / area)


def pages_needing_ocr(path: Path) -> list[tuple[int, str]]:
    """(1-based page, reason) for every page to recognise; all pages of an image file."""
    doc = open_document(path)
    try:
        if is_image(path):
            return [(i + 1, "image") for i in range(doc.page_count)]
        if doc.needs_pass:
            return []  # read_pdf reports the password; nothing to OCR
        out: list[tuple[int, str]] = []
        for index in range(doc.page_count):
            page = doc.load_page(index)
            text = page.get_text("text")
            if not text.strip() and not (page.get_image_info() or page.get_drawings()):
                continue  # a blank page: nothing to read
            reason = junk_text_reason(text, _image_coverage(page))
            if reason is not None:
                out.append((index + 1, reason))
        return out
    finally:
        doc.close()


def _zoom(page: Any, dpi: int, image: bool) -> float:
    if image:
        infos = page.get_image_info()
        native_w = float(infos[0]["width"]) if infos else page.rect.width
        zoom = native_w / max(page.rect.width, 1e-6)
    else:
        zoom = dpi / 72.0
    pixels = page.rect.width * page.rect.height * zoom * zoom
    if pixels > MAX_PIXELS:
        zoom *= (MAX_PIXELS / pixels) ** 0.5
    return zoom


def render_rgb(page: Any, zoom: float) -> npt.NDArray[np.uint8]:
    fitz = load_pymupdf()
    pix = page.get_pixmap(matrix=fitz.Matrix(zoom, zoom), alpha=False, colorspace=fitz.csRGB)
    return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, 3).copy()


def recognise_pages(path: Path, engine: OcrEngine, pages: Sequence[int], dpi: int,
                    cancel: CancelToken | None = None) -> Iterator[OcrPage]:
    """Render and recognise ``pages`` (1-based) one at a time, in order."""
    doc = open_document(path)
    try:
        image = is_image(path)
        for number in pages:
            if cancel is not None:
                cancel.raise_if_set()
            page = doc.load_page(number - 1)
            zoom = _zoom(page, dpi, image)
            lines = engine.recognise(render_rgb(page, zoom), zoom)
            yield OcrPage(number, float(page.rect.width), float(page.rect.height), tuple(lines))
    finally:
        doc.close()


def read_image(path: Path, cancel: CancelToken | None = None,
               ocr_text: Mapping[int, str] | None = None) -> ParsedDocument:
    """An image file as a document whose pages are the OCR text (``ocr_text``: page → text)."""
    if ocr_text is None:
        raise UnreadableDocument(path, OCR_OFF_REASON)
    doc = open_document(path)  # a damaged image is reported as such, not as "no text"
    try:
        n = doc.page_count
    finally:
        doc.close()
    pages = tuple(Page(i, ocr_text.get(i, "")) for i in range(1, n + 1))
    if not any(p.text.strip() for p in pages):
        raise UnreadableDocument(path, NO_TEXT_REASON)
    first = next(p.text for p in pages if p.text.strip())
    return ParsedDocument(path=str(path), title=heading_like_line(first) or path.stem, pages=pages,
                          kind="image", warnings=(f"read by OCR ({n} page{'s' if n > 1 else ''})",))
