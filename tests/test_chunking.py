"""chunk_text: 4,096/512 character chunks (paper 000 §4.1) with preferred break points, exact
offsets and pages — checked against a slow character-by-character reference."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_desktop.core.chunking import (
    CJK_SENTENCE_ENDS,
    CLOSERS,
    DEFAULT_OVERLAP,
    DEFAULT_SIZE,
    LATIN_SENTENCE_ENDS,
    chunk_text,
)
from rag_desktop.core.cleaning import clean_pages
from rag_desktop.core.types import ChunkSpan, CleanedText, Page


def one_page(text: str) -> CleanedText:
    return CleanedText(text, (0,), (1,))


def spans(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    return [(c.char_start, c.char_end) for c in chunk_text(one_page(text), size, overlap)]


# --------------------------------------------------------------------------- slow reference


def ref_is_sentence_end(text: str, start: int, e: int) -> bool:
    """Position ``e`` ends a sentence whose mark lies at or after ``start``."""
    if e < len(text) and text[e] in CLOSERS:
        return False  # closing quotes/brackets belong to the sentence before them
    q = e
    while q > start and text[q - 1] in CLOSERS:
        q -= 1
    if q <= start:
        return False
    mark = text[q - 1]
    if mark in CJK_SENTENCE_ENDS:
        return True
    return mark in LATIN_SENTENCE_ENDS and (e == len(text) or text[e].isspace())


def ref_break(text: str, start: int, size: int, overlap: int) -> int:
    lo, hi = start + max(size // 2, overlap + 1), start + size
    window = range(hi, lo - 1, -1)  # from the right: the first hit is the last position
    for p in window:
        if text[p : p + 2] == "\n\n":
            return p
    for e in window:
        if ref_is_sentence_end(text, start, e):
            return e
    for w in window:
        if text[w].isspace():
            return w
    return hi


def ref_chunks(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    n = len(text.rstrip())
    out: list[tuple[int, int]] = []
    start = 0
    while start < n and text[start].isspace():
        start += 1
    while start < n:
        end = n if n - start <= size else ref_break(text, start, size, overlap)
        while text[end - 1].isspace():
            end -= 1
        out.append((start, end))
        if end >= n:
            break
        nxt = max(end - overlap, start + 1)
        if 0 < nxt < end and not text[nxt - 1].isspace() and not text[nxt].isspace():
            for i in range(nxt, min(nxt + 32, end)):
                if text[i].isspace():
                    nxt = i
                    break
        while text[nxt].isspace():
            nxt += 1
        start = nxt
    return out


_PIECES = [
    *"ab c",
    "word ",
    "中文",
    "。",
    "！",
    ".",
    "?",
    " ",
    "\n",
    "\n\n",
    "”",
    "」",
    "3.14",
    "\t",
    "\u3000",
]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=120).map("".join)


@settings(max_examples=200, deadline=None)
@given(_TEXT, st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=39))
def test_agrees_with_the_reference(text: str, size: int, overlap: int) -> None:
    overlap = min(overlap, size - 1)
    assert spans(text, size, overlap) == ref_chunks(text, size, overlap)


# --------------------------------------------------------------------------- invariants


def check_invariants(cleaned: CleanedText, chunks: list[ChunkSpan], size: int) -> None:
    text = cleaned.text
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.text and c.text == c.text.strip()
        assert text[c.char_start : c.char_end] == c.text
        assert len(c.text) <= size
        assert c.page_start <= c.page_end
    for a, b in itertools.pairwise(chunks):
        assert a.char_start < b.char_start
        assert b.char_start <= a.char_end or not text[a.char_end : b.char_start].strip()  # no lost text
    if text.strip():
        assert chunks[0].char_start == len(text) - len(text.lstrip())
        assert chunks[-1].char_end == len(text.rstrip())
    else:
        assert chunks == []


@settings(max_examples=100, deadline=None)
@given(_TEXT, st.integers(min_value=1, max_value=60), st.integers(min_value=0, max_value=59))
def test_invariants_hold(text: str, size: int, overlap: int) -> None:
    overlap = min(overlap, size - 1)
    cleaned = one_page(text)
    check_invariants(cleaned, chunk_text(cleaned, size, overlap), size)


# --------------------------------------------------------------------------- break preferences


def test_prefers_paragraph_end_over_sentence_end() -> None:
    text = "Alpha beta gamma delta.\n\nEps zeta. Eta theta iota kappa lambda mu."
    first = chunk_text(one_page(text), size=40, overlap=0)[0]
    assert first.text == "Alpha beta gamma delta."  # although "Eps zeta." also ends in the window


def test_prefers_sentence_end_over_whitespace() -> None:
    text = "One two three. Four five six seven eight nine ten eleven."
    first = chunk_text(one_page(text), size=24, overlap=0)[0]
    assert first.text == "One two three."


def test_chinese_sentence_ends_need_no_space() -> None:
    text = "数据出境安全评估办法。为了规范数据出境活动，保护个人信息权益。维护国家安全和社会公共利益。"
    chunks = chunk_text(one_page(text), size=20, overlap=0)
    assert [c.text for c in chunks] == [
        "数据出境安全评估办法。",
        "为了规范数据出境活动，保护个人信息权益。",
        "维护国家安全和社会公共利益。",
    ]
    assert {c.lang for c in chunks} == {"zh"}


def test_decimal_points_and_abbreviations_glued_to_text_are_not_sentence_ends() -> None:
    text = "pi is 3.14159 and e is 2.71828 roughly"
    assert chunk_text(one_page(text), size=20, overlap=0)[0].text == "pi is 3.14159 and e"


def test_closing_quotes_stay_with_their_sentence() -> None:
    text = "He said “It works.” Then he left the room quietly."
    assert chunk_text(one_page(text), size=25, overlap=0)[0].text == "He said “It works.”"
    zh = "他说：“可以。”然后离开了房间很久很久"
    assert chunk_text(one_page(zh), size=12, overlap=0)[0].text == "他说：“可以。”"


def test_hard_cut_without_any_break() -> None:
    text = "x" * 25
    assert spans(text, 10, 0) == [(0, 10), (10, 20), (20, 25)]
    assert spans(text, 10, 3) == [(0, 10), (7, 17), (14, 24), (21, 25)]


def test_overlap_starts_at_a_word() -> None:
    words = " ".join(f"w{i:03d}" for i in range(40))  # "w000 w001 ..." (5 chars per word)
    chunks = chunk_text(one_page(words), size=50, overlap=12)
    for a, b in itertools.pairwise(chunks):
        assert b.text.startswith("w") and words[b.char_start - 1] == " "
        assert a.char_end - b.char_start <= 12  # at most the requested overlap
        assert a.char_end - b.char_start >= 12 - 5  # and about as much as a word allows


def test_no_overlap_tiles_the_text() -> None:
    text = " ".join(["sentence number one."] * 30)
    chunks = chunk_text(one_page(text), size=100, overlap=0)
    assert len(chunks) > 1
    assert " ".join(c.text for c in chunks) == text
    assert all(b.char_start == a.char_end + 1 for a, b in itertools.pairwise(chunks))


def test_defaults_are_the_papers() -> None:
    assert (DEFAULT_SIZE, DEFAULT_OVERLAP) == (4096, 512)
    para = "This is a sentence of moderate length for the test. " * 8
    text = "\n\n".join([para.strip()] * 40)
    chunks = chunk_text(one_page(text))
    assert len(chunks) > 1
    check_invariants(one_page(text), chunks, 4096)
    assert all(c.text.endswith(".") for c in chunks)  # ended at paragraph or sentence ends
    assert all(len(c.text) >= 2048 for c in chunks[:-1])


def test_bad_sizes() -> None:
    with pytest.raises(ValueError, match="overlap"):
        chunk_text(one_page("abc"), size=10, overlap=10)
    with pytest.raises(ValueError, match="overlap"):
        chunk_text(one_page("abc"), size=10, overlap=-1)
    with pytest.raises(ValueError, match="size"):
        chunk_text(one_page("abc"), size=0, overlap=0)


def test_empty_text() -> None:
    assert chunk_text(CleanedText("", (), ())) == []
    assert chunk_text(one_page("  \n\n ")) == []


# --------------------------------------------------------------------------- pages and language


def test_pages_follow_offsets() -> None:
    pages = [
        Page(1, "Alpha page one text. " * 10),
        Page(2, "中文第二页内容。" * 20),
        Page(4, "Last page here."),
    ]
    cleaned = clean_pages(pages)
    chunks = chunk_text(cleaned, size=120, overlap=20)
    check_invariants(cleaned, chunks, 120)

    def ref_page(offset: int) -> int:
        number = cleaned.page_numbers[0]
        for start, n in zip(cleaned.page_offsets, cleaned.page_numbers, strict=True):
            if start <= offset:
                number = n
        return number

    for c in chunks:
        assert (c.page_start, c.page_end) == (ref_page(c.char_start), ref_page(c.char_end - 1))
    assert chunks[0].page_start == 1 and chunks[-1].page_end == 4
    assert any(c.page_start < c.page_end for c in chunks)
    assert chunks[0].lang == "en" and any(c.lang == "zh" for c in chunks)


# --------------------------------------------------------------------------- linear by design


def _check_large(text: str) -> None:
    chunks = chunk_text(one_page(text))
    assert len(chunks) >= len(text.strip()) // DEFAULT_SIZE
    assert chunks[-1].char_end == len(text.rstrip())
    for c in chunks[:: max(1, len(chunks) // 50)]:
        assert text[c.char_start : c.char_end] == c.text and 0 < len(c.text) <= DEFAULT_SIZE


@pytest.mark.timeout(120)  # a quadratic split of 5 MB would take hours
def test_five_megabytes_of_text() -> None:
    _check_large("lorem ipsum dolor sit amet. " * (5_000_000 // 28))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "unit",
    ["x", "中文字符。", "a\n", "”", "3.14 "],
    ids=["no-breaks", "cjk", "lines", "closers", "decimals"],
)
def test_one_megabyte_of_awkward_text(unit: str) -> None:
    _check_large(unit * (1_000_000 // len(unit)))
