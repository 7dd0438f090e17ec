"""A file removed and added back unchanged is matched by its content hash and not embedded again
(ingest_run.keep_vectors, embed_step.content_key): the real library, reader, catalog and embedder; the
embedder is wrapped only to count its calls."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from library_helpers import CountingEmbedder, ingest_texts

from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService

pytestmark = pytest.mark.integration

TEXTS = {
    "leave.txt": "Paid leave. Employees have fifteen days of paid leave per year; part-time staff have eight. " * 30,
    "canteen.txt": "The canteen opens at 11:30 every day and closes at 14:00. Soup is served on Fridays. " * 30,
}
Q = "How many days of paid leave do employees get?"


def _ingest(svc: RagService, folder: Path) -> IngestReport:
    report = list(svc.ingest([folder]))[-1]
    assert isinstance(report, IngestReport)
    return report


def _hits(svc: RagService) -> list[tuple[str, float]]:
    return [(Path(h.path).name, round(h.s_sim, 5)) for h in svc.compare(Q, translate=False).baseline.hits]


def test_a_file_added_back_unchanged_is_not_embedded_again(tmp_path: Path) -> None:
    svc = ingest_texts(tmp_path, TEXTS)
    docs = tmp_path / "docs"
    try:
        before = _hits(svc)
        counting = CountingEmbedder(svc.runtime.embedder())
        svc.runtime._embedder = counting  # type: ignore[assignment]
        shutil.move(str(docs / "leave.txt"), str(tmp_path / "leave.txt"))
        assert [Path(p).name for p in _ingest(svc, docs).removed] == ["leave.txt"]
        assert any(p.startswith("content:") for p in svc.library.catalog.staged_counts())
        shutil.move(str(tmp_path / "leave.txt"), str(docs / "leave.txt"))
        again = _ingest(svc, docs)
        assert [Path(p).name for p in again.added] == ["leave.txt"]
        assert counting.passages == 0, "the same bytes came back: their vectors are reused"
        assert _hits(svc) == before
        assert not svc.library.catalog.staged_counts(), "used, then let go"
    finally:
        svc.close()


def test_the_kept_vectors_wait_one_ingest_only(tmp_path: Path) -> None:
    svc = ingest_texts(tmp_path, TEXTS)
    docs = tmp_path / "docs"
    try:
        (docs / "leave.txt").unlink()
        _ingest(svc, docs)
        assert list(svc.library.catalog.staged_counts()) != []
        _ingest(svc, docs)  # the file did not come back: its vectors go
        assert svc.library.catalog.staged_counts() == {}
        (docs / "leave.txt").write_text(TEXTS["leave.txt"], encoding="utf-8")
        counting = CountingEmbedder(svc.runtime.embedder())
        svc.runtime._embedder = counting  # type: ignore[assignment]
        _ingest(svc, docs)
        assert counting.passages > 0  # embedded again, as any new file is
    finally:
        svc.close()
