"""The retrieval variants (s_c on the encoder's scale, E(t) on surface forms) and the fixes it carries:
the empty-B rule setting reaches the Retriever; a re-embed drops every encoder-scale cache."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from library_helpers import ingest_texts

from rag_desktop.app.library import IngestReport
from rag_desktop.app.retrieval import parse_variant, variant_names
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings, SettingsError

TEXTS = {
    "series.txt": "The lecture series on reasoning\n\nThe series continues in February. Each series talk "
    "covers reasoning studies; the February series session is in the department of psychology.",
    "cards.txt": "Selection task results\n\nMost people turn the A card and the 4 card; the logically correct "
    "choice is A and 7, chosen by fewer than one person in ten.",
    "tea.txt": "Brewing green tea\n\nUse water at 75 to 80 degrees and steep the leaves for two minutes.",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("variants")
    ingest_texts(root, TEXTS).close()
    return root


@pytest.fixture()
def lib(built: Path, tmp_path: Path) -> Path:
    shutil.copytree(built / "library", tmp_path / "library")
    return tmp_path / "library"


def test_variant_names_parse() -> None:
    assert parse_variant("hybrid") == ("hybrid", "semantic", None, None)
    assert parse_variant("causal_fb@contrast") == ("causal", "semantic", "fallback", "contrast")
    assert "hybrid@centred_idf" in variant_names()
    with pytest.raises(ValueError, match="unknown re-ranking"):
        parse_variant("hybrid@whitened")
    with pytest.raises(SettingsError, match=r"retrieval\.score_variant"):
        Settings().replace("retrieval", score_variant="whitened")


def test_empty_b_rule_setting_reaches_the_retriever(lib: Path) -> None:
    """The Settings dialog offers retrieval.empty_b_rule; the Retriever used a hard-coded rule."""
    for rule in ("demote", "fallback"):
        svc = RagService(lib, Settings().replace("retrieval", empty_b_rule=rule))
        try:
            r = svc.retriever()
            ctx = r.context("what do people choose in the selection task", "doc")
            for variant in ("causal", "hybrid", "causal_exact", "hybrid_exact"):
                _, diag = r.rerank(ctx, variant)
                assert diag.empty_b_rule == rule, variant
            assert r.rerank(ctx, "causal_fb")[1].empty_b_rule == "fallback"  # the §4.5 ablation keeps its rule
        finally:
            svc.close()


def test_score_variants_rank_with_the_library_means(lib: Path) -> None:
    svc = RagService(lib, Settings())
    try:
        r = svc.retriever()
        ctx = r.context("what do people choose in the selection task", "doc")
        term_mean, doc_mean = r.score_means()
        assert term_mean.shape == doc_mean.shape == (r.embedder.dim,)
        # μ_D is the mean of the unit document vectors.
        docs = np.stack([v for _, v in svc.library.catalog.iter_vectors("doc")]).astype(np.float64)
        np.testing.assert_allclose(doc_mean, (docs / np.linalg.norm(docs, axis=1, keepdims=True)).mean(0), atol=1e-6)
        cached = svc.library.catalog.get_json("score_means")
        assert cached is not None and cached["key"][0] == svc.library.catalog.get_meta("embedder")
        for s in ("paper", "centred", "idf", "contrast", "centred_idf", "context"):
            ranked, _ = r.rerank(ctx, f"hybrid@{s}")
            assert ranked.method == ("hybrid" if s == "paper" else f"hybrid@{s}")
            assert sorted(h.unit_id for h in ranked.hits) == sorted(h.unit_id for h in ctx.baseline.hits)
        # The setting picks the variant of the plain names.
        svc.update_settings(svc.settings.replace("retrieval", score_variant="contrast"))
        assert svc.retriever().rerank(ctx, "hybrid")[0].method == "hybrid@contrast"
    finally:
        svc.close()


def test_context_score_embeds_b_in_its_sentences_once(lib: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"context": v_B is the passage embedding of the candidate's sentences that hold B, the query's
    and A's words deleted; one encoder call per new question, none when it is asked again."""
    from rag_desktop.core.causal import ContextRequest

    svc = RagService(lib, Settings())
    try:
        r = svc.retriever()
        ctx = r.context("what do people choose in the selection task", "doc")
        calls: list[list[str]] = []
        real = r.embedder.embed_passages

        def spy(texts: Sequence[str]) -> np.ndarray:
            calls.append(list(texts))
            return real(texts)

        monkeypatch.setattr(r.embedder, "embed_passages", spy)
        ranked, _ = r.rerank(ctx, "causal@context")
        assert ranked.method == "causal@context"
        assert sorted(h.unit_id for h in ranked.hits) == sorted(h.unit_id for h in ctx.baseline.hits)
        assert len(calls) == 1 and 0 < len(calls[0]) <= len(ctx.baseline.hits)
        assert all(len(t) <= 512 for t in calls[0])
        assert r.rerank(ctx, "hybrid@context")[0].method == "hybrid@context"
        assert len(calls) == 1  # the same contexts: no second call
        cards = next(h for h in ctx.baseline.hits if h.path.endswith("cards.txt"))
        req = ContextRequest(0, frozenset({"peopl", "select", "task"}), (("card", 1.0),))
        assert r.b_context_text(cards, "doc", req) == (
            "Most turn the A card and the 4 card; the logically correct choice is A and 7, chosen by fewer "
            "than one person in ten.")
    finally:
        svc.close()


def test_term_vectors_embed_surface_forms_in_a_later_session(lib: Path) -> None:
    """E(t) is the embedding of the word, not of its Snowball stem ("seri", "februari").

    A term that enters a keyword set only at a later refresh (its file was ingested in an earlier
    session, so this session's tokenizer never saw the word) used to be embedded as the stem."""
    svc = RagService(lib, Settings())
    try:
        cat = svc.library.catalog
        assert cat.surfaces(["seri", "februari"]) == {"seri": "series", "februari": "february"}
        with cat.transaction() as db:  # as if they had not been embedded at their ingest
            db.execute("DELETE FROM term_vectors WHERE term IN ('seri', 'februari')")
            cat.set_meta("keywords_dirty", "1")
        # A new session: a fresh tokenizer that has tokenized nothing yet.
        tok = svc.runtime.tokenizer()
        tok.load()
        recorded: list[Sequence[str]] = []
        emb = svc.runtime.embedder()
        real = emb.embed_terms

        def spy(terms: Sequence[str]) -> np.ndarray:
            recorded.append(list(terms))
            return real(terms)

        emb.embed_terms = spy  # type: ignore[method-assign]
        fresh_tok = type(tok)()
        fresh_tok.load()
        svc.library.refresh_keywords(fresh_tok, emb)
        assert cat.surfaces(["seri", "februari"]) == {"seri": "series", "februari": "february"}
        flat = [t for call in recorded for t in call]
        assert "series" in flat and "seri" not in flat and "februari" not in flat
        np.testing.assert_allclose(cat.term_vectors(["seri"])["seri"], real(["series"])[0], atol=1e-6)
    finally:
        svc.close()


class OtherEncoder:
    """Another encoder (a collaborator): e5's vectors moved off its scale, under another identity."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        rng = np.random.default_rng(0)
        self.shift = rng.normal(size=inner.dim).astype(np.float32)  # type: ignore[attr-defined]

    identity = "other-encoder"

    @property
    def dim(self) -> int:
        return int(self.inner.dim)  # type: ignore[attr-defined]

    def load(self) -> None:
        self.inner.load()  # type: ignore[attr-defined]

    def _f(self, v: np.ndarray) -> np.ndarray:
        w = v + self.shift
        return (w / np.linalg.norm(w, axis=1, keepdims=True)).astype(np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._f(self.inner.embed_queries(texts))  # type: ignore[attr-defined]

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._f(self.inner.embed_passages(texts))  # type: ignore[attr-defined]

    def embed_terms(self, terms: Sequence[str]) -> np.ndarray:
        return self._f(self.inner.embed_terms(terms))  # type: ignore[attr-defined]


def test_reembed_drops_encoder_scale_caches(lib: Path, built: Path) -> None:
    """After ingest --reembed with another encoder the cached cos_baseline and the stored
    gate decision survived (and the code deleted a meta key 'tau' that nothing writes)."""
    svc = RagService(lib, Settings())
    try:
        cat = svc.library.catalog
        old_b = svc.library.cosine_baseline()
        svc.retriever().score_means()
        cat.set_json("gate", {"decision": "causal", "n_probes": 30, "reliability": 0.97})
        old_tau = cat.get_meta("tau_auto")
        assert old_tau is not None and cat.get_json("cos_baseline") is not None
        other = OtherEncoder(svc.runtime.embedder())
        tok = svc.runtime.tokenizer()
        events = list(svc.library.ingest([built / "docs"], other, tok, reembed=True))  # type: ignore[arg-type]
        assert isinstance(events[-1], IngestReport) and len(events[-1].added) == len(TEXTS)
        assert cat.get_meta("embedder") == "other-encoder"
        assert cat.get_json("gate") is None
        assert cat.get_json("score_means") is None
        new_b = svc.library.cosine_baseline()
        ids = sorted(cat.unit_ids("chunk"))
        vecs = np.stack([v for _, v in cat.iter_vectors("chunk")]).astype(np.float64)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        sims = vecs @ vecs.T
        assert len(ids) == len(vecs)
        assert new_b == pytest.approx(float(sims[np.triu_indices(len(vecs), k=1)].mean()), abs=1e-6)
        assert abs(new_b - old_b) > 1e-3
        assert cat.get_meta("tau_auto") is not None and cat.get_meta("tau_auto") != old_tau
    finally:
        svc.close()
