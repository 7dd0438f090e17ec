"""CF-RAG's trace in plain words (core.cfrag.plain, said by ui.cf_notes): each sentence is chosen by
the numbers the run recorded and never claims what they contradict, in English and in Chinese.

The traces are the real pipeline's (test_cfrag_pipeline's scripted collaborators around the real
CF-RAG steps: paper 002's Dark Knight example), under several settings and seeds, and the same
recorded traces with one recorded number moved to reach each branch. The checks read the numbers
themselves (Δ of the passage the answer rests on against margin_summary's noise, the drafts' Ψ,
φ_coh and φ_causal, the agreement against its threshold), not the function's own choices.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import string
from pathlib import Path
from typing import Any

import pytest
from test_cfrag_pipeline import SETTINGS, run

from rag_desktop.core.cfrag import margin_summary
from rag_desktop.core.cfrag.counterfactuals import judge_answers
from rag_desktop.core.cfrag.notes import say
from rag_desktop.core.cfrag.plain import STAGES, TEMPLATES, PlainLine, passage_name, plain_text, plain_trace
from rag_desktop.core.cfrag.trace import evidence_rows
from rag_desktop.core.cfrag.types import CFTrace, StandardCheck
from rag_desktop.ui import i18n
from rag_desktop.ui.cf_notes import plain_sentences
from rag_desktop.ui.i18n import TABLE

# What a sentence may say only when the numbers say it, in each language.
STANDS = {"en": "so the passage stands", "zh": "因此该段落站得住"}
RIVAL = {"en": "better than yours", "zh": "比与你的问题更吻合"}
EVEN = {"en": "about as well as yours", "zh": "差不多"}
AGREE = {"en": "The drafts agree", "zh": "各候选回答一致"}
DISAGREE = {"en": "The drafts disagree", "zh": "各候选回答不一致"}
DIFFERS = {"en": "differs from every draft", "zh": "都不同"}


def recorded(settings: Any = SETTINGS, seed: int = 0) -> CFTrace:
    return run(settings, seed=seed)[0].trace


def traces() -> dict[str, CFTrace]:
    """Real runs of the pipeline: synthesis, selection, reread, one path, no counterfactuals, λ = 0."""
    r = dataclasses.replace
    return {
        "ranked": recorded(),
        "select": recorded(seed=1),
        "reread": recorded(r(SETTINGS, synthesis_prompt="reread")),
        "evidence": recorded(r(SETTINGS, synthesis_prompt="evidence")),
        "no_division": recorded(r(SETTINGS, use_division=False)),
        "no_counterfactuals": recorded(r(SETTINGS, use_counterfactuals=False)),
        "lam0": recorded(r(SETTINGS, lam=0.0), seed=2),
        "lam0_tie": recorded(r(SETTINGS, lam=0.0)),  # H1 and H3 both answer "Christian Bale": one Ψ
    }


RUNS = traces()


def by_stage(lines: tuple[PlainLine, ...]) -> dict[str, list[PlainLine]]:
    out: dict[str, list[PlainLine]] = {}
    for line in lines:
        out.setdefault(line.stage, []).append(line)
    return out


def rests_on(t: CFTrace) -> tuple[float, float] | None:
    """(Δ, noise) of the passage the answer rests on: the first it cites, else the first it read."""
    rows = [r for r in evidence_rows(t) if r.group == "chosen"]
    e = rows[0].evidence if rows else None
    if e is None or e.max_s_cf is None:
        return None
    return e.s_q - e.max_s_cf, margin_summary(t).noise


def check(t: CFTrace) -> dict[str, list[str]]:
    """The sentences of ``t`` in both languages, each claim checked against the recorded numbers."""
    lines = plain_trace(t)
    stages = [line.stage for line in lines]
    assert stages == sorted(stages, key=STAGES.index)  # the paper's order
    assert all(stages.count(s) <= 1 for s in STAGES if s != "decision") and 1 <= stages.count("decision") <= 3
    out = {lang: plain_sentences(t, lang) for lang in ("en", "zh")}
    assert [line.text for line in lines] == out["en"] == plain_text(t)
    d = t.decision
    test = rests_on(t)
    for lang, said in out.items():
        assert len(said) == len(lines)
        for s in said:
            assert s.endswith("." if lang == "en" else "。") and "{" not in s and "}" not in s, s
            if lang == "zh":
                assert re.search(r"[\u4e00-\u9fff]", s), s
        text = "\n".join(said)
        # "the passage stands" only when it fits the question better than every q' beyond the noise
        assert (STANDS[lang] in text) == (test is not None and test[0] > test[1]), (text, test)
        assert (RIVAL[lang] in text) == (test is not None and test[0] < -test[1]), (text, test)
        assert (EVEN[lang] in text) == (test is not None and abs(test[0]) <= test[1]), (text, test)
        # "agree" / "disagree" only as the recorded agreement stands against the recorded threshold
        if AGREE[lang] in text:
            assert d.agreement >= d.threshold and d.kind == "select"
        if DISAGREE[lang] in text:
            assert d.agreement < d.threshold and d.kind in ("synthesize", "synthesis_fallback")
    return out


# --------------------------------------------------------------------------- the real runs


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_sentence_of_a_real_run_is_backed_by_its_numbers(name: str) -> None:
    t = RUNS[name]
    check(t)
    lines = by_stage(plain_trace(t))
    cf = lines["counterfactuals"][0]
    if t.use_counterfactuals and t.counterfactuals:
        assert cf.values["kept"] == str(len(t.counterfactuals))
        assert cf.values["n"] == str(len(t.counterfactuals) + len(t.rejected_counterfactuals))
        assert cf.values["example"] == t.counterfactuals[0].text
        differ = sum(c.answers == "differ" for c in t.counterfactuals)
        assert cf.name == ("cf_kept_differ" if differ == len(t.counterfactuals) else
                           "cf_kept_unknown" if differ == 0 else "cf_kept_mixed")
    ret = lines["retrieval"][0]
    assert ret.values["pool"] == str(len(t.evidence))
    div = lines.get("division", [])
    if div and div[0].name.startswith("div_one"):  # one path: it read what its one subset holds
        assert len(t.subsets) == 1 and div[0].values["n"] == str(len(t.subsets[0].members))
    if ret.name.startswith("ret_some"):
        assert ret.values["kept"] == str(len(t.kept_evidence)) and len(t.kept_evidence) < len(t.evidence)
    assert ret.name.endswith("_cf") == (len(t.queries) > 1)
    dec = lines["decision"][0]
    if len(t.hypotheses) >= 2:
        w, r = sorted(t.hypotheses, key=lambda h: (-h.psi, h.index))[:2]
        arb = lines["arbitration"][0]
        assert arb.values["w"] == f"H{w.index + 1}" and arb.values["r"] == f"H{r.index + 1}"
        if arb.name != "arb_tie":
            assert float(arb.values["margin"].lstrip("<")) == pytest.approx(w.psi - r.psi, abs=6e-4)
    else:
        assert "arbitration" not in lines and dec.name == "dec_single"
    if dec.name.endswith("_same"):  # "the same as Hj" by the method's own rule for one answer
        j = int(dec.values["j"][1:]) - 1
        assert judge_answers(t.decision.final_answer, t.hypotheses[j].answer,
                             t.settings.answer_same_f1)[0] == "same"
    if dec.name.endswith("_new"):
        assert all(judge_answers(t.decision.final_answer, h.answer, t.settings.answer_same_f1)[0] != "same"
                   for h in t.hypotheses)


def test_the_real_runs_reach_the_main_branches() -> None:
    names = {line.name for t in RUNS.values() for line in plain_trace(t)}
    assert {"cf_kept_differ", "cf_off", "ret_some_cf", "ret_some", "test_stands_cited", "test_even_cited",
            "test_none", "div", "div_one", "arb_both", "arb_nocf", "arb_lam0", "arb_tie", "dec_select", "dec_single",
            "dec_synth_same", "dec_reread_same"} <= names, names


def test_the_dark_knight_run_says_what_it_did_in_both_languages() -> None:
    t = RUNS["select"]
    en, zh = check(t).values()
    assert en[0].startswith("We asked the model for questions close to yours") and "kept 2 of the 6" in en[0]
    assert "“Who played the main villain in The Dark Knight?”" in en[0]
    assert en[-1] == "The drafts agree (word overlap 1.00, 0.60 needed), so the answer is that of the " \
                     "highest-scored draft, H1."
    assert zh[-1] == "各候选回答一致（用词重合度 1.00，需要 0.60），因此采用得分最高的候选回答 H1。"


# --------------------------------------------------------------------------- one number moved


def with_rest(t: CFTrace, delta: float) -> CFTrace:
    """``t`` with the passage the answer rests on at Δ = ``delta`` (its best counterfactual score moved)."""
    row = next(r for r in evidence_rows(t) if r.group == "chosen")
    e = row.evidence
    moved = dataclasses.replace(e, max_s_cf=e.s_q - delta)
    return dataclasses.replace(t, evidence=tuple(moved if x.pool_id == e.pool_id else x for x in t.evidence))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_passage_stands_only_when_no_counterfactual_fits_it_as_well(lang: str) -> None:
    t = RUNS["ranked"]
    noise = margin_summary(t).noise
    for delta, want in ((2 * noise, "stands"), (noise * 0.5, "even"), (-noise * 0.5, "even"), (0.0, "even"),
                        (-2 * noise, "rival")):
        moved = with_rest(t, delta)
        assert margin_summary(moved).noise == pytest.approx(noise)  # the noise is read from the kept s(q,e)
        text = "\n".join(check(moved)[lang])
        assert (STANDS[lang] in text) == (want == "stands"), (delta, text)
        assert (RIVAL[lang] in text) == (want == "rival"), (delta, text)
        contrast = by_stage(plain_trace(moved))["contrast"][0]
        assert contrast.name.startswith(f"test_{want}")
        if want != "stands":  # the contrasting question that fits it best is named
            rival = next(r for r in evidence_rows(moved) if r.group == "chosen").evidence.argmax_cf
            assert contrast.values["rival"] == moved.queries[rival]


def test_the_passage_named_is_the_one_the_answer_cites_or_else_the_first_it_read() -> None:
    t = RUNS["ranked"]
    cited = next(r for r in evidence_rows(t) if r.group == "chosen")
    assert cited.cited
    line = by_stage(plain_trace(t))["contrast"][0]
    assert line.name.endswith("_cited") and line.values["p"] == passage_name(cited.evidence.pool_id)
    d = dataclasses.replace(t.decision, final_answer="Christian Bale", final_rationale="no marker")
    uncited = dataclasses.replace(t, decision=d)
    first = evidence_rows(uncited)[0]
    line = by_stage(plain_trace(uncited))["contrast"][0]
    assert line.name.endswith("_read") and line.values["p"] == passage_name(first.evidence.pool_id)
    assert first.evidence.pool_id == d.read_ids[0]


def _hyps(t: CFTrace, scores: list[tuple[float, float]]) -> CFTrace:
    """``t``'s hypotheses with (φ_coh, φ_causal) set and Ψ recomputed at the trace's λ."""
    hyps = tuple(dataclasses.replace(h, phi_coh=c, phi_causal=k, psi=(1 - t.lam) * c + t.lam * k)
                 for h, (c, k) in zip(t.hypotheses, scores, strict=True))
    return dataclasses.replace(t, hypotheses=hyps)


@pytest.mark.parametrize(("scores", "name"), [
    ([(0.9, 0.5), (0.5, 0.1), (0.4, 0.0)], "arb_both"),
    ([(0.9, 0.2), (0.5, 0.4), (0.4, 0.0)], "arb_fit"),
    ([(0.6, 0.6), (0.8, 0.1), (0.4, 0.0)], "arb_contrast"),
    ([(0.7, 0.45), (0.9, 0.0), (0.3, 0.9)], "arb_mixed"),
    ([(0.9, 0.30), (0.5, 0.31), (0.4, 0.30)], "arb_flat"),
    ([(0.5, 0.2), (0.5, 0.2), (0.1, 0.0)], "arb_tie"),
])
def test_the_arbitration_sentence_names_the_part_that_put_the_winner_first(
        scores: list[tuple[float, float]], name: str) -> None:
    t = _hyps(RUNS["ranked"], scores)
    line = by_stage(plain_trace(t))["arbitration"][0]
    assert line.name == name
    ranked = sorted(t.hypotheses, key=lambda h: (-h.psi, h.index))
    w = ranked[0]
    assert line.values["w"] == f"H{w.index + 1}"
    coh_top = w.phi_coh >= max(h.phi_coh for h in t.hypotheses)
    causal_top = w.phi_causal >= max(h.phi_causal for h in t.hypotheses)
    spread = max(h.phi_causal for h in t.hypotheses) - min(h.phi_causal for h in t.hypotheses)
    separates = spread > margin_summary(t).noise
    # "its passages hold up best" only when its φ_causal is the highest and φ_causal separates the drafts
    assert (name in ("arb_both", "arb_contrast")) == (separates and causal_top and w.psi != ranked[1].psi)
    assert (name in ("arb_both", "arb_fit")) == (separates and coh_top and w.psi != ranked[1].psi)
    if name == "arb_fit":
        c = int(line.values["c"][1:]) - 1
        assert t.hypotheses[c].phi_causal > w.phi_causal
    if name == "arb_contrast":
        h = int(line.values["h"][1:]) - 1
        assert t.hypotheses[h].phi_coh > w.phi_coh
    check(t)


def test_without_counterfactuals_or_their_weight_the_arbitration_says_only_fit_counted() -> None:
    assert by_stage(plain_trace(RUNS["no_counterfactuals"]))["arbitration"][0].name == "arb_nocf"
    assert all(h.phi_causal == 0 for h in RUNS["no_counterfactuals"].hypotheses)
    lam0 = RUNS["lam0"]
    assert lam0.lam == 0 and by_stage(plain_trace(lam0))["arbitration"][0].name == "arb_lam0"
    assert all(h.psi == pytest.approx(h.phi_coh) for h in lam0.hypotheses)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_agreement_is_claimed_only_as_the_recorded_numbers_stand(lang: str) -> None:
    t = RUNS["select"]
    d = t.decision
    text = "\n".join(check(t)[lang])
    assert AGREE[lang] in text and d.agreement >= d.threshold
    # the same decision recorded with an agreement below its threshold: no reason is given
    low = dataclasses.replace(t, decision=dataclasses.replace(d, agreement=0.599, threshold=0.6))
    text = "\n".join(check(low)[lang])
    assert AGREE[lang] not in text and DISAGREE[lang] not in text
    assert by_stage(plain_trace(low))["decision"][0].name == "dec_top"
    # a disagreement at a hair below the threshold never reads as two equal numbers
    syn = RUNS["ranked"]
    close = dataclasses.replace(syn, decision=dataclasses.replace(syn.decision, agreement=0.599, threshold=0.6))
    line = by_stage(plain_trace(close))["decision"][0]
    assert (line.values["agr"], line.values["thr"]) == ("0.599", "0.600")
    high = dataclasses.replace(syn, decision=dataclasses.replace(syn.decision, agreement=0.9))
    assert by_stage(plain_trace(high))["decision"][0].name == "dec_synth"  # no "disagree" to claim
    check(high)


def test_a_synthesis_that_fell_back_says_why_from_its_recorded_warning() -> None:
    t = RUNS["ranked"]
    top = sorted(t.hypotheses, key=lambda h: (-h.psi, h.index))[0]
    base = dataclasses.replace(t.decision, kind="synthesis_fallback", chosen=top.index)
    for warning, name in ((say("synthesis_empty"), "dec_fallback_empty"),
                          (say("synthesis_ungrounded", answer="'Marketing'"), "dec_fallback_ungrounded"),
                          ("", "dec_fallback")):
        fell = dataclasses.replace(t, decision=base, warnings=(warning,) if warning else ())
        line = by_stage(plain_trace(fell))["decision"][0]
        assert line.name == name and line.values["w"] == f"H{top.index + 1}"
        check(fell)


def test_a_chosen_draft_that_is_not_the_highest_is_not_called_the_highest() -> None:
    t = RUNS["select"]
    low = sorted(t.hypotheses, key=lambda h: (-h.psi, h.index))[-1]
    odd = dataclasses.replace(t, decision=dataclasses.replace(t.decision, chosen=low.index))
    line = by_stage(plain_trace(odd))["decision"][0]
    assert line.name == "dec_chosen" and "highest" not in line.text


def test_a_cut_reply_is_said_and_the_synthesis_is_compared_with_every_draft() -> None:
    t = RUNS["reread"]
    cut = dataclasses.replace(t, decision=dataclasses.replace(t.decision, truncated=True))
    assert [x.name for x in by_stage(plain_trace(cut))["decision"]][-1] == "dec_cut"
    new = dataclasses.replace(t, decision=dataclasses.replace(t.decision, final_answer="Michael Caine"))
    assert by_stage(plain_trace(new))["decision"][0].name == "dec_reread_new"
    for lang in ("en", "zh"):
        assert DIFFERS[lang] in "\n".join(check(new)[lang])


def test_counterfactuals_kept_rejected_or_none_are_counted_from_the_trace() -> None:
    t = RUNS["ranked"]
    kept = t.counterfactuals
    undetermined = tuple(dataclasses.replace(c, answers="undetermined") for c in kept)
    mixed = (kept[0], *undetermined[1:])
    cases = {
        "cf_kept_unknown": dataclasses.replace(t, counterfactuals=undetermined),
        "cf_kept_mixed": dataclasses.replace(t, counterfactuals=mixed),
        "cf_rejected": dataclasses.replace(t, counterfactuals=(), queries=t.queries[:1]),
        "cf_none": dataclasses.replace(t, counterfactuals=(), rejected_counterfactuals=(), queries=t.queries[:1]),
    }
    for name, case in cases.items():
        line = by_stage(plain_trace(case))["counterfactuals"][0]
        assert line.name == name
        if name == "cf_kept_mixed":
            assert (line.values["differ"], line.values["other"]) == ("1", str(len(kept) - 1))
        if name == "cf_rejected":
            assert line.values["n"] == str(len(t.rejected_counterfactuals))


def test_retrieval_says_what_was_found_and_kept() -> None:
    t = RUNS["ranked"]
    all_kept = dataclasses.replace(t, evidence=tuple(dataclasses.replace(e, status="kept") for e in t.evidence))
    assert by_stage(plain_trace(all_kept))["retrieval"][0].name == "ret_all_cf"
    assert by_stage(plain_trace(dataclasses.replace(all_kept, queries=t.queries[:1])))["retrieval"][0].name \
        == "ret_all"
    none_kept = dataclasses.replace(t, evidence=tuple(dataclasses.replace(e, status="below_cut")
                                                      for e in t.evidence), subsets=(), hypotheses=(),
                                    decision=dataclasses.replace(t.decision, kind="no_evidence", chosen=-1,
                                                                 read_ids=()))
    names = [x.name for x in plain_trace(none_kept)]
    assert names == ["cf_kept_differ", "ret_none_kept", "dec_none"]  # nothing read: no test, division, arbitration
    nothing = dataclasses.replace(none_kept, evidence=())
    assert [x.name for x in plain_trace(nothing)][1] == "ret_none"
    check(none_kept)
    check(nothing)


# --------------------------------------------------------------------------- many recorded numbers


def test_random_recorded_numbers_never_make_a_sentence_the_numbers_contradict() -> None:
    rng = random.Random(7)
    names: set[str] = set()
    for i in range(150):
        t = RUNS[sorted(RUNS)[i % len(RUNS)]]
        if t.hypotheses and len(t.hypotheses) > 1:
            t = _hyps(t, [(rng.uniform(0, 1), rng.uniform(-0.3, 0.3)) for _ in t.hypotheses])
        if rests_on(t) is not None:
            t = with_rest(t, rng.uniform(-0.2, 0.2))
        d = dataclasses.replace(t.decision, agreement=rng.choice([0.2, 0.59, 0.6, 0.61, 1.0]))
        t = dataclasses.replace(t, decision=d)
        check(t)
        names |= {line.name for line in plain_trace(t)}
    assert len(names) > 15


# --------------------------------------------------------------------------- the strings


def test_every_sentence_has_both_languages_and_the_english_is_the_cores() -> None:
    from gui_text_walk import english_words

    for name, template in TEMPLATES.items():
        en, zh = TABLE[f"cfplain.{name}"]
        assert en == template, name  # one English: the CLI's and the window's are the same sentence
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        assert fields == {f for _, f, _, _ in string.Formatter().parse(zh) if f}, name
        # no English of the sentence's own in the Chinese (the values are numbers, H2, #3, quoted texts)
        filled = zh.format(**{f: "H2" for f in fields})
        assert english_words(filled) == [], (name, filled)
    with i18n.using("zh"):
        assert plain_sentences(RUNS["ranked"], "en") == plain_text(RUNS["ranked"])  # the language asked for
        assert i18n.language() == "zh"


def test_every_template_is_reached_by_some_recorded_numbers() -> None:
    """No sentence is dead text: each is what some trace's numbers say (the branches above)."""
    t = RUNS["ranked"]
    noise = margin_summary(t).noise
    uncited = dataclasses.replace(t, decision=dataclasses.replace(t.decision, final_rationale="", final_answer="x"))
    variants = [*RUNS.values(), *(with_rest(b, x) for b in (t, uncited) for x in (2 * noise, 0.0, -2 * noise))]
    for scores in ([(0.9, 0.2), (0.5, 0.4), (0.4, 0.0)], [(0.6, 0.6), (0.8, 0.1), (0.4, 0.0)],
                   [(0.7, 0.45), (0.9, 0.0), (0.3, 0.9)], [(0.9, 0.30), (0.5, 0.31), (0.4, 0.30)],
                   [(0.5, 0.2), (0.5, 0.2), (0.1, 0.0)]):
        variants.append(_hyps(t, scores))
    kept = t.counterfactuals
    undetermined = tuple(dataclasses.replace(c, answers="undetermined") for c in kept)
    variants += [dataclasses.replace(t, counterfactuals=undetermined),
                 dataclasses.replace(t, counterfactuals=(kept[0], *undetermined[1:])),
                 dataclasses.replace(t, counterfactuals=(), queries=t.queries[:1]),
                 dataclasses.replace(t, counterfactuals=(), rejected_counterfactuals=(), queries=t.queries[:1]),
                 dataclasses.replace(t, evidence=tuple(dataclasses.replace(e, status="kept") for e in t.evidence)),
                 dataclasses.replace(t, queries=t.queries[:1],
                                     evidence=tuple(dataclasses.replace(e, status="kept") for e in t.evidence))]
    none_kept = dataclasses.replace(t, evidence=tuple(dataclasses.replace(e, status="below_cut")
                                                      for e in t.evidence), subsets=(), hypotheses=(),
                                    decision=dataclasses.replace(t.decision, kind="no_evidence", chosen=-1))
    variants += [none_kept, dataclasses.replace(none_kept, evidence=())]
    one = RUNS["no_division"]
    variants.append(dataclasses.replace(one, subsets=(dataclasses.replace(one.subsets[0],
                                                                          members=one.subsets[0].members[:2]),)))
    top = sorted(t.hypotheses, key=lambda h: (-h.psi, h.index))
    d = t.decision
    for warning in (say("synthesis_empty"), say("synthesis_ungrounded", answer="'x'"), ""):
        variants.append(dataclasses.replace(t, warnings=(warning,) if warning else (),
                                            decision=dataclasses.replace(d, kind="synthesis_fallback",
                                                                         chosen=top[0].index)))
    variants += [dataclasses.replace(t, decision=dataclasses.replace(d, final_answer="Michael Caine")),
                 dataclasses.replace(RUNS["reread"], decision=dataclasses.replace(RUNS["reread"].decision,
                                                                                  final_answer="Michael Caine")),
                 dataclasses.replace(t, decision=dataclasses.replace(d, agreement=0.9)),
                 dataclasses.replace(RUNS["reread"], decision=dataclasses.replace(RUNS["reread"].decision,
                                                                                  agreement=0.9)),
                 dataclasses.replace(RUNS["select"], decision=dataclasses.replace(RUNS["select"].decision,
                                                                                  agreement=0.1)),
                 dataclasses.replace(RUNS["select"], decision=dataclasses.replace(RUNS["select"].decision,
                                                                                  chosen=top[-1].index)),
                 dataclasses.replace(t, decision=dataclasses.replace(d, truncated=True))]
    variants += standard_variants(t)
    reached = set()
    for v in variants:
        check(v)
        reached |= {line.name for line in plain_trace(v)}
    assert reached == set(TEMPLATES), sorted(set(TEMPLATES) - reached)


def standard_variants(t: CFTrace) -> list[CFTrace]:
    """``t`` as started from a standard answer, one variant per outcome of its check."""
    d = t.decision
    confident = StandardCheck("Christian Bale [1].", 1.0, False, 0.5, "confident")
    kept = dataclasses.replace(d, kind="standard", chosen=-1, read_ids=(), final_answer=confident.answer)
    out = [dataclasses.replace(t, decision=dataclasses.replace(kept, standard=confident))]
    for not_found, presence, outcome in ((True, 0.8, "replaced"), (False, 0.2, "agrees"),
                                         (False, 0.0, "unsupported")):
        c = StandardCheck("The sources do not say." if not_found else "Heath Ledger", presence, not_found, 0.5,
                          outcome, candidate=d.final_answer, candidate_presence=0.9 if outcome == "replaced" else 0.1)
        out.append(dataclasses.replace(t, decision=dataclasses.replace(d if outcome == "replaced" else kept,
                                                                       standard=c)))
    return out


def test_a_standard_answer_that_stands_is_said_in_one_sentence_from_its_numbers() -> None:
    t = standard_variants(RUNS["select"])[0]
    [line] = plain_trace(t)
    assert line.name == "std_confident" and "100 %" in line.text and "50 %" in line.text
    check(t)


def test_a_replaced_standard_answer_says_why_first_and_the_outcome_last() -> None:
    lines = plain_trace(standard_variants(RUNS["select"])[1])
    assert lines[0].name == "std_not_found" and lines[-1].name == "std_replaced"
    assert [ln.stage for ln in lines] == sorted((ln.stage for ln in lines), key=STAGES.index)


def test_answer_cfrag_json_carries_the_plain_sentences(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``rag-desktop answer Q --method cfrag --json`` over the in-memory service (its canned trace)."""
    from test_gui_support import FakeService, make_cf_result

    from rag_desktop.cli import library, main
    from rag_desktop.core.settings import Settings

    monkeypatch.setattr(library, "service", lambda args: FakeService(tmp_path / "lib", Settings()))
    question = "Why do people fail the Wason selection task?"
    assert main(["answer", question, "--method", "cfrag", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace_plain"] == plain_text(make_cf_result(question).trace)
    assert len(out["trace_plain"]) >= 5 and "decision" in out["trace"]
    assert main(["answer", question, "--method", "cfrag"]) == 0
    printed = capsys.readouterr().out
    assert "How CF-RAG reached it:" in printed and f"  • {out['trace_plain'][0]}" in printed
