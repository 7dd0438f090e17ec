"""Word .docx files through python-docx (imported lazily).

python-docx opens the package and resolves the main document part, styles and core
properties; the body is then walked as XML so that paragraphs and tables come out in
document order (``Document.paragraphs`` and ``Document.tables`` are separate lists) and so
that content controls (``w:sdt``) and hard page breaks are seen.

* Every paragraph, heading and table row becomes its own block; blocks are separated by a
  blank line, so the cleaner keeps them apart (a heading stays on its own line).
* Table rows are their cells' text joined by ``" | "``; empty cells are left out, a cell
  spanning several columns (``gridSpan``) appears once, and a nested table is flattened into
  its cell as rows joined by ``" / "``.
* Pages: Word has no fixed pages, so the text is split at the page breaks the author put in
  — ``<w:br w:type="page"/>``, "page break before" on a paragraph, and section breaks whose
  next section starts on a new page (not "continuous"/"nextColumn"). A document without such
  breaks is one logical page (page 1); a break before any text does not make an empty page.
  ``w:lastRenderedPageBreak`` is not used: it exists only if Word saved the file and shifts
  with fonts and printers on other machines.
* Not read: headers, footers, footnotes and comments (boilerplate or side notes), deleted
  tracked changes, field codes (their displayed results are read), and the VML fallback copy
  of text boxes (the DrawingML copy is read, so a text box is not read twice).
* Title: core properties' title, else the first paragraph styled "Title" or "Heading 1",
  else the first heading-like line, else the file name without extension.
"""

from __future__ import annotations

import importlib
import itertools
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from rag_desktop.backends.errors import MissingDependency
from rag_desktop.backends.readers.base import UnreadableDocument, heading_like_line
from rag_desktop.core.types import CancelToken, Page, ParsedDocument

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_P, _TBL, _TR, _TC = _W + "p", _W + "tbl", _W + "tr", _W + "tc"
_T, _TAB, _BR, _CR, _NB_HYPHEN = _W + "t", _W + "tab", _W + "br", _W + "cr", _W + "noBreakHyphen"
_PPR, _RPR, _SECT_PR, _TYPE, _VAL = _W + "pPr", _W + "rPr", _W + "sectPr", _W + "type", _W + "val"
_PAGE_BREAK_BEFORE = _W + "pageBreakBefore"
# Containers that only wrap block-level content: content controls and custom XML.
_WRAPPERS = frozenset({_W + "sdt", _W + "sdtContent", _W + "customXml", _W + "smartTag"})
# Subtrees whose text is not document text (properties) or is a duplicate (VML fallback).
_SKIP = frozenset({_PPR, _RPR, _MC + "Fallback", _W + "sdtPr", _W + "tblPr", _W + "tcPr", _W + "trPr"})
_OFF = frozenset({"0", "false", "off"})
_SAME_PAGE_STARTS = frozenset({"continuous", "nextColumn"})

_OLE_MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")
_TITLE_STYLES = frozenset({"title", "heading 1"})
_TITLE_SCAN_PARAGRAPHS = 50

# A piece of paragraph text; None marks a hard page break.
Piece = str | None


def load_docx() -> ModuleType:
    """The python-docx package; MissingDependency if absent."""
    try:
        return importlib.import_module("docx")
    except ImportError as exc:
        raise MissingDependency("docx", "Reading Word .docx files", "python-docx") from exc


# --------------------------------------------------------------------------- package checks


def _looks_like_text(head: bytes) -> bool:
    """No NUL or other control bytes except tab/newline/carriage return/form feed."""
    return not any(b < 0x20 and b not in (0x09, 0x0A, 0x0C, 0x0D) for b in head)


def _check_package(path: Path) -> None:
    """Reject what is not a Word package before python-docx gives a cryptic error."""
    with path.open("rb") as fh:
        head = fh.read(4096)
    if not head:
        raise UnreadableDocument(path, "the file is empty (0 bytes)")
    if head.startswith(_OLE_MAGIC):
        raise UnreadableDocument(
            path,
            "this is an old-format Word file (.doc) or a password-protected .docx — "
            "open it in Word and save it as an unprotected .docx",
        )
    if not zipfile.is_zipfile(path):
        if _looks_like_text(head):
            raise UnreadableDocument(path, "this is plain text with a .docx name, not a Word document")
        raise UnreadableDocument(path, "not a Word .docx file (not a ZIP package) — damaged or renamed?")
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            names = {i.filename for i in infos}
            if "[Content_Types].xml" not in names:
                raise UnreadableDocument(path, "a ZIP archive, but not a Word document (no Word content inside)")
            _check_sizes(path, archive, infos)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise UnreadableDocument(path, "the .docx package (a ZIP file) is damaged") from exc


# Zip-bomb limits, checked before python-docx reads anything: it loads every
# part into memory and lxml parses the XML ones at several times their size, so a 1 MB file
# whose document.xml inflates to 1 GiB took 11 s and 2.25 GB of memory to be rejected. The
# text of a 5,000-page Word document is well under 100 MiB of XML; XML of real documents
# deflates 5–30:1, a very repetitive table at most ~100:1.
MAX_XML_PART_BYTES = 100 << 20  # one XML part (document.xml, styles.xml, ...), uncompressed
MAX_PACKAGE_BYTES = 1 << 30  # all parts together, uncompressed (images included)
MAX_RATIO = 200  # uncompressed / compressed, for any part larger than RATIO_FLOOR
RATIO_FLOOR = 1 << 20  # small parts may compress as well as they like: they cannot hurt
MAX_PARTS = 10_000
_BLOCK = 1 << 20


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n < 1 << 30 else f"{n / (1 << 30):,.1f} GiB"


def _is_xml(name: str) -> bool:
    return name.endswith((".xml", ".rels"))


def _check_sizes(path: Path, archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> None:
    """Reject a zip bomb by its declared sizes and ratios, then by the XML parts' actual sizes.

    The declared sizes come from the central directory (free to read) and can lie; the XML
    parts, which lxml would parse, are then inflated once as a stream (one block in memory,
    never more than the limit), so a part that inflates past its declared size — or past
    the limit — is refused before python-docx allocates anything.
    """
    bomb = "the .docx looks like a zip bomb"
    if len(infos) > MAX_PARTS:
        raise UnreadableDocument(path, f"{bomb}: {len(infos):,} parts (a Word document has a few dozen)")
    for info in infos:
        if _is_xml(info.filename) and info.file_size > MAX_XML_PART_BYTES:
            raise UnreadableDocument(
                path,
                f"{bomb}: {info.filename} would inflate to {_mib(info.file_size)} "
                f"(limit {_mib(MAX_XML_PART_BYTES)} for one part of the document)",
            )
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            ratio = info.file_size / max(info.compress_size, 1)
            raise UnreadableDocument(
                path, f"{bomb}: {info.filename} is compressed {ratio:,.0f}:1 (real documents: under {MAX_RATIO}:1)"
            )
    total = sum(i.file_size for i in infos)
    if total > MAX_PACKAGE_BYTES:
        raise UnreadableDocument(
            path, f"{bomb}: its parts would inflate to {_mib(total)} (limit {_mib(MAX_PACKAGE_BYTES)})"
        )
    for info in infos:
        if not _is_xml(info.filename):
            continue
        actual = 0
        with archive.open(info) as member:
            while block := member.read(_BLOCK):
                actual += len(block)
                if actual > min(info.file_size, MAX_XML_PART_BYTES):
                    raise UnreadableDocument(
                        path, f"{bomb}: {info.filename} inflates past its declared {_mib(info.file_size)}"
                    )
        if actual != info.file_size:
            raise UnreadableDocument(path, "the .docx package (a ZIP file) is damaged")


def _open(docx: ModuleType, path: Path) -> Any:
    with path.open("rb") as fh:
        try:
            return docx.Document(fh)
        except ValueError as exc:
            if "not a Word file" in str(exc):
                raise UnreadableDocument(
                    path, "an Office file that is not a Word document (Excel/PowerPoint renamed?)"
                ) from exc
            raise UnreadableDocument(path, f"the Word document is damaged ({exc})") from exc
        except Exception as exc:  # python-docx/lxml raise KeyError, XMLSyntaxError, OpcError, ...
            raise UnreadableDocument(
                path, f"the Word document is damaged ({type(exc).__name__}: {exc})"
            ) from exc


# --------------------------------------------------------------------------- XML walking


def _children(element: Any, wanted: frozenset[str]) -> Iterator[Any]:
    """Children with a tag in ``wanted``, looking through content-control wrappers."""
    for child in element:
        if child.tag in wanted:
            yield child
        elif child.tag in _WRAPPERS:
            yield from _children(child, wanted)


def _collect(element: Any, out: list[Piece]) -> None:
    """Append the text pieces of a paragraph's content (runs, hyperlinks, fields, ...)."""
    for child in element:
        tag = child.tag
        if tag == _T:
            out.append(child.text or "")
        elif tag == _TAB:
            out.append("\t")
        elif tag in (_BR, _CR):
            out.append(None if child.get(_TYPE) == "page" else "\n")
        elif tag == _NB_HYPHEN:
            out.append("-")
        elif tag == _P:  # a paragraph inside a text box: keep it apart from the host text
            out.append("\n")
            _collect(child, out)
            out.append("\n")
        elif tag not in _SKIP and isinstance(tag, str):
            _collect(child, out)


def _flag(ppr: Any, tag: str) -> bool:
    el = ppr.find(tag) if ppr is not None else None
    return el is not None and (el.get(_VAL) or "true").lower() not in _OFF


def _section_start(sect: Any) -> str:
    kind = sect.find(_TYPE)
    value = kind.get(_VAL) if kind is not None else None
    return str(value or "nextPage")


def section_page_ends(body: Any) -> set[Any]:
    """Paragraphs whose section break makes the next section start on a new page.

    A section's ``w:sectPr`` sits in the ``w:pPr`` of its last paragraph (the last section's
    in the body), and its ``w:type`` says how *that* section starts. So the break after
    section k is a page break unless section k + 1 is "continuous" or "nextColumn".
    """
    sections = list(body.iter(_SECT_PR))
    ends: set[Any] = set()
    for sect, following in itertools.pairwise(sections):
        ppr = sect.getparent()
        if ppr is not None and ppr.tag == _PPR and _section_start(following) not in _SAME_PAGE_STARTS:
            ends.add(ppr.getparent())
    return ends


def paragraph_pieces(p: Any, *, ends_page: bool = False) -> list[Piece]:
    """Text pieces of a ``w:p``, with None where a hard page break stands."""
    out: list[Piece] = [None] if _flag(p.find(_PPR), _PAGE_BREAK_BEFORE) else []
    _collect(p, out)
    if ends_page:
        out.append(None)
    return out


def _flat(pieces: list[Piece]) -> str:
    return " ".join("".join(" " if x is None else x for x in pieces).split())


def _cell_text(tc: Any) -> str:
    parts: list[str] = []
    for block in _children(tc, frozenset({_P, _TBL})):
        if block.tag == _P:
            parts.append(_flat(paragraph_pieces(block)))
        else:
            parts.append(" / ".join(table_rows(block)))
    return " ".join(p for p in parts if p)


def table_rows(tbl: Any) -> list[str]:
    """One line per row: non-empty cell texts joined by ``" | "``; empty rows dropped."""
    rows: list[str] = []
    for tr in _children(tbl, frozenset({_TR})):
        cells = [_cell_text(tc) for tc in _children(tr, frozenset({_TC}))]
        row = " | ".join(c for c in cells if c)
        if row:
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- pages


class _Pages:
    """Blocks collected per page; a page break starts a new page."""

    def __init__(self) -> None:
        self.pages: list[list[str]] = [[]]
        self.buffer: list[str] = []

    def text(self, piece: str) -> None:
        self.buffer.append(piece)

    def end_block(self) -> None:
        block = "".join(self.buffer).strip()
        self.buffer = []
        if block:
            self.pages[-1].append(block)

    def page_break(self) -> None:
        self.end_block()
        if len(self.pages) == 1 and not self.pages[0]:
            return  # a break before any text (e.g. "page break before" on the first paragraph)
        self.pages.append([])

    def result(self) -> list[Page]:
        self.end_block()
        pages = [Page(i + 1, "\n\n".join(blocks)) for i, blocks in enumerate(self.pages)]
        while len(pages) > 1 and not pages[-1].text:
            pages.pop()  # a break at the very end does not make a page
        return pages


def _body_pages(body: Any, cancel: CancelToken | None) -> list[Page]:
    pages = _Pages()
    section_ends = section_page_ends(body)
    for block in _children(body, frozenset({_P, _TBL})):
        if cancel is not None:
            cancel.raise_if_set()
        if block.tag == _TBL:
            for row in table_rows(block):
                pages.text(row)
                pages.end_block()
            continue
        for piece in paragraph_pieces(block, ends_page=block in section_ends):
            if piece is None:
                pages.page_break()
            else:
                pages.text(piece)
        pages.end_block()
    return pages.result()


def _title(document: Any, pages: list[Page], path: Path) -> str:
    title = " ".join(str(document.core_properties.title or "").split())
    if title:
        return title
    for paragraph in itertools.islice(document.paragraphs, _TITLE_SCAN_PARAGRAPHS):
        name = (paragraph.style.name or "") if paragraph.style is not None else ""
        text = " ".join(paragraph.text.split())
        if text and name.lower() in _TITLE_STYLES:
            return text
    first_text = next((p.text for p in pages if p.text), "")
    return heading_like_line(first_text) or path.stem


def read_docx(path: Path, cancel: CancelToken | None = None) -> ParsedDocument:
    """Read a .docx into pages split at hard page breaks (rules in the module doc)."""
    docx = load_docx()
    _check_package(path)
    document = _open(docx, path)
    pages = _body_pages(document.element.body, cancel)
    if not any(p.text for p in pages):
        raise UnreadableDocument(path, "the Word document contains no text")
    return ParsedDocument(
        path=str(path), title=_title(document, pages, path), pages=tuple(pages), kind="docx"
    )
