"""Opening a passage scrolls its start into view: a long PDF page and a Word file (real pymupdf,
python-docx, the real reader and renderer; offscreen Qt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_desktop.core.types import Hit

pytestmark = pytest.mark.gui

PASSAGE = ("The retention period for archived reports is seven years from the end of the financial year in "
           "which they were filed.")
FILLER = "This paragraph describes routine procedures that have nothing to do with the question asked. "


def _hit(path: Path, text: str) -> Hit:
    return Hit(1, 1, "chunk", "Records policy", str(path), 1, text, 0.9, 1, "en")


def _viewer(qtbot):  # type: ignore[no-untyped-def]
    from rag_desktop.ui.viewer import ViewerDialog
    from rag_desktop.ui.worker import TaskRunner

    runner = TaskRunner(serial=True)
    viewer = ViewerDialog(lambda: runner)
    viewer.resize(700, 500)  # a laptop-sized viewer: most of a page is below the fold
    qtbot.addWidget(viewer)
    return viewer, runner


def test_a_passage_low_on_a_long_pdf_page_is_scrolled_to_its_start(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import fitz

    path = tmp_path / "long_page.pdf"
    doc = fitz.open()
    page = doc.new_page(width=595, height=1600)  # a long page (a poster, a scanned roll)
    y = 60.0
    for _ in range(40):
        page.insert_text((50, y), FILLER[:80], fontsize=10)
        y += 30
    page.insert_textbox(fitz.Rect(50, 1320, 545, 1400), PASSAGE, fontsize=10)
    doc.save(path)
    doc.close()

    viewer, runner = _viewer(qtbot)
    viewer.show_hit(_hit(path, PASSAGE))
    bar = viewer.page_scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: viewer.pending == 0 and bar.value() > 0, timeout=60000)
    assert viewer.last_error is None
    zoom = float(viewer.zoom_box.currentData())
    top_px = int(1320 * zoom)  # where the passage's first line starts in the rendered page (at least)
    view_h = viewer.page_scroll.viewport().height()
    # its first line is inside the view, in the upper part, and not scrolled past
    assert bar.value() <= top_px + 5 * zoom, (bar.value(), top_px)
    assert top_px - bar.value() < view_h // 2, (bar.value(), top_px, view_h)
    runner.wait(5000)


def test_a_passage_near_the_end_of_a_word_file_is_scrolled_to_its_start(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import docx

    path = tmp_path / "policy.docx"
    d = docx.Document()
    for i in range(120):
        d.add_paragraph(f"{i + 1}. {FILLER}")
    d.add_paragraph(PASSAGE)
    for i in range(40):
        d.add_paragraph(f"Closing note {i + 1}. {FILLER}")
    d.save(str(path))

    viewer, runner = _viewer(qtbot)
    viewer.show()
    viewer.show_hit(_hit(path, PASSAGE))
    qtbot.waitUntil(lambda: viewer.pending == 0 and viewer.region is not None, timeout=60000)
    start = viewer.region[0] if viewer.region is not None else -1
    from PySide6.QtGui import QTextCursor

    cur = QTextCursor(viewer.text.document())
    cur.setPosition(start)
    rect = viewer.text.cursorRect(cur)
    view_h = viewer.text.viewport().height()
    # the passage's first line is visible, in the upper third of the view (not centred, where a long
    # passage, not below the fold)
    assert 0 <= rect.top() < view_h // 3, (rect.top(), view_h)
    assert viewer.text.verticalScrollBar().value() > 0  # it did scroll: the passage is far down
    runner.wait(5000)
