"""CF-RAG (paper 002, ``papers/002_db86d620498a8d34.txt``) as pure steps plus one orchestrator.

The method, step by step (section numbers are the paper's "关键设计" items):

1. Counterfactual exploration (§1): the generator writes ``n_candidates`` questions q'
   by controlled transformations τ_i (role, time, entity, category, scope). Each is
   validated by V(q, q') = [sim_sem(q, q') > θ_sim] ∧ [L(q) ≠ L(q')] and ranked by
   Info(q, q') = α·Div_sem + β·Div_ans + γ·Rel_dom; the top N are kept.
2. Dialectical retrieval (§2): R(q) ∪ ⋃_{q'} R(q'); near-duplicates (embedding cosine
   > θ_dedup) collapse onto one representative; then a quality filter Q(e) and a
   relevance cut on max_{q* ∈ {q} ∪ Q_cf} s(q*, e).
3. s(q, e) comes from a :class:`~rag_desktop.core.protocols.CrossEncoder`; the whole
   matrix s(q_i, e) is computed once.
4. Evidence division (§3): spectral clustering (Gaussian affinity, normalised Laplacian,
   leading eigenvectors, k-means on the row-normalised eigenvector rows) into K clusters.
5. Parallel hypotheses (§3): M subsets by stratified, temperature-weighted sampling across
   clusters; one (answer, rationale) per subset.
6. Arbitration (§4): Ψ_j = (1 − λ)·φ_coh + λ·φ_causal with
   φ_causal(E_j) = (1/|E_j|) Σ_e [ s(q, e) − max_{q' ∈ Q_cf} s(q', e) ].
7. Decision: if the hypotheses agree, the highest Ψ; otherwise a synthesis of the top 3.

We follow the paper's formulas, not the shortcuts of the authors' public code (KMeans on
raw embeddings, mean over q' instead of max, no counterfactual validation, exact-text
dedup, always regenerating from the best draft).

Where the paper is silent the choice is documented at the function that makes it; the
tunables that ``CFRagSettings`` does not carry are in :class:`CFTuning`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from rag_desktop.core.cfrag_types import (
    AnswerJudgement,
    CFResult,
    CFTrace,
    ClusterTrace,
    CounterfactualCandidate,
    DecisionKind,
    DecisionTrace,
    EvidenceRow,
    EvidenceStatus,
    EvidenceTrace,
    GenerationUsage,
    HypothesisTrace,
    MarginSummary,
    ParseMethod,
    SpectralTrace,
    StepTiming,
    SubsetTrace,
)
from rag_desktop.core.citations import CITATION_RE, parse_citations
from rag_desktop.core.errors import UserInputError
from rag_desktop.core.generation import GenRequest, GenResult, generate_many
from rag_desktop.core.protocols import CrossEncoder, Embedder, Generator
from rag_desktop.core.qa_metrics import answer_tokens, is_cjk, normalize_answer, token_f1
from rag_desktop.core.settings import CFRagSettings, SettingsError
from rag_desktop.core.types import (
    Answer,
    CancelToken,
    ChatMessage,
    Citation,
    GenEventKind,
    Hit,
    Progress,
)

FloatMatrix = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Retriever = Callable[[str, int], Sequence[Hit]]
EventSink = Callable[[Progress], None]

METHOD_NAME = "cfrag"
TRANSFORMATIONS = ("role", "time", "entity", "category", "scope")

# The system prompts double as stable markers of the prompt kind (a scripted test
# generator dispatches on them).
SYSTEM_COUNTERFACTUAL = (
    "You write counterfactual questions: questions on the same topic as a given question "
    "that must have a different answer."
)
SYSTEM_CLOSED_BOOK = "You answer questions from memory with a short phrase each."
SYSTEM_HYPOTHESIS = "You answer a question using only the numbered evidence passages."
SYSTEM_SYNTHESIS = "You arbitrate between candidate answers to a question and write the final answer."


@dataclass(frozen=True)
class CFTuning:
    """Implementation constants the paper does not give and ``CFRagSettings`` does not carry.

    * ``coh_w_*`` — weights of φ_coh's three terms (sum to 1; see :func:`phi_coh`).
    * ``answer_same_f1`` — closed-book answers with token F1 above this are "the same
      answer", i.e. L(q) = L(q') (see :func:`judge_answers`).
    * ``score_scale`` — how raw s(q, e) is mapped to [0, 1] (see :func:`resolve_score_scale`).
    * ``quality_ref_chars`` — content characters at which Q(e)'s length factor reaches 1.
    * ``counterfactual_prompt`` — "per_type" (default): one short call per transformation
      τ_i, each writing one line (:func:`counterfactual_type_messages`), each with its own
      seed (:func:`derive_seed`) and sampled at ``counterfactual_temperature`` for diversity;
      "batch": one call writing all ``n_candidates`` lines (:func:`counterfactual_messages`).
    * temperatures / token limits of the generator calls; k-means restarts.
    * ``synthesis_top`` — the paper's "top-3" for synthesis.
    * ``sigma_rule`` — "settings" uses ``CFRagSettings.sigma`` as given (the default);
      "median" uses the median pairwise distance of the evidence (:func:`median_sigma`),
      for embedders whose distances do not match a fixed σ (e5's cosines sit in
      [0.75, 1], so with σ = 0.5 every affinity is > 0.37 and the graph has no structure).
    """

    coh_w_embed: float = 0.4
    coh_w_query: float = 0.3
    coh_w_presence: float = 0.3
    answer_same_f1: float = 0.5
    score_scale: Literal["auto", "sigmoid", "identity"] = "auto"
    quality_ref_chars: int = 100
    counterfactual_prompt: Literal["per_type", "batch"] = "per_type"
    counterfactual_temperature: float = 0.7
    closed_book_temperature: float = 0.0
    hypothesis_temperature: float = 0.2
    synthesis_temperature: float = 0.2
    max_tokens_counterfactuals: int = 320
    max_tokens_counterfactual_line: int = 48
    max_tokens_closed_book: int = 192
    # A hypothesis is a JSON object with an answer and one to three sentences of rationale;
    # at 256 tokens the 0.5B model's longer replies were cut inside the answer string
    # (issue 14: "…cross-encoders are too"), so the budgets leave room for that.
    max_tokens_hypothesis: int = 384
    max_tokens_synthesis: int = 448
    min_evidence_tokens: int = 256  # evidence per hypothesis is never shrunk below this (see _evidence_budget)
    kmeans_n_init: int = 8
    kmeans_max_iter: int = 100
    synthesis_top: int = 3
    context_margin_tokens: int = 64
    sigma_rule: Literal["settings", "median"] = "settings"

    def __post_init__(self) -> None:
        total = self.coh_w_embed + self.coh_w_query + self.coh_w_presence
        if abs(total - 1.0) > 1e-9 or min(self.coh_w_embed, self.coh_w_query, self.coh_w_presence) < 0:
            raise SettingsError(
                "invalid setting cfrag tuning coh_w_*: the three φ_coh weights must be >= 0 and sum to 1 "
                f"(got {self.coh_w_embed}, {self.coh_w_query}, {self.coh_w_presence})"
            )
        if not 0.0 <= self.answer_same_f1 < 1.0:
            raise SettingsError("invalid setting cfrag tuning answer_same_f1: must be in [0, 1)")
        if self.synthesis_top < 1:
            raise SettingsError("invalid setting cfrag tuning synthesis_top: must be >= 1")


DEFAULT_TUNING = CFTuning()


# =========================================================================== seeds

# Every random choice of a run derives from ``seed`` through numpy's SeedSequence spawn
# tree: child r of SeedSequence(seed) (r = the role's index below) and, for calls that
# come in a group, its grandchild i. Streams of different roles or indices are
# independent by construction — the ad-hoc offsets used before (seed + 10 + j for
# hypotheses, seed + 20 for the synthesis) collided from the 11th hypothesis on
# (issue 11). The order is fixed: children 0 and 1 were already the clustering and
# sampling streams, so those results do not change.
SEED_ROLES = ("clustering", "sampling", "counterfactual", "closed_book", "hypothesis", "synthesis")


def derive_seed(seed: int, role: str, index: int = 0) -> int:
    """The generator seed of call ``index`` of ``role``: the first 32-bit word of
    SeedSequence(seed).spawn(...)[role].spawn(...)[index] (= ``SeedSequence(seed,
    spawn_key=(role, index))``), masked to 31 bits — llama.cpp reads 0xFFFFFFFF as "pick a
    random seed", and servers may parse seeds as signed 32-bit integers."""
    ss = np.random.SeedSequence(seed, spawn_key=(SEED_ROLES.index(role), index))
    return int(ss.generate_state(1, np.uint32)[0]) & 0x7FFFFFFF


def stream_rng(seed: int, role: str) -> np.random.Generator:
    """The numpy generator of ``role`` ("clustering", "sampling"): child ``role`` of SeedSequence(seed)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(SEED_ROLES.index(role),)))


# =========================================================================== generation


@dataclass(frozen=True)
class Generated:
    text: str
    finish_reason: str
    mean_logprob: float | None


def generate_text(
    generator: Generator,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int,
    temperature: float,
    seed: int,
    cancel: CancelToken | None = None,
) -> Generated:
    """Run one chat completion and collect the streamed TOKEN events into text."""
    parts: list[str] = []
    logprobs: list[float] = []
    finish = ""
    for event in generator.stream(
        messages, max_tokens=max_tokens, temperature=temperature, seed=seed, cancel=cancel
    ):
        if event.kind == GenEventKind.TOKEN:
            parts.append(event.text)
            if event.logprob is not None:
                logprobs.append(event.logprob)
        elif event.kind == GenEventKind.DONE:
            finish = event.finish_reason
            break
    if cancel is not None:
        cancel.raise_if_set()
    mean_lp = float(np.mean(logprobs)) if logprobs else None
    return Generated("".join(parts), finish, mean_lp)


UsageSink = Callable[[GenerationUsage], None]


def generate_group(
    generator: Generator,
    step: str,
    requests: Sequence[GenRequest],
    *,
    cancel: CancelToken | None = None,
    usage: UsageSink | None = None,
) -> list[Generated]:
    """Independent calls decoded together (:func:`rag_desktop.core.generation.generate_many`).

    A batching backend decodes them in one batch and reads their shared prefix once;
    others run them one after another with the same results for the same seeds. The
    cost of the group goes to ``usage``; a cancel raises :class:`Cancelled` afterwards.
    """
    t0 = time.perf_counter()
    results: list[GenResult] = generate_many(generator, requests, cancel=cancel)
    if usage is not None:
        usage(GenerationUsage(
            step=step, calls=len(results), prompt_tokens=sum(r.prompt_tokens for r in results),
            cached_tokens=sum(r.cached_tokens for r in results),
            completion_tokens=sum(r.completion_tokens for r in results),
            seconds=time.perf_counter() - t0, truncated=sum(r.truncated for r in results)))
    if cancel is not None:
        cancel.raise_if_set()
    return [Generated(r.text, r.finish_reason, r.mean_logprob) for r in results]


def _has_cjk(text: str) -> bool:
    return any(is_cjk(ch) for ch in text)


# =========================================================================== step 1


# The paper's own example (paper 002 §1), in both languages. A small model tends to copy
# it verbatim; such copies are rejected unless the question really is the example's.
EXAMPLE_QUERIES = {"en": "Who is the lead actor in The Dark Knight?", "zh": "《黑暗骑士》的主演是谁？"}
EXAMPLE_COUNTERFACTUALS = {
    "en": (("role", "Who played the main villain in The Dark Knight?"),
           ("role", "Who directed The Dark Knight?"),
           ("entity", "Who is the lead actor in Batman Begins?")),
    "zh": (("role", "《黑暗骑士》中饰演主要反派的是谁？"),
           ("role", "《黑暗骑士》的导演是谁？"),
           ("entity", "《蝙蝠侠：侠影之谜》的主演是谁？")),
}


def _example_lang(query: str) -> str:
    return "zh" if _has_cjk(query) else "en"


def counterfactual_messages(query: str, n: int) -> tuple[ChatMessage, ...]:
    """The zero-shot prompt for τ_i: "same topic, different answer" (paper 002 §1).

    Instructions and the paper's example come first and the original question last, right
    before the model writes, so that a small model works on the question, not the example.
    """
    lang = _example_lang(query)
    example = f'Example for "{EXAMPLE_QUERIES[lang]}":\n' + "\n".join(
        f"[{tag}] {q}" for tag, q in EXAMPLE_COUNTERFACTUALS[lang]
    )
    user = (
        f"Write {n} counterfactual questions for the original question below. Each stays on the "
        "topic of the original question but must have a DIFFERENT answer, because it changes "
        "exactly one thing:\n"
        "- role: a different role or relation (villain instead of lead actor, director instead of actor)\n"
        "- time: a different time or period\n"
        "- entity: the same question about a different but related entity\n"
        "- category: a different kind of answer (a place instead of a person, a year instead of a name)\n"
        "- scope: a wider or narrower scope (the whole series instead of one film)\n\n"
        f"{example}\n\n"
        "Do not copy the example: write about the original question's own topic, in its language. "
        f'Output exactly {n} lines, each "[transformation] question", and nothing else.\n\n'
        f"Original question: {query}"
    )
    return (ChatMessage("system", SYSTEM_COUNTERFACTUAL), ChatMessage("user", user))


_TAG_WORDS = {
    "role": "role", "roles": "role", "角色": "role", "关系": "role",
    "time": "time", "temporal": "time", "时间": "time",
    "entity": "entity", "实体": "entity",
    "category": "category", "categorical": "category", "type": "category", "类别": "category",
    "scope": "scope", "范围": "scope",
}  # fmt: skip
_TAG_ALT = "|".join(sorted(map(re.escape, _TAG_WORDS), key=len, reverse=True))
_BRACKET_TAG = re.compile(rf"^[\[(【（]\s*({_TAG_ALT})\s*[\])】）]\s*[:：\-–—]?\s*", re.IGNORECASE)
_COLON_TAG = re.compile(rf"^({_TAG_ALT})\s*[:：\-–—]\s*", re.IGNORECASE)
_BULLET = re.compile(r"^(?:[-*•·]+|\(?\d{1,2}\s*[.)、:：]|[Qq]\d{1,2}\s*[.):：]?)\s*")
_QUOTES = "\"'“”‘’「」『』`"


def parse_counterfactuals(text: str) -> list[tuple[str, str]]:
    """``(transformation, question)`` per usable line of the model's output.

    Robust to numbering ("1.", "2)", "Q3:"), bullets, markdown bold, quotes and tags
    written as "[role]", "(role)", "role:" or Chinese names (角色/时间/实体/类别/范围).
    A line is taken as a question when it carried a marker (number, bullet or tag) or
    ends in "?"/"？"; headers ("Here are the questions:") and chatter are skipped. The
    transformation is "unknown" when no tag was given.
    """
    out: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip().replace("**", "").replace("__", "")
        if not line:
            continue
        marked = False
        tag = "unknown"
        for _ in range(3):  # bullets and tags may be stacked: "1. [role] ..."
            changed = False
            m = _BULLET.match(line)
            if m and m.end() > 0:
                line, marked, changed = line[m.end():].strip(), True, True
            m = _BRACKET_TAG.match(line) or _COLON_TAG.match(line)
            if m:
                tag = _TAG_WORDS[m.group(1).lower()]
                line, marked, changed = line[m.end():].strip(), True, True
            if not changed:
                break
        line = line.strip(_QUOTES + " ").strip()
        if len(line) < 4 or line.endswith((":", "：")):
            continue
        if not (marked or line.endswith(("?", "？"))):
            continue
        out.append((tag, line))
    return out


# The per-transformation prompts (the default, ``CFTuning.counterfactual_prompt = "per_type"``):
# one short call per τ_i asking for ONE rewritten question in plain text, with a worked
# example on a deliberately unrelated topic (football). A 0.5B model given the single
# batch prompt above mostly copied its example or restated the question; a short prompt
# with one change to make and one line to write is within its reach. Copies of these
# examples are rejected (verbatim, or closer in embedding to an example than to q).
TYPE_EXAMPLE_QUERIES = {"en": "Which team won the 1998 World Cup?", "zh": "哪支球队赢得了1998年世界杯？"}
TYPE_EXAMPLES: dict[str, dict[str, str]] = {
    "en": {
        "role": "Which team was the runner-up of the 1998 World Cup?",
        "time": "Which team won the 2002 World Cup?",
        "entity": "Which team won the 1998 Rugby World Cup?",
        "category": "In which city was the final of the 1998 World Cup played?",
        "scope": "Which team has won the most World Cups?",
    },
    "zh": {
        "role": "哪支球队是1998年世界杯的亚军？",
        "time": "哪支球队赢得了2002年世界杯？",
        "entity": "哪支球队赢得了1998年橄榄球世界杯？",
        "category": "1998年世界杯决赛在哪座城市举行？",
        "scope": "哪支球队赢得世界杯的次数最多？",
    },
}
TYPE_INSTRUCTIONS: dict[str, dict[str, str]] = {
    "en": {
        "role": "ask about a different role or relation (the runner-up instead of the winner, "
                "the villain instead of the lead, the founder instead of the architect)",
        "time": "ask about a different year, date or period",
        "entity": "ask the same thing about a different but related entity (another film, "
                  "person, place or organisation)",
        "category": "ask for a different kind of answer about the same subject (a place instead "
                    "of a person, a year instead of a name)",
        "scope": "make the question wider or narrower (the whole series instead of one film, "
                 "all years instead of one)",
    },
    "zh": {
        "role": "换一个角色或关系来问（问亚军而不是冠军、问反派而不是主角、问创始人而不是建筑师）",
        "time": "换一个年份、日期或时期来问",
        "entity": "对另一个相关的实体问同样的问题（另一部作品、另一个人、地方或机构）",
        "category": "对同一对象问另一类答案（问地点而不是人，问年份而不是名字）",
        "scope": "把问题的范围放大或缩小（问整个系列而不是一部，问所有年份而不是一年）",
    },
}


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
        if lang == "zh":
            return (f"改写这个问题：只改变一处，使它的答案不同——{how}。保持问题的主题和其余内容，用中文写。"
                    f"只写一行：改写后的问题，不要解释。\n\n问题：{q}\n改写：")
        return (f"Rewrite this question by changing ONE thing so that it has a different answer: {how}. "
                "Keep the question's topic and everything else. Write one line only: the rewritten "
                f"question, no explanation.\n\nQuestion: {q}\nRewritten:")

    return (
        ChatMessage("system", SYSTEM_COUNTERFACTUAL),
        ChatMessage("user", ask(ex_q)),
        ChatMessage("assistant", ex_cf),
        ChatMessage("user", ask(query)),
    )


_LINE_LABEL = re.compile(
    r"^(?:rewritten(?:\s+question)?|new\s+question|counterfactual(?:\s+question)?|question|q'|"
    r"改写(?:后的问题)?|新问题|反事实问题|问题)\s*[:：]\s*",
    re.IGNORECASE,
)
_EN_INTERROGATIVE = re.compile(
    r"^(?:who|whom|whose|what|which|when|where|why|how|in\s+(?:what|which)|is|are|was|were|do|does|did)\b",
    re.IGNORECASE,
)
_ZH_INTERROGATIVE = re.compile(r"谁|什么|哪|几|多少|何|吗|怎")


def _looks_like_question(text: str) -> bool:
    """Ends in "?"/"？", opens with an English question word, or (Chinese) holds one."""
    if text.endswith(("?", "？")) or _EN_INTERROGATIVE.match(text):
        return True
    return _has_cjk(text) and bool(_ZH_INTERROGATIVE.search(text))


def parse_counterfactual_line(text: str, query: str, taken: Sequence[str] = ()) -> str:
    """The rewritten question in a one-line reply ('' when there is none).

    Labels the model repeats from the prompt ("Rewritten:", "Question:", "改写：") and
    bullets, tags, markdown and quotes are removed; lines that are not question-like
    (no "?"/"？" and no interrogative word) are skipped. Preferred: the first line that
    is neither the original question nor a repeat of ``taken`` (earlier candidates) —
    a model that first echoes "Question: <q>" and then writes its rewrite gets the
    rewrite; when every line is such a repeat the first is returned, so validation
    rejects it visibly in the trace.
    """
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip().replace("**", "").replace("__", "")
        for _ in range(3):
            before = line
            m = _BULLET.match(line)
            if m and m.end() > 0:
                line = line[m.end():].strip()
            m = _BRACKET_TAG.match(line) or _COLON_TAG.match(line)
            if m:
                line = line[m.end():].strip()
            line = _LINE_LABEL.sub("", line).strip()
            line = line.strip(_QUOTES + " ").strip()
            if line == before:
                break
        if len(line) < 4 or line.endswith((":", "：")) or len(line) > 300:
            continue
        if not _looks_like_question(line):
            continue
        lines.append(line)
    if not lines:
        return ""
    avoid = {normalize_answer(query), *(normalize_answer(t) for t in taken)}
    return next((ln for ln in lines if normalize_answer(ln) not in avoid), lines[0])


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


def closed_book_messages(questions: Sequence[str]) -> tuple[ChatMessage, ...]:
    """One call answers q and every candidate q' briefly, without evidence (the L(·) proxy)."""
    listing = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, start=1))
    user = (
        "Answer each question from your own knowledge with a short phrase only "
        "(a name, date, number or a few words). Give your best guess; do not explain.\n\n"
        f"{listing}\n\n"
        'Reply with one line per question in the form "<number>. <answer>".'
    )
    return (ChatMessage("system", SYSTEM_CLOSED_BOOK), ChatMessage("user", user))


_NUMBERED = re.compile(r"^\s*(?:[-*•]\s*)?(?:[QqAa]\s*)?(\d{1,2})\s*[.)、:：]\s*(.*)$")
_ANSWER_PREFIX = re.compile(r"^(?:answer|a|答案|回答)\s*[:：]\s*", re.IGNORECASE)


# A small model asked to synthesise sometimes echoes a candidate line of the prompt
# ("(A) Kessby — Ψ = 0.53 — rationale", see synthesis_messages): keep only the answer part.
_ECHOED_LABEL = re.compile(r"^\(([A-J])\)\s*")
_ECHOED_SCORE = re.compile(r"\s*[—–-]+\s*Ψ\s*=.*$", re.DOTALL)


def _clean_short_answer(text: str) -> str:
    s = text.strip().replace("**", "")
    s = _ANSWER_PREFIX.sub("", s)
    s = _ECHOED_SCORE.sub("", _ECHOED_LABEL.sub("", s))
    s = _CITE.sub("", s)
    s = s.strip().strip(_QUOTES).strip()
    s = s.rstrip("。．.").strip()
    return s


def parse_numbered_answers(text: str, n: int) -> list[str]:
    """Answers "1. …" … "n. …" in order ('' where missing).

    Without any numbered line the non-empty lines are taken in order.
    """
    found: dict[int, str] = {}
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        m = _NUMBERED.match(ln)
        if m:
            idx = int(m.group(1))
            if 1 <= idx <= n and idx not in found:
                found[idx] = _clean_short_answer(m.group(2))
    if not found:
        return [_clean_short_answer(ln) for ln in lines[:n]] + [""] * max(0, n - len(lines))
    return [found.get(i, "") for i in range(1, n + 1)]


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


def cosine_rows(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatMatrix:
    """Cosine similarity matrix between the rows of a and b (re-normalised for safety)."""
    x = np.atleast_2d(np.asarray(a, dtype=np.float64))
    y = np.atleast_2d(np.asarray(b, dtype=np.float64))
    xn = np.linalg.norm(x, axis=1, keepdims=True)
    yn = np.linalg.norm(y, axis=1, keepdims=True)
    x = np.divide(x, xn, out=np.zeros_like(x), where=xn > 0)
    y = np.divide(y, yn, out=np.zeros_like(y), where=yn > 0)
    return np.asarray(x @ y.T, dtype=np.float64)


# Words that only shape a question (interrogatives, articles, auxiliaries, prepositions) and
# the Chinese characters that do the same; changing only these does not change what is asked.
# Except "who"/"谁": turning "in which city …" into "who …" asks for a person instead of a
# place — a category transformation — so they count as content.
_FORM_WORDS = frozenset((
    "which", "what", "where", "when", "why", "how", "in", "on", "at", "of", "the",
    "a", "an", "is", "was", "are", "were", "did", "does", "do", "to", "for", "by", "and", "or", "with",
    "from", "s", "its", "their", "his", "her",
))
_FORM_CHARS = frozenset("哪里个座所什么几多少何吗呢在于是的由其了被为位有")
_CONTENT_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]")


def _content_tokens(text: str) -> set[str]:
    toks = _CONTENT_TOKEN.findall(text.lower())
    return {t for t in toks if t not in _FORM_WORDS and t not in _FORM_CHARS}


def adds_content(query: str, candidate: str) -> bool:
    """True when ``candidate`` holds a content token (a word, a number, a CJK character
    other than question-shaping ones) that ``query`` does not.

    A counterfactual changes one thing — a role, a year, an entity, the kind of answer,
    the scope — and that change brings a word the question did not have ("villain",
    "2020", "亚军"). A candidate made only of q's own words, rearranged or shortened, is a
    restatement. (Word-level for Latin script, character-level for CJK, so a synonym such
    as 学校/大学 still counts as new: the rule catches rewordings, not every synonym.)
    """
    return bool(_content_tokens(candidate) - _content_tokens(query))


def evaluate_counterfactuals(
    query: str,
    candidates: Sequence[tuple[str, str]],
    *,
    sims: Sequence[float],
    rel_dom: Sequence[float],
    answer_q: str,
    answers_cf: Sequence[str],
    settings: CFRagSettings,
    tuning: CFTuning = DEFAULT_TUNING,
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
            reasons.append("identical to the original question")
        elif norm in seen:
            reasons.append(f"duplicate of candidate #{seen[norm]}")
        else:
            seen[norm] = i
        sim = float(sims[i])
        if seen.get(norm) == i and norm != norm_q and not adds_content(query, text):
            reasons.append("restates the question: adds no content word, so it asks for the same "
                           "answer (L(q) = L(q'))")
        if norm in examples:
            reasons.append("copied from the prompt's example, not about this question")
        elif example_sims is not None and float(example_sims[i]) > sim:
            reasons.append(
                f"closer to the prompt's example (cos {float(example_sims[i]):.3f}) than to the question "
                f"({sim:.3f}): a paraphrase of the example"
            )
        if not sim > s.theta_sim:
            reasons.append(f"sim_sem {sim:.3f} <= θ_sim {s.theta_sim:.2f}: off topic")
        judgement, f1 = judge_answers(answer_q, answers_cf[i], tuning.answer_same_f1)
        if degenerate:
            judgement = "undetermined"
        if judgement == "same":
            reasons.append(
                f"closed-book answers agree (token F1 {f1:.2f} > {tuning.answer_same_f1:.2f}): L(q) = L(q')"
            )
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
    ranked = sorted((c for c, _ in scored if c.valid), key=lambda c: (-c.info, c.order))
    kept_orders = [c.order for c in ranked[: s.n_counterfactuals]]
    kept: list[CounterfactualCandidate] = []
    rejected: list[CounterfactualCandidate] = []
    for cand, reasons in scored:
        if cand.order in kept_orders:
            kept.append(dataclasses.replace(cand, kept=True))
            continue
        if cand.valid:
            reasons.append(f"valid, but Info {cand.info:.3f} ranks below the top N = {s.n_counterfactuals}")
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
        warnings.append("the generator wrote no usable counterfactual question; running without Q_cf")
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
        warnings.append("the closed-book answers were all identical, so L(q) ≠ L(q') could "
                        "not be judged; candidates were ranked with Div_ans = 0.5")
    kept, rejected = evaluate_counterfactuals(
        query, cands, sims=sims.tolist(), rel_dom=rel.tolist(), answer_q=answers[0],
        answers_cf=answers[1:], settings=s, tuning=tuning,
        example_sims=None if example_sims is None else example_sims.tolist())
    if not kept:
        warnings.append("no counterfactual passed validation V(q, q'); φ_causal = 0 for every path")
    return kept, rejected, raw, warnings


# =========================================================================== step 2/3


def _hit_key(hit: Hit) -> tuple[str, int]:
    return (hit.level, hit.unit_id)


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
    toks: list[str] = []
    for word in _TOKEN_RE.findall(text.lower()):
        if _has_cjk(word):
            buf = ""
            for ch in word:
                if is_cjk(ch):
                    if buf:
                        toks.append(buf)
                        buf = ""
                    toks.append(ch)
                else:
                    buf += ch
            if buf:
                toks.append(buf)
        else:
            toks.append(word)
    return toks


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


# =========================================================================== step 4


def gaussian_affinity(x: npt.ArrayLike, sigma: float) -> FloatMatrix:
    """W_ij = exp(−‖e_i − e_j‖² / 2σ²) (paper 002 §3), with W_ii = 0 as in Ng–Jordan–Weiss."""
    if sigma <= 0:
        raise ValueError("cfrag.sigma: must be > 0")
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    sq = np.sum(a * a, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (a @ a.T), 0.0)
    w = np.exp(-d2 / (2.0 * sigma * sigma))
    np.fill_diagonal(w, 0.0)
    return np.asarray(w, dtype=np.float64)


def normalized_laplacian(w: npt.ArrayLike) -> FloatMatrix:
    """L = I − D^{-1/2} W D^{-1/2}; an isolated node (degree 0) gets D^{-1/2} = 0."""
    m = np.asarray(w, dtype=np.float64)
    d = m.sum(axis=1)
    inv = np.zeros_like(d)
    np.divide(1.0, np.sqrt(d), out=inv, where=d > 0)
    lap = np.eye(len(d)) - inv[:, None] * m * inv[None, :]
    return np.asarray(0.5 * (lap + lap.T), dtype=np.float64)


def _canonical_labels(labels: npt.ArrayLike) -> IntArray:
    """Renumber clusters in order of first appearance (0, 1, …) so labels are stable."""
    mapping: dict[int, int] = {}
    out = np.empty(len(np.asarray(labels)), dtype=np.int64)
    for i, lab in enumerate(np.asarray(labels).tolist()):
        if lab not in mapping:
            mapping[lab] = len(mapping)
        out[i] = mapping[lab]
    return out


def _kmeanspp_init(x: FloatMatrix, k: int, rng: np.random.Generator) -> FloatMatrix:
    n = len(x)
    chosen = [int(rng.integers(n))]
    d2 = np.sum((x - x[chosen[0]]) ** 2, axis=1)
    while len(chosen) < k:
        total = float(d2.sum())
        if total <= 0.0:
            # All remaining points coincide with a centre: pick any unchosen one uniformly.
            rest = [i for i in range(n) if i not in chosen]
            nxt = int(rest[int(rng.integers(len(rest)))])
        else:
            nxt = int(rng.choice(n, p=d2 / total))
        chosen.append(nxt)
        d2 = np.minimum(d2, np.sum((x - x[nxt]) ** 2, axis=1))
    return np.asarray(x[chosen], dtype=np.float64)


def kmeans_pp(
    x: npt.ArrayLike, k: int, rng: np.random.Generator, *, n_init: int = 8, max_iter: int = 100
) -> tuple[IntArray, float]:
    """Lloyd's k-means with k-means++ seeding, best of ``n_init`` restarts by inertia.

    An emptied cluster takes the point farthest from its centre among clusters with more
    than one member, so exactly k clusters come back. Labels are canonical (first
    appearance order). Returns (labels, inertia).
    """
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = len(a)
    if not 1 <= k <= n:
        raise ValueError(f"k-means: k = {k} must be in [1, n = {n}]")
    best_labels: IntArray | None = None
    best_inertia = math.inf
    for _ in range(max(1, n_init)):
        centres = _kmeanspp_init(a, k, rng)
        labels = np.full(n, -1, dtype=np.int64)
        for _it in range(max_iter):
            d2 = np.sum((a[:, None, :] - centres[None, :, :]) ** 2, axis=2)
            new = np.asarray(np.argmin(d2, axis=1), dtype=np.int64)
            for c in range(k):
                if not np.any(new == c):
                    counts = np.bincount(new, minlength=k)
                    movable = counts[new] > 1
                    own = d2[np.arange(n), new]
                    far = int(np.argmax(np.where(movable, own, -np.inf)))
                    new[far] = c
            if np.array_equal(new, labels):
                break
            labels = new
            centres = np.stack([a[labels == c].mean(axis=0) for c in range(k)])
        inertia = float(np.sum((a - centres[labels]) ** 2))
        if inertia < best_inertia - 1e-12:
            best_inertia, best_labels = inertia, labels.copy()
    assert best_labels is not None
    return _canonical_labels(best_labels), best_inertia


def median_sigma(x: npt.ArrayLike, fallback: float) -> float:
    """The median heuristic for σ: the median Euclidean distance over pairs i < j.

    Scales the Gaussian affinity to the data, so a typical pair has W = exp(−1/2).
    Falls back to ``fallback`` with fewer than two points or a zero median.
    """
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = len(a) if a.size else 0
    if n < 2:
        return fallback
    sq = np.sum(a * a, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (a @ a.T), 0.0)
    med = float(np.median(np.sqrt(d2[np.triu_indices(n, k=1)])))
    return med if med > 1e-12 else fallback


@dataclass(frozen=True)
class SpectralResult:
    labels: IntArray
    k_used: int
    eigenvalues: tuple[float, ...]
    inertia: float


def spectral_clustering(
    x: npt.ArrayLike,
    k: int,
    sigma: float,
    rng: np.random.Generator,
    *,
    n_init: int = 8,
    max_iter: int = 100,
) -> SpectralResult:
    """Ng–Jordan–Weiss spectral clustering (paper 002 §3).

    W = Gaussian affinity (σ), L = I − D^{-1/2} W D^{-1/2}, U = the eigenvectors of the K
    smallest eigenvalues of L (the "leading" ones of the normalised affinity), rows of U
    normalised to unit length, then k-means++ on those rows. The paper's summary says
    "前 M 个特征向量" (first M eigenvectors); we read that as the cluster count K, as in
    standard spectral clustering, since the eigenvector count must match the clusters.

    K = min(K, n): fewer passages than clusters yields one cluster per passage; n = 0
    yields no clusters.
    """
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = 0 if a.size == 0 else len(a)
    if n == 0:
        return SpectralResult(np.zeros(0, dtype=np.int64), 0, (), 0.0)
    k_used = max(1, min(k, n))
    if n == 1:
        return SpectralResult(np.zeros(1, dtype=np.int64), 1, (0.0,), 0.0)
    lap = normalized_laplacian(gaussian_affinity(a, sigma))
    vals, vecs = np.linalg.eigh(lap)  # ascending eigenvalues
    u = vecs[:, :k_used]
    norms = np.linalg.norm(u, axis=1, keepdims=True)
    u = np.divide(u, norms, out=np.zeros_like(u), where=norms > 1e-12)
    labels, inertia = kmeans_pp(u, k_used, rng, n_init=n_init, max_iter=max_iter)
    return SpectralResult(labels, k_used, tuple(float(v) for v in vals[:k_used]), inertia)


# =========================================================================== step 5


def softmax(z: npt.ArrayLike) -> FloatMatrix:
    v = np.asarray(z, dtype=np.float64)
    e = np.exp(v - np.max(v))
    return np.asarray(e / e.sum(), dtype=np.float64)


@dataclass(frozen=True)
class Subset:
    weights: tuple[float, ...]
    members: tuple[int, ...]  # indices into the clustered evidence, ascending


def sample_subsets(
    labels: npt.ArrayLike,
    *,
    n_subsets: int,
    size: int,
    temperature: float,
    rng: np.random.Generator,
) -> list[Subset]:
    """M evidence subsets E_j by stratified, temperature-weighted sampling (paper 002 §3).

    For each subset j (the paper names weights w_jm but not their law; this is ours):

    1. noise g_jm ~ N(0, 1) for each cluster m, and w_j = softmax(g_j / temperature).
       High temperature → near-uniform weights (every path sees an even mix); low
       temperature → each path leans on one cluster (paths differ more).
    2. stratified pass: with s = min(size, n) slots and K clusters, if s ≥ K one passage
       from every cluster (each path covers all topics); if s < K, s distinct clusters
       drawn without replacement with probabilities w_j.
    3. the remaining s − K slots: repeatedly draw a cluster with probability ∝ w_jm among
       clusters that still have unused passages.

    Within a cluster passages are taken in a uniformly random order (no repeats inside a
    subset). Probabilities get a 1e-12 floor so a weight that underflowed to 0 at very
    low temperature cannot make sampling impossible. Everything draws from ``rng``, so a
    seeded generator reproduces the subsets exactly.
    """
    if temperature <= 0:
        raise ValueError("cfrag.temperature: must be > 0")
    lab = np.asarray(labels, dtype=np.int64)
    n = len(lab)
    if n == 0:
        return []
    k = int(lab.max()) + 1
    members = [np.flatnonzero(lab == c) for c in range(k)]
    if any(len(m) == 0 for m in members):
        raise ValueError("sample_subsets: cluster labels must be 0..K-1 with no empty cluster")
    s = min(size, n)
    out: list[Subset] = []
    for _ in range(n_subsets):
        w = softmax(rng.standard_normal(k) / temperature)
        p = w + 1e-12
        queues = [list(rng.permutation(m)) for m in members]
        chosen: list[int] = []
        # Stratified pass: every cluster once, or s distinct clusters drawn by w_j.
        first = list(range(k)) if s >= k else [int(c) for c in rng.choice(k, size=s, replace=False, p=p / p.sum())]
        for c in first:
            chosen.append(int(queues[c].pop(0)))
        while len(chosen) < s:
            avail = [c for c in range(k) if queues[c]]
            pa = p[avail] / p[avail].sum()
            c = int(avail[int(rng.choice(len(avail), p=pa))])
            chosen.append(int(queues[c].pop(0)))
        out.append(Subset(tuple(float(v) for v in w), tuple(sorted(chosen))))
    return out


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
    lines = []
    for n, (h, t) in enumerate(zip(hits, texts, strict=True), start=1):
        where = f"{h.title}, p. {h.page}" if h.title else f"p. {h.page}"
        lines.append(f"[{n}] ({where})\n{t}")
    return "\n\n".join(lines)


_HYP_INSTRUCTIONS = (
    "Reply with JSON only: "
    '{"answer": "<the direct answer: a name, date, number or short phrase>", '
    '"rationale": "<one to three sentences: the passage(s) that decide the answer, cited as [n], '
    'and any conflicting passage and why it does not decide it>"}'
)


def hypothesis_overhead(query: str, n_hits: int, generator: Generator) -> int:
    """Prompt tokens of a hypothesis prompt other than the passages (system, question, headers)."""
    system = f"{SYSTEM_HYPOTHESIS} {_HYP_INSTRUCTIONS}"
    skeleton = f"Evidence:\n\n\nQuestion: {query}"
    return generator.count_tokens(system + skeleton) + 8 * n_hits  # 8: a "[n] (title, p. x)" header


def hypothesis_messages(
    query: str, hits: Sequence[Hit], generator: Generator, max_tokens: int, margin: int,
    budget: int | None = None,
) -> tuple[tuple[ChatMessage, ...], list[str]]:
    """The prompt of H(q, E_j) and the (possibly shortened) passage texts it used.

    As the paper asks: a direct answer, a rationale naming the key supporting evidence,
    and an assessment of conflicting information. ``budget`` caps the evidence tokens
    (default: whatever one call leaves in n_ctx).
    """
    system = f"{SYSTEM_HYPOTHESIS} {_HYP_INSTRUCTIONS}"
    full = generator.n_ctx - max_tokens - margin - hypothesis_overhead(query, len(hits), generator)
    texts = fit_passages(generator, [h.text for h in hits], full if budget is None else min(full, budget))
    user = f"Evidence:\n{_passage_block(hits, texts)}\n\nQuestion: {query}"
    return (ChatMessage("system", system), ChatMessage("user", user)), texts


_CITE = re.compile(r"\s*" + CITATION_RE.pattern)  # the shared grammar, with the space before a marker
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
# "Answer:", "**Answer:**", "**Answer**:", "### Final answer:", "答案：" — the label and its
# markdown, never swallowing the line break (an answer may sit on the next line).
_LABEL_ANSWER = re.compile(
    r"^[ \t#>*]*(?:final[ \t]+)?(?:answer|答案|回答)[ \t*]*[:：][ \t*]*(.*)$", re.IGNORECASE | re.MULTILINE
)
_LABEL_RATIONALE = re.compile(
    r"^[ \t#>*]*(?:rationale|reason|reasoning|explanation|justification|理由|依据|解释)[ \t*]*[:：][ \t*]*",
    re.IGNORECASE | re.MULTILINE,
)


def _json_objects(text: str) -> Iterator[dict[str, object]]:
    dec = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text[m.start():])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield obj


def parse_hypothesis(text: str) -> tuple[str, str, ParseMethod]:
    """(answer, rationale, how) from a model reply, tolerant of format drift.

    Tried in order: a JSON object with an "answer" key (code fences and surrounding prose
    allowed; "rationale"/"reason"/"explanation" for the rationale); the "answer" string
    field of JSON that does not parse (truncated or malformed); "Answer:" / "Rationale:"
    labels (English or Chinese); else the first non-empty line that is not a code fence
    or a lone brace is the answer and the rest the rationale. Citation markers "[n]" are
    removed from the answer (they stay in the rationale).
    """
    body = text.strip()
    if not body:
        return "", "", "empty"
    fence = _FENCE.search(body)
    candidates = ([fence.group(1)] if fence else []) + [body]
    for cand in candidates:
        for obj in _json_objects(cand):
            lower = {str(k).lower(): v for k, v in obj.items()}
            if "answer" in lower or "答案" in lower:
                ans = lower.get("answer", lower.get("答案"))
                rat = next((lower[k] for k in ("rationale", "reason", "reasoning", "explanation", "理由")
                            if k in lower), "")
                return _clean_short_answer(_scalar(ans)), _scalar(rat).strip(), "json"
    # A fenced or brace-opened reply whose JSON does not parse (cut off by the token limit,
    # an unescaped quote): take the "answer" string field if it is there. Without this the
    # fallback below would answer "```json" → "json".
    for key in ("answer", "答案"):
        mj = re.search(rf'"{key}"\s*:\s*"((?:[^"\\\n]|\\.)*)"?', body)
        if mj:
            rj = re.search(r'"(?:rationale|reason|reasoning|explanation|理由)"\s*:\s*"((?:[^"\\]|\\.)*)', body)
            rat = _unescape(rj.group(1)).strip().rstrip("`}\n ") if rj else ""
            return _clean_short_answer(_unescape(mj.group(1))), rat, "json"
    m = _LABEL_ANSWER.search(body)
    if m:
        ans = m.group(1).strip()
        if not ans:  # "Answer:" alone on its line: take the next non-empty line
            rest = [ln for ln in body[m.end():].splitlines() if ln.strip()]
            ans = rest[0] if rest else ""
        r = _LABEL_RATIONALE.search(body)
        rat = body[r.end():].strip() if r else ""
        if r and r.start() > m.start():
            ans = ans.split("\n")[0]
        return _clean_short_answer(ans), rat, "labels"
    # Code-fence markers and lone braces are format, not content.
    lines = [ln for ln in body.splitlines() if ln.strip() and not _FORMAT_LINE.match(ln)]
    if not lines:
        return "", "", "empty"
    return _clean_short_answer(lines[0]), "\n".join(lines[1:]).strip(), "fallback"


_FORMAT_LINE = re.compile(r"^\s*(?:```\s*\w*|[{}\[\]]+)\s*$")


def _unescape(s: str) -> str:
    try:
        return str(json.loads(f'"{s}"'))
    except json.JSONDecodeError:
        return s.replace('\\"', '"')


def _scalar(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return ", ".join(_scalar(x) for x in v)
    return str(v)


# =========================================================================== step 6


def phi_causal(s_q: npt.ArrayLike, s_cf: npt.ArrayLike) -> float:
    """φ_causal(E_j, q, Q_cf) = (1/|E_j|) Σ_{e∈E_j} [ s(q, e) − max_{q'∈Q_cf} s(q', e) ].

    Paper 002 §4, exactly: the MAX over counterfactuals (the authors' code uses the
    mean, which lets one strongly competing q' be diluted by unrelated ones). ``s_q`` has
    one score per passage of E_j; ``s_cf`` is |Q_cf| × |E_j|. With no counterfactuals
    (or an empty E_j) the max is undefined and φ_causal = 0: Ψ then ranks by φ_coh alone.
    """
    sq = np.asarray(s_q, dtype=np.float64).reshape(-1)
    cf = np.asarray(s_cf, dtype=np.float64)
    if sq.size == 0 or cf.size == 0:
        return 0.0
    cf = cf.reshape(-1, sq.size)
    return float(np.mean(sq - cf.max(axis=0)))


def answer_presence(answer: str, texts: Sequence[str]) -> float:
    """Explicit presence of the answer in the evidence, in [0, 1].

    1.0 when the normalised answer is a substring of some normalised passage; otherwise
    the best token recall max_e |tok(a) ∩ tok(e)| / |tok(a)| (CJK characters as tokens),
    so "Christian Bale" against a passage naming only "Bale" scores 0.5. Empty answer: 0.
    """
    na = normalize_answer(answer)
    if not na:
        return 0.0
    at = set(answer_tokens(answer))
    best = 0.0
    for t in texts:
        nt = normalize_answer(t)
        if na in nt:
            return 1.0
        et = set(answer_tokens(t))
        best = max(best, len(at & et) / len(at))
    return best


def phi_coh(sim_answer_evidence: float, query_relevance: float, presence: float,
            tuning: CFTuning = DEFAULT_TUNING) -> float:
    """Internal coherence φ_coh (paper 002 §4 lists the three ingredients; weights are ours).

    φ_coh = 0.4·sim_ae + 0.3·rel_q + 0.3·presence (``CFTuning.coh_w_*``, summing to 1):

    * sim_ae   = max_{e∈E_j} max(0, cos(E(a_j), E(e))): the answer is semantically
      supported by at least one passage (the max, because φ_causal already averages
      over E_j and a path needs one supporting passage, not all). E(a_j) is the
      embedder's *query* embedding of the short answer text, E(e) the passage embedding,
      as for retrieval;
    * rel_q    = mean_{e∈E_j} s(q, e) (normalised scale): the path's evidence is about q;
    * presence = :func:`answer_presence`: the answer string literally occurs.

    Every term is in [0, 1], so φ_coh ∈ [0, 1], comparable to φ_causal ∈ [−1, 1].
    """
    return (tuning.coh_w_embed * sim_answer_evidence + tuning.coh_w_query * query_relevance
            + tuning.coh_w_presence * presence)


def psi(coh: float, causal: float, lam: float) -> float:
    """Ψ_j = (1 − λ)·φ_coh + λ·φ_causal (paper 002 §4; λ = 0.4)."""
    return (1.0 - lam) * coh + lam * causal


def agreement(answers: Sequence[str]) -> float:
    """Agreement of the hypotheses: the mean pairwise token F1 of their normalised answers.

    1.0 when all answers are equal after normalisation, 0.0 when no two share a token;
    "Bale, Bale, Ledger" → (1 + 0 + 0) / 3 = 0.33. Partial matches count partially
    ("Christian Bale" vs "Bale" → 0.67). Fewer than two hypotheses → 1.0 (nothing to
    disagree with).
    """
    n = len(answers)
    if n < 2:
        return 1.0
    total, pairs = 0.0, 0
    for i in range(n):
        for j in range(i + 1, n):
            total += token_f1(answers[i], answers[j])
            pairs += 1
    return total / pairs


# =========================================================================== step 7


def synthesis_is_grounded(answer: str, candidates: Sequence[str], texts: Sequence[str]) -> bool:
    """Whether a synthesised answer comes from the material it was given.

    Grounded: :func:`answer_presence` in the evidence > 0.5, or token F1 > 0.5 with one of
    the candidate answers. Qwen2.5 0.5B, given the long synthesis prompt, sometimes replies
    with an unrelated word ("Marketing", "Markov, p. 1" on the QA fixture); such a reply
    is not a synthesis, and the decision falls back to the highest-Ψ hypothesis.
    """
    if answer_presence(answer, texts) > 0.5:
        return True
    return any(normalize_answer(c) and token_f1(answer, c) > 0.5 for c in candidates)


def synthesis_messages(
    query: str,
    ranked: Sequence[HypothesisTrace],
    hits: Sequence[Hit],
    counterfactuals: Sequence[str],
    generator: Generator,
    max_tokens: int,
    margin: int,
) -> tuple[tuple[ChatMessage, ...], list[str]]:
    """Prompt to synthesise the final answer from the top hypotheses (best Ψ first)."""
    cands = []
    for letter, h in zip("ABCDEFGHIJ", ranked, strict=False):
        rationale = _CITE.sub("", h.rationale).strip() or "(no rationale)"
        cands.append(f"({letter}) {h.answer or '(empty)'} — Ψ = {h.psi:.3f} — {rationale}")
    cf_block = "\n".join(f"- {c}" for c in counterfactuals) or "- (none)"
    tail = (
        "Candidate answers, best first by the arbitration score Ψ (Ψ rewards answers whose "
        "evidence supports THIS question more than the contrasting questions below):\n"
        + "\n".join(cands)
        + f"\n\nContrasting questions (their answers are NOT wanted):\n{cf_block}\n\n"
        f"Question: {query}\n\n"
        "Decide which candidate the evidence supports for this question, or combine them if they "
        "are compatible. " + _HYP_INSTRUCTIONS
    )
    system = SYSTEM_SYNTHESIS
    budget = (generator.n_ctx - max_tokens - margin - generator.count_tokens(system + tail)
              - 8 * len(hits))
    texts = fit_passages(generator, [h.text for h in hits], budget)
    user = f"Evidence:\n{_passage_block(hits, texts)}\n\n{tail}"
    return (ChatMessage("system", system), ChatMessage("user", user)), texts


def citations_for(text: str, sources: Sequence[Hit]) -> tuple[Citation, ...]:
    """Every citation in ``text``, first appearance order, mapped to ``sources`` (the one
    grammar of :mod:`rag_desktop.core.citations`: 【1】, [1-2] and lists included)."""
    return parse_citations(text, sources)


def trim_to_sentence(text: str) -> str:
    """A reply cut by its token budget, back to its last complete sentence (if it has one).

    Only for text known to be cut (finish_reason "length"): "A. B is" → "A.". Without a
    sentence end the text stays as it is (the trace flags it as truncated either way).
    """
    ends = [m.end() for m in re.finditer(r"[.!?。！？](?=\s|$)|[。！？]", text)]
    cut = text[: ends[-1]].rstrip() if ends and ends[-1] < len(text.rstrip()) else text
    return cut if cut.strip() else text


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
    note = (f"the context (n_ctx = {generator.n_ctx}) is too small for {m} hypotheses with full evidence "
            f"decoded together: evidence per hypothesis shrunk from {full} to {budget} tokens")
    if budget > shared:
        note += "; the hypotheses are decoded in more than one batch"
    return budget, note


# =========================================================================== what the column shows

MARGIN_NOISE_FLOOR = 0.01  # normalised-score units; Δ differences below this are not read as signal
PARAPHRASE_SIM = 0.98  # a kept q' this close to q (sim_sem) is a paraphrase: it cannot separate anything


def evidence_rows(trace: CFTrace) -> list[EvidenceRow]:
    """The evidence list of the CF-RAG column: what CF-RAG used first, Δ as an annotation.

    Paper 002 produces an answer, not a ranking, so the list shows what the answer rests
    on (issue 14, item 6): first the evidence of the chosen hypothesis in its prompt order
    (for a synthesis, the evidence of the synthesised hypotheses in the synthesis prompt's
    order), then the other kept evidence by s(q, e), then the filtered-out passages by
    s(q, e), marked with their status. Ordering by Δ instead ranked noise first when every
    Δ lay within ±0.004 (the demo's travel-expense question).
    """
    d = trace.decision
    subsets = {sub.index: sub for sub in trace.subsets}
    hyps = {h.index: h for h in trace.hypotheses}
    ids = [d.chosen] if d.chosen >= 0 else list(d.synthesized_from)
    chosen: list[int] = []
    for hid in ids:
        h = hyps.get(hid)
        sub = subsets.get(h.subset) if h is not None else None
        for p in sub.members if sub is not None else ():
            if p not in chosen:
                chosen.append(p)
    by_id = {e.pool_id: e for e in trace.evidence}

    def margin(e: EvidenceTrace) -> float | None:
        return None if e.max_s_cf is None else e.s_q - e.max_s_cf

    rows = [EvidenceRow(by_id[p], "chosen", n, margin(by_id[p])) for n, p in enumerate(chosen, start=1)
            if p in by_id]
    rest = sorted((e for e in trace.evidence if e.pool_id not in chosen), key=lambda e: (-e.s_q, e.pool_id))
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


# =========================================================================== orchestrator


def _check_settings(s: CFRagSettings, seed: int) -> None:
    def need(cond: bool, key: str, why: str) -> None:
        if not cond:
            raise SettingsError(f"invalid setting {key}: {why}")

    need(s.n_counterfactuals >= 1, "cfrag.n_counterfactuals", "must be >= 1")
    need(s.n_candidates >= s.n_counterfactuals, "cfrag.n_candidates", "must be >= n_counterfactuals")
    need(s.n_clusters >= 1, "cfrag.n_clusters", "must be >= 1")
    need(s.n_hypotheses >= 1, "cfrag.n_hypotheses", "must be >= 1")
    need(0.0 <= s.lam <= 1.0, "cfrag.lam", "must be in [0, 1]")
    need(s.sigma > 0, "cfrag.sigma", "must be > 0")
    need(s.temperature > 0, "cfrag.temperature", "must be > 0")
    need(-1.0 <= s.theta_dedup <= 1.0, "cfrag.theta_dedup", "must be a cosine in [-1, 1]")
    need(-1.0 <= s.theta_sim <= 1.0, "cfrag.theta_sim", "must be a cosine in [-1, 1]")
    need(s.retrieve_k >= 1, "cfrag.retrieve_k", "must be >= 1")
    need(s.evidence_per_hypothesis >= 1, "cfrag.evidence_per_hypothesis", "must be >= 1")
    need(0.0 <= s.agreement_threshold <= 1.0, "cfrag.agreement_threshold", "must be in [0, 1]")
    need(seed >= 0, "cfrag.seed", "must be >= 0")


@dataclass
class _Clock:
    timings: list[StepTiming] = field(default_factory=list)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings.append(StepTiming(name, time.perf_counter() - t0))


_STEPS = ("retrieve", "counterfactuals", "dialectical_retrieval", "scoring", "filter",
          "clustering", "sampling", "hypotheses", "arbitration", "decision")


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
) -> CFResult:
    """Answer ``query`` with CF-RAG and return the Answer plus the complete trace.

    ``retrieve(text, k)`` returns the top-k hits for a text (R(·, D)); models arrive as
    protocol objects and must already be loadable (``load()`` is called, idempotent).
    ``seed`` seeds every random choice (numpy streams for clustering and sampling,
    derived seeds for each generator call), so a run is reproducible with a
    deterministic generator. ``cancel`` is polled between steps and passed to the
    generator; ``on_event`` receives a :class:`Progress` at the start of each step.

    Ablations (paper 002, Table "消融实验"):

    * ``use_counterfactuals=False``: no q' at all; the pool is R(q); φ_causal = 0.
    * ``use_division=False``: no clustering; ONE hypothesis over all kept evidence
      (the paper's "all evidence in one context"), so the decision is "single".
    * ``lam=0``: Ψ = φ_coh (φ_causal is still computed and shown in the trace).
    """
    if not query.strip():
        raise UserInputError("cfrag: the question is empty")
    s = settings
    _check_settings(s, seed)
    for model in (embedder, scorer, generator):
        model.load()
    clock = _Clock()
    warnings: list[str] = []
    usage: list[GenerationUsage] = []
    step_no = 0

    def begin(name: str, message: str = "") -> None:
        nonlocal step_no
        if cancel is not None:
            cancel.raise_if_set()
        step_no += 1
        if on_event is not None:
            on_event(Progress(stage=f"cfrag.{name}", current=step_no, total=len(_STEPS), message=message))

    vectors: dict[tuple[str, int], npt.NDArray[np.float64]] = {}

    def embed_hits(hits: Sequence[Hit]) -> None:
        todo = [h for h in hits if _hit_key(h) not in vectors]
        if todo:
            embs = np.asarray(embedder.embed_passages([h.text for h in todo]), dtype=np.float64)
            if embs.shape[0] != len(todo):
                raise ValueError(
                    f"embedder {embedder.identity}: returned {embs.shape[0]} rows for {len(todo)} texts"
                )
            for h, v in zip(todo, embs, strict=True):
                vectors[_hit_key(h)] = v

    # ---- R(q)
    begin("retrieve", "retrieving for the question")
    with clock.step("retrieve"):
        hits_q = list(retrieve(query, s.retrieve_k))
        q_vec = np.asarray(embedder.embed_queries([query]), dtype=np.float64)[0]
        embed_hits(hits_q)

    # ---- Step 1: counterfactual exploration
    begin("counterfactuals", "writing counterfactual questions")
    kept_cf: list[CounterfactualCandidate] = []
    rejected_cf: list[CounterfactualCandidate] = []
    cf_raw = ""
    with clock.step("counterfactuals"):
        if s.use_counterfactuals:
            centroid = (np.mean([vectors[_hit_key(h)] for h in hits_q], axis=0) if hits_q else None)
            kept_cf, rejected_cf, cf_raw, cf_warn = explore_counterfactuals(
                query, q_vec=q_vec, context_centroid=centroid, embedder=embedder, generator=generator,
                settings=s, seed=seed, tuning=tuning, cancel=cancel, usage=usage.append)
            warnings.extend(cf_warn)
    queries = [query] + [c.text for c in kept_cf]

    # ---- Step 2: dialectical retrieval
    begin("dialectical_retrieval", "retrieving for the counterfactual questions")
    with clock.step("dialectical_retrieval"):
        results: list[list[Hit]] = [hits_q] + [list(retrieve(qc, s.retrieve_k)) for qc in queries[1:]]
        pool, retrieved_by = pool_union(results)
        embed_hits(pool)

    # ---- Step 3: s(q_i, e), the whole matrix once
    begin("scoring", "scoring evidence against every question")
    with clock.step("scoring"):
        texts = [h.text for h in pool]
        raw = score_matrix(scorer, queries, texts)
        scale = resolve_score_scale(scorer, tuning)
        S = normalise_scores(raw, scale)
    if scorer.is_substitute:
        warnings.append(
            f"s(q, e) comes from a substitute scorer ({scorer.identity}), not a trained cross-encoder"
        )

    # ---- dedup → quality → relevance cut
    begin("filter", "removing near-duplicates and weak evidence")
    with clock.step("filter"):
        pool_vecs = (np.stack([vectors[_hit_key(h)] for h in pool]) if pool
                     else np.zeros((0, max(1, embedder.dim))))
        rep = dedup_by_embedding(pool_vecs, S[0].tolist() if pool else [], s.theta_dedup)
        merged_by: list[set[int]] = [set(b) for b in retrieved_by]
        for i, r in enumerate(rep.tolist()):
            if r != i:
                merged_by[r] |= set(retrieved_by[i])
        quality = [quality_score(t, tuning.quality_ref_chars) for t in texts]
        relevance = S.max(axis=0) if pool else np.zeros(0)
        status = select_evidence(rep.tolist(), quality, relevance.tolist(), S[0].tolist() if pool else [],
                                 quality_min=s.quality_min, keep=s.retrieve_k)
        kept_ids = [i for i in range(len(pool)) if status[i] == "kept"]
    if pool and not kept_ids:
        warnings.append("every retrieved passage was removed by the quality filter")

    # ---- Step 4: spectral clustering
    begin("clustering", "clustering the evidence")
    with clock.step("clustering"):
        rng_cluster, rng_sample = stream_rng(seed, "clustering"), stream_rng(seed, "sampling")
        sigma = s.sigma
        if s.use_division and kept_ids:
            if tuning.sigma_rule == "median":
                sigma = median_sigma(pool_vecs[kept_ids], s.sigma)
            spec = spectral_clustering(pool_vecs[kept_ids], s.n_clusters, sigma, rng_cluster,
                                       n_init=tuning.kmeans_n_init, max_iter=tuning.kmeans_max_iter)
            labels = spec.labels.tolist()
        else:
            spec = SpectralResult(np.zeros(0, dtype=np.int64), 0, (), 0.0)
            labels = []
        cluster_of = {pid: int(lab) for pid, lab in zip(kept_ids, labels, strict=False)}

    # ---- Step 5: subsets
    begin("sampling", "sampling evidence subsets")
    with clock.step("sampling"):
        if not kept_ids:
            subsets: list[Subset] = []
        elif s.use_division:
            subsets = sample_subsets(labels, n_subsets=s.n_hypotheses, size=s.evidence_per_hypothesis,
                                     temperature=s.temperature, rng=rng_sample)
        else:
            subsets = [Subset((), tuple(range(len(kept_ids))))]
        subset_pids = [[kept_ids[i] for i in sub.members] for sub in subsets]

    # ---- Step 5b: hypotheses
    begin("hypotheses", f"generating {len(subsets)} hypotheses")
    gens: list[tuple[Generated, int, str, str, ParseMethod]] = []
    evidence_budget = -1
    with clock.step("hypotheses"):
        if subset_pids:
            evidence_budget, shrink_note = _evidence_budget(query, [len(p) for p in subset_pids], generator, tuning)
            if shrink_note:
                warnings.append(shrink_note)
        requests = []
        for j, pids in enumerate(subset_pids):
            msgs, _ = hypothesis_messages(query, [pool[p] for p in pids], generator, tuning.max_tokens_hypothesis,
                                          tuning.context_margin_tokens, budget=evidence_budget)
            requests.append(GenRequest(msgs, tuning.max_tokens_hypothesis, tuning.hypothesis_temperature,
                                       derive_seed(seed, "hypothesis", j)))
        for req, g in zip(requests, generate_group(generator, "hypotheses", requests, cancel=cancel,
                                                   usage=usage.append), strict=True):
            ans, rat, how = parse_hypothesis(g.text)
            gens.append((g, req.seed, ans, rat, how))

    # ---- Step 6: arbitration
    begin("arbitration", "scoring the hypotheses")
    with clock.step("arbitration"):
        nonempty = [i for i, g in enumerate(gens) if normalize_answer(g[2])]
        a_vecs = (np.asarray(embedder.embed_queries([gens[i][2] for i in nonempty]), dtype=np.float64)
                  if nonempty else np.zeros((0, 1)))
        a_vec_of = {i: a_vecs[r] for r, i in enumerate(nonempty)}
        unranked: list[HypothesisTrace] = []
        for j, (g, hseed, ans, rat, how) in enumerate(gens):
            pids = subset_pids[j]
            sim_ae = 0.0
            if j in a_vec_of and pids:
                sim_ae = max(0.0, float(cosine_rows(pool_vecs[pids], a_vec_of[j]).max()))
            rel_q = float(np.mean(S[0, pids])) if pids else 0.0
            pres = answer_presence(ans, [pool[p].text for p in pids])
            coh = phi_coh(sim_ae, rel_q, pres, tuning)
            causal = phi_causal(S[0, pids], S[1:, pids]) if pids else 0.0
            unranked.append(HypothesisTrace(
                index=j, subset=j, answer=ans, rationale=rat, parse=how, raw_text=g.text, seed=hseed,
                sim_answer_evidence=sim_ae, query_relevance=rel_q, presence=pres, phi_coh=coh,
                phi_causal=causal, psi=psi(coh, causal, s.lam), mean_logprob=g.mean_logprob, rank=0,
                finish_reason=g.finish_reason,
            ))
        order = sorted(range(len(unranked)), key=lambda j: (-unranked[j].psi, j))
        hyps = [dataclasses.replace(h, rank=order.index(h.index) + 1) for h in unranked]

    # ---- Step 7: decision
    begin("decision", "choosing the answer")
    with clock.step("decision"):
        agr = agreement([h.answer for h in hyps])
        kind: DecisionKind
        synth_from: tuple[int, ...] = ()
        synth_raw = ""
        synth_finish = ""
        chosen = -1
        final_ans, final_rat = "", ""
        sources: list[Hit] = []
        if not hyps:
            kind = "no_evidence"
            warnings.append("no evidence passed retrieval and filtering; no answer was generated")
        elif len(hyps) == 1 or agr >= s.agreement_threshold:
            kind = "single" if len(hyps) == 1 else "select"
            chosen = order[0]
        else:
            kind = "synthesize"
            top = [hyps[j] for j in order[: tuning.synthesis_top]]
            synth_from = tuple(h.index for h in top)
            seen_p: list[int] = []
            for h in top:
                for p in subset_pids[h.subset]:
                    if p not in seen_p:
                        seen_p.append(p)
            sources = [pool[p] for p in seen_p]
            msgs, _ = synthesis_messages(query, top, sources, queries[1:], generator,
                                         tuning.max_tokens_synthesis, tuning.context_margin_tokens)
            [g] = generate_group(generator, "synthesis", [GenRequest(
                msgs, tuning.max_tokens_synthesis, tuning.synthesis_temperature, derive_seed(seed, "synthesis"))],
                cancel=cancel, usage=usage.append)
            synth_raw, synth_finish = g.text, g.finish_reason
            final_ans, final_rat, _how = parse_hypothesis(g.text)
            if not normalize_answer(final_ans):
                kind = "synthesis_fallback"
                chosen = order[0]
                warnings.append("the synthesis reply had no answer; using the highest-Ψ hypothesis")
            elif not synthesis_is_grounded(final_ans, [h.answer for h in top], [x.text for x in sources]):
                kind = "synthesis_fallback"
                chosen = order[0]
                warnings.append(f"the synthesis answer {final_ans[:60]!r} is neither in the evidence nor one of "
                                "the candidates; using the highest-Ψ hypothesis")
        if chosen >= 0:
            h = hyps[chosen]
            final_ans, final_rat = h.answer, h.rationale
            sources = [pool[p] for p in subset_pids[h.subset]]
        budget_hit = (hyps[chosen].finish_reason if chosen >= 0 else synth_finish) == "length"
        if budget_hit:
            limit = tuning.max_tokens_hypothesis if chosen >= 0 else tuning.max_tokens_synthesis
            final_ans = trim_to_sentence(final_ans)
            warnings.append(f"the answer comes from a reply that used all of its {limit}-token budget, so it may "
                            "be cut short (CFTuning.max_tokens_hypothesis / max_tokens_synthesis)")
    decision = DecisionTrace(
        agreement=agr,
        agreement_measure="mean pairwise token F1 of normalised answers",
        threshold=s.agreement_threshold,
        kind=kind,
        chosen=chosen,
        synthesized_from=synth_from,
        synthesis_raw=synth_raw,
        final_answer=final_ans,
        final_rationale=final_rat,
        truncated=budget_hit,
    )

    # ---- trace
    evidence = []
    n_cf = len(queries) - 1
    for i, hit in enumerate(pool):
        col = S[:, i]
        evidence.append(EvidenceTrace(
            pool_id=i,
            hit=hit,
            retrieved_by=tuple(sorted(merged_by[i])) if rep[i] == i else retrieved_by[i],
            s_q=float(col[0]),
            s_q_raw=float(raw[0, i]),
            s_cf=tuple(float(v) for v in col[1:]),
            max_s_cf=float(col[1:].max()) if n_cf else None,
            argmax_cf=int(np.argmax(col[1:])) + 1 if n_cf else -1,
            relevance=float(relevance[i]),
            quality=float(quality[i]),
            status=status[i],
            duplicate_of=int(rep[i]) if rep[i] != i else -1,
            cluster=cluster_of.get(i, -1),
        ))
    clusters = tuple(
        ClusterTrace(c, tuple(p for p in kept_ids if cluster_of.get(p) == c)) for c in range(spec.k_used)
    )
    trace = CFTrace(
        query=query,
        seed=seed,
        settings=s,
        lam=s.lam,
        use_counterfactuals=s.use_counterfactuals,
        use_division=s.use_division,
        generator=generator.identity,
        embedder=embedder.identity,
        scorer=scorer.identity,
        scorer_is_substitute=bool(scorer.is_substitute),
        score_scale=scale,
        counterfactual_raw=cf_raw,
        counterfactuals=tuple(kept_cf),
        rejected_counterfactuals=tuple(rejected_cf),
        queries=tuple(queries),
        evidence=tuple(evidence),
        spectral=SpectralTrace(s.n_clusters, spec.k_used, sigma, spec.eigenvalues, spec.inertia,
                               used_division=s.use_division),
        clusters=clusters,
        subsets=tuple(SubsetTrace(j, sub.weights, tuple(subset_pids[j])) for j, sub in enumerate(subsets)),
        hypotheses=tuple(hyps),
        decision=decision,
        timings=tuple(clock.timings),
        warnings=tuple(warnings),
        generation=tuple(usage),
        evidence_budget=evidence_budget,
    )
    answer = Answer(
        text=final_ans,
        citations=citations_for(f"{final_ans}\n{final_rat}", sources),
        sources=tuple(sources),
        method=METHOD_NAME,
    )
    return CFResult(answer=answer, trace=trace)
