"""Build a small real library for a test: text files in a folder, ingested by RagService."""

from __future__ import annotations

from pathlib import Path

from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Progress


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
