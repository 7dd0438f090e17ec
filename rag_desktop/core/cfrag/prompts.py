"""Every prompt CF-RAG sends, rendered from ``rag_desktop/prompts/cfrag_*.txt``.

The text lives in the template files (like the answer prompts); this module
only fills them in and fits the evidence into the context. ``tests/test_cfrag_prompts.py``
holds the rendered messages byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag_desktop.core.cfrag.common import _example_lang
from rag_desktop.core.cfrag.notes import say
from rag_desktop.core.cfrag.tuning import CFTuning
from rag_desktop.core.cfrag.types import HypothesisTrace
from rag_desktop.core.prompting import load_sections, render_section
from rag_desktop.core.protocols import Generator
from rag_desktop.core.replies import CITE_MARKER
from rag_desktop.core.settings import SynthesisPrompt
from rag_desktop.core.types import ChatMessage, Hit

TRANSFORMATIONS = ("role", "time", "entity", "category", "scope")
LANGS = ("en", "zh")

_SYSTEM = load_sections("cfrag_system", ("counterfactual", "closed_book", "hypothesis", "synthesis",
                                         "answer_format"))
# The system prompts double as stable markers of the prompt kind (a scripted test
# generator dispatches on them).
SYSTEM_COUNTERFACTUAL = _SYSTEM["counterfactual"]
SYSTEM_CLOSED_BOOK = _SYSTEM["closed_book"]
SYSTEM_HYPOTHESIS = _SYSTEM["hypothesis"]
SYSTEM_SYNTHESIS = _SYSTEM["synthesis"]
_HYP_INSTRUCTIONS = _SYSTEM["answer_format"]

_CF_KEYS = ("batch_question", "batch_counterfactuals", "type_question", "ask",
            *(f"type_{t}" for t in TRANSFORMATIONS), *(f"how_{t}" for t in TRANSFORMATIONS))
_CF = {lang: load_sections(f"cfrag_counterfactual_{lang}", _CF_KEYS) for lang in LANGS}
_EXAMPLE_LINE = re.compile(r"^\[(\w+)\] (.+)$")


def _example_pairs(block: str) -> tuple[tuple[str, str], ...]:
    pairs = [_EXAMPLE_LINE.match(ln) for ln in block.splitlines() if ln.strip()]
    if not all(pairs):
        raise ValueError(f"cfrag_counterfactual_*.txt [batch_counterfactuals]: each line is '[τ] question': {block!r}")
    return tuple((m.group(1), m.group(2)) for m in pairs if m)


# The paper's own example (paper 002 §1), in both languages, for the batch prompt. A small
# model tends to copy it verbatim; such copies are rejected unless the question really is
# the example's.
EXAMPLE_QUERIES = {lang: _CF[lang]["batch_question"] for lang in LANGS}
EXAMPLE_COUNTERFACTUALS = {lang: _example_pairs(_CF[lang]["batch_counterfactuals"]) for lang in LANGS}

# The per-transformation prompts (the default, ``CFTuning.counterfactual_prompt = "per_type"``):
# one short call per τ_i asking for ONE rewritten question in plain text, with a worked
# example on a deliberately unrelated topic (football). A 0.5B model given the single
# batch prompt mostly copied its example or restated the question; a short prompt with
# one change to make and one line to write is within its reach. Copies of these examples
# are rejected (verbatim, or closer in embedding to an example than to q).
TYPE_EXAMPLE_QUERIES = {lang: _CF[lang]["type_question"] for lang in LANGS}
TYPE_EXAMPLES: dict[str, dict[str, str]] = {lang: {t: _CF[lang][f"type_{t}"] for t in TRANSFORMATIONS}
                                            for lang in LANGS}
TYPE_INSTRUCTIONS: dict[str, dict[str, str]] = {lang: {t: _CF[lang][f"how_{t}"] for t in TRANSFORMATIONS}
                                                for lang in LANGS}

# =========================================================================== step 1


def counterfactual_messages(query: str, n: int) -> tuple[ChatMessage, ...]:
    """The zero-shot prompt for τ_i: "same topic, different answer" (paper 002 §1).

    Instructions and the paper's example come first and the original question last, right
    before the model writes, so that a small model works on the question, not the example.
    """
    lang = _example_lang(query)
    lines = "\n".join(render_section("cfrag_counterfactual_batch", "line", transformation=tag, question=q)
                      for tag, q in EXAMPLE_COUNTERFACTUALS[lang])
    example = render_section("cfrag_counterfactual_batch", "example", question=EXAMPLE_QUERIES[lang],
                             lines=lines)
    user = render_section("cfrag_counterfactual_batch", "user", n=n, example=example, question=query)
    return (ChatMessage("system", SYSTEM_COUNTERFACTUAL), ChatMessage("user", user))


def counterfactual_type_messages(query: str, transformation: str) -> tuple[ChatMessage, ...]:
    """The short prompt for ONE transformation τ (paper 002 §1): one rewritten question.

    The worked example (in the question's language, on an unrelated topic so that copying
    it is detectable) is given as a previous chat exchange — the example question in a
    user turn, its rewrite as the assistant's reply — and the real question as the last
    user turn, ending in "Rewritten:" / "改写：". Written inline in one message, a 0.5B
    model mostly rewrote the example instead of the question (docs/evaluation.md §2).
    """
    lang = _example_lang(query)
    how = TYPE_INSTRUCTIONS[lang][transformation]
    ex_q, ex_cf = TYPE_EXAMPLE_QUERIES[lang], TYPE_EXAMPLES[lang][transformation]

    def ask(q: str) -> str:
        return render_section(f"cfrag_counterfactual_{lang}", "ask", how=how, question=q)

    return (
        ChatMessage("system", SYSTEM_COUNTERFACTUAL),
        ChatMessage("user", ask(ex_q)),
        ChatMessage("assistant", ex_cf),
        ChatMessage("user", ask(query)),
    )


def closed_book_messages(questions: Sequence[str]) -> tuple[ChatMessage, ...]:
    """One call answers q and every candidate q' briefly, without evidence (the L(·) proxy)."""
    listing = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, start=1))
    user = render_section("cfrag_closed_book", "user", questions=listing)
    return (ChatMessage("system", SYSTEM_CLOSED_BOOK), ChatMessage("user", user))


# =========================================================================== hypotheses
def _truncate_to(generator: Generator, text: str, budget: int, count: int) -> str:
    if budget <= 0:
        return ""
    chars = max(0, int(len(text) * budget / max(count, 1)))
    cut = text[:chars]
    while chars > 0 and generator.count_tokens(cut + " …") > budget:
        chars = int(chars * 0.9)
        cut = text[:chars]
    return (cut.rstrip() + " …") if chars > 0 else ""


def fit_passages(generator: Generator, texts: Sequence[str], budget: int) -> list[str]:
    """Shorten passages so that together they use at most ``budget`` tokens.

    Water-filling: the shortest passages are kept whole while they fit an equal share,
    the budget they leave is shared among the longer ones, which are cut (at a
    character position estimated from the token ratio, then shrunk until it fits).
    """
    counts = [generator.count_tokens(t) for t in texts]
    if sum(counts) <= budget:
        return list(texts)
    allot = [0] * len(texts)
    remaining, left = max(0, budget), len(texts)
    for i in sorted(range(len(texts)), key=lambda i: counts[i]):
        allot[i] = min(counts[i], remaining // left)
        remaining -= allot[i]
        left -= 1
    return [t if counts[i] <= allot[i] else _truncate_to(generator, t, allot[i], counts[i])
            for i, t in enumerate(texts)]




def _passage_block(hits: Sequence[Hit], texts: Sequence[str]) -> str:
    blocks = []
    for n, (h, t) in enumerate(zip(hits, texts, strict=True), start=1):
        where = (render_section("cfrag_hypothesis", "where", title=h.title, page=h.page) if h.title
                 else render_section("cfrag_hypothesis", "where_untitled", page=h.page))
        blocks.append(render_section("cfrag_hypothesis", "passage", n=n, where=where, text=t))
    return "\n\n".join(blocks)


def _hypothesis_system() -> str:
    return f"{SYSTEM_HYPOTHESIS} {_HYP_INSTRUCTIONS}"


def hypothesis_overhead(query: str, n_hits: int, generator: Generator) -> int:
    """Prompt tokens of a hypothesis prompt other than the passages (system, question, headers)."""
    skeleton = render_section("cfrag_hypothesis", "user", passages="", question=query)
    return generator.count_tokens(_hypothesis_system() + skeleton) + 8 * n_hits  # 8: a "[n] (title, p. x)" header


def hypothesis_messages(
    query: str, hits: Sequence[Hit], generator: Generator, max_tokens: int, margin: int,
    budget: int | None = None,
) -> tuple[tuple[ChatMessage, ...], list[str]]:
    """The prompt of H(q, E_j) and the (possibly shortened) passage texts it used.

    As the paper asks (§3): a direct answer, a rationale naming the key supporting evidence,
    and an assessment of conflicting information. ``budget`` caps the evidence tokens
    (default: whatever one call leaves in n_ctx).
    """
    full = generator.n_ctx - max_tokens - margin - hypothesis_overhead(query, len(hits), generator)
    texts = fit_passages(generator, [h.text for h in hits], full if budget is None else min(full, budget))
    user = render_section("cfrag_hypothesis", "user", passages=_passage_block(hits, texts), question=query)
    return (ChatMessage("system", _hypothesis_system()), ChatMessage("user", user)), texts


def synthesis_messages(
    query: str,
    ranked: Sequence[HypothesisTrace],
    hits: Sequence[Hit],
    counterfactuals: Sequence[str],
    generator: Generator,
    max_tokens: int,
    margin: int,
    style: SynthesisPrompt = "ranked",
) -> tuple[tuple[ChatMessage, ...], list[str]]:
    """Prompt to synthesise the final answer from the top hypotheses (paper 002 §4).

    ``style`` (``cfrag.synthesis_prompt``): "ranked" lists the candidates best Ψ first with
    their Ψ; "evidence" lists them as given (the caller passes them in the order they were
    written), without Ψ, and asks for the answer the evidence states for this question.
    """
    sections = load_sections("cfrag_hypothesis", ("empty_answer", "no_rationale", "no_counterfactuals"))
    suffix = "" if style == "ranked" else "_evidence"
    cands = []
    for letter, h in zip("ABCDEFGHIJ", ranked, strict=False):
        rationale = CITE_MARKER.sub("", h.rationale).strip() or sections["no_rationale"]
        cands.append(render_section("cfrag_hypothesis", "candidate" + suffix, letter=letter,
                                    answer=h.answer or sections["empty_answer"], psi=f"{h.psi:.3f}",
                                    rationale=rationale))
    cf_block = ("\n".join(render_section("cfrag_hypothesis", "counterfactual", question=c) for c in counterfactuals)
                or sections["no_counterfactuals"])
    tail = render_section("cfrag_hypothesis", "synthesis_tail" + suffix, candidates="\n".join(cands),
                          counterfactuals=cf_block, question=query, answer_format=_HYP_INSTRUCTIONS)
    system = SYSTEM_SYNTHESIS
    budget = (generator.n_ctx - max_tokens - margin - generator.count_tokens(system + tail)
              - 8 * len(hits))
    texts = fit_passages(generator, [h.text for h in hits], budget)
    user = render_section("cfrag_hypothesis", "synthesis_user", passages=_passage_block(hits, texts), tail=tail)
    return (ChatMessage("system", system), ChatMessage("user", user)), texts


def _evidence_budget(query: str, sizes: Sequence[int], generator: Generator,
                     tuning: CFTuning) -> tuple[int, str]:
    """Evidence tokens per hypothesis prompt, and a note when the context made it smaller.

    One call may fill n_ctx. A backend whose ``generate_many`` decodes its sequences in
    one shared context (``batch_shares_context``: the llama.cpp backend) holds the M
    prompts and answers together only if each gets about 1/M of it:
    (n_ctx − M·(answer + margin + overhead)) / M. The smaller of the two is used, but never
    less than ``tuning.min_evidence_tokens`` — below that the backend decodes the
    hypotheses in several waves instead (slower, same evidence).
    """
    m = len(sizes)
    over = max(hypothesis_overhead(query, n, generator) for n in sizes)
    full = generator.n_ctx - tuning.max_tokens_hypothesis - tuning.context_margin_tokens - over
    if m < 2 or not bool(getattr(generator, "batch_shares_context", False)):
        return full, ""
    shared = (generator.n_ctx - m * (tuning.max_tokens_hypothesis + tuning.context_margin_tokens + over)) // m
    if shared >= full:
        return full, ""
    budget = max(shared, min(full, tuning.min_evidence_tokens))
    name = "evidence_shrunk_batches" if budget > shared else "evidence_shrunk"
    return budget, say(name, n_ctx=generator.n_ctx, m=m, full=full, budget=budget)
