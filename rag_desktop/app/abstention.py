"""Whether a library holds an answer to a question, from its retrieval (core.abstain decides).

The service's answer paths ask this before the model is loaded (docs/architecture.md, "The question's
path"). A question asked in the other language of a mixed library shares few words with the documents
that answer it, so before abstaining on it the question is translated (one short model call, cached with
the cross-language search's) and answered if its translation finds support. Only a question about to
abstain pays for this; docs/evaluation.md ("Not in your documents") gives the cost.

A question the library's words let through is then judged from the passages the answer reads
(:func:`judge`): the answer's model is asked whether they hold the answer, in a prompt evaluation it
shares with the answer, before the answer ("abstain") or after it ("warn"; generation.judge_passages).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rag_desktop.app.crosslang import CrossLanguage, needs_translation
from rag_desktop.app.retrieval import Retriever
from rag_desktop.core.abstain import (
    JUDGE,
    Abstention,
    Support,
    after_answer,
    decide,
    judged,
    lifted,
    log_odds,
    question_lift,
)
from rag_desktop.core.cfrag.anchor import says_not_found
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.prompting import build_answer_messages, template_lang
from rag_desktop.core.protocols import PromptScorer, TokenScorer
from rag_desktop.core.types import CancelToken, ChatMessage, Hit, Lang, Level, RankedList

log = logging.getLogger(__name__)

# (question, its language, the language to translate into) → the translation, or a fallback
Translate = Callable[[str, Lang, Lang], CrossLanguage]


def support(r: Retriever, query: str, hits: Sequence[Hit], level: Level,
            query_vec: npt.NDArray[np.float32] | None = None) -> Support:
    """The share of ``query``'s search terms the library contains, the best cosine of ``hits``, and
    the question's mean cosine to the library's documents (q · μ_D; Retriever.score_means).
    ``query_vec``: the question's embedding when the caller has it (else it is embedded here)."""
    terms = set(r.query_term_list(query))
    index = r.keyword_index(level)
    qv = (r.embedder.embed_queries([query])[0] if query_vec is None else query_vec).astype(np.float64)
    qv /= max(float(np.linalg.norm(qv)), 1e-12)
    library_sim = float(qv @ r.score_means()[1])
    top = max((h.s_sim for h in hits), default=library_sim)
    return Support(len(terms), sum(1 for t in terms if t in index), top, library_sim)


def _pool(r: Retriever, query: str, level: Level) -> tuple[list[Hit], npt.NDArray[np.float32]]:
    """``query``'s candidate pool (Retriever.pool: no keyword sets needed) and its embedding."""
    qv = r.embedder.embed_queries([query])[0]
    hits, _ = r.pool(query, qv, level, r.settings.retrieval.k, r.settings.retrieval.theta)
    return hits, qv


def check(r: Retriever, query: str, ranked: RankedList | None, languages: Mapping[str, int],
          translate: Translate) -> Abstention:
    """core.abstain's decision for ``query`` over ``ranked`` (None: over its own candidate pool), with
    its translation checked before abstaining in a library that holds the other language
    (``languages``: documents per language)."""
    if ranked is None:
        level: Level = r.settings.retrieval.level
        hits, qv = _pool(r, query, level)
        first = decide(support(r, query, hits, level, qv))
    else:
        level = ranked.hits[0].level if ranked.hits else r.settings.retrieval.level
        first = decide(support(r, query, ranked.hits, level))
    lang = detect_lang(query)
    target = needs_translation(lang, languages)
    if not first.abstained or target is None:
        return first
    cross = translate(query, lang, target)
    if not cross.fused:
        return first
    other, other_vec = _pool(r, cross.translated, level)
    second = decide(support(r, cross.translated, other, level, other_vec))
    return dataclasses.replace(second if not second.abstained else first, translated=cross.translated)


def judge_messages(messages: Sequence[ChatMessage], lang: Lang) -> tuple[ChatMessage, ...]:
    """The answer prompt with JUDGE's question after the user's: the sources and the question as the
    answer reads them, so the two prompts share everything up to the question's end."""
    text = JUDGE[template_lang(lang)][0]
    last = messages[-1]
    return (*messages[:-1], ChatMessage(last.role, f"{last.content}\n\n{text}"))


def judge(gen: object, messages: Sequence[ChatMessage], sources: Sequence[Hit], lang: Lang, first: Abstention,
          cancel: CancelToken | None = None, *, after: bool = False) -> Abstention:
    """``first`` (answered by the library's words) with the model's judgement of the answer prompt
    ``messages`` and its ``sources``: abstained as "not_held" when the odds that they hold the answer
    are below core.abstain.MIN_JUDGED. Before the answer, the evaluation stays in the model's cache for
    the answer's stream; ``after`` it, it starts from the answer's cache. Either way the passages are
    read once.

    Unchanged, ``first``: when no source is in the question's language (a Chinese question over
    English passages: the 1.5B judged two of six such answerable questions "没有", docs/evaluation.md,
    "Not in your documents"; the answer's passage check skips them likewise, core.cfrag.anchor), and
    when the generator cannot score (a server without logprobs)."""
    if not isinstance(gen, TokenScorer) or not any(h.lang == lang for h in sources):
        return first
    _text, yes, no = JUDGE[template_lang(lang)]
    try:
        lp = gen.first_token_logprobs(judge_messages(messages, lang), [*yes, *no], cancel=cancel, keep=not after,
                                      after=after)
    except NotImplementedError as exc:
        log.info("the passages are not judged: %s", exc)
        return first
    return judged(first, log_odds(lp, len(yes)))


def relevance(gen: object, messages: Sequence[ChatMessage], question: str, sources: Sequence[Hit], lang: Lang,
              first: Abstention, cancel: CancelToken | None = None, *, answer_reserve: int = 0) -> Abstention:
    """``first`` (answered so far) with the question's lift (core.abstain.lifted): the question read
    after the answer prompt's passages (``messages``) against the same prompt with no passages.

    The prompt without passages is read first, from the fixed prefix's saved state, then the answer
    prompt in its pieces and the question in one more; the answer that follows reads on from the
    question's end (backends/llama_segments.py, ``PromptCache.scored``), so before the first token this
    costs the bare prompt's few tokens (docs/benchmarks.md §13). Unchanged ``first`` where the judgement
    is skipped too (no passage in the question's language: a Chinese question's likelihood after English
    passages is a translation's) and where the generator cannot score its prompt (a server)."""
    tail = question.strip()  # the prompts end with it (whitespace after it goes with it: tail_span)
    if not isinstance(gen, PromptScorer) or not tail or not any(h.lang == lang for h in sources):
        return first
    count = getattr(gen, "count_tokens", None)
    n_ctx = int(getattr(gen, "n_ctx", 0) or 0)
    if count is None or n_ctx <= 0:
        return first
    bare, _ = build_answer_messages(question, [], lang, count, n_ctx, answer_reserve)
    without = gen.tail_logprob(bare, tail, cancel=cancel)
    return lifted(first, question_lift(gen.tail_logprob(messages, tail, cancel=cancel), without))


def after(first: Abstention, doubted: Abstention | None, text: str, warnings: Sequence[str], lang: Lang,
          read: Sequence[Hit], pool: Sequence[Hit], languages: Mapping[str, int], cross_language: bool
          ) -> Abstention | None:
    """The verdict on a written answer (core.abstain.after_answer): "not in your documents" where the
    answer says so itself, or where the judgement (``doubted``) and the passage check (``warnings``'
    "unsupported") agree that nothing ``read`` holds it; else ``doubted``. Where the answer may stand in
    the library's other language, it names it (:func:`pointed`)."""
    verdict = after_answer(first, doubted, said_not_found=says_not_found(text), unsupported="unsupported" in warnings)
    return pointed(verdict, lang, read, pool, languages, cross_language) if verdict is not None and verdict.written \
        else verdict


def pointed(verdict: Abstention, lang: Lang, read: Sequence[Hit], pool: Sequence[Hit], languages: Mapping[str, int],
            cross_language: bool) -> Abstention:
    """``verdict`` naming the library's other language where the answer may stand: it was reached on
    passages all in the question's language (``read``), in a library that also holds the other one and
    has not searched it (``cross_language`` off: neither the setting nor a question asked across already,
    app.asked_across), and a document in the other language is near the question
    (:func:`other_language_near` over ``pool``, the ranked list read from)."""
    other = needs_translation(lang, languages)
    if verdict.abstained and other and not cross_language and all(h.lang == lang for h in read) \
            and other_language_near(pool, lang, verdict.support.library_sim):
        return dataclasses.replace(verdict, other_language=other)
    return verdict


def other_language_near(pool: Sequence[Hit], lang: Lang, library_sim: float) -> bool:
    """Whether a unit of ``pool`` in another language than ``lang`` is closer to the question than the
    library's average document is (its cosine ≥ ``library_sim``, cos(q, μ_D): Support.library_sim).

    Why: a question about a subject the library lacks is far from every document, in either language,
    and telling its asker to "ask it in Chinese" sends them on a second search for nothing; one whose
    answer stands in the other language's document has that document nearer than average, as the
    multilingual encoder places a translation. The cut is the library's own mean, not a tuned number.
    Measured without the model on the ranked lists of questions whose answer sources were all in their
    own language (docs/evaluation.md §5.4, "Where else to ask"): 13 of 15 questions answerable only in the
    other language keep the hint; of 126 questions about other subjects in a mixed library, 13 still get it."""
    return any(h.lang != lang and h.s_sim >= library_sim for h in pool)
