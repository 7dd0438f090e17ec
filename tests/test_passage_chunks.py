"""Which chunks of document-level hits their answer passages are looked for in: the fusion of
similarity and BM25 (app.passages.best_chunks), against a slow reference; on a real library where
the chunk that names the question's identifier is not among the nearest by similarity; and across
documents, where the best chunks of all the hits are read, in the column's order."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
from library_helpers import ingest_texts

from rag_desktop.app.passages import MIN_DOC_CHUNKS, best_chunks
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings


def _reference(by_similarity: list[int], keyword: dict[int, float]) -> list[int]:
    """RRF with k = 60 written out: 1/(60 + similarity rank) + 1/(60 + BM25 rank) where matched."""
    kw_rank = {c: r for r, c in enumerate(sorted((c for c in by_similarity if keyword.get(c, 0) > 0),
                                                 key=lambda c: -keyword[c]), start=1)}
    score = {c: 1 / (60 + r) + (1 / (60 + kw_rank[c]) if c in kw_rank else 0.0)
             for r, c in enumerate(by_similarity, start=1)}
    return sorted(by_similarity, key=lambda c: (-score[c], min(by_similarity.index(c) + 1, kw_rank.get(c, 10**9))))


@pytest.mark.parametrize(("sim", "kw"), [
    ([1, 2, 3, 4], {4: 5.0, 3: 1.0}),
    ([7, 5, 9], {}),
    ([10, 11, 12, 13, 14, 15], {15: 0.5, 10: 0.4, 99: 9.0}),  # 99 is another document's chunk
    ([3, 1, 2], {1: 2.0, 2: 2.0}),
])
def test_best_chunks_is_the_reciprocal_rank_fusion_of_similarity_and_bm25(sim: list[int], kw: dict[int, float]) -> None:
    assert best_chunks(sim, kw) == _reference(sim, kw)
    assert sorted(best_chunks(sim, kw)) == sorted(sim)  # a reordering of the document's own chunks


FILLER = ("The --dpi option of a printer driver sets its default resolution in dots per inch; what is the "
          "default of the dpi option is shown in the driver's options dialog. ")
NAMED = "Also, kpsewhich takes -D as a synonym for its --dpi option, whose default is 600. "
TOPICS = ["Screens", "Laser printers", "Inkjet printers", "Scanners", "Photo paper", "Ink", "Toner", "Cables"]


def test_the_chunk_naming_the_question_identifier_is_read_though_similarity_puts_others_nearer(
        tmp_path: Path) -> None:
    parts = [f"{t}.\n\n" + FILLER * 30 for t in TOPICS[:4]]
    parts.insert(2, "Garden notes.\n\n" + "Tomatoes need sun and water every morning. " * 50 + NAMED
                 + "Basil grows well beside them in the same bed. " * 30)
    text = "\n\n".join(parts + [f"{t}.\n\n" + FILLER * 30 for t in TOPICS[4:]])
    svc = ingest_texts(tmp_path, {"manual.txt": text, "other.txt": "Cooking rice takes twenty minutes. " * 40},
                       Settings().replace("retrieval", level="doc"))
    with contextlib.closing(svc):
        question = "What is the default of the --dpi option of kpsewhich?"
        hit = next(h for h in svc.compare(question).baseline.hits if h.path.endswith("manual.txt"))
        finder = svc.passage_finder()
        assert finder.keyword is not None
        with_kw = finder.find(question, [hit])
        assert any("kpsewhich" in h.text for h in with_kw.hits)
        finder.keyword = None  # similarity alone: the page that names kpsewhich is not among the nearest
        try:
            without = finder.find(question, [hit])
        finally:
            svc._passages = None
        assert not any("kpsewhich" in h.text for h in without.hits)
        assert len({h.unit_id for h in with_kw.hits}) <= MIN_DOC_CHUNKS  # one hit: its two best chunks


BELLS = ["The tower's bells ring at noon on weekdays, and the great bell, cast in 1652, weighs 4.2 tonnes. ",
         "The bell ringers practise the change ringing of the tower's bells every Tuesday evening. ",
         "The tower's smallest bell, the treble, was recast in 1911 after it cracked in a frost. ",
         "Visitors may climb to the tower's bell chamber on Saturdays to watch the bells being rung. "]
OTHERS = {"garden.txt": "The herb garden grows thyme, sage and rosemary beside the south wall. ",
          "cafe.txt": "The cafe serves soup and bread at lunchtime and closes at four. ",
          "library.txt": "The reading room opens at nine; the tower can be seen from its windows. ",
          "parking.txt": "The car park beside the tower fills early on market days. "}


def _reference_chunks(svc: RagService, question: str, doc_ids: list[int], n: int) -> list[int]:
    """Written out: every chunk of the documents, by cosine to the question, fused by RRF (k = 60)
    with its BM25 order, the first n."""
    finder = svc.passage_finder()
    qv = finder.embedder.embed_queries([question])[0]
    vecs = svc.library.catalog.chunk_vectors_of(doc_ids)
    rows = [(cid, float(np.dot(v, qv))) for d in doc_ids for cid, v in vecs.get(d, [])]
    by_sim = [cid for cid, _ in sorted(rows, key=lambda r: -r[1])]
    return _reference(by_sim, dict(finder.keyword(question)))[:n]


def test_document_hits_are_read_through_the_best_chunks_of_all_of_them_in_the_columns_order(
        tmp_path: Path) -> None:
    # One document about the bells, long enough for several chunks, and four short ones that
    # mention the tower in passing: the bells document should give most of the chunks read.
    bells = "\n\n".join(BELLS[i % 4] * 6 for i in range(8))
    svc = ingest_texts(tmp_path, {"bells.txt": bells, **{k: v * 4 for k, v in OTHERS.items()}},
                       Settings().replace("retrieval", level="doc").replace("ingest", chunk_size=600,
                                                                             chunk_overlap=50))
    with contextlib.closing(svc):
        question = "When was the great bell of the tower cast, and how much does it weigh?"
        hits = list(svc.compare(question).baseline.hits[:5])
        assert [h.level for h in hits] == ["doc"] * 5
        found = svc.passage_finder().find(question, hits)
        read = list(dict.fromkeys(h.unit_id for h in found.hits))  # chunks, in reading order
        expected = _reference_chunks(svc, question, [h.doc_id for h in hits], max(len(hits), MIN_DOC_CHUNKS))
        assert set(read) <= set(expected)
        assert len(expected) == len(hits)
        bells_id = next(h.doc_id for h in hits if h.path.endswith("bells.txt"))
        assert sum(1 for c in expected if c in {cid for cid, _ in
                                                svc.library.catalog.chunk_vectors_of([bells_id])[bells_id]}) >= 3
        rank = {h.doc_id: r for r, h in enumerate(hits)}
        doc_order = [rank[h.doc_id] for h in found.hits]
        assert doc_order == sorted(doc_order)  # the column's order is the reading order
        assert any("1652" in h.text for h in found.hits)
