"""Text from documents shown as text, never as markup.

Qt treats a tooltip (and a QLabel in its default AutoText mode) as rich text whenever
``Qt.mightBeRichText`` guesses so — for instance when it starts with a tag — so a title or a
passage holding ``<img src=…>``, ``<table>`` or ``<a href=…>`` was rendered: an image fetched,
a table drawn, a link shown. There is no "plain text" flag for tooltips,
so the text is escaped and wrapped in a paragraph that keeps its line breaks.
"""

from __future__ import annotations

import html


def plain_tooltip(text: str) -> str:
    """``text`` as a tooltip that Qt shows literally, line breaks included ('' stays '': no tooltip)."""
    if not text:
        return ""
    return "<p style='white-space:pre-wrap'>" + html.escape(text, quote=False) + "</p>"
