"""Core.text: one definition of each script class, asked by every stage."""

from __future__ import annotations

import pytest

from rag_desktop.core import text
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.ocr_text import join_words
from rag_desktop.ui.present import highlight_spans

EXT_B = "\U00020000"  # 𠀀, a Han ideograph outside the Basic plane


@pytest.mark.parametrize(("ch", "han", "cjk", "joins"), [
    ("中", True, True, True),
    (EXT_B, True, True, True),
    ("か", False, True, True),     # kana: one answer token, written without spaces
    ("한", False, True, False),    # Hangul: one answer token, but Korean puts spaces between words
    ("，", False, False, True),    # full-width punctuation
    ("a", False, False, False),
])
def test_each_question_about_a_character_has_one_answer(ch: str, han: bool, cjk: bool, joins: bool) -> None:
    assert text.is_han(ch) is han
    assert text.is_cjk(ch) is cjk
    assert text.joins_without_space(ch) is joins


def test_ocr_keeps_the_space_between_korean_words() -> None:
    # ocr_text had its own "CJK" that held Hangul, and glued Korean words together.
    assert join_words(["안녕하세요", "세계"]) == "안녕하세요 세계"
    assert join_words(["你好", "世界"]) == "你好世界"


def test_the_highlighter_treats_every_han_character_as_han() -> None:
    # ui/present had a Han class that stopped at U+9FFF: a term with an Extension B character
    # was matched as a Latin word, at word boundaries, and was not found inside Chinese text.
    term = EXT_B + "\U00020001"
    flat = f"我们讨论{term}的写法"
    spans = highlight_spans(flat, [(term, "A")])
    assert [(flat[s:e], k) for s, e, k in spans] == [(term, "A")]
    assert detect_lang(flat) == "zh"


def test_answer_tokens_split_cjk_by_character_and_latin_by_word() -> None:
    # normalised first: article dropped, 五十五 → 55, and no space kept beside a CJK character
    assert text.answer_tokens("The 第五十五条 Rule!") == ["第", "55", "条", "rule"]


def test_the_no_space_class_and_its_fast_function_agree_on_every_code_point() -> None:
    """The regex class (OCR scoring) and the function (cleaning's inner loop) are two spellings
    of one definition; the slow, obvious check over all of Unicode keeps them one."""
    import re

    pattern = re.compile(f"[{text.NO_SPACE_CLASS}]")
    disagree = [cp for cp in range(0x110000)
                if not 0xD800 <= cp <= 0xDFFF
                and (pattern.fullmatch(chr(cp)) is not None) != text.joins_without_space(chr(cp))]
    assert disagree == []


def test_one_list_says_when_english_opens_a_question() -> None:
    from rag_desktop.core.text import opens_english_question

    for asks in ("How does it work", "In which year was it founded", "Can a part-time employee claim it",
                 "what is RAG", "Why, then, did it fail"):
        assert opens_english_question(asks), asks
    for states in ("The Wason selection task", "Instructions for Form 1040NR", "Inside the reasoning lab", ""):
        assert not opens_english_question(states), states
