"""What the document viewer marks on a page, Qt-free and without PyMuPDF (the
ui imports no backend; the viewer builds these and app.documents hands them to the renderer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

RGB = tuple[float, float, float]
# Line text → (start, end, kind) spans to mark: the caller's whole-word matcher (the desktop UI
# builds it from the keyword tokenizer), so "one" is not marked inside "alone" as search_for would.
LineMatcher = Callable[[str], Sequence[tuple[int, int, str]]]


@dataclass(frozen=True)
class Highlight:
    """Mark every occurrence of ``text`` on the page in ``color`` (RGB in 0..1)."""

    text: str
    color: RGB
    kind: str = ""
    opacity: float = 0.45


@dataclass(frozen=True)
class RenderedPage:
    png: bytes
    page: int  # 1-based, after clamping to the document
    n_pages: int
    width: int
    height: int
    found: dict[str, int] = field(default_factory=dict)  # highlight text → rectangles marked
    word_marks: int = 0  # whole words marked through ``words`` (render_page)
    # The page's printed label where the PDF defines one ("87", "iv"; a chapter printed
    # as pages 87–89 is physical pages 1–3), "" otherwise. The page box still counts physical pages.
    label: str = ""
    # Top of the first "region" highlight (the passage) in the PNG's pixels, None when none was
    # found on the page: the viewer scrolls it into view.
    region_top: int | None = None


def hex_to_rgb(color: str) -> RGB:
    """'#E69F00' → (0.90, 0.62, 0.0)."""
    c = color.lstrip("#")
    if len(c) != 6 or not re.fullmatch(r"[0-9a-fA-F]{6}", c):
        raise ValueError(f"hex_to_rgb: {color!r} is not a #RRGGBB colour")
    return (int(c[0:2], 16) / 255.0, int(c[2:4], 16) / 255.0, int(c[4:6], 16) / 255.0)


def region_segments(text: str, max_len: int = 60, max_n: int = 40, min_len: int = 12) -> list[str]:
    """Short searchable pieces of a chunk's text, to mark its region on a page.

    A chunk is up to thousands of characters and its cleaned text differs from the page's
    layout (joined lines, removed headers), so searching for it whole finds nothing.
    Lines are cut at sentence punctuation and at ``max_len`` characters; pieces shorter
    than ``min_len`` are dropped (they would light up unrelated places).
    """
    out: list[str] = []
    for line in text.splitlines():
        for piece in re.split(r"(?<=[.!?;。！？；])\s*", line):
            piece = " ".join(piece.split())
            while len(piece) >= min_len and len(out) < max_n:
                head = piece[:max_len]
                if len(piece) > max_len:
                    cut = head.rfind(" ")
                    if cut >= min_len:
                        head = head[:cut]
                out.append(head)
                piece = piece[len(head):].strip()
            if len(out) >= max_n:
                return out
    return out
