"""The keyword leg: BM25 against a slow reference, and the candidate pool it joins (real library, e5-small)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from library_helpers import ingest_texts

from rag_desktop.app.service import RagService
from rag_desktop.core.bm25 import K1, B, Bm25Index
from rag_desktop.core.prompting import ANSWER_SOURCES, OWN_SOURCES
from rag_desktop.core.settings import Settings


def reference_bm25(units: list[tuple[int, dict[str, int]]], query: list[str]) -> dict[int, float]:
    """Robertson & Zaragoza (2009) Eq. 3.15 with the Lucene idf, term by term, unit by unit."""
    n = len(units)
    avgdl = sum(sum(c.values()) for _, c in units) / n
    out = {}
    for uid, counts in units:
        dl = sum(counts.values())
        total = 0.0
        for t in query:
            df = sum(1 for _, c in units if t in c)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = counts.get(t, 0)
            total += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))
        out[uid] = total
    return out


TERMS = st.sampled_from(["rotor", "pad", "cable", "bud", "cane", "dough", "税", "扣除"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.dictionaries(TERMS, st.integers(1, 9), min_size=1)),
                min_size=1, max_size=12, unique_by=lambda r: r[0]),
       st.lists(TERMS, min_size=1, max_size=5))
def test_bm25_matches_the_reference(units: list[tuple[int, dict[str, int]]], query: list[str]) -> None:
    index = Bm25Index(units)
    ref = reference_bm25(units, query)
    got = dict(zip(index.unit_ids.tolist(), index.scores(query).tolist(), strict=True))
    assert got == pytest.approx(ref)
    top = index.top(query, 3)
    want = sorted(((u, s) for u, s in ref.items() if s > 0), key=lambda us: (-us[1], us[0]))[:3]
    assert [u for u, _ in top] == [u for u, _ in want]


def test_an_unknown_term_and_an_empty_index_score_nothing() -> None:
    assert Bm25Index([]).top(["x"], 5) == []
    assert Bm25Index([(1, {"a": 1})]).top(["zzz"], 5) == []


DOCS = {f"note{i:02d}.txt": f"Maintenance note {i}\n\nThe workshop checks the frame, the wheels and the chain "
                            f"of bicycle number {i} before it goes back to the fleet." for i in range(24)}
DOCS["flag.txt"] = ("Command reference\n\nThe --prune-orphans flag of fleetctl removes records whose owner "
                    "was deleted; run it after every audit.")


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    return ingest_texts(tmp_path_factory.mktemp("bm25"), DOCS, Settings().replace("retrieval", k=3, keyword_k=5))


def test_the_pool_adds_the_keyword_hits_and_stays_in_similarity_order(svc: RagService) -> None:
    q = "how is the chain of a bicycle in the fleet checked with fleetctl?"
    comp = svc.compare(q)
    dense = svc.retriever().baseline(svc.context(q).query_vec, "doc", 3, 0.0)
    ids = [h.unit_id for h in comp.baseline.hits]
    assert {h.unit_id for h in dense} <= set(ids) and len(ids) > len(dense)  # the keyword leg added units
    sims = [h.s_sim for h in comp.baseline.hits]
    assert sims == sorted(sims, reverse=True)  # the Baseline column is plain similarity order
    assert [h.rank for h in comp.baseline.hits] == list(range(1, len(ids) + 1))
    flag = next(h for h in comp.baseline.hits if h.path.endswith("flag.txt"))
    ctx = svc.context(q)
    assert ctx.keyword is not None and ctx.keyword.hits[0].unit_id == flag.unit_id  # BM25's best
    # the answer reads the column's order fused with the BM25 order: the named page reaches the sources
    # the model reads, above its similarity place, right after the column's own first OWN_SOURCES
    answer = comp.answer_list("baseline")
    at = [h.unit_id for h in answer.hits].index(flag.unit_id) + 1
    assert at == OWN_SOURCES + 1 <= ANSWER_SOURCES and at < flag.rank
    assert [h.unit_id for h in answer.hits[:OWN_SOURCES]] == ids[:OWN_SOURCES]  # the column's own head
    assert {h.unit_id for h in answer.hits} == set(ids)  # same pool, another order
    assert "keyword top 5" in comp.baseline.label


def test_no_keyword_leg_keeps_the_dense_candidates(svc: RagService) -> None:
    other = RagService(svc.library.folder, svc.settings.replace("retrieval", keyword_k=0))
    try:
        comp = other.compare("what does fleetctl prune-orphans do")
        assert len(comp.baseline.hits) == 3 and comp.answer_lists == {}
        assert comp.answer_list("baseline") is comp.baseline
    finally:
        other.close()
