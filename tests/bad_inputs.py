"""Builders for real test documents — good and bad — in a temporary folder.

Each function writes a file (with pymupdf or python-docx for real PDFs and Word files) and
returns its path. Used by tests/test_readers.py; not a conftest so that tests import exactly
what they use.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import docx
import pymupdf
from docx.enum.text import WD_BREAK

OLE_MAGIC = bytes.fromhex("d0cf11e0a1b11ae1")
USER_PASSWORD = "s3cret"


# --------------------------------------------------------------------------- PDFs


def make_pdf(
    path: Path,
    pages: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    fontname: str = "helv",
) -> Path:
    """A text PDF: each page is a list of blocks, each block a list of lines ("\\n"-joined).

    Blocks are placed 40 pt apart so PyMuPDF reports them as separate text blocks. Use
    ``fontname="china-s"`` (a CJK font shipped with PyMuPDF) for Chinese text.
    """
    doc = pymupdf.open()
    for blocks in pages:
        page = doc.new_page()
        y = 72.0
        for block in blocks:
            page.insert_text((72, y), block, fontsize=11, fontname=fontname)
            y += 14.0 * (block.count("\n") + 1) + 40.0
    if title is not None:
        doc.set_metadata({"title": title})
    path.write_bytes(doc.tobytes())  # through Python: MuPDF cannot save to non-UTF-8 names
    doc.close()
    return path


def _png_bytes() -> bytes:
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 16, 16), False)
    pix.clear_with(180)
    return bytes(pix.tobytes("png"))


def add_image_only_page(doc: pymupdf.Document, *, drawing: bool = False) -> None:
    """A page that shows an image (a "scan") or a vector drawing, and has no text."""
    page = doc.new_page()
    if drawing:
        page.draw_rect(pymupdf.Rect(72, 72, 300, 300), color=(0, 0, 0), fill=(0.8, 0.2, 0.2))
    else:
        page.insert_image(pymupdf.Rect(72, 72, 400, 500), stream=_png_bytes())


def saved(doc: pymupdf.Document, path: Path) -> Path:
    """``doc`` written to ``path`` and closed; the path."""
    doc.save(path)
    doc.close()
    return path


def image_only_pdf(tmp: Path, name: str = "scan.pdf") -> Path:
    """Every page is image-only (one raster image page, one vector-drawing page)."""
    path = tmp / name
    doc = pymupdf.open()
    add_image_only_page(doc)
    add_image_only_page(doc, drawing=True)
    return saved(doc, path)


def partly_scanned_pdf(tmp: Path) -> Path:
    """Page 1 has text, pages 2 and 3 are scans, page 4 has text, page 5 is scanned."""
    path = tmp / "partly.pdf"
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Typed first page.", fontsize=11)
    add_image_only_page(doc)
    add_image_only_page(doc)
    doc.new_page().insert_text((72, 72), "Typed fourth page.", fontsize=11)
    add_image_only_page(doc, drawing=True)
    return saved(doc, path)


def zero_byte_pdf(tmp: Path) -> Path:
    path = tmp / "empty.pdf"
    path.write_bytes(b"")
    return path


def truncated_pdf(tmp: Path, keep: float = 0.1) -> Path:
    """A real PDF cut after ``keep`` of its bytes (a download that stopped early)."""
    full = make_pdf(tmp / "full_for_truncation.pdf", [["Some text on page one."], ["Page two text."]])
    data = full.read_bytes()
    path = tmp / "truncated.pdf"
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def pdf_without_xref(tmp: Path) -> Path:
    """A PDF whose cross-reference table and trailer are cut off: MuPDF can repair it."""
    full = make_pdf(tmp / "full_for_xref.pdf", [["Recoverable text on page one."], ["Page two text."]])
    data = full.read_bytes()
    cut = data.rfind(b"xref")
    assert cut > 0, "pymupdf saved no classic xref table"
    path = tmp / "no_xref.pdf"
    path.write_bytes(data[:cut])
    return path


def pdf_with_a_broken_page(tmp: Path) -> Path:
    """Two pages; page 2's content stream is not valid zlib. Page 1 reads; reading page 2
    makes MuPDF report "MuPDF error: library error: zlib error: incorrect header check"."""
    import re

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Readable text on page one about the broken file.")
    doc.new_page().insert_text((72, 72), "Second page text.")
    data = bytearray(doc.tobytes(deflate=True))
    doc.close()
    starts = [m.end() for m in re.finditer(rb"stream\r?\n", bytes(data))]
    data[starts[2]: starts[2] + 12] = b"\xff" * 12  # the third stream is page 2's content
    path = tmp / "broken_page.pdf"
    path.write_bytes(bytes(data))
    return path


def encrypted_pdf(tmp: Path, *, user_password: bool = True) -> Path:
    """AES-256 encrypted; with ``user_password=False`` only an owner password (restrictions)."""
    path = tmp / ("locked.pdf" if user_password else "restricted.pdf")
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Confidential text.", fontsize=11)
    doc.save(
        path,
        encryption=pymupdf.PDF_ENCRYPT_AES_256,
        user_pw=USER_PASSWORD if user_password else "",
        owner_pw="owner-" + USER_PASSWORD,
        permissions=int(pymupdf.PDF_PERM_ACCESSIBILITY),
    )
    doc.close()
    return path


def not_a_pdf(tmp: Path) -> Path:
    path = tmp / "renamed.pdf"
    path.write_text("This is a text file someone renamed to .pdf\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- Word


def make_docx(path: Path, *, title: str = "") -> Path:
    """Heading, paragraphs, a table (with a merged cell) between them, and a hard page break."""
    d = docx.Document()
    d.core_properties.title = title
    d.add_heading("Quarterly Review", level=1)
    d.add_paragraph("Opening paragraph before the table.")
    table = d.add_table(rows=3, cols=3)
    for c, text in enumerate(("Region", "Sales", "Growth")):
        table.cell(0, c).text = text
    for c, text in enumerate(("North", "120", "5%")):
        table.cell(1, c).text = text
    merged = table.cell(2, 0).merge(table.cell(2, 1))
    merged.text = "Total"
    table.cell(2, 2).text = "7%"
    d.add_heading("Details", level=2)
    p = d.add_paragraph("Text before the break. ")
    p.add_run("Still page one.").add_break(WD_BREAK.PAGE)
    p.add_run("Now on page two.")
    d.add_paragraph("Closing paragraph 中文结尾。")
    d.save(path)
    return path


def empty_docx(tmp: Path) -> Path:
    path = tmp / "blank.docx"
    docx.Document().save(path)
    return path


def junk_zip_docx(tmp: Path) -> Path:
    """A valid ZIP file that holds no Word document."""
    path = tmp / "junk.docx"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("notes.txt", "just some junk")
        z.writestr("data.bin", os.urandom(64))
    return path


def text_as_docx(tmp: Path) -> Path:
    path = tmp / "plain.docx"
    path.write_text("Plain text saved with a .docx name.\nSecond line.\n", encoding="utf-8")
    return path


def ole_as_docx(tmp: Path) -> Path:
    """An old binary Word file (or a password-protected .docx): an OLE container."""
    path = tmp / "oldformat.docx"
    path.write_bytes(OLE_MAGIC + b"\x00" * 504 + b"binary word junk")
    return path


def legacy_doc(tmp: Path) -> Path:
    path = tmp / "old report.doc"
    path.write_bytes(OLE_MAGIC + b"\x00" * 504)
    return path


def xlsx_as_docx(tmp: Path) -> Path:
    """A minimal Office package whose main part is a spreadsheet, named .docx."""
    path = tmp / "sheet.docx"
    ct = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        "</Types>"
    )
    rels = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
        'Target="xl/workbook.xml"/>'
        "</Relationships>"
    )
    workbook = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"/>'
    )
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("[Content_Types].xml", ct)
        z.writestr("_rels/.rels", rels)
        z.writestr("xl/workbook.xml", workbook)
    return path


def _raw_zip(path: Path, members: Sequence[tuple[str, bytes, int, int]]) -> None:
    """Write a ZIP file from already-deflated members: (name, raw deflate bytes, CRC-32,
    uncompressed size as declared). zipfile cannot write pre-compressed data, and a bomb
    made by compressing 1 GiB for real takes seconds."""
    import struct

    out = bytearray()
    central = bytearray()
    for name, data, crc, size in members:
        fname = name.encode("utf-8")
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), size, len(fname), 0)
        out += fname + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(data), size,
                               len(fname), 0, 0, 0, 0, 0, offset)
        central += fname
    out_end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(out), 0)
    path.write_bytes(bytes(out + central + out_end))


def zip_bomb_docx(tmp: Path, inflated_mib: int = 1024, *, declared_mib: int | None = None) -> Path:
    """A real Word package (made by python-docx) whose word/document.xml inflates to
    ``inflated_mib`` MiB of whitespace inside a valid paragraph: about 1 KB per MiB on disk,
    as in a reported file (1,044,388 bytes → 1 GiB). ``declared_mib`` makes the ZIP headers lie
    about the size. Built in milliseconds: a fully flushed deflate segment of 1 MiB of spaces
    is repeated (each full flush resets the dictionary, so the copies stay a valid stream)."""
    import io
    import zlib

    good = io.BytesIO()
    docx.Document().save(good)
    prefix = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
              b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
              b"<w:body><w:p><w:r><w:t>bomb")
    suffix = b"</w:t></w:r></w:p></w:body></w:document>"
    block = b" " * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    seg = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail = c.compress(suffix) + c.flush()
    crc = zlib.crc32(prefix)
    for _ in range(inflated_mib):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(suffix, crc)
    size = len(prefix) + (inflated_mib << 20) + len(suffix)
    members: list[tuple[str, bytes, int, int]] = []
    with zipfile.ZipFile(good) as z:
        for info in z.infolist():
            data = z.read(info)
            if info.filename == "word/document.xml":
                declared = size if declared_mib is None else declared_mib << 20
                members.append((info.filename, head + seg * inflated_mib + tail, crc, declared))
            else:
                c = zlib.compressobj(9, zlib.DEFLATED, -15)
                members.append((info.filename, c.compress(data) + c.flush(), zlib.crc32(data), len(data)))
    path = tmp / "bomb.docx"
    _raw_zip(path, members)
    return path


# --------------------------------------------------------------------------- text


def big_single_line_txt(tmp: Path, megabytes: int = 50) -> Path:
    """``megabytes`` MB of words on one line, no line break at all (written in slices)."""
    path = tmp / "one_line.txt"
    piece = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * 1000).encode("ascii")
    target = megabytes * 1024 * 1024
    with path.open("wb") as fh:
        written = 0
        while written < target:
            part = piece[: target - written]
            fh.write(part)
            written += len(part)
    return path


GB_TEXT = "数据出境安全评估办法\n\n第一条 为了规范数据出境活动，保护个人信息权益。\n"


def gb18030_txt(tmp: Path) -> Path:
    path = tmp / "gb.txt"
    path.write_bytes(GB_TEXT.encode("gb18030"))
    return path


def long_name(tmp: Path, suffix: str) -> Path | None:
    """A path whose name is 200+ characters with non-UTF-8 bytes, or None if refused.

    Built from bytes (``os.fsencode``) and returned through ``os.fsdecode``, as a folder
    scan would see it (the bad bytes become lone surrogates).
    """
    stem = b"quarterly report " * 12 + b"\xff\xfe caf\xe9"  # latin-1 bytes: not UTF-8
    raw = os.path.join(os.fsencode(tmp), stem + os.fsencode(suffix))
    try:
        fd = os.open(raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:
        return None
    os.close(fd)
    return Path(os.fsdecode(raw))


def folder_named_pdf(tmp: Path) -> Path:
    path = tmp / "looks_like_a_file.pdf"
    path.mkdir()
    return path


def unreadable_pdf(tmp: Path) -> Path:
    """A real PDF with permissions 000 (still readable when the tests run as root)."""
    path = make_pdf(tmp / "locked_perms.pdf", [["Hidden."]])
    path.chmod(0)
    return path


def fifo_txt(tmp: Path) -> Path | None:
    path = tmp / "pipe.txt"
    try:
        os.mkfifo(path)
    except (AttributeError, OSError):
        return None
    return path
