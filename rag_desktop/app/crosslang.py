"""Questions across languages: translate the question, not the library.

A library that mixes Chinese and English documents is searched with the question as typed and
with its translation into the other language; every column fuses the two rankings
(core.fusion, reciprocal rank fusion). This module decides whether a translation is needed and
produces it with the local generator: short, greedy, under a time limit. Answer passages in
the other language are still translated one by one when answering (RagService.translate_sources).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rag_desktop.core import prompting
from rag_desktop.core.generation import generate_line
from rag_desktop.core.protocols import Generator
from rag_desktop.core.replies import clean_translation
from rag_desktop.core.text import arabic_numerals
from rag_desktop.core.types import Cancelled, CancelToken, Lang

log = logging.getLogger(__name__)

QUESTION_MAX_TOKENS = 96  # a question is a line; a reply that long is rambling, not a translation


class CrossStatus(StrEnum):
    """What became of the question's other-language search (the UI and the CLI word it)."""

    FUSED = "fused"  # translated; every column fuses both rankings
    OFF = "off"  # retrieval.cross_language is off
    SINGLE = "single_language"  # the library holds no document in the question's other language
    OTHER = "other_language"  # the question is neither Chinese nor English
    NO_GENERATOR = "no_generator"  # no local model ready to translate: ranked as typed
    FAILED = "failed"  # the model failed or replied with nothing usable: ranked as typed
    TIMEOUT = "timeout"  # slower than retrieval.cross_language_timeout_s: ranked as typed


FALLBACKS = (CrossStatus.NO_GENERATOR, CrossStatus.FAILED, CrossStatus.TIMEOUT)


@dataclass(frozen=True)
class CrossLanguage:
    """The question's other-language search. ``fused``: the columns merge two rankings;
    ``translated_found``: per column, the unit ids that the translated question ranked best
    (the others were found best by the question as typed)."""

    status: CrossStatus
    source_lang: str
    target_lang: str = ""
    translated: str = ""
    seconds: float = 0.0
    timeout_s: float = 0.0
    note: str = ""
    fused: bool = False
    translated_found: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def fallback(self) -> bool:
        """True when a translation was wanted and the question was ranked as typed instead."""
        return self.status in FALLBACKS

    def describe(self) -> str:
        """One English line for the CLI (the UI words ``status`` in its own language)."""
        if self.status == CrossStatus.FUSED:
            return f"also searched as: {self.translated} (translated in {self.seconds:.1f} s; rankings fused by RRF)"
        if self.status == CrossStatus.TIMEOUT:
            return f"ranked as typed only: translating the question took over {self.timeout_s:g} s"
        if self.status == CrossStatus.NO_GENERATOR:
            return "ranked as typed only: no local model is ready to translate the question"
        if self.status == CrossStatus.FAILED:
            return "ranked as typed only: translating the question failed" + (f" ({self.note})" if self.note else "")
        return ""


def other_language(lang: Lang | str) -> Lang | None:
    return {"zh": "en", "en": "zh"}.get(lang)  # type: ignore[return-value]


def needs_translation(question_lang: str, counts: Mapping[str, int]) -> Lang | None:
    """The language to translate the question into, or None: only zh ↔ en, and only when the
    library holds at least one document in the other language."""
    target = other_language(question_lang)
    return target if target is not None and counts.get(target, 0) > 0 else None


# A lone 一 is a word, not a figure: the article ("一个段落" = "a passage"), 一般, 一些, 统一 (the 1.5B's
# "…一般需要多少个工作日…" was refused as adding the number 1); as part of a numeral (十一, 一百) or
# after 第 (第一条 = Article 1) it is a number and stays.
_ZH_ARTICLE = re.compile(r"(?<![第零〇一二两三四五六七八九十百千万])一(?![零〇一二两三四五六七八九十百千万])")


def invented_numbers(question: str, translation: str) -> list[str]:
    """Numbers in ``translation`` that ``question`` does not hold (Chinese numerals read as digits:
    第五十条 and "Article 50" agree; a lone 一, as in 一个 or 一般, is no number)."""
    have = set(re.findall(r"\d+(?:\.\d+)?", arabic_numerals(_ZH_ARTICLE.sub("", question))))
    new = arabic_numerals(_ZH_ARTICLE.sub("", translation))
    return [n for n in re.findall(r"\d+(?:\.\d+)?", new) if n not in have]


_ASKS = ("?", "？")
_TELLS = (".", "。", "!", "！")


def answered_instead(question: str, translation: str) -> bool:
    """True when a question came back as a statement: the model answered it instead of translating
    it. Seen with the 1.5B on the demo: "What did the Wason selection task show?" →
    "Wason selection task展示了选择任务的复杂性。", whose words then rank the Chinese documents
    of a different topic into the columns ("found by the translated question"). Only a question
    that ends in a question mark is checked, and only a reply that ends as a statement fails:
    a translation without final punctuation ("X是什么") is kept."""
    return question.rstrip().endswith(_ASKS) and translation.rstrip().endswith(_TELLS)


def translate_question(
    generator: Callable[[], Generator],
    question: str,
    source: Lang,
    target: Lang,
    timeout_s: float,
    seed: int = 0,
    cancel: CancelToken | None = None,
) -> CrossLanguage:
    """The question in ``target`` by the local model (greedy, at most a line), or a fallback.

    ``generator`` is called inside the time limit (loading the model counts against it only
    once: the runtime keeps it). A user's cancel raises Cancelled; a model error, an unusable
    reply or the deadline give a FAILED / TIMEOUT result and the question is ranked as typed.
    """
    t0 = time.perf_counter()
    try:
        msgs = prompting.build_question_translation_messages(question, source, target)
        line = generate_line(generator(), msgs, max_tokens=QUESTION_MAX_TOKENS, seed=seed, timeout_s=timeout_s,
                             cancel=cancel)
    except Exception as exc:  # no model, a server error: the question as typed still works
        if isinstance(exc, Cancelled) and cancel is not None and cancel.is_set:
            raise  # the user's cancel
        log.warning("question translation failed: %s", exc)
        return CrossLanguage(CrossStatus.FAILED, source, target, "", time.perf_counter() - t0, timeout_s, str(exc))
    took = line.seconds
    if line.timed_out:
        return CrossLanguage(CrossStatus.TIMEOUT, source, target, "", took, timeout_s)
    text = clean_translation(line.text, source, target, question)
    if not text:
        return CrossLanguage(CrossStatus.FAILED, source, target, "", took, timeout_s,
                             "the reply was not a translation")
    if answered_instead(question, text):
        return CrossLanguage(CrossStatus.FAILED, source, target, "", took, timeout_s,
                             "the reply answered the question instead of translating it")
    invented = invented_numbers(question, text)
    if invented:
        # Seen with the 0.5B model: "出差住宿费的报销标准是多少？" → "… fees is 1000 yuan." A figure
        # the question does not hold would search for (and show the user) an answer made up.
        return CrossLanguage(CrossStatus.FAILED, source, target, "", took, timeout_s,
                             f"the translation added a number the question does not have ({invented[0]})")
    return CrossLanguage(CrossStatus.FUSED, source, target, text, took, timeout_s, fused=True)
