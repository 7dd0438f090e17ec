"""Which of its sources an answer needs: each cited source left out in turn, the question answered
again, the two answers compared (core.needs). On request only: one answer's worth of model time per
cited source."""

from __future__ import annotations

import time
from collections.abc import Iterator

from rag_desktop.core import prompting
from rag_desktop.core.generation import collect_text
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.needs import SourceNeed, need_of
from rag_desktop.core.protocols import Generator
from rag_desktop.core.settings import GenerationSettings
from rag_desktop.core.types import Answer, CancelToken, Progress


def source_needs(gen: Generator, g: GenerationSettings, query: str, answer: Answer,
                 cancel: CancelToken | None = None) -> Iterator[Progress | tuple[SourceNeed, ...]]:
    """A Progress per cited source ("needs": k of n, its title), then one SourceNeed per cited source.

    The prompt is the answer's own (``RagService.answer``: the same sources as read, in the same order,
    with their locators, the same seed and temperature) with one source taken out; the answer's other
    markers are renumbered by the prompt, which is what the comparison ignores (citations stripped).
    """
    cited = sorted({c.n for c in answer.citations if c.valid and 0 < c.n <= len(answer.sources)})
    lang = detect_lang(query)
    out: list[SourceNeed] = []
    for k, n in enumerate(cited, start=1):
        if cancel is not None:
            cancel.raise_if_set()
        hit = answer.sources[n - 1]
        yield Progress("needs", k - 1, len(cited), hit.title)
        keep = [i for i in range(len(answer.sources)) if i != n - 1]
        locs = [answer.locators[i] for i in keep] if answer.locators else None
        msgs, _used = prompting.build_answer_messages(query, [answer.sources[i] for i in keep], lang,
                                                      gen.count_tokens, gen.n_ctx, g.answer_reserve, locs)
        t0 = time.perf_counter()
        text = collect_text(gen.stream(msgs, max_tokens=g.max_tokens, temperature=g.temperature, seed=g.seed,
                                       cancel=cancel))
        out.append(need_of(n, hit.title, answer.text, text, time.perf_counter() - t0))
    yield Progress("needs", len(cited), len(cited), "")
    yield tuple(out)
