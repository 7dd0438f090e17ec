"""One citation grammar for prompting, CF-RAG, the metrics and the UI (issue 12, issue-11 bug).

Before: CF-RAG read only ASCII "[n]" / "[n, m]" (so 【1】 and [1-2] cited nothing there) and
the UI accepted four digits (so "[2023]" was a citation link only in the viewer).
"""

from __future__ import annotations

import pytest

from rag_desktop.core import cfrag, citations, prompting
from rag_desktop.core.types import Hit
from rag_desktop.ui import present


def _hits(n: int) -> list[Hit]:
    return [Hit(i, 100 + i, "chunk", f"Doc {i}", f"/d{i}.txt", i, f"text {i}", 0.5, i) for i in range(1, n + 1)]


CASES = [
    ("A [1]. B [2][3].", [1, 2, 3]),
    ("见【1】和【2，3】。", [1, 2, 3]),
    ("ranges [1-3] and [5–6]", [1, 2, 3, 5, 6]),
    ("full width ［2］", [2]),
    ("in [2023] the law changed [1]", [1]),
    ("a link [1](http://x) is not one", []),
    ("none", []),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_every_reader_agrees(text: str, expected: list[int]) -> None:
    hits = _hits(6)
    assert citations.cited_numbers(text) == expected
    assert [c.n for c in prompting.parse_citations(text, hits)] == expected
    assert [c.n for c in cfrag.citations_for(text, hits)] == expected
    ui_first = sorted({n for _s, _e, n in present.citation_spans(text)})
    core_first = sorted({it.numbers[0] for it in citations.citation_items(text)})
    assert ui_first == core_first


def test_cfrag_reads_fullwidth_brackets_and_ranges() -> None:
    hits = _hits(3)
    assert [c.n for c in cfrag.citations_for("答案是青松【1】，另见 [2-3]。", hits)] == [1, 2, 3]


def test_ui_does_not_link_a_bracketed_year() -> None:
    assert present.citation_spans("Revised in [2023].") == []


def test_out_of_range_is_flagged_and_wide_range_is_two_numbers() -> None:
    cits = citations.parse_citations("x [1] y [9] z [2-90]", _hits(2))
    assert [(c.n, c.valid) for c in cits] == [(1, True), (9, False), (2, True), (90, False)]


def test_strip_citations() -> None:
    assert citations.strip_citations("Paris is the capital [1]. 北京【2】。") == "Paris is the capital . 北京。"
