"""Text from documents shown as text, never as markup.

Qt treats a tooltip (and a QLabel in its default AutoText mode) as rich text whenever
``Qt.mightBeRichText`` guesses so — for instance when it starts with a tag — so a title or a
passage holding ``<img src=…>``, ``<table>`` or ``<a href=…>`` was rendered: an image fetched,
a table drawn, a link shown. There is no "plain text" flag for tooltips,
so the text is escaped and wrapped in a paragraph that keeps its line breaks.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel


def plain_label(*, wrap: bool = True, selectable: bool = False) -> QLabel:
    """A label that shows its text literally (never guessed to be rich text: messages and notes
    carry titles, file names and document terms), word-wrapped unless ``wrap`` is False;
    ``selectable``: the mouse can select its text to copy it."""
    lab = QLabel()
    lab.setTextFormat(Qt.TextFormat.PlainText)
    lab.setWordWrap(wrap)
    if selectable:
        lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return lab


def plain_tooltip(text: str) -> str:
    """``text`` as a tooltip that Qt shows literally, line breaks included ('' stays '': no tooltip)."""
    if not text:
        return ""
    return "<p style='white-space:pre-wrap'>" + html.escape(text, quote=False) + "</p>"
