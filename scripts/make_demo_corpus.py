#!/usr/bin/env python3
"""Build the demo library ``resources/demo/`` from the Markdown sources in ``resources/demo_src/``.

Every source text was written by the rag_desktop contributors and is released under CC0-1.0,
so the generated PDF and DOCX files are ours to redistribute. The generated files are committed:
the app never needs to run this script. Re-run it after editing a source::

    .venv/bin/python scripts/make_demo_corpus.py            # rebuild resources/demo/
    .venv/bin/python scripts/make_demo_corpus.py --check    # exit 1 if the committed files are stale

Source format (a deliberately small Markdown subset, so the sources stay readable):

* a front-matter block between ``---`` lines with ``key: value`` pairs: ``output`` (file name,
  ``.pdf`` or ``.docx``), ``lang`` (``zh``/``en``), ``title``, ``subject``, ``keywords``; for PDFs
  also ``header`` (running header), ``footer`` (with ``{page}`` and optionally ``{pages}``),
  ``first_page`` (printed number of the first page, e.g. 141 for a book chapter) and ``date``;
* ``#``/``##``/``###`` headings, blank-line separated paragraphs, ``- `` bullets, ``1. ``
  numbered items, ``| a | b |`` tables (first row is the header, second row the ``---`` rule),
  ``> `` notes (byline, disclaimers), ``[[toc]]`` (a printed table of contents with dot leaders
  and real page numbers) and ``[[pagebreak]]``.

Why the PDFs look the way they do: the ingestion pipeline must clean real documents, so the PDFs
carry what real ones carry -- running headers, page numbers in the footer (book chapters start at
their book page), a printed table of contents with dot leaders, a URL, tables, and (in the English
PDFs, typeset with the Charis SIL font) ``fi``/``ffi`` ligature glyphs that PyMuPDF reports as
U+FB01/U+FB03 unless the reader asks it not to preserve ligatures.

Determinism: fixed metadata dates, no random PDF /ID (``no_new_id``), font subsets with stable
tags, and DOCX zip members written with a fixed timestamp. With the same PyMuPDF and python-docx
versions, two runs produce byte-identical files; SOURCES.md records the versions and hashes.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import io
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SRC = REPO / "resources" / "demo_src"
DEFAULT_OUT = REPO / "resources" / "demo"
AUTHOR = "rag_desktop contributors"
LICENCE = "CC0-1.0"
DEFAULT_DATE = "2025-03-01"
# Fixed zip timestamp for DOCX members (the earliest a zip file can express).
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

# ---------------------------------------------------------------------------------------------
# Source parsing
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One block of a source document. ``kind`` is one of: h1 h2 h3 p note ul ol table toc pagebreak."""

    kind: str
    text: str = ""
    items: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class SourceDoc:
    path: Path
    meta: dict[str, str]
    blocks: tuple[Block, ...]

    @property
    def output(self) -> str:
        return self.meta["output"]

    @property
    def lang(self) -> str:
        return self.meta["lang"]

    @property
    def date(self) -> datetime:
        return datetime.strptime(self.meta.get("date", DEFAULT_DATE), "%Y-%m-%d").replace(hour=9)


REQUIRED_META = ("output", "lang", "title")


def parse_source(path: Path) -> SourceDoc:
    """Parse one Markdown source; raise ValueError naming the file and the problem."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError(f"{path}: missing front matter (first line must be '---')")
    try:
        end = lines.index("---", 1)
    except ValueError:
        raise ValueError(f"{path}: front matter is not closed by a '---' line") from None
    meta: dict[str, str] = {}
    for ln in lines[1:end]:
        if not ln.strip():
            continue
        key, sep, value = ln.partition(":")
        if not sep:
            raise ValueError(f"{path}: front-matter line without ':': {ln!r}")
        meta[key.strip()] = value.strip()
    for key in REQUIRED_META:
        if key not in meta:
            raise ValueError(f"{path}: front matter lacks required key {key!r}")
    if meta["lang"] not in ("zh", "en"):
        raise ValueError(f"{path}: lang must be 'zh' or 'en', got {meta['lang']!r}")
    if Path(meta["output"]).suffix not in (".pdf", ".docx"):
        raise ValueError(f"{path}: output must end in .pdf or .docx, got {meta['output']!r}")
    return SourceDoc(path=path, meta=meta, blocks=tuple(_parse_blocks(path, lines[end + 1 :])))


# Blocks made of consecutive marked lines, one item a line: their kind and the line's mark.
_ITEM_MARKS = {"note": re.compile(r"^> "), "ul": re.compile(r"^- "), "ol": re.compile(r"^\d+\. ")}


def _parse_blocks(path: Path, lines: list[str]) -> list[Block]:
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        ln = lines[i].rstrip()
        if not ln.strip():
            i += 1
            continue
        if ln.strip() == "[[toc]]":
            blocks.append(Block("toc"))
            i += 1
        elif ln.strip() == "[[pagebreak]]":
            blocks.append(Block("pagebreak"))
            i += 1
        elif m := re.match(r"^(#{1,3}) (.+)$", ln):
            blocks.append(Block(f"h{len(m.group(1))}", m.group(2).strip()))
            i += 1
        elif kind := next((k for k, mark in _ITEM_MARKS.items() if mark.match(ln)), None):
            mark = _ITEM_MARKS[kind]
            items: list[str] = []
            while i < len(lines) and mark.match(lines[i]):
                items.append(mark.sub("", lines[i], count=1).strip())
                i += 1
            blocks.append(Block(kind, items=tuple(items)))
        elif ln.startswith("|"):
            raw: list[str] = []
            while i < len(lines) and lines[i].startswith("|"):
                raw.append(lines[i].strip())
                i += 1
            blocks.append(_parse_table(path, raw))
        else:
            para: list[str] = []
            while i < len(lines) and lines[i].strip() and not _starts_block(lines[i]):
                para.append(lines[i].strip())
                i += 1
            # Chinese lines join without a space, English ones with one.
            joined = ""
            for part in para:
                if joined and not (_is_cjk(joined[-1]) and _is_cjk(part[0])):
                    joined += " "
                joined += part
            blocks.append(Block("p", joined))
    return blocks


def _starts_block(ln: str) -> bool:
    return bool(re.match(r"^(#{1,3} |> |- |\d+\. |\||\[\[)", ln))


def _is_cjk(ch: str) -> bool:
    return ord(ch) >= 0x2E80


def _parse_table(path: Path, raw: list[str]) -> Block:
    rows = [tuple(c.strip() for c in r.strip("|").split("|")) for r in raw]
    if len(rows) < 3 or not all(set(c) <= set("-: ") for c in rows[1]):
        raise ValueError(f"{path}: a table needs a header row, a '---' rule row and at least one body row")
    body = [rows[0], *rows[2:]]
    width = len(rows[0])
    for r in body:
        if len(r) != width:
            raise ValueError(f"{path}: table row has {len(r)} cells, header has {width}: {r}")
    return Block("table", rows=tuple(body))


def load_sources(src: Path) -> list[SourceDoc]:
    docs = [parse_source(p) for p in sorted(src.glob("*.md"))]
    outputs = [d.output for d in docs]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"{src}: two sources write the same output file")
    return docs


# ---------------------------------------------------------------------------------------------
# PDF
# ---------------------------------------------------------------------------------------------

PAGE_W, PAGE_H = 595.0, 842.0  # A4 in points
MARGIN_X = 68.0
BODY_TOP, BODY_BOTTOM = 78.0, PAGE_H - 74.0
HEADER_Y, FOOTER_Y = 46.0, PAGE_H - 40.0

CSS_COMMON = """
h1 {font-size: 17pt; text-align: center; margin-top: 6pt; margin-bottom: 10pt;}
h2 {font-size: 13pt; margin-top: 12pt; margin-bottom: 5pt;}
h3 {font-size: 11pt; margin-top: 8pt; margin-bottom: 3pt;}
p {margin-top: 0pt; margin-bottom: 5pt;}
p.note {font-size: 9pt; text-align: center; color: #444444; margin-bottom: 2pt;}
p.toc {margin-bottom: 3pt; text-align: left; text-indent: 0;}
li {margin-bottom: 2pt;}
table {border-collapse: collapse; margin-top: 4pt; margin-bottom: 8pt;}
td, th {border: 0.6pt solid #333333; padding: 2pt 4pt; font-size: 9pt; text-align: left;}
th {font-weight: bold; border-bottom: 1.2pt solid #333333;}
"""
# Chinese body text: one embedded CJK font for everything (so widths can be measured exactly for
# the dot leaders), first-line indent of two characters as in Chinese official documents.
CSS_ZH = """
@font-face {font-family: cjk; src: url(cjk.ttf);}
body {font-family: cjk; font-size: 10.5pt; line-height: 1.55;}
p {text-indent: 2em; text-align: justify;}
"""
CSS_EN = """
body {font-family: serif; font-size: 10.5pt; line-height: 1.4;}
h1, h2, h3 {font-family: sans-serif;}
p {text-align: justify;}
"""
BODY_FONT_PT = 10.5


def _esc(s: str) -> str:
    return html.escape(s, quote=False)


def _toc_entries(doc: SourceDoc) -> list[str]:
    """Headings listed in a printed table of contents: level-2 headings after the [[toc]] marker."""
    seen_toc = False
    out: list[str] = []
    for b in doc.blocks:
        if b.kind == "toc":
            seen_toc = True
        elif seen_toc and b.kind == "h2":
            out.append(b.text)
    return out


def _html(doc: SourceDoc, toc_pages: dict[str, int], cjk_font: Any) -> str:
    parts: list[str] = []
    page_break = False
    for b in doc.blocks:
        style = ' style="page-break-before: always"' if page_break else ""
        page_break = False
        if b.kind in ("h1", "h2", "h3"):
            parts.append(f"<{b.kind}{style}>{_esc(b.text)}</{b.kind}>")
        elif b.kind == "p":
            parts.append(f"<p{style}>{_esc(b.text)}</p>")
        elif b.kind == "note":
            parts.extend(f'<p class="note"{style if k == 0 else ""}>{_esc(t)}</p>' for k, t in enumerate(b.items))
        elif b.kind in ("ul", "ol"):
            lis = "".join(f"<li>{_esc(t)}</li>" for t in b.items)
            parts.append(f"<{b.kind}{style}>{lis}</{b.kind}>")
        elif b.kind == "table":
            head = "".join(f"<th>{_esc(c)}</th>" for c in b.rows[0])
            body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in b.rows[1:])
            parts.append(f"<table{style}><tr>{head}</tr>{body}</table>")
        elif b.kind == "toc":
            parts.extend(_toc_lines(doc, toc_pages, cjk_font))
        elif b.kind == "pagebreak":
            page_break = True
    return "\n".join(parts)


def _toc_lines(doc: SourceDoc, toc_pages: dict[str, int], cjk_font: Any) -> list[str]:
    if doc.lang != "zh":
        raise ValueError(f"{doc.path}: [[toc]] is only supported in Chinese documents (measured with the CJK font)")
    width = PAGE_W - 2 * MARGIN_X - 4 * BODY_FONT_PT  # leave room so the line never wraps
    first = int(doc.meta.get("first_page", "1"))
    lines = []
    for title in _toc_entries(doc):
        page = str(toc_pages.get(title, 0) + first)
        fixed = cjk_font.text_length(f"{title}  {page}", BODY_FONT_PT)
        n_dots = max(3, int((width - fixed) / cjk_font.text_length("·", BODY_FONT_PT)))
        lines.append(f'<p class="toc">{_esc(title)} {"·" * n_dots} {page}</p>')
    return lines


def _layout(doc: SourceDoc, html_text: str) -> tuple[bytes, dict[str, int], list[tuple[int, str, int]]]:
    """Lay the HTML out on A4 pages; return the PDF bytes, page index per h2, and the outline."""
    import pymupdf

    css = CSS_COMMON + (CSS_ZH if doc.lang == "zh" else CSS_EN)
    archive = pymupdf.Archive()
    if doc.lang == "zh":
        archive.add(pymupdf.Font("cjk").buffer, "cjk.ttf")
    story = pymupdf.Story(html=html_text, user_css=css, archive=archive)
    headings: list[tuple[int, str, int]] = []
    page_no = 0

    def record(pos: Any) -> None:
        if pos.heading and (pos.open_close & 1):
            headings.append((int(pos.heading), str(pos.text).strip(), page_no))

    buf = io.BytesIO()
    writer = pymupdf.DocumentWriter(buf)
    where = pymupdf.Rect(MARGIN_X, BODY_TOP, PAGE_W - MARGIN_X, BODY_BOTTOM)
    more = 1
    while more:
        dev = writer.begin_page(pymupdf.Rect(0, 0, PAGE_W, PAGE_H))
        more, _ = story.place(where)
        story.element_positions(record)
        story.draw(dev)
        writer.end_page()
        page_no += 1
    writer.close()
    # Story reports heading text with line breaks squeezed out; take the titles from the source.
    source_heads = [(int(b.kind[1]), b.text) for b in doc.blocks if b.kind in ("h1", "h2", "h3")]
    if [lvl for lvl, _, _ in headings] != [lvl for lvl, _ in source_heads]:
        raise RuntimeError(f"{doc.path}: laid-out headings do not match the source headings")
    named = [(lvl, text, page) for (lvl, text), (_, _, page) in zip(source_heads, headings, strict=True)]
    h2_pages = {t: p for lvl, t, p in named if lvl == 2}
    return buf.getvalue(), h2_pages, named


def build_pdf(doc: SourceDoc) -> bytes:
    import pymupdf

    cjk_font = pymupdf.Font("cjk")
    # Two passes: the first finds on which page each heading lands, the second prints those
    # page numbers in the table of contents (the TOC has a fixed number of lines, so the
    # second layout puts every heading on the same page as the first).
    _, h2_pages, _ = _layout(doc, _html(doc, {}, cjk_font))
    pdf_bytes, h2_pages2, headings = _layout(doc, _html(doc, h2_pages, cjk_font))
    if h2_pages2 != h2_pages:
        raise RuntimeError(f"{doc.path}: table of contents changed the pagination; shorten the TOC lines")

    pdf = pymupdf.open("pdf", pdf_bytes)
    n_pages = len(pdf)
    first = int(doc.meta.get("first_page", "1"))
    header = doc.meta.get("header", "")
    footer = doc.meta.get("footer", "{page}")
    skip_first_header = doc.meta.get("header_on_first_page", "no") != "yes"
    for page in pdf.pages():
        if doc.lang == "zh":
            page.insert_font(fontname="cjkhf", fontbuffer=cjk_font.buffer)
            fontname, measure = "cjkhf", cjk_font
        else:
            fontname, measure = "helv", pymupdf.Font("helv")
        if header and not (skip_first_header and page.number == 0):
            page.insert_text((MARGIN_X, HEADER_Y), header, fontname=fontname, fontsize=8.5, color=(0.3, 0.3, 0.3))
            page.draw_line(
                (MARGIN_X, HEADER_Y + 6), (PAGE_W - MARGIN_X, HEADER_Y + 6), width=0.5, color=(0.5, 0.5, 0.5)
            )
        text = footer.format(page=page.number + first, pages=n_pages + first - 1)
        x = (PAGE_W - measure.text_length(text, 9)) / 2
        page.insert_text((x, FOOTER_Y), text, fontname=fontname, fontsize=9, color=(0.2, 0.2, 0.2))

    # Bookmarks (outline) from the headings, as word processors export them.
    toc: list[list[Any]] = []
    for lvl, title, page_idx in headings:
        level = min(lvl, (toc[-1][0] + 1) if toc else 1)
        toc.append([level, title, page_idx + 1])
    pdf.set_toc(toc)
    if first != 1:
        pdf.set_page_labels([{"startpage": 0, "prefix": "", "style": "D", "firstpagenum": first}])
    stamp = doc.date.strftime("D:%Y%m%d%H%M%S+00'00'")
    pdf.set_metadata(
        {
            "title": doc.meta["title"],
            "author": AUTHOR,
            "subject": doc.meta.get("subject", ""),
            "keywords": doc.meta.get("keywords", ""),
            "creator": "rag_desktop scripts/make_demo_corpus.py",
            "producer": "PyMuPDF",
            "creationDate": stamp,
            "modDate": stamp,
        }
    )
    pdf.subset_fonts()
    return bytes(pdf.tobytes(garbage=4, deflate=True, no_new_id=True))


# ---------------------------------------------------------------------------------------------
# DOCX
# ---------------------------------------------------------------------------------------------


def _set_east_asian_font(style: Any, name: str) -> None:
    from docx.oxml.ns import qn

    rpr = style.element.get_or_add_rPr()
    rfonts = rpr.find(qn("w:rFonts"))
    if rfonts is None:
        rfonts = rpr.makeelement(qn("w:rFonts"), {})
        rpr.append(rfonts)
    rfonts.set(qn("w:eastAsia"), name)
    # Heading styles bind their fonts to the theme; drop that so the explicit font applies.
    for attr in ("w:asciiTheme", "w:hAnsiTheme", "w:eastAsiaTheme", "w:cstheme"):
        rfonts.attrib.pop(qn(attr), None)


def _add_page_field(paragraph: Any) -> None:
    """Insert a PAGE field (the page number Word computes when it lays the document out)."""
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    run = paragraph.add_run()
    begin = OxmlElement("w:fldChar")
    begin.set(qn("w:fldCharType"), "begin")
    instr = OxmlElement("w:instrText")
    instr.set("{http://www.w3.org/XML/1998/namespace}space", "preserve")
    instr.text = " PAGE "
    sep = OxmlElement("w:fldChar")
    sep.set(qn("w:fldCharType"), "separate")
    shown = OxmlElement("w:t")
    shown.text = "1"
    end = OxmlElement("w:fldChar")
    end.set(qn("w:fldCharType"), "end")
    for el in (begin, instr, sep, shown, end):
        run._r.append(el)


def build_docx(doc: SourceDoc) -> bytes:
    import docx
    from docx.enum.text import WD_ALIGN_PARAGRAPH
    from docx.shared import Pt, RGBColor

    d = docx.Document()
    styles = d.styles
    normal = styles["Normal"]
    normal.font.size = Pt(10.5)
    if doc.lang == "zh":
        normal.font.name = "SimSun"
        _set_east_asian_font(normal, "宋体")
        for name in ("Title", "Heading 1", "Heading 2", "Heading 3"):
            styles[name].font.name = "SimHei"
            _set_east_asian_font(styles[name], "黑体")

    section = d.sections[0]
    header_text = doc.meta.get("header", doc.meta["title"])
    hp = section.header.paragraphs[0]
    hp.text = header_text
    hp.alignment = WD_ALIGN_PARAGRAPH.RIGHT
    for run in hp.runs:
        run.font.size = Pt(8)
        run.font.color.rgb = RGBColor(0x55, 0x55, 0x55)
    fp = section.footer.paragraphs[0]
    fp.alignment = WD_ALIGN_PARAGRAPH.CENTER
    _add_page_field(fp)

    page_break = False
    for b in doc.blocks:
        if b.kind == "pagebreak":
            page_break = True
            continue
        if page_break:
            d.add_page_break()
            page_break = False
        if b.kind == "h1":
            d.add_heading(b.text, level=0)
        elif b.kind in ("h2", "h3"):
            d.add_heading(b.text, level=int(b.kind[1]) - 1)
        elif b.kind == "p":
            p = d.add_paragraph(b.text)
            if doc.lang == "zh":
                p.paragraph_format.first_line_indent = Pt(21)
        elif b.kind == "note":
            for t in b.items:
                p = d.add_paragraph()
                p.alignment = WD_ALIGN_PARAGRAPH.CENTER
                run = p.add_run(t)
                run.italic = doc.lang == "en"
                run.font.size = Pt(9)
        elif b.kind in ("ul", "ol"):
            style = "List Bullet" if b.kind == "ul" else "List Number"
            for t in b.items:
                d.add_paragraph(t, style=style)
        elif b.kind == "table":
            table = d.add_table(rows=len(b.rows), cols=len(b.rows[0]))
            table.style = "Table Grid"
            for r, row in enumerate(b.rows):
                for c, value in enumerate(row):
                    cell = table.cell(r, c)
                    cell.text = value
                    for run in cell.paragraphs[0].runs:
                        run.font.size = Pt(9)
                        run.bold = r == 0
            d.add_paragraph()
        elif b.kind == "toc":
            raise ValueError(f"{doc.path}: [[toc]] is only supported for PDF outputs")

    cp = d.core_properties
    cp.author = AUTHOR
    cp.last_modified_by = AUTHOR
    cp.title = doc.meta["title"]
    cp.subject = doc.meta.get("subject", "")
    cp.keywords = doc.meta.get("keywords", "")
    cp.comments = f"Demo document for rag_desktop. Licence: {LICENCE}."
    cp.language = "zh-CN" if doc.lang == "zh" else "en-GB"
    cp.revision = 1
    cp.created = doc.date
    cp.modified = doc.date
    cp.last_printed = doc.date

    buf = io.BytesIO()
    d.save(buf)
    return _normalise_zip(buf.getvalue())


def _normalise_zip(data: bytes) -> bytes:
    """Rewrite a zip with fixed member timestamps and attributes (python-docx stamps the current time)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            new = zipfile.ZipInfo(info.filename, date_time=ZIP_EPOCH)
            new.compress_type = zipfile.ZIP_DEFLATED
            new.external_attr = 0o644 << 16
            new.create_system = 3
            dst.writestr(new, src.read(info.filename))
    return out.getvalue()


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


@dataclass
class Built:
    doc: SourceDoc
    data: bytes
    pages: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


def build_all(src: Path) -> list[Built]:
    import pymupdf

    built = []
    for doc in load_sources(src):
        if doc.output.endswith(".pdf"):
            data = build_pdf(doc)
            pages = len(pymupdf.open("pdf", data))
        else:
            data = build_docx(doc)
            pages = None
        built.append(Built(doc, data, pages))
    return built


def tool_versions() -> dict[str, str]:
    import docx
    import pymupdf

    return {"pymupdf": str(pymupdf.VersionBind), "python-docx": str(getattr(docx, "__version__", "unknown"))}


def sources_md(built: list[Built], src: Path, out: Path) -> str:
    versions = tool_versions()
    rel_src = src.relative_to(REPO) if src.is_relative_to(REPO) else src
    lines = [
        "# Demo library: sources and licences",
        "",
        "Every document in this folder was written for rag_desktop by the rag_desktop contributors and",
        f"is dedicated to the public domain under {LICENCE} (https://creativecommons.org/publicdomain/zero/1.0/).",
        "No third-party text is included; organisations, people and events in the documents are fictional",
        "unless they are scientific works cited by name. The guideline, regulation and medical texts are",
        "illustrative samples: they have no legal force and are not medical advice.",
        "",
        f"The files are generated from the Markdown sources in `{rel_src}/` by `scripts/make_demo_corpus.py`",
        "(deterministic: fixed dates and zip timestamps, no random PDF ID).",
        f"Generated with pymupdf {versions['pymupdf']} and python-docx {versions['python-docx']}; "
        "other versions may produce different bytes with the same text.",
        "",
        "| file | source text | format | pages | language | author | licence | sha256 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b in built:
        fmt = "PDF" if b.doc.output.endswith(".pdf") else "DOCX"
        pages = str(b.pages) if b.pages is not None else "-"
        digest = hashlib.sha256(b.data).hexdigest()
        lines.append(
            f"| {b.doc.output} | {rel_src}/{b.doc.path.name} | {fmt} | {pages} | {b.doc.lang} | {AUTHOR} | "
            f"{LICENCE} | `{digest}` |"
        )
    lines.append("")
    return "\n".join(lines)


def write_all(src: Path, out: Path) -> list[Path]:
    built = build_all(src)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for b in built:
        target = out / b.doc.output
        target.write_bytes(b.data)
        written.append(target)
    (out / "SOURCES.md").write_text(sources_md(built, src, out), encoding="utf-8")
    written.append(out / "SOURCES.md")
    return written


def check(src: Path, out: Path) -> list[str]:
    """Return the names of generated files that differ from (or are missing in) ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = write_all(src, Path(tmp))
        stale = []
        for f in fresh:
            committed = out / f.name
            if not committed.exists() or committed.read_bytes() != f.read_bytes():
                stale.append(f.name)
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC, help="folder of Markdown sources")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (the demo library)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the output folder is stale")
    args = ap.parse_args(argv)
    if args.check:
        stale = check(args.src, args.out)
        if stale:
            print("stale or missing: " + ", ".join(stale), file=sys.stderr)
            return 1
        print("demo corpus is up to date")
        return 0
    for path in write_all(args.src, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
