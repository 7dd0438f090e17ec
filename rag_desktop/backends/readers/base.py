"""What every reader shares: the one error they raise, the reader signature and the title guess.

A module of its own so the readers (``pdf``, ``docx``, ``text``, ``backends.scan_pages``) and the
dispatch in ``readers/__init__.py`` both import it and never each other: the dispatch imports a
reader, a reader imports only this (no import cycle; tests/test_architecture_cycles.py checks).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from rag_desktop.core.cleaning import is_page_number_line, is_toc_entry
from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.types import CancelToken, ParsedDocument

Reader = Callable[[Path, CancelToken | None], ParsedDocument]


def display_name(path: Path | str) -> str:
    """The file name as printable text: bytes that are not UTF-8 become U+FFFD.

    Paths from ``os.fsdecode`` keep undecodable bytes as lone surrogates, which cannot be
    encoded again (Qt labels and log files would fail on them).
    """
    name = Path(path).name or str(path)
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


class UnreadableDocument(RagError):
    """A document that cannot be read; ``str()`` is ``"<file name>: <reason>"``."""

    kind = ErrorKind.DOCUMENT

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
