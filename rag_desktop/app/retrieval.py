"""Baseline retrieval (Eq. 1–2) over a library and the re-rankings built on it.

Everything per query is cheap: the keyword sets K_d and their term vectors E(t)
were stored at ingest, so re-ranking reads rows and does numpy arithmetic; the
only encoder calls are E(q) and the query's own terms (cached in the library).
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rag_desktop.app.library import Library
from rag_desktop.core import keywords as kw
from rag_desktop.core import prompting
from rag_desktop.core.bm25 import Bm25Index
from rag_desktop.core.causal import (
    SCORE_VARIANTS,
    STATS_VARIANTS,
    Absorption,
    CausalConfig,
    CausalDiagnostics,
    EmptyBRule,
    LibraryStats,
    Method,
    ScoreVariant,
    TermSet,
    rerank,
)
from rag_desktop.core.causal_context import ContextEncoder, ContextRequest, WordSpan, b_context
from rag_desktop.core.errors import UserInputError
from rag_desktop.core.fusion import fuse
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.protocols import CrossEncoder, Embedder, Tokenizer
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Hit, Keyword, Level, RankedList

# The rerank variants the eval command and the UI know, as (method, absorption, empty-B rule).
# A rule of None is the setting retrieval.empty_b_rule (the Settings dialog offers it,
# and a hard-coded "demote" here made that control do nothing); "causal_fb" is the paper's
# §4.5 ablation and always falls back.
VARIANTS: dict[str, tuple[Method, Absorption, EmptyBRule | None]] = {
    "causal_exact": ("causal", "exact", None),
    "causal": ("causal", "semantic", None),
    "causal_fb": ("causal", "semantic", "fallback"),
    "hybrid": ("hybrid", "semantic", None),
    "hybrid_exact": ("hybrid", "exact", None),
}


def variant_names() -> tuple[str, ...]:
    """Every name ``Retriever.rerank`` accepts: a VARIANTS key, optionally ``@score`` (a ScoreVariant)."""
    return (*VARIANTS, *(f"{v}@{s}" for v in VARIANTS for s in SCORE_VARIANTS))


def parse_variant(name: str) -> tuple[Method, Absorption, EmptyBRule | None, ScoreVariant | None]:
    """``"hybrid@centred"`` → (hybrid, semantic, rule from settings, centred); no ``@``: score from settings."""
    base, _, score = name.partition("@")
    if base not in VARIANTS or (score and score not in SCORE_VARIANTS):
        raise UserInputError(f"unknown re-ranking {name!r}; choose from {', '.join(variant_names())}")
    method, absorption, rule = VARIANTS[base]
    return method, absorption, rule, (score or None)


@dataclass(frozen=True)
class QueryContext:
    """What every ranking of one question shares."""

    query: str
    level: Level
    query_vec: npt.NDArray[np.float32]
    query_terms: TermSet
    baseline: RankedList
    candidate_terms: tuple[TermSet, ...]
    tau: float
    tau_source: str
    timings: dict[str, float] = field(default_factory=dict)
    # The pool's units the keyword leg scored (BM25, best first; None with retrieval.keyword_k = 0).
    keyword: RankedList | None = None


K_D_CACHE_UNITS = 1024  # candidates' K_d kept in memory per Retriever (see Retriever.__init__)
SCORE_MEANS_KEY = "score_means"  # catalog meta key of Retriever.score_means
SCORE_MEAN_TERMS = 5000
# The "context" score variant (Retriever.context_encoder): at document level the B context is read
# from at most this many chunks, those holding most of B's weight (a bound on the text tokenised
# per candidate: ~2 × 4,096 characters, ~30 ms of jieba, once per chunk per Retriever) ...
CONTEXT_MAX_CHUNKS = 2
# ... and the word positions of this many chunks and the vectors of this many B contexts are kept
# (least recently used out; ~0.5 MB and ~3 MB at 384-d).
CONTEXT_SPAN_CHUNKS = 256
CONTEXT_VECTORS = 2048


class Retriever:
    """Queries one library with one embedder/tokenizer. Caches the IDF between ingests."""

    def __init__(self, library: Library, embedder: Embedder, tokenizer: Tokenizer, settings: Settings) -> None:
        self.library = library
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.settings = settings
        self._idf: dict[str, kw.IdfTable] = {}
        # K_d with term vectors per unit, read once per Retriever (a Retriever lives between two
        # ingests: the service makes a new one after each, so the cache never goes stale).
        # Bounded (least recently used out): a K_d set with its vectors is ~46 kB at 384-d, so
        # the cache stays under ~50 MB however long the session.
        self._k_d: OrderedDict[tuple[str, int], TermSet] = OrderedDict()
        self._means: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None
        # The "context" score variant's caches (see context_encoder): chunk id → (ordinal, text,
        # word spans); B-context text → its passage vector.
        self._spans: OrderedDict[int, tuple[int, str, list[WordSpan]]] = OrderedDict()
        self._b_vecs: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._bm25: dict[str, Bm25Index] = {}
        self._kfilter = kw.build_filter(settings.retrieval.keyword_variant, tokenizer)
        words = library.catalog.get_json("user_words") or []
        if words:
            tokenizer.add_words(words)

    def invalidate(self) -> None:
        self._idf.clear()
        self._k_d.clear()
        self._means = None
        self._spans.clear()
        self._b_vecs.clear()
        self._bm25.clear()

    def idf(self, unit: str) -> kw.IdfTable:
        if unit not in self._idf:
            n, df = self.library.catalog.document_frequencies(unit)
            self._idf[unit] = kw.IdfTable(n_docs=n, df=df)
        return self._idf[unit]

    def tau(self) -> tuple[float, str]:
        r = self.settings.retrieval
        if r.tau != "auto":
            return float(r.tau), "settings"
        stored = self.library.catalog.get_meta("tau_auto")
        if stored is not None:
            return float(stored), f"calibrated at ingest ({r.tau_percentile:g}th percentile of term-pair cosines)"
        return r.tau_paper, "paper default (library not calibrated yet)"

    # ------------------------------------------------------------------ baseline
    def baseline(self, query_vec: npt.NDArray[np.float32], level: Level, k: int, theta: float) -> list[Hit]:
        """S1 = top-k ∩ {s_sim ≥ θ} (Eq. 2), as hits with title, page and a snippet."""
        index = self.library.index(level, self.embedder.dim)
        if index.ntotal == 0:
            return []
        scores, ids = index.search(query_vec.astype(np.float32), k)
        pairs = [(int(i), float(s)) for s, i in zip(scores, ids, strict=True) if i >= 0 and s >= theta]
        return self._hits(pairs, query_vec, level)

    # ------------------------------------------------------------------ the keyword leg
    def keyword_index(self, level: Level) -> Bm25Index:
        """BM25 over the stored term counts (core.bm25), of chunks or of documents (their chunks'
        counts summed), built once per library state."""
        if level not in self._bm25:
            rows = self.library.catalog.iter_chunk_term_counts(by_doc=level == "doc")
            if level == "chunk":
                units: list[tuple[int, dict[str, int]]] = [(cid, counts) for cid, _, counts in rows]
            else:
                by_doc: dict[int, dict[str, int]] = {}
                for _, did, counts in rows:
                    acc = by_doc.setdefault(did, {})
                    for t, n in counts.items():
                        acc[t] = acc.get(t, 0) + n
                units = list(by_doc.items())
            self._bm25[level] = Bm25Index(units)
        return self._bm25[level]

    def keyword_scores(self, query: str, level: Level = "chunk") -> dict[int, float]:
        """BM25 of ``query`` against every unit of ``level`` that holds one of its terms."""
        idx = self.keyword_index(level)
        s = idx.scores(self.query_term_list(query))
        return {int(idx.unit_ids[i]): float(s[i]) for i in np.flatnonzero(s > 0)}

    def query_term_list(self, query: str) -> list[str]:
        """The question's terms as ingest counts them (tokenizer + keyword filter), repeats kept."""
        return kw.filter_terms(self.tokenizer.tokenize(query, detect_lang(query)), self._kfilter, query=True)

    def pool(self, query: str, query_vec: npt.NDArray[np.float32], level: Level, k: int,
             theta: float) -> tuple[list[Hit], RankedList | None]:
        """The dense top k (Eq. 2) joined by the BM25 top ``retrieval.keyword_k``: the pool in
        similarity order (each added unit scored by its stored vector, so the order is plain
        similarity), and the BM25 order of the pool's units that matched a term."""
        dense = self.baseline(query_vec, level, k, theta)
        n_kw = self.settings.retrieval.keyword_k
        if n_kw <= 0:
            return dense, None
        top = self.keyword_index(level).top(self.query_term_list(query), n_kw)
        have = {h.unit_id for h in dense}
        extra = [uid for uid, _ in top if uid not in have]
        pool = dense
        if extra:
            index = self.library.index(level, self.embedder.dim)
            ids = np.asarray(extra, dtype=np.int64)
            ids = ids[np.isin(ids, index.ids())]  # counted terms, but no vector yet: not a candidate
            extra = [int(i) for i in ids]
            q = query_vec.astype(np.float32) / max(float(np.linalg.norm(query_vec)), 1e-12)  # as search() does
            sims = index.reconstruct(ids) @ q if extra else np.empty(0, dtype=np.float32)
            pairs = [(uid, float(s)) for uid, s in zip(extra, sims, strict=True) if s >= theta]
            pool = sorted([*dense, *self._hits(pairs, query_vec, level)], key=lambda h: (-h.s_sim, h.unit_id))
            pool = [h.with_rank(r) for r, h in enumerate(pool, start=1)]
        by_id = {h.unit_id: h for h in pool}
        kw_hits = [by_id[uid].with_rank(r) for r, (uid, _) in enumerate(
            [(u, s) for u, s in top if u in by_id], start=1)]
        scores = {uid: s for uid, s in top}
        ranked = RankedList("keyword", tuple(kw_hits), (), (), "BM25 over the library's terms",
                            tuple(scores[h.unit_id] for h in kw_hits))
        return pool, ranked

    def _hits(self, pairs: list[tuple[int, float]], query_vec: npt.NDArray[np.float32], level: Level) -> list[Hit]:
        """(unit id, s_sim) pairs, best first, as hits with title, page and a snippet."""
        cat = self.library.catalog
        hits: list[Hit] = []
        if level == "chunk":
            chunks = cat.chunks(i for i, _ in pairs)
            docs = {d: cat.document(d) for d in {c.doc_id for c in chunks.values()}}
            for rank, (cid, s) in enumerate(pairs, start=1):
                c = chunks[cid]
                d = docs[c.doc_id]
                assert d is not None
                hits.append(Hit(cid, c.doc_id, "chunk", d.title, d.path, c.page_start, c.text, s, rank, c.lang))
        else:
            # A document hit shows its best-matching chunk (page, snippet): the user opens the page that matters.
            vecs = cat.chunk_vectors_of([d for d, _ in pairs])
            best: dict[int, int] = {}
            for did, rows in vecs.items():
                sims = np.stack([v for _, v in rows]) @ query_vec
                best[did] = rows[int(np.argmax(sims))][0]
            chunks = cat.chunks(best.values())
            for rank, (did, s) in enumerate(pairs, start=1):
                d = cat.document(did)
                assert d is not None
                c = chunks[best[did]]
                hits.append(Hit(did, did, "doc", d.title, d.path, c.page_start, c.text, s, rank, d.lang))
        return hits

    # ------------------------------------------------------------------ keyword sets
    def query_keywords(self, query: str, level: Level) -> tuple[Keyword, ...]:
        """K_q = kw(q), top-10 (paper §4.4), weights only (no E(t): nothing is encoded or stored)."""
        unit = "c" if level == "chunk" else "d"
        return kw.kw(
            query,
            detect_lang(query),
            self.tokenizer,
            self.idf(unit),
            self._kfilter,
            query=True,
            top_n=self.settings.retrieval.query_keywords,
        )

    def query_terms(self, query: str, level: Level) -> TermSet:
        """K_q with E(t) from the library cache or the encoder."""
        return self._term_set(self.query_keywords(query, level), embed_missing=True)

    def _term_set(
        self,
        keywords: tuple[Keyword, ...] | list[Keyword],
        embed_missing: bool,
        have: dict[str, npt.NDArray[np.float32]] | None = None,
    ) -> TermSet:
        kws = tuple(keywords)
        if not kws:
            return TermSet.empty(self.embedder.dim)
        if have is None:
            have = self.library.catalog.term_vectors(k.term for k in kws)
        missing = [k.term for k in kws if k.term not in have]
        if missing and embed_missing:
            surfaces = [self.tokenizer.surface_form(t) for t in missing]
            vecs = self.embedder.embed_terms(surfaces)
            have.update(zip(missing, vecs, strict=True))
            # Keep them: a person's questions reuse their words, and E(t) of a new query term
            # costs as much as E(q) with e5 (docs/benchmarks.md), so each is encoded once per library.
            with self.library.catalog.transaction():
                self.library.catalog.put_term_vectors(missing, surfaces, vecs)
        kws = tuple(k for k in kws if k.term in have)
        if not kws:
            return TermSet.empty(self.embedder.dim)
        return TermSet(kws, np.stack([have[k.term] for k in kws]).astype(np.float64))

    def candidate_terms(self, hits: list[Hit], level: Level) -> list[TermSet]:
        """K_d for each candidate, top-|K_d| (paper: 15), from the sets stored at ingest."""
        unit = "c" if level == "chunk" else "d"
        top = self.settings.retrieval.doc_keywords
        for h in hits:
            if (unit, h.unit_id) in self._k_d:
                self._k_d.move_to_end((unit, h.unit_id))
        want = [h.unit_id for h in hits if (unit, h.unit_id) not in self._k_d]
        if want:
            stored = {uid: ks[:top] for uid, ks in self.library.catalog.keywords(unit, want).items()}
            # One read for every candidate's E(t): twenty reads of fifteen rows cost about twice
            # as much (a joined keywords ⋈ term_vectors read was slower still; measured).
            have = self.library.catalog.term_vectors({k.term for ks in stored.values() for k in ks})
            # Every stored term has a vector (refresh_keywords guarantees it); one missing
            # would mean a torn library, and is embedded rather than silently dropped.
            for uid in want:
                self._k_d[(unit, uid)] = self._term_set(stored[uid], embed_missing=True, have=have)
        out = [self._k_d[(unit, h.unit_id)] for h in hits]
        while len(self._k_d) > max(K_D_CACHE_UNITS, len(hits)):
            self._k_d.popitem(last=False)
        return out

    # ------------------------------------------------------------------ one question
    def context(self, query: str, level: Level | None = None, k: int | None = None) -> QueryContext:
        r = self.settings.retrieval
        lvl: Level = level or r.level
        kk = k or r.k
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        qv = self.embedder.embed_queries([query])[0]
        t["embed_query"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        hits, keyword = self.pool(query, qv, lvl, kk, r.theta)
        t["search"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        qterms = self.query_terms(query, lvl)
        cands = self.candidate_terms(hits, lvl)
        t["keyword_sets"] = time.perf_counter() - t0
        tau, source = self.tau()
        label = "Baseline (dense similarity)" if keyword is None else (
            f"Baseline (dense similarity over the dense top {kk} and the keyword top {r.keyword_k})")
        base = RankedList("baseline", tuple(hits), (), (), label)
        return QueryContext(query, lvl, qv, qterms, base, tuple(cands), tau, source, t, keyword)

    def rerank(self, ctx: QueryContext, variant: str) -> tuple[RankedList, CausalDiagnostics]:
        method, absorption, rule, score = parse_variant(variant)
        r = self.settings.retrieval
        sv: ScoreVariant = score or r.score_variant
        cfg = CausalConfig(
            tau=ctx.tau,
            absorption=absorption,
            empty_b_rule=rule or r.empty_b_rule,
            hybrid_weight=r.hybrid_weight,
            k=len(ctx.baseline.hits) or 1,
            method=method,
            score=sv,
        )
        stats = self.library_stats(ctx.level) if sv in STATS_VARIANTS else None
        context = self.context_encoder(ctx.baseline.hits, ctx.level) if sv == "context" else None
        out = rerank(ctx.query_vec, ctx.query_terms, ctx.baseline.hits, ctx.candidate_terms, cfg, stats, context)
        return out.ranked, out.diagnostics

    def context_encoder(self, hits: Sequence[Hit], level: Level) -> ContextEncoder:
        """v_B of the ``"context"`` score variant for these candidates (core.causal_context.ContextRequest):
        each candidate's B in its own sentences, A's words deleted (``b_context_text``), embedded
        as a passage.

        Cost: one encoder pass over at most ``causal_context.CONTEXT_MAX_CHARS`` characters per candidate
        of a new question, all candidates in one call — about what a cross-encoder over the window
        costs, and far more than Eq. 4 (docs/evaluation.md §1.1 gives the measured time). The
        vectors are kept per text, so the same question again, or another that leaves the same
        sentences, costs no encoder call.
        """

        def encode(requests: Sequence[ContextRequest]) -> list[npt.NDArray[np.float32] | None]:
            texts = [self.b_context_text(hits[r.candidate], level, r) for r in requests]
            todo = [t for t in dict.fromkeys(texts) if t and t not in self._b_vecs]
            if todo:
                self._b_vecs.update(zip(todo, self.embedder.embed_passages(todo), strict=True))
            out: list[npt.NDArray[np.float32] | None] = []
            for t in texts:
                if t:
                    self._b_vecs.move_to_end(t)
                out.append(self._b_vecs[t] if t else None)
            while len(self._b_vecs) > CONTEXT_VECTORS:
                self._b_vecs.popitem(last=False)
            return out

        return encode

    def b_context_text(self, hit: Hit, level: Level, request: ContextRequest) -> str:
        """``core.causal_context.b_context`` over the candidate's text: its chunk, or at document level the
        (at most ``CONTEXT_MAX_CHUNKS``) chunks of the document that hold most of B's weight."""
        if level == "chunk":
            chunk_ids = [hit.unit_id]
        else:
            weight = dict(request.b_terms)
            held = self.library.catalog.chunks_holding(hit.doc_id, weight)
            chunk_ids = sorted(held, key=lambda c: (-sum(weight[t] for t in held[c]), c))[:CONTEXT_MAX_CHUNKS]
        parts = sorted(self._chunk_spans(chunk_ids))  # in the document's order
        text = ""
        spans: list[WordSpan] = []
        for _, chunk_text, chunk_spans in parts:
            off = len(text) + (1 if text else 0)
            text = f"{text}\n{chunk_text}" if text else chunk_text
            spans.extend((a + off, b + off, w, k) for a, b, w, k in chunk_spans)
        return b_context(text, spans, request.removed, request.b_terms)

    def _chunk_spans(self, chunk_ids: Sequence[int]) -> list[tuple[int, str, list[WordSpan]]]:
        """(ordinal, text, word spans) of each chunk, through the LRU ``_spans``."""
        missing = [c for c in chunk_ids if c not in self._spans]
        if missing:
            spans_of = getattr(self.tokenizer, "word_spans", None)
            if spans_of is None:
                raise UserInputError("the 'context' s_c needs a tokenizer that reports word positions (jieba's)")
            for cid, chunk in self.library.catalog.chunks(missing).items():
                self._spans[cid] = (chunk.ordinal, chunk.text, list(spans_of(chunk.text)))
        out = []
        for c in chunk_ids:
            if c in self._spans:
                self._spans.move_to_end(c)
                out.append(self._spans[c])
        while len(self._spans) > max(CONTEXT_SPAN_CHUNKS, len(chunk_ids)):
            self._spans.popitem(last=False)
        return out

    def score_means(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(μ_T, μ_D): the mean term vector and the mean unit document vector of this library.

        μ_T from up to ``SCORE_MEAN_TERMS`` stored term vectors (seeded sample: a mean of
        thousands of rows moves by ~1e-3 per coordinate between samples), μ_D from every
        document vector. Cached in the catalog under ``score_means``, keyed by the library state
        the keyword refresh leaves (embedder, counts, τ_auto): computed once after an ingest, and
        dropped by ``ingest --reembed`` with the other encoder-scale caches.
        """
        if self._means is not None:
            return self._means
        cat = self.library.catalog
        key = [cat.get_meta("embedder"), cat.count("documents"), cat.count("chunks"), cat.get_meta("tau_auto")]
        cached = cat.get_json(SCORE_MEANS_KEY)
        dim = self.embedder.dim
        if cached and cached.get("key") == key and len(cached.get("term_mean", ())) == dim:
            self._means = (np.asarray(cached["term_mean"], dtype=np.float64), np.asarray(cached["doc_mean"]))
            return self._means
        terms = cat.sample_term_vectors(SCORE_MEAN_TERMS, seed=0).astype(np.float64)
        term_mean = terms.mean(axis=0) if terms.size else np.zeros(dim)
        total = np.zeros(dim)
        n = 0
        for _, v in cat.iter_vectors("doc"):
            v64 = v.astype(np.float64)
            total += v64 / max(float(np.linalg.norm(v64)), 1e-12)
            n += 1
        doc_mean = total / n if n else np.zeros(dim)
        with cat.transaction():
            cat.set_json(SCORE_MEANS_KEY, {"key": key, "term_mean": term_mean.tolist(), "doc_mean": doc_mean.tolist()})
        self._means = (term_mean, doc_mean)
        return self._means

    def library_stats(self, level: Level) -> LibraryStats:
        """μ_T, μ_D and the IDF of ``level``'s keyword unit (core.causal.ScoreVariant)."""
        unit = "c" if level == "chunk" else "d"
        term_mean, doc_mean = self.score_means()
        table = self.idf(unit)
        prior = self.tokenizer.prior_idf
        return LibraryStats(term_mean, doc_mean, idf=lambda t: table.idf(t, prior))

    def cross_encode(self, ctx: QueryContext, scorer: CrossEncoder) -> RankedList:
        hits = list(ctx.baseline.hits)
        if not hits:
            return RankedList("cross_encoder", (), (), (), scorer.identity)
        scores = scorer.score(ctx.query, [h.text for h in hits])
        order = sorted(range(len(hits)), key=lambda i: (-float(scores[i]), i))
        ranked = tuple(dataclasses.replace(hits[i], rank=r) for r, i in enumerate(order, start=1))
        label = (
            "Cross-encoder: " if not scorer.is_substitute else "Substitute (not a cross-encoder): "
        ) + scorer.identity
        return RankedList("cross_encoder", ranked, (), (), label, tuple(float(scores[i]) for i in order))


def answer_list(ranked: RankedList, ctxs: Sequence[QueryContext]) -> RankedList | None:
    """``ranked`` fused by RRF (core.fusion) with the keyword leg's BM25 order of each phrasing,
    as the answers read it (Comparison.answer_list); None when no keyword leg ran. The pool is the
    same units, so only their order changes: a page that names the question's exact words reaches the
    few sources the model reads even when dense similarity put it below them (docs/evaluation.md,
    "Finding the page"). The leg adds and does not remove: the column's own first
    ``prompting.OWN_SOURCES`` stay first, and RRF fills the other places the answer reads. Plain
    RRF put every unit that shares one word with the question above the column's best unit that
    shares none: asked in everyday words, the answering article of a statute fell from
    similarity rank 1 out of the sources ("公司" where the law says "用人单位")."""
    legs = [c.keyword for c in ctxs if c.keyword is not None and c.keyword.hits]
    if not legs:
        return None
    return fuse([ranked, *legs], len(ranked.hits), keep=prompting.OWN_SOURCES).ranked
