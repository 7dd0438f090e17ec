"""PDF files through PyMuPDF (imported lazily as ``pymupdf``, falling back to ``fitz``).

* Text comes per page (``Page.number`` is the 1-based page index, which is what a viewer
  opens), as PyMuPDF text blocks joined by blank lines so that blocks — roughly paragraphs —
  stay paragraphs for the cleaner; lines inside a block are single line breaks (visual wraps).
  A block that is the typeset next line of a Chinese line above it (many CJK PDFs give each
  line a block) joins that block as a line: else a blank line would split words ("其" / "他").
* A page without text that draws images or vector graphics is reported in the warnings
  ("page N has no text layer — scanned?"); if no page has any text the document is
  unreadable ("no text layer — scanned PDF? OCR it first").
* Password-protected PDFs (a user password is needed to open them) are unreadable; PDFs with
  only an owner password (printing/copying restrictions) open and are read.
* Empty, non-PDF, damaged or truncated files are unreadable with the reason. MuPDF repairs
  some damaged files on opening; those are read, with a warning that text may be missing.
* Title: the metadata title unless it is a placeholder ("Untitled", "Microsoft Word -
  report.doc"), else the first heading-like line of the first page with text, else the file
  name without extension.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from rag_desktop.backends.errors import MissingDependency
from rag_desktop.backends.readers.base import UnreadableDocument, heading_like_line
from rag_desktop.core.cleaning import wraps_into
from rag_desktop.core.types import CancelToken, Page, ParsedDocument

SCANNED_REASON = "no text layer — scanned PDF? OCR it first"
PASSWORD_REASON = (
    "the PDF is password-protected — remove the password (save an unprotected copy) and add it again"
)
DAMAGED_REASON = "not a valid PDF — the file is damaged, truncated or not really a PDF"
REPAIRED_WARNING = "the PDF is damaged and was repaired on opening; some text may be missing"

# The PDF standard lets the header start anywhere in the first 1024 bytes.
_HEADER_WINDOW = 1024
_PLACEHOLDER_TITLES = frozenset({"untitled", "title", "document", "slide 1", "no title", "无标题"})
_WORD_PREFIX_RE = re.compile(r"^microsoft (?:word|powerpoint|excel) - ", re.IGNORECASE)
_FILE_NAME_RE = re.compile(r"\.(?:pdf|docx?|pptx?|xlsx?|indd|tex|dvi|ps|txt|rtf|odt)$", re.IGNORECASE)


def load_pymupdf() -> ModuleType:
    """The PyMuPDF module (``pymupdf``, or the legacy ``fitz`` name); MissingDependency if absent.

    MuPDF's messages ("MuPDF error: …" while repairing a damaged file) go to the Python log
    (logger ``pymupdf``, level WARNING), not to stdout, where PyMuPDF prints them by default:
    they made ``rag-desktop ingest --json`` output invalid JSON.
    """
    for name in ("pymupdf", "fitz"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        set_messages = getattr(module, "set_messages", None)  # PyMuPDF >= 1.24
        if set_messages is not None:
            set_messages(pylogging_name="pymupdf", pylogging_level=logging.WARNING)
        return module
    raise MissingDependency("pymupdf", "Reading PDF files", "pymupdf")


def _name_is_utf8(path: Path) -> bool:
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _check_header(path: Path) -> None:
    with path.open("rb") as fh:
        head = fh.read(_HEADER_WINDOW)
    if not head:
        raise UnreadableDocument(path, "the file is empty (0 bytes)")
    if b"%PDF-" not in head:
        raise UnreadableDocument(path, "not a PDF file (no %PDF header) — renamed from another format?")


def _open(fitz: ModuleType, path: Path) -> Any:
    """Open the PDF; by content if the file name is not UTF-8 (MuPDF cannot open such names)."""
    try:
        if _name_is_utf8(path):
            return fitz.open(os.fspath(path), filetype="pdf")
        return fitz.open(stream=path.read_bytes(), filetype="pdf")
    except (RuntimeError, ValueError) as exc:  # pymupdf.FileDataError/EmptyFileError are RuntimeErrors
        raise UnreadableDocument(path, DAMAGED_REASON) from exc


def _page_text(page: Any) -> str:
    """Text blocks of a page, in content order, separated by blank lines; a block that continues the
    line of the block above it (:func:`_continues`) joins it as its next line."""
    # Block tuples: (x0, y0, x1, y1, text, block_no, block_type); type 1 is an image.
    blocks = [b for b in page.get_text("blocks") if b[6] == 0 and str(b[4]).strip()]
    right = max((float(b[2]) for b in blocks), default=0.0)
    parts: list[str] = []
    for i, b in enumerate(blocks):
        text = str(b[4]).strip()
        if parts and _continues(blocks[i - 1], b, right) and wraps_into(parts[-1], text):
            parts[-1] += "\n" + text
        else:
            parts.append(text)
    return "\n\n".join(parts)


def _continues(above: Any, block: Any, right: float) -> bool:
    """Layout: ``block`` starts on the line right under ``above`` (a gap of at most half a line),
    not indented past it (``above`` may be a paragraph's indented first line), and ``above`` runs
    to the page's right text edge (within two line heights, about two CJK characters: a justified
    line stops where the next character would not fit): a line wrapped by the typesetter, not a
    paragraph's last line. A paragraph break shows as a wider gap, an indent or a short line, and
    keeps its blank line."""
    x0, y0, x1, y1 = (float(v) for v in above[:4])
    lines = max(1, str(above[4]).strip().count("\n") + 1)
    height = (y1 - y0) / lines
    gap = float(block[1]) - y1
    return (-0.2 * height <= gap <= 0.5 * height and float(block[0]) <= x0 + 0.5 * height
            and x1 >= right - 2 * height)


def _draws_something(page: Any) -> bool:
    """True if a text-less page shows images or vector graphics (a scan, a figure)."""
    return bool(page.get_image_info()) or bool(page.get_drawings())


def _page_ranges(numbers: list[int]) -> str:
    """``[2, 3, 4, 7]`` → ``"2–4, 7"``."""
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}–{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def scanned_pages_warning(numbers: list[int]) -> str:
    """``"page 3 has no text layer — scanned?"`` or ``"pages 2–4, 7 have no text layer — scanned?"``."""
    if len(numbers) == 1:
        return f"page {numbers[0]} has no text layer — scanned?"
    return f"pages {_page_ranges(numbers)} have no text layer — scanned?"


def _read_pages(doc: Any, cancel: CancelToken | None,
                ocr_text: Mapping[int, str] | None = None) -> tuple[list[Page], list[str]]:
    pages: list[Page] = []
    warnings: list[str] = []
    textless: list[int] = []
    for index in range(doc.page_count):
        if cancel is not None:
            cancel.raise_if_set()
        number = index + 1
        if ocr_text is not None and number in ocr_text:  # recognised by OCR (backends/scan_pages.py)
            pages.append(Page(number, ocr_text[number]))
            continue
        try:
            page = doc.load_page(index)
            text = _page_text(page)
            if not text and _draws_something(page):
                textless.append(number)
        except (RuntimeError, ValueError) as exc:
            warnings.append(f"page {number} could not be read ({exc})")
            text = ""
        pages.append(Page(number, text))
    if textless:
        warnings.append(scanned_pages_warning(textless))
    if ocr_text:
        done = sorted(n for n in ocr_text if 1 <= n <= doc.page_count)
        if done:
            warnings.append(f"{'page' if len(done) == 1 else 'pages'} {_page_ranges(done)} read by OCR")
    return pages, warnings


def _metadata_title(doc: Any) -> str | None:
    title = " ".join(str((doc.metadata or {}).get("title") or "").split())
    title = _WORD_PREFIX_RE.sub("", title)
    if len(title) < 2 or title.casefold() in _PLACEHOLDER_TITLES or _FILE_NAME_RE.search(title):
        return None
    return title


def _title(doc: Any, pages: list[Page], path: Path) -> str:
    first_text = next((p.text for p in pages if p.text), "")
    return _metadata_title(doc) or heading_like_line(first_text) or path.stem


def read_pdf(path: Path, cancel: CancelToken | None = None, *,
             ocr_text: Mapping[int, str] | None = None) -> ParsedDocument:
    """Read a PDF into one :class:`Page` per page (rules in the module doc); pages in
    ``ocr_text`` (page number → recognised text) take that text instead of their layer."""
    fitz = load_pymupdf()
    _check_header(path)
    doc = _open(fitz, path)
    try:
        if doc.needs_pass:
            raise UnreadableDocument(path, PASSWORD_REASON)
        if doc.page_count == 0:
            raise UnreadableDocument(path, "the PDF has no pages (damaged or truncated?)")
        pages, warnings = _read_pages(doc, cancel, ocr_text)
        repaired = bool(getattr(doc, "is_repaired", False))
        if not any(p.text for p in pages):
            raise UnreadableDocument(path, DAMAGED_REASON if repaired else SCANNED_REASON)
        if repaired:
            warnings.insert(0, REPAIRED_WARNING)
        title = _title(doc, pages, path)
    finally:
        doc.close()
    return ParsedDocument(
        path=str(path), title=title, pages=tuple(pages), kind="pdf", warnings=tuple(warnings)
    )
