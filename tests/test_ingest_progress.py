"""One progress figure for a whole ingest (app.ingest_meter), on a real ingest of the demo's PDFs and
Word files (real reader, embedder and catalog), and on the library panel's bar."""

from __future__ import annotations

import shutil
from collections.abc import Generator
from itertools import pairwise
from pathlib import Path

import pytest

from rag_desktop.app.ingest_meter import ALMOST, MIN_SECONDS, PARSE_SHARE, IngestMeter
from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Progress

DEMO = Path(__file__).resolve().parent.parent / "resources" / "demo"


def test_the_share_weighs_files_by_bytes_and_never_reads_done_before_the_end() -> None:
    m = IngestMeter({"a": 100, "b": 300}, t0=0.0)
    assert m.share("a") == 0.0
    assert m.share("a", 0.5) == pytest.approx(50 / 400)
    m.file_done("a")
    m.file_done("a")  # once only
    assert m.share("b", 0.0) == pytest.approx(100 / 400)
    m.file_done("b")
    assert m.share("b", 1.0) == ALMOST  # all files stored, work remains until finish()
    assert m.finish(Progress("keywords", 1, 1)).overall == 1.0
    assert IngestMeter({}, t0=0.0).share("x") == ALMOST  # nothing to read: only the end remains


def test_no_time_left_before_a_measurement_then_the_throughput_extrapolated() -> None:
    m = IngestMeter({"a": 100}, t0=0.0)
    assert m.eta(0.5, now=MIN_SECONDS / 2) is None
    assert m.eta(0.001, now=10.0) is None
    assert m.eta(0.25, now=10.0) == pytest.approx(30.0)


def test_follow_places_a_step_inside_its_file_and_returns_its_result() -> None:
    m = IngestMeter({"a": 100, "b": 100}, t0=0.0)

    def step() -> Generator[Progress, None, str]:
        for k in range(5):
            yield Progress("embed", k, 4)
        return "vectors"

    out: list[float] = []
    gen = m.follow(step(), "b", PARSE_SHARE, 1.0)
    while True:
        try:
            out.append(next(gen).overall or 0.0)
        except StopIteration as stop:
            assert stop.value == "vectors"
            break
    assert out == sorted(out) and out[0] == pytest.approx(PARSE_SHARE * 100 / 200) and out[-1] == 0.5


@pytest.fixture(scope="module")
def demo_events(tmp_path_factory: pytest.TempPathFactory) -> list[Progress]:
    root = tmp_path_factory.mktemp("progress")
    docs = root / "docs"
    shutil.copytree(DEMO, docs, ignore=shutil.ignore_patterns("*.md"))
    svc = RagService(root / "lib", Settings())
    try:
        events = list(svc.ingest([docs]))
    finally:
        svc.close()
    report = events[-1]
    assert isinstance(report, IngestReport) and len(report.added) >= 10, report
    return [e for e in events if isinstance(e, Progress)]


@pytest.mark.integration
def test_a_real_ingest_reports_a_share_that_rises_within_files_and_ends_at_one(demo_events: list[Progress]) -> None:
    shares = [e.overall for e in demo_events]
    assert all(s is not None for s in shares), [e for e in demo_events if e.overall is None][:3]
    values = [float(s) for s in shares if s is not None]
    assert values == sorted(values), "the share never goes back"
    assert values[-1] == 1.0 and max(values[:-1]) < 1.0, "100 % only once the work is done"
    # It rises inside a file, not only between files: the chunks embedded move it.
    embeds = [e for e in demo_events if e.stage == "embed"]
    assert any(a.path == b.path and (b.overall or 0) > (a.overall or 0) for a, b in pairwise(embeds))
    assert len(set(values)) > len({e.path for e in demo_events if e.path}), "more steps than files"


@pytest.mark.gui
@pytest.mark.integration
def test_the_library_panel_bar_rises_with_the_ingest(qtbot, demo_events: list[Progress]) -> None:  # type: ignore[no-untyped-def]
    from rag_desktop.ui.library_panel import PROGRESS_STEPS, LibraryPanel

    panel = LibraryPanel()
    qtbot.addWidget(panel)
    panel.set_busy(True)
    seen: list[int] = []
    for ev in demo_events:
        panel.show_progress(ev)
        assert panel.progress.maximum() == PROGRESS_STEPS
        seen.append(panel.progress.value())
    assert seen == sorted(seen) and seen[0] < seen[len(seen) // 2] < seen[-1] == PROGRESS_STEPS
    assert all(v < PROGRESS_STEPS for v in seen[:-1])
    assert "%" in panel.progress_label.text()
