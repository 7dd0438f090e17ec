"""Batched decoding for ``LlamaCppGenerator.generate_many``: several requests per ``llama_decode``.

:class:`BatchDecoder` is owned by a
:class:`rag_desktop.backends.llama_cpp_generator.LlamaCppGenerator`, which loads the model,
renders the prompts and guards every call into llama.cpp; the decoder owns what only
batched decoding uses — a second llama.cpp context, its ``llama_batch``, the shared
prefix kept in seq 0, one sampler chain per request — and the stats of the last call.

Independent requests are llama.cpp sequences of one batch context (a unified KV cache of
n_ctx cells, created on first use), each with its own sampler chain and seed; their common
token prefix is evaluated once and shared with ``llama_memory_seq_cp``.

**Flash attention is on** in both contexts (the generator's ``Llama`` and this one):
measured with SmolLM2 and Qwen2.5-0.5B, without it llama.cpp's CPU attention gives a token
different logits depending on how the batch around it is laid out (up to 0.9 on logits of
~33 between a prompt evaluated in one batch and token by token, so greedy answers differed
after a few tokens); with it the logits of a sequence decoded among others are
bit-identical to those of the sequence decoded alone, which is what makes batched and
one-at-a-time results equal for requests that share their prefix and differ in short
suffixes (tested, greedy and seeded). It is not a general guarantee — two more layout
effects remain, measured: (1) llama.cpp's CPU weight repacking (Q4_0/Q4_K/IQ4_NL/Q8_0 on
AVX2) multiplies 4 rows at a time with one kernel and the rest with another, so a row
depends on the batch height (Qwen2.5-0.5B Q4_K_M: 0.38 on logits of ~20 for a sequence
decoded among four vs alone; 0 with repacking off); (2) with long suffixes whose KV cells
interleave with other sequences' cells, flash attention's blocked CPU kernel sums them in
a different grouping (SmolLM2, four ~500-token prompts: a greedy answer diverged). So a
batched call is reproducible for its seeds (same requests → same texts), and usually but
not always equal to the requests run one at a time. Full equality would need per-sequence
KV buffers (``kv_unified=False``, whose memory grows with the number of sequences) and
repacking off (slower prefill); not done.
"""

from __future__ import annotations

import codecs
import ctypes
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.gguf_meta import mem_available_bytes, plan_n_ctx
from rag_desktop.core.generation import GenRequest, GenResult, TokenSink
from rag_desktop.core.prompting import ThinkFilter
from rag_desktop.core.types import CancelToken, ChatMessage

# llama-cpp-python's default sampler chain (``Llama._init_sampler`` with the
# ``create_chat_completion`` defaults), rebuilt per sequence below so that a batched
# request samples as ``stream`` does. Its repetition-penalty stage is omitted: with the
# defaults (repeat 1.0, frequency 0, presence 0) llama.cpp skips it.
SAMPLER_TOP_K = 40
SAMPLER_TYPICAL_P = 1.0
SAMPLER_TOP_P = 0.95
SAMPLER_MIN_P = 0.05
MAX_BATCH_SEQS = 16  # sequences decoded together (seq 0 holds the shared prefix)


@dataclass(frozen=True)
class BatchStats:
    """What one ``generate_many`` call did: the tokens it evaluated, copied and wrote."""

    requests: int = 0
    prompt_tokens: int = 0  # every request's whole prompt, summed
    evaluated_tokens: int = 0  # prompt tokens actually run through the model
    shared_prefix_tokens: int = 0  # length of the common prefix (read once, copied to each sequence)
    reused_prefix_tokens: int = 0  # of which kept in the KV cache from the previous call
    completion_tokens: int = 0
    decode_calls: int = 0
    waves: int = 0  # groups of sequences that fitted in the context together
    seconds: float = 0.0


@dataclass
class _Seq:
    """One request in flight (see :meth:`BatchDecoder.run`)."""

    index: int
    tokens: list[int]
    max_tokens: int
    stops: tuple[str, ...]
    sampler: Any
    think: ThinkFilter
    decoder: Any
    seq_id: int = -1
    pos: int = 0
    logits_idx: int = -1  # row of the last decode whose logits this sequence samples from
    raw: str = ""  # decoded completion before stop/think filtering
    fed: int = 0  # characters of ``raw`` already passed to the think filter
    visible: list[str] = field(default_factory=list)
    n_out: int = 0
    finish: str = ""
    cached: int = 0


def longest_common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    first = seqs[0]
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs[1:]):
            return i
    return n


class BatchOwner(Protocol):
    """What :class:`BatchDecoder` uses of its owner, ``LlamaCppGenerator`` (declared here so that the
    generator, which imports this module, is not imported back: no import cycle, annotations included)."""

    model_path: Path
    metadata: dict[str, Any]
    keep_prefix: bool
    check_memory: bool
    min_n_ctx: int
    _lc: Any

    @property
    def n_ctx(self) -> int: ...

    def _template_opens_think(self) -> bool: ...

    def _prompt(self, llm: Any, messages: Sequence[ChatMessage]) -> tuple[list[int], tuple[str, ...]]: ...

    def _arm_abort_ctx(self, ctx: Any, token: CancelToken | None, on: bool) -> None: ...

    def _stopping(self, cancel: CancelToken | None) -> bool: ...


class BatchDecoder:
    """The batch context of one generator and the decoding of many requests in it.

    :meth:`run` decodes independent requests together, several sequences per ``llama_decode``:

    * **One batch, one seq id per request.** Each request is a llama.cpp sequence
      (ids 1…) with its own sampler chain seeded with its own seed, its own stop
      strings and max_tokens; every step decodes one token of every live sequence in
      one ``llama_decode``, and each samples from its own logits row.
    * **Shared prefix read once.** The longest common token prefix of the requests
      (system prompt, instructions, a worked example) is evaluated once into seq 0
      and its KV cells are shared with every sequence by ``llama_memory_seq_cp`` (a
      unified KV cache: the cells are tagged with the extra seq ids, not copied).
      Each sequence then evaluates only its own suffix.
    * **Prefix kept across calls** (``keep_prefix``, default on): seq 0 stays in the
      cache, so a later call whose requests start with the same tokens — e.g. the
      baseline and causal answers of standard RAG, which share the system prompt and
      the instructions — skips them. A single request shares its whole prompt but
      the last token this way.
    * **Capacity.** The batch context has n_ctx cells; requests are taken in order
      into waves whose prefix + suffixes + max_tokens fit; a request that does not fit
      with others runs in the next wave. ``last_stats`` (the owner's ``last_batch``)
      tells what was evaluated.
    * **Cancel** (or close()) stops every sequence within a decode step, or within a
      prefill graph node through the abort callback; unfinished sequences end as
      "cancelled" with their partial text, and the cache is cleared.
    * ``on_token(i, text)`` receives request i's visible text as it is decoded.

    One request gives exactly what the owner's ``stream`` gives (llama-cpp-python's chat
    template and sampler chain; tested, greedy and seeded). Several requests give the
    same texts as one at a time when they share a prefix and differ in short suffixes
    (tested); in general only up to llama.cpp's layout-dependent last bits (module
    doc). The same call with the same seeds is reproducible.
    """

    def __init__(self, owner: BatchOwner) -> None:
        self._gen = owner  # loads the model, renders prompts, arms the abort hook
        self._bctx: Any = None  # the batch context (created on first use)
        self._bctx_n_ctx = 0
        self._bctx_n_batch = 0
        self._bbatch: Any = None
        self._prefix_tokens: list[int] = []  # what seq 0 of the batch context holds
        self.last_stats = BatchStats()

    @property
    def _lc(self) -> Any:
        return self._gen._lc  # llama_cpp.llama_cpp, the low-level bindings (set by the owner's load())

    def run(self, llm: Any, reqs: list[GenRequest], cancel: CancelToken | None,
            on_token: TokenSink | None) -> list[GenResult]:
        """Decode ``reqs`` in the batch context of ``llm`` (see the class doc); the owner has
        loaded the model and entered a llama.cpp call (``_enter``) around this one."""
        t0 = time.perf_counter()
        lc = self._lc
        ctx = self._context(llm)
        n_ctx = self._bctx_n_ctx
        n_batch = self._bctx_n_batch
        mem = lc.llama_get_memory(ctx)
        vocab = lc.llama_model_get_vocab(llm.model)
        opens_think = self._gen._template_opens_think()
        seqs: list[_Seq] = []
        decodes = [0]
        try:
            for i, r in enumerate(reqs):
                toks, fmt_stops = self._gen._prompt(llm, r.messages)
                if len(toks) >= n_ctx:
                    raise ValueError(f"Requested tokens ({len(toks)}) exceed context window of {n_ctx}; the prompt "
                                     f"must leave room for the answer (see prompting.build_answer_messages)")
                max_t = r.max_tokens if 0 < r.max_tokens <= n_ctx - len(toks) else n_ctx - len(toks)
                seqs.append(_Seq(i, toks, max_t, (*fmt_stops, *(x for x in r.stop if x)),
                                 self._sampler(r.temperature, r.seed), ThinkFilter(start_inside=opens_think),
                                 codecs.getincrementaldecoder("utf-8")(errors="replace")))
            # The shared prefix; every sequence keeps at least its last prompt token to evaluate.
            n_pre = min(longest_common_prefix([s.tokens for s in seqs]), min(len(s.tokens) for s in seqs) - 1)
            if len(seqs) == 1 and not self._gen.keep_prefix:
                n_pre = 0
            prefix = seqs[0].tokens[:n_pre]
            for sid in range(1, MAX_BATCH_SEQS + 1):
                lc.llama_memory_seq_rm(mem, sid, -1, -1)
            reused = longest_common_prefix([self._prefix_tokens, prefix]) if self._gen.keep_prefix else 0
            # Seq 0 keeps exactly the reused part, whatever it held before (positions must follow on).
            lc.llama_memory_seq_rm(mem, 0, reused, -1)
            self._prefix_tokens = prefix[:reused]
            ok = True
            for start in range(reused, n_pre, n_batch):
                chunk = prefix[start:start + n_batch]
                for j, tok in enumerate(chunk):
                    self._put(j, tok, start + j, 0, False)
                if not self._decode(ctx, len(chunk), cancel, True, decodes):
                    ok = False
                    break
                self._prefix_tokens = prefix[:start + len(chunk)]
            evaluated = n_pre - reused
            waves = 0
            pending = list(seqs) if ok else []
            while pending and ok:
                wave: list[_Seq] = []
                cells = n_pre
                for s in pending:
                    need = len(s.tokens) - n_pre + s.max_tokens
                    if wave and (cells + need > n_ctx or len(wave) >= MAX_BATCH_SEQS):
                        break
                    wave.append(s)
                    cells += need
                pending = pending[len(wave):]
                waves += 1
                for k, s in enumerate(wave):
                    # cached = what this request did not evaluate itself: a group's shared prefix (read
                    # once for all of it), but for a lone request only what an earlier call left —
                    # its "prefix" is its own prompt, evaluated for it (it used to count as cached, so
                    # the closed-book and synthesis calls looked free in the per-step tables).
                    s.seq_id, s.pos, s.cached = k + 1, n_pre, (n_pre if len(seqs) > 1 else reused)
                    if n_pre:
                        lc.llama_memory_seq_cp(mem, 0, s.seq_id, 0, n_pre)
                ok = self._run_wave(ctx, wave, n_pre, n_batch, vocab, cancel, on_token, decodes)
                evaluated += sum(len(s.tokens) - n_pre for s in wave)
                for s in wave:
                    lc.llama_memory_seq_rm(mem, s.seq_id, -1, -1)
            if not ok:  # cancelled: an aborted decode leaves the cache in an unknown state
                lc.llama_memory_clear(mem, True)
                self._prefix_tokens = []
            for s in seqs:
                if not s.finish:
                    s.finish = "cancelled"
                self._emit(s, on_token, final=True)
            self.last_stats = BatchStats(
                requests=len(seqs), prompt_tokens=sum(len(s.tokens) for s in seqs), evaluated_tokens=evaluated,
                shared_prefix_tokens=n_pre, reused_prefix_tokens=reused,
                completion_tokens=sum(s.n_out for s in seqs), decode_calls=decodes[0], waves=waves,
                seconds=time.perf_counter() - t0)
            return [GenResult("".join(s.visible), s.finish, len(s.tokens), s.n_out, s.cached) for s in seqs]
        finally:
            for s in seqs:
                lc.llama_sampler_free(s.sampler)

    def _run_wave(self, ctx: Any, wave: list[_Seq], n_pre: int, n_batch: int, vocab: Any,
                  cancel: CancelToken | None, on_token: TokenSink | None, decodes: list[int]) -> bool:
        """Prefill the suffixes of ``wave`` (several sequences per decode), then decode them together."""
        lc = self._lc
        feed = [(s, tok, n_pre + p, p == len(s.tokens) - n_pre - 1)
                for s in wave for p, tok in enumerate(s.tokens[n_pre:])]
        nxt: dict[int, int] = {}  # seq index → token to feed next step
        for start in range(0, len(feed), n_batch):
            chunk = feed[start:start + n_batch]
            lasts: list[tuple[_Seq, int]] = []
            for j, (s, tok, pos, last) in enumerate(chunk):
                self._put(j, tok, pos, s.seq_id, last)
                if last:
                    lasts.append((s, j))
            if not self._decode(ctx, len(chunk), cancel, True, decodes):
                return False
            for s, j in lasts:  # logits rows are only valid until the next decode
                s.pos = len(s.tokens)
                tok = lc.llama_sampler_sample(s.sampler, ctx, j)
                if self._take(s, tok, vocab, on_token):
                    nxt[s.index] = tok
        live = [s for s in wave if s.index in nxt]
        while live:
            for j, s in enumerate(live):
                self._put(j, nxt[s.index], s.pos, s.seq_id, True)
                s.logits_idx = j
                s.pos += 1
            if not self._decode(ctx, len(live), cancel, False, decodes):
                return False
            still = []
            for s in live:
                tok = lc.llama_sampler_sample(s.sampler, ctx, s.logits_idx)
                if self._take(s, tok, vocab, on_token):
                    nxt[s.index] = tok
                    still.append(s)
            live = still
        return True

    def _context(self, llm: Any) -> Any:
        """The llama_context of generate_many: a unified KV cache of n_ctx cells shared by up to
        ``MAX_BATCH_SEQS`` sequences plus seq 0 (the shared prefix), otherwise the same
        parameters as the ``Llama`` context (threads, batch size, attention). Created once;
        sized like the main context, lowered if memory is short (see :func:`plan_n_ctx`)."""
        if self._bctx is not None:
            return self._bctx
        lc = self._lc
        params = type(llm.context_params).from_buffer_copy(llm.context_params)
        available = mem_available_bytes() if self._gen.check_memory else None
        n_ctx = plan_n_ctx(self._gen.n_ctx, self._gen.metadata, 0, available, self._gen.min_n_ctx)
        params.n_ctx = n_ctx
        params.n_batch = min(int(params.n_batch), n_ctx)
        params.n_ubatch = min(int(params.n_ubatch), int(params.n_batch))
        params.n_seq_max = MAX_BATCH_SEQS + 1
        params.kv_unified = True  # one cache: the prefix cells are shared, not copied
        ctx = lc.llama_init_from_model(llm.model, params)
        if not ctx:
            raise ModelUnavailable(f"llama.cpp could not create a batch context of n_ctx={n_ctx} for "
                                   f"{self._gen.model_path.name}; free some memory or lower models.n_ctx")
        self._bctx, self._bctx_n_ctx = ctx, int(lc.llama_n_ctx(ctx))
        self._bctx_n_batch = int(params.n_batch)
        self._bbatch = lc.llama_batch_init(self._bctx_n_batch, 0, 1)
        self._prefix_tokens = []
        return ctx

    def free(self) -> None:
        if self._bctx is not None:
            self._lc.llama_batch_free(self._bbatch)
            self._lc.llama_free(self._bctx)
        self._bctx, self._bbatch, self._bctx_n_ctx = None, None, 0
        self._prefix_tokens = []

    def _sampler(self, temperature: float, seed: int) -> Any:
        """One sampler chain per sequence, the same stages as llama-cpp-python's (see SAMPLER_*)."""
        lc = self._lc
        chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())

        def add(smpl: Any) -> None:
            lc.llama_sampler_chain_add(chain, smpl)

        seed = seed & 0xFFFFFFFF
        if temperature < 0:
            add(lc.llama_sampler_init_dist(seed))
        elif temperature == 0:
            add(lc.llama_sampler_init_greedy())
        else:
            add(lc.llama_sampler_init_top_k(SAMPLER_TOP_K))
            add(lc.llama_sampler_init_typical(SAMPLER_TYPICAL_P, 1))
            add(lc.llama_sampler_init_top_p(SAMPLER_TOP_P, 1))
            add(lc.llama_sampler_init_min_p(SAMPLER_MIN_P, 1))
            add(lc.llama_sampler_init_temp(temperature))
            add(lc.llama_sampler_init_dist(seed))
        return chain

    def _decode(self, ctx: Any, n: int, cancel: CancelToken | None, prefill: bool,
                counter: list[int]) -> bool:
        """One llama_decode of the first ``n`` batch entries; False when cancelled or aborted."""
        if self._gen._stopping(cancel):
            return False
        batch = self._bbatch
        batch.n_tokens = n
        # The abort hook only around prefill: see backends/llama_cpp_generator.py's module doc
        # ("Cancel") on its cost.
        if prefill:
            self._gen._arm_abort_ctx(ctx, cancel, on=True)
        try:
            rc = self._lc.llama_decode(ctx, batch)
        finally:
            if prefill:
                self._gen._arm_abort_ctx(ctx, None, on=False)
        counter[0] += 1
        if rc != 0 and self._gen._stopping(cancel):
            return False
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} in the batch context of {self._gen.model_path.name} "
                               f"(n_ctx={self._bctx_n_ctx})")
        return True

    def _put(self, j: int, token: int, pos: int, seq_id: int, logits: bool) -> None:
        b = self._bbatch
        b.token[j] = token
        b.pos[j] = pos
        b.n_seq_id[j] = 1
        b.seq_id[j][0] = seq_id
        b.logits[j] = 1 if logits else 0

    def _emit(self, s: _Seq, on_token: TokenSink | None, final: bool) -> None:
        """Pass new completion text through the think filter, holding back a possible stop-string start."""
        hold = 0 if final else max((len(x) for x in s.stops), default=1) - 1
        end = max(s.fed, len(s.raw) - hold)
        if end > s.fed:
            vis = s.think.feed(s.raw[s.fed:end])
            s.fed = end
            if vis:
                s.visible.append(vis)
                if on_token is not None:
                    on_token(s.index, vis)
        if final:
            rest = s.think.flush()
            if rest and s.finish != "cancelled":
                s.visible.append(rest)
                if on_token is not None:
                    on_token(s.index, rest)

    def _take(self, s: _Seq, token: int, vocab: Any, on_token: TokenSink | None) -> bool:
        """Record a sampled token; True while the sequence goes on."""
        lc = self._lc
        if lc.llama_vocab_is_eog(vocab, token):
            s.finish = "stop"
            return False
        s.n_out += 1
        buf = ctypes.create_string_buffer(64)
        n = lc.llama_token_to_piece(vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = lc.llama_token_to_piece(vocab, token, buf, -n, 0, False)
        s.raw += s.decoder.decode(buf.raw[:n])
        hits = [i for i in (s.raw.find(x, max(0, s.fed - len(x))) for x in s.stops) if i >= 0]
        if hits:
            s.raw = s.raw[: min(hits)]
            s.finish = "stop"
            return False
        if s.n_out >= s.max_tokens:
            s.raw += s.decoder.decode(b"", final=True)
            s.finish = "length"
            return False
        self._emit(s, on_token, final=False)
        return True
