"""Build a small real library for a test: text files in a folder, ingested by RagService."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Progress

# A small library in two languages whose documents share no topic (a reasoning experiment,
# Chinese medicine, a recipe): a question finds one of them, in its language or across.
MIXED_DOCS = {
    "wason_en.txt": "The Wason selection task asks which cards must be turned to test a rule. Most people choose "
                    "the matching cards instead of the falsifying ones; this is called matching bias. " * 4,
    "cough_zh.txt": "中医治疗久咳，先辨寒热虚实。风寒咳嗽用止嗽散，肺阴亏虚用沙参麦冬汤。" * 6,
    "noodles_en.txt": "Boil water, add the noodles, cook five minutes, drain and serve with sauce. " * 4,
}


def ingest_texts(root: Path, texts: dict[str, str], settings: Settings | None = None) -> RagService:
    """Write ``texts`` (file name → content) to ``root/docs``, ingest them into ``root/library``
    with the real embedded embedder and jieba, and check that every file was added."""
    folder = root / "docs"
    folder.mkdir()
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    svc = RagService(root / "library", settings or Settings())
    last = None
    for ev in svc.ingest([folder]):
        assert isinstance(ev, Progress | IngestReport)
        last = ev
    assert isinstance(last, IngestReport), last
    assert len(last.added) == len(texts), (last.added, last.skipped)
    return svc


def built_library(root: Path, texts: dict[str, str], settings: Settings | None = None) -> Path:
    """The folder of a library of ``texts`` built as :func:`ingest_texts` builds it, closed (its
    models too) for the tests to reopen."""
    svc = ingest_texts(root, texts, settings)
    svc.close()
    svc.runtime.close()
    return svc.library.folder


class CountingEmbedder:
    """The real embedder, counting the passages it is asked to embed (a test of what is embedded again)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.passages = 0

    def embed_passages(self, texts: list[str]) -> Any:
        self.passages += len(texts)
        return self.real.embed_passages(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)
