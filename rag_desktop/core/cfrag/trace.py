"""The CF-RAG trace of a finished run, and what the CF-RAG column shows of it."""

from __future__ import annotations

import dataclasses

import numpy as np

from rag_desktop.core.cfrag.arbitration import citations_for
from rag_desktop.core.cfrag.state import CFRun, CFState
from rag_desktop.core.cfrag.types import (
    CFResult,
    CFTrace,
    ClusterTrace,
    EvidenceRow,
    EvidenceTrace,
    MarginSummary,
    SpectralTrace,
    SubsetTrace,
)
from rag_desktop.core.citations import cited_numbers
from rag_desktop.core.types import Answer

METHOD_NAME = "cfrag"

MARGIN_NOISE_FLOOR = 0.01  # normalised-score units; Δ differences below this are not read as signal
PARAPHRASE_SIM = 0.98  # a kept q' this close to q (sim_sem) is a paraphrase: it cannot separate anything


def evidence_rows(trace: CFTrace) -> list[EvidenceRow]:
    """The evidence list of the CF-RAG column: what CF-RAG used first, Δ as an annotation.

    Paper 002 produces an answer, not a ranking, so the list shows what the answer rests
    on: first the evidence the answering call read (``DecisionTrace.read_ids``),
    the passages its rationale cites as [n] before the others, each in prompt order; then the
    other kept evidence by s(q, e), then the filtered-out passages by s(q, e), marked with their
    status. Ordering by Δ instead ranked noise first when every Δ lay within ±0.004 (the demo's
    travel-expense question). Cited first, because with the "reread" synthesis the call reads all
    kept evidence, and the paragraph that holds the answer belongs at the top, not at its [n].
    """
    d = trace.decision
    by_id = {e.pool_id: e for e in trace.evidence}
    read = [p for p in d.read_ids if p in by_id]
    cited = {n for n in cited_numbers(d.citing_text) if 1 <= n <= len(read)}

    def margin(e: EvidenceTrace) -> float | None:
        return None if e.max_s_cf is None else e.s_q - e.max_s_cf

    slots = sorted(range(1, len(read) + 1), key=lambda n: (n not in cited, n))
    rows = [EvidenceRow(by_id[read[n - 1]], "chosen", n, margin(by_id[read[n - 1]]), n in cited) for n in slots]
    rest = sorted((e for e in trace.evidence if e.pool_id not in read), key=lambda e: (-e.s_q, e.pool_id))
    rows += [EvidenceRow(e, "kept", 0, margin(e)) for e in rest if e.status == "kept"]
    rows += [EvidenceRow(e, "filtered", 0, margin(e)) for e in rest if e.status != "kept"]
    return rows


def margin_summary(trace: CFTrace, floor: float = MARGIN_NOISE_FLOOR) -> MarginSummary:
    """Can the counterfactual margins Δ separate the kept evidence at all? (see :class:`MarginSummary`)."""
    kept = trace.kept_evidence
    closest = max((c.sim_sem for c in trace.counterfactuals), default=0.0)
    margins = [e.s_q - e.max_s_cf for e in kept if e.max_s_cf is not None]
    s_q = [e.s_q for e in kept]
    noise = max(floor, 0.1 * (max(s_q) - min(s_q))) if s_q else floor
    if not trace.counterfactuals:
        return MarginSummary(0.0, noise, False, closest, "no counterfactual question was kept, so there is no Δ")
    if len(margins) < 2:
        return MarginSummary(0.0, noise, False, closest, "fewer than two kept passages: nothing to separate")
    spread = max(margins) - min(margins)
    if spread > noise:
        return MarginSummary(spread, noise, True, closest, "")
    why = (f"every Δ lies within {spread:.3f} of the others, below the noise level {noise:.3f}: "
           "the counterfactuals cannot separate this evidence")
    if closest > PARAPHRASE_SIM:
        why += f" (a kept counterfactual is a paraphrase of the question: sim {closest:.3f})"
    return MarginSummary(spread, noise, False, closest, why)


def build_result(run: CFRun, st: CFState) -> CFResult:
    """The Answer and the complete trace of a finished run."""
    s, S, n_cf = run.settings, st.scores, len(st.queries) - 1
    assert st.decision is not None
    evidence = []
    for i, hit in enumerate(st.pool):
        col = S[:, i]
        evidence.append(EvidenceTrace(
            pool_id=i, hit=hit,
            retrieved_by=tuple(sorted(st.merged_by[i])) if st.rep[i] == i else st.retrieved_by[i],
            s_q=float(col[0]), s_q_raw=float(st.raw[0, i]), s_cf=tuple(float(v) for v in col[1:]),
            max_s_cf=float(col[1:].max()) if n_cf else None,
            argmax_cf=int(np.argmax(col[1:])) + 1 if n_cf else -1,
            relevance=float(st.relevance[i]), quality=float(st.quality[i]), status=st.status[i],
            duplicate_of=int(st.rep[i]) if st.rep[i] != i else -1, cluster=st.cluster_of.get(i, -1),
        ))
    spec = st.spectral
    clusters = tuple(ClusterTrace(c, tuple(p for p in st.kept_ids if st.cluster_of.get(p) == c))
                     for c in range(spec.k_used))
    trace = CFTrace(
        query=run.query, seed=run.seed, settings=s, lam=s.lam, use_counterfactuals=s.use_counterfactuals,
        use_division=s.use_division, generator=run.generator.identity, embedder=run.embedder.identity,
        scorer=run.scorer.identity, scorer_is_substitute=bool(run.scorer.is_substitute), score_scale=st.scale,
        counterfactual_raw=st.cf_raw, counterfactuals=st.kept_cf, rejected_counterfactuals=st.rejected_cf,
        queries=st.queries, evidence=tuple(evidence),
        spectral=SpectralTrace(s.n_clusters, spec.k_used, st.sigma, spec.eigenvalues, spec.inertia,
                               used_division=s.use_division),
        clusters=clusters,
        subsets=tuple(SubsetTrace(j, sub.weights, st.subset_pids[j]) for j, sub in enumerate(st.subsets)),
        hypotheses=st.hypotheses, decision=st.decision, timings=st.timings, warnings=st.warnings,
        generation=st.usage, evidence_budget=st.evidence_budget,
    )
    d = st.decision
    if d.kind == "standard" and run.standard is not None:  # the standard answer stands, as shown beside
        answer = dataclasses.replace(run.standard, method=METHOD_NAME)
    else:
        answer = Answer(text=d.final_answer, citations=citations_for(d.citing_text, st.sources),
                        sources=st.sources, method=METHOD_NAME)
    return CFResult(answer=answer, trace=trace)
