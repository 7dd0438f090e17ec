"""Document text in the GUI is shown as text: tooltips and labels never render its markup,
and stored document warnings are shown in the library panel."""

from __future__ import annotations

from typing import Any

from PySide6 import QtGui
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument

from rag_desktop.core.types import Answer, Citation, Hit, Progress
from rag_desktop.ui.answer_pane import AnswerPane
from rag_desktop.ui.columns import COL_SNIPPET, COL_TITLE, RankedModel, make_row
from rag_desktop.ui.library_panel import DocRow, LibraryPanel, Listing
from rag_desktop.ui.plaintext import plain_tooltip

MARKUP = "<img src='http://example.invalid/x.png'><table><tr><td>cell</td></tr></table><a href='http://e.invalid'>link</a>"


def shown(tip: str) -> QTextDocument:
    """The document Qt's tooltip label builds from ``tip`` (AutoText: rich if it looks rich)."""
    doc = QTextDocument()
    if QtGui.Qt.mightBeRichText(tip):
        doc.setHtml(tip)
    else:
        doc.setPlainText(tip)
    return doc


def assert_literal(tip: str, *texts: str) -> None:
    """Each of ``texts`` appears as text, and the rendered tooltip holds no image, table or link."""
    doc = shown(tip)
    for t in texts:
        assert t in doc.toPlainText(), (t, doc.toPlainText())
    assert not doc.rootFrame().childFrames(), "a table was rendered"
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fmt = it.fragment().charFormat()
            assert not fmt.isImageFormat(), "an image was rendered"
            assert not fmt.isAnchor(), "a link was rendered"
            it += 1
        block = block.next()


def test_plain_tooltip_keeps_lines_and_shows_markup_literally(qtbot: Any) -> None:
    tip = plain_tooltip(MARKUP + "\nsecond line & more")
    assert_literal(tip, MARKUP, "second line & more")
    assert shown(tip).toPlainText().count("\n") == 1
    assert plain_tooltip("") == ""


def hit(title: str, text: str) -> Hit:
    return Hit(1, 7, "chunk", title, "/docs/" + title, 3, text, 0.5, 1, "en")


def test_result_column_tooltips_are_plain(qtbot: Any) -> None:
    model = RankedModel(show_change=False)
    model.set_rows([make_row(hit(MARKUP, "body " + MARKUP), None, [("s", 0.5)])])
    for col in (COL_TITLE, COL_SNIPPET):
        tip = model.data(model.index(0, col), Qt.ItemDataRole.ToolTipRole)
        assert_literal(tip, "<img src='http://example.invalid/x.png'>", "<table>")


def test_library_panel_tooltips_are_plain_and_show_warnings(qtbot: Any) -> None:
    panel = LibraryPanel()
    qtbot.addWidget(panel)
    warning = "the PDF is damaged and was repaired on opening; some text may be missing"
    row = DocRow(7, MARKUP, "/docs/<b>bold</b>.pdf", "pdf", "en", 2, "indexed", (warning,))
    panel.set_listing(Listing("/lib", ("/docs/<i>root</i>",), (row,), (("/docs/<u>x</u>.pdf", "<img src=y> bad"),)))
    tree = panel.tree
    docs = tree.topLevelItem(1)
    item = docs.child(0)
    assert_literal(item.toolTip(0), MARKUP, "/docs/<b>bold</b>.pdf", warning)
    assert "⚠" in item.text(1)
    assert_literal(item.toolTip(1), warning)
    root = tree.topLevelItem(0).child(0)
    assert_literal(root.toolTip(0), "/docs/<i>root</i>")
    skipped = tree.topLevelItem(2).child(0)
    assert_literal(skipped.toolTip(0), "/docs/<u>x</u>.pdf")
    assert_literal(skipped.toolTip(1), "<img src=y> bad")
    panel.show_progress(Progress("embed", 1, 2, "<img src=z>.pdf"))
    assert panel.progress_label.textFormat() == Qt.TextFormat.PlainText


def test_answer_pane_tooltips_are_plain(qtbot: Any) -> None:
    pane = AnswerPane("causal", "answer.causal")
    qtbot.addWidget(pane)
    src = hit(MARKUP, "given " + MARKUP)
    pane.set_answer(Answer("It says so [1].", (Citation(1, True, 7, 1, MARKUP, src.path, 3),), (src,), "causal"))
    for j in (1, 2):  # the document column (title) and the passage given to the model
        assert_literal(pane.sources.item(0, j).toolTip(), "<table>")
    pane.set_progress("reading <img src=q>.pdf")
    assert_literal(pane.status.toolTip(), "reading <img src=q>.pdf")
    assert pane.status.textFormat() == Qt.TextFormat.PlainText


def test_a_refusal_after_a_cited_answer_is_not_drawn_as_a_link(qtbot: Any) -> None:
    """An answer ending on a citation leaves the browser's current character format a link; the
    next text (a refusal, a new answer) is plain."""
    from PySide6.QtGui import QTextCursor

    from rag_desktop.core.abstain import Abstention, Support

    pane = AnswerPane("causal", "answer.causal")
    qtbot.addWidget(pane)
    src = hit("Doc", "It says so.")
    pane.set_answer(Answer("It says so [1]", (Citation(1, True, 11, 1, "Doc", src.path, 3),), (src,), "causal"))
    cur = pane.browser.textCursor()
    cur.setPosition(pane.text().index("1]") + 1)  # where a click on the citation leaves it
    pane.browser.setTextCursor(cur)
    assert pane.browser.currentCharFormat().isAnchor()
    refusal = Abstention(True, "off_topic", Support(3, 0, 0.80, 0.79))
    pane.set_answer(Answer("", method="causal", abstention=refusal))
    cur = QTextCursor(pane.browser.document())
    cur.setPosition(3)
    assert pane.text() and not cur.charFormat().isAnchor() and not cur.charFormat().fontUnderline()


def test_chip_and_trace_tooltips_are_plain(qtbot: Any) -> None:
    """Keyword terms come from documents and trace cells from the model: their tooltips too."""
    from rag_desktop.ui.chips import Chip
    from rag_desktop.ui.trace_view import _item

    chip = Chip("term", "term", "B", "#56B4E9", MARKUP + "\nweight 0.1")
    qtbot.addWidget(chip)
    assert_literal(chip.toolTip(), "<table>", "weight 0.1")
    assert_literal(_item("cell", "evidence " + MARKUP).toolTip(), "evidence", "<img src=")
