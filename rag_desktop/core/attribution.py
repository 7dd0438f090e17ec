"""Citations added after generation, for sentences the model left uncited.

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

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from rag_desktop.core.citations import CITATION_RE, citation_items, citation_spans, marker_items, strip_citations
from rag_desktop.core.keywords import load_stopwords
from rag_desktop.core.prompting import split_sentences
from rag_desktop.core.text import answer_tokens, is_cjk

MIN_SHARE = 0.5  # half of a sentence's own words must stand in the passage
MIN_TOKENS = 2  # and at least two of them: one shared word is coincidence
# Closing punctuation a marker goes before ("…八天 [2]。", "… paid leave [2]."), as the prompts' examples.
_CLOSERS = "。．.！!？?；;…\u3002"


_OPENS, _SHUTS = "(（", ")）"


def answer_sentences(text: str) -> list[str]:
    """:func:`~rag_desktop.core.prompting.split_sentences` of an answer, except that a sentence does not
    end inside a parenthesis: a model names where its answer stands as "(Chapter 7. Reasoning with
    Conditionals, §7.3.1, p. 142)", and the full stops of "7." and "p." there end no sentence (split
    there, each piece got a marker of its own: "(Chapter 7 [1]. Reasoning …, p [1]. 142) [1]"). A line
    break ends one whatever is open, so an unclosed "(" holds at most the rest of its line.
    ``"".join(result) == text``."""
    out: list[str] = []
    depth = 0
    for piece in split_sentences(text):
        if out and depth > 0:
            out[-1] += piece
        else:
            out.append(piece)
        depth = 0 if piece.endswith("\n") else max(0, depth + sum(piece.count(c) for c in _OPENS)
                                                     - sum(piece.count(c) for c in _SHUTS))
    return out


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


# A marker the model put after its sentence's full stop ("合住一间。[1]", "It is valid. [1]"): the
# sentence splitter gives it to the next piece, so its own sentence looked uncited and was matched a
# second marker ("一间[1]。[1]"). It belongs to the sentence before the stop.
_MARKS_AFTER_STOP = re.compile(rf"([{re.escape(_CLOSERS)}]+)[ \t]*((?:{CITATION_RE.pattern}[ \t]*)+)")


def markers_inside(text: str) -> str:
    """Each run of ``[n]`` markers that follows a sentence's closing punctuation moved before it."""
    def move(m: re.Match[str]) -> str:
        before = text[m.start() - 1] if m.start() else ""
        marks = " ".join(m.group(2).split())
        rest = m.group(2)[len(m.group(2).rstrip()):]
        return ("" if not before or is_cjk(before) else " ") + marks + m.group(1) + (rest or "")
    return _MARKS_AFTER_STOP.sub(move, text)


def attribute(text: str, sources: Sequence[str], question: str = "") -> Attributed:
    """Add ``[n]`` to each sentence of ``text`` that cites nothing and is held by source n."""
    text = markers_inside(text)
    exclude = frozenset(content_tokens(question))
    pieces = answer_sentences(text)
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


# A model's own [n] is kept when passage n holds at least this share of the sentence's content
# tokens (the question's left out). Lower than MIN_SHARE, which *adds* a marker: a model paraphrases
# the passage it read, and a check that drops a right citation costs more than one that keeps a
# weak one. Chosen, not tuned: a quarter of the words is where a paraphrase of a 1–2 sentence
# passage still shares its names and figures; below it the sentence is about something else.
CHECK_SHARE = 0.25
_SPACE_BEFORE_STOP = re.compile(r"\s+([.。,，!?！？;；:：])")


@dataclass(frozen=True)
class Checked:
    """The answer with unsupported and repeated markers taken out, and what was taken out: each
    dropped citation's number and the sentence it ended (for the UI and ``answer --json``)."""

    text: str
    dropped: tuple[tuple[int, str], ...] = ()
    repeats: int = 0


_DIGITS = re.compile(r"\d+")


def _figures(tokens: set[str]) -> set[str]:
    """The digit runs of ``tokens`` ("783°c" → "783"): a figure glued to its unit or not."""
    return {d for t in tokens for d in _DIGITS.findall(t)}


def _unsupported(sentence: str, n: int, source_tokens: Sequence[set[str]], exclude: frozenset[str]) -> bool:
    """Whether passage n does not hold ``sentence``. A sentence with fewer than MIN_TOKENS content
    tokens of its own (the question's left out) is judged by its figures alone: a lone figure is the
    claim ("The boiling point of ethanol is 78.3°C [2]", asked of a library without it), and it either
    stands in the passage or not; without a figure it cannot be judged and is kept."""
    if not 1 <= n <= len(source_tokens):
        return False  # a number that names no source: parse_citations flags it as invalid
    words = content_tokens(sentence, exclude)
    if len(words) < MIN_TOKENS:
        figures = _figures(words)
        return bool(figures) and not figures <= _figures(source_tokens[n - 1])
    return len(words & source_tokens[n - 1]) / len(words) < CHECK_SHARE


def check_citations(text: str, sources: Sequence[str], question: str = "") -> Checked:
    """Each ``[n]`` kept only where passage n holds the sentence it ends (CHECK_SHARE), a number
    repeated within one sentence kept once, and a marker-only piece that repeats the sentence before
    it ("…一间[1]。 [1]") removed. No model call: lexical support, like :func:`attribute`, which can
    then give a sentence whose marker went the passage that does hold it (marked as matched)."""
    text = markers_inside(text)
    exclude = frozenset(content_tokens(question))
    source_tokens = [content_tokens(src) for src in sources]
    out: list[str] = []
    dropped: list[tuple[int, str]] = []
    repeats = 0
    previous: set[int] = set()
    for piece in answer_sentences(text):
        items = citation_items(piece)
        bare = _SPACE_BEFORE_STOP.sub(r"\1", strip_citations(piece))
        if items and not content_tokens(bare):  # markers only: a repeat of the sentence before, or kept
            if {n for it in items for n in it.numbers} <= previous:
                repeats += 1
                continue
            out.append(piece)
            continue
        seen: set[int] = set()
        pieces: list[str] = []
        pos = 0
        for m in CITATION_RE.finditer(piece):
            keep: list[str] = []
            for it, nums in marker_items(m.group(1)):
                if nums[0] in seen:
                    repeats += 1
                    continue
                if len(nums) == 1 and _unsupported(bare, nums[0], source_tokens, exclude):
                    dropped.append((nums[0], bare.strip()))
                    continue
                seen.update(nums)
                keep.append(it)
            left = piece[pos:m.start()]
            if keep:
                pieces.append(left + m.group(0)[0] + ", ".join(keep) + m.group(0)[-1])
            else:  # the whole marker goes, with the space before it
                pieces.append(left.rstrip(" ") if left.endswith(" ") else left)
            pos = m.end()
        pieces.append(piece[pos:])
        out.append("".join(pieces))
        previous = seen
    return Checked("".join(out).rstrip() if repeats else "".join(out), tuple(dropped), repeats)


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


__all__ = ["CHECK_SHARE", "MIN_SHARE", "MIN_TOKENS", "Attributed", "Checked", "attribute", "best_source",
           "check_citations", "content_tokens", "echoes_example"]
