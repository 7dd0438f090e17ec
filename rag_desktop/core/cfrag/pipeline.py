"""CF-RAG end to end (paper 002): eleven steps over one frozen state (the first checks the standard
answer it starts from, :mod:`.anchor`; when that answer stands, the run ends there).

Each step is a function ``(run, state) -> state`` that returns a copy of the state with
its own results filled in (``dataclasses.replace``); :func:`iter_cfrag` runs them in
order, yields a :class:`Progress` before each (stage ``cfrag.<step>``) and finally the
:class:`CFResult` — the same contract as ``RagService.ingest`` / ``answer``: whatever is
not a Progress (or GenEvent) is the result.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rag_desktop.core.cfrag.anchor import answers_agree, claim_presence, says_not_found
from rag_desktop.core.cfrag.arbitration import (
    AGREEMENT_MEASURE,
    agreement,
    answer_presence,
    phi_causal,
    phi_coh,
    psi,
    synthesis_is_grounded,
)
from rag_desktop.core.cfrag.calls import generate_group
from rag_desktop.core.cfrag.common import _hit_key, cosine_rows
from rag_desktop.core.cfrag.counterfactuals import explore_counterfactuals
from rag_desktop.core.cfrag.evidence import (
    dedup_by_embedding,
    normalise_scores,
    pool_union,
    quality_score,
    resolve_score_scale,
    score_matrix,
    select_evidence,
)
from rag_desktop.core.cfrag.notes import say
from rag_desktop.core.cfrag.prompts import _evidence_budget, hypothesis_messages, synthesis_messages
from rag_desktop.core.cfrag.sampling import Subset, sample_subsets
from rag_desktop.core.cfrag.seeds import derive_seed, stream_rng
from rag_desktop.core.cfrag.spectral import median_sigma, spectral_clustering
from rag_desktop.core.cfrag.state import _NO_SPECTRAL, CFRun, CFState, Reader, Retriever, StoredVectors, Vector
from rag_desktop.core.cfrag.trace import build_result
from rag_desktop.core.cfrag.tuning import DEFAULT_TUNING, CFTuning
from rag_desktop.core.cfrag.types import (
    CFResult,
    DecisionKind,
    DecisionTrace,
    GenerationUsage,
    HypothesisTrace,
    StandardCheck,
    StandardOutcome,
    StepTiming,
)
from rag_desktop.core.citations import cited_numbers
from rag_desktop.core.errors import UserInputError
from rag_desktop.core.generation import GenRequest
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.prompting import sources_as_read
from rag_desktop.core.protocols import CrossEncoder, Embedder, Generator
from rag_desktop.core.replies import parse_hypothesis, trim_to_sentence
from rag_desktop.core.settings import CFRagSettings, check_setting, validate_section
from rag_desktop.core.text import normalize_answer
from rag_desktop.core.types import Answer, CancelToken, Hit, Progress

EventSink = Callable[[Progress], None]


def _embed_new(run: CFRun, st: CFState, hits: Sequence[Hit]) -> Mapping[tuple[str, int], Vector]:
    """``st.vectors`` plus the passage embeddings of the hits not embedded yet."""
    todo = list({_hit_key(h): h for h in hits if _hit_key(h) not in st.vectors}.values())
    if not todo:
        return st.vectors
    found: dict[tuple[str, int], Vector] = {}
    if run.stored is not None:
        for h, v in zip(todo, run.stored(todo), strict=True):
            if v is not None and v.shape == (run.embedder.dim,):
                found[_hit_key(h)] = np.asarray(v, dtype=np.float64)
    rest = [h for h in todo if _hit_key(h) not in found]
    if rest:
        embs = np.asarray(run.embedder.embed_passages([h.text for h in rest]), dtype=np.float64)
        if embs.shape[0] != len(rest):
            raise ValueError(f"embedder {run.embedder.identity}: returned {embs.shape[0]} rows for {len(rest)} texts")
        found.update({_hit_key(h): v for h, v in zip(rest, embs, strict=True)})
    return {**st.vectors, **found}


# =========================================================================== the steps


def _standard(run: CFRun, st: CFState) -> CFState:
    """Candidate 0, the standard answer (core.cfrag.anchor): when confident it stands and the
    run ends here; otherwise its check waits for the decision."""
    std = run.standard
    if std is None or not run.settings.keep_standard:
        return st
    presence = claim_presence(std.text, run.query, sources_as_read(std.sources, std.locators, detect_lang(run.query)))
    check = StandardCheck(std.text, presence, says_not_found(std.text), run.tuning.presence_min, "confident")
    if not check.confident:
        return dataclasses.replace(st, standard_check=check)
    return dataclasses.replace(st, decision=_standard_decision(check), sources=tuple(std.sources))


def _standard_decision(check: StandardCheck, base: DecisionTrace | None = None) -> DecisionTrace:
    """The decision that keeps the standard answer (``base``: the paths' decision it overrules)."""
    return DecisionTrace(
        agreement=base.agreement if base else 1.0,
        agreement_measure=base.agreement_measure if base else AGREEMENT_MEASURE,
        threshold=base.threshold if base else 0.0, kind="standard", chosen=-1, synthesized_from=(),
        read_ids=(), synthesis_raw=base.synthesis_raw if base else "", final_answer=check.answer,
        final_rationale="", synthesis_style=base.synthesis_style if base else "", standard=check)


def _against_standard(run: CFRun, st: CFState) -> CFState:
    """The paths' answer against the standard answer that was not confident: it replaces the
    standard answer only when its own passages hold it and it says something else."""
    check, d = st.standard_check, st.decision
    if check is None or d is None or run.standard is None:
        return st
    cand = d.final_answer if d.kind != "no_evidence" else ""
    # The paths' passages with a header of their title and page, as the standard answer's are read
    # (their own prompt names them alike: core.cfrag.prompts).
    read = sources_as_read(st.sources, None, detect_lang(run.query))
    presence = claim_presence(cand, run.query, read) if cand else 0.0
    if cand and answers_agree(cand, check.answer, run.query):
        outcome: StandardOutcome = "agrees"
    elif cand and presence >= check.presence_min and not says_not_found(cand):
        outcome = "replaced"
    else:
        outcome = "unsupported"
    check = dataclasses.replace(check, outcome=outcome, candidate=cand, candidate_presence=presence)
    if outcome == "replaced":
        rationale = d.final_rationale
        if not cited_numbers(d.citing_text):
            # Where CF-RAG overrides the standard answer it cites: the passage that holds it.
            best = max(range(len(st.sources)), key=lambda i: claim_presence(cand, run.query, [read[i]]))
            rationale = f"{rationale} [{best + 1}]".strip()
        return dataclasses.replace(st, decision=dataclasses.replace(d, standard=check, final_rationale=rationale))
    return dataclasses.replace(st, decision=_standard_decision(check, d), sources=tuple(run.standard.sources))


def _retrieve(run: CFRun, st: CFState) -> CFState:
    """R(q) and E(q)."""
    hits_q = tuple(run.retrieve(run.query, run.settings.retrieve_k))
    q_vec = np.asarray(run.embedder.embed_queries([run.query]), dtype=np.float64)[0]
    return dataclasses.replace(st, hits_q=hits_q, q_vec=q_vec, vectors=_embed_new(run, st, hits_q))


def _counterfactuals(run: CFRun, st: CFState) -> CFState:
    """Step 1 (§1): the validated, ranked q' (none without ``use_counterfactuals``)."""
    if not run.settings.use_counterfactuals:
        return dataclasses.replace(st, queries=(run.query,))
    centroid = np.mean([st.vectors[_hit_key(h)] for h in st.hits_q], axis=0) if st.hits_q else None
    usage: list[GenerationUsage] = []
    kept, rejected, raw, warn = explore_counterfactuals(
        run.query, q_vec=st.q_vec, context_centroid=centroid, embedder=run.embedder, generator=run.generator,
        settings=run.settings, seed=run.seed, tuning=run.tuning, cancel=run.cancel, usage=usage.append)
    return dataclasses.replace(st, kept_cf=tuple(kept), rejected_cf=tuple(rejected), cf_raw=raw,
                               queries=(run.query, *(c.text for c in kept)),
                               warnings=st.warnings + tuple(warn), usage=st.usage + tuple(usage))


def _dialectical_retrieval(run: CFRun, st: CFState) -> CFState:
    """Step 2 (§2): R(q) ∪ ⋃ R(q')."""
    results = [list(st.hits_q)] + [list(run.retrieve(qc, run.settings.retrieve_k)) for qc in st.queries[1:]]
    pool, retrieved_by = pool_union(results)
    return dataclasses.replace(st, pool=tuple(pool), retrieved_by=tuple(retrieved_by),
                               vectors=_embed_new(run, st, pool))


def _scoring(run: CFRun, st: CFState) -> CFState:
    """Step 3: s(q_i, e), the whole matrix once."""
    # The substitute scorer embeds with the same encoder: give it the pool's vectors, which
    # _embed_new already has, instead of embedding every chunk a second time.
    remember = getattr(run.scorer, "remember", None)
    if callable(remember) and getattr(run.scorer, "embedder", None) is run.embedder and st.pool:
        remember([h.text for h in st.pool], np.stack([st.vectors[_hit_key(h)] for h in st.pool]))
    raw = score_matrix(run.scorer, st.queries, [h.text for h in st.pool])
    scale = resolve_score_scale(run.scorer, run.tuning)
    warnings = st.warnings
    if run.scorer.is_substitute:
        warnings += (say("substitute_scorer", scorer=run.scorer.identity),)
    return dataclasses.replace(st, raw=raw, scores=normalise_scores(raw, scale), scale=scale, warnings=warnings)


def _filter(run: CFRun, st: CFState) -> CFState:
    """Dedup → quality Q(e) → relevance cut (§2)."""
    s, pool, S = run.settings, st.pool, st.scores
    pool_vecs = (np.stack([st.vectors[_hit_key(h)] for h in pool]) if pool
                 else np.zeros((0, max(1, run.embedder.dim))))
    s_q = S[0].tolist() if pool else []
    rep = dedup_by_embedding(pool_vecs, s_q, s.theta_dedup)
    merged_by: list[set[int]] = [set(b) for b in st.retrieved_by]
    for i, r in enumerate(rep.tolist()):
        if r != i:
            merged_by[r] |= set(st.retrieved_by[i])
    quality = [quality_score(h.text, run.tuning.quality_ref_chars) for h in pool]
    relevance = S.max(axis=0) if pool else np.zeros(0)
    status = select_evidence(rep.tolist(), quality, relevance.tolist(), s_q, quality_min=s.quality_min,
                             keep=s.retrieve_k)
    kept_ids = tuple(i for i in range(len(pool)) if status[i] == "kept")
    warnings = st.warnings
    if pool and not kept_ids:
        warnings += (say("all_filtered"),)
    return dataclasses.replace(st, pool_vecs=pool_vecs, rep=rep, merged_by=tuple(frozenset(m) for m in merged_by),
                               quality=tuple(quality), relevance=relevance, status=tuple(status),
                               kept_ids=kept_ids, warnings=warnings)


def _clustering(run: CFRun, st: CFState) -> CFState:
    """Step 4 (§3): spectral clustering of the kept evidence; σ by ``settings.sigma_rule``."""
    s, kept = run.settings, list(st.kept_ids)
    sigma = s.sigma
    if not (s.use_division and kept):
        return dataclasses.replace(st, sigma=sigma, spectral=_NO_SPECTRAL, labels=(), cluster_of={})
    if s.sigma_rule == "median":
        sigma = median_sigma(st.pool_vecs[kept], s.sigma)
    spec = spectral_clustering(st.pool_vecs[kept], s.n_clusters, sigma, stream_rng(run.seed, "clustering"),
                               n_init=run.tuning.kmeans_n_init, max_iter=run.tuning.kmeans_max_iter)
    labels = tuple(int(v) for v in spec.labels.tolist())
    return dataclasses.replace(st, sigma=sigma, spectral=spec, labels=labels,
                               cluster_of=dict(zip(kept, labels, strict=False)))


def _sampling(run: CFRun, st: CFState) -> CFState:
    """Step 5 (§3): M subsets E_j (one subset of everything without ``use_division``)."""
    s = run.settings
    if not st.kept_ids:
        subsets: list[Subset] = []
    elif s.use_division:
        subsets = sample_subsets(list(st.labels), n_subsets=s.n_hypotheses, size=s.evidence_per_hypothesis,
                                 temperature=s.temperature, rng=stream_rng(run.seed, "sampling"))
    else:
        subsets = [Subset((), tuple(range(len(st.kept_ids))))]
    pids = tuple(tuple(st.kept_ids[i] for i in sub.members) for sub in subsets)
    return dataclasses.replace(st, subsets=tuple(subsets), subset_pids=pids)


def _read(run: CFRun, hits: Sequence[Hit]) -> list[Hit]:
    """The evidence as the model reads it (``CFRun.read``): same hits, same order, maybe shorter text.

    The paper's evidence is a passage of about a hundred words; this app's retrieval unit is a
    4,096-character chunk, and a prompt budget cut keeps each chunk's *first* tokens, which may not
    hold the answer. So the app passes a reader that gives each chunk as its best paragraph for
    the question (fewer tokens read, too). Scores, Δ and φ stay on the chunks.
    """
    if run.read is None:
        return list(hits)
    out = list(run.read(run.query, hits))
    if len(out) != len(hits) or any(a.unit_id != b.unit_id for a, b in zip(out, hits, strict=True)):
        raise ValueError("cfrag: the evidence reader must return one hit per hit, in the same order")
    return out


def _hypothesis_requests(run: CFRun, st: CFState, subset_pids: Sequence[Sequence[int]],
                         ) -> tuple[list[GenRequest], dict[int, Hit], int, str]:
    """The requests H(q, E_j) for these subsets, the evidence as read, its budget and a note."""
    t, gen = run.tuning, run.generator
    budget, note = -1, ""
    if subset_pids:
        budget, note = _evidence_budget(run.query, [len(p) for p in subset_pids], gen, t)
    # Read once for all subsets, so the hypotheses, the synthesis and the citations agree on
    # what each evidence says (a window is scored among the windows of all kept evidence).
    ids = sorted({p for pids in subset_pids for p in pids})
    read_of = dict(zip(ids, _read(run, [st.pool[p] for p in ids]), strict=True))
    requests = []
    for j, pids in enumerate(subset_pids):
        msgs, _ = hypothesis_messages(run.query, [read_of[p] for p in pids], gen, t.max_tokens_hypothesis,
                                      t.context_margin_tokens, budget=budget)
        requests.append(GenRequest(msgs, t.max_tokens_hypothesis, t.hypothesis_temperature,
                                   derive_seed(run.seed, "hypothesis", j)))
    return requests, read_of, budget, note


def _hypotheses(run: CFRun, st: CFState) -> CFState:
    """Step 5b (§3): one (answer, rationale) per subset, decoded together."""
    gen = run.generator
    requests, read_of, budget, note = _hypothesis_requests(run, st, st.subset_pids)
    warnings = st.warnings + ((note,) if note else ())
    usage: list[GenerationUsage] = []
    replies = generate_group(gen, "hypotheses", requests, cancel=run.cancel, usage=usage.append)
    return dataclasses.replace(
        st, evidence_budget=budget, warnings=warnings, usage=st.usage + tuple(usage), read_hits=read_of,
        replies=tuple((g, r.seed) for r, g in zip(requests, replies, strict=True)))


def _arbitration(run: CFRun, st: CFState) -> CFState:
    """Step 6 (§4): φ_coh, φ_causal and Ψ per hypothesis; ranks by Ψ (ties: index)."""
    S, parsed = st.scores, [parse_hypothesis(g.text) for g, _ in st.replies]
    nonempty = [i for i, p in enumerate(parsed) if normalize_answer(p[0])]
    a_vecs = (np.asarray(run.embedder.embed_queries([parsed[i][0] for i in nonempty]), dtype=np.float64)
              if nonempty else np.zeros((0, 1)))
    a_vec_of = {i: a_vecs[r] for r, i in enumerate(nonempty)}
    unranked: list[HypothesisTrace] = []
    for j, ((g, hseed), (ans, rat, how)) in enumerate(zip(st.replies, parsed, strict=True)):
        pids = list(st.subset_pids[j])
        sim_ae = 0.0
        if j in a_vec_of and pids:
            sim_ae = max(0.0, float(cosine_rows(st.pool_vecs[pids], a_vec_of[j]).max()))
        rel_q = float(np.mean(S[0, pids])) if pids else 0.0
        pres = answer_presence(ans, [st.pool[p].text for p in pids])
        coh = phi_coh(sim_ae, rel_q, pres, run.settings)
        causal = phi_causal(S[0, pids], S[1:, pids]) if pids else 0.0
        unranked.append(HypothesisTrace(
            index=j, subset=j, answer=ans, rationale=rat, parse=how, raw_text=g.text, seed=hseed,
            sim_answer_evidence=sim_ae, query_relevance=rel_q, presence=pres, phi_coh=coh,
            phi_causal=causal, psi=psi(coh, causal, run.settings.lam), mean_logprob=g.mean_logprob, rank=0,
            finish_reason=g.finish_reason,
        ))
    order = sorted(range(len(unranked)), key=lambda j: (-unranked[j].psi, j))
    hyps = tuple(dataclasses.replace(h, rank=order.index(h.index) + 1) for h in unranked)
    return dataclasses.replace(st, hypotheses=hyps, order=tuple(order))


def _decision(run: CFRun, st: CFState) -> CFState:
    """Step 7 (§4): select the highest Ψ when the hypotheses agree, else synthesise.

    The paper says only "synthesise the top-3 candidates". ``cfrag.synthesis_prompt`` chooses how:
    "reread" (default) answers from all the kept evidence as one path without the candidates,
    "ranked" / "evidence" prompt with the candidates (with / without Ψ) and their evidence. Any
    reply that is neither in the evidence nor a candidate falls back to the highest Ψ.
    """
    s, t, hyps, order = run.settings, run.tuning, st.hypotheses, st.order
    warnings = list(st.warnings)
    usage: list[GenerationUsage] = []
    agr = agreement([h.answer for h in hyps])
    synth_from: tuple[int, ...] = ()
    read_ids: list[int] = []
    synth_raw = synth_finish = final_ans = final_rat = style = ""
    synth_limit = t.max_tokens_synthesis
    chosen = -1
    sources: list[Hit] = []
    kind: DecisionKind
    if not hyps:
        kind = "no_evidence"
        warnings.append(say("no_evidence"))
    elif len(hyps) == 1 or agr >= s.agreement_threshold:
        kind = "single" if len(hyps) == 1 else "select"
        chosen = order[0]
    else:
        kind = "synthesize"
        top = [hyps[j] for j in order[: t.synthesis_top]]
        if s.synthesis_prompt == "evidence":  # the order they were written in: no order that reads as a verdict
            top.sort(key=lambda h: h.index)
        style = s.synthesis_prompt
        if style == "reread":
            # The paths disagree: read all the kept evidence as ONE path, with the hypothesis prompt
            # and without the candidates — exactly the call of the no-division path (cfrag_no_div:
            # same evidence, order, budget and seed), so that ablation and this decision agree.
            # No candidate is shown, so none is recorded as synthesised from.
            [req], read_all, _, _ = _hypothesis_requests(run, st, (st.kept_ids,))
            read_ids = list(st.kept_ids)
            sources = [read_all[p] for p in read_ids]
        else:
            synth_from = tuple(h.index for h in top)
            for h in top:
                read_ids += [p for p in st.subset_pids[h.subset] if p not in read_ids]
            sources = [st.read_hits.get(p, st.pool[p]) for p in read_ids]
            msgs, _ = synthesis_messages(run.query, top, sources, st.queries[1:], run.generator,
                                         t.max_tokens_synthesis, t.context_margin_tokens, s.synthesis_prompt)
            req = GenRequest(msgs, t.max_tokens_synthesis, t.synthesis_temperature, derive_seed(run.seed, "synthesis"))
        [g] = generate_group(run.generator, "synthesis", [req], cancel=run.cancel, usage=usage.append)
        synth_limit = req.max_tokens
        synth_raw, synth_finish = g.text, g.finish_reason
        final_ans, final_rat, _how = parse_hypothesis(g.text)
        if not normalize_answer(final_ans):
            kind, chosen = "synthesis_fallback", order[0]
            warnings.append(say("synthesis_empty"))
        elif not synthesis_is_grounded(final_ans, [h.answer for h in top], [x.text for x in sources]):
            kind, chosen = "synthesis_fallback", order[0]
            warnings.append(say("synthesis_ungrounded", answer=repr(final_ans[:60])))
    if chosen >= 0:
        h = hyps[chosen]
        final_ans, final_rat = h.answer, h.rationale
        read_ids = list(st.subset_pids[h.subset])
        sources = [st.read_hits.get(p, st.pool[p]) for p in read_ids]
    budget_hit = (hyps[chosen].finish_reason if chosen >= 0 else synth_finish) == "length"
    if budget_hit:
        limit = t.max_tokens_hypothesis if chosen >= 0 else synth_limit
        final_ans = trim_to_sentence(final_ans)
        warnings.append(say("budget_used", limit=limit))
    decision = DecisionTrace(
        agreement=agr, agreement_measure=AGREEMENT_MEASURE,
        threshold=s.agreement_threshold, kind=kind, chosen=chosen, synthesized_from=synth_from,
        read_ids=tuple(read_ids), synthesis_raw=synth_raw, final_answer=final_ans, final_rationale=final_rat,
        truncated=budget_hit, synthesis_style=style,
    )
    return _against_standard(run, dataclasses.replace(st, decision=decision, sources=tuple(sources),
                                                      warnings=tuple(warnings), usage=st.usage + tuple(usage)))


@dataclass(frozen=True)
class Step:
    name: str
    message: Callable[[CFState], str]  # the Progress message, from the state before the step
    run: Callable[[CFRun, CFState], CFState]


PIPELINE: tuple[Step, ...] = (
    Step("standard", lambda st: "checking the standard answer against its passages", _standard),
    Step("retrieve", lambda st: "retrieving for the question", _retrieve),
    Step("counterfactuals", lambda st: "writing counterfactual questions", _counterfactuals),
    Step("dialectical_retrieval", lambda st: "retrieving for the counterfactual questions", _dialectical_retrieval),
    Step("scoring", lambda st: "scoring evidence against every question", _scoring),
    Step("filter", lambda st: "removing near-duplicates and weak evidence", _filter),
    Step("clustering", lambda st: "clustering the evidence", _clustering),
    Step("sampling", lambda st: "sampling evidence subsets", _sampling),
    Step("hypotheses", lambda st: f"generating {len(st.subsets)} hypotheses", _hypotheses),
    Step("arbitration", lambda st: "scoring the hypotheses", _arbitration),
    Step("decision", lambda st: "choosing the answer", _decision),
)
_STEPS = tuple(step.name for step in PIPELINE)


# =========================================================================== the run


def _check_settings(s: CFRagSettings, seed: int) -> None:
    """The settings schema's own validation (core.settings, one source of truth): the section,
    and the run's seed by the rule of the ``cfrag.seed`` setting."""
    validate_section(s)
    check_setting("cfrag", "seed", seed)


def iter_cfrag(
    query: str,
    *,
    retrieve: Retriever,
    embedder: Embedder,
    scorer: CrossEncoder,
    generator: Generator,
    settings: CFRagSettings,
    seed: int,
    cancel: CancelToken | None = None,
    tuning: CFTuning = DEFAULT_TUNING,
    read: Reader | None = None,
    stored: StoredVectors | None = None,
    standard: Answer | None = None,
) -> Iterator[Progress | CFResult]:
    """Answer ``query`` with CF-RAG: a :class:`Progress` before each step, then the CFResult.

    ``retrieve(text, k)`` returns the top-k hits for a text (R(·, D)); models arrive as
    protocol objects and must already be loadable (``load()`` is called, idempotent).
    ``seed`` seeds every random choice (numpy streams for clustering and sampling,
    derived seeds for each generator call, :mod:`rag_desktop.core.cfrag.seeds`), so a run
    is reproducible with a deterministic generator. ``cancel`` is polled between steps and
    passed to the generator. The user-facing knobs come from ``settings``; ``tuning`` holds
    the implementation constants. ``read(query, hits)`` gives the evidence as the hypotheses and
    the synthesis read it, and as the answer cites it (see :func:`_read`; None: as retrieved).
    ``stored(hits)`` gives the library's stored E(e) of hits (None where it has none), which
    must come from ``embedder``; the rest are embedded here. ``standard`` is the standard RAG
    answer beside CF-RAG (its text and the sources it read): with ``settings.keep_standard`` it is
    candidate 0 (:mod:`.anchor`), and the steps after the first run only where it is not confident.

    Ablations (paper 002, Table "消融实验"):

    * ``use_counterfactuals=False``: no q' at all; the pool is R(q); φ_causal = 0.
    * ``use_division=False``: no clustering; ONE hypothesis over all kept evidence
      (the paper's "all evidence in one context"), so the decision is "single".
    * ``lam=0``: Ψ = φ_coh (φ_causal is still computed and shown in the trace).
    """
    if not query.strip():
        raise UserInputError("cfrag: the question is empty")
    _check_settings(settings, seed)
    for model in (embedder, scorer, generator):
        model.load()
    run = CFRun(query, retrieve, embedder, scorer, generator, settings, seed, cancel, tuning, read, stored,
                standard)
    st = CFState()
    for n, step in enumerate(PIPELINE, start=1):
        if cancel is not None:
            cancel.raise_if_set()
        yield Progress(stage=f"cfrag.{step.name}", current=n, total=len(PIPELINE), message=step.message(st))
        t0 = time.perf_counter()
        st = step.run(run, st)
        st = dataclasses.replace(st, timings=(*st.timings, StepTiming(step.name, time.perf_counter() - t0)))
        if st.decision is not None:  # the standard answer stands: no path need run
            break
    yield build_result(run, st)


def cfrag_result(events: Iterable[object], on_progress: EventSink | None = None) -> CFResult:
    """Run a CF-RAG event stream (:func:`iter_cfrag`, ``RagService.cfrag``) to its result.

    For callers without a UI (the CLI, evaluations, scripts); ``on_progress`` sees each step.
    """
    for ev in events:
        if isinstance(ev, CFResult):
            return ev
        if isinstance(ev, Progress) and on_progress is not None:
            on_progress(ev)
    raise RuntimeError("cfrag: the event stream ended without a result")


def run_cfrag(
    query: str,
    *,
    retrieve: Retriever,
    embedder: Embedder,
    scorer: CrossEncoder,
    generator: Generator,
    settings: CFRagSettings,
    seed: int,
    cancel: CancelToken | None = None,
    on_event: EventSink | None = None,
    tuning: CFTuning = DEFAULT_TUNING,
    read: Reader | None = None,
    stored: StoredVectors | None = None,
) -> CFResult:
    """:func:`iter_cfrag` run to its result (``on_event`` sees each step's Progress)."""
    return cfrag_result(iter_cfrag(query, retrieve=retrieve, embedder=embedder, scorer=scorer, generator=generator,
                                   settings=settings, seed=seed, cancel=cancel, tuning=tuning, read=read,
                                   stored=stored), on_event)
