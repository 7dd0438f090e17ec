"""The text toolbox: one definition of each script class, of answer tokens and of question words.

Before, "CJK" had three definitions (qa_metrics, ocr_text, cfrag) and Han a fourth and fifth
(the UI's highlighter, the jieba backend), so a character could be Chinese to one stage and
not to the next. Every stage now asks here; the citation grammar is its sibling,
core/citations.py.

Script classes, each answering one question on purpose:

* :func:`is_han` — a Han ideograph (``HAN_CLASS``): what jieba segments into words, and
  what the language detector counts as Chinese.
* :func:`is_cjk` — Han, kana or a Hangul syllable: one answer token per character.
* :func:`joins_without_space` — scripts written without spaces between words (Han, kana,
  bopomofo, CJK punctuation, full-width forms; not Hangul): joining two lines, or two OCR
  boxes, of such text inserts no space.
"""

from __future__ import annotations

import re
import string
import unicodedata

# Han ideographs: Unified, Extension A, Compatibility (assigned points), Extensions B–H.
HAN_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufa6d\ufa70-\ufad9\U00020000-\U0003134f"
HAN_RUN = re.compile(f"[{HAN_CLASS}]+")

# --------------------------------------------------------------------------- characters
# Two questions about one character, asked by different stages, kept here side by side
# because they differ on purpose (kana, punctuation, full-width forms).


def is_han(ch: str) -> bool:
    """A Han ideograph (``HAN_CLASS``): what jieba segments into words."""
    return HAN_RUN.fullmatch(ch) is not None


def han_runs(text: str) -> list[str]:
    """Maximal runs of Han characters in ``text``, in order."""
    return HAN_RUN.findall(text)


# The same characters as joins_without_space, as a regex class (tests/test_text.py checks that
# the two agree on every code point); the function is the fast path of cleaning's inner loop.
NO_SPACE_CLASS = ("\u3000-\u30ff\u3100-\u312f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                  "\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f")


def joins_without_space(ch: str) -> bool:
    """True for Han ideographs, kana, bopomofo, CJK punctuation and full-width forms: text
    in which a line break is not a word break, so joining lines must not insert a space.

    Hangul is not included: Korean separates words with spaces, like Latin text.
    """
    if ch < "\u3000":  # Latin, Greek, Cyrillic, ... (the common case) in one comparison
        return False
    o = ord(ch)
    return (
        0x4E00 <= o <= 0x9FFF
        or 0x3400 <= o <= 0x4DBF
        or 0x3000 <= o <= 0x30FF  # CJK symbols and punctuation, hiragana, katakana
        or 0x3100 <= o <= 0x312F  # bopomofo
        or 0x31F0 <= o <= 0x31FF
        or 0xF900 <= o <= 0xFAFF
        or 0xFE30 <= o <= 0xFE4F
        or 0xFF00 <= o <= 0xFFEF  # full-width forms: ，。！？（）
        or 0x20000 <= o <= 0x3134F
    )


# Chinese numerals as section and article numbers use them.
CN_NUMERALS = "零〇一二三四五六七八九十百千两"
# What opens a heading, an article or a numbered item, at the start of a line or paragraph: the
# answer passages' headings (core.passages) and the lines a PDF line may not wrap into (core.cleaning).
HEADING_START = re.compile(
    rf"^(?:§\s*\d+(?:\.\d+)*"  # §7.3
    rf"|\d+(?:\.\d+)+\.?(?=\s|[^\d.])|\d+\.?\s"  # 7.3 / 4.3第三步 / 2. Intro / 6 结果的有效期
    rf"|第[{CN_NUMERALS}\d]+[章节条款编篇部分]"  # 第四节 / 第八条
    rf"|[{CN_NUMERALS}]+[、.．]"  # 二、
    rf"|[（(][{CN_NUMERALS}\d]+[）)]"  # （三）
    rf"|附录\s*[A-Za-z\d{CN_NUMERALS}]*"  # 附录A
    rf"|(?:chapter|section|appendix|part|article)\s+[\dA-Za-z.]+)",
    re.IGNORECASE,
)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any :func:`is_cjk` character."""
    return any(is_cjk(ch) for ch in text)


# --------------------------------------------------------------------------- question words

# The Chinese words that make a text ask something: a text holding one is a question even
# without its question mark (a document title that asks, a model's rewrite). One list for the
# whole package; core/replies.py reads it.
ZH_QUESTION_WORDS = ("如何", "怎么", "怎样", "为什么", "为何", "什么", "哪", "是否", "吗", "多少", "何时")
# Characters that ask as well but also stand where nothing is asked: 谁 inside a name, 几 in 几个
# ("a few"), 何 in 任何 ("any"); 怎 alone also covers 怎能, 怎会. Counted only where a text is meant
# as a question (a model's reply to "write the question"), never in a document's title.
ZH_QUESTION_CHARS_LOOSE = ("谁", "几", "何", "怎")
# The English words that open a question (wh-words, then auxiliaries and modals), and the prepositions that
# may come before a wh-word ("In which year …"). One list for the package, like the Chinese one.
EN_QUESTION_OPENERS = ("who", "whom", "whose", "what", "when", "where", "which", "why", "how", "is", "are", "was",
                       "were", "do", "does", "did", "can", "could", "should", "will", "would")
EN_BEFORE_QUESTION_WORD = ("in", "of", "at", "for", "from", "by", "on", "to")


def opens_english_question(text: str) -> bool:
    """Whether ``text`` opens like an English question: with a question word, or a preposition then one."""
    words = re.findall(r"[a-z]+", text[:60].lower())
    return bool(words) and (words[0] in EN_QUESTION_OPENERS or (
        len(words) > 1 and words[0] in EN_BEFORE_QUESTION_WORD and words[1] in EN_QUESTION_OPENERS))


# --------------------------------------------------------------------------- answer tokens

# SQuAD v1.1 removes string.punctuation; we additionally remove every Unicode
# punctuation character (category P*): CJK punctuation (，。！？、；：「」『』《》（）…),
# full-width forms and typographic quotes/dashes. For plain-ASCII English this is
# exactly SQuAD's behaviour.
_ASCII_PUNCT = frozenset(string.punctuation)

_ARTICLES = re.compile(r"\b(a|an|the)\b")


def is_cjk(ch: str) -> bool:
    """True for a CJK ideograph, kana or hangul syllable (one token per character)."""
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK Unified Ideographs
        or 0x3400 <= cp <= 0x4DBF  # Extension A
        or 0x20000 <= cp <= 0x2A6DF  # Extension B
        or 0x2A700 <= cp <= 0x2EBEF  # Extensions C-F
        or 0xF900 <= cp <= 0xFAFF  # Compatibility Ideographs
        or 0x3040 <= cp <= 0x30FF  # Hiragana + Katakana
        or 0xAC00 <= cp <= 0xD7AF  # Hangul syllables
    )


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


# Chinese numerals (第55条 and 第五十五条 are the same article). A run is read as a
# number when it holds a digit character (一…九, 〇/零, 两) or 十; 百/千/万 alone ("百分之")
# are left as they are.
_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_RUN = re.compile(r"[零〇一二两三四五六七八九十百千万]+")


def chinese_number(run: str) -> int | None:
    """The value of a Chinese numeral ("五十五" → 55, "十" → 10, "二〇二五" → 2025, "一万二千" → 12000);
    None when the run is not a well-formed number."""
    if not run or not any(ch in _CN_DIGITS or ch == "十" for ch in run):
        return None
    if all(ch in _CN_DIGITS for ch in run) and len(run) > 1:  # digit by digit: 二〇二五
        return int("".join(str(_CN_DIGITS[ch]) for ch in run))
    total, section, digit = 0, 0, None
    for ch in run:
        if ch in ("零", "〇"):  # a placeholder inside a number (一百零五)
            continue
        if ch in _CN_DIGITS:
            if digit is not None and _CN_DIGITS[ch] != 0:
                return None  # two digits without a unit between them: not one number
            digit = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            section += (1 if digit is None else digit) * _CN_UNITS[ch]
            digit = None
        else:  # 万
            total += (section + (digit or 0)) * 10_000
            section, digit = 0, None
    return total + section + (digit or 0)


def arabic_numerals(text: str) -> str:
    """Chinese numerals replaced by Arabic digits; a run that is no well-formed number stays."""
    def sub(m: re.Match[str]) -> str:
        v = chinese_number(m.group(0))
        return m.group(0) if v is None else str(v)

    return _CN_RUN.sub(sub, text)


# English number words up to ninety-nine ("ten sentences" and "10 sentences" are the same answer), as
# the Chinese numerals above; "one" is read as 1 wherever it stands, as 一 is ("no one" → "no 1"), in the
# gold and the answer alike.
_EN_UNITS = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"))}
_EN_TENS = {w: 10 * i for i, w in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty",
                                             "ninety"), 2)}
_EN_NUMBER = re.compile(
    rf"\b(?:({'|'.join(_EN_TENS)})(?:[- ]({'|'.join(w for w in _EN_UNITS if _EN_UNITS[w] in range(1, 10))}))?"
    rf"|({'|'.join(_EN_UNITS)}))\b")


def english_numerals(text: str) -> str:
    """English number words of lower-case ``text`` written as Arabic digits ("twenty-one" → "21")."""
    def sub(m: re.Match[str]) -> str:
        if m.group(3):
            return str(_EN_UNITS[m.group(3)])
        return str(_EN_TENS[m.group(1)] + (_EN_UNITS[m.group(2)] if m.group(2) else 0))

    return _EN_NUMBER.sub(sub, text)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation, extended for Chinese.

    Steps, in SQuAD's order (lower → remove punctuation → remove articles → fix
    whitespace), preceded by NFKC so that full-width letters/digits ("１９９８", "ＡＢＣ")
    fold to ASCII and by writing Chinese numerals and English number words as Arabic digits
    (第五十五条 → 第55条, "ten" → "10", so both forms of a number compare equal), and followed by
    removing whitespace next to a CJK character ("克里斯蒂安 贝尔" == "克里斯蒂安·贝尔" once the
    middle dot is stripped), because spacing inside Chinese text carries no meaning.
    """
    s = english_numerals(arabic_numerals(unicodedata.normalize("NFKC", text)).lower())
    s = "".join(ch for ch in s if not _is_punct(ch))  # SQuAD deletes punctuation (no space)
    s = _ARTICLES.sub(" ", s)
    s = " ".join(s.split())
    # Drop spaces adjacent to CJK characters.
    out: list[str] = []
    for i, ch in enumerate(s):
        if ch == " ":
            prev = s[i - 1] if i > 0 else ""
            nxt = s[i + 1] if i + 1 < len(s) else ""
            if (prev and is_cjk(prev)) or (nxt and is_cjk(nxt)):
                continue
        out.append(ch)
    return "".join(out)


def split_cjk(word: str) -> list[str]:
    """``word`` with each CJK character on its own and the runs between them kept whole
    ("第55条" → ["第", "55", "条"]): Chinese has no spaces, so a character is a token."""
    if not has_cjk(word):
        return [word]
    tokens: list[str] = []
    buf = ""
    for ch in word:
        if is_cjk(ch):
            if buf:
                tokens.append(buf)
                buf = ""
            tokens.append(ch)
        else:
            buf += ch
    if buf:
        tokens.append(buf)
    return tokens


def answer_tokens(text: str) -> list[str]:
    """Tokens of the *normalised* answer: whitespace words, each CJK character alone."""
    return [t for word in normalize_answer(text).split() for t in split_cjk(word)]
