"""Steps 2–3 of CF-RAG (paper 002 §2): the dialectical evidence pool and its filters.

R(q) ∪ ⋃_{q'} R(q'); s(q_i, e) from a cross-encoder, the whole matrix once;
near-duplicates (embedding cosine > θ_dedup) collapse onto one representative; then a
quality filter Q(e) and a relevance cut on max_{q* ∈ {q} ∪ Q_cf} s(q*, e).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rag_desktop.core.cfrag.common import FloatMatrix, IntArray, _hit_key, cosine_rows
from rag_desktop.core.cfrag.tuning import DEFAULT_TUNING, CFTuning
from rag_desktop.core.cfrag.types import EvidenceStatus
from rag_desktop.core.protocols import CrossEncoder
from rag_desktop.core.text import split_cjk
from rag_desktop.core.types import Hit


def pool_union(results: Sequence[Sequence[Hit]]) -> tuple[list[Hit], list[tuple[int, ...]]]:
    """R(q) ∪ ⋃ R(q'): unique hits in first-seen order and the query indices that found each.

    ``results[0]`` is R(q); ``results[i]`` is R(q'_i). A unit found by several queries
    keeps the Hit object of the first query that found it.
    """
    pool: list[Hit] = []
    by: list[list[int]] = []
    index: dict[tuple[str, int], int] = {}
    for qi, hits in enumerate(results):
        for hit in hits:
            key = _hit_key(hit)
            if key not in index:
                index[key] = len(pool)
                pool.append(hit)
                by.append([])
            if qi not in by[index[key]]:
                by[index[key]].append(qi)
    return pool, [tuple(b) for b in by]


def resolve_score_scale(scorer: CrossEncoder, tuning: CFTuning = DEFAULT_TUNING) -> str:
    """How raw s(q, e) is put on [0, 1], the scale of φ_coh's terms.

    A trained cross-encoder (bge-reranker, the paper's s) returns logits, unbounded;
    σ(logit) is its calibrated probability of relevance, so ``"sigmoid"``. A substitute
    (``is_substitute``) scores by cosine, already on the scale of φ_coh's cosine terms,
    so ``"identity"``. ``CFTuning.score_scale`` overrides "auto" for a backend that
    already returns probabilities (``"identity"``).

    φ_causal is a difference of two s values, so with sigmoid it lies in [−1, 1] and
    with cosine in [−2, 2] (in practice [−1, 1]): the same order as φ_coh ∈ [0, 1].
    """
    if tuning.score_scale != "auto":
        return tuning.score_scale
    return "identity" if scorer.is_substitute else "sigmoid"


def normalise_scores(raw: npt.ArrayLike, scale: str) -> FloatMatrix:
    arr = np.asarray(raw, dtype=np.float64)
    if scale == "sigmoid":
        return np.asarray(0.5 * (1.0 + np.tanh(0.5 * arr)), dtype=np.float64)  # overflow-free σ
    if scale == "identity":
        return arr.copy()
    raise ValueError(f"cfrag score_scale: unknown scale {scale!r} (use 'sigmoid' or 'identity')")


def score_matrix(scorer: CrossEncoder, queries: Sequence[str], passages: Sequence[str]) -> FloatMatrix:
    """Raw s(q_i, e) for every query (row) and passage (column), one scorer call per query."""
    if not passages:
        return np.zeros((len(queries), 0), dtype=np.float64)
    rows = []
    for q in queries:
        r = np.asarray(scorer.score(q, list(passages)), dtype=np.float64).reshape(-1)
        if r.shape[0] != len(passages):
            raise ValueError(
                f"cross-encoder {scorer.identity}: returned {r.shape[0]} scores for {len(passages)} passages"
            )
        if not np.all(np.isfinite(r)):
            raise ValueError(f"cross-encoder {scorer.identity}: returned a non-finite score")
        rows.append(r)
    return np.vstack(rows)


def dedup_by_embedding(vectors: npt.ArrayLike, s_q: Sequence[float], theta: float) -> IntArray:
    """Representative index per passage: near-duplicates collapse onto the best of them.

    Passages are visited in decreasing s(q, e) (ties: pool order); a passage whose cosine
    to an already kept passage exceeds θ_dedup becomes a duplicate of the most similar
    kept one, otherwise it is kept. So every representative has s(q, e) ≥ that of its
    duplicates, and no two kept passages have cosine > θ_dedup. ``rep[i] == i`` means kept.
    """
    x = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    n = len(s_q)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    sim = cosine_rows(x, x)
    order = sorted(range(n), key=lambda i: (-float(s_q[i]), i))
    rep = np.full(n, -1, dtype=np.int64)
    kept: list[int] = []
    for i in order:
        if kept:
            cs = sim[i, kept]
            j = int(np.argmax(cs))
            if cs[j] > theta:
                rep[i] = kept[j]
                continue
        rep[i] = i
        kept.append(i)
    return rep


_TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)


def _text_tokens(text: str) -> list[str]:
    return [t for word in _TOKEN_RE.findall(text.lower()) for t in split_cjk(word)]


def quality_score(text: str, ref_chars: int = DEFAULT_TUNING.quality_ref_chars) -> float:
    """Q(e) ∈ [0, 1]: a text-quality heuristic (paper 002 §2 names Q(e) without a formula).

    Q(e) = length · alpha · repetition, each factor in [0, 1], so a passage has to be
    acceptable on all three:

    * length     = min(1, c / ref_chars), c = number of letters (any script, CJK included)
      and digits — too-short fragments carry no evidence;
    * alpha      = clip((c / t − 0.5) / 0.3, 0, 1), t = non-whitespace characters: prose
      is ≥ 80 % letters/digits (factor 1); ruled lines, symbol tables and OCR debris fall
      below 50 % (factor 0);
    * repetition = distinct word trigrams / all word trigrams (words, CJK characters as
      single tokens; 1 with fewer than 3 tokens): repeated headers or boilerplate score low.
    """
    nonspace = [ch for ch in text if not ch.isspace()]
    t = len(nonspace)
    if t == 0:
        return 0.0
    c = sum(1 for ch in nonspace if ch.isalnum())
    length = min(1.0, c / float(ref_chars))
    alpha = min(1.0, max(0.0, (c / t - 0.5) / 0.3))
    toks = _text_tokens(text)
    if len(toks) < 3:
        repetition = 1.0
    else:
        grams = list(zip(toks, toks[1:], toks[2:], strict=False))
        repetition = len(set(grams)) / len(grams)
    return float(length * alpha * repetition)


def select_evidence(
    rep: Sequence[int],
    quality: Sequence[float],
    relevance: Sequence[float],
    s_q: Sequence[float],
    *,
    quality_min: float,
    keep: int,
) -> list[EvidenceStatus]:
    """Status of every pool passage after dedup, the quality filter and the relevance cut.

    Order (paper 002 §2: dedup first, then filter): duplicates drop out; a representative
    with Q(e) < quality_min is "low_quality"; the rest are ranked by their relevance
    r(e) = max_{q* ∈ {q} ∪ Q_cf} s(q*, e) (ties: higher s(q, e), then pool order) and the
    top ``keep`` (= ``retrieve_k``) stay. The paper gives no absolute threshold for r(e);
    a rank cut keeps the evidence budget equal to a standard RAG call's k whatever the
    scorer's scale, and since the max runs over every query, evidence for a
    counterfactual competes on equal terms with evidence for q (it must enter the pool
    for φ_causal to see it).
    """
    n = len(rep)
    status: list[EvidenceStatus] = ["kept"] * n
    candidates: list[int] = []
    for i in range(n):
        if rep[i] != i:
            status[i] = "duplicate"
        elif quality[i] < quality_min:
            status[i] = "low_quality"
        else:
            candidates.append(i)
    candidates.sort(key=lambda i: (-float(relevance[i]), -float(s_q[i]), i))
    for i in candidates[keep:]:
        status[i] = "below_cut"
    return status
