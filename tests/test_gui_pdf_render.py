"""backends/pdf_render: a PDF page as PNG with snippets highlighted on an in-memory copy."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import pytest
from test_gui_support import PDF

from rag_desktop.backends.pdf_render import page_count, render_page
from rag_desktop.backends.readers.base import UnreadableDocument
from rag_desktop.core.highlight import Highlight, hex_to_rgb, region_segments


def words_on_page(path: Path, page: int, word: str) -> int:
    """Reference count: occurrences of ``word`` in the page's own text (case-insensitive)."""
    import pymupdf

    with pymupdf.open(path) as doc:
        text = doc[page - 1].get_text()
    return len(re.findall(re.escape(word), text, flags=re.IGNORECASE))


def pixels_close_to(png: bytes, rgb: tuple[float, float, float]) -> int:
    import pymupdf

    pix = pymupdf.Pixmap(io.BytesIO(png).getvalue())
    target = [round(c * 255) for c in rgb]
    n = 0
    samples = pix.samples
    for i in range(0, len(samples), pix.n * 7):  # every 7th pixel is plenty
        r, g, b = samples[i], samples[i + 1], samples[i + 2]
        # highlight annots multiply with white paper: the pure colour shows on the background
        if abs(r - target[0]) < 40 and abs(g - target[1]) < 40 and abs(b - target[2]) < 40:
            n += 1
    return n


def test_render_marks_every_occurrence_and_leaves_the_file_alone() -> None:
    before = hashlib.sha256(PDF.read_bytes()).hexdigest()
    blue = hex_to_rgb("#56B4E9")
    rp = render_page(PDF, 2, [Highlight("selection", blue, "B", opacity=1.0)], zoom=1.0)
    assert rp.png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (rp.page, rp.n_pages) == (2, page_count(PDF))
    assert rp.found["selection"] == words_on_page(PDF, 2, "selection") > 0
    assert pixels_close_to(rp.png, blue) > 20
    plain = render_page(PDF, 2, [], zoom=1.0)
    assert pixels_close_to(plain.png, blue) == 0
    assert hashlib.sha256(PDF.read_bytes()).hexdigest() == before  # annotations never reach the file


def test_pages_are_clamped_and_a_missing_text_is_reported_not_fatal() -> None:
    n = page_count(PDF)
    assert render_page(PDF, 99, zoom=0.5).page == n
    assert render_page(PDF, -3, zoom=0.5).page == 1
    rp = render_page(PDF, 1, [Highlight("zzqx-not-there", (1, 0, 0))], zoom=0.5)
    assert rp.found == {"zzqx-not-there": 0}


def test_chinese_terms_are_found() -> None:
    zh = PDF.parent / "zh_guideline_cross_border_assessment.pdf"
    rp = render_page(zh, 2, [Highlight("数据", (1, 0.6, 0))], zoom=0.5)
    assert rp.found["数据"] >= 1


def test_a_passage_piece_that_wraps_is_marked_on_both_lines() -> None:
    """A passage's piece runs over a line break of the page (a Chinese sentence: the cleaned text
    joins its lines without a space, the page breaks them): MuPDF's search does not find it, the
    page's characters do, and each line it runs over is marked."""
    import pymupdf

    from rag_desktop.backends.pdf_render import char_quads, page_lines

    zh = PDF.parent / "zh_guideline_cross_border_assessment.pdf"
    piece = "自查报告：提供方在申报前对拟开展的跨境传输活动进行风险研判后形成的书面材料，即通常所称的风险自评估报告。"
    with pymupdf.open(zh) as doc:
        assert doc[1].search_for(piece) == []
        rects = char_quads(page_lines(doc[1]), piece)
    assert len(rects) == 2 and rects[1][1] > rects[0][3] - 1  # two lines, the second below the first
    yellow = (1.0, 1.0, 0.0)
    rp = render_page(zh, 2, [Highlight(piece, yellow, "region", opacity=1.0)], zoom=1.0)
    assert rp.found[piece] == 2 and rp.region_top is not None
    # keywords are not searched this way: a term is a word on one line
    assert render_page(zh, 2, [Highlight(piece, yellow, "A")], zoom=0.5).found[piece] == 0


def test_bad_input_names_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        render_page(tmp_path / "gone.pdf", 1)
    junk = tmp_path / "junk.pdf"
    junk.write_bytes(b"not a pdf at all")
    with pytest.raises(UnreadableDocument, match=r"junk\.pdf"):
        render_page(junk, 1)
    with pytest.raises(ValueError, match="zoom"):
        render_page(PDF, 1, zoom=0)
    with pytest.raises(ValueError, match="#RRGGBB"):
        hex_to_rgb("orange")


def test_region_segments_are_short_searchable_pieces() -> None:
    text = ("The striking finding is how rarely people give it. Across many replications with abstract "
            "materials, fewer than about one participant in ten selects exactly A and 7.\nok")
    segs = region_segments(text, max_len=40)
    assert segs and all(12 <= len(s) <= 40 for s in segs)
    assert segs[0] == "The striking finding is how rarely"
    assert "ok" not in segs  # too short to be specific
    # the pieces really are on the page, so the passage gets marked
    rp = render_page(PDF, 2, [Highlight(s, (1, 1, 0)) for s in segs], zoom=0.5)
    assert sum(rp.found.values()) >= len(segs) - 1


def labelled_pdf(path: Path, first: int | None) -> Path:
    """Three pages printed as ``first``, ``first`` + 1, … (a chapter cut from a book); no labels
    when ``first`` is None."""
    import pymupdf

    with pymupdf.open() as doc:
        for i in range(3):
            doc.new_page().insert_text((72, 72), f"Sheet {i + 1} of the chapter")
        if first is not None:
            doc.set_page_labels([{"startpage": 0, "prefix": "", "style": "D", "firstpagenum": first}])
        doc.save(path)
    return path


def test_a_rendered_page_carries_its_printed_label(tmp_path: Path) -> None:
    book = labelled_pdf(tmp_path / "chapter.pdf", 141)
    assert [render_page(book, p, zoom=0.3).label for p in (1, 2, 3)] == ["141", "142", "143"]
    # a PDF without labels says so with "", and the number stays physical
    plain = render_page(labelled_pdf(tmp_path / "plain.pdf", None), 2, zoom=0.3)
    assert (plain.label, plain.page) == ("", 2)
