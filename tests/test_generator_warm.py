"""The generator is made ready before the first question: loaded, with the answer prompts' fixed
prefix evaluated for the library's languages, so that question's first token waits only for its
own sources (docs/benchmarks.md §9). Real library, real embedder, a real (tiny) GGUF model."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from library_helpers import ingest_texts

from rag_desktop.app.model_files import smollm2_path
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer

pytestmark = pytest.mark.integration

DOCS = {
    "museum_en.txt": "The city museum opens at ten in the morning and closes at six in the evening. " * 3,
    "tea_zh.txt": "这家茶馆每天早上八点开门，晚上九点关门，周一休息。" * 4,
}


def test_prepare_warms_each_library_language_and_the_first_answer_loads_it(tmp_path: Path) -> None:
    try:
        model = smollm2_path()
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    settings = Settings().replace("models", generator=str(model), n_ctx=2048).replace("generation", max_tokens=8)
    svc = ingest_texts(tmp_path, DOCS, settings)
    with contextlib.closing(svc):
        assert svc.runtime._generator is None
        list(svc.prepare_generator())
        gen = svc.runtime._generator
        assert isinstance(gen, LlamaCppGenerator)
        assert len(gen._cache.states) == 2  # the zh and the en answer prompts' system + example
        list(svc.prepare_generator())  # a loaded generator is handed out as it is, never warmed again
        assert svc.runtime._generator is gen and len(gen._cache.states) == 2
        for question in ("When does the museum close?", "茶馆几点开门？"):
            ranked = svc.compare(question).baseline
            events = list(svc.answer(question, ranked, n_sources=1))
            assert isinstance(events[-1], Answer)
            assert gen.last_prefix_reused > 30  # loaded from the warm-up, not evaluated again
        assert len(gen._cache.states) == 2


def test_prepare_asks_no_server_when_the_generator_is_one(tmp_path: Path) -> None:
    """With an OpenAI-compatible server as generator, making ready loads nothing: the server is
    first asked by the first question, as before (a server that is down is no error at launch)."""
    settings = Settings().replace("models", generator_backend="openai", openai_base_url="http://127.0.0.1:9/v1")
    svc = ingest_texts(tmp_path, {"museum_en.txt": DOCS["museum_en.txt"]}, settings)
    with contextlib.closing(svc):
        assert list(svc.prepare_generator()) == []
        assert svc.runtime._generator is None
