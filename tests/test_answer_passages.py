"""Answer passages on a real library (issue 12): the model reads paragraph windows of the top
chunks, located on their own page with the PDF's printed label; [n] maps to that paragraph.

The generator is the scripted collaborator of the widget tests; the PDF (built with PyMuPDF,
page labels starting at 87), the ingest, retrieval, passage finder and prompt are real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gui_support import ScriptedGenerator

from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, Progress

pytestmark = pytest.mark.integration

PAGE1 = [
    "3.1 Brewing basics",
    "Water for green tea should be well below boiling, about seventy to eighty degrees, so the leaves do not scald.",
    "Black tea takes freshly boiled water and steeps for three to five minutes before the leaves are removed.",
]
PAGE2 = [
    "3.2 Storing tea",
    "Tea keeps best in an opaque airtight tin, away from light, heat, moisture and strong smells.",
    "Opened green tea loses its aroma within about two months; black tea keeps for a year or more.",
]


def _pdf(path: Path) -> None:
    import pymupdf

    doc = pymupdf.open()
    for paras in (PAGE1, PAGE2):
        page = doc.new_page()
        y = 72
        for para in paras:
            page.insert_textbox(pymupdf.Rect(72, y, 520, y + 70), para, fontsize=11)
            y += 80
    doc.set_page_labels([{"startpage": 0, "prefix": "", "style": "D", "firstpagenum": 87}])
    doc.save(path)


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    root = tmp_path_factory.mktemp("passages")
    (root / "docs").mkdir()
    _pdf(root / "docs" / "tea_handbook.pdf")
    (root / "docs" / "noodles.txt").write_text("Boil water, add the noodles, cook five minutes and drain them.",
                                                encoding="utf-8")
    service = RagService(root / "library", Settings().replace("retrieval", level="chunk"))
    last = None
    for ev in service.ingest([root / "docs"]):
        assert isinstance(ev, Progress | IngestReport)
        last = ev
    assert isinstance(last, IngestReport) and len(last.added) == 2, last
    service.runtime._generator = ScriptedGenerator()
    return service


def test_passages_are_paragraphs_on_their_page_with_printed_labels(svc: RagService) -> None:
    ranked = svc.compare("How long does opened green tea keep its aroma?", level="chunk").baseline
    tea = next(h for h in ranked.hits if h.path.endswith(".pdf"))
    assert tea.page == 1  # the chunk holds both pages
    ps = svc.passage_finder().find("How long does opened green tea keep its aroma?", [tea])
    assert ps.hits, "the chunk gives passages"
    for h, loc in zip(ps.hits, ps.locators, strict=True):
        assert h.text in tea.text and len(h.text) < len(tea.text)
        assert loc.page_label == str(86 + h.page)  # printed labels 87, 88
    storing = next(i for i, h in enumerate(ps.hits) if "two months" in h.text)
    assert ps.hits[storing].page == 2 and ps.locators[storing].page_label == "88"
    assert ps.locators[storing].heading == "3.2 Storing tea"
    assert ps.hits[0].s_sim >= min(h.s_sim for h in ps.hits)


def test_answer_reads_passages_with_locators_and_cites_them(svc: RagService) -> None:
    gen = svc.runtime._generator
    assert isinstance(gen, ScriptedGenerator)
    q = "How long does opened green tea keep its aroma?"
    ranked = svc.compare(q, level="chunk").baseline
    events = list(svc.answer(q, ranked, n_sources=2))
    stages = [e.stage for e in events if isinstance(e, Progress)]
    assert stages[:2] == ["passages", "reading"]
    reading = next(e for e in events if isinstance(e, Progress) and e.stage == "reading")
    assert reading.current > 0
    answer = events[-1]
    assert isinstance(answer, Answer)
    assert len(answer.locators) == len(answer.sources) == len(answer.original_texts)
    assert any("(page 88)" in s for s in [f"{h.title} (page {loc.page_label})" for h, loc in
                                           zip(answer.sources, answer.locators, strict=True)])
    for c in answer.citations:
        if c.valid:
            src = answer.sources[c.n - 1]
            assert (c.unit_id, c.page) == (src.unit_id, src.page)
    whole = list(svc.answer(q, ranked, n_sources=2, passages=False))[-1]
    assert isinstance(whole, Answer) and whole.locators == ()
    assert {h.text for h in whole.sources} <= {h.text for h in ranked.hits}
