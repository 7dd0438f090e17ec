"""A question asked again of the library's other language, where its own language's passages are about
something else (``generation.ask_other_language``; docs/architecture.md, "The question's path").

In a library of Chinese and English documents searched without translation (``retrieval.cross_language``
off), a question whose answer stands only in the other language reads passages of its own language that are
about something else: the question's lift says so before a word is written (core.abstain.lifted), and a
document of the other language is nearer the question than the library's average
(app.abstention.other_language_near). Instead of telling the person to ask again in that language, the app
does it: the question is translated (one short call, cached per question, the one the words check may have
made already), ranked as typed would be, and answered from the list the first answer column reads for it.

Choices where nothing prescribes them:
* the answer is to the translated question, in its language, from passages of that language: every check
  the answer path has (the words, the lift, the judgement, the citations) then reads one language, and the
  answer quotes the document's own words and figures. The person sees which question was asked
  (Answer.asked_as);
* both columns read the list the first column reads for the translation: one answer, which the second
  column is shown at once (RagService.answer keeps it);
* it crosses once: a verdict on the other language's passages is shown as it is, with no hint back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Protocol, cast

from rag_desktop.app.crosslang import CrossLanguage
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.types import Answer, CancelToken, GenEvent, Lang, Progress, RankedList


class Service(Protocol):
    """What this module uses of app.service.RagService (which calls it: no import back)."""

    def translate_question(self, query: str, lang: Lang, target: Lang, cancel: CancelToken | None) -> CrossLanguage:
        ...

    def compare(self, query: str, *, translate: bool = True) -> Any:  # app.service.Comparison
        ...

    def answer(self, query: str, ranked: RankedList, n_sources: int = ..., cancel: CancelToken | None = None, *,
               passages: bool | None = None, cross: bool = True) -> Iterator[GenEvent | Answer | Progress]:
        ...


def across_list(svc: Service, query: str, target: str, cancel: CancelToken | None = None
                ) -> tuple[str, RankedList] | None:
    """``query`` translated into ``target`` ("zh" or "en", Abstention.other_language) and the list the
    first answer column reads for it, or None when no usable translation came back (a failure, a timeout,
    a reply in the question's language)."""
    if target not in ("zh", "en"):
        return None
    cross = svc.translate_question(query, detect_lang(query), cast(Lang, target), cancel)
    if not cross.fused or not cross.translated.strip():
        return None
    comp = svc.compare(cross.translated, translate=False)
    ranked = comp.answer_list(comp.first_column)
    return (cross.translated, ranked) if ranked.hits else None


def answer_across(svc: Service, query: str, target: str, n_sources: int, cancel: CancelToken | None,
                  passages: bool | None) -> Iterator[GenEvent | Answer | Progress] | None:
    """RagService.answer's events for ``query`` asked in ``target`` (:func:`across_list`), its Answer
    carrying the question it asked (Answer.asked_as); None when it cannot be asked there."""
    across = across_list(svc, query, target, cancel)
    if across is None:
        return None
    asked, ranked = across

    def events() -> Iterator[GenEvent | Answer | Progress]:
        yield Progress("asked_across", 0, 0, asked)
        for ev in svc.answer(asked, ranked, n_sources, cancel, passages=passages, cross=False):
            yield dataclasses.replace(ev, asked_as=asked) if isinstance(ev, Answer) else ev
    return events()
