"""detect_lang: "zh" / "en" / "other" by weighted script counts (rule in rag_desktop/core/lang.py)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_desktop.core.lang import ALPHABETIC_WEIGHT, detect_lang, script_counts


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("数据出境安全评估办法规定了评估的范围和程序。", "zh"),
        ("The regulation defines the scope and procedure of the assessment.", "en"),
        ("我们使用BGE-M3模型进行embedding计算，并用FAISS建立索引。", "zh"),  # terms do not flip it
        ("The term 数据出境 means cross-border data transfer in Chinese law.", "en"),
        ("データの越境移転に関する規則について説明します。", "other"),  # kana outnumber kanji
        ("개인정보 보호법은 데이터 이전을 규정합니다.", "other"),
        ("Закон о защите персональных данных.", "other"),
        ("Ο νόμος για την προστασία δεδομένων.", "other"),
        ("Le règlement définit la procédure d'évaluation.", "en"),  # Latin script counts as "en"
        ("12345 67.89 %%% ---", "other"),
        ("", "other"),
        ("   \n\t", "other"),
    ],
)
def test_examples(text: str, lang: str) -> None:
    assert detect_lang(text) == lang


def test_the_weighting_rule_at_its_boundary() -> None:
    # One Han character weighs as much as three Latin letters; ties go to "zh".
    assert detect_lang("中abc") == "zh"
    assert detect_lang("中abcd") == "en"
    assert detect_lang("中中abcdef") == "zh"
    assert detect_lang("中" * 7 + "a" * 21) == "zh" and detect_lang("中" * 7 + "a" * 22) == "en"
    assert detect_lang("abc Жжж") == "en"  # equal alphabetic scores: "en" before "other"
    assert detect_lang("中あ") == "zh" and detect_lang("中あい") == "other"
    assert pytest.approx(1 / 3) == ALPHABETIC_WEIGHT


# --------------------------------------------------------------------------- reference


def ref_counts(text: str) -> dict[str, int]:
    """Slow reference: classify each character by its Unicode name."""
    counts = {"han": 0, "latin": 0, "kana_hangul": 0, "other_alpha": 0}
    for ch in text:
        if not ch.isalpha():
            continue
        name = unicodedata.name(ch, "")
        if name.startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH")):
            counts["han"] += 1
        elif name.startswith("LATIN "):
            counts["latin"] += 1
        elif name.startswith(("HIRAGANA", "KATAKANA", "HANGUL")):
            counts["kana_hangul"] += 1
        else:
            counts["other_alpha"] += 1
    return counts


def ref_detect(text: str) -> str:
    c = ref_counts(text)
    scores = {"zh": c["han"], "en": c["latin"] / 3, "other": c["kana_hangul"] + c["other_alpha"] / 3}
    if max(scores.values()) == 0:
        return "other"
    return max(("zh", "en", "other"), key=lambda k: (scores[k], -("zh", "en", "other").index(k)))


_ALPHABET = (
    "abcXYZ éßÿĀžƒǅ ḁỹ 019 .,;!?-_ \n"  # ASCII, Latin-1, Latin Extended-A/B/Additional, digits
    "中文字龘㐀豈 。，「」（）　"  # Han (incl. Extension A, compatibility), CJK punctuation
    "あいゔゝゞアヴヷーヽ・゛ 가힣ㄱᄀ"  # kana (with marks that are not letters), Hangul
    "Жжαβ ابت अआ ①²"  # Cyrillic, Greek, Arabic, Devanagari, numbers that are not digits
    "Ａｂ"  # full-width Latin letters: not "LATIN ..." by name, counted as other letters
)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=60))
def test_agrees_with_the_reference(text: str) -> None:
    assert script_counts(text) == ref_counts(text)
    assert detect_lang(text) == ref_detect(text)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="abcXYZ 019.,\n!-", max_size=80))
def test_ascii_fast_path_agrees(text: str) -> None:
    assert script_counts(text) == ref_counts(text)
    # The general path (forced by one non-ASCII non-letter) gives the same counts.
    assert script_counts(text + "。")["latin"] == script_counts(text)["latin"]
