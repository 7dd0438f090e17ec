"""Which chunks of a document-level hit its answer passages are looked for in: the fusion of
similarity and BM25 (app.passages.best_chunks), against a slow reference, and on a real library
where the chunk that names the question's identifier is not among the nearest by similarity."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from library_helpers import ingest_texts

from rag_desktop.app.passages import CHUNKS_PER_DOC, best_chunks
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
        assert len({h.unit_id for h in with_kw.hits}) <= CHUNKS_PER_DOC
