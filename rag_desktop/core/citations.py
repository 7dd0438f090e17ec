"""The one citation grammar: what counts as ``[n]`` in a model's answer.

Prompting, CF-RAG, the answer metrics and the UI all read citations with this module, so
an answer cannot cite a source in one place and not in another (CF-RAG once read
only ASCII brackets without ranges, so 【1】 and [1-2] were no citations there, while the UI
accepted four digits, so "[2023]" was a link only in the viewer).

Accepted: ``[1]``, ``[1, 2]``, ``[1-3]``, ``【1】``, ``【1，2】``, ``［1］``; ``[1][2]`` is two
markers. Not a citation: a number of four or more digits (a bracketed year such as [2023]),
a markdown link ``[1](…)``, a range wider than :data:`MAX_RANGE` or running backwards (its
bounds are read as two separate numbers).

The markers mapped to the answer's sources (``parse_citations``) are read with the other replies,
in core/replies.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUM = r"\d{1,3}"
_LIST_SEP = r"[,，、;；]"
_RANGE_SEP = r"[-–—~～]"
_SEP = rf"\s*(?:{_LIST_SEP}|{_RANGE_SEP})\s*"
CITATION_RE = re.compile(rf"[\[【［]\s*({_NUM}(?:{_SEP}{_NUM})*)\s*[\]】］](?!\()")
MAX_RANGE = 50
_ITEM = re.compile(rf"{_NUM}(?:\s*{_RANGE_SEP}\s*{_NUM})?")


@dataclass(frozen=True)
class CitationSpan:
    """One item inside a marker: its character span in the text and the numbers it names."""

    start: int
    end: int
    numbers: tuple[int, ...]


def _item_numbers(item: str) -> tuple[int, ...]:
    bounds = [int(b) for b in re.split(rf"\s*{_RANGE_SEP}\s*", item)]
    if len(bounds) == 2:
        lo, hi = bounds
        if lo <= hi and hi - lo <= MAX_RANGE:
            return tuple(range(lo, hi + 1))
    return tuple(bounds)


def citation_items(text: str) -> list[CitationSpan]:
    """Every item of every marker, in text order ("[1, 3-4]" gives (1,) and (3, 4))."""
    out: list[CitationSpan] = []
    for m in CITATION_RE.finditer(text):
        base = m.start(1)
        for item in _ITEM.finditer(m.group(1)):
            out.append(CitationSpan(base + item.start(), base + item.end(), _item_numbers(item.group(0))))
    return out


def marker_items(group: str) -> list[tuple[str, tuple[int, ...]]]:
    """The items of one marker's inside ("1, 3-4") as (item text, numbers)."""
    return [(m.group(0), _item_numbers(m.group(0))) for m in _ITEM.finditer(group)]


def cited_numbers(text: str) -> list[int]:
    """Every distinct cited number, in order of first appearance."""
    seen: dict[int, None] = {}
    for item in citation_items(text):
        for n in item.numbers:
            seen.setdefault(n, None)
    return list(seen)


def citation_spans(text: str) -> list[tuple[int, int, int]]:
    """(start, end, n) per item, for making links; a range's span points at its first number."""
    return [(it.start, it.end, it.numbers[0]) for it in citation_items(text)]


def strip_citations(text: str) -> str:
    """The text without its citation markers (for scoring an answer's words)."""
    return re.sub(r"[ \t]{2,}", " ", CITATION_RE.sub("", text)).strip()


__all__ = ["CITATION_RE", "MAX_RANGE", "CitationSpan", "citation_items", "citation_spans", "cited_numbers",
           "marker_items", "strip_citations"]
