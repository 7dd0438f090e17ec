"""Answer passages on a real library: the model reads paragraph windows of the top
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


Q_AROMA = "How long does opened green tea keep its aroma?"


class _Replying(ScriptedGenerator):
    """The scripted collaborator, answering with ``reply``."""

    def __init__(self, reply: str) -> None:
        super().__init__()
        self.reply = reply

    def _reply(self, messages):  # type: ignore[no-untyped-def]
        kind, text = super()._reply(messages)
        return (kind, self.reply) if kind == "answer" else (kind, text)


def test_an_answer_no_passage_holds_is_marked_unsupported(svc: RagService) -> None:
    """The answer path's own check (core.cfrag.anchor.unsupported) on the passages it read."""
    ranked = svc.compare(Q_AROMA, translate=False).baseline
    try:
        svc.runtime._generator = _Replying("Opened green tea loses its aroma within about two months [1].")
        held = list(svc.answer(Q_AROMA, ranked))[-1]
        svc.runtime._generator = _Replying("Green tea keeps its aroma for ten years in a cellar in Rome [1].")
        invented = list(svc.answer(Q_AROMA, ranked))[-1]
    finally:
        svc.runtime._generator = ScriptedGenerator()
    assert isinstance(held, Answer) and isinstance(invented, Answer)
    assert "unsupported" not in held.warnings and held.text
    assert "unsupported" in invented.warnings and not invented.abstained  # said, not hidden


def test_focus_reads_each_chunk_through_its_best_paragraph(svc: RagService) -> None:
    ranked = svc.compare(Q_AROMA, level="chunk").baseline
    tea = next(h for h in ranked.hits if h.path.endswith(".pdf"))
    noodles = next(h for h in ranked.hits if h.path.endswith(".txt"))
    finder = svc.passage_finder()
    one = finder.focus(Q_AROMA, [tea, noodles], 1)
    # one hit per hit, same order, ids and scores: a prompt's [n] still points at the n-th hit
    assert [(h.unit_id, h.doc_id, h.s_sim, h.rank) for h in one] == \
        [(h.unit_id, h.doc_id, h.s_sim, h.rank) for h in (tea, noodles)]
    assert "two months" in one[0].text and "seventy to eighty degrees" not in one[0].text
    assert one[0].text in tea.text and one[0].page == 2  # the paragraph's own page, not the chunk's first
    assert one[1] == noodles  # a one-paragraph chunk is already what the model reads
    two = finder.focus(Q_AROMA, [tea], 2)[0]
    assert "two months" in two.text and len(one[0].text) < len(two.text)
    at = [tea.text.index(p) for p in two.text.split("\n\n")]  # windows hold whole paragraphs
    assert at == sorted(at)  # in document order
    assert finder.focus(Q_AROMA, [tea], 0) == (tea,)


class _Recording(ScriptedGenerator):
    """The scripted collaborator, keeping every prompt it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    def stream(self, messages, **kw):  # type: ignore[no-untyped-def]
        self.prompts.append(messages[-1].content)
        return super().stream(messages, **kw)


def test_cfrag_hypotheses_read_each_evidence_through_its_answering_paragraph(svc: RagService) -> None:
    from rag_desktop.core.cfrag import cfrag_result
    from rag_desktop.core.cfrag.prompts import SYSTEM_HYPOTHESIS

    def hypothesis_prompts(read_passages: int) -> tuple[list[str], Answer]:
        gen = _Recording()
        svc.runtime._generator = gen
        # the paths themselves, not the standard answer CF-RAG would start from
        svc.update_settings(svc.settings.replace("cfrag", read_passages=read_passages, keep_standard=False))
        res = cfrag_result(svc.cfrag(Q_AROMA))
        return [p for p in gen.prompts if p.startswith("Evidence:") and "Candidate answers" not in p], res.answer

    base = svc.settings
    try:
        focused, answer = hypothesis_prompts(1)
        whole, answer0 = hypothesis_prompts(0)
    finally:
        svc.update_settings(base)
        svc.runtime._generator = ScriptedGenerator()
    assert SYSTEM_HYPOTHESIS and focused and whole
    assert all("two months" in p and "seventy to eighty degrees" not in p for p in focused)
    assert any("seventy to eighty degrees" in p for p in whole)  # the chunk from its start
    tea = next(h for h in answer.sources if h.path.endswith(".pdf"))
    assert tea.page == 2 and "two months" in tea.text  # the citation opens the answering paragraph
    tea0 = next(h for h in answer0.sources if h.path.endswith(".pdf"))
    assert tea0.page == 1 and "seventy to eighty degrees" in tea0.text


def test_cfrag_starts_from_the_answer_the_window_already_wrote(svc: RagService) -> None:
    """cfrag.keep_standard: the window's flow hands CF-RAG the answer its first column wrote (the
    comparison's first_column), and CF-RAG checks that one instead of writing it a second time."""
    from rag_desktop.app import flow_events as fe
    from rag_desktop.app.question_flow import QuestionFlow
    from rag_desktop.core.cfrag import cfrag_result

    gen = _Recording()
    svc.runtime._generator = gen
    try:
        flow = QuestionFlow(svc, Q_AROMA, highlights=False, prepare=False)
        seen = list(flow.events(cfrag=False))
        ready = next(e for e in seen if isinstance(e, fe.ColumnsReady))
        written = next(e.answer for e in seen if isinstance(e, fe.AnswerDone)
                       and e.column == ready.comparison.first_column)
        assert written.text and flow.standard() is written
        before = len(gen.prompts)
        res = next(e.result for e in flow.cfrag() if isinstance(e, fe.CFDone))
        check = res.trace.decision.standard
        assert check is not None and check.answer == written.text
        assert not any(p.startswith("Sources:") for p in gen.prompts[before:])  # no second standard answer
        if check.confident:
            assert res.answer.text == written.text and gen.prompts[before:] == []
        # Not handed one (the CLI's `compare` with CF-RAG, a fresh process: another generator, which
        # has kept no answer), CF-RAG writes the standard answer itself.
        fresh = _Recording()
        svc.runtime._generator = fresh
        alone = cfrag_result(svc.cfrag(Q_AROMA))
        assert alone.trace.decision.standard is not None
        assert any(p.startswith("Sources:") for p in fresh.prompts)
    finally:
        svc.runtime._generator = ScriptedGenerator()


def test_cfrag_uses_the_stored_chunk_vectors_instead_of_embedding_the_evidence_again(svc: RagService) -> None:
    """The library's stored vectors are what the encoder gives the chunk text (so s(q, e) and Δ
    are unchanged), and CF-RAG embeds no evidence chunk at question time (that was
    20-35 s of a demo question on 2 cores)."""
    import numpy as np

    from rag_desktop.core.cfrag import cfrag_result
    from rag_desktop.core.substitute_scorer import EmbeddingCosineScorer

    emb = svc.runtime.embedder()
    ranked = svc.compare(Q_AROMA, level="chunk").baseline
    stored = svc.library.catalog.vectors_of_chunks([h.unit_id for h in ranked.hits])
    fresh = emb.embed_passages([h.text for h in ranked.hits])
    for h, v in zip(ranked.hits, fresh, strict=True):
        assert float(np.dot(stored[h.unit_id], v)) > 0.9999
    svc.runtime._scorer = None  # a fresh substitute scorer: nothing cached from earlier tests
    embedded: list[str] = []
    orig = emb.embed_passages

    def counting(texts):  # type: ignore[no-untyped-def]
        embedded.extend(texts)
        return orig(texts)

    emb.embed_passages = counting  # type: ignore[method-assign]
    try:
        res = cfrag_result(svc.cfrag(Q_AROMA))
    finally:
        del emb.embed_passages
        svc.runtime._generator = ScriptedGenerator()
    pool = [e.hit.text for e in res.trace.evidence]
    assert pool and not set(pool) & set(embedded)
    reference = EmbeddingCosineScorer(emb).score(Q_AROMA, pool)
    np.testing.assert_allclose([e.s_q_raw for e in res.trace.evidence], reference, atol=1e-4)


def test_a_pdf_moved_away_since_the_ingest_is_said_to_be_missing_not_damaged(
        svc: RagService, caplog: pytest.LogCaptureFixture) -> None:
    q = "How long does opened green tea keep its aroma?"
    tea = next(h for h in svc.compare(q, level="chunk").baseline.hits if h.path.endswith(".pdf"))
    svc._passages = None  # a fresh finder: nothing of the file cached yet
    pdf = Path(tea.path)
    pdf.rename(pdf.with_name("moved.pdf"))
    try:
        finder = svc.passage_finder()
        with caplog.at_level("WARNING", logger="rag_desktop.app.passages"):
            ps = finder.find(q, [tea])
            finder.find(q, [tea])  # asked again: said once
    finally:
        pdf.with_name("moved.pdf").rename(pdf)
        svc._passages = None
    assert ps.hits, "the stored chunk still gives passages"
    said = [r.getMessage() for r in caplog.records]
    assert sum("no longer there" in m for m in said) == 1, said
    assert not any("not a valid PDF" in m for m in said), said


def test_eval_qa_rows_say_where_a_cfrag_question_spent_its_time(svc: RagService) -> None:
    """Eval-qa's CF-RAG row carries the trace's cost per group of generator calls."""
    from rag_desktop.app.qa_eval import cf_digest
    from rag_desktop.core.cfrag import cfrag_result

    res = cfrag_result(svc.cfrag(Q_AROMA))
    digest = cf_digest(res.trace)
    steps = digest["cf_steps"]
    # and each hypothesis's arbitration scores, in the hypotheses' order
    hyps = res.trace.hypotheses
    assert hyps and digest["psi"] == [round(h.psi, 4) for h in hyps]
    assert digest["phi_causal"] == [round(h.phi_causal, 4) for h in hyps]
    assert [s["step"] for s in steps] == [u.step for u in res.trace.generation]
    assert {"counterfactuals", "hypotheses"} <= {s["step"] for s in steps}
    for s, u in zip(steps, res.trace.generation, strict=True):
        assert (s["calls"], s["prompt_tokens"], s["completion_tokens"]) == (u.calls, u.prompt_tokens,
                                                                            u.completion_tokens)
        assert s["calls"] >= 1 and s["prompt_tokens"] > 0 and s["seconds"] >= 0
