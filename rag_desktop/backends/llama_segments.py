"""A prompt read in pieces, so that the next prompt keeps what this one read (docs/architecture.md,
"The question's path").

Owned by :class:`rag_desktop.backends.llama_cpp_generator.LlamaCppGenerator`. An answer prompt is a
fixed prefix (the system message and the worked example), then the sources one by one, then the
question. Two prompts of one question often start alike: the second answer column's reads the same
first sources when the two rankings agree at the top, and "which sources the answer needs" asks
again without one cited source, so every source before it is the same. Prefill is most of what a
person waits for on a CPU (docs/benchmarks.md §9), so what one prompt read is worth keeping.

llama.cpp's numbers depend on how a prompt is split into decode calls, though: the key/value rows
of a token decoded in a batch of 130 are not bit for bit those of the same token in a batch of 512,
and a seed must give one text whatever was asked before (the generator's module doc, "Seeded
sampling"). So every prompt is read in the same pieces, cut at points that depend on its messages
alone — the end of the fixed prefix, then each of the last message's ``ChatMessage.breaks`` (each
source after the first, the question) — and a prompt keeps the cache only up to a cut that both it
and the prompt before have, with the same cuts before it, inside the tokens the two share. The
rest of the prompt after its last cut is read by ``create_chat_completion``, as before.

The saved state after a fixed prefix (``states``) serves the first prompt of a kind: a cleared
cache loads it instead of reading the prefix again (the window evaluates them at launch,
``RagService.prepare_generator``). It is the prefix's key/value cells alone (``llama_state_seq_*``,
:class:`SeqState`): ``Llama.save_state`` also copies a row of logits per token, 123 MB for the 1.5B's
212-token prefix against 5.8 MB of cells (docs/benchmarks.md §12).

A prompt read ahead while the question is typed (app.read_ahead) would be read over by the question's
own first prompt, the lift's bare one (app.abstention.relevance). So a prompt about to be read over by
one that keeps at least a piece less of it is set aside first (``spare``: its cells copied, ~28 KB a
token on the 1.5B), and a later prompt that shares more with it than with the cache loads it back.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rag_desktop.backends.llama_batch import longest_common_prefix
from rag_desktop.core.types import ChatMessage

Render = Callable[[Sequence[ChatMessage]], list[int]]  # messages -> the prompt's tokens

MIN_PREFIX = 16  # a fixed prefix shorter than this is not worth a saved state
# llama.cpp's CPU matrix kernels read a batch of tokens fastest when it is a multiple of 32 long: measured
# on the embedded 1.5B, 2 threads, 1,100 tokens read in pieces of 128 (or 96, 160, 192) at the speed of one
# piece and in pieces of 130–136 10–15 % slower (docs/benchmarks.md §12). Pieces under 64 tokens cost more.
PIECE = 32
MIN_PIECE = 256
MAX_STATES = 4  # prefix states kept: the answer prompts of two languages, a translation, a rewrite
# A prompt set aside (PromptCache.spare) is copied only up to this many tokens: its cells are ~28 KB a token on
# the embedded 1.5B (~150 KB on Qwen3-4B: ~300 MB at the cap), and the answer prompts it is for are ~600–1,600.
MAX_SPARE = 2048


def prefix_cut(render: Render, messages: Sequence[ChatMessage], full: Sequence[int]) -> int:
    """Where ``full`` (``messages`` rendered) leaves its fixed prefix: the tokens it shares with the
    messages before the last one; 0 when that is too short to keep or leaves nothing to read."""
    if len(messages) < 2:
        return 0
    n = longest_common_prefix([list(full), render(messages[:-1])])
    return n if MIN_PREFIX <= n < len(full) - 1 else 0


def cuts(render: Render, messages: Sequence[ChatMessage], full: Sequence[int], *, head: int | None = None,
         piece: int = PIECE, min_piece: int = MIN_PIECE) -> tuple[int, ...]:
    """The token positions ``full`` is read in pieces at: its fixed prefix's end, then at or before each
    break of the last message. A break's position is where the prompt rendered with the last message
    cut there stops agreeing with ``full`` (a token spanning the break goes with what follows it); the
    piece up to it is then shortened to a multiple of ``piece`` tokens (its last tokens join the next
    piece), and a break that would leave a piece under ``min_piece`` is passed over. ``head``: the
    :func:`prefix_cut` when the caller has it already (a rendering less)."""
    if not messages:
        return ()
    if head is None:
        head = prefix_cut(render, messages, full)
    last = messages[-1]
    found = []
    for k in last.breaks:
        cut = dataclasses.replace(last, content=last.content[:k], breaks=())
        found.append(longest_common_prefix([list(full), render([*messages[:-1], cut])]))
    out = [head] if head else []
    for c in sorted(found):
        prev = out[-1] if out else 0
        at = prev + (c - prev) // piece * piece
        if at - prev >= min_piece and at < len(full) - 1:
            out.append(at)
    return tuple(out)


@dataclass(frozen=True)
class SeqState:
    """The key/value cells of a context's sequence 0 (``llama_state_seq_get_data``) and its tokens."""

    data: bytes
    tokens: tuple[int, ...]


def save_seq(llm: Any) -> SeqState:
    """What ``llm``'s cache holds, without the logits ``Llama.save_state`` copies too."""
    from llama_cpp import llama_cpp as lc

    size = lc.llama_state_seq_get_size(llm.ctx, 0)
    buf = (ctypes.c_uint8 * size)()
    got = lc.llama_state_seq_get_data(llm.ctx, buf, size, 0)
    return SeqState(ctypes.string_at(buf, got), tuple(int(t) for t in llm.input_ids[: llm.n_tokens]))


def load_seq(llm: Any, state: SeqState) -> bool:
    """``state`` into ``llm``'s cleared cache, its tokens as the ones read; False when llama.cpp refuses it
    (the cache is then empty)."""
    from llama_cpp import llama_cpp as lc

    llm.reset()
    llm.eval([])  # drops every cell: eval() first removes what lies past n_tokens
    buf = (ctypes.c_uint8 * len(state.data)).from_buffer_copy(state.data)
    if not lc.llama_state_seq_set_data(llm.ctx, buf, len(state.data), 0):
        return False
    llm.input_ids[: len(state.tokens)] = state.tokens
    llm.n_tokens = len(state.tokens)
    return True


def _same_before(a: Sequence[int], b: Sequence[int], cut: int) -> bool:
    return [c for c in a if c <= cut] == [c for c in b if c <= cut]


class PromptCache:
    """What a llama.cpp context holds for the next prompt: the cuts its tokens were read at, and the
    saved state after each fixed prefix. Anything else that uses the context calls :meth:`forget`
    (or :meth:`keep_below` when it kept the tokens up to a point)."""

    def __init__(self, save: Callable[[Any], Any] = save_seq, load: Callable[[Any, Any], bool] = load_seq, *,
                 spare_min: int = MIN_PIECE) -> None:
        self.states: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.cuts: tuple[int, ...] = ()
        # The cache also holds the prompt up to here, read in one piece after its last cut by score_tail (0:
        # nothing past the cuts): the prompt's own stream, next, keeps it (:meth:`read`).
        self.scored = 0
        # The last prompt read over by one that kept less of it: its tokens, cuts and saved cells (:meth:`read`).
        self.spare: tuple[tuple[int, ...], tuple[int, ...], Any] | None = None
        self._save, self._load = save, load
        self.spare_min = spare_min  # tokens a prompt must keep more of to be set aside or loaded back

    def clear(self) -> None:
        self.states.clear()
        self.cuts, self.scored, self.spare = (), 0, None

    def forget(self) -> None:
        self.cuts, self.scored = (), 0

    def keep_below(self, n: int) -> None:
        self.cuts = tuple(c for c in self.cuts if c <= n)
        self.scored = self.scored if self.scored <= n else 0

    def prefix(self, llm: Any, full: Sequence[int], cut: int) -> int:
        """From a cleared cache, ``full``'s first ``cut`` tokens: loaded from their saved state, or read
        and saved. Returns the tokens loaded (0 when read here)."""
        llm.reset()
        self.cuts, self.scored = (), 0
        if cut <= 0:
            return 0
        key = tuple(full[:cut])
        state = self.states.get(key)
        if state is not None and self._load(llm, state):
            self.states.move_to_end(key)
            self.cuts = (cut,)
            return cut
        llm.eval(list(key))
        self.states[key] = self._save(llm)
        while len(self.states) > MAX_STATES:
            self.states.popitem(last=False)
        self.cuts = (cut,)
        return 0

    def read(self, llm: Any, full: Sequence[int], at: Sequence[int], prefix: int) -> int:
        """``full``'s tokens up to its last cut in ``llm``'s cache, read in pieces at ``at`` (its
        :func:`cuts`; ``prefix`` is the first when the prompt has a fixed prefix, else 0), keeping what
        the cache holds up to the longest cut both prompts share. Returns the tokens kept or loaded."""
        shared = longest_common_prefix([list(llm.input_ids[: llm.n_tokens]), list(full)])
        if self.scored and shared >= self.scored and tuple(at) == self.cuts:
            # the same prompt's end scored just before, after the same pieces: it reads on from there, and
            # every stream after a score of its prompt is read so (the relevance check comes first each time)
            llm.reset()
            llm.n_tokens = self.scored
            return self.scored
        self.scored = 0
        keep = _keepable(self.cuts, shared, at)
        if self.spare is not None:
            spare_ids, spare_cuts, state = self.spare
            back = _keepable(spare_cuts, longest_common_prefix([list(spare_ids), list(full)]), at)
            if back - keep >= self.spare_min:
                if self._load(llm, state):
                    llm.reset()
                    llm.n_tokens = back  # the cells past it are dropped by the next eval()
                    self.cuts = tuple(c for c in at if c <= back)
                    return self._read_from(llm, full, at, back)
                self.cuts, keep, self.spare = (), 0, None  # a refused load leaves the cache empty
        if self.cuts and self.cuts[-1] - keep >= self.spare_min and llm.n_tokens <= MAX_SPARE:
            self.spare = (tuple(llm.input_ids[: llm.n_tokens]), self.cuts, self._save(llm))
        if keep:
            llm.reset()  # n_tokens only: the cache up to ``keep`` stays, eval() drops what follows
            llm.n_tokens = keep
            self.cuts = tuple(c for c in at if c <= keep)
            reused = keep
        else:
            reused = self.prefix(llm, full, prefix)
        return self._read_from(llm, full, at, reused)

    def _read_from(self, llm: Any, full: Sequence[int], at: Sequence[int], reused: int) -> int:
        for c in at:
            start = self.cuts[-1] if self.cuts else 0
            if c > start:
                llm.eval(list(full[start:c]))
                self.cuts = (*self.cuts, c)  # piece by piece: a stop keeps what was read whole
        return reused


def _keepable(held: Sequence[int], shared: int, at: Sequence[int]) -> int:
    """The longest of ``at`` that a cache read in pieces at ``held`` keeps for a prompt sharing its first
    ``shared`` tokens: a cut both have, inside what they share, with the same cuts before it (0: none)."""
    return max((c for c in at if c <= shared and c in held and _same_before(held, at, c)), default=0)


def tail_span(llm: Any, render: Render, messages: Sequence[ChatMessage], full: Sequence[int], tail: str
              ) -> tuple[int, int]:
    """Where the tokens of ``tail``, the end of the last message's text, stand in ``full`` (``messages``
    rendered): from where the prompt rendered without it stops agreeing with ``full`` (a token spanning the
    seam goes with the tail) to the template's next control token (the end of the turn). A model that
    appends to the last message (Qwen3's "/no_think") has that in the span too."""
    last = messages[-1]
    text = last.content.rstrip()  # whitespace after the tail goes with it
    if not tail or not text.endswith(tail):
        raise ValueError(f"the last message does not end with {tail[:40]!r}")
    cut = dataclasses.replace(last, content=text[: len(text) - len(tail)], breaks=())
    start = max(1, longest_common_prefix([list(full), render([*messages[:-1], cut])]))
    end = next((i for i in range(start, len(full)) if not llm.detokenize([full[i]], special=False)), len(full))
    return start, end


def log_softmax_at(logits_ptr: Any, n_vocab: int, ids: Sequence[int]) -> list[float]:
    """log softmax of the logits row at ``logits_ptr`` (llama_get_logits_ith), read at ``ids``."""
    import numpy as np

    logits = np.ctypeslib.as_array(logits_ptr, shape=(n_vocab,)).astype(np.float64)
    top = float(logits.max())
    log_z = top + float(np.log(np.exp(logits - top).sum()))
    return [float(logits[i]) - log_z for i in ids]


def read_scored(llm: Any, full: Sequence[int], start: int, end: int) -> list[float]:
    """``full`` up to ``end`` in ``llm``'s cache, after the ``llm.n_tokens`` it holds (at most ``start − 1``),
    and log P(full[i] | full[:i]) for each i in [start, end): the rest is decoded in batches of n_batch with
    logits at the rows that predict those tokens (the batch's last row has them anyway)."""
    from llama_cpp import llama_cpp as lc

    n0 = llm.n_tokens
    if not 0 < start <= end or n0 > start - 1:
        raise ValueError(f"cannot score tokens {start}..{end} after {n0} read")
    llm._ctx.kv_cache_seq_rm(-1, n0, -1)  # as Llama.eval: cells past what is read go
    n_vocab, out = int(llm.n_vocab()), []
    for i in range(n0, end, llm.n_batch):
        chunk = [int(t) for t in full[i: min(end, i + llm.n_batch)]]
        llm._batch.set_batch(batch=chunk, n_past=i, logits_all=False)
        wanted = [j for j in range(len(chunk)) if start - 1 <= i + j < end - 1]
        for j in wanted:
            llm._batch.batch.logits[j] = True
        llm._ctx.decode(llm._batch)  # raises RuntimeError("llama_decode returned …") on a failure or an abort
        llm.input_ids[i: i + len(chunk)] = chunk
        llm.n_tokens = i + len(chunk)
        out += [log_softmax_at(lc.llama_get_logits_ith(llm.ctx, j), n_vocab, [full[i + j + 1]])[0] for j in wanted]
    return out


def score_tail(llm: Any, cache: PromptCache | None, render: Render, messages: Sequence[ChatMessage],
               full: Sequence[int], head: int, tail: str) -> list[float]:
    """log P of each token of ``tail`` (:func:`tail_span`) given the prompt before it. With ``cache``, what
    comes before is read in ``messages``' pieces (:meth:`PromptCache.read`: what the last prompt read is
    kept, and the next prompt keeps what this one read), the rest up to the tail's end in one more piece,
    which the same prompt's stream keeps too (``PromptCache.scored``); without, from a cleared cache."""
    start, end = tail_span(llm, render, messages, full, tail)
    if start >= end:
        return []
    if cache is None:
        llm.reset()
    else:
        at = [c for c in cuts(render, messages, full, head=head) if c < start]
        cache.scored = 0  # read up to the pieces' end, whatever was scored before
        cache.read(llm, full, at, head if 0 < head < start else 0)
    out = read_scored(llm, full, start, end)
    if cache is not None:
        cache.scored = end
    return out
