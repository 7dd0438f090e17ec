"""Reading documents: dispatch by file extension, and the one error every reader raises.

``read_document(path)`` returns a :class:`ParsedDocument` (raw page texts, before cleaning) or
raises :class:`UnreadableDocument` whose message names the file and says what is wrong in
words a person can act on ("report.pdf: the PDF is password-protected — ..."). Folder-level
problems (missing file, folder named like a file, permission denied, pipes) are checked here
once; format-level problems are checked by the readers.

The readers themselves (``pdf_reader``, ``docx_reader``, ``text_reader``) are imported when
first needed: they import :class:`UnreadableDocument` from this module, and the PDF/Word
libraries they wrap are heavy.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from rag_desktop.core.cleaning import is_page_number_line, is_toc_entry
from rag_desktop.core.types import CancelToken, ParsedDocument

Reader = Callable[[Path, CancelToken | None], ParsedDocument]

SUPPORTED_SUFFIXES: frozenset[str] = frozenset({".pdf", ".docx", ".txt", ".md", ".markdown",
                                                 ".png", ".jpg", ".jpeg", ".tif", ".tiff"})
# Readers that take OCR text for their pages (page number → text): backends/scan_pages.py.
OCR_SUFFIXES: frozenset[str] = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff"})

LEGACY_DOC_REASON = "legacy Word .doc is not supported — save it as .docx"
# Files a folder scan should still hand to read_document, so the person hears why they are
# skipped instead of the file silently missing from the library.
REJECTED_SUFFIXES: Mapping[str, str] = {".doc": LEGACY_DOC_REASON}


def display_name(path: Path | str) -> str:
    """The file name as printable text: bytes that are not UTF-8 become U+FFFD.

    Paths from ``os.fsdecode`` keep undecodable bytes as lone surrogates, which cannot be
    encoded again (Qt labels and log files would fail on them).
    """
    name = Path(path).name or str(path)
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class UnreadableDocument(Exception):
    """A document that cannot be read; ``str()`` is ``"<file name>: <reason>"``."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{display_name(self.path)}: {reason}")

    def __reduce__(self) -> tuple[type[UnreadableDocument], tuple[Path, str]]:
        # Keeps the exception picklable (worker processes), which a custom __init__ breaks.
        return (type(self), (self.path, self.reason))


# --------------------------------------------------------------------------- titles

_MAX_TITLE_CHARS = 120
_TITLE_SCAN_CHARS = 4000
_TITLE_SCAN_LINES = 3
_MARKDOWN_HEADING_RE = re.compile(r"#{1,6}\s+")
_NOT_A_TITLE_END = tuple(",;:，；：、.。")
_URL_START = ("http://", "https://", "www.", "ftp://")


def _title_candidate(line: str) -> str | None:
    line = " ".join(line.split())
    line = _MARKDOWN_HEADING_RE.sub("", line, count=1).strip("# ").strip()
    if not 2 <= len(line) <= _MAX_TITLE_CHARS:
        return None
    if not any(ch.isalpha() for ch in line) or line.endswith(_NOT_A_TITLE_END):
        return None
    if line.lower().startswith(_URL_START) or is_page_number_line(line, edge=True) or is_toc_entry(line):
        return None
    return line


def heading_like_line(text: str) -> str | None:
    """A title guess: the first heading-like line among the first few non-blank lines.

    Heading-like: 2–120 characters, contains a letter, does not end like a sentence or clause
    (``.,;:。，；：、``), is not a URL, page number or TOC entry. Only the first three
    non-blank lines are looked at (a title comes first; a short line deeper in the body is
    more likely a caption), and only the first 4,000 characters are split into lines.
    """
    seen = 0
    for raw in text[:_TITLE_SCAN_CHARS].splitlines():
        if not raw.strip():
            continue
        candidate = _title_candidate(raw)
        if candidate is not None:
            return candidate
        seen += 1
        if seen >= _TITLE_SCAN_LINES:
            break
    return None


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
    # Imported here, not at the top: each reader imports UnreadableDocument from this module.
    if suffix == ".pdf":
        from rag_desktop.backends.pdf_reader import read_pdf

        return lambda p, c: read_pdf(p, c, ocr_text=ocr_text)
    if suffix in OCR_SUFFIXES:
        from rag_desktop.backends.scan_pages import read_image

        return lambda p, c: read_image(p, c, ocr_text)
    if suffix == ".docx":
        from rag_desktop.backends.docx_reader import read_docx

        return read_docx
    from rag_desktop.backends.text_reader import read_text

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
