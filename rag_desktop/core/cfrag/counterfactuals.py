"""Step 1 of CF-RAG (paper 002 §1): counterfactual exploration.

The generator writes candidate questions q' by controlled transformations τ_i; each is
validated by V(q, q') = [sim_sem(q, q') > θ_sim] ∧ [L(q) ≠ L(q')] and ranked by
Info(q, q') = α·Div_sem + β·Div_ans + γ·Rel_dom; the top N are kept.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rag_desktop.core.cfrag.calls import UsageSink, generate_group
from rag_desktop.core.cfrag.common import _example_lang, cosine_rows
from rag_desktop.core.cfrag.notes import say
from rag_desktop.core.cfrag.prompts import (
    EXAMPLE_COUNTERFACTUALS,
    EXAMPLE_QUERIES,
    TRANSFORMATIONS,
    TYPE_EXAMPLE_QUERIES,
    TYPE_EXAMPLES,
    closed_book_messages,
    counterfactual_messages,
    counterfactual_type_messages,
)
from rag_desktop.core.cfrag.seeds import derive_seed
from rag_desktop.core.cfrag.tuning import DEFAULT_TUNING, CFTuning
from rag_desktop.core.cfrag.types import AnswerJudgement, CounterfactualCandidate
from rag_desktop.core.generation import GenRequest
from rag_desktop.core.protocols import Embedder, Generator
from rag_desktop.core.qa_metrics import token_f1
from rag_desktop.core.replies import parse_counterfactual_line, parse_counterfactuals, parse_numbered_answers
from rag_desktop.core.settings import CFRagSettings
from rag_desktop.core.text import HAN_CLASS, normalize_answer
from rag_desktop.core.types import CancelToken


def _example_texts(norm_q: str) -> set[str]:
    """The normalised example counterfactuals of the prompts (batch and per-type), except
    those of an example whose own question is q (normalised ``norm_q``)."""
    out: set[str] = set()
    for lang, pairs in EXAMPLE_COUNTERFACTUALS.items():
        if normalize_answer(EXAMPLE_QUERIES[lang]) != norm_q:
            out.update(normalize_answer(q) for _, q in pairs)
    for lang, d in TYPE_EXAMPLES.items():
        if normalize_answer(TYPE_EXAMPLE_QUERIES[lang]) != norm_q:
            out.update(normalize_answer(q) for q in d.values())
    return out


def judge_answers(answer_q: str, answer_cf: str, same_f1: float) -> tuple[AnswerJudgement, float]:
    """The documented proxy for L(q) ≠ L(q') (paper 002 §1 leaves L unspecified).

    L(x) is approximated by the model's own closed-book answer to x. Answers are
    compared by SQuAD token F1 (CJK characters as tokens) after normalisation:

    * either answer empty → ``"undetermined"`` (nothing to compare);
    * F1 > ``same_f1`` → ``"same"`` (e.g. "Christian Bale" vs "Bale": F1 0.67);
    * otherwise → ``"differ"`` — strictly above 0.5, so two people sharing only a
      surname ("Frank Herbert" vs "Brian Herbert", F1 0.5) are different answers.

    Returns the judgement and the F1.
    """
    if not normalize_answer(answer_q) or not normalize_answer(answer_cf):
        return "undetermined", 0.0
    f1 = token_f1(answer_cf, answer_q)
    return ("same" if f1 > same_f1 else "differ"), f1


def closed_book_is_degenerate(answer_q: str, answers_cf: Sequence[str]) -> bool:
    """True when at least three questions got answers and all normalise to one string.

    A model that answers "Batman" to "who is the lead actor", "who is the villain" and
    "who directed" is not distinguishing the questions; its answers cannot judge L(q) ≠ L(q').
    """
    answers = [normalize_answer(a) for a in (answer_q, *answers_cf)]
    nonempty = [a for a in answers if a]
    return len(nonempty) >= 3 and len(set(nonempty)) == 1


# The English words that only shape a question (question words, auxiliaries, prepositions, articles) and
# the Chinese characters that do the same; changing only these does not change what is asked.
# Except "who"/"谁": turning "in which city …" into "who …" asks for a person instead of a
# place — a category transformation — so they count as content.
_FORM_WORDS = frozenset((
    "which", "what", "where", "when", "why", "how", "in", "on", "at", "of", "the",
    "a", "an", "is", "was", "are", "were", "did", "does", "do", "to", "for", "by", "and", "or", "with",
    "from", "s", "its", "their", "his", "her",
))
# Single characters, compared one by one with the Han characters of a counterfactual, so not the
# question words of core.text (ZH_QUESTION_WORDS tell whether a text asks; these, whether a change
# is one of form): question characters without 谁 (see above) and the function characters around them.
FORM_CHARS = frozenset("哪里个座所什么几多少何吗呢在于是的由其了被为位有")
_CONTENT_TOKEN = re.compile(rf"[a-z0-9]+|[{HAN_CLASS}]")  # words, and each Han character (core.text)


def content_tokens(text: str) -> set[str]:
    toks = _CONTENT_TOKEN.findall(text.lower())
    return {t for t in toks if t not in _FORM_WORDS and t not in FORM_CHARS}


def adds_content(query: str, candidate: str) -> bool:
    """True when ``candidate`` holds a content token (a word, a number, a CJK character
    other than question-shaping ones) that ``query`` does not.

    A counterfactual changes one thing — a role, a year, an entity, the kind of answer,
    the scope — and that change brings a word the question did not have ("villain",
    "2020", "亚军"). A candidate made only of q's own words, rearranged or shortened, is a
    restatement. (Word-level for Latin script, character-level for CJK, so a synonym such
    as 学校/大学 still counts as new: the rule catches rewordings, not every synonym.)
    """
    return bool(content_tokens(candidate) - content_tokens(query))


def evaluate_counterfactuals(
    query: str,
    candidates: Sequence[tuple[str, str]],
    *,
    sims: Sequence[float],
    rel_dom: Sequence[float],
    answer_q: str,
    answers_cf: Sequence[str],
    settings: CFRagSettings,
    example_sims: Sequence[float] | None = None,
) -> tuple[list[CounterfactualCandidate], list[CounterfactualCandidate]]:
    """V(q, q') and Info(q, q') for each candidate; returns (kept in Info order, rejected).

    Definitions (paper 002 §1 names the terms; the exact forms are ours):

    * sim_sem(q, q') = cos(E(q), E(q')) with the embedder's query embedding.
    * V(q, q') = [sim_sem > θ_sim] ∧ [judge_answers(...) ≠ "same"]. An "undetermined"
      answer comparison does not reject (a tiny model that skips a line should not
      silently disable counterfactuals) but scores Div_ans = 0.5, below any confirmed
      difference, so confirmed ones win the ranking.
    * Div_sem = 1 − sim_sem (in [0, 1 − θ_sim) for valid candidates).
    * Div_ans = 1 − F1(L̂(q), L̂(q')) from the closed-book answers (0.5 when undetermined).
    * Rel_dom = cos(E(q'), c) where c is the normalised centroid of the passage embeddings
      of R(q), the original query's retrieved evidence: "still in the same domain"
      measured against what the library holds for q (the caller passes cos(q', q) when
      R(q) is empty).
    * Info = α·Div_sem + β·Div_ans + γ·Rel_dom; the top N valid candidates are kept
      (ties: earlier in the model's output first).

    Also rejected: a candidate identical to q after normalisation, a restatement that adds
    no content word to q (:func:`adds_content` — a second, lexical proxy for L(q) = L(q'):
    the closed-book answers of a 0.5B model to questions about unknown entities are
    guesses, and a reworded "哪里"/"哪个城市" or a dropped clause does not change the answer), an exact (normalised)
    repeat of an earlier candidate, a verbatim copy of one of the prompts' examples (unless
    q is an example's own question), and — when ``example_sims`` is given (the cosine of
    each q' to the nearest prompt-example question; the caller omits it when q itself is
    on the examples' topic) — a candidate closer to an example than to q: a paraphrase
    of the example, not a transformation of q.

    When :func:`closed_book_is_degenerate` (the model gave one and the same answer to every
    question), the answers carry no information about L, so every comparison counts as
    "undetermined" instead of rejecting every candidate as "same".
    """
    if not (len(candidates) == len(sims) == len(rel_dom) == len(answers_cf)):
        raise ValueError(
            "evaluate_counterfactuals: candidates, sims, rel_dom and answers_cf differ in length"
        )
    s = settings
    norm_q = normalize_answer(query)
    examples = _example_texts(norm_q)
    if example_sims is not None and len(example_sims) != len(candidates):
        raise ValueError("evaluate_counterfactuals: example_sims and candidates differ in length")
    seen: dict[str, int] = {}
    degenerate = closed_book_is_degenerate(answer_q, answers_cf)
    scored: list[tuple[CounterfactualCandidate, list[str]]] = []
    for i, (tag, text) in enumerate(candidates):
        reasons: list[str] = []
        norm = normalize_answer(text)
        if norm == norm_q:
            reasons.append(say("identical"))
        elif norm in seen:
            reasons.append(say("duplicate", n=seen[norm]))
        else:
            seen[norm] = i
        sim = float(sims[i])
        if seen.get(norm) == i and norm != norm_q and not adds_content(query, text):
            reasons.append(say("restates"))
        if norm in examples:
            reasons.append(say("copied_example"))
        elif example_sims is not None and float(example_sims[i]) > sim:
            reasons.append(say("near_example", ex=f"{float(example_sims[i]):.3f}", sim=f"{sim:.3f}"))
        if not sim > s.theta_sim:
            reasons.append(say("off_topic", sim=f"{sim:.3f}", theta=f"{s.theta_sim:.2f}"))
        judgement, f1 = judge_answers(answer_q, answers_cf[i], s.answer_same_f1)
        if degenerate:
            judgement = "undetermined"
        if judgement == "same":
            reasons.append(say("answers_agree", f1=f"{f1:.2f}", limit=f"{s.answer_same_f1:.2f}"))
        div_sem = 1.0 - sim
        div_ans = 0.5 if judgement == "undetermined" else 1.0 - f1
        rd = float(rel_dom[i])
        cand = CounterfactualCandidate(
            order=i, text=text, transformation=tag, sim_sem=sim, answer_q=answer_q,
            answer_cf=answers_cf[i], answer_f1=f1, answers=judgement, div_sem=div_sem,
            div_ans=div_ans, rel_dom=rd, info=s.alpha * div_sem + s.beta * div_ans + s.gamma * rd,
            valid=not reasons, kept=False, reason="",
        )
        scored.append((cand, reasons))
    return _keep_top(scored, s.n_counterfactuals)


def _keep_top(
    scored: Sequence[tuple[CounterfactualCandidate, list[str]]], n: int
) -> tuple[list[CounterfactualCandidate], list[CounterfactualCandidate]]:
    """The top ``n`` valid candidates by Info (ties: earlier first), in that order, and the rest
    with their reasons (a valid one below the top says so)."""
    ranked = sorted((c for c, _ in scored if c.valid), key=lambda c: (-c.info, c.order))
    kept_orders = [c.order for c in ranked[:n]]
    kept: list[CounterfactualCandidate] = []
    rejected: list[CounterfactualCandidate] = []
    for cand, reasons in scored:
        if cand.order in kept_orders:
            kept.append(dataclasses.replace(cand, kept=True))
            continue
        if cand.valid:
            reasons.append(say("below_top", info=f"{cand.info:.3f}", n=n))
        rejected.append(dataclasses.replace(cand, reason="; ".join(reasons)))
    kept.sort(key=lambda c: kept_orders.index(c.order))
    return kept, rejected


def explore_counterfactuals(
    query: str,
    *,
    q_vec: npt.ArrayLike,
    context_centroid: npt.ArrayLike | None,
    embedder: Embedder,
    generator: Generator,
    settings: CFRagSettings,
    seed: int,
    tuning: CFTuning = DEFAULT_TUNING,
    cancel: CancelToken | None = None,
    usage: UsageSink | None = None,
) -> tuple[list[CounterfactualCandidate], list[CounterfactualCandidate], str, list[str]]:
    """Step 1 end to end: generate, answer closed-book, validate and rank the q'.

    Returns (kept, rejected, the raw generator text, warnings). ``context_centroid`` is
    the mean passage embedding of R(q) for Rel_dom (None: Rel_dom = cos(q', q)).

    Generation follows ``tuning.counterfactual_prompt``: "per_type" makes
    ``settings.n_candidates`` short calls cycling through the transformations (role,
    time, entity, category, scope, role, …), decoded together (:func:`generate_group`:
    their shared system prompt and worked-example turns are read once by a batching
    backend), each sampled with its own seed (``derive_seed(seed, "counterfactual", i)``)
    at ``counterfactual_temperature``; "batch" makes one call for all candidates. Either
    way the candidates then go through one closed-book call (the L(·) proxy, seed
    ``derive_seed(seed, "closed_book")``) and :func:`evaluate_counterfactuals`.
    """
    s = settings
    warnings: list[str] = []
    cands: list[tuple[str, str]] = []
    if tuning.counterfactual_prompt == "batch":
        [gen] = generate_group(generator, "counterfactuals", [GenRequest(
            counterfactual_messages(query, s.n_candidates), tuning.max_tokens_counterfactuals,
            tuning.counterfactual_temperature, derive_seed(seed, "counterfactual"))], cancel=cancel, usage=usage)
        raw = gen.text
        cands = parse_counterfactuals(gen.text)[: s.n_candidates]
    else:
        parts: list[str] = []
        taus = [TRANSFORMATIONS[i % len(TRANSFORMATIONS)] for i in range(s.n_candidates)]
        lines = generate_group(generator, "counterfactuals", [GenRequest(
            counterfactual_type_messages(query, tau), tuning.max_tokens_counterfactual_line,
            tuning.counterfactual_temperature, derive_seed(seed, "counterfactual", i))
            for i, tau in enumerate(taus)], cancel=cancel, usage=usage)
        for tau, g in zip(taus, lines, strict=True):
            parts.append(f"[{tau}] {g.text.strip()}")
            line = parse_counterfactual_line(g.text, query, [c[1] for c in cands])
            if line:
                cands.append((tau, line))
        raw = "\n".join(parts)
    if not cands:
        warnings.append(say("no_counterfactual"))
        return [], [], raw, warnings
    [cb] = generate_group(generator, "closed_book", [GenRequest(
        closed_book_messages([query] + [c[1] for c in cands]), tuning.max_tokens_closed_book,
        tuning.closed_book_temperature, derive_seed(seed, "closed_book"))], cancel=cancel, usage=usage)
    answers = parse_numbered_answers(cb.text, len(cands) + 1)
    qv = np.asarray(q_vec, dtype=np.float64)
    c_vecs = np.asarray(embedder.embed_queries([c[1] for c in cands]), dtype=np.float64)
    sims = cosine_rows(c_vecs, qv)[:, 0]
    rel = cosine_rows(c_vecs, context_centroid)[:, 0] if context_centroid is not None else sims
    # Paraphrases of the prompts' examples: cos(q', nearest example question) > cos(q', q).
    # Skipped when q itself is on the examples' topic (a World Cup question may rightly
    # produce the example's counterfactual).
    lang = _example_lang(query)
    ex_texts = [TYPE_EXAMPLE_QUERIES[lang], *TYPE_EXAMPLES[lang].values(), EXAMPLE_QUERIES[lang],
                *(q for _, q in EXAMPLE_COUNTERFACTUALS[lang])]
    ex_vecs = np.asarray(embedder.embed_queries(ex_texts), dtype=np.float64)
    base_sims = cosine_rows(ex_vecs[[0, len(TYPE_EXAMPLES[lang]) + 1]], qv)[:, 0]
    example_sims = None if float(base_sims.max()) > s.theta_sim else cosine_rows(c_vecs, ex_vecs).max(axis=1)
    if closed_book_is_degenerate(answers[0], answers[1:]):
        warnings.append(say("closed_book_same"))
    kept, rejected = evaluate_counterfactuals(
        query, cands, sims=sims.tolist(), rel_dom=rel.tolist(), answer_q=answers[0],
        answers_cf=answers[1:], settings=s,
        example_sims=None if example_sims is None else example_sims.tolist())
    if not kept:
        warnings.append(say("none_valid"))
    return kept, rejected, raw, warnings
