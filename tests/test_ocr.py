"""OCR of scanned PDFs and images with the real RapidOCR models (shipped in the wheel).

The scans are made here (tests/scan_helpers.py: text rendered to an image, wrapped in a
PDF). The rules of core/ocr_text.py are tested on their own first (fast), then the whole
path: which pages are OCR'd, text and boxes, the library (mixed documents, images, junk
text layers, OCR off, cancel and resume, progress), the viewer's marks on a scanned page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from scan_helpers import EN_IN_CJK_FONT, EN_TEXT, ZH_TEXT, PageSpec, make_image, make_pdf

from rag_desktop.app.library import IngestReport
from rag_desktop.app.ocr import OcrCache
from rag_desktop.app.service import RagService
from rag_desktop.backends.errors import MissingDependency
from rag_desktop.backends.rapid_ocr import RapidOcrEngine
from rag_desktop.backends.readers.pdf import SCANNED_REASON, read_pdf
from rag_desktop.backends.scan_pages import pages_needing_ocr, recognise_pages
from rag_desktop.core.ocr_text import (
    char_accuracy,
    join_chars,
    junk_text_reason,
    normalise_ocr_text,
    page_text,
    word_gap_threshold,
)
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, OcrLine, Progress

# --------------------------------------------------------------------------- the text rules (fast)


def _layout(text: str, advance: float, word_gap: float,
            ink: float) -> tuple[list[str], list[float], list[tuple[float, float]]]:
    """Characters the recogniser returned without spaces, their centres, and the blank runs a
    page with this layout shows: ``advance`` per character (``ink`` of it inked, the rest blank),
    ``word_gap`` more between words."""
    chars, centers, gaps, x = [], [], [], 0.0
    for w_i, word in enumerate(text.split(" ")):
        if w_i:
            gaps.append((x - (advance - ink) - word_gap, x))
        for c_i, ch in enumerate(word):
            chars.append(ch)
            centers.append(x + advance / 2)
            if c_i:
                gaps.append((x - (advance - ink), x))
            x += advance
        x += word_gap
    return chars, centers, gaps


def test_lost_spaces_are_restored_from_blank_columns() -> None:
    # Latin set in full-width CJK cells (1 em): letters 0.5 em wide, so 0.5 em blank inside
    # words; one empty cell between words.
    chars, centers, gaps = _layout("ｍｕｓｔ ｂｅ ｇｒｅａｓｅｄ ｅｖｅｒｙ ｄａｙｓ．", 20, 20, 10)
    assert join_chars(chars, centers, gaps, line_height=26) == "must be greased every days."
    # A proportional font: 1 px between letters, 6 px for a space, a 16 px line.
    chars, centers, gaps = _layout("shall return the keys", 8, 6, 7)
    assert join_chars(chars, centers, gaps, line_height=16) == "shall return the keys"


def test_no_spaces_in_chinese_or_digits_and_recognised_spaces_are_kept() -> None:
    chars, centers, gaps = _layout("数据出境 安全评估办法， 促进", 20, 20, 18)
    assert join_chars(chars, centers, gaps, line_height=24) == "数据出境安全评估办法，促进"
    chars, centers, gaps = _layout("20 1 1", 8, 6, 7)  # "2011" with a wide "1": digits never split
    assert join_chars(chars, centers, gaps, line_height=16) == "2011"
    chars = list("Check the")
    centers = [i * 8.0 + 4 for i in range(len(chars))]
    assert join_chars(chars, centers, [], line_height=16) == "Check the"
    assert word_gap_threshold([(0, 1), (5, 6), (9, 10)], line_height=20) == 4.0


def test_nfkc_and_punctuation() -> None:
    assert normalise_ocr_text("ｗｅｅｋｌｙ  ， ｄａｔａ  .") == "weekly, data."
    assert normalise_ocr_text("数据，出境。ｗｅｅｋ，") == "数据，出境。week,"  # Chinese punctuation stays


def test_page_text_rows_and_paragraphs() -> None:
    lines = [
        OcrLine("second line", (10, 30, 200, 42), 0.9),
        OcrLine("First", (10, 10, 60, 22), 0.9),
        OcrLine("line", (70, 11, 120, 23), 0.9),
        OcrLine("New paragraph", (10, 80, 200, 92), 0.9),
    ]
    assert page_text(lines) == "First line\nsecond line\n\nNew paragraph"


def test_junk_text_layer_rules() -> None:
    assert junk_text_reason("", 0.0) == "no text layer"
    assert junk_text_reason("12", 0.95) is not None  # a stamped page number on a scan
    assert junk_text_reason("12", 0.0) is None  # a near-empty page that is not a scan
    assert junk_text_reason("A real page of text " * 20, 0.95) is None  # a text page with a logo
    assert "undecodable" in (junk_text_reason("\ue000\ue001\ue002\ufffd ab", 0.0) or "")


def test_char_accuracy() -> None:
    assert char_accuracy("must be", "must be") == 1.0
    assert char_accuracy("must be", "mustbe") == pytest.approx(1 - 1 / 7)
    assert char_accuracy("abc", "") == 0.0
    assert char_accuracy("告知义务。", "告知\n义务。") == 1.0


# --------------------------------------------------------------------------- the real engine


@pytest.fixture(scope="module")
def engine() -> RapidOcrEngine:
    eng = RapidOcrEngine()
    eng.load()
    return eng


class CountingEngine:
    """The real engine, counting the pages it is given (to test resume)."""

    def __init__(self, inner: RapidOcrEngine) -> None:
        self.inner = inner
        self.pages = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    def load(self) -> None:
        self.inner.load()

    def recognise(self, image: npt.NDArray[np.uint8], scale: float) -> list[OcrLine]:
        self.pages += 1
        return self.inner.recognise(image, scale)


@pytest.mark.slow
def test_english_and_chinese_scans_are_read(engine: RapidOcrEngine, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "scan.pdf", [PageSpec(EN_TEXT), PageSpec(ZH_TEXT, font="china-s"),
                                           PageSpec(EN_IN_CJK_FONT, font="china-s")])
    assert [n for n, _ in pages_needing_ocr(pdf)] == [1, 2, 3]
    pages = list(recognise_pages(pdf, engine, [1, 2, 3], dpi=200))
    texts = [page_text(p.lines) for p in pages]
    assert char_accuracy(EN_TEXT, texts[0]) > 0.95, texts[0]
    assert char_accuracy(ZH_TEXT, texts[1]) > 0.95, texts[1]
    # English in a CJK font: full-width letters folded and word spaces restored.
    assert char_accuracy(EN_IN_CJK_FONT, texts[2]) > 0.85, texts[2]
    assert "the" in texts[2].split() and texts[2].isascii(), texts[2]
    # Boxes are in PDF points on the page: the first line starts near the 72 pt margin.
    first = pages[0].lines[0]
    assert 60 < first.box[0] < 90 and 60 < first.box[1] < 100 and first.box[2] < pages[0].width


@pytest.mark.slow
def test_mixed_pdf_keeps_its_text_page_and_reads_its_scans(engine: RapidOcrEngine, tmp_path: Path) -> None:
    real = "This page has a real text layer about the annual budget."
    pdf = make_pdf(tmp_path / "mixed.pdf", [PageSpec(real, kind="text"), PageSpec(EN_TEXT, kind="junk")])
    plan = pages_needing_ocr(pdf)
    assert [n for n, _ in plan] == [2] and "page-sized image" in plan[0][1]
    pages = list(recognise_pages(pdf, engine, [2], dpi=200))
    parsed = read_pdf(pdf, ocr_text={2: page_text(pages[0].lines)})
    assert " ".join(parsed.pages[0].text.split()) == real
    assert "greased" in parsed.pages[1].text and parsed.pages[1].text.strip() != "12"
    assert "page 2 read by OCR" in parsed.warnings


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scans")
    make_pdf(folder / "contract.pdf", [PageSpec(EN_TEXT)])
    make_pdf(folder / "regulation.pdf", [PageSpec(ZH_TEXT, font="china-s")])
    make_image(folder / "notice.png", PageSpec("Notice: the library closes at nine on Fridays."))
    make_image(folder / "memo.tif", PageSpec("Memo: visitors must sign the register at the gate."))
    (folder / "plain.txt").write_text("An ordinary text file about the garden.", encoding="utf-8")
    return folder


def _ingest(svc: RagService, folder: Path, cancel: CancelToken | None = None,
            stop_after_ocr_page: int | None = None) -> tuple[IngestReport, list[Progress]]:
    events: list[Progress] = []
    cancel = cancel or CancelToken()
    report = None
    for ev in svc.ingest([folder], cancel):
        if isinstance(ev, Progress):
            events.append(ev)
            if stop_after_ocr_page is not None and ev.stage == "ocr" and ev.current == stop_after_ocr_page:
                cancel.set()
        else:
            report = ev
    assert isinstance(report, IngestReport)
    return report, events


@pytest.mark.slow
def test_a_folder_of_scans_ingests_and_answers(scans: Path, tmp_path: Path) -> None:
    svc = RagService(tmp_path / "lib", Settings())
    try:
        report, events = _ingest(svc, scans)
        assert sorted(Path(p).name for p in report.added) == \
            ["contract.pdf", "memo.tif", "notice.png", "plain.txt", "regulation.pdf"], report.skipped
        ocr_events = [e for e in events if e.stage == "ocr"]
        assert {Path(e.path).name for e in ocr_events} == {"contract.pdf", "regulation.pdf", "notice.png", "memo.tif"}
        assert any(e.current == e.total == 1 and e.eta_s is not None for e in ocr_events)
        docs = {Path(d.path).name: d for d in svc.library.catalog.documents()}
        assert docs["notice.png"].kind == "image" and docs["contract.pdf"].kind == "pdf"
        cache = svc.library.ocr_cache
        assert cache.has(docs["contract.pdf"].sha256) and not cache.has(docs["plain.txt"].sha256)
        hit = svc.compare("when must the bicycle chain be greased", level="doc", k=5).baseline.hits[0]
        assert Path(hit.path).name == "contract.pdf"
        zh = svc.compare("数据出境安全评估办法何时施行", level="doc", k=5).baseline.hits[0]
        assert Path(zh.path).name == "regulation.pdf"
        lines = svc.ocr_lines(docs["contract.pdf"].doc_id, 1)
        assert lines and any("greased" in ln.text for ln in lines)
        # The viewer's marks on the scanned page come from those boxes.
        from rag_desktop.backends.pdf_render import render_page
        from rag_desktop.core.highlight import Highlight

        rp = render_page(scans / "contract.pdf", 1, [Highlight("greased", (1.0, 0.8, 0.0))], ocr_lines=lines)
        assert rp.found["greased"] == 1
        assert render_page(scans / "contract.pdf", 1, [Highlight("greased", (1.0, 0.8, 0.0))]).found["greased"] == 0
        img = render_page(scans / "notice.png", 1, [Highlight("Fridays", (1.0, 0.8, 0.0))],
                          ocr_lines=svc.ocr_lines(docs["notice.png"].doc_id, 1))
        assert img.n_pages == 1 and img.found["Fridays"] == 1
    finally:
        svc.close()


@pytest.mark.slow
def test_ocr_off_skips_scans_and_ignores_images_then_on_reads_them(scans: Path, tmp_path: Path) -> None:
    off = RagService(tmp_path / "lib", Settings().replace("ingest", ocr=False))
    try:
        report, events = _ingest(off, scans)
        assert [Path(p).name for p in report.added] == ["plain.txt"]
        reasons = {Path(p.path).name: p.reason for p in report.skipped}
        assert reasons == {"contract.pdf": SCANNED_REASON, "regulation.pdf": SCANNED_REASON}
        assert not [e for e in events if e.stage == "ocr"]
    finally:
        off.close()
    on = RagService(tmp_path / "lib", Settings())
    try:
        report, _ = _ingest(on, scans)
        assert sorted(Path(p).name for p in report.added) == ["contract.pdf", "memo.tif", "notice.png",
                                                               "regulation.pdf"]
    finally:
        on.close()


@pytest.mark.slow
def test_cancel_in_the_middle_of_a_scan_then_resume(engine: RapidOcrEngine, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    make_pdf(folder / "long.pdf", [PageSpec(f"Page {i}: the warehouse inventory of week {i}.") for i in range(1, 4)])
    svc = RagService(tmp_path / "lib", Settings())
    counting = CountingEngine(engine)
    svc.runtime._ocr = counting  # the real engine, counted
    try:
        report, _ = _ingest(svc, folder, stop_after_ocr_page=1)
        assert report.cancelled and not report.added and counting.pages == 1
        sha = json.loads(next((tmp_path / "lib" / "ocr").glob("*.json")).read_text())
        assert list(sha["pages"]) == ["1"]
        report, events = _ingest(svc, folder)
        assert [Path(p).name for p in report.added] == ["long.pdf"]
        assert counting.pages == 3  # pages 2 and 3 only: page 1 came from the cache
        assert [e.current for e in events if e.stage == "ocr"] == [1, 2, 3]
        chunks = " ".join(c.text for c in svc.library.catalog.chunks_of(svc.library.catalog.documents()[0].doc_id))
        assert all(f"week {i}" in chunks for i in (1, 2, 3)), chunks
    finally:
        svc.close()


class UnavailableEngine:
    """An OCR engine whose package is missing (the collaborator; the library is under test)."""

    identity = "missing"

    def load(self) -> None:
        raise MissingDependency("rapidocr_onnxruntime", "OCR of scanned pages and images")

    def recognise(self, image: npt.NDArray[np.uint8], scale: float) -> list[OcrLine]:
        self.load()
        return []


def test_without_a_working_ocr_engine_text_pages_are_still_read(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    make_pdf(folder / "mixed.pdf", [PageSpec("A real text page about the garden shed.", kind="text"),
                                    PageSpec(EN_TEXT)], dpi=72)
    make_pdf(folder / "scan.pdf", [PageSpec(EN_TEXT)], dpi=72)
    svc = RagService(tmp_path / "lib", Settings())
    svc.runtime._ocr = UnavailableEngine()
    try:
        report, _ = _ingest(svc, folder)
        assert [Path(p).name for p in report.added] == ["mixed.pdf"]
        assert [(Path(p.path).name, p.reason) for p in report.skipped] == [("scan.pdf", SCANNED_REASON)]
    finally:
        svc.close()


def test_damaged_image_is_a_clear_skip(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    svc = RagService(tmp_path / "lib", Settings())
    try:
        report, _ = _ingest(svc, folder)
        assert [(Path(p.path).name, p.reason) for p in report.skipped] == \
            [("broken.png", "not a valid image — the file is damaged or not really a .png")]
    finally:
        svc.close()


def test_ocr_cache_ignores_another_engine_or_dpi(tmp_path: Path) -> None:
    from rag_desktop.core.types import OcrPage

    cache = OcrCache(tmp_path)
    page = OcrPage(1, 595.0, 842.0, (OcrLine("hello", (1.0, 2.0, 3.0, 4.0), 0.9),))
    cache.save_page("abc", "engine-a", 200, page)
    assert cache.pages("abc", "engine-a", 200) == {1: page}
    assert cache.pages("abc", "engine-a", 150) == {} and cache.pages("abc", "engine-b", 200) == {}
    assert cache.lines("abc", 1) == page.lines and cache.lines("abc", 2) == ()


# --------------------------------------------------------------------------- OpenCV and Qt in one process

_PROBE = """
import os, sys, json
sys.path.insert(0, {root!r})
before = {{k: os.environ.get(k) for k in ("QT_QPA_PLATFORM_PLUGIN_PATH", "QT_QPA_FONTDIR", "LD_LIBRARY_PATH")}}
if sys.argv[1] == "guarded":
    from rag_desktop.backends.rapid_ocr import RapidOcrEngine
    RapidOcrEngine().load()
else:
    import cv2  # noqa: F401
after = {{k: os.environ.get(k) for k in before}}
from PySide6.QtWidgets import QApplication, QLabel
app = QApplication([])
label = QLabel("ok")
label.show()
app.processEvents()
print(json.dumps({{"changed": before != after, "platform": app.platformName()}}))
"""


@pytest.mark.parametrize("mode", ["guarded", "raw"])
def test_opencv_import_does_not_break_a_qt6_window(mode: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QT_QPA_PLATFORM_PLUGIN")}
    env["QT_QPA_PLATFORM"] = "offscreen"
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(root=str(Path(__file__).parents[1])), mode],
                          capture_output=True, text=True, env=env, timeout=120)
    if mode == "raw":  # what the guard protects against: opencv-python repoints Qt at its Qt 5 plugins
        assert proc.returncode != 0 or json.loads(proc.stdout.strip().splitlines()[-1])["changed"], proc.stdout
        return
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"changed": False, "platform": "offscreen"}


@pytest.fixture(autouse=True)
def _no_leftover_env() -> Iterator[None]:
    before = os.environ.get("QT_QPA_PLATFORM_PLUGIN_PATH")
    yield
    assert os.environ.get("QT_QPA_PLATFORM_PLUGIN_PATH") == before
