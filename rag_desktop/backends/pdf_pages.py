"""A few pages of a PDF with their printed labels, for locating answer passages.

Ingest keeps only page ranges per chunk; an answer passage inside a chunk that spans pages
needs the page it is on, and the UI shows the page *label* the PDF defines (a textbook
chapter printed as pages 87–89 is physical pages 1–3). PyMuPDF is imported lazily, as in
:mod:`rag_desktop.backends.readers.pdf`, whose page-text extraction this reuses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rag_desktop.backends.readers.pdf import _open, _page_text, load_pymupdf


@dataclass(frozen=True)
class PdfPage:
    number: int  # physical, 1-based
    text: str  # raw page text (the reader's blocks)
    label: str  # printed label ("87", "iv"), "" when the PDF defines none


def read_pages(path: Path | str, numbers: Iterable[int]) -> list[PdfPage]:
    """The given physical pages (1-based; out-of-range numbers are skipped)."""
    fitz = load_pymupdf()
    doc = _open(fitz, Path(path))
    try:
        out = []
        for n in sorted(set(numbers)):
            if 1 <= n <= doc.page_count:
                page = doc.load_page(n - 1)
                out.append(PdfPage(n, _page_text(page), str(page.get_label() or "")))
        return out
    finally:
        doc.close()


def page_labels(path: Path | str) -> dict[int, str]:
    """Physical page → printed label for every page that has one (empty: the PDF defines none)."""
    fitz = load_pymupdf()
    doc = _open(fitz, Path(path))
    try:
        out = {}
        for i in range(doc.page_count):
            label = str(doc.load_page(i).get_label() or "")
            if label:
                out[i + 1] = label
        return out
    finally:
        doc.close()
