"""Files read by an older text version (doc_prepare.TEXT_VERSION, recorded per document) are read
again by the next ingest: a file whose text now comes out differently is stored anew, with the
vectors of its unchanged chunks kept; a file whose text is the same stays, its version recorded.
The real library, readers, catalog and embedder; the embedder and the file preparation are wrapped
only to count their calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from library_helpers import CountingEmbedder, ingest_texts

from rag_desktop.app import ingest_run
from rag_desktop.app.doc_prepare import TEXT_VERSION
from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.backends.readers import UnreadableDocument
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import OcrLine, OcrPage, Progress

pytestmark = pytest.mark.integration

# Two chunks in the first file (the default chunks are 4,096 characters), one in the second.
TEXTS = {
    "leave.txt": "Paid leave. Employees have fifteen days of paid leave per year; part-time staff have eight. " * 60,
    "canteen.txt": "The canteen opens at 11:30 every day and closes at 14:00. Soup is served on Fridays. " * 30,
}


def _ingest(svc: RagService, folders: list[Path]) -> IngestReport:
    report = list(svc.ingest(folders))[-1]
    assert isinstance(report, IngestReport)
    return report


def _names(paths: list[str]) -> list[str]:
    return sorted(Path(p).name for p in paths)


def _doc_id(svc: RagService, name: str) -> int:
    return next(d.doc_id for d in svc.library.catalog.documents() if Path(d.path).name == name)


def _as_read_by_an_older_version(svc: RagService, name: str) -> str:
    """Make the library look as an older reader left it: every document read by version 1, and the
    last chunk of ``name`` holding other text. Returns the text it should hold."""
    cat = svc.library.catalog
    last = cat.chunks_of(_doc_id(svc, name))[-1]
    with cat.transaction() as db:
        db.execute("UPDATE documents SET text_version = 1")
        db.execute("UPDATE chunks SET text=? WHERE chunk_id=?", ("bro\n\nken " + last.text, last.chunk_id))
    return last.text


def _versions(svc: RagService) -> dict[str, int]:
    return {Path(p).name: st.text_version for p, st in svc.library.catalog.file_states().items()}


def test_a_new_library_records_the_text_version(tmp_path: Path) -> None:
    svc = ingest_texts(tmp_path, TEXTS)
    try:
        assert set(_versions(svc).values()) == {TEXT_VERSION} and not svc.library.text_outdated()
    finally:
        svc.close()


def test_a_catalog_made_before_the_column_gets_it(tmp_path: Path) -> None:
    """A library whose catalog predates documents.text_version opens with every document at version 1,
    and its next ingest reads them again."""
    import sqlite3

    from library_helpers import built_library

    folder = built_library(tmp_path, TEXTS)
    with sqlite3.connect(folder / "catalog.sqlite") as db:
        db.execute("ALTER TABLE documents DROP COLUMN text_version")
    svc = RagService(folder, Settings())
    try:
        assert _versions(svc) == {"leave.txt": 1, "canteen.txt": 1} and svc.library.text_outdated()
        report = _ingest(svc, [tmp_path / "docs"])
        assert _names(report.unchanged) == ["canteen.txt", "leave.txt"]  # the same text: kept as it is
        assert set(_versions(svc).values()) == {TEXT_VERSION}
    finally:
        svc.close()


def test_an_older_library_is_read_again_and_only_changed_chunks_are_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = ingest_texts(tmp_path, TEXTS)
    docs = tmp_path / "docs"
    try:
        n_leave = len(svc.library.catalog.chunks_of(_doc_id(svc, "leave.txt")))
        assert n_leave >= 2
        now = _as_read_by_an_older_version(svc, "leave.txt")
        counting = CountingEmbedder(svc.runtime.embedder())
        svc.runtime._embedder = counting  # type: ignore[assignment]
        report = _ingest(svc, [docs])
        assert _names(report.updated) == ["leave.txt"]
        assert _names(report.unchanged) == ["canteen.txt"], "its text reads the same: left as it is"
        assert counting.passages == 1, f"only the changed chunk is embedded, not the {n_leave - 1} kept nor canteen's"
        chunks = svc.library.catalog.chunks_of(_doc_id(svc, "leave.txt"))
        assert len(chunks) == n_leave and chunks[-1].text == now
        assert set(_versions(svc).values()) == {TEXT_VERSION}, "both files: the stored one and the kept one"
        assert not svc.library.catalog.staged_counts(), "the kept vectors were used, then let go"
        hits = svc.compare("How many days of paid leave do employees get?", translate=False).baseline.hits
        assert Path(hits[0].path).name == "leave.txt"

        # Recorded: the next ingest reads nothing.
        prepared: list[Path] = []
        real_prepare = ingest_run.prepare_file

        def counting_prepare(path: Path, *args: Any, **kwargs: Any) -> Any:
            prepared.append(path)
            return real_prepare(path, *args, **kwargs)

        monkeypatch.setattr(ingest_run, "prepare_file", counting_prepare)
        again = _ingest(svc, [docs])
        assert prepared == [] and _names(again.unchanged) == ["canteen.txt", "leave.txt"]
    finally:
        svc.close()


def test_each_file_is_read_again_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest of one of the library's two folders reads that folder's files again; the other
    folder's wait for an ingest that reaches them, and the first folder's are not read a second time."""
    svc = ingest_texts(tmp_path, TEXTS)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("Parking permits are issued by the facilities office. " * 20, encoding="utf-8")
    try:
        assert _names(_ingest(svc, [tmp_path / "docs", other]).added) == ["notes.txt"]
        _as_read_by_an_older_version(svc, "leave.txt")
        first = _ingest(svc, [other])
        assert _names(first.unchanged) == ["notes.txt"]
        assert _versions(svc) == {"notes.txt": TEXT_VERSION, "leave.txt": 1, "canteen.txt": 1}
        assert svc.library.text_outdated()
        prepared: list[str] = []
        real_prepare = ingest_run.prepare_file

        def counting_prepare(path: Path, *args: Any, **kwargs: Any) -> Any:
            prepared.append(path.name)
            return real_prepare(path, *args, **kwargs)

        monkeypatch.setattr(ingest_run, "prepare_file", counting_prepare)
        second = _ingest(svc, [tmp_path / "docs", other])
        assert _names(second.updated) == ["leave.txt"] and sorted(prepared) == ["canteen.txt", "leave.txt"]
        assert set(_versions(svc).values()) == {TEXT_VERSION} and not svc.library.text_outdated()
    finally:
        svc.close()


def test_a_file_the_present_reader_fails_on_keeps_its_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read again only because the app changed, a file the reader now fails on is not dropped: the
    file did not change, and the text read before stays searchable."""
    svc = ingest_texts(tmp_path, TEXTS)
    try:
        held = [c.text for c in svc.library.catalog.chunks_of(_doc_id(svc, "leave.txt"))]
        with svc.library.catalog.transaction() as db:
            db.execute("UPDATE documents SET text_version = 1")
        real_prepare = ingest_run.prepare_file

        def failing(path: Path, *args: Any, **kwargs: Any) -> Any:
            if path.name == "leave.txt":
                raise UnreadableDocument(path, "the present reader fails here")
            return real_prepare(path, *args, **kwargs)

        monkeypatch.setattr(ingest_run, "prepare_file", failing)
        report = _ingest(svc, [tmp_path / "docs"])
        assert _names(report.unchanged) == ["canteen.txt", "leave.txt"]
        assert report.removed == [] and report.skipped == []
        assert [c.text for c in svc.library.catalog.chunks_of(_doc_id(svc, "leave.txt"))] == held
        assert _versions(svc)["leave.txt"] == TEXT_VERSION, "the present reader had its chance"
    finally:
        svc.close()


def test_recognised_pages_stay_while_ocr_is_off(tmp_path: Path) -> None:
    """A file with OCR'd pages, read again while OCR is off, would lose those pages: it stays as read."""
    svc = ingest_texts(tmp_path, TEXTS, Settings().replace("ingest", ocr=False))
    try:
        doc = next(d for d in svc.library.catalog.documents() if Path(d.path).name == "leave.txt")
        line = OcrLine("Paid leave.", (0.0, 0.0, 10.0, 10.0), 0.99)
        svc.library.ocr_cache.save_page(doc.sha256, "engine", 150, OcrPage(1, 100.0, 100.0, (line,)))
        _as_read_by_an_older_version(svc, "leave.txt")
        held = [c.text for c in svc.library.catalog.chunks_of(doc.doc_id)]
        report = _ingest(svc, [tmp_path / "docs"])
        assert _names(report.unchanged) == ["canteen.txt", "leave.txt"]
        assert [c.text for c in svc.library.catalog.chunks_of(doc.doc_id)] == held
        assert _versions(svc)["leave.txt"] == 1, "read again once OCR is back"
    finally:
        svc.close()


@pytest.mark.gui
def test_the_window_reads_an_outdated_library_again_once(qtbot: Any, tmp_path: Path) -> None:
    """Opened on a library an older text version read, the window reads its folders again in the
    background, says why, and does not start again after that ingest."""
    from test_gui_libraries import close, factory, idle
    from test_gui_support import ScriptedGenerator

    from rag_desktop.ui import i18n
    from rag_desktop.ui.main import build_window

    svc = ingest_texts(tmp_path, TEXTS)
    now = _as_read_by_an_older_version(svc, "leave.txt")
    assert svc.library.text_outdated()
    lib = svc.library.folder
    svc.close()
    svc.runtime.close()

    i18n.set_language("en")
    messages: list[str] = []
    win = build_window(lib, False, settings=Settings(), settings_file=tmp_path / "config" / "settings.toml",
                       service_factory=factory(ScriptedGenerator()), auto_answer=False)
    win.libraries.status.connect(lambda text, _ms: messages.append(text))
    qtbot.addWidget(win)
    win.show()
    try:
        qtbot.waitUntil(lambda: win.libraries.last_ingest_report is not None, timeout=120000)
        idle(qtbot, win)
        report = win.libraries.last_ingest_report
        assert _names(report.updated) == ["leave.txt"] and _names(report.unchanged) == ["canteen.txt"]
        assert any("reading the library's files again" in m for m in messages), messages
        assert messages[-1].startswith("Library read again with this version: 0 added, 1 updated"), messages
        cat = win.service.library.catalog
        assert not win.service.library.text_outdated()
        assert cat.chunks_of(_doc_id(win.service, "leave.txt"))[-1].text == now
        assert not win.libraries.listing.text_outdated
        qtbot.wait(500)
        assert win.libraries.last_ingest_report is report, "one catch-up, not a loop"

        # While such an ingest runs, why it runs stands above its progress, and goes with it.
        panel = win.libraries.panel
        panel.set_busy(True, "why it runs")
        panel.show_progress(Progress("parse", 1, 2, "leave.txt"))
        assert panel.progress_label.text().startswith("why it runs\nReading 1/2: leave.txt")
        panel.set_busy(False)
        panel.set_busy(True)
        assert panel.progress_label.text() == "Starting…"
        panel.set_busy(False)
    finally:
        close(win)


def test_a_url_stays_in_the_text_and_out_of_the_terms(tmp_path: Path) -> None:
    """The chunk a person and the model read holds the address; the terms it is indexed by (BM25, the
    keyword sets) are counted without it, as paper 000 §4.1 cleans (core.cleaning.strip_urls)."""
    svc = ingest_texts(tmp_path, {"repo.txt": "想获得最新版本的 NJUrepo 请前往主页下载：\nhttps://github.com/zhengzangw/njurepo\n"
                                               "同时，说明主要在 README 中。"})
    try:
        cat = svc.library.catalog
        (chunk,) = cat.chunks_of(_doc_id(svc, "repo.txt"))
        assert "https://github.com/zhengzangw/njurepo" in chunk.text
        terms = {r[0] for r in cat.db.execute("SELECT term FROM chunk_terms WHERE chunk_id=?", (chunk.chunk_id,))}
        assert {"njurepo", "下载", "主页"} <= terms, terms  # the words around it are indexed
        assert not terms & {"https", "github", "com", "zhengzangw"}, terms
    finally:
        svc.close()
