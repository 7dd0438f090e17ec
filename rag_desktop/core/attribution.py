"""Citations added after generation, for sentences the model left uncited (issue 12).

The app's prompt asks for a ``[n]`` after every sentence, and the embedded models often write the
right fact without one (measured on the demo set: the 1.5B cited in 2 of its first 3 answers, the
0.5B in none of the Chinese ones), which leaves the person without the paragraph that holds it.
So, after the answer is written, each uncited sentence is matched to the source passage that holds
most of its words, and that passage's number is added — marked as *matched*, never passed off as
the model's own citation (``Attributed.added``; the UI words them differently).

The match, chosen for being checkable rather than clever (post-hoc attribution by lexical overlap,
as in the "attribute after generation" line of work; no model call, so it costs microseconds):

    share(s, P) = |T(s) ∩ T(P)| / |T(s)|,   T(x) = content tokens of x (answer tokens: lower-cased
                                              words, single CJK characters and digits, minus stopwords
                                              and minus the question's own tokens)

A sentence gets source argmax_P share(s, P) when that share is at least ``MIN_SHARE`` and at least
``MIN_TOKENS`` tokens match; ties go to the lower number. Clauses of one sentence (ending in ；/,)
held by the same source get one marker, after the last of them. The question's tokens are removed because
every retrieved passage repeats them: they would make any passage "hold" the sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from rag_desktop.core.citations import citation_items, citation_spans
from rag_desktop.core.keywords import load_stopwords
from rag_desktop.core.prompting import split_sentences
from rag_desktop.core.text import answer_tokens, is_cjk

MIN_SHARE = 0.5  # half of a sentence's own words must stand in the passage
MIN_TOKENS = 2  # and at least two of them: one shared word is coincidence
# Closing punctuation a marker goes before ("…八天 [2]。", "… paid leave [2]."), as the prompts' examples.
_CLOSERS = "。．.！!？?；;…\u3002"


@dataclass(frozen=True)
class Attributed:
    """The answer text with the added markers, and where their numbers stand in it: (start, end, n),
    as :func:`~rag_desktop.core.citations.citation_spans` gives them."""

    text: str
    added: tuple[tuple[int, int, int], ...] = ()


@cache
def _stop() -> frozenset[str]:
    zh_single = {w for w in load_stopwords("zh") if len(w) == 1}
    return load_stopwords("en") | frozenset(zh_single)


def content_tokens(text: str, exclude: frozenset[str] = frozenset()) -> set[str]:
    """T(x): the distinct answer tokens of ``text`` that carry content."""
    stop = _stop()
    # single characters are noise, except CJK ones (each is a token) and digits (600, 2年: the
    # figures are what a sentence most needs a source for)
    return {t for t in answer_tokens(text)
            if t not in stop and t not in exclude and (len(t) > 1 or is_cjk(t) or t.isdigit())}


def best_source(sentence: str, sources: Sequence[str], exclude: frozenset[str] = frozenset()) -> int | None:
    """The 1-based number of the source holding most of ``sentence``'s words, or None (module doc)."""
    return _best(content_tokens(sentence, exclude), [content_tokens(src) for src in sources])


def _best(words: set[str], source_tokens: Sequence[set[str]]) -> int | None:
    """best_source over token sets already computed (attribute tokenises each source once)."""
    if len(words) < MIN_TOKENS:
        return None
    best, best_share = None, 0.0
    for i, src in enumerate(source_tokens, start=1):
        held = len(words & src)
        share = held / len(words)
        if held >= MIN_TOKENS and share >= MIN_SHARE and share > best_share:
            best, best_share = i, share
    return best


_CLAUSE_ENDS = "；;：:，,、"


def attribute(text: str, sources: Sequence[str], question: str = "") -> Attributed:
    """Add ``[n]`` to each sentence of ``text`` that cites nothing and is held by source n."""
    exclude = frozenset(content_tokens(question))
    pieces = split_sentences(text)
    source_tokens = [content_tokens(src) for src in sources]
    ns = [None if citation_items(p) or not p.strip() else _best(content_tokens(p.rstrip(), exclude), source_tokens)
          for p in pieces]
    out: list[str] = []
    added: list[tuple[int, int, int]] = []
    pos = 0
    for i, piece in enumerate(pieces):
        body = piece.rstrip()
        trail = piece[len(body):]
        n = ns[i]
        if n is not None and i + 1 < len(pieces) and ns[i + 1] == n and body[-1:] in _CLAUSE_ENDS:
            n = None  # clauses held by the same source: the last of the run carries the one marker
        if n is None:
            out.append(piece)
            pos += len(piece)
            continue
        cut = len(body)
        while cut > 0 and body[cut - 1] in _CLOSERS:
            cut -= 1
        head, closer = body[:cut], body[cut:]
        marker = f" [{n}]" if head and not is_cjk(head[-1]) else f"[{n}]"
        start = pos + len(head) + (1 if marker.startswith(" ") else 0)
        new = head + marker + closer + trail
        added.append((start, start + len(marker.strip()), n))
        out.append(new)
        pos += len(new)
    final = "".join(out)
    # Recorded as citations.citation_spans records them (the number inside the brackets), so the
    # UI can tell a matched marker from the model's by the same span.
    spans = tuple((a, b, n) for a, b, n in citation_spans(final)
                  if any(ms <= a < me for ms, me, _ in added))
    return Attributed(final, spans)


def echoes_example(answer: str, example: str, sources: Sequence[str]) -> bool:
    """Whether ``answer`` repeats the prompt's worked example instead of answering from ``sources``.

    Seen on the demo (1.5B, 中医如何治疗久咳): "根据《第六章 咳嗽》第十二条，员工每年享有十五天带薪年假，
    非全日制员工八天 [2]" — the example's answer with the real title pasted in. True when at least
    ``MIN_SHARE`` of the answer's content tokens stand in the example's answer and in none of the
    sources (and at least ``MIN_TOKENS`` do).
    """
    words = content_tokens(answer)
    if not words or not example:
        return False
    in_sources: set[str] = set()
    for src in sources:
        in_sources |= content_tokens(src)
    echoed = (words & content_tokens(example)) - in_sources
    return len(echoed) >= MIN_TOKENS and len(echoed) / len(words) >= MIN_SHARE


__all__ = ["MIN_SHARE", "MIN_TOKENS", "Attributed", "attribute", "best_source", "content_tokens", "echoes_example"]
