"""The ``"context"`` score variant's text: B(d) in its own sentences, A taken out (paper 000 Eq. 4, departed from).

``core.causal`` computes s_c from the caller's embedding of this text (``ContextRequest``); the text itself
is built here, with no encoder: which sentences hold B's terms, which words are deleted, and the cost bound.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy.typing as npt

from rag_desktop.core.chunking import CJK_SENTENCE_ENDS, CLOSERS, LATIN_SENTENCE_ENDS

# The longest text b_context returns, in characters: the cost bound of the "context" variant (one
# encoder pass over at most this much per candidate and new question; about one e5 window of
# Chinese, a quarter of one of English).
CONTEXT_MAX_CHARS = 512


@dataclass(frozen=True)
class ContextRequest:
    """What the ``"context"`` score variant needs embedded for one candidate.

    The variant departs from Eq. 4 only: instead of v_B = Σ_B λ_t E(t) / Σ_B λ_t over the
    isolated words, v_B = E(b_context(d)), the encoder's passage embedding of the sentences of d
    that hold a term of B(d), with every word of ``removed`` deleted — B in its own context, A
    taken out of it. Eq. 3 (the split) and Eq. 5 (s_c = cos(E(q), v_B)) are unchanged. Why: with
    an encoder whose isolated-word vectors share one direction (multilingual-e5: every term pair
    at cosine ~0.8–0.93, docs/evaluation.md §1.1) cos(E(q), E(t)) hardly depends on whether t is
    on the question's topic, so Eq. 4's centroid carries noise; a passage embedding carries the
    topic, and deleting A keeps the query's own words (which stuffing repeats) out of it.

    ``candidate`` indexes ``candidate_terms``; ``removed`` = A(d) ∪ K_q (Eq. 3's members and the
    query's own keywords, wherever they occur in the text); ``b_terms`` = B(d) as (term, λ_t),
    K_d order. The caller answers with one vector per request (any scale; cosines are taken), or
    None when the candidate has no text that holds a B term: its s_c is then undefined and the
    candidate counts as an empty B (the empty-B rule).
    """

    candidate: int
    removed: frozenset[str]
    b_terms: tuple[tuple[str, float], ...]


ContextEncoder = Callable[[Sequence[ContextRequest]], Sequence[npt.ArrayLike | None]]
# (start, end, word, key) of one word of a text, as ``JiebaTokenizer.word_spans`` reports it (jieba for
# Chinese runs, a word regex elsewhere): ``key`` is the word as keyword sets store it (the stem, for
# English in the improved variant). The one definition: the service hands these to the window
# (RagService.word_spans), which never imports the tokenizer.
WordSpan = tuple[int, int, str, str]

_SENTENCE_END = re.compile(
    rf"[{re.escape(CJK_SENTENCE_ENDS)}][{re.escape(CLOSERS)}]*"
    rf"|[{re.escape(LATIN_SENTENCE_ENDS)}][{re.escape(CLOSERS)}]*(?=\s)|\n"
)


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``: cut after 。！？； (and their closing quotes or
    brackets), after .!? followed by whitespace, and at line breaks; blank pieces are left out."""
    out: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if text[start : m.end()].strip():
            out.append((start, m.end()))
        start = m.end()
    if text[start:].strip():
        out.append((start, len(text)))
    return out


def b_context(
    text: str,
    spans: Sequence[WordSpan],
    removed: frozenset[str] | set[str],
    b_terms: Sequence[tuple[str, float]],
    max_chars: int = CONTEXT_MAX_CHARS,
) -> str:
    """The text whose embedding is v_B in the ``"context"`` variant (``ContextRequest``).

    The sentences of ``text`` that hold a term of B, each with its words whose key (or word) is in
    ``removed`` deleted and its whitespace collapsed; taken by the B weight they hold (the sum of
    λ_t over the distinct B terms in the sentence; ties: text order) while the total stays within
    ``max_chars`` (a first sentence longer than that is cut), repeated sentences once, then put
    back in text order, one per line. "" when no sentence holds a B term.
    """
    if max_chars < 1:
        raise ValueError(f"b_context: max_chars must be >= 1, got {max_chars}")
    weight = dict(b_terms)
    bounds = sentence_bounds(text)
    starts = [b[0] for b in bounds]
    words: list[list[WordSpan]] = [[] for _ in bounds]
    for span in spans:
        i = bisect.bisect_right(starts, span[0]) - 1
        if i >= 0 and span[1] <= bounds[i][1]:
            words[i].append(span)
    found: list[tuple[float, int, str]] = []
    for i, (s0, s1) in enumerate(bounds):
        held = {k if k in weight else w for _, _, w, k in words[i] if k in weight or w in weight}
        if not held:
            continue
        pieces: list[str] = []
        last = s0
        for a, b, w, k in sorted(words[i]):
            if k in removed or w in removed:
                pieces.append(text[last:a])
                last = b
        pieces.append(text[last:s1])
        masked = " ".join("".join(pieces).split())
        if masked:
            found.append((sum(weight[t] for t in held), i, masked))
    chosen: list[tuple[int, str]] = []
    seen: set[str] = set()
    used = 0
    for _, i, masked in sorted(found, key=lambda f: (-f[0], f[1])):
        if masked in seen:
            continue
        cost = len(masked) + (1 if chosen else 0)  # the line break that joins it
        if used + cost > max_chars:
            if chosen:
                continue
            masked = masked[:max_chars]
            cost = len(masked)
        chosen.append((i, masked))
        seen.add(masked)
        used += cost
    return "\n".join(m for _, m in sorted(chosen))


__all__ = ["CONTEXT_MAX_CHARS", "ContextEncoder", "ContextRequest", "WordSpan", "b_context", "sentence_bounds"]
