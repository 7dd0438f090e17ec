"""backends.llama_segments: where a prompt is cut, and what the next prompt keeps.

The context is a recording collaborator (it keeps token ids and the decode calls made, as
llama-cpp-python's ``Llama`` keeps ``input_ids``/``n_tokens``); the cut and keep logic is the real
one. The reference below says what reproducibility needs, slowly and plainly: a prompt's tokens are
decoded in the same pieces whatever ran before. The model-level check (same text for a seed after
another prompt) is in tests/test_llama_cpp_generator.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from rag_desktop.backends.llama_segments import PromptCache, cuts, prefix_cut
from rag_desktop.core.prompting import SOURCE_SEPARATOR, source_breaks
from rag_desktop.core.types import ChatMessage


def render(messages: Sequence[ChatMessage]) -> list[int]:
    """A chat template in miniature: one token per character, turns wrapped in markers, the
    generation prompt after the last turn (so the messages but the last end differently)."""
    text = "".join(f"<{m.role}>{m.content}</>" for m in messages) + "<assistant>"
    return [ord(c) for c in text]


class Context:
    """llama-cpp-python's Llama as PromptCache uses it: token ids, n_tokens, decode calls."""

    def __init__(self) -> None:
        self.input_ids: list[int] = [0] * 4096
        self.n_tokens = 0
        self.decoded: list[tuple[int, int]] = []  # (first position, tokens) of each eval
        self.states: list[Any] = []

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens: Sequence[int]) -> None:
        self.decoded.append((self.n_tokens, len(tokens)))
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)

    def save_state(self) -> Any:
        return (list(self.input_ids[: self.n_tokens]), self.n_tokens)

    def load_state(self, state: Any) -> bool:
        ids, self.n_tokens = state
        self.input_ids[: len(ids)] = ids
        return True


def new_cache() -> PromptCache:
    """The cache with the recording context's own state copies (the real ones call llama.cpp)."""
    return PromptCache(save=Context.save_state, load=Context.load_state)


PREFIX = (ChatMessage("system", "Answer from the sources."), ChatMessage("user", "Sources: [1] a. Question: b?"),
          ChatMessage("assistant", "a [1]."))


def prompt(sources: Sequence[str], question: str) -> tuple[ChatMessage, ...]:
    blocks = [f"[{i}] {s}" for i, s in enumerate(sources, start=1)]
    content = f"Sources:\n\n{SOURCE_SEPARATOR.join(blocks)}\n\nQuestion: {question}"
    return (*PREFIX, ChatMessage("user", content, source_breaks(content, blocks)))


def unit_cuts(messages: Sequence[ChatMessage], full: Sequence[int]) -> tuple[int, ...]:
    """Cut at every break: pieces of any length (the tiny prompts here are a few hundred characters)."""
    return cuts(render, messages, full, piece=1, min_piece=1)


def pieces(messages: Sequence[ChatMessage]) -> list[tuple[int, int]]:
    """Reference: the decode calls that read ``messages`` from a cleared cache, up to its last cut."""
    full = render(messages)
    at = unit_cuts(messages, full)
    out, start = [], 0
    for c in at:
        out.append((start, c - start))
        start = c
    return out


def read(cache: PromptCache, ctx: Context, messages: Sequence[ChatMessage]) -> int:
    full = render(messages)
    return cache.read(ctx, full, unit_cuts(messages, full), prefix_cut(render, messages, full))


def test_breaks_fall_on_each_source_after_the_first_and_on_the_question() -> None:
    msgs = prompt(["The museum opens at ten.", "It closes at six."], "When does it close?")
    content = msgs[-1].content
    assert [content[k:k + 4] for k in msgs[-1].breaks] == ["[2] ", "\n\nQu"]
    full = render(msgs)
    at = unit_cuts(msgs, full)
    text = "".join(map(chr, full))
    # the fixed prefix ends where the last turn starts; then the second source; then the question
    assert [text[c:c + 8] for c in at] == ["user>Sou", "[2] It c", "\n\nQuesti"]
    assert prefix_cut(render, msgs, full) == at[0]


def test_pieces_are_shortened_to_whole_multiples_and_short_ones_passed_over() -> None:
    long = ["The museum opens at ten in the morning on every day of the week but Monday. " * 3,
            "It closes at six.", "Tickets cost five euros for adults and two for children under twelve. " * 2]
    msgs = prompt(long, "When does it close?")
    full = render(msgs)
    head = prefix_cut(render, msgs, full)
    at = cuts(render, msgs, full, piece=32, min_piece=64)
    exact = unit_cuts(msgs, full)
    assert at[0] == head == exact[0]
    assert all((b - a) % 32 == 0 and b - a >= 64 for a, b in itertools.pairwise(at))
    # each cut is at or before a break, never after it, so a prompt sharing the sources up to a
    # break shares the cut too; "It closes at six." is too short a piece to cut after
    assert all(any(e - 32 < c <= e for e in exact) for c in at) and len(at) < len(exact)


def test_a_prompt_without_breaks_or_prefix_has_no_cut() -> None:
    one = [ChatMessage("user", "Explain photosynthesis.")]
    assert cuts(render, one, render(one)) == ()


def test_the_next_prompt_keeps_the_sources_it_shares_and_decodes_as_from_a_cleared_cache() -> None:
    cache, ctx = new_cache(), Context()
    first = prompt(["The museum opens at ten.", "It closes at six.", "Tickets cost five euros."], "When?")
    assert read(cache, ctx, first) == 0
    assert ctx.decoded == pieces(first)  # a cleared cache: every piece, the prefix one of them
    ctx.decoded.clear()
    second = prompt(["The museum opens at ten.", "It closes at six.", "The café is on the roof."], "When?")
    kept = read(cache, ctx, second)
    want = pieces(second)
    assert kept == want[3][0]  # the prefix and the first two sources stay
    assert ctx.decoded == want[3:]  # only what follows is read, in the pieces a cleared cache reads
    assert ctx.input_ids[: ctx.n_tokens] == render(second)[: want[-1][0] + want[-1][1]]


def test_a_prompt_cut_elsewhere_keeps_only_the_cuts_both_have() -> None:
    cache, ctx = new_cache(), Context()
    first = prompt(["The museum opens at ten.", "It closes at six."], "When?")
    read(cache, ctx, first)
    same_text = (*first[:-1], ChatMessage("user", first[-1].content))  # no breaks: read as one piece
    ctx.decoded.clear()
    kept = read(cache, ctx, same_text)
    assert kept == prefix_cut(render, same_text, render(same_text))  # the fixed prefix only
    assert ctx.decoded == pieces(same_text)[1:]


def test_a_forgotten_cache_keeps_nothing_but_the_saved_prefix_state() -> None:
    cache, ctx = new_cache(), Context()
    first = prompt(["The museum opens at ten."], "When?")
    read(cache, ctx, first)
    cache.forget()  # another use of the context (a scoring from a cleared cache)
    ctx.decoded.clear()
    kept = read(cache, ctx, first)
    assert kept == pieces(first)[1][0]  # loaded from the prefix's saved state, not kept from the cache
    assert ctx.decoded == pieces(first)[1:]


def test_keep_below_drops_the_cuts_past_what_stayed() -> None:
    cache = PromptCache()
    cache.cuts = (10, 20, 30)
    cache.keep_below(25)
    assert cache.cuts == (10, 20)
    cache.keep_below(0)
    assert cache.cuts == ()


def test_a_prompt_read_over_by_a_shorter_one_is_set_aside_and_loaded_back() -> None:
    """The question read ahead while it is typed, then the lift's bare prompt (the fixed prefix and the
    question), then the answer prompt: it loads the sources read ahead instead of reading them again, and
    reads the rest in the pieces a cleared cache reads."""
    cache, ctx = PromptCache(save=Context.save_state, load=Context.load_state, spare_min=1), Context()
    answer = prompt(["The museum opens at ten.", "It closes at six.", "Tickets cost five euros."], "When?")
    read(cache, ctx, answer)
    ahead = unit_cuts(answer, render(answer))
    bare = prompt([], "When?")
    kept = read(cache, ctx, bare)
    assert kept == prefix_cut(render, bare, render(bare)) and cache.spare is not None  # the sources set aside
    ctx.decoded.clear()
    assert read(cache, ctx, answer) == ahead[-1]  # loaded back: nothing before the last cut is read again
    assert ctx.decoded == []
    assert ctx.input_ids[: ctx.n_tokens] == render(answer)[: ahead[-1]]
    # a prompt sharing only the first source with it loads that much back, and reads on in its own pieces
    ctx.decoded.clear()
    read(cache, ctx, bare)
    other = prompt(["The museum opens at ten.", "The café is on the roof."], "When?")
    kept = read(cache, ctx, other)
    want = pieces(other)
    assert kept == want[2][0] and ctx.decoded == want[2:]


def test_a_refused_load_back_reads_the_prompt_from_its_prefix() -> None:
    refused: list[int] = []

    def load(ctx: Context, state: Any) -> bool:
        if state[1] > 100:  # the set-aside prompt's cells: llama.cpp refuses them
            refused.append(state[1])
            ctx.n_tokens = 0
            return False
        return Context.load_state(ctx, state)

    cache, ctx = PromptCache(save=Context.save_state, load=load, spare_min=1), Context()
    answer = prompt(["The museum opens at ten.", "It closes at six."], "When?")
    read(cache, ctx, answer)
    read(cache, ctx, prompt([], "When?"))
    ctx.decoded.clear()
    assert read(cache, ctx, answer) == pieces(answer)[1][0]  # the fixed prefix's state, nothing else
    assert refused and cache.spare is None and ctx.decoded == pieces(answer)[1:]


def test_only_a_prompt_a_whole_piece_longer_is_set_aside() -> None:
    """With the default threshold (a piece, ``MIN_PIECE`` tokens): a prompt that keeps nearly all of the cache
    does not copy it; one that keeps a piece less does."""
    cache, ctx = PromptCache(save=Context.save_state, load=Context.load_state), Context()
    long = "The museum opens at ten in the morning on every day of the week but Monday. " * 4  # ~300 tokens
    answer = prompt([long, long + "It closes at six."], "When?")
    read(cache, ctx, answer)
    read(cache, ctx, prompt([long, long + "It closes at six."], "When then?"))  # the question differs
    assert cache.spare is None
    read(cache, ctx, prompt([long, long + "It closes at six!"], "When?"))  # a piece, the last source, differs
    assert cache.spare is not None
    cache.spare = None
    read(cache, ctx, prompt([], "When?"))
    assert cache.spare is not None
