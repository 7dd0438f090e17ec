"""Reading documents: dispatch by file extension, and the one error every reader raises.

``read_document(path)`` returns a :class:`ParsedDocument` (raw page texts, before cleaning) or
raises :class:`UnreadableDocument` whose message names the file and says what is wrong in
words a person can act on ("report.pdf: the PDF is password-protected — ..."). Folder-level
problems (missing file, folder named like a file, permission denied, pipes) are checked here
once; format-level problems are checked by the readers.

The readers themselves (``readers.pdf``, ``readers.docx``, ``readers.text``) are imported when
first needed (the PDF/Word libraries they wrap are heavy); they import what they share
(:class:`UnreadableDocument`, the title guess) from ``readers.base``, never from here.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from rag_desktop.backends.readers.base import Reader, UnreadableDocument, display_name, heading_like_line
from rag_desktop.core.types import CancelToken, ParsedDocument

__all__ = [
    "LEGACY_DOC_REASON", "OCR_SUFFIXES", "REJECTED_SUFFIXES", "SUPPORTED_SUFFIXES", "Reader", "UnreadableDocument",
    "display_name", "heading_like_line", "is_readable_name", "read_document",
]

SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".pdf", ".docx", ".txt", ".md", ".markdown",
                                                 ".png", ".jpg", ".jpeg", ".tif", ".tiff"})
# Readers that take OCR text for their pages (page number → text): backends/scan_pages.py.
OCR_SUFFIXES: frozenset[str] = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff"})

LEGACY_DOC_REASON = "legacy Word .doc is not supported — save it as .docx"
# Files a folder scan should still hand to read_document, so the person hears why they are
# skipped instead of the file silently missing from the library.
REJECTED_SUFFIXES: Mapping[str, str] = {".doc": LEGACY_DOC_REASON}


# --------------------------------------------------------------------------- dispatch


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied — the file cannot be read by this user"
    if isinstance(exc, FileNotFoundError):
        return "file not found (moved or deleted?)"
    if isinstance(exc, IsADirectoryError):
        return "this is a folder, not a file"
    return f"the file cannot be read ({exc.strerror or exc})"


def _check_file(path: Path) -> None:
    """Raise UnreadableDocument unless ``path`` is an existing regular file."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise UnreadableDocument(path, _os_reason(exc)) from exc
    if stat.S_ISDIR(mode):
        raise UnreadableDocument(path, "this is a folder, not a file")
    if not stat.S_ISREG(mode):
        # Reading a pipe or a device could block forever or never end.
        raise UnreadableDocument(path, "not a regular file (a pipe, socket or device)")


def _reader_for(suffix: str, ocr_text: Mapping[int, str] | None = None) -> Reader:
    # Imported here, not at the top: the PDF/Word libraries the readers wrap are heavy.
    if suffix == ".pdf":
        from rag_desktop.backends.readers.pdf import read_pdf

        return lambda p, c: read_pdf(p, c, ocr_text=ocr_text)
    if suffix in OCR_SUFFIXES:
        from rag_desktop.backends.scan_pages import read_image

        return lambda p, c: read_image(p, c, ocr_text)
    if suffix == ".docx":
        from rag_desktop.backends.readers.docx import read_docx

        return read_docx
    from rag_desktop.backends.readers.text import read_text

    return read_text


def read_document(path: Path | str, cancel: CancelToken | None = None, *,
                  ocr_text: Mapping[int, str] | None = None) -> ParsedDocument:
    """Read a .pdf, .docx, .txt, .md or image file into pages; raise UnreadableDocument if impossible.

    ``ocr_text`` (page number → recognised text) replaces those pages of a PDF and is the text
    of an image file (without it an image is unreadable: OCR is off).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in REJECTED_SUFFIXES:
        raise UnreadableDocument(path, REJECTED_SUFFIXES[suffix])
    if suffix not in SUPPORTED_SUFFIXES:
        shown = suffix or "(no extension)"
        raise UnreadableDocument(
            path, f"unsupported file type {shown} — supported: .pdf, .docx, .txt, .md, .png, .jpg, .tif")
    _check_file(path)
    if cancel is not None:
        cancel.raise_if_set()
    reader = _reader_for(suffix, ocr_text)
    try:
        return reader(path, cancel)
    except OSError as exc:
        raise UnreadableDocument(path, _os_reason(exc)) from exc


def is_readable_name(path: Path | str) -> bool:
    """True if a folder scan should pass ``path`` to :func:`read_document`.

    Includes the rejected suffixes (``.doc``) so they surface with their reason. Hidden
    files and Office lock files (``~$report.docx``) are not documents.
    """
    name = os.fsdecode(Path(path).name)
    if name.startswith((".", "~$")):
        return False
    suffix = Path(name).suffix.lower()
    return suffix in SUPPORTED_SUFFIXES or suffix in REJECTED_SUFFIXES
