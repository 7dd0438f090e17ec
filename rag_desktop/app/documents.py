"""The document viewer's way to a file's pages (the ui imports no backend).

The viewer decides what to mark (core.highlight); rendering the page with PyMuPDF and
reading a Word or text file's pages are the backends' work, reached through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rag_desktop.core.highlight import RGB, Highlight, LineMatcher, RenderedPage
from rag_desktop.core.types import CancelToken, OcrLine


def render_page(path: Path | str, page: int, highlights: Sequence[Highlight] = (), zoom: float = 1.5, *,
                words: LineMatcher | None = None, word_colors: dict[str, RGB] | None = None,
                ocr_lines: Sequence[OcrLine] = ()) -> RenderedPage:
    """One page of a PDF (or image) as PNG with ``highlights`` and whole-word marks
    (backends.pdf_render.render_page, which documents the arguments)."""
    from rag_desktop.backends.pdf_render import render_page as render

    return render(path, page, highlights, zoom, words=words, word_colors=word_colors, ocr_lines=ocr_lines)


def page_texts(path: Path | str, cancel: CancelToken | None = None) -> list[str]:
    """The text of each page of a document, as the library's reader reads it."""
    from rag_desktop.backends.readers import read_document

    return [p.text for p in read_document(Path(path), cancel).pages]
