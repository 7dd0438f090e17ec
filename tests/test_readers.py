"""Readers: PDF (pymupdf), Word .docx (python-docx), .txt/.md, and every bad input we know of.

All documents are real files built in a temporary folder by tests/bad_inputs.py.
"""

from __future__ import annotations

import codecs
import os
import pickle
import re
from pathlib import Path

import docx
import pymupdf
import pytest
from bad_inputs import (
    GB_TEXT,
    add_image_only_page,
    big_single_line_txt,
    empty_docx,
    encrypted_pdf,
    fifo_txt,
    folder_named_pdf,
    gb18030_txt,
    image_only_pdf,
    junk_zip_docx,
    legacy_doc,
    long_name,
    make_docx,
    make_pdf,
    not_a_pdf,
    ole_as_docx,
    partly_scanned_pdf,
    pdf_without_xref,
    text_as_docx,
    truncated_pdf,
    unreadable_pdf,
    xlsx_as_docx,
    zero_byte_pdf,
    zip_bomb_docx,
)
from docx.enum.section import WD_SECTION

from rag_desktop.backends.readers import (
    LEGACY_DOC_REASON,
    SUPPORTED_SUFFIXES,
    UnreadableDocument,
    heading_like_line,
    is_readable_name,
    read_document,
)
from rag_desktop.backends.readers.pdf import PASSWORD_REASON, SCANNED_REASON, scanned_pages_warning
from rag_desktop.backends.readers.text import decode_text
from rag_desktop.core.chunking import chunk_text
from rag_desktop.core.cleaning import clean_pages
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.types import Cancelled, CancelToken, ParsedDocument


def unreadable(path: Path) -> UnreadableDocument:
    """The UnreadableDocument raised for ``path``, checked to name the file."""
    with pytest.raises(UnreadableDocument) as info:
        read_document(path)
    exc = info.value
    assert exc.path == path
    assert str(exc).startswith(path.name + ": ")
    assert str(exc) == f"{path.name}: {exc.reason}"
    return exc


class CountingToken(CancelToken):
    """A collaborator fake: counts the polls and asks to stop after ``stop_after`` of them."""

    def __init__(self, stop_after: int | None = None) -> None:
        super().__init__()
        self.polls = 0
        self.stop_after = stop_after

    def raise_if_set(self) -> None:
        self.polls += 1
        if self.stop_after is not None and self.polls > self.stop_after:
            self.set()
        super().raise_if_set()


# --------------------------------------------------------------------------- PDF


def test_pdf_pages_keep_their_numbers_and_blocks(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "report.pdf",
        [["Annual Report", "First page body\nwrapped line."], ["Second page text."], ["Third page."]],
        title="The Annual Report",
    )
    doc = read_document(path)
    assert isinstance(doc, ParsedDocument)
    assert doc.kind == "pdf" and doc.path == str(path)
    assert doc.title == "The Annual Report"
    assert [p.number for p in doc.pages] == [1, 2, 3]
    # Blocks are separated by a blank line, lines inside a block by a single line break.
    assert doc.pages[0].text == "Annual Report\n\nFirst page body\nwrapped line."
    assert doc.pages[1].text == "Second page text."
    assert doc.warnings == ()


def test_pdf_title_falls_back_to_heading_then_file_stem(tmp_path: Path) -> None:
    with_heading = make_pdf(tmp_path / "a.pdf", [["Data Transfer Guide", "Body text follows here."]])
    assert read_document(with_heading).title == "Data Transfer Guide"
    placeholder = make_pdf(tmp_path / "b.pdf", [["Risk Register"]], title="Microsoft Word - b.docx")
    assert read_document(placeholder).title == "Risk Register"
    sentence_only = make_pdf(tmp_path / "meeting notes.pdf", [["We met on Monday and agreed."]])
    assert read_document(sentence_only).title == "meeting notes"


def test_pdf_with_chinese_text(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "zh.pdf",
        [["数据出境安全评估办法", "第一条 为了规范数据出境活动，\n保护个人信息权益。"]],
        fontname="china-s",
    )
    doc = read_document(path)
    assert doc.title == "数据出境安全评估办法"
    cleaned = clean_pages(doc.pages)
    assert "为了规范数据出境活动，保护个人信息权益。" in cleaned.text  # CJK wrap joined without space
    assert detect_lang(cleaned.text) == "zh"


def test_partly_scanned_pdf_warns_about_the_textless_pages(tmp_path: Path) -> None:
    doc = read_document(partly_scanned_pdf(tmp_path))
    assert [p.number for p in doc.pages] == [1, 2, 3, 4, 5]
    assert doc.pages[1].text == doc.pages[2].text == doc.pages[4].text == ""
    assert doc.warnings == ("pages 2–3, 5 have no text layer — scanned?",)


def test_scanned_warning_wording() -> None:
    assert scanned_pages_warning([4]) == "page 4 has no text layer — scanned?"
    assert scanned_pages_warning([1, 2, 3, 7, 9, 10]) == "pages 1–3, 7, 9–10 have no text layer — scanned?"


def test_blank_page_is_not_called_scanned(tmp_path: Path) -> None:
    path = tmp_path / "blank_page.pdf"
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Only page with text.", fontsize=11)
    doc.new_page()  # intentionally blank: draws nothing
    doc.save(path)
    doc.close()
    parsed = read_document(path)
    assert parsed.warnings == ()
    assert [p.text for p in parsed.pages] == ["Only page with text.", ""]


def test_image_only_pdf_is_unreadable(tmp_path: Path) -> None:
    exc = unreadable(image_only_pdf(tmp_path))
    assert exc.reason == SCANNED_REASON == "no text layer — scanned PDF? OCR it first"


def test_zero_byte_pdf(tmp_path: Path) -> None:
    assert "empty" in unreadable(zero_byte_pdf(tmp_path)).reason


def test_truncated_pdf(tmp_path: Path) -> None:
    assert "damaged" in unreadable(truncated_pdf(tmp_path)).reason


def test_pdf_missing_its_xref_is_repaired_with_a_warning(tmp_path: Path) -> None:
    doc = read_document(pdf_without_xref(tmp_path))
    assert doc.pages[0].text == "Recoverable text on page one."
    assert any("repaired" in w for w in doc.warnings)


def test_encrypted_pdf_needs_a_password(tmp_path: Path) -> None:
    exc = unreadable(encrypted_pdf(tmp_path))
    assert exc.reason == PASSWORD_REASON
    assert "password" in str(exc)


def test_pdf_with_only_an_owner_password_is_read(tmp_path: Path) -> None:
    doc = read_document(encrypted_pdf(tmp_path, user_password=False))
    assert doc.pages[0].text == "Confidential text."


def test_text_file_named_pdf(tmp_path: Path) -> None:
    assert "not a PDF" in unreadable(not_a_pdf(tmp_path)).reason


def test_pdf_reader_polls_cancel_between_pages(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "four.pdf", [[f"Page {i} text."] for i in range(1, 5)])
    token = CountingToken()
    read_document(path, token)
    assert token.polls >= 4  # at least once per page
    with pytest.raises(Cancelled):
        read_document(path, CountingToken(stop_after=2))


# --------------------------------------------------------------------------- Word


def test_docx_keeps_document_order_tables_and_page_breaks(tmp_path: Path) -> None:
    doc = read_document(make_docx(tmp_path / "review.docx"))
    assert doc.kind == "docx"
    assert doc.title == "Quarterly Review"  # the Heading 1 paragraph (no core title)
    assert [p.number for p in doc.pages] == [1, 2]
    assert doc.pages[0].text == (
        "Quarterly Review\n\n"
        "Opening paragraph before the table.\n\n"
        "Region | Sales | Growth\n\n"
        "North | 120 | 5%\n\n"
        "Total | 7%\n\n"  # a cell merged across two columns appears once
        "Details\n\n"
        "Text before the break. Still page one."
    )
    assert doc.pages[1].text == "Now on page two.\n\nClosing paragraph 中文结尾。"


def test_docx_page_break_before_and_section_breaks_start_pages(tmp_path: Path) -> None:
    path = tmp_path / "sections.docx"
    d = docx.Document()
    first = d.add_paragraph("Cover text.")
    first.paragraph_format.page_break_before = True  # before any text: no empty page 1
    d.add_paragraph("Still the cover.")
    d.add_paragraph("Chapter one.").paragraph_format.page_break_before = True
    d.add_section(WD_SECTION.NEW_PAGE)
    d.add_paragraph("After a new-page section break.")
    d.add_section(WD_SECTION.CONTINUOUS)
    d.add_paragraph("Same page: continuous section.")
    d.save(path)
    pages = read_document(path).pages
    assert [(p.number, p.text) for p in pages] == [
        (1, "Cover text.\n\nStill the cover."),
        (2, "Chapter one."),
        (3, "After a new-page section break.\n\nSame page: continuous section."),
    ]


def test_docx_title_from_core_properties(tmp_path: Path) -> None:
    assert read_document(make_docx(tmp_path / "t.docx", title="Board Minutes")).title == "Board Minutes"


def test_docx_content_control_text_is_read(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "sdt.docx")
    d = docx.Document(path)
    body = d.element.body
    w = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
    first = body[0]
    sdt = first.makeelement(w + "sdt", {})
    content = sdt.makeelement(w + "sdtContent", {})
    sdt.append(content)
    first.addprevious(sdt)
    content.append(first)  # the heading now lives inside a content control
    d.save(path)
    assert read_document(path).pages[0].text.startswith("Quarterly Review\n\nOpening paragraph")


def test_docx_without_text(tmp_path: Path) -> None:
    assert "no text" in unreadable(empty_docx(tmp_path)).reason


def test_docx_that_is_a_zip_of_junk(tmp_path: Path) -> None:
    assert "not a Word document" in unreadable(junk_zip_docx(tmp_path)).reason


def test_docx_that_is_plain_text(tmp_path: Path) -> None:
    assert "plain text" in unreadable(text_as_docx(tmp_path)).reason


def test_docx_that_is_an_old_binary_word_file(tmp_path: Path) -> None:
    assert "old-format Word file" in unreadable(ole_as_docx(tmp_path)).reason


@pytest.mark.parametrize(("inflated", "declared", "expect"), [
    (1024, None, r"zip bomb: word/document\.xml would inflate to 1\.0 GiB"),  # the reported file
    (60, None, r"zip bomb: word/document\.xml is compressed [\d,]+:1"),  # under the size limit: the ratio
    (1024, 1, "damaged"),  # headers that lie: the actual size is checked while inflating
])
def test_zip_bomb_docx_is_refused_before_python_docx_parses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inflated: int, declared: int | None, expect: str
) -> None:
    bomb = zip_bomb_docx(tmp_path, inflated, declared_mib=declared)
    assert bomb.stat().st_size < 1_200_000

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("python-docx was asked to parse a zip bomb")

    monkeypatch.setattr(docx, "Document", never)
    assert re.search(expect, unreadable(bomb).reason), unreadable(bomb).reason


def test_zip_bomb_builder_makes_a_real_package(tmp_path: Path) -> None:
    """The bomb is a valid Word package (a small one): python-docx itself parses it."""
    import zipfile

    bomb = zip_bomb_docx(tmp_path, 2)
    with zipfile.ZipFile(bomb) as z:
        assert z.testzip() is None
        assert z.getinfo("word/document.xml").file_size > 2 << 20
    assert docx.Document(str(bomb)).paragraphs[0].text.startswith("bomb   ")


def test_docx_that_is_a_spreadsheet(tmp_path: Path) -> None:
    assert "not a Word document" in unreadable(xlsx_as_docx(tmp_path)).reason


def test_legacy_doc(tmp_path: Path) -> None:
    exc = unreadable(legacy_doc(tmp_path))
    assert exc.reason == LEGACY_DOC_REASON == "legacy Word .doc is not supported — save it as .docx"


def test_docx_reader_polls_cancel(tmp_path: Path) -> None:
    with pytest.raises(Cancelled):
        read_document(make_docx(tmp_path / "c.docx"), CountingToken(stop_after=2))


# --------------------------------------------------------------------------- text


@pytest.mark.parametrize(
    ("encoding", "prefix"),
    [
        ("utf-8", b""),
        ("utf-8", codecs.BOM_UTF8),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-32-le", codecs.BOM_UTF32_LE),
        ("gb18030", b""),
    ],
)
def test_text_encodings(tmp_path: Path, encoding: str, prefix: bytes) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(prefix + GB_TEXT.encode(encoding))
    doc = read_document(path)
    assert doc.pages[0].text == GB_TEXT
    assert doc.warnings == ()
    assert doc.kind == "txt" and doc.title == "数据出境安全评估办法"


def test_gb18030_file(tmp_path: Path) -> None:
    doc = read_document(gb18030_txt(tmp_path))
    assert doc.pages[0].text == GB_TEXT
    assert decode_text(GB_TEXT.encode("gb18030"))[1] == "gb18030"


def test_undecodable_text_falls_back_to_latin1_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "weird.txt"
    data = b"Price: 10\x80 \xff\xfe done"  # \x80 and \xff are invalid in UTF-8 and GB18030
    path.write_bytes(data)
    doc = read_document(path)
    assert doc.pages[0].text == data.decode("latin-1")
    assert len(doc.warnings) == 1 and "Latin-1" in doc.warnings[0]


def test_markdown_title_and_kind(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Causal Reranking\n\nSome text.\n", encoding="utf-8")
    doc = read_document(path)
    assert doc.kind == "md" and doc.title == "Causal Reranking"


def test_binary_and_empty_text_files(tmp_path: Path) -> None:
    binary = tmp_path / "image.txt"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert "binary" in unreadable(binary).reason
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert "empty" in unreadable(empty).reason
    blank = tmp_path / "blank.md"
    blank.write_text(" \n\t\n", encoding="utf-8")
    assert "no text" in unreadable(blank).reason


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_fifty_megabyte_single_line_file(tmp_path: Path) -> None:
    path = big_single_line_txt(tmp_path, megabytes=50)
    doc = read_document(path)
    assert len(doc.pages) == 1 and len(doc.pages[0].text) == 50 * 1024 * 1024
    cleaned = clean_pages(doc.pages)
    del doc
    chunks = chunk_text(cleaned)
    assert cleaned.text.startswith("lorem ipsum")
    assert len(chunks) > len(cleaned.text) // 4096
    for c in chunks[:50] + chunks[-50:]:
        assert cleaned.text[c.char_start : c.char_end] == c.text and len(c.text) <= 4096
    assert chunks[-1].char_end == len(cleaned.text)


def test_big_single_line_builder_writes_one_line(tmp_path: Path) -> None:
    path = big_single_line_txt(tmp_path, megabytes=1)
    data = path.read_bytes()
    assert len(data) == 1024 * 1024 and b"\n" not in data
    assert len(read_document(path).pages[0].text) == 1024 * 1024


# --------------------------------------------------------------------------- file-system problems


@pytest.mark.parametrize("suffix", [".txt", ".pdf", ".docx"])
def test_long_non_utf8_file_names_are_read(tmp_path: Path, suffix: str) -> None:
    path = long_name(tmp_path, suffix)
    if path is None:
        pytest.skip("this file system refuses non-UTF-8 file names")
    assert len(path.name) > 200
    if suffix == ".txt":
        path.write_text("Long name body.", encoding="utf-8")
    elif suffix == ".pdf":
        make_pdf(path, [["Long name body."]])
    else:
        make_docx(path)
    doc = read_document(path)
    assert doc.pages[0].text.startswith(("Long name body.", "Quarterly Review"))


def test_error_for_a_non_utf8_name_is_printable(tmp_path: Path) -> None:
    path = long_name(tmp_path, ".pdf")
    if path is None:
        pytest.skip("this file system refuses non-UTF-8 file names")
    path.write_bytes(b"%PDF-1.7\n1 0 obj garbage")  # header, then nothing usable
    with pytest.raises(UnreadableDocument) as info:
        read_document(path)
    message = str(info.value)
    message.encode("utf-8")  # no lone surrogates left in the message
    assert message.startswith("quarterly report quarterly report")
    assert "\ufffd" in message and "damaged" in message


def test_unreadable_permissions(tmp_path: Path) -> None:
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("running as root: chmod 000 files stay readable (see the folder/pipe cases)")
    assert "permission denied" in unreadable(unreadable_pdf(tmp_path)).reason


def test_folder_named_like_a_document(tmp_path: Path) -> None:
    assert "folder" in unreadable(folder_named_pdf(tmp_path)).reason


def test_pipe_named_like_a_document(tmp_path: Path) -> None:
    path = fifo_txt(tmp_path)
    if path is None:
        pytest.skip("named pipes are not available here")
    assert "not a regular file" in unreadable(path).reason


def test_missing_file_and_unsupported_type(tmp_path: Path) -> None:
    assert "not found" in unreadable(tmp_path / "gone.pdf").reason
    other = tmp_path / "slides.pptx"
    other.write_bytes(b"PK")
    assert "unsupported file type .pptx" in unreadable(other).reason


def test_suffixes_and_scan_filter() -> None:
    assert {".pdf", ".docx", ".txt", ".md"} <= SUPPORTED_SUFFIXES
    assert ".doc" not in SUPPORTED_SUFFIXES
    assert is_readable_name("A.PDF") and is_readable_name("old.doc") and is_readable_name("x.md")
    assert not is_readable_name("~$report.docx") and not is_readable_name(".hidden.txt")
    # Images are documents (OCR); scan_folder lists them only while OCR is on.
    assert is_readable_name("photo.jpg") and not is_readable_name("clip.gif")


def test_unreadable_document_pickles_and_reads_well(tmp_path: Path) -> None:
    exc = UnreadableDocument(tmp_path / "x.pdf", "some reason")
    again = pickle.loads(pickle.dumps(exc))
    assert again.path == exc.path and again.reason == "some reason"
    assert str(again) == "x.pdf: some reason"
    assert isinstance(exc, Exception)


def test_read_document_checks_cancel_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("text", encoding="utf-8")
    token = CancelToken()
    token.set()
    with pytest.raises(Cancelled):
        read_document(path, token)


def test_heading_like_line() -> None:
    assert heading_like_line("\n\n  Data   Security Law \nBody.") == "Data Security Law"
    assert heading_like_line("## Results\ntext") == "Results"
    assert heading_like_line("3\nhttps://x.org\nIntroduction\n") == "Introduction"
    assert heading_like_line("This is a sentence.\nAnother one;\n12\nLate Heading") is None
    assert heading_like_line("") is None


def test_image_page_builder_has_no_text() -> None:
    doc = pymupdf.open()
    add_image_only_page(doc)
    assert doc[0].get_text().strip() == "" and doc[0].get_image_info()


def _pdf_of_lines(path: Path, lines: list[tuple[float, float, str]], fontname: str = "china-s") -> Path:
    """One page; each (x, y, text) drawn on its own, 11 pt: lines 17 pt apart come out as one text
    block each, as typeset Chinese PDFs give them."""
    doc = pymupdf.open()
    page = doc.new_page(width=600, height=400)
    for x, y, text in lines:
        page.insert_text((x, y), text, fontname=fontname, fontsize=11)
    doc.save(path)
    doc.close()
    return path


def test_a_chinese_line_typeset_as_its_own_block_joins_the_line_above_it(tmp_path: Path) -> None:
    full = "申报材料包括申报书、自查报告、与境外接收方订立的法律文件以及主管部门要求的其"  # to the right edge
    path = _pdf_of_lines(tmp_path / "wrapped.pdf", [
        (62, 50, "提供方应当在申报前三个月内完成自查，由法定代表人签字确认并且存档备查。"),  # indented first line
        (40, 67, full),
        (40, 84, "他材料，具体见附录A。"),
        (40, 118, "材料准备完成后，提供方通过所在地省级网信部门提交给主管的国家网信部门。"),  # a wider gap
    ])
    page = read_document(path).pages[0]
    cleaned = clean_pages([page]).text
    assert "要求的其他材料，具体见附录A。" in cleaned  # "其" / "他" is one word again
    assert cleaned.count("\n\n") == 2, cleaned  # the first line ends a sentence; the last is a paragraph away


def test_lines_that_end_a_sentence_are_short_or_open_an_article_keep_their_blank_line(tmp_path: Path) -> None:
    full = "国家网信部门自收到材料之日起七个工作日内确定是否受理，并书面通知提供方受理"
    cases = {
        "sentence": [(40, 50, full[:-2] + "。"), (40, 67, "审查部门组织有关部门进行综合研判。")],
        "short": [(40, 50, "第四步：受理与审查"), (40, 67, full)],
        "article": [(40, 50, full), (40, 67, "第十一条 财务部对报销材料进行审核。")],
        "indent": [(40, 50, full), (62, 67, "审查部门组织有关部门进行综合研判。")],
    }
    for name, lines in cases.items():
        page = read_document(_pdf_of_lines(tmp_path / f"{name}.pdf", lines)).pages[0]
        assert page.text.count("\n\n") == 1, (name, page.text)
    english = [(40, 50, "The applicant submits the declaration, the self-assessment report and the"),
               (40, 67, "legal documents agreed with the recipient abroad.")]
    page = read_document(_pdf_of_lines(tmp_path / "en.pdf", english, fontname="helv")).pages[0]
    assert page.text.count("\n\n") == 1, page.text  # Latin lines are left as they come


def test_wraps_into_reads_only_a_cjk_line_broken_inside_a_sentence() -> None:
    from rag_desktop.core.cleaning import wraps_into

    assert wraps_into("与主管部门要求的其", "他材料")
    assert wraps_into("依照本法，", "向劳动者支付")
    assert not wraps_into("具体见附录A。", "材料准备完成后")
    assert not wraps_into("审查重点包括：", "传输目的")
    # an article named mid-sentence reads as an article's heading: kept apart, as before
    assert not wraps_into("用人单位应当依照", "第四十七条规定支付")
    assert not wraps_into("与主管部门要求的其", "（三）跨境业务")
    assert not wraps_into("the recipient", "abroad")
    assert not wraps_into("", "他材料")
