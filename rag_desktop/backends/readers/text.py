"""Plain-text and Markdown files (.txt, .md, .markdown): one logical page.

Encodings are tried in this order (no third-party detector; these cover the libraries the
app is built for — English and Chinese documents):

1. a byte-order mark decides: UTF-32, UTF-8 (``utf-8-sig``) or UTF-16;
2. strict UTF-8;
3. strict GB18030 (a superset of GBK and GB2312, the usual encodings of Chinese text files);
4. Latin-1, which decodes any bytes, with a warning that the text may be garbled.

GB18030 accepts some Latin-1 byte pairs too (a letter with an accent followed by an ASCII
letter), so a Western-European Latin-1 file can come out as Chinese; the order favours the
Chinese files that are far more common in this app's libraries.

The whole file is read into memory (a 50 MB file is fine); what follows — cleaning and
chunking — is linear in its size.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Literal

from rag_desktop.backends.readers.base import UnreadableDocument, heading_like_line
from rag_desktop.core.types import CancelToken, Page, ParsedDocument

_BOMS: tuple[tuple[bytes, str], ...] = (
    # UTF-32 first: its little-endian BOM starts with the UTF-16 one.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_FALLBACK_ENCODINGS = ("utf-8", "gb18030")
_BINARY_SNIFF_BYTES = 8192


def _bom_encoding(data: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def decode_text(data: bytes) -> tuple[str, str, tuple[str, ...]]:
    """Decode file bytes: returns (text, encoding used, warnings). Never raises."""
    bom = _bom_encoding(data)
    for encoding in (bom,) if bom else _FALLBACK_ENCODINGS:
        try:
            return data.decode(encoding), encoding, ()
        except UnicodeDecodeError:
            continue
    tried = bom or ", ".join(_FALLBACK_ENCODINGS)
    warning = f"the text is not valid {tried}; it was read as Latin-1 and some characters may be wrong"
    return data.decode("latin-1"), "latin-1", (warning,)


def read_text(path: Path, cancel: CancelToken | None = None) -> ParsedDocument:
    """Read a .txt/.md file as one page (encoding rules in the module doc)."""
    data = path.read_bytes()
    if not data:
        raise UnreadableDocument(path, "the file is empty (0 bytes)")
    if _bom_encoding(data) is None and b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise UnreadableDocument(
            path, "this looks like a binary file, not text (NUL bytes; UTF-16 text needs a byte-order mark)"
        )
    if cancel is not None:
        cancel.raise_if_set()
    text, _encoding, warnings = decode_text(data)
    del data  # the bytes are no longer needed; a 50 MB file should not be held twice
    if not text.strip():
        raise UnreadableDocument(path, "the file contains no text (only whitespace)")
    kind: Literal["txt", "md"] = "txt" if path.suffix.lower() == ".txt" else "md"
    title = heading_like_line(text) or path.stem
    return ParsedDocument(path=str(path), title=title, pages=(Page(1, text),), kind=kind, warnings=warnings)
