"""The library's own calibration gate, with no generator: does it hold documents that echo others?

Paper 000 §4.6 decides from labelled probes (Δ between re-ranked and baseline, enable iff Δ > 0,
reliability by bootstrap; ``core.gate.calibrate``, which a person's labelled calibration uses). A
fresh library has no labels, and every label a library can give itself by *provenance* sides with
the baseline: a sentence cut from a document (masked in its source or not), its top keywords, a
document's title, each labelled with the document it came from, decide "neither" on every set we
hold, including the three where labelled questions gain from the hybrid (docs/evaluation.md,
"A gate from the library alone"). A probe is found best by similarity to the text it came from; the
regime the re-ranker exists for is a question whose words other documents repeat without its answer.

So the gate looks for that regime directly, in the keyword sets the re-ranker reads (K_d, the top
``retrieval.doc_keywords`` terms of kw(d) with their weights λ, paper §4.4). With n_t the number of
documents whose K_d names t, the share of e's key weight that one other document d accounts for is

    cov(e, d) = Σ_{t ∈ K_e ∩ K_d} (λ_t / (n_t − 1)) / Σ_{t ∈ K_e} λ_t

(a term that e shares with d alone counts whole; one that five other documents also name is split
among them), so Σ_d cov(e, d) is the share of e's key weight that any other document names, and

    e is an *echo* ⇔ max_{d ≠ e} cov(e, d) ≥ ECHO_COVER,   share = |echoes| / |documents|.

A keyword-stuffed page, a passage that restates a question, an answer-free copy of a passage repeat
one document's *particular* terms; the articles of one statute share their law's terms with dozens of
others, which the split discounts (counting every shared term whole, 21 % of 235 real articles were
"echoes" where labelled questions lose 0.25 MRR@10 with the hybrid). Decision: ``"hybrid"`` when
``share ≥ ECHO_SHARE``, else ``"neither"`` (the hybrid, not the causal score: with the embedded
encoder the causal order alone loses to the baseline on nearly every labelled set; §4.4 recommends
the hybrid in practice). Reliability as in §4.6: the share of 2,000 seeded bootstrap resamples of
the documents that take the same decision.

Choices where the paper is silent, made on five labelled libraries and checked once on two held out
(docs/evaluation.md): ``ECHO_COVER`` = ⅓ (a third of what e is about comes from one other
document) and ``ECHO_SHARE`` = 0.10 (one document in ten); document level whatever the retrieval
level, since the regime is a property of the collection.

Cost: one sparse product over the stored keyword sets (no embedding, no model):
docs/benchmarks.md, "The calibration gate".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import sparse

from rag_desktop.core.gate import N_DRAWS, Decision, GateDecision
from rag_desktop.core.types import Keyword

if TYPE_CHECKING:  # annotations only
    from rag_desktop.app.retrieval import Retriever

ECHO_COVER = 1 / 3  # cov(e, d) at or above which e is an echo of d
ECHO_SHARE = 0.10  # the share of echo documents at or above which the hybrid feeds the answers
SELF_LABELS = "self: documents that repeat another's key terms"
ECHO_METRIC = "echo share"
N_EXAMPLES = 5  # echo pairs kept in the record, to show


@dataclass(frozen=True)
class GateRecord:
    """The gate's decision as stored with the library and shown in the Why card and ``compare --json``.

    From a person's labelled probes (``from_decision``): §4.6's means, Δs and reliability. From the
    library itself (``decide``): ``metric`` is ``ECHO_METRIC``, ``n_probes`` the documents read, the
    means and Δs 0, and the evidence is ``echo_share`` against ``echo_threshold`` with ``echoes``,
    (echo document id, the document it repeats, cov) of the strongest pairs."""

    decision: Decision
    metric: str
    n_probes: int
    mean_baseline: float
    mean_causal: float
    mean_hybrid: float
    delta_causal: float
    delta_hybrid: float
    reliability: float
    labels: str  # SELF_LABELS, or how a person's labelled calibration was made
    fingerprint: str
    seconds: float
    calibrated_at: str
    echo_share: float | None = None
    echo_threshold: float | None = None
    echoes: tuple[tuple[int, int, float], ...] = ()

    @classmethod
    def from_decision(cls, d: GateDecision, *, labels: str, fingerprint: str, seconds: float) -> GateRecord:
        return cls(d.decision, d.metric, d.n_probes, d.mean_baseline, d.mean_causal, d.mean_hybrid,
                   d.delta_causal, d.delta_hybrid, d.reliability, labels, fingerprint, round(seconds, 3),
                   _now())

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["echoes"] = [list(p) for p in self.echoes]
        return out


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def echo_partners(keywords: Mapping[int, Sequence[Keyword]]) -> dict[int, tuple[int, float]]:
    """For each document, the other document whose key terms cover most of its key weight, and that
    cov(e, d) (module docstring); documents with no key term or no overlap are left out.

    One sparse product: W (documents × terms, λ_t / (n_t − 1)) times the 0/1 incidence of the same
    sets, transposed, gives every numerator at once. Ties go to the lower document id."""
    ids = sorted(keywords)
    col: dict[str, int] = {}
    rows, cols, vals = [], [], []
    for r, doc_id in enumerate(ids):
        for k in keywords[doc_id]:
            c = col.setdefault(k.term, len(col))
            rows.append(r)
            cols.append(c)
            vals.append(float(k.weight))
    if not col:
        return {}
    w = sparse.csr_matrix((vals, (rows, cols)), shape=(len(ids), len(col)))
    w.sum_duplicates()
    incidence = w.copy()
    incidence.data[:] = 1.0
    named_by = np.asarray(incidence.sum(axis=0)).ravel()  # n_t
    split = sparse.diags(np.divide(1.0, named_by - 1, out=np.zeros_like(named_by), where=named_by > 1))
    shared = ((w @ split) @ incidence.T).tocsr()
    shared.setdiag(0.0)  # a document's own terms: every diagonal entry is stored, so no new structure
    shared.eliminate_zeros()
    totals = np.asarray(w.sum(axis=1)).ravel()
    out: dict[int, tuple[int, float]] = {}
    for r in range(len(ids)):
        lo, hi = shared.indptr[r], shared.indptr[r + 1]
        if lo == hi or totals[r] <= 0:
            continue
        cand, got = shared.indices[lo:hi], shared.data[lo:hi]
        best = got.max()
        d = int(cand[got >= best].min())  # indices follow ``ids``, which are sorted: the lower id
        out[ids[r]] = (ids[d], float(best / totals[r]))
    return out


def decide(n_docs: int, partners: Mapping[int, tuple[int, float]], *, fingerprint: str, seconds: float,
           n_draws: int = N_DRAWS, seed: int = 0) -> GateRecord | None:
    """The decision and its bootstrap reliability over ``n_docs`` documents; None for an empty library."""
    if n_docs <= 0:
        return None
    echoes = sorted(((e, d, c) for e, (d, c) in partners.items() if c >= ECHO_COVER), key=lambda x: (-x[2], x[0]))
    share = len(echoes) / n_docs
    decision: Decision = "hybrid" if share >= ECHO_SHARE else "neither"
    # A resample of the n documents with replacement holds Binomial(n, share) echoes: drawn as counts, so
    # the draws cost n_draws numbers, not an n_draws × n matrix of indices (48 MB at 3,000 documents).
    rng = np.random.default_rng(seed)
    shares = rng.binomial(n_docs, share, size=n_draws) / n_docs
    reliability = float(np.mean((shares >= ECHO_SHARE) == (decision == "hybrid")))
    return GateRecord(decision, ECHO_METRIC, n_docs, 0.0, 0.0, 0.0, 0.0, 0.0, reliability, SELF_LABELS,
                      fingerprint, round(seconds, 3), _now(), round(share, 4), ECHO_SHARE,
                      tuple((e, d, round(c, 3)) for e, d, c in echoes[:N_EXAMPLES]))


def keyword_sets(retriever: Retriever) -> dict[int, list[Keyword]]:
    """Every document's K_d as the re-ranker reads it: the stored set, its top ``retrieval.doc_keywords``."""
    cat = retriever.library.catalog
    top = retriever.settings.retrieval.doc_keywords
    return {i: ks[:top] for i, ks in cat.keywords("d", [d.doc_id for d in cat.documents()]).items()}


def echo_count(record: Mapping[str, Any]) -> int | None:
    """How many documents a stored record of the library's own gate found echoing (its share of its
    documents), or None for a record without an echo share (a person's labelled calibration)."""
    share, n = record.get("echo_share"), record.get("n_probes")
    if not isinstance(share, int | float) or isinstance(share, bool) or not isinstance(n, int):
        return None
    return round(share * n)


def self_calibrate(retriever: Retriever, fingerprint: str, seed: int = 0) -> GateRecord | None:
    """Decide for the library ``retriever`` reads, at document level from its stored keyword sets (no
    generator, no embedding; module docstring); None when the library is empty."""
    t0 = time.perf_counter()
    kws = keyword_sets(retriever)
    return decide(len(kws), echo_partners(kws), fingerprint=fingerprint, seconds=time.perf_counter() - t0,
                  seed=seed)


__all__ = ["ECHO_COVER", "ECHO_METRIC", "ECHO_SHARE", "SELF_LABELS", "GateRecord", "decide", "echo_count",
           "echo_partners", "keyword_sets", "self_calibrate"]
