"""The library's own gate (inverse-cloze probes, no generator): probes, masking, the §4.6 decision.

The library, the embedder and the re-rankings are the real ones (the embedded e5-small); the
masked score is checked against a slow reference computed from the stored vectors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from library_helpers import ingest_texts

from rag_desktop.app import self_gate
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings

DOCS = {
    "brakes.txt": "Bicycle brakes\n\nRim brakes squeeze the wheel rim with two rubber pads pulled by a cable. "
                  "Disc brakes grip a steel rotor bolted to the hub and keep working in the rain. "
                  "Check the pads every month and replace them when the grooves are worn away.",
    "roses.txt": "Pruning roses\n\nCut each cane just above an outward-facing bud in late winter. "
                 "Remove dead, damaged and crossing stems first, then thin the centre for air. "
                 "Feed the plant with a balanced fertiliser once new shoots appear in spring.",
    "bread.txt": "Sourdough bread\n\nA starter of flour and water ferments for a week before the first bake. "
                 "Mix the dough, let it rest for an hour, then fold it every thirty minutes. "
                 "Bake the loaf in a covered pot so the steam lets the crust expand before it sets.",
    "tax_zh.txt": "个人所得税\n\n居民个人的综合所得以每一纳税年度的收入额减除费用六万元后的余额为应纳税所得额。"
                  "专项附加扣除包括子女教育、继续教育、大病医疗、住房贷款利息和住房租金等支出。"
                  "纳税人应当在取得所得的次年三月一日至六月三十日内办理汇算清缴。"
                  "扣缴义务人每月或者每次预扣代扣的税款，应当在次月十五日内缴入国库，并向税务机关报送扣缴个人所得税申报表。",
}


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    return ingest_texts(tmp_path_factory.mktemp("selfgate"), DOCS)


def test_sentences_and_a_probe_cut_from_them() -> None:
    text = DOCS["brakes.txt"]
    parts = self_gate.sentences(text)
    assert parts[0] == "Bicycle brakes" and parts[1].startswith("Rim brakes squeeze")
    zh = self_gate.sentences(DOCS["tax_zh.txt"])
    assert any(s.startswith("专项附加扣除") and s.endswith("。") for s in zh)
    got = self_gate.probe_from(text, np.random.default_rng(0))
    assert got is not None
    sentence, rest = got
    assert self_gate.MIN_SENTENCE <= len(sentence) <= self_gate.MAX_SENTENCE
    assert sentence in text and sentence not in rest and len(rest) >= self_gate.MIN_REST
    # a text of one short line has nothing to cut
    assert self_gate.probe_from("Too short.", np.random.default_rng(0)) is None


def test_plan_is_seeded_and_takes_one_probe_per_document_first() -> None:
    chunks = {i: [(10 * i, text)] for i, text in enumerate(DOCS.values(), start=1)}
    plan = self_gate.plan_probes(lambda d: chunks[d], list(chunks), n=4, seed=3)
    assert plan == self_gate.plan_probes(lambda d: chunks[d], list(chunks), n=4, seed=3)
    assert sorted(p.doc_id for p in plan) == [1, 2, 3, 4]
    more = self_gate.plan_probes(lambda d: chunks[d], list(chunks), n=8, seed=3)
    assert len(more) > 4 and len({p.text for p in more}) == len(more)  # a sentence is asked once


def test_the_source_is_scored_without_its_sentence(svc: RagService) -> None:
    r = svc.retriever()
    cat = svc.library.catalog
    doc = next(d for d in cat.documents() if d.path.endswith("brakes.txt"))
    chunk = cat.chunks_of(doc.doc_id)[0]
    got = self_gate.probe_from(chunk.text, np.random.default_rng(1))
    assert got is not None
    probe = self_gate.Probe(got[0], doc.doc_id, chunk.chunk_id, got[1])
    qv = r.embedder.embed_queries([probe.text])[0]
    mv = r.embedder.embed_passages([probe.masked])[0]
    hits = self_gate.masked_hits(r, probe, qv, mv, "doc", 20)
    # the slow reference: the document's stored chunk vectors with the masked one swapped in, mean-pooled
    rows = cat.chunk_vectors_of([doc.doc_id])[doc.doc_id]
    vs = np.stack([mv if cid == chunk.chunk_id else v for cid, v in rows]).astype(np.float64)
    ref = vs.mean(axis=0)
    ref /= np.linalg.norm(ref)
    q = qv.astype(np.float64) / np.linalg.norm(qv)
    src = next(h for h in hits if h.unit_id == doc.doc_id)
    assert src.s_sim == pytest.approx(float(ref @ q), abs=1e-5)
    unmasked = cat.chunk_vectors_of([doc.doc_id])[doc.doc_id][0][1].astype(np.float64)
    assert src.s_sim < float(unmasked @ q / np.linalg.norm(unmasked))  # its own words no longer count
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    sims = [h.s_sim for h in hits]
    assert sims == sorted(sims, reverse=True)


def test_a_decision_with_its_record_and_no_generator(svc: RagService) -> None:
    rec = self_gate.self_calibrate(svc.retriever(), "doc", 20, ("causal", "hybrid"), "fp", n=8)
    assert rec is not None and svc.runtime._generator is None  # nothing asked a model
    assert rec.n_probes == len(rec.probes) >= 4 and rec.labels == self_gate.SELF_LABELS
    assert rec.decision in ("causal", "hybrid", "neither") and 0.0 <= rec.reliability <= 1.0
    # the deltas are the probes' own reciprocal ranks, as §4.6 takes them
    rr = {m: np.mean([self_gate.reciprocal(p[i]) for p in rec.probes]) for m, i in
          (("baseline", 2), ("causal", 3), ("hybrid", 4))}
    assert rec.delta_hybrid == pytest.approx(rr["hybrid"] - rr["baseline"])
    assert rec.delta_causal == pytest.approx(rr["causal"] - rr["baseline"])
    assert rec.to_json()["fingerprint"] == "fp"


def test_an_empty_library_has_no_decision(tmp_path: Path) -> None:
    empty = RagService(tmp_path / "lib", Settings())
    try:
        assert self_gate.self_calibrate(empty.retriever(), "doc", 20, ("causal", "hybrid"), "fp") is None
    finally:
        empty.close()
