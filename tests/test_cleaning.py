"""clean_pages: TOC leaders, URLs kept (stripped from what is indexed), hyphenation, headers/footers,
page numbers, CJK-aware joining (paper 000 §4.1), with page offsets that stay exact."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_desktop.core.cleaning import (
    clean_pages,
    is_page_number_line,
    is_toc_entry,
    join_lines,
    page_at,
    strip_urls,
)
from rag_desktop.core.text import joins_without_space
from rag_desktop.core.types import CleanedText, Page


def clean1(text: str) -> str:
    """Clean a single-page document."""
    return clean_pages([Page(1, text)]).text


# --------------------------------------------------------------------------- TOC leaders


@pytest.mark.parametrize(
    "line",
    [
        "Chapter 1 Introduction ........ 5",
        "1.2 Background . . . . . . . . 12",
        "Preface .......... iv",
        "第一章 总则……………………1",
        "第二节 适用范围 ··········· 23",
        "Appendix B………3",
    ],
)
def test_toc_entries_are_dropped(line: str) -> None:
    assert is_toc_entry(line)
    assert clean1(f"Contents\n\n{line}\n\nBody text.") == "Contents\n\nBody text."


@pytest.mark.parametrize("line", ["Wait... 5", "Revenue grew by 12", "Version 2.0.1", "Total: 1,234"])
def test_ordinary_lines_are_not_toc_entries(line: str) -> None:
    assert not is_toc_entry(line)
    assert clean1(line) == line


def test_a_chinese_ellipsis_before_a_number_counts_as_a_leader() -> None:
    # Two "…" look like six dots: a deliberate trade-off — a leader-like tail with a page
    # number is far more often a TOC entry than prose.
    assert is_toc_entry("他说…… 3")


def test_leader_runs_inside_a_long_line_are_removed() -> None:
    flattened = "Contents 1 Introduction ........ 3 2 Methods ........ 7 3 Results ........ 12 " + "x" * 200
    assert clean1(flattened) == "Contents 1 Introduction 2 Methods 3 Results " + "x" * 200


# --------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [
        ("See https://example.com/a?b=1&c=2.", "See."),
        ("see http://x.org/path now", "see now"),
        ("Visit www.example.org, then", "Visit, then"),
        ("访问https://www.gov.cn/zhengce获取全文。", "访问获取全文。"),
        ("ftp://files.example.com/pub is old", "is old"),
        ("mail me at a@b.com", "mail me at a@b.com"),
    ],
)
def test_urls_stay_in_the_text_and_are_stripped_from_what_is_indexed(raw: str, stripped: str) -> None:
    assert clean1(raw) == raw
    assert strip_urls(clean1(raw)) == stripped


def test_a_line_that_is_only_a_url_is_kept_inside_its_paragraph() -> None:
    assert clean1("first half\nhttps://example.com/x\nsecond half") == "first half https://example.com/x second half"
    assert clean1("请前往主页下载：\nhttps://github.com/a/b\n同时阅读说明") == "请前往主页下载：https://github.com/a/b同时阅读说明"
    assert strip_urls("first half https://example.com/x second half") == "first half second half"


# --------------------------------------------------------------------------- joining lines


def test_hyphenated_words_are_rejoined() -> None:
    assert clean1("an inter-\nnational treaty") == "an international treaty"
    assert clean1("the COVID-\n19 period") == "the COVID-19 period"  # hyphen kept before a digit
    assert clean1("Sino-\nAmerican trade") == "Sino-American trade"  # kept before a capital
    assert clean1("a list -\nnext") == "a list - next"  # a dash after a space is not hyphenation


def test_cjk_aware_line_joining() -> None:
    assert clean1("数据出境安全\n评估办法") == "数据出境安全评估办法"
    assert clean1("保护个人信息权益，\n促进数据安全") == "保护个人信息权益，促进数据安全"
    assert clean1("English words\nwrap here") == "English words wrap here"
    assert clean1("使用BERT\nmodel训练") == "使用BERT model训练"  # Latin on both sides: space
    assert clean1("我们使用\nBERT模型") == "我们使用BERT模型"  # CJK on one side: no space
    assert clean1("한국어 문장\n계속") == "한국어 문장 계속"  # Hangul is spaced like Latin


def test_paragraph_breaks_are_exactly_two_newlines() -> None:
    assert clean1("para one\n\n\n   \n\npara two\n \npara three") == "para one\n\npara two\n\npara three"


def test_list_items_and_markdown_structure_keep_their_line_breaks() -> None:
    text = "Steps:\n- open the file\n- read it\n1. first\n(2) second\n一、总则\n# Heading\n| a | b |"
    assert clean1(text) == text


def test_whitespace_and_artifact_characters() -> None:
    raw = "  a\u00a0\u00a0b\tc\u3000d  \u200be\u00adf \ufb01nd \ufffd\ue000g  "
    assert clean1(raw) == "a b c d ef find g"


def test_all_line_break_kinds_are_line_breaks() -> None:
    assert clean1("a\r\nb\rc\x0cd\u2028e") == "a b c d e"


# --------------------------------------------------------------------------- page numbers


@pytest.mark.parametrize(
    "line", ["- 3 -", "— 12 —", "Page 3 of 9", "page 7", "p. 4", "第3页", "第 3 页 共 9 页", "第十二页"]
)
def test_page_number_lines_are_dropped_anywhere(line: str) -> None:
    assert is_page_number_line(line)
    assert clean1(f"Top line.\n\n{line}\n\nBottom line.") == "Top line.\n\nBottom line."


def test_bare_numbers_only_go_at_page_edges_of_multi_page_documents() -> None:
    pages = [Page(1, "3\nFirst page text\nTable cell\n42\nmore text\niv"), Page(2, "Second page\n7")]
    cleaned = clean_pages(pages)
    assert cleaned.text == "First page text Table cell 42 more text\n\nSecond page"
    # A single logical page (Word, text file) keeps them: they are not page numbers there.
    assert clean1("2024\nAnnual plan") == "2024 Annual plan"
    assert not is_page_number_line("42") and is_page_number_line("42", edge=True)
    assert is_page_number_line("xiv", edge=True)
    assert not is_page_number_line("civic", edge=True)  # not a well-formed roman numeral
    assert not is_page_number_line("did", edge=True)


# --------------------------------------------------------------------------- headers / footers


def _report_pages(n: int) -> list[Page]:
    return [
        Page(
            i,
            f"ACME Annual Report 2023\nConfidential\nBody of page {i} about topic {chr(64 + i)}.\n"
            f"More about {chr(96 + i)}.\nACME Corp. | Page {i} of {n}",
        )
        for i in range(1, n + 1)
    ]


def test_repeated_headers_and_footers_are_removed() -> None:
    cleaned = clean_pages(_report_pages(5))
    assert "ACME" not in cleaned.text and "Confidential" not in cleaned.text
    assert cleaned.text.split("\n\n") == [
        f"Body of page {i} about topic {chr(64 + i)}. More about {chr(96 + i)}." for i in range(1, 6)
    ]


def test_header_text_inside_the_body_stays() -> None:
    pages = _report_pages(4)
    body = (
        "ACME Annual Report 2023\nConfidential\nIntro.\nACME Annual Report 2023\nis quoted.\n"
        "End.\nACME Corp. | Page 2 of 4"
    )
    pages[1] = Page(2, body)
    cleaned = clean_pages(pages)
    assert cleaned.text.split("\n\n")[1] == "Intro. ACME Annual Report 2023 is quoted. End."


def test_alternating_book_headers_are_removed() -> None:
    pages = [
        Page(i, f"{'Book Title' if i % 2 else 'Chapter Two'}\nText of page {i} here.\nmore\n{i}")
        for i in range(1, 7)
    ]
    assert clean_pages(pages).text.split("\n\n") == [f"Text of page {i} here. more" for i in range(1, 7)]


def test_two_pages_are_too_few_to_call_a_line_a_header() -> None:
    pages = [Page(1, "Same top\nbody one\nend"), Page(2, "Same top\nbody two\nend")]
    assert clean_pages(pages).text == "Same top body one end\n\nSame top body two end"


def test_short_pages_keep_a_body_line() -> None:
    # Every line repeats in shape across pages, but a page is never emptied by header removal.
    pages = [Page(i, f"Header\nHello page {i} world.\nFooter") for i in range(1, 4)]
    assert clean_pages(pages).text.split("\n\n") == [f"Hello page {i} world." for i in range(1, 4)]


# --------------------------------------------------------------------------- offsets


def test_page_offsets_are_exact_and_skip_empty_pages() -> None:
    pages = [Page(1, "Alpha text."), Page(2, "   \n"), Page(3, "Gamma\ntext."), Page(5, "Epsilon.")]
    cleaned = clean_pages(pages)
    assert cleaned.text == "Alpha text.\n\nGamma text.\n\nEpsilon."
    assert cleaned.page_numbers == (1, 3, 5)
    assert cleaned.page_offsets == (0, 13, 26)
    for offset, expected in zip(cleaned.page_offsets, ("Alpha", "Gamma", "Epsilon"), strict=True):
        assert cleaned.text[offset:].startswith(expected)
    assert [page_at(cleaned, i) for i in (0, 12, 13, 25, 26, len(cleaned.text) - 1)] == [1, 1, 3, 3, 5, 5]


def test_empty_input() -> None:
    assert clean_pages([]) == CleanedText("", (), ())
    assert clean_pages([Page(1, ""), Page(2, " \n\t")]) == CleanedText("", (), ())
    assert page_at(CleanedText("", (), ()), 0) == 1


# --------------------------------------------------------------------------- reference and properties


def ref_is_cjk(ch: str) -> bool:
    """Slow reference: by Unicode character name."""
    name = unicodedata.name(ch, "")
    return name.startswith(("CJK", "HIRAGANA", "KATAKANA", "FULLWIDTH", "IDEOGRAPHIC", "BOPOMOFO"))


def ref_join(lines: list[str]) -> str:
    """Obviously-correct reference of the line-joining rules (no structure lines in input)."""
    out = lines[0]
    for nxt in lines[1:]:
        last, first = out[-1], nxt[0]
        cased = len(out) > 1 and unicodedata.category(out[-2]) in ("Lu", "Ll")
        if last == "-" and cased and unicodedata.category(first) == "Ll":
            out = out[:-1] + nxt
        elif (last == "-" and len(out) > 1 and out[-2].isalnum()) or ref_is_cjk(last) or ref_is_cjk(first):
            out = out + nxt
        else:
            out = out + " " + nxt
    return out


_WORDS = [
    "data",
    "Data",
    "inter-",
    "national",
    "COVID-",
    "Sino-",
    "数据",
    "安全。",
    "评估，",
    "中文",
    "BERT",
    "の",
    "カタ",
    "한국",
    "é",
    "x7",
]
_LINES = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join)


@settings(max_examples=100, deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=8))
def test_join_lines_agrees_with_the_reference(lines: list[str]) -> None:
    assert join_lines(lines) == ref_join(lines)
    assert clean1("\n".join(lines)) == ref_join(lines)


@pytest.mark.parametrize(
    "ch", ["中", "。", "，", "あ", "カ", "（", "　", "豈", "\U00020000", "a", "é", "한", "Я", "—", "“"]
)
def test_is_cjk_matches_unicode_names(ch: str) -> None:
    assert joins_without_space(ch) == ref_is_cjk(ch)


_PAGE_TEXT = st.lists(
    st.sampled_from([*"ab .-\n\n  \t中文。", "https://x.y ", "Page 2", "....... 4", "\u00a0", "\ufb01"]),
    max_size=40,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(_PAGE_TEXT, max_size=6))
def test_cleaned_text_invariants(texts: list[str]) -> None:
    pages = [Page(i + 1, t) for i, t in enumerate(texts)]
    cleaned = clean_pages(pages)
    text = cleaned.text
    assert text == text.strip()
    assert "\n\n\n" not in text and "  " not in text and "\t" not in text
    assert all(line == line.strip() for line in text.split("\n"))
    assert len(cleaned.page_offsets) == len(cleaned.page_numbers)
    assert list(cleaned.page_offsets) == sorted(set(cleaned.page_offsets))
    assert set(cleaned.page_numbers) <= {p.number for p in pages}
    if text:
        assert cleaned.page_offsets[0] == 0
    for offset in cleaned.page_offsets[1:]:
        assert text[offset - 2 : offset] == "\n\n" and not text[offset].isspace()
    # Pages are cleaned on their own: a page's segment never holds another page's text.
    bounds = [*cleaned.page_offsets, len(text) + 2]
    for number, start, end in zip(cleaned.page_numbers, bounds, bounds[1:], strict=False):
        assert text[start : end - 2]
        assert page_at(cleaned, start) == number == page_at(cleaned, end - 3)


# --------------------------------------------------------------------------- linear time


@pytest.mark.timeout(60)  # a quadratic pattern would take hours on these inputs
@pytest.mark.parametrize(
    "text",
    [
        "." * 500_000,
        ". . . x" * 70_000,
        "1" * 500_000 + "x",
        "http://" * 70_000,
        "http://." * 60_000,
        "www." * 120_000,
        "a-\n" * 150_000,
        "中" * 500_000,
        "Page 3 of 9\n" * 40_000,
        "…" * 500_000 + "1",
    ],
    ids=[
        "dots",
        "spaced-dots",
        "digits",
        "http",
        "http-dot",
        "www",
        "hyphens",
        "cjk",
        "page-lines",
        "ellipsis",
    ],
)
def test_pathological_inputs_finish(text: str) -> None:
    cleaned = clean_pages([Page(1, text), Page(2, text[:1000])])
    assert len(cleaned.text) <= len(text) + 1002
    assert len(strip_urls(cleaned.text)) <= len(cleaned.text)
