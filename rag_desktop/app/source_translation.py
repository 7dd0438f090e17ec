"""Answer sources in another language than the question, translated for the model (off by default:
``generation.translate``; docs/evaluation.md, "Model calls on the question's path")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from rag_desktop.app.catalog import Catalog
from rag_desktop.core import prompting
from rag_desktop.core.generation import collect_text
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.protocols import Generator
from rag_desktop.core.types import CancelToken, Hit, Lang


class SourceTranslator:
    """Translates once and caches: whole chunks in the library (by chunk id), answer passages in
    memory (by their text)."""

    def __init__(self, catalog: Catalog, generator: Callable[[], Generator]) -> None:
        self.catalog = catalog
        self.generator = generator
        self._passages: dict[tuple[str, str, str], str] = {}

    def translate(self, sources: Sequence[Hit], target: Lang, seed: int, cancel: CancelToken | None = None, *,
                  whole_chunks: bool = True) -> tuple[Hit, ...]:
        """``sources`` with every one in another language than ``target`` translated into it.

        ``whole_chunks``: the hits are whole chunks (cached in the library by chunk id); otherwise
        they are answer passages (only the passage is translated, cached in memory by its text).
        """
        if target == "other":
            return tuple(sources)
        gen = self.generator()
        out: list[Hit] = []
        for h in sources:
            lang = detect_lang(h.text)
            if lang in (target, "other"):
                out.append(h)
                continue
            chunk_id = None
            if whole_chunks:
                chunk_id = h.unit_id if h.level == "chunk" else self._best_chunk_id(h)
            key = (h.text, target, gen.identity)
            cached = self._passages.get(key)
            if cached is None and chunk_id:
                cached = self.catalog.translation(chunk_id, target, gen.identity)
            if cached is None:
                msgs = prompting.build_translation_messages(h.text, lang, target)
                cached = collect_text(gen.stream(msgs, max_tokens=min(2048, gen.n_ctx // 2), temperature=0.0,
                                                 seed=seed, cancel=cancel))
                if chunk_id:
                    with self.catalog.transaction():
                        self.catalog.put_translation(chunk_id, target, gen.identity, cached)
                else:
                    self._passages[key] = cached
            out.append(dataclasses.replace(h, text=cached))
        return tuple(out)

    def _best_chunk_id(self, hit: Hit) -> int | None:
        for c in self.catalog.chunks_of(hit.doc_id):
            if c.text == hit.text:
                return c.chunk_id
        return None
