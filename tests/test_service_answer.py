"""RagService.answer / translate_sources / calibrate on a real library.

The generator is a scripted collaborator (tests/test_gui_support.ScriptedGenerator); the
library, embedder, retrieval, prompt building and citation mapping are the real ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
from library_helpers import MIXED_DOCS, ingest_texts
from test_gui_support import ANSWER_TEXT, ScriptedGenerator

from rag_desktop.app.calibration import load_typed_probes, score_probes
from rag_desktop.app.service import RagService
from rag_desktop.cli.calibrate import calibrate_command
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, GenEvent, GenEventKind

pytestmark = pytest.mark.integration

DOCS = MIXED_DOCS


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    service = ingest_texts(tmp_path_factory.mktemp("svc"), DOCS, Settings().replace("retrieval", level="chunk"))
    service.runtime._generator = ScriptedGenerator()  # the collaborator; everything else is real
    return service


def test_answer_streams_and_maps_citations_to_pages(svc: RagService) -> None:
    ranked = svc.compare("Why do people fail the Wason selection task?").causal
    before = svc.settings
    svc.settings = svc.settings.replace("generation", check_citations=False)  # the model's markers as written
    try:
        events = list(svc.answer("Why do people fail the Wason selection task?", ranked, n_sources=2))
    finally:
        svc.settings = before
    tokens = [e for e in events if isinstance(e, GenEvent) and e.kind == GenEventKind.TOKEN]
    answer = events[-1]
    assert isinstance(answer, Answer)
    assert "".join(t.text for t in tokens).strip() == answer.text == ANSWER_TEXT.strip()
    assert len(answer.sources) <= 2
    for c in answer.citations:
        if c.valid:
            src = answer.sources[c.n - 1]
            assert (c.doc_id, c.page, c.path) == (src.doc_id, src.page, src.path)
        else:
            assert c.n > len(answer.sources)  # a citation to a source that was not given is flagged


def test_a_scripted_citation_its_passage_does_not_hold_is_removed_and_reported(svc: RagService) -> None:
    """With the check on (the default), a marker whose source does not hold its sentence is taken out,
    named in Answer.dropped_citations, and the sentence may be matched to the source that holds it.
    (The question names the noodles too: a source sharing no word with the question is not read at all.)"""
    q = "Why do people fail the Wason selection task, and how long do noodles cook?"
    ranked = svc.compare(q).causal
    answer = [e for e in svc.answer(q, ranked, n_sources=2) if isinstance(e, Answer)][-1]
    sources = [h.text for h in answer.sources]
    assert len(sources) == 2
    from rag_desktop.core.attribution import check_citations

    want = check_citations(ANSWER_TEXT.strip(), sources, q)
    assert answer.dropped_citations == want.dropped and answer.dropped_citations  # the noodles source holds no sentence
    assert all(f"[{n}]" not in answer.text for n, _ in answer.dropped_citations)  # its marker is gone
    assert "[9]" in answer.text  # a number naming no source is not judged: the UI flags it as invalid



def test_a_source_that_shares_no_word_with_the_question_is_not_read(svc: RagService) -> None:
    """The noodles chunk is the causal column's second hit for a Wason question but holds none of its
    terms (core.passages.termless_chunks): the prompt leaves it out, the Wason passage stays."""
    q = "Why do people fail the Wason selection task?"
    ranked = svc.compare(q).causal
    assert [h.path.rsplit("/", 1)[-1] for h in ranked.hits[:2]] == ["wason_en.txt", "noodles_en.txt"]
    answer = [e for e in svc.answer(q, ranked, n_sources=2) if isinstance(e, Answer)][-1]
    assert answer.sources and all("Wason" in h.text for h in answer.sources)


def test_the_columns_first_hit_is_read_even_when_it_shares_no_word_with_the_question(svc: RagService) -> None:
    """Only hits below the first are left out for want of a question term: the unit the column ranks first
    is read whatever its words (asked in everyday words, a statute's answering article shares none)."""
    q = "Why do people fail the Wason selection task?"
    ranked = svc.compare(q).causal
    wason, noodles = ranked.hits[:2]
    noodles_first = dataclasses.replace(ranked, hits=(noodles.with_rank(1), wason.with_rank(2)), explanations=())
    answer = [e for e in svc.answer(q, noodles_first, n_sources=2) if isinstance(e, Answer)][-1]
    assert {h.path.rsplit("/", 1)[-1] for h in answer.sources} == {"noodles_en.txt", "wason_en.txt"}


def test_foreign_chunks_are_translated_once_and_cached(svc: RagService) -> None:
    before_settings = svc.settings
    svc.settings = svc.settings.replace("generation", translate=True)  # off by default: on request
    try:
        gen = svc.runtime._generator
        assert isinstance(gen, ScriptedGenerator)
        hits = [h for h in svc.compare("中医如何治疗久咳？").baseline.hits if "wason" in h.path]
        assert hits, "the English document should be among the candidates"
        before = len(gen.calls)
        first = svc.translate_sources(hits[:1], "zh")
        assert first[0].text.startswith("TRANSLATED:")
        assert len(gen.calls) == before + 1
        again = svc.translate_sources(hits[:1], "zh")
        assert again[0].text == first[0].text and len(gen.calls) == before + 1  # cached in the library
        same_lang = [h for h in svc.compare("中医如何治疗久咳？").baseline.hits if "cough" in h.path]
        assert svc.translate_sources(same_lang[:1], "zh")[0].text == same_lang[0].text
    finally:
        svc.settings = before_settings


def test_calibration_with_typed_probes_is_stored(svc: RagService, tmp_path: Path) -> None:
    folder = Path(svc.library.catalog.documents()[0].path).parent
    probes_file = tmp_path / "probes.jsonl"
    rows = [
        {"question": "Why do people choose the matching cards?", "relevant": [str(folder / "wason_en.txt")]},
        {"question": "久咳用什么药？", "relevant": [str(folder / "cough_zh.txt")]},
        {"question": "How long do the noodles cook?", "relevant": [str(folder / "noodles_en.txt")]},
    ]
    probes_file.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    probes = load_typed_probes(svc, probes_file)
    assert len(probes) == 3
    decision = score_probes(svc, probes)
    assert decision.n_probes == 3 and decision.n_draws == 2000
    assert 0.0 <= decision.reliability <= 1.0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "x", "relevant": ["/nowhere.txt"]}), encoding="utf-8")
    with pytest.raises(ValueError, match="none of the relevant files"):
        load_typed_probes(svc, bad)


def test_calibrate_command_stores_the_gate(svc: RagService, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(svc.library.catalog.documents()[0].path).parent
    probes_file = tmp_path / "p.jsonl"
    probes_file.write_text(json.dumps({"question": "matching bias in the selection task",
                                       "relevant": [str(folder / "wason_en.txt")]}) + "\n"
                           + json.dumps({"question": "止嗽散", "relevant": [str(folder / "cough_zh.txt")]}),
                           encoding="utf-8")
    other = RagService(svc.library.folder, svc.settings)
    args = argparse.Namespace(probes_file=probes_file, json=True)
    assert calibrate_command(args, other) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["decision"]["decision"] in ("causal", "hybrid", "neither")
    assert "only 2 probes were scored" in captured.err  # too few for the bootstrap to mean much
    stored = svc.library.catalog.get_json("gate")
    assert stored["n_probes"] == 2 and stored["labels"] == "typed" and stored["seconds"] >= 0
    from rag_desktop.app.library_gate import fingerprint

    assert stored["fingerprint"] == fingerprint(svc.library.catalog)  # holds: the library's own gate leaves it
    gated = RagService(svc.library.folder, svc.settings.replace("retrieval", default_method="gated"))
    try:
        assert gated.causal_variant() in ("causal", "hybrid")
        v = gated.verdict()
        assert v.reason == "gate" and v.calibrated_by == "person" and v.gate == stored
    finally:
        gated.close()


def test_wizard_probes_come_from_sampled_chunks(svc: RagService) -> None:
    from rag_desktop.app.calibration import Probe, generate_probes

    events = list(generate_probes(svc, 2, seed=3))
    probes = [e for e in events if isinstance(e, Probe)]
    assert len(probes) == 2
    doc_ids = {d.doc_id for d in svc.library.catalog.documents()}
    for p in probes:
        assert p.source == "generated" and p.question and len(p.relevant) == 1 and p.relevant <= doc_ids


def test_a_column_handing_the_model_the_last_prompt_shows_that_answer_without_writing_it(svc: RagService) -> None:
    """Two columns whose answers read the same passages (the same prompt) get one written answer: the
    second is the first's, with its own column's method; a new seed or an unfinished answer writes again."""
    q = "Why do people fail the Wason selection task?"
    ranked = svc.compare(q).causal
    gen = svc.runtime._generator
    assert isinstance(gen, ScriptedGenerator)

    def answer(r: object) -> tuple[list[object], Answer]:
        events = list(svc.answer(q, r, n_sources=2))  # type: ignore[arg-type]
        assert isinstance(events[-1], Answer)
        return events, events[-1]

    _, first = answer(ranked)
    calls = len(gen.calls)
    events, second = answer(dataclasses.replace(ranked, method="baseline"))
    assert len(gen.calls) == calls  # not written again
    assert second.method == "baseline" and first.method == ranked.method
    assert (second.text, second.sources, second.locators, second.warnings) == (
        first.text, first.sources, first.locators, first.warnings)
    tokens = [e for e in events if isinstance(e, GenEvent) and e.kind == GenEventKind.TOKEN]
    assert tokens and "".join(t.text for t in tokens).strip() == ANSWER_TEXT.strip()  # a pane still sees its text
    assert any(isinstance(e, GenEvent) and e.kind == GenEventKind.DONE for e in events)

    before = svc.settings
    svc.settings = svc.settings.replace("generation", seed=before.generation.seed + 1)
    try:
        answer(ranked)
        assert len(gen.calls) == calls + 1  # another seed: another text, written
    finally:
        svc.settings = before
    answer(ranked)
    assert len(gen.calls) == calls + 1  # the first seed's answer is still among the newest few kept
    from rag_desktop.app.service import KEPT_PROMPTS

    for seed in range(KEPT_PROMPTS):  # as many other prompts after it: no longer kept
        svc.settings = svc.settings.replace("generation", seed=before.generation.seed + 2 + seed)
        answer(ranked)
    svc.settings = before
    answer(ranked)
    assert len(gen.calls) == calls + 2 + KEPT_PROMPTS

    from rag_desktop.core.types import CancelToken

    stop = CancelToken()
    for ev in svc.answer("Why do people fail the four-card problem?", ranked, n_sources=2, cancel=stop):
        if isinstance(ev, GenEvent) and ev.kind == GenEventKind.TOKEN:
            stop.set()  # stopped after its first words
    n = len(gen.calls)
    list(svc.answer("Why do people fail the four-card problem?", ranked, n_sources=2))
    assert len(gen.calls) == n + 1  # a stopped answer is not kept
