"""Question-answering metrics: strict EM, the authors' lenient containment match, token F1.

Paper 002 reports "Exact Match". The authors' public code counts a prediction as an
exact match when it merely *contains* the gold answer; that is a much more lenient
metric (a rambling answer that mentions every candidate scores 1). We therefore keep
the two apart and name them honestly:

* :func:`exact_match` — strict EM with the SQuAD v1.1 normalisation
  (lower-case, strip punctuation, drop the articles a/an/the, collapse whitespace),
  extended for Chinese (see :func:`normalize_answer`).
* :func:`containment_match` — LENIENT: 1 when a normalised gold answer occurs inside the
  normalised prediction. This is the authors' "EM"; report it only with that label.
* :func:`token_f1` — SQuAD token F1, with every CJK character counted as one token
  (Chinese has no spaces, so whitespace tokens would make F1 all-or-nothing).

All functions take one prediction and a sequence of gold answers and return the best
score over the golds, as SQuAD does.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rag_desktop.core.citations import cited_numbers

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


# Chinese numerals (issue 12: 第55条 and 第五十五条 are the same article). A run is read as a
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


def normalize_answer(text: str) -> str:
    """SQuAD normalisation, extended for Chinese.

    Steps, in SQuAD's order (lower → remove punctuation → remove articles → fix
    whitespace), preceded by NFKC so that full-width letters/digits ("１９９８", "ＡＢＣ")
    fold to ASCII and by writing Chinese numerals as Arabic digits (第五十五条 → 第55条, so
    both forms of a number compare equal), and followed by removing whitespace next to a CJK
    character ("克里斯蒂安 贝尔" == "克里斯蒂安·贝尔" once the middle dot is stripped), because
    spacing inside Chinese text carries no meaning.
    """
    s = arabic_numerals(unicodedata.normalize("NFKC", text)).lower()
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


def answer_tokens(text: str) -> list[str]:
    """Tokens of the *normalised* answer: whitespace words, each CJK character alone."""
    tokens: list[str] = []
    for word in normalize_answer(text).split():
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


def _golds(golds: str | Sequence[str]) -> list[str]:
    if isinstance(golds, str):
        return [golds]
    out = list(golds)
    if not out:
        raise ValueError("gold answers: the list is empty; each question needs at least one answer")
    return out


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """Strict EM: 1.0 when the normalised prediction equals some normalised gold answer."""
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in _golds(golds)) else 0.0


def containment_match(prediction: str, golds: str | Sequence[str]) -> float:
    """LENIENT match (the authors' code's "EM"): a normalised gold is a substring of the
    normalised prediction.

    Plain substring test, as in the usual "answer in prediction" accuracy, so "ann" is
    found inside "joanna": that leniency is the point of keeping it separate from
    :func:`exact_match`. Golds that normalise to the empty string are ignored (they
    would match anything).
    """
    pred = normalize_answer(prediction)
    for g in _golds(golds):
        ng = normalize_answer(g)
        if ng and ng in pred:
            return 1.0
    return 0.0


def _f1_tokens(pred: list[str], gold: list[str]) -> float:
    # SQuAD: if either side is empty, F1 is 1 only when both are empty.
    if not pred or not gold:
        return 1.0 if pred == gold else 0.0
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: str | Sequence[str]) -> float:
    """SQuAD token F1 (max over golds); CJK characters are single tokens."""
    pred = answer_tokens(prediction)
    return max(_f1_tokens(pred, answer_tokens(g)) for g in _golds(golds))


@dataclass(frozen=True)
class QAScores:
    """The three scores of one prediction (or their means over a set)."""

    exact_match: float
    containment: float
    f1: float
    n: int = 1


def citation_precision(answer_text: str, source_texts: Sequence[str],
                       golds: str | Sequence[str]) -> float | None:
    """The share of the answer's cited ``[n]`` that point at a source holding a gold answer.

    A cited number counts as correct when source n exists and some normalised gold answer is
    contained in its normalised text; a citation to a source that was never given counts as
    wrong. None when the answer cites nothing (precision is undefined; reported apart).
    Citations are read with the one grammar of :mod:`rag_desktop.core.citations`.
    """
    cited = cited_numbers(answer_text)
    if not cited:
        return None
    norm_golds = [g for g in (normalize_answer(x) for x in _golds(golds)) if g]
    good = 0
    for n in cited:
        if 1 <= n <= len(source_texts):
            src = normalize_answer(source_texts[n - 1])
            good += any(g in src for g in norm_golds)
    return good / len(cited)


def score_answer(prediction: str, golds: str | Sequence[str]) -> QAScores:
    return QAScores(
        exact_match=exact_match(prediction, golds),
        containment=containment_match(prediction, golds),
        f1=token_f1(prediction, golds),
    )


def mean_scores(scores: Iterable[QAScores]) -> QAScores:
    """Mean of per-question scores, weighted by their ``n`` (so means of means work)."""
    items = list(scores)
    total = sum(s.n for s in items)
    if total == 0:
        return QAScores(0.0, 0.0, 0.0, n=0)
    return QAScores(
        exact_match=sum(s.exact_match * s.n for s in items) / total,
        containment=sum(s.containment * s.n for s in items) / total,
        f1=sum(s.f1 * s.n for s in items) / total,
        n=total,
    )
