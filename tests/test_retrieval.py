"""Retriever's query-time caches (K_d sets in memory, term vectors from the catalog).

The fast path reads every candidate's K_d and E(t) in two batched reads and keeps the sets
in a bounded LRU; these tests hold it to a plain per-unit reading of the catalog, with the
real embedded embedder and jieba on a small ingested library.
"""

from __future__ import annotations

import numpy as np
import pytest
from library_helpers import ingest_texts

import rag_desktop.app.retrieval as retrieval
from rag_desktop.app.service import RagService

pytestmark = pytest.mark.integration

TEXTS = {
    f"note{i}.txt": text
    for i, text in enumerate(
        [
            "数据出境安全评估指南：先自评估，再向主管部门申报，最后组织审查并出具结论。" * 4,
            "汽车数据出境需要安全评估，数据安全和出境安全都很重要。" * 4,
            "The Wason selection task: people rarely choose the card that could falsify a rule. " * 4,
            "Boil water, add noodles, cook for five minutes, drain and serve with sauce. " * 4,
            "Travel expenses: hotel costs are reimbursed up to the city's standard rate per night. " * 4,
            "差旅费报销：住宿费按城市标准报销，超出部分由个人承担。" * 4,
        ]
    )
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    return ingest_texts(tmp_path_factory.mktemp("retr"), TEXTS)


def test_candidate_terms_equal_a_per_unit_reading_of_the_catalog(service: RagService) -> None:
    r = service.retriever()
    for level, unit in (("doc", "d"), ("chunk", "c")):
        ctx = r.context("数据出境安全评估怎么申报？", level=level)  # type: ignore[arg-type]
        assert ctx.baseline.hits
        top = r.settings.retrieval.doc_keywords
        for hit, ts in zip(ctx.baseline.hits, ctx.candidate_terms, strict=True):
            ref_kws = service.library.catalog.keywords(unit, [hit.unit_id])[hit.unit_id][:top]
            ref_vecs = service.library.catalog.term_vectors(k.term for k in ref_kws)
            assert ts.keywords == tuple(ref_kws)
            np.testing.assert_array_equal(ts.vectors, np.stack([ref_vecs[k.term] for k in ref_kws]))
            # unit rows are the rows scaled to length 1 (shared with vectors when they already are)
            np.testing.assert_allclose(np.linalg.norm(ts.unit, axis=1), 1.0, atol=1e-6)


def test_k_d_cache_is_bounded_and_keeps_recent_units(service: RagService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieval, "K_D_CACHE_UNITS", 2)
    r = retrieval.Retriever(service.library, service.runtime.embedder(), service.runtime.tokenizer(), service.settings)
    questions = ["How are hotel costs reimbursed?", "Wason selection task", "差旅费住宿标准", "noodles sauce"]
    for q in questions:
        ctx = r.context(q, level="doc", k=3)
        # the bound is max(limit, window): the current question's candidates always stay
        assert len(r._k_d) <= max(2, len(ctx.baseline.hits))
        assert all(("d", h.unit_id) in r._k_d for h in ctx.baseline.hits)
    # a cached and a re-read K_d are the same set
    ctx = r.context(questions[-1], level="doc", k=3)
    again = r.candidate_terms(list(ctx.baseline.hits), "doc")
    r._k_d.clear()
    fresh = r.candidate_terms(list(ctx.baseline.hits), "doc")
    for a, b in zip(again, fresh, strict=True):
        assert a.keywords == b.keywords
        np.testing.assert_array_equal(a.vectors, b.vectors)


def test_repeated_question_encodes_nothing_new(service: RagService, monkeypatch: pytest.MonkeyPatch) -> None:
    r = service.retriever()
    q = "Which hotel rate applies to travel expenses?"
    r.context(q, level="doc")
    calls: list[int] = []
    orig = r.embedder.embed_terms

    def counted(terms: object) -> object:
        calls.append(len(terms))  # type: ignore[arg-type]
        return orig(terms)  # type: ignore[arg-type]

    monkeypatch.setattr(r.embedder, "embed_terms", counted)
    fresh = retrieval.Retriever(service.library, r.embedder, r.tokenizer, r.settings)
    ctx = fresh.context(q, level="doc")  # a new session: every E(t) comes from the library's cache
    assert ctx.query_terms.keywords and ctx.candidate_terms
    assert calls == []
