"""Whether a library holds an answer to a question, from its retrieval (core.abstain decides).

The service's answer paths ask this before the model is loaded (docs/architecture.md, "The question's
path"). A question asked in the other language of a mixed library shares few words with the documents
that answer it, so before abstaining on it the question is translated (one short model call, cached with
the cross-language search's) and answered if its translation finds support. Only a question about to
abstain pays for this; docs/evaluation.md ("Not in your documents") gives the cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rag_desktop.app.crosslang import CrossLanguage, needs_translation
from rag_desktop.app.retrieval import Retriever
from rag_desktop.core.abstain import Abstention, Support, decide
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.types import Hit, Lang, Level, RankedList

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
