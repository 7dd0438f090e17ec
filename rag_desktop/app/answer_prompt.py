"""The prompt an answer reads: the top hits of a column, as answer passages or whole chunks, in the
answer template (core.prompting). One place builds it, for the answer itself (app.service.RagService.answer)
and for the prompt read ahead while the question is typed (app.read_ahead), so the two are the same
messages and the second keeps what the first read (backends/llama_segments.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rag_desktop.app.passages import PassageFinder, PassageSet
from rag_desktop.core import prompting
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, ChatMessage, Hit, Lang, Locator, RankedList


class PromptService(Protocol):
    """What the prompt uses of app.service.RagService (which imports this module: no import back)."""

    settings: Settings

    def passage_finder(self) -> PassageFinder: ...

    def translate_sources(self, sources: Sequence[Hit], target: Lang, cancel: CancelToken | None = None, *,
                          whole_chunks: bool = True) -> tuple[Hit, ...]: ...


@dataclass(frozen=True)
class AnswerPrompt:
    """An answer's prompt: its messages, the sources as placed, how they were found."""

    lang: Lang
    hits: tuple[Hit, ...]
    locators: tuple[Locator, ...] | None
    found: PassageSet | None  # the answer passages' search (None: whole chunks)
    messages: tuple[ChatMessage, ...]
    used: tuple[Hit, ...]

    def tokens(self, gen: Any) -> int:
        """The prompt's tokens as ``gen`` counts them (the Progress "reading" event)."""
        return sum(gen.count_tokens(m.content) for m in self.messages)


def answer_prompt(svc: PromptService, gen: Any, query: str, ranked: RankedList, n_sources: int, use_passages: bool,
                  cancel: CancelToken | None) -> AnswerPrompt:
    """The messages :meth:`RagService.answer` sends for ``query`` and the sources as placed in them."""
    g = svc.settings.generation
    lang = detect_lang(query)
    hits: Sequence[Hit] = prompting.answer_hits(ranked.hits, n_sources)
    locators: tuple[Locator, ...] | None = None
    found = None
    if use_passages and hits:
        found = svc.passage_finder().find(query, hits)
        if found.hits:
            hits, locators = found.hits, found.locators
    sources = svc.translate_sources(hits, lang, cancel, whole_chunks=locators is None)
    msgs, used = prompting.build_answer_messages(
        query, sources, lang, gen.count_tokens, gen.n_ctx, g.answer_reserve, locators
    )
    return AnswerPrompt(lang, tuple(hits), locators, found, msgs, used)
