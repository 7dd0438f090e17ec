"""One citation grammar for prompting, CF-RAG, the metrics and the UI.

Before: CF-RAG read only ASCII "[n]" / "[n, m]" (so 【1】 and [1-2] cited nothing there) and
the UI accepted four digits (so "[2023]" was a citation link only in the viewer).
"""

from __future__ import annotations

import pytest

from rag_desktop.core import cfrag, citations, replies
from rag_desktop.core.attribution import CHECK_SHARE, check_citations
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
    assert [c.n for c in replies.parse_citations(text, hits)] == expected
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
    cits = replies.parse_citations("x [1] y [9] z [2-90]", _hits(2))
    assert [(c.n, c.valid) for c in cits] == [(1, True), (9, False), (2, True), (90, False)]


def test_strip_citations() -> None:
    assert citations.strip_citations("Paris is the capital [1]. 北京【2】。") == "Paris is the capital . 北京。"


# --------------------------------------------------------------------------- the model's citations checked

SOURCES = ["出差住宿费在一线城市每人每晚不超过600元，省会城市不超过450元，其他地区不超过350元。"
           "两名同性别员工同行的，原则上合住一间。",
           "The Wason selection task asks which cards must be turned over to test a rule."]


def test_a_repeated_trailing_marker_is_written_once() -> None:
    text = ("出差住宿费在一线城市每人每晚不超过600元，省会城市不超过450元[1]。"
            "两名同性别员工同行的，原则上合住一间[1]。 [1]")
    got = check_citations(text, SOURCES, "出差住宿费的报销标准是多少？")
    assert got.text == text[: text.rindex(" [1]")] and got.repeats == 1 and got.dropped == ()
    assert check_citations("住宿费一线城市600元[1][1]。", SOURCES).text == "住宿费一线城市600元[1]。"
    assert check_citations("Cards are turned [2, 2].", SOURCES).text == "Cards are turned [2]."


def test_a_citation_whose_passage_does_not_hold_the_sentence_is_dropped() -> None:
    got = check_citations("Most people turn over the wrong cards to test the rule [1]. 住宿费600元[1]。", SOURCES,
                          "Wason?")
    assert got.text == "Most people turn over the wrong cards to test the rule. 住宿费600元[1]。"
    assert got.dropped == ((1, "Most people turn over the wrong cards to test the rule."),)
    # the right passage keeps it; one of two markers can go while the other stays
    kept = check_citations("The task asks which cards must be turned over [1, 2].", SOURCES)
    assert kept.text == "The task asks which cards must be turned over [2]." and [n for n, _ in kept.dropped] == [1]


def test_what_cannot_be_judged_is_kept() -> None:
    # too few words of its own (the question's are left out), a number naming no source, a range
    assert check_citations("2年 [1]。", SOURCES, "结论的有效期是多久？").text == "2年 [1]。"
    assert check_citations("The cards are turned over [7].", SOURCES).text == "The cards are turned over [7]."
    assert check_citations("Rules and cards [1-2].", SOURCES).text == "Rules and cards [1-2]."
    assert 0 < CHECK_SHARE < 0.5


def test_a_lone_figure_is_checked_against_its_passage() -> None:
    """Asked what the library does not hold, a model writes a figure from memory and cites a passage
    that does not have it: with the question's words left out, the figure is all the sentence says."""
    q = "What is the boiling point of ethanol?"
    got = check_citations("The boiling point of ethanol is 78.3°C [2].", SOURCES, q)
    assert got.text == "The boiling point of ethanol is 78.3°C." and [n for n, _ in got.dropped] == [2]
    held = [*SOURCES, "Ethanol boils at 78.3 °C at sea level."]
    assert check_citations("The boiling point of ethanol is 78.3°C [3].", held, q).text.endswith("[3].")
    # a short sentence without a figure still cannot be judged
    assert check_citations("Ethanol [2].", SOURCES, q).text == "Ethanol [2]."


def test_a_dropped_sentence_is_matched_again_to_the_passage_that_holds_it() -> None:
    from rag_desktop.core.attribution import attribute

    text = check_citations("The Wason selection task asks which cards must be turned over [1].", SOURCES).text
    assert text == "The Wason selection task asks which cards must be turned over."
    att = attribute(text, SOURCES)
    assert att.text.endswith("[2].") and len(att.added) == 1
