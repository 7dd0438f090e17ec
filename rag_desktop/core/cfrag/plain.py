"""CF-RAG's trace in plain words: one sentence per stage of paper 002, for a reader who is not an expert.

Each sentence is picked and filled from the numbers the run recorded (:class:`~.types.CFTrace`), and
says only what those numbers show: a passage "stands" only when it fits the question better than
every contrasting question by more than the scores' noise; the drafts "agree" only when their
recorded agreement reaches the recorded threshold; a reason ("so ...") is given only where the
recorded decision is the one that reason leads to in :mod:`.pipeline`. Where a threshold decides,
it is the one the method itself used (the trace's settings, :func:`~.trace.margin_summary`'s noise,
:func:`~.counterfactuals.judge_answers`), never a copy.

As for the other notes of the core (:mod:`rag_desktop.core.notes`), every sentence has one English
template here — the CLI and the JSON print it — and the desktop UI says it in its language through
the i18n key ``cfplain.<name>`` with the same values. Values are data only (numbers, names, quoted
texts), never words to translate. (Nothing reads these sentences back, so a template may use a value
twice, which a NoteBook's reader cannot.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rag_desktop.core.cfrag.counterfactuals import judge_answers
from rag_desktop.core.cfrag.notes import read as read_note
from rag_desktop.core.cfrag.trace import evidence_rows, margin_summary
from rag_desktop.core.cfrag.types import CFTrace, EvidenceRow, HypothesisTrace

Stage = Literal["standard", "counterfactuals", "retrieval", "contrast", "division", "arbitration", "decision"]
STAGES: tuple[Stage, ...] = ("standard", "counterfactuals", "retrieval", "contrast", "division", "arbitration",
                             "decision")

_ASKED = "We asked the model for questions close to yours that need a different answer"
_KEPT = _ASKED + " and kept {kept} of the {n} it wrote, such as “{example}”; "
_TESTED_CITED = "We tested the passage the answer cites, {p} “{title}”, against the contrasting questions: "
_TESTED_READ = "We tested the first passage the answer read, {p} “{title}”, against the contrasting questions: "
_STANDS = "it fits your question better than any of them (by {delta}), so the passage stands."
_EVEN = ("it fits “{rival}” about as well as yours (a difference of {delta}, within the noise of {noise}), "
         "so the test cannot tell which of the two it answers.")
_RIVAL = "it fits “{rival}” better than yours (by {delta}), so it may answer that question rather than yours."
_AHEAD = "Draft {w} scored highest, ahead of {r} by {margin}"
_FIT = "how well its answer fits its passages and your question"
_AGREE = "The drafts agree (word overlap {agr}, {thr} needed)"
_DISAGREE = "The drafts disagree (word overlap {agr}, {thr} needed)"
_TOP = "the answer is that of the highest-scored draft, {w}."

TEMPLATES: dict[str, str] = {
    # 1. counterfactual exploration (§1): the q' kept by V(q, q') and Info, and their closed-book answers
    "cf_off": "We did not write contrasting questions: they are switched off.",
    "cf_none": _ASKED + "; it wrote none we could use.",
    "cf_rejected": _ASKED + "; none of the {n} it wrote passed the checks.",
    "cf_kept_differ": _KEPT + "answering from memory, the model answered each differently from yours.",
    "cf_kept_mixed": _KEPT + "answering from memory, the model answered {differ} of them differently from yours; "
                             "its answers to the other {other} could not be compared.",
    "cf_kept_unknown": _KEPT + "the model's answers from memory could not show whether they differ from yours.",
    # 2. dialectical retrieval (§2): R(q) ∪ ⋃ R(q'), then dedup, Q(e) and the relevance cut
    "ret_none": "We searched your documents and found no passage.",
    "ret_none_kept": "We searched your documents and found passages ({pool}), but none was clear and relevant "
                     "enough to keep.",
    "ret_all": "We searched your documents with your question; every passage found was kept ({pool} in all).",
    "ret_all_cf": "We searched your documents with your question and the contrasting ones; every passage found "
                  "was kept ({pool} in all).",
    "ret_some": "We searched your documents with your question and kept {kept} of the {pool} passages found; "
                "the others were near-copies of a kept one, too weak, or not relevant enough.",
    "ret_some_cf": "We searched your documents with your question and the contrasting ones and kept {kept} of "
                   "the {pool} passages found; the others were near-copies of a kept one, too weak, or not "
                   "relevant enough.",
    # 3. the counterfactual test of the passage the answer rests on: its term of φ_causal (§4),
    #    Δ = s(q, e) − max_{q'} s(q', e), read against margin_summary's noise
    "test_none": "With no contrasting question, no passage could be tested against one.",
    "test_stands_cited": _TESTED_CITED + _STANDS,
    "test_stands_read": _TESTED_READ + _STANDS,
    "test_even_cited": _TESTED_CITED + _EVEN,
    "test_even_read": _TESTED_READ + _EVEN,
    "test_rival_cited": _TESTED_CITED + _RIVAL,
    "test_rival_read": _TESTED_READ + _RIVAL,
    # 4. evidence division (§3): spectral clusters, M subsets, one hypothesis each
    "div_one": "The model read the kept passages ({n}) together and wrote one answer from them.",
    "div_one_part": "The model read {n} of the {kept} kept passages together and wrote one answer from them.",
    "div": "We sorted the kept passages ({n}) into topic groups ({k}) and gave the model different mixes of "
           "them ({m}), one draft answer per mix.",
    # 5. arbitration (§4): Ψ_j = (1 − λ)·φ_coh + λ·φ_causal; which part put the winner first
    "arb_tie": "Drafts {w} and {r} scored the same; {w}, written first, comes first.",
    "arb_nocf": _AHEAD + ", on " + _FIT + "; with no contrasting question, nothing else counted.",
    "arb_lam0": _AHEAD + ", on " + _FIT + "; the contrasting questions were given no weight (λ = 0).",
    "arb_flat": _AHEAD + "; the drafts' passages held up equally well against the contrasting questions "
                         "(their differences, at most {spread}, are within the noise of {noise}).",
    "arb_both": _AHEAD + ": its answer fits its passages and your question best, and its passages hold up "
                         "best against the contrasting questions.",
    "arb_fit": _AHEAD + ", on " + _FIT + "; the passages of {c} held up better against the contrasting "
                                         "questions.",
    "arb_contrast": _AHEAD + ", on how well its passages hold up against the contrasting questions; the "
                             "answer of {h} fit its passages and your question better.",
    "arb_mixed": "Draft {w} scored highest overall, ahead of {r} by {margin}, without being first on either "
                 "part: the answer of {h} fit its passages and your question best, and the passages of {c} "
                 "held up best against the contrasting questions.",
    # 6. the decision (§4): the highest Ψ when the drafts agree, else a synthesis (cfrag.synthesis_prompt)
    "dec_none": "No passage was left to answer from, so no answer was written.",
    "dec_single": "There was one draft, and its answer is the answer.",
    "dec_select": _AGREE + ", so " + _TOP,
    "dec_reread_same": _DISAGREE + ", so the model read all the kept passages again in one pass; its answer "
                                   "is the same as {j}'s.",
    "dec_reread_new": _DISAGREE + ", so the model read all the kept passages again in one pass; its answer "
                                  "differs from every draft's.",
    "dec_synth_same": _DISAGREE + ", so the model was shown the top drafts with their passages and wrote one "
                                  "answer, the same as {j}'s.",
    "dec_synth_new": _DISAGREE + ", so the model was shown the top drafts with their passages and wrote one "
                                 "answer that differs from every draft's.",
    "dec_fallback_empty": _DISAGREE + "; the model's combined answer came back empty, so " + _TOP,
    "dec_fallback_ungrounded": _DISAGREE + "; the model's combined answer was neither in the passages nor one "
                                           "of the drafts, so " + _TOP,
    "dec_fallback": _DISAGREE + "; the model's combined answer could not be used, so " + _TOP,
    # the decision said without a reason, where the recorded numbers do not back one
    "dec_top": "The answer is that of the highest-scored draft, {w}.",
    "dec_chosen": "The answer is that of draft {w}.",
    "dec_reread": "The model read all the kept passages again in one pass and answered from them.",
    "dec_synth": "The model was shown the top drafts with their passages and wrote one answer.",
    "dec_cut": "The reply the answer comes from used all of its length, so the answer may be cut short.",
    # the standard answer CF-RAG starts from (core.cfrag.anchor): why the paths ran or not, and the outcome
    "std_confident": "The standard answer is held by a passage it read ({share} of what it adds to your question "
                     "is there, {need} needed), so CF-RAG keeps it and writes no answer of its own.",
    "std_not_found": "The standard answer says your documents do not hold the answer, so CF-RAG searched again "
                     "with contrasting questions.",
    "std_weak": "Only {share} of what the standard answer adds to your question is in a passage it read ({need} "
                "needed), so CF-RAG searched again with contrasting questions.",
    "std_agrees": "CF-RAG's own answer, “{cand}”, says the same as the standard answer, so the standard answer "
                  "and its citations are kept.",
    "std_replaced": "CF-RAG's own answer is held by its passages ({share} of what it adds, {need} needed) and "
                    "differs from the standard answer, so it replaces it.",
    "std_unsupported": "CF-RAG's own answer, “{cand}”, is not held by its passages either ({share}, {need} "
                       "needed), so the standard answer is kept: your documents may not answer this question.",
}

PREFIX = "cfplain"  # the i18n keys: cfplain.<name>


@dataclass(frozen=True)
class PlainLine:
    """One plain sentence: its stage, its template's name and the values it is filled with."""

    stage: Stage
    name: str
    values: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The i18n key the desktop UI says it with."""
        return f"{PREFIX}.{self.name}"

    @property
    def text(self) -> str:
        """The sentence in English (the CLI's and the JSON's)."""
        return TEMPLATES[self.name].format(**self.values)


def hypothesis_name(index: int) -> str:
    """Hypotheses (drafts) are H1, H2, … everywhere: these sentences, the trace's tables, the column."""
    return f"H{index + 1}"


def passage_name(pool_id: int) -> str:
    """Evidence passages are #1, #2, … everywhere."""
    return f"#{pool_id + 1}"


def _num(x: float, digits: int = 3) -> str:
    """|x| as a sentence says it (the sentence already says which way): never "0.000" for a value
    that is not zero."""
    x = abs(x)
    if 0 < x < 0.5 * 10 ** -digits:
        return f"<{10 ** -digits:.{digits}f}"
    return f"{x:.{digits}f}"


def _pair(a: float, b: float, digits: int = 2) -> tuple[str, str]:
    """``a`` and ``b`` with enough digits that two different values never read as equal (0.599 is
    below 0.600; at two digits both read 0.60)."""
    while digits < 6 and a != b and f"{a:.{digits}f}" == f"{b:.{digits}f}":
        digits += 1
    return f"{a:.{digits}f}", f"{b:.{digits}f}"


# =========================================================================== the stages


def _counterfactuals(t: CFTrace) -> PlainLine:
    """§1: how many q' were written and kept, and whether their closed-book answers differ from q's
    (``CounterfactualCandidate.answers``, the recorded proxy for L(q) ≠ L(q'))."""
    if not t.use_counterfactuals:
        return PlainLine("counterfactuals", "cf_off")
    kept, n = t.counterfactuals, len(t.counterfactuals) + len(t.rejected_counterfactuals)
    if not kept:
        return PlainLine("counterfactuals", "cf_rejected" if n else "cf_none", {"n": str(n)} if n else {})
    differ = sum(1 for c in kept if c.answers == "differ")
    name = "cf_kept_differ" if differ == len(kept) else "cf_kept_unknown" if differ == 0 else "cf_kept_mixed"
    values = {"kept": str(len(kept)), "n": str(n), "example": kept[0].text}
    if name == "cf_kept_mixed":
        values |= {"differ": str(differ), "other": str(len(kept) - differ)}
    return PlainLine("counterfactuals", name, values)


def _retrieval(t: CFTrace) -> PlainLine:
    """§2: the pool R(q) ∪ ⋃ R(q') and how much of it passed dedup, Q(e) and the relevance cut."""
    pool, kept = len(t.evidence), len(t.kept_evidence)
    if not pool:
        return PlainLine("retrieval", "ret_none")
    if not kept:
        return PlainLine("retrieval", "ret_none_kept", {"pool": str(pool)})
    cf = "_cf" if len(t.queries) > 1 else ""
    if kept == pool:
        return PlainLine("retrieval", "ret_all" + cf, {"pool": str(pool)})
    return PlainLine("retrieval", "ret_some" + cf, {"pool": str(pool), "kept": str(kept)})


def _rests_on(t: CFTrace) -> EvidenceRow | None:
    """The passage the answer rests on: the first it cites, else the first the answering call read."""
    rows = [r for r in evidence_rows(t) if r.group == "chosen"]
    return rows[0] if rows else None


def _contrast(t: CFTrace) -> PlainLine | None:
    """The paper's counterfactual test of one passage (§4, the term of φ_causal):
    Δ = s(q, e) − max_{q'} s(q', e) against the noise below which Δ is not read as signal."""
    row = _rests_on(t)
    if row is None:
        return None  # nothing was read: the decision says so
    e = row.evidence
    if e.max_s_cf is None:
        return PlainLine("contrast", "test_none")
    delta, noise = e.s_q - e.max_s_cf, margin_summary(t).noise
    values = {"p": passage_name(e.pool_id), "title": e.hit.title or Path(e.hit.path).name, "delta": _num(delta)}
    if delta > noise:
        name = "test_stands"
    else:
        name = "test_even" if delta >= -noise else "test_rival"
        values["rival"] = t.queries[e.argmax_cf] if 0 < e.argmax_cf < len(t.queries) else ""
        if name == "test_even":
            values["noise"] = _num(noise)
    return PlainLine("contrast", f"{name}_{'cited' if row.cited else 'read'}", values)


def _division(t: CFTrace) -> PlainLine | None:
    """§3: spectral clusters of the kept evidence and the M subsets the hypotheses read."""
    if not t.subsets:
        return None
    kept = len(t.kept_evidence)
    if len(t.subsets) == 1:  # no division (all kept evidence), or one subset sampled from the clusters
        read = len(t.subsets[0].members)
        if read == kept:
            return PlainLine("division", "div_one", {"n": str(kept)})
        return PlainLine("division", "div_one_part", {"n": str(read), "kept": str(kept)})
    return PlainLine("division", "div", {"n": str(kept), "k": str(t.spectral.k_used), "m": str(len(t.subsets))})


def _by_psi(t: CFTrace) -> list[HypothesisTrace]:
    """The hypotheses by Ψ, ties to the earlier written (the pipeline's own order)."""
    return sorted(t.hypotheses, key=lambda h: (-h.psi, h.index))


def _best(hyps: list[HypothesisTrace], score: str) -> HypothesisTrace:
    return max(hyps, key=lambda h: (getattr(h, score), -h.index))


def _arbitration(t: CFTrace) -> PlainLine | None:
    """§4: which draft Ψ put first, by how much, and which of its two parts — φ_coh (its answer
    fits its evidence and q) or φ_causal (its evidence fits q rather than a q') — did it."""
    ranked = _by_psi(t)
    if len(ranked) < 2:
        return None
    w, r = ranked[0], ranked[1]
    values = {"w": hypothesis_name(w.index), "r": hypothesis_name(r.index), "margin": _num(w.psi - r.psi)}
    if w.psi == r.psi:
        return PlainLine("arbitration", "arb_tie", {"w": values["w"], "r": values["r"]})
    if not t.counterfactuals:  # φ_causal = 0 for every path: Ψ ranks by φ_coh alone
        return PlainLine("arbitration", "arb_nocf", values)
    if t.lam == 0:
        return PlainLine("arbitration", "arb_lam0", values)
    causal = [h.phi_causal for h in ranked]
    noise = margin_summary(t).noise
    if max(causal) - min(causal) <= noise:
        return PlainLine("arbitration", "arb_flat", values | {"spread": _num(max(causal) - min(causal)),
                                                               "noise": _num(noise)})
    fit, held = _best(ranked, "phi_coh"), _best(ranked, "phi_causal")
    fit_top, held_top = w.phi_coh >= fit.phi_coh, w.phi_causal >= held.phi_causal
    if fit_top and held_top:
        return PlainLine("arbitration", "arb_both", values)
    if fit_top:
        return PlainLine("arbitration", "arb_fit", values | {"c": hypothesis_name(held.index)})
    if held_top:
        return PlainLine("arbitration", "arb_contrast", values | {"h": hypothesis_name(fit.index)})
    return PlainLine("arbitration", "arb_mixed", values | {"h": hypothesis_name(fit.index),
                                                           "c": hypothesis_name(held.index)})


def _same_as(t: CFTrace, answer: str) -> HypothesisTrace | None:
    """The draft whose answer is the same as ``answer`` by the method's own rule for "the same
    answer" (:func:`judge_answers` at the run's ``answer_same_f1``); the closest if several."""
    same = []
    for h in _by_psi(t):
        judgement, f1 = judge_answers(answer, h.answer, t.settings.answer_same_f1)
        if judgement == "same":
            same.append((f1, h))
    return max(same, key=lambda p: p[0])[1] if same else None


def _decision(t: CFTrace) -> list[PlainLine]:
    """§4's decision, its reason given only where the recorded agreement leads to the recorded kind."""
    d, hyps = t.decision, t.hypotheses
    out: list[PlainLine] = []
    if d.kind == "no_evidence" or not hyps:
        return [PlainLine("decision", "dec_none")]
    agr, thr = _pair(d.agreement, d.threshold)
    agrees = d.agreement >= d.threshold  # the pipeline's rule for "the hypotheses agree"
    top = _by_psi(t)[0]
    if d.chosen >= 0:
        w = {"w": hypothesis_name(d.chosen)}
        if d.kind == "single" and len(hyps) == 1:
            out.append(PlainLine("decision", "dec_single"))
        elif d.chosen != top.index:
            out.append(PlainLine("decision", "dec_chosen", w))
        elif d.kind == "select" and agrees:
            out.append(PlainLine("decision", "dec_select", w | {"agr": agr, "thr": thr}))
        elif d.kind == "synthesis_fallback" and not agrees:
            why = {name for name, _ in filter(None, map(read_note, t.warnings))}
            name = ("dec_fallback_empty" if "synthesis_empty" in why
                    else "dec_fallback_ungrounded" if "synthesis_ungrounded" in why else "dec_fallback")
            out.append(PlainLine("decision", name, w | {"agr": agr, "thr": thr}))
        else:
            out.append(PlainLine("decision", "dec_top", w))
    else:
        style = "reread" if d.synthesis_style == "reread" else "synth"
        if d.kind != "synthesize" or agrees:
            out.append(PlainLine("decision", f"dec_{style}"))
        else:
            same = _same_as(t, d.final_answer)
            values = {"agr": agr, "thr": thr}
            if same is not None:
                values["j"] = hypothesis_name(same.index)
            out.append(PlainLine("decision", f"dec_{style}_{'same' if same is not None else 'new'}", values))
    if d.truncated:
        out.append(PlainLine("decision", "dec_cut"))
    return out


def _standard_lines(t: CFTrace) -> tuple[PlainLine, PlainLine | None]:
    """Why CF-RAG's paths ran or not (the standard answer's check), and what became of it."""
    c = t.decision.standard
    assert c is not None
    need = _pct(c.presence_min)
    if c.confident:
        return PlainLine("decision", "std_confident", {"share": _pct(c.presence), "need": need}), None
    why = (PlainLine("standard", "std_not_found") if c.not_found
           else PlainLine("standard", "std_weak", {"share": _pct(c.presence), "need": need}))
    cand = {"cand": c.candidate[:80], "share": _pct(max(0.0, c.candidate_presence)), "need": need}
    return why, PlainLine("decision", f"std_{c.outcome}", cand)


def _pct(x: float) -> str:
    return f"{round(100 * x)} %"


def plain_trace(trace: CFTrace) -> tuple[PlainLine, ...]:
    """The run in plain words: a sentence for each stage that ran, in the order of paper 002's
    stages (counterfactuals, retrieval, the contrast test, division, arbitration, decision); when
    the run started from the standard answer, why the stages ran first and its outcome last."""
    head: PlainLine | None = None
    tail: list[PlainLine | None] = []
    if trace.decision.standard is not None:
        head, outcome = _standard_lines(trace)
        if outcome is None:
            return (head,)
        tail = [outcome] if trace.decision.kind == "standard" else [*_decision(trace), outcome]
    else:
        tail = list(_decision(trace))
    lines = [head, _counterfactuals(trace), _retrieval(trace), _contrast(trace), _division(trace),
             _arbitration(trace), *tail]
    return tuple(line for line in lines if line is not None)


def plain_text(trace: CFTrace) -> list[str]:
    """:func:`plain_trace` in English."""
    return [line.text for line in plain_trace(trace)]
