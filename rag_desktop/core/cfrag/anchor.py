"""The standard answer beside CF-RAG, and whether CF-RAG must answer again (docs/architecture.md, "CF-RAG").

A person sees the standard RAG answer and CF-RAG's side by side. Paper 002 compares the two on
benchmarks; in the app CF-RAG is *asked after* the standard answer, so it starts from it: the
standard answer is candidate 0, and CF-RAG's own paths (step 1 to §4's decision) run only where
that candidate is not confident. Measured on the fixture (docs/evaluation.md §2), the full method
lost to the standard answer on clean passages (containment 0.556–0.667 against 0.750) and won under
injected distractors (0.639 against 0.333), at 3–10× its time: the rule below keeps the first and
the second, and pays the paths only where the standard answer looks like the second case.

Confidence is φ_coh's presence term (paper 002 §4, "whether the answer appears explicitly in the
documents"), measured on what the answer *adds* to the question — so that a sentence-long
standard answer and a few-word hypothesis are measured alike (the raw term favours short answers:
a phrase is a substring of its passage far more often than a sentence is), and a reply that only
repeats the question's words is not support. An answer that says the sources do not hold the
answer is not confident whatever its words: it answers nothing CF-RAG could lose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_desktop.core.cfrag.counterfactuals import FORM_CHARS, content_tokens
from rag_desktop.core.cfrag.tuning import DEFAULT_TUNING
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.text import HAN_CLASS, HAN_RUN, arabic_numerals

# "The sources do not say …", "no information about …", "资料中没有提到 …": the answer prompt asks
# the model to say so plainly when the sources lack the answer (prompts/answer_*.txt). One adverb may
# stand between the negation and the verb ("do not explicitly mention", "没有直接提到": the 1.5B's
# words for a question about another subject); "not only provided …" is no refusal.
_NOT_FOUND = re.compile(
    r"\b(?:do|does|did)\s+not\s+(?:(?!only\b)\w+ly\s+)?(?:say|state|mention|specify|contain|provide|include|give|indicate)\b"
    r"|\b(?:doesn't|don't|didn't)\s+(?:(?!only\b)\w+ly\s+)?(?:say|state|mention|specify|contain|provide|include|give)\b"
    r"|\bnot\s+(?:(?!only\b)\w+ly\s+)?(?:mentioned|stated|specified|provided|given|found|available|contained)\b"
    r"|\bno\s+(?:information|mention|answer|details?|data)\b"
    r"|\b(?:cannot|can't|unable\s+to)\s+(?:be\s+)?(?:determine|determined|answer|find|found|tell)\b"
    r"|(?:没有|未|并未|并没有|不)(?:直接|明确|具体|详细|专门)?(?:提到|提及|说明|给出|包含|涉及|记载|规定|明确)"
    r"|(?:没有|无)(?:相关|答案|此|该)(?:信息|内容|答案|说明)?"
    r"|无法(?:确定|回答|得知|判断|找到)",
    re.IGNORECASE,
)


def says_not_found(answer: str) -> bool:
    """True when the answer says the sources do not hold the answer (en and zh phrasings)."""
    return bool(_NOT_FOUND.search(answer))


# Where an answer says it read something — a 《title》, a bracketed locator "(Staff handbook, §3.2)",
# "第 4 页" / "第十二条" — is no claim about the question: the answer prompt asks for it
# (prompts/answer_*.txt, "say where the answer stands"), and a title the answer names is in the
# source's header whether the rest is read from the page or invented beside it.
_WHERE = re.compile(r"《[^》]*》|\([^()]*\)|（[^（）]*）|第\s*\d+\s*[页条章节款项]")
_HAN = re.compile(f"[{HAN_CLASS}]")


def _clean(text: str) -> str:
    """Citation markers out, numerals as digits ("二年" holds "2年"), lower case."""
    return arabic_numerals(re.sub(r"\[\d+\]", " ", text)).lower()


def _units(text: str) -> set[str]:
    """Words and numbers (lower-cased; question-shaping words out), and Han text in overlapping
    character pairs — a one-character run as itself — leaving out pairs of question-shaping characters.

    Pairs, not single characters: a long Chinese passage holds most single characters of any
    sentence, invented or not, so a character-level measure holds invented answers too
    (docs/evaluation.md §5.3).
    """
    text = _clean(text)
    units = {t for t in content_tokens(text) if not HAN_RUN.fullmatch(t)}
    for run in HAN_RUN.findall(text):
        if len(run) == 1:
            units.update(content_tokens(run))
        units.update(p for p in (run[i:i + 2] for i in range(len(run) - 1)) if not set(p) <= FORM_CHARS)
    return units


def _held_units(text: str) -> set[str]:
    """What ``text`` can hold of a claim: its units and its single Han characters (so a claim's
    one-character run — "卌", "年" beside a number — is held wherever the character stands)."""
    return _units(text) | set(_HAN.findall(_clean(text)))


def _claim(answer: str, query: str) -> set[str]:
    """What ``answer`` adds to ``query``: its units without the question's, without the places it
    names (``_WHERE``), and without pairs made of the question's own characters (and question-shaping
    ones): "评估结果有效期" against "评估结果的有效期…" adds no "果有"."""
    asked = _units(query)
    q_chars = set(_HAN.findall(_clean(query))) | FORM_CHARS
    return {u for u in _units(_WHERE.sub(" ", arabic_numerals(answer)))
            if u not in asked and not (HAN_RUN.fullmatch(u) and set(u) <= q_chars)}


def claim_presence(answer: str, query: str, texts: Sequence[str]) -> float:
    """Share of what ``answer`` adds to ``query`` that one passage of ``texts`` holds, in [0, 1].

    claim(a) = units of a (words and numbers; Han character pairs) not in q, citation markers and
    named places removed (``_claim``); presence = max_e |claim(a) ∩ held(e)| / |claim(a)|, where a
    passage e is read as the model read it, header included (core.prompting.sources_as_read). An
    answer that adds nothing to the question scores 0: it states nothing the passages could hold.
    """
    claim = _claim(answer, query)
    if not claim:
        return 0.0
    return max((len(claim & _held_units(t)) / len(claim) for t in texts), default=0.0)


def unsupported(answer: str, query: str, texts: Sequence[str],
                presence_min: float = DEFAULT_TUNING.presence_min) -> bool:
    """True when no passage of ``texts`` holds ``presence_min`` (CF-RAG's own, "most of it") of what
    ``answer`` adds to ``query``: the check CF-RAG makes of the standard answer, made of every answer
    so the window can say so. An answer that adds nothing to the question (one of
    the options it names: "白鹭湖还是青梅湖？" → "白鹭湖"), one saying the sources lack the answer,
    and an empty one are not flagged: they claim nothing a passage could hold. Measured as a warning
    in docs/evaluation.md ("Not in your documents")."""
    if not answer.strip() or says_not_found(answer) or not _claim(answer, query):
        return False
    # The measure is lexical: an answer in one language shares few tokens with a passage in the other
    # however faithful, so it is measured only against passages in its own language, and with none,
    # not at all (the same reason core.passages.termless_chunks leaves other-language chunks alone).
    lang = detect_lang(answer)
    same = [t for t in texts if detect_lang(t) == lang]
    if not same:
        return False
    return claim_presence(answer, query, same) < presence_min


def answers_agree(candidate: str, standard: str, query: str) -> bool:
    """True when the candidate's added content is mostly (≥ ½) in the standard answer: the two
    say the same thing, and the standard answer, which cites, is kept."""
    return claim_presence(candidate, query, [standard]) >= 0.5
