"""Scans the tests make themselves: text rendered to an image with PyMuPDF, wrapped in a PDF.

A "scan" page holds only a picture of the text (no text layer), as a scanner produces;
``text`` pages are ordinary PDF text for mixed documents. Fonts: ``helv``/``tiro`` for
English, ``china-s`` (MuPDF's built-in CJK font) for Chinese — and for English set in a CJK
font, the case where PP-OCR loses word spaces and returns full-width letters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pymupdf

A4 = pymupdf.paper_rect("a4")
MARGIN = 72


@dataclass(frozen=True)
class PageSpec:
    text: str
    font: str = "helv"
    kind: str = "scan"  # "scan": image only; "text": a real text layer; "junk": scan + a stray page number
    size: float = 12.0


def _render(spec: PageSpec, dpi: int) -> pymupdf.Pixmap:
    doc = pymupdf.open()
    page = doc.new_page(width=A4.width, height=A4.height)
    rect = pymupdf.Rect(MARGIN, MARGIN, A4.width - MARGIN, A4.height - MARGIN)
    left = page.insert_textbox(rect, spec.text, fontsize=spec.size, fontname=spec.font)
    assert left >= 0, f"text does not fit the page ({left})"
    pix = page.get_pixmap(dpi=dpi, alpha=False)
    doc.close()
    return pix


def make_pdf(path: Path, pages: list[PageSpec], dpi: int = 150) -> Path:
    out = pymupdf.open()
    for spec in pages:
        page = out.new_page(width=A4.width, height=A4.height)
        if spec.kind == "text":
            rect = pymupdf.Rect(MARGIN, MARGIN, A4.width - MARGIN, A4.height - MARGIN)
            page.insert_textbox(rect, spec.text, fontsize=spec.size, fontname=spec.font)
            continue
        page.insert_image(page.rect, pixmap=_render(spec, dpi))
        if spec.kind == "junk":  # a stamped page number over the scan: a text layer of 2 characters
            page.insert_text((A4.width / 2, A4.height - 30), "12", fontsize=9)
    out.save(path)
    out.close()
    return path


def make_image(path: Path, spec: PageSpec, dpi: int = 150) -> Path:
    """A .png/.jpg/.tif of one rendered page (format from the suffix)."""
    pix = _render(spec, dpi)
    if path.suffix.lower() in (".tif", ".tiff"):
        from PIL import Image

        Image.frombytes("RGB", (pix.width, pix.height), pix.samples).save(path)
    else:
        pix.save(path)
    return path


EN_TEXT = ("Scanned contract. A bicycle chain must be greased every ninety days. "
           "The tenant shall return the keys before the lease ends.")
ZH_TEXT = "数据出境安全评估办法自二〇二二年九月一日起施行。个人信息处理者应当履行告知义务。"
EN_IN_CJK_FONT = "Check the tyre pressure weekly and replace the brake pads."
