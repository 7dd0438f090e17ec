"""The first answer prompt of a question read while it is still being typed (``generation.read_ahead``;
docs/architecture.md, "The question's path").

On a CPU, most of what a person waits for between Enter and the first answer token is the model reading
the answer prompt: the sources, ~1,000 tokens at ~100 tok/s (docs/benchmarks.md §9). Those depend on the
question, but only through its ranking, which takes milliseconds and no model call. So at each pause in
the typing the window ranks the question as it stands, builds the prompt the first answer would read
(app.answer_prompt, the same messages) and has the generator read its fixed prefix and sources into its
cache, writing nothing (``LlamaCppGenerator.read_ahead``). After Enter the answer prompt keeps, cut for
cut, what it shares with the prompt read ahead (backends/llama_segments.py): only the question and what
differs are read then. The pieces are the ones a cleared cache reads, so the answer's numbers, and its
text for a seed, are the ones it has without this.

Choices where nothing prescribes them:
* only a generator already loaded reads ahead: a pause in typing never starts a model load;
* nothing is read ahead where the answer would read something else first: translated sources
  (``generation.translate``, a model call each) or no hit;
* what is half read is kept piece by piece: a read ahead stopped by a pause on other words, or by any other
  work, keeps the pieces it read whole, and the next prompt starts from them where the sources agree; Enter on
  the very words being read takes it over instead (ui.question_view).
"""

from __future__ import annotations

from typing import Protocol

from rag_desktop.app.answer_prompt import PromptService, answer_prompt
from rag_desktop.app.runtime import Runtime
from rag_desktop.core import prompting
from rag_desktop.core.types import CancelToken, RankedList


class Service(PromptService, Protocol):
    """What this module uses of app.service.RagService (which calls it: no import back)."""

    runtime: Runtime


def read_ahead(svc: Service, query: str, ranked: RankedList, cancel: CancelToken | None = None) -> int:
    """Read the prompt :meth:`RagService.answer` would read first for ``query`` from ``ranked`` (the first
    answer column's list) into the generator's cache. Returns its tokens now in the cache (0: nothing read
    ahead)."""
    g = svc.settings.generation
    if not (g.read_ahead and not g.translate and ranked.hits and svc.runtime.generator_loaded()):
        return 0
    gen = svc.runtime.generator()
    ahead = getattr(gen, "read_ahead", None)  # a server reads its own prompts
    if ahead is None:
        return 0
    p = answer_prompt(svc, gen, query, ranked, prompting.ANSWER_SOURCES, g.passages, cancel)
    return int(ahead(p.messages, cancel)) if p.used else 0
