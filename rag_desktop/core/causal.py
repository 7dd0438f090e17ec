"""Causal-attention reranking of paper 000 (§3.4, Eq. 3–5), its hybrid, and diagnostics.

Public entry points (what the app wires)
----------------------------------------
``TermSet(keywords, vectors)``
    A keyword set K with its term embeddings: ``keywords`` from
    :func:`rag_desktop.core.keywords.kw` (top-15 per chunk/document, stored at ingest;
    top-10 with ``query=True`` for the query), ``vectors[i] = E(keywords[i].term)``
    from ``Embedder.embed_terms`` (cached at ingest for documents). Terms must be
    distinct (merge chunk sets with ``keywords.merge_keywords``), weights > 0.
``CausalConfig(tau, absorption, empty_b_rule, hybrid_weight, k, method)``
    ``tau``: Eq. 3 threshold (a number; resolve ``"auto"`` with :func:`calibrate_tau`
    at ingest); ``absorption``: ``"semantic"`` (Eq. 3) or ``"exact"`` (the 2024
    deployment's keyword-set intersection); ``empty_b_rule``: ``"demote"`` or
    ``"fallback"`` (see below); ``method``: ``"causal"`` ranks by s_c, ``"hybrid"``
    by w·minmax(s_sim) + (1−w)·minmax(s_c); ``k``: the candidate window.
``rerank(query_vec, query_terms, hits, candidate_terms, config) -> CausalRerank``
    ``query_vec`` = E(q) (``Embedder.embed_queries([q])[0]``); ``hits`` in baseline
    order (s_sim descending, any length); ``candidate_terms[i]`` is the TermSet of
    ``hits[i]`` (entries past the window may be ``None``). Returns ``.ranked``, a
    :class:`~rag_desktop.core.types.RankedList` (hits with new 1-based ranks, one
    Explanation per hit in the new order, warnings) and ``.diagnostics``
    (A-share, empty-B fraction, the τ used, warnings).
``causal_scores(query_vec, query_terms, candidate_terms, tau=..., absorption=...)``
    The vectorised Eq. 3–5 alone, as arrays (s_c, empty-B mask, A membership,
    absorbing query term and cosine per document term).
``b_context(text, spans, removed, b_terms)`` (core.causal_context: the ``"context"`` variant's text)
    The text the ``"context"`` score variant embeds for one candidate (see ``ScoreVariant``);
    the caller embeds it and answers ``causal_scores``' ``ContextRequest``s.
``calibrate_tau(term_vectors, percentile, rng)`` / ``pair_cosines(...)``
    Encoder-aware τ: a percentile of the library's own random term-pair cosines.
``minmax(x)``
    The normalisation of the hybrid.

Wiring sketch::

    # ingest (per chunk), after build_filter(variant, tokenizer) and the IdfTable:
    toks = tokenizer.tokenize(chunk.text, chunk.lang)
    idf.add_document(keywords.document_terms(toks, kfilter))
    kd = keywords.extract_keywords(toks, idf, kfilter, query=False, prior=tokenizer.prior_idf)
    vecs = embedder.embed_terms([k.term for k in kd])      # cache per term
    # query time:
    kq = keywords.kw(question, lang, tokenizer, idf, kfilter, query=True)
    out = rerank(embedder.embed_queries([question])[0],
                 TermSet(kq, embedder.embed_terms([k.term for k in kq])),
                 baseline_hits, [TermSet(kd_i, vecs_i) for each hit], CausalConfig(tau=...))

Choices where the paper is silent (all tested in tests/test_causal.py)
----------------------------------------------------------------------
* Cosines are computed on the given vectors (normalised here), so callers need
  not pre-normalise. A term that is both an exact match and semantically close
  is recorded as exact (``AbsorbedTerm.cosine is None``); the absorbing query term
  of a semantic match is the argmax of the cosine, the earlier K_q entry on ties.
* Empty K_q (every query word was a stopword): A(d) = ∅ and B(d) = K_d; a warning
  says so.
* v_B with zero norm (terms cancelling exactly) scores s_c = 0 (orthogonal).
* Empty B(d) — the paper says such documents "are demoted" (§3.4) and, in §4.5,
  tests a variant "fb" that falls back to s_sim. Here:

  ``"demote"`` (default): the candidate's s_c is *treated as the minimum of the
  window's defined s_c values*. An empty B means every keyword of the document was
  absorbed by the query: the limiting case of keyword stuffing the method exists
  to demote, so it belongs at the bottom of the causal order. We use the window
  minimum rather than an invented value (−1, say) because a far-out value would
  stretch the min–max range of the hybrid and squeeze every real s_c towards 1;
  at the minimum, the hybrid lets s_sim still lift the candidate, which keeps the
  hybrid's "never far below the baseline" property. In the ordering, at an equal
  score a candidate with a real s_c goes before an empty-B one, then baseline
  order. If no candidate has a defined s_c, the s_c column is constant
  (minmax → 0) and both orders equal the baseline; the diagnostics warn.

  ``"fallback"`` (the paper's *ours-fb*): the candidate's s_c is replaced by its
  s_sim. The causal order sorts by this mixed column; the hybrid min–max
  normalises the mixed column as a whole (``minmax`` over {s_c of non-empty} ∪
  {s_sim of empty}) and adds w·minmax(s_sim). Ties: baseline order.

  In both rules ``Explanation.s_c`` is ``None`` for an empty B (s_c is undefined)
  and ``Explanation.fallback_used`` is True only when the fallback rule replaced it.
* Only the first k hits (the window S1) are re-ranked; hits past k keep their
  baseline positions (paper §4.5) and get an Explanation with no split.
* minmax of a constant column is all zeros (it carries no order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from rag_desktop.core.causal_context import ContextEncoder, ContextRequest
from rag_desktop.core.notes import NoteBook
from rag_desktop.core.types import AbsorbedTerm, Explanation, Hit, Keyword, KeywordSplit, RankedList

F64 = npt.NDArray[np.float64]
Absorption = Literal["semantic", "exact"]
EmptyBRule = Literal["demote", "fallback"]
Method = Literal["causal", "hybrid"]
# How s_c is read off B (Eq. 4–5). "paper" is the exact formula; the others are remedies for an
# encoder whose cosines are compressed and anisotropic (multilingual-e5 puts every term pair
# between ~0.8 and ~0.93, and all v_B near the common direction of its embeddings):
#   "centred"     cos(E(q) − μ_T, v_B − μ_T): term and query vectors centred on the library's
#                 mean term vector μ_T (Eq. 4 is linear, so centring the E(t) centres v_B);
#   "idf"         v_B weighted by λ_t · idf(t): generic terms, which pull v_B towards μ_T, count less;
#   "contrast"    s_c(d) − s̄_c(d), s̄_c(d) = mean over the library's documents d' of
#                 cos(E(d'), v_B(d)) = μ_D · v̂_B(d) (μ_D: mean unit document vector): how much
#                 closer B is to this query than to a typical text of the library;
#   "centred_idf" both of the first two;
#   "context"     v_B is not Eq. 4's centroid of isolated-word vectors but the encoder's embedding of
#                 B in the document's own words (see ContextRequest and b_context).
# The A/B split (Eq. 3, τ) is the same for every variant, so the chips do not move.
ScoreVariant = Literal["paper", "centred", "idf", "contrast", "centred_idf", "context"]
SCORE_VARIANTS: tuple[ScoreVariant, ...] = ("paper", "centred", "idf", "contrast", "centred_idf", "context")
# The variants read off LibraryStats (μ_T, μ_D, idf); "context" reads the candidates' text instead.
STATS_VARIANTS: tuple[ScoreVariant, ...] = ("centred", "idf", "contrast", "centred_idf")

# A warning is raised when B(d) is empty for more than this share of the window
# (with e5 at τ = 0.6 every B was empty and the order silently became the baseline's).
EMPTY_B_WARN_FRACTION = 0.5


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, eq=False)
class TermSet:
    """A weighted keyword set K with one embedding row per term (``vectors[i] = E(t_i)``)."""

    keywords: tuple[Keyword, ...]
    vectors: F64
    # Derived in __post_init__ (not constructor arguments): rows of ``vectors`` scaled to unit
    # length, the weights λ_t, and the terms, in keyword order.
    unit: F64 = dataclasses.field(init=False, repr=False)
    weights: F64 = dataclasses.field(init=False, repr=False)
    terms: tuple[str, ...] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        kws = tuple(self.keywords)
        vec = np.asarray(self.vectors, dtype=np.float64)
        if vec.size == 0 and not kws:
            vec = vec.reshape(0, vec.shape[-1] if vec.ndim == 2 else 0)
        if vec.ndim != 2 or vec.shape[0] != len(kws):
            raise ValueError(
                f"TermSet: vectors must have shape ({len(kws)}, dim), one row per keyword; got {vec.shape}"
            )
        if not np.all(np.isfinite(vec)):
            raise ValueError("TermSet: vectors contain NaN or infinity")
        norms = np.sqrt(np.einsum("ij,ij->i", vec, vec))
        if kws and not norms.all():
            bad = [kws[i].term for i in np.flatnonzero(norms == 0)]
            raise ValueError(f"TermSet: zero embedding for term(s) {bad[:5]}")
        terms = tuple(k.term for k in kws)
        if len(set(terms)) != len(terms):
            dup = next(t for i, t in enumerate(terms) if t in terms[:i])
            raise ValueError(f"TermSet: duplicate term {dup!r} (merge with keywords.merge_keywords)")
        weights = np.fromiter((k.weight for k in kws), dtype=np.float64, count=len(kws))
        if not (np.isfinite(weights).all() and (weights > 0).all()):
            i = int(np.flatnonzero(~(np.isfinite(weights) & (weights > 0)))[0])
            raise ValueError(f"TermSet: weight of {terms[i]!r} must be finite and > 0, got {kws[i].weight}")
        object.__setattr__(self, "keywords", kws)
        object.__setattr__(self, "vectors", vec)
        # Derived once here, not per query: the app keeps K_d TermSets for a whole session,
        # so normalising rows and collecting weights at construction takes them off the
        # re-rank path (budget: re-ranking ≤ 5 % of a baseline query).
        # Encoders that already return unit rows (e5, BGE-M3) share one array: a K_d set is
        # 15 × dim float64, and the app keeps up to a thousand of them per session. Their rows
        # come from float32, so "unit" means within 1e-6 (cosines move by < 1e-6 at most).
        unit = vec if (not kws or float(np.abs(norms - 1.0).max()) <= 1e-6) else vec / norms[:, None]
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "terms", terms)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @classmethod
    def empty(cls, dim: int) -> TermSet:
        return cls((), np.zeros((0, dim)))


@dataclass(frozen=True, eq=False)
class LibraryStats:
    """The library's own scale, for the non-paper score variants (see ``ScoreVariant``).

    ``term_mean`` = μ_T, the mean of the library's term embeddings E(t); ``doc_mean`` = μ_D,
    the mean of its unit document vectors; ``idf(t)`` the library IDF of a term (K_d's unit).
    """

    term_mean: F64
    doc_mean: F64
    idf: Callable[[str], float] | None = None

    def __post_init__(self) -> None:
        for name in ("term_mean", "doc_mean"):
            v = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1)
            if not np.all(np.isfinite(v)):
                raise ValueError(f"LibraryStats.{name} contains NaN or infinity")
            object.__setattr__(self, name, v)


@dataclass(frozen=True)
class CausalConfig:
    tau: float = 0.6  # paper 000 §3.4 (BGE-M3 scale; prefer calibrate_tau)
    absorption: Absorption = "semantic"
    empty_b_rule: EmptyBRule = "demote"
    hybrid_weight: float = 0.5  # paper §4.4: ½ s̃_sim + ½ s̃_c
    k: int = 20  # paper §4.5: re-rank the baseline top-20
    method: Method = "hybrid"
    score: ScoreVariant = "paper"

    def __post_init__(self) -> None:
        if not (-1.0 <= self.tau <= 1.0):
            raise ValueError(f"CausalConfig.tau must be a cosine in [-1, 1], got {self.tau}")
        if self.absorption not in ("semantic", "exact"):
            raise ValueError(
                f"CausalConfig.absorption must be 'semantic' or 'exact', got {self.absorption!r}"
            )
        if self.empty_b_rule not in ("demote", "fallback"):
            raise ValueError(
                f"CausalConfig.empty_b_rule must be 'demote' or 'fallback', got {self.empty_b_rule!r}"
            )
        if not (0.0 <= self.hybrid_weight <= 1.0):
            raise ValueError(f"CausalConfig.hybrid_weight must be in [0, 1], got {self.hybrid_weight}")
        if self.k < 1:
            raise ValueError(f"CausalConfig.k must be >= 1, got {self.k}")
        if self.method not in ("causal", "hybrid"):
            raise ValueError(f"CausalConfig.method must be 'causal' or 'hybrid', got {self.method!r}")
        if self.score not in SCORE_VARIANTS:
            raise ValueError(f"CausalConfig.score must be one of {SCORE_VARIANTS}, got {self.score!r}")

    @property
    def name(self) -> str:
        """The method name used by ``rag-desktop eval`` (causal, causal_exact, causal_fb, hybrid, ...)."""
        suffix = ("_exact" if self.absorption == "exact" else "") + (
            "_fb" if self.empty_b_rule == "fallback" else ""
        )
        return self.method + suffix + ("" if self.score == "paper" else f"@{self.score}")


# --------------------------------------------------------------------------- Eq. 3–5


@dataclass(frozen=True, eq=False)
class CausalArrays:
    """Eq. 3–5 for a list of candidates, as arrays.

    Per candidate j (length n): ``s_c[j]`` (NaN when B is empty), ``empty_b[j]``,
    ``a_share[j]`` = Σ_{A} λ / Σ_{K_d} λ (NaN when K_d is empty).
    Per document term, candidates' terms concatenated (length T): ``segment`` (its
    candidate), ``absorbed`` (t ∈ A), ``exact``, ``best_query`` (index into K_q of
    the most similar query term, or of the equal one for an exact match; -1 if none),
    ``best_cos`` (its cosine; NaN for exact absorption or an empty K_q).
    """

    s_c: F64
    empty_b: npt.NDArray[np.bool_]
    a_share: F64
    segment: npt.NDArray[np.int64]
    absorbed: npt.NDArray[np.bool_]
    exact: npt.NDArray[np.bool_]
    best_query: npt.NDArray[np.int64]
    best_cos: F64


def _check_inputs(
    q: F64, query_terms: TermSet, candidate_terms: Sequence[TermSet], absorption: Absorption,
    score: ScoreVariant, stats: LibraryStats | None, context: ContextEncoder | None = None,
) -> None:
    """Raise ValueError for inputs ``causal_scores`` cannot score (dimensions, variants, stats)."""
    if not np.all(np.isfinite(q)) or np.linalg.norm(q) == 0:
        raise ValueError("causal_scores: query_vec must be finite and non-zero")
    h = q.shape[0]
    for name, ts in [("query_terms", query_terms)] + [
        (f"candidate_terms[{j}]", c) for j, c in enumerate(candidate_terms)
    ]:
        if ts.keywords and ts.dim != h:
            raise ValueError(f"causal_scores: {name} has dim {ts.dim}, query_vec has {h}")
    if absorption not in ("semantic", "exact"):
        raise ValueError(f"causal_scores: absorption must be 'semantic' or 'exact', got {absorption!r}")
    if score not in SCORE_VARIANTS:
        raise ValueError(f"causal_scores: score must be one of {SCORE_VARIANTS}, got {score!r}")
    use_idf = score in ("idf", "centred_idf")
    if score == "context" and context is None:
        raise ValueError("causal_scores: score 'context' needs a ContextEncoder (context=...)")
    if score in STATS_VARIANTS:
        if stats is None:
            raise ValueError(f"causal_scores: score {score!r} needs the library's LibraryStats")
        if stats.term_mean.shape[0] != h or stats.doc_mean.shape[0] != h:
            raise ValueError(f"causal_scores: LibraryStats has dim {stats.term_mean.shape[0]}, query_vec has {h}")
        if use_idf and stats.idf is None:
            raise ValueError(f"causal_scores: score {score!r} needs LibraryStats.idf")


def _absorbed(
    query_terms: TermSet, present: Sequence[TermSet], T: int, tau: float, absorption: Absorption,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.int64], F64]:
    """Eq. 3 over the ``T`` terms of the candidates that have terms (``present``), concatenated:
    (t ∈ K_q, t ∈ A(d), the query term it matched best or equals, that cosine or NaN)."""
    m = len(query_terms.keywords)
    # Eq. 3, first disjunct: t ∈ K_q (index of the equal query term, else -1).
    q_index = {t: i for i, t in enumerate(query_terms.terms)}
    ex_idx = np.fromiter(
        (q_index.get(t, -1) for c in present for t in c.terms), dtype=np.int64, count=T
    )
    exact = ex_idx >= 0
    if absorption == "semantic" and m > 0:
        # Eq. 3, second disjunct: max_{u ∈ K_q} cos(E(t), E(u)) ≥ τ.
        # The products are taken per candidate (≤ 15 rows each) and not as one (T, h)
        # matrix on purpose: OpenBLAS runs a gemm of a few hundred rows on all cores, and
        # on a busy laptop that single call was measured at 8–30 ms (p99) against ~60 µs for
        # the twenty small ones (budget: re-ranking ≤ 5 % of a baseline query).
        q_unit_t = np.ascontiguousarray(query_terms.unit.T)
        cos = np.concatenate([c.unit @ q_unit_t for c in present])  # (T, m)
        bq = cos.argmax(axis=1)
        best_cos = cos[np.arange(T), bq]
        best_query = np.where(exact, ex_idx, bq)
        absorbed = exact | (best_cos >= tau)
    else:
        best_cos = np.full(T, np.nan)
        best_query = ex_idx
        absorbed = exact.copy()
    return exact, absorbed, best_query, best_cos


def causal_scores(
    query_vec: npt.ArrayLike,
    query_terms: TermSet,
    candidate_terms: Sequence[TermSet],
    *,
    tau: float,
    absorption: Absorption = "semantic",
    score: ScoreVariant = "paper",
    stats: LibraryStats | None = None,
    context: ContextEncoder | None = None,
) -> CausalArrays:
    """Vectorised A(d), B(d) (Eq. 3), v_B (Eq. 4) and s_c (Eq. 5) for every candidate.

    ``score`` ``"centred"``, ``"idf"``, ``"contrast"`` and ``"centred_idf"`` read s_c on the
    library's scale (``ScoreVariant``) and need ``stats`` (``"idf"`` needs ``stats.idf``);
    ``"context"`` needs ``context``, called once with a ``ContextRequest`` per candidate whose B
    is not empty.
    """
    q = np.asarray(query_vec, dtype=np.float64).reshape(-1)
    _check_inputs(q, query_terms, candidate_terms, absorption, score, stats, context)

    n = len(candidate_terms)
    sizes = [len(c.keywords) for c in candidate_terms]
    T = int(sum(sizes))
    segment = np.repeat(np.arange(n, dtype=np.int64), sizes)
    if T == 0:
        return CausalArrays(
            s_c=np.full(n, np.nan),
            empty_b=np.ones(n, dtype=bool),
            a_share=np.full(n, np.nan),
            segment=segment,
            absorbed=np.zeros(0, dtype=bool),
            exact=np.zeros(0, dtype=bool),
            best_query=np.full(0, -1, dtype=np.int64),
            best_cos=np.full(0, np.nan),
        )
    present = [c for c in candidate_terms if c.keywords]
    lam = np.concatenate([c.weights for c in present])

    # Eq. 3: A(d), the candidate terms the query absorbs (exactly or within τ).
    exact, absorbed, best_query, best_cos = _absorbed(query_terms, present, T, tau, absorption)

    # B(d) = K_d \ A(d), carried as weights: λ_t on B, 0 on A.
    w_b = np.where(absorbed, 0.0, lam)
    den = np.bincount(segment, weights=w_b, minlength=n)
    total = np.bincount(segment, weights=lam, minlength=n)
    has_terms = np.asarray(sizes) > 0
    a_share = np.full(n, np.nan)
    a_share[has_terms] = (total[has_terms] - den[has_terms]) / total[has_terms]
    empty_b = ~(den > 0)

    if score == "context":
        assert context is not None
        s_c, empty_b = _context_s_c(q, query_terms, candidate_terms, absorbed, empty_b, context)
    else:
        s_c = _vector_s_c(q, candidate_terms, sizes, segment, w_b, den, empty_b, score, stats)
    return CausalArrays(
        s_c=s_c,
        empty_b=empty_b,
        a_share=a_share,
        segment=segment,
        absorbed=absorbed,
        exact=exact,
        best_query=best_query,
        best_cos=best_cos,
    )


def _vector_s_c(
    q: F64, candidate_terms: Sequence[TermSet], sizes: Sequence[int], segment: npt.NDArray[np.int64], w_b: F64,
    den: npt.NDArray[Any],
    empty_b: npt.NDArray[np.bool_], score: ScoreVariant, stats: LibraryStats | None,
) -> F64:
    """Eq. 4 (v_B from the isolated term vectors) and Eq. 5 for every variant but ``"context"``."""
    n, h, T = len(sizes), q.shape[0], int(sum(sizes))
    q_norm = float(np.sqrt(q @ q))
    # Eq. 4: v_B = Σ_{t∈B} λ_t E(t) / Σ_{t∈B} λ_t — per candidate, same reason as above.
    # "idf": the weights are λ_t · idf(t) (idf ≥ 1 in the library's smoothed table, so B stays B).
    w_v, den_v = w_b, np.asarray(den, dtype=np.float64)
    if score in ("idf", "centred_idf"):
        assert stats is not None and stats.idf is not None
        idf_fn = stats.idf
        idf = np.fromiter((idf_fn(t) for c in candidate_terms for t in c.terms), dtype=np.float64, count=T)
        if not (np.isfinite(idf).all() and (idf > 0).all()):
            raise ValueError("causal_scores: LibraryStats.idf must be finite and > 0 for every term")
        w_v = w_b * idf
        den_v = np.bincount(segment, weights=w_v, minlength=n).astype(np.float64)
    v_b = np.zeros((n, h))
    off = 0
    for j, size in enumerate(sizes):
        if size and not empty_b[j]:
            v_b[j] = w_v[off : off + size] @ candidate_terms[j].vectors
        off += size
    v_b /= np.where(empty_b, 1.0, den_v)[:, None]
    if score in ("centred", "centred_idf"):
        # Eq. 4 is a weighted mean, so Σ λ (E(t) − μ_T) / Σ λ = v_B − μ_T; E(q) is centred on μ_T too.
        assert stats is not None
        v_b = np.where(empty_b[:, None], 0.0, v_b - stats.term_mean[None, :])
        q = q - stats.term_mean
        q_norm = float(np.sqrt(q @ q))
        if q_norm == 0:
            raise ValueError("causal_scores: the query vector equals the library's mean term vector")
    # Eq. 5: s_c = cos(E(q), v_B); a zero v_B (terms cancelling exactly) counts as orthogonal.
    v_norm = np.sqrt(np.einsum("ij,ij->i", v_b, v_b))
    dots = v_b @ q
    s_c = np.full(n, np.nan)
    ok = ~empty_b
    safe = np.where(v_norm[ok] == 0, 1.0, v_norm[ok])
    s_c[ok] = np.where(v_norm[ok] == 0, 0.0, dots[ok] / (safe * q_norm))
    if score == "contrast":
        # s_c(d) − mean_{d'} cos(E(d'), v_B(d)) = s_c(d) − μ_D · v̂_B(d) (unit E(d'), see ScoreVariant).
        assert stats is not None
        s_c[ok] -= np.where(v_norm[ok] == 0, 0.0, (v_b[ok] @ stats.doc_mean) / safe)
    return s_c


def _context_s_c(
    q: F64, query_terms: TermSet, candidate_terms: Sequence[TermSet], absorbed: npt.NDArray[np.bool_],
    empty_b: npt.NDArray[np.bool_], context: ContextEncoder,
) -> tuple[F64, npt.NDArray[np.bool_]]:
    """Eq. 5 with v_B = the caller's embedding of B in context (``ContextRequest``): s_c and the
    empty-B mask, which also holds the candidates the caller found no context for."""
    n = len(candidate_terms)
    q_terms = frozenset(query_terms.terms)
    requests: list[ContextRequest] = []
    off = 0
    for j, c in enumerate(candidate_terms):
        ab = absorbed[off : off + len(c.keywords)].tolist()
        off += len(c.keywords)
        if empty_b[j]:
            continue
        a_terms = frozenset(t for t, a in zip(c.terms, ab, strict=True) if a)
        b_terms = tuple((k.term, k.weight) for k, a in zip(c.keywords, ab, strict=True) if not a)
        requests.append(ContextRequest(j, a_terms | q_terms, b_terms))
    vectors = list(context(requests)) if requests else []
    if len(vectors) != len(requests):
        raise ValueError(f"causal_scores: the ContextEncoder answered {len(vectors)} of {len(requests)} requests")
    s_c = np.full(n, np.nan)
    empty = empty_b.copy()
    q_norm = float(np.sqrt(q @ q))
    for req, vec in zip(requests, vectors, strict=True):
        if vec is None:
            empty[req.candidate] = True
            continue
        v = np.asarray(vec, dtype=np.float64).reshape(-1)
        if v.shape != q.shape or not np.all(np.isfinite(v)):
            raise ValueError(
                f"causal_scores: the context vector of candidate {req.candidate} must be finite with dim {q.shape[0]}"
            )
        v_norm = float(np.sqrt(v @ v))
        s_c[req.candidate] = 0.0 if v_norm == 0 else float(v @ q) / (v_norm * q_norm)
    return s_c, empty


def minmax(x: npt.ArrayLike) -> F64:
    """(x − min) / (max − min) over the window; a constant column maps to zeros."""
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return a.copy()
    lo, hi = float(a.min()), float(a.max())
    if hi - lo <= 0:
        return np.zeros_like(a)
    return (a - lo) / (hi - lo)


# --------------------------------------------------------------------------- rerank


@dataclass(frozen=True)
class CausalDiagnostics:
    """What the UI shows next to the causal column so a degenerate run is visible.

    ``a_share``: mean over window candidates (with a non-empty K_d) of the share of
    K_d's weight absorbed into A (the A-absorption ratio of §4.6); ``empty_b_fraction``:
    share of window candidates whose B is empty.
    """

    window: int
    tau: float
    absorption: Absorption
    empty_b_rule: EmptyBRule
    n_query_terms: int
    a_share: float | None
    empty_b_fraction: float
    n_empty_b: int
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class CausalRerank:
    ranked: RankedList
    diagnostics: CausalDiagnostics


def _split(
    cand: TermSet, query_terms: TermSet, flags: tuple[list[bool], list[bool], list[int], list[float]], offset: int
) -> tuple[KeywordSplit, int]:
    # ``flags`` are CausalArrays' absorbed / exact / best_query / best_cos as Python lists:
    # reading numpy scalars term by term cost more than the whole of Eq. 3–5.
    absorbed, exact, best_query, best_cos = flags
    q_terms = query_terms.terms
    a_terms: list[AbsorbedTerm] = []
    b_terms: list[Keyword] = []
    for i, kwd in enumerate(cand.keywords):
        t = offset + i
        if absorbed[t]:
            cos = None if exact[t] else best_cos[t]
            by = q_terms[best_query[t]]
            a_terms.append(AbsorbedTerm(term=kwd.term, weight=kwd.weight, absorbed_by=by, cosine=cos))
        else:
            b_terms.append(kwd)
    split = KeywordSplit(query_terms=query_terms.keywords, a_terms=tuple(a_terms), b_terms=tuple(b_terms))
    return split, len(a_terms)


def rerank(
    query_vec: npt.ArrayLike,
    query_terms: TermSet,
    hits: Sequence[Hit],
    candidate_terms: Sequence[TermSet | None],
    config: CausalConfig | None = None,
    stats: LibraryStats | None = None,
    context: ContextEncoder | None = None,
) -> CausalRerank:
    """Re-rank the baseline window by s_c or the hybrid; see the module docstring. ``stats``:
    for the score variants that read the library's scale; ``context``: for ``"context"``."""
    cfg = config or CausalConfig()
    window = min(cfg.k, len(hits))
    if len(candidate_terms) < window:
        raise ValueError(
            f"rerank: candidate_terms has {len(candidate_terms)} entries, the window needs {window}"
        )
    cands: list[TermSet] = []
    for j in range(window):
        c = candidate_terms[j]
        if c is None:
            raise ValueError(f"rerank: candidate_terms[{j}] is None but hit {j + 1} is inside the window")
        cands.append(c)

    arrays = causal_scores(
        query_vec, query_terms, cands, tau=cfg.tau, absorption=cfg.absorption, score=cfg.score, stats=stats,
        context=context,
    )
    s_sim = np.array([h.s_sim for h in hits[:window]], dtype=np.float64)
    if not np.all(np.isfinite(s_sim)):
        raise ValueError("rerank: a hit in the window has a non-finite s_sim")
    empty = arrays.empty_b

    # The s_c column after the empty-B rule (module docstring).
    if cfg.empty_b_rule == "fallback":
        sc_eff = np.where(empty, s_sim, arrays.s_c)
        demoted = np.zeros(window, dtype=bool)
    else:
        defined = arrays.s_c[~empty]
        floor = float(defined.min()) if defined.size else 0.0
        sc_eff = np.where(empty, floor, arrays.s_c)
        demoted = empty
    # Hybrid (paper §4.4): w·minmax(s_sim) + (1−w)·minmax(s_c) over the window.
    hybrid = cfg.hybrid_weight * minmax(s_sim) + (1.0 - cfg.hybrid_weight) * minmax(sc_eff)
    key = sc_eff if cfg.method == "causal" else hybrid
    # Sort: score descending, then real-s_c before demoted, then baseline order.
    order = np.lexsort((np.arange(window), demoted, -key)) if window else np.zeros(0, dtype=np.int64)
    new_pos = list(order.tolist()) + list(range(window, len(hits)))

    offsets = np.concatenate([[0], np.cumsum([len(c.keywords) for c in cands])]).astype(int).tolist()
    flags = (arrays.absorbed.tolist(), arrays.exact.tolist(), arrays.best_query.tolist(), arrays.best_cos.tolist())
    s_c_list, empty_list, hybrid_list = arrays.s_c.tolist(), empty.tolist(), hybrid.tolist()
    new_hits: list[Hit] = []
    explanations: list[Explanation] = []
    for new_rank, j in enumerate(new_pos, start=1):
        hit = hits[j]
        new_hits.append(hit.with_rank(new_rank))
        explanation = Explanation(
            unit_id=hit.unit_id,
            baseline_rank=j + 1,
            new_rank=new_rank,
            s_sim=float(hit.s_sim),
            s_c=None,
            s_hybrid=None,
            split=None,
            fallback_used=False,
            size_a=0,
        )
        if j < window:  # a reranked candidate: its scores and keyword split (below the window: none)
            split, size_a = _split(cands[j], query_terms, flags, offsets[j])
            explanation = dataclasses.replace(
                explanation,
                s_c=None if empty_list[j] else s_c_list[j],
                s_hybrid=hybrid_list[j],
                split=split,
                fallback_used=empty_list[j] and cfg.empty_b_rule == "fallback",
                size_a=size_a,
            )
        explanations.append(explanation)

    diag = _diagnostics(arrays, cfg, window, len(query_terms.keywords))
    label = (
        f"{'Causal rerank' if cfg.method == 'causal' else 'Hybrid rerank'} "
        f"({cfg.absorption}, τ={cfg.tau:.2f}, empty B: {cfg.empty_b_rule}, s_c: {cfg.score})"
    )
    ranked = RankedList(
        method=cfg.name,
        hits=tuple(new_hits),
        explanations=tuple(explanations),
        warnings=diag.warnings,
        label=label,
    )
    return CausalRerank(ranked=ranked, diagnostics=diag)


_SEMANTIC = "at τ = {tau} the query absorbs almost every document keyword for this encoder"
_EXACT = "the candidates' keywords are (almost) all query keywords"
_THEN = {"all": "no candidate has an s_c, so the order is the baseline's",
         "fallback": "those candidates fall back to s_sim, so the order is mostly the baseline's",
         "demote": "those candidates are demoted without an s_c, so the causal score barely discriminates"}
_ADVICE = {"semantic": " Calibrate τ for this encoder (calibrate_tau).", "exact": ""}
# The re-ranking's warnings, one template each (core.notes: the UI says them in its language).
CAUSAL_NOTES = NoteBook("causalnote", {
    "no_query_terms": "The query has no keywords after stopword filtering: A(d) is empty and s_c scores each "
                      "candidate's whole keyword set.",
    **{f"empty_b_{what}_{then}": f"B(d) is empty for {{n}} of {{window}} candidates ({{pct}}): {why}; {so}."
       + _ADVICE[what]
       for what, why in (("semantic", _SEMANTIC), ("exact", _EXACT)) for then, so in _THEN.items()},
})


def _diagnostics(arrays: CausalArrays, cfg: CausalConfig, window: int, n_q: int) -> CausalDiagnostics:
    shares = arrays.a_share[np.isfinite(arrays.a_share)]
    a_share = float(shares.mean()) if shares.size else None
    n_empty = int(arrays.empty_b.sum())
    frac = n_empty / window if window else 0.0
    warnings: list[str] = []
    if n_q == 0 and window:
        warnings.append(CAUSAL_NOTES.say("no_query_terms"))
    if window and frac > EMPTY_B_WARN_FRACTION:
        # which: the query absorbed them by meaning at τ (semantic) or they are its own words (exact);
        # then: what that does to the order, by the empty-B rule
        what = "semantic" if cfg.absorption == "semantic" else "exact"
        then = "all" if n_empty == window else ("fallback" if cfg.empty_b_rule == "fallback" else "demote")
        warnings.append(CAUSAL_NOTES.say(f"empty_b_{what}_{then}", n=n_empty, window=window, pct=f"{frac:.0%}",
                                         tau=f"{cfg.tau:.2f}"))
    return CausalDiagnostics(
        window=window,
        tau=cfg.tau,
        absorption=cfg.absorption,
        empty_b_rule=cfg.empty_b_rule,
        n_query_terms=n_q,
        a_share=a_share,
        empty_b_fraction=frac,
        n_empty_b=n_empty,
        warnings=tuple(warnings),
    )


# --------------------------------------------------------------------------- τ


def pair_cosines(term_vectors: npt.ArrayLike, rng: np.random.Generator, *, max_pairs: int = 20_000) -> F64:
    """Cosines of pairs of distinct rows: all pairs if there are at most ``max_pairs``,
    else ``max_pairs`` pairs drawn uniformly (i ≠ j) with ``rng``.

    Pass one row per distinct term (duplicates would add spurious cosines of 1).
    """
    x = np.asarray(term_vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"pair_cosines: need a 2-D array with at least 2 rows, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("pair_cosines: term_vectors contain NaN or infinity")
    norms = np.linalg.norm(x, axis=1)
    if np.any(norms == 0):
        raise ValueError("pair_cosines: term_vectors contain a zero row")
    if max_pairs < 1:
        raise ValueError(f"pair_cosines: max_pairs must be >= 1, got {max_pairs}")
    xn = x / norms[:, None]
    n = x.shape[0]
    if n * (n - 1) // 2 <= max_pairs:
        i, j = np.triu_indices(n, k=1)
    else:
        i = rng.integers(0, n, size=max_pairs)
        j = rng.integers(0, n - 1, size=max_pairs)
        j = j + (j >= i)  # uniform over j ≠ i
    # In blocks: gathering all pairs at once made two (max_pairs, dim) float64 copies —
    # 2 × 61 MB at 20,000 × 384, the largest allocation of an ingest (docs/benchmarks.md §1).
    out = np.empty(i.shape[0], dtype=np.float64)
    for start in range(0, i.shape[0], _PAIR_BLOCK):
        sl = slice(start, start + _PAIR_BLOCK)
        out[sl] = np.einsum("ij,ij->i", xn[i[sl]], xn[j[sl]])
    return out


_PAIR_BLOCK = 1024


def calibrate_tau(
    term_vectors: npt.ArrayLike,
    percentile: float,
    rng: np.random.Generator,
    *,
    max_pairs: int = 20_000,
) -> float:
    """Encoder-aware τ for Eq. 3: the ``percentile`` of random term-pair cosines.

    τ = 0.6 is on BGE-M3's cosine scale; multilingual-e5 puts every pair between
    ~0.8 and ~0.93, so a fixed 0.6 absorbs every term. Taking τ as a
    high percentile (settings: 97) of the library's own distribution means "only
    pairs closer than 97 % of random term pairs count as the same meaning",
    whatever the encoder's scale.
    """
    if not (0.0 < percentile < 100.0):
        raise ValueError(f"calibrate_tau: percentile must be in (0, 100), got {percentile}")
    cos = pair_cosines(term_vectors, rng, max_pairs=max_pairs)
    return float(np.percentile(cos, percentile))
