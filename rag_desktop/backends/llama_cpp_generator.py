"""In-process generation with llama-cpp-python (any GGUF; the embedded Qwen2.5-0.5B by default).

Implements :class:`rag_desktop.core.protocols.Generator`. ``llama_cpp`` is imported only
inside :meth:`LlamaCppGenerator.load`; constructing the object is free.

Choices the design leaves open, made here (each one tested in tests/test_llama_cpp_generator.py):

* **Chat template**: from the GGUF metadata (llama-cpp-python's ``create_chat_completion``
  renders ``tokenizer.chat_template``; we never pass a ``chat_format``).
* **n_ctx**: planned before loading from the GGUF header and MemAvailable (training
  context cap, memory estimate: :func:`rag_desktop.backends.gguf_meta.plan_n_ctx`), then
  halved *after* a failed context creation, never below ``min_n_ctx`` (2048).
* **Threads**: physical cores (:func:`rag_desktop.backends.gguf_meta.physical_cores`).
* **Cancel** within a second: checked after every streamed token; during the prompt
  prefill (which takes many seconds for a long prompt) through llama.cpp's abort callback,
  bound with ctypes. The callback is one Python call per graph node (557 per forward pass
  of Qwen2.5-0.5B, measured): negligible against a prefill batch, but a few percent of a
  40 ms decode step, so it is installed only until the first token arrives.
* **Qwen3 thinking**: off unless ``thinking=True``, through Qwen3's documented soft switch
  ("/no_think" appended to the last user turn); detected from ``general.architecture``
  starting with ``qwen3``. Whatever the model does, ``<think>…</think>`` text is removed
  from the stream by :class:`rag_desktop.core.prompting.ThinkFilter`.
* **Seeded sampling** is reproducible only if the prompt is evaluated the same way each
  time: llama-cpp-python's prefix reuse re-evaluates the last prompt token on its own,
  which changes its logits in the last bits and, measured with SmolLM2 at temperature
  0.7, the sampled text. So a request keeps of the cache only what it would have read the
  same way from a cleared one: prompts are read in pieces cut where their messages say, and
  the next prompt keeps the pieces it shares (backends/llama_segments.py); or, with
  ``cache_prompt=True``, whatever llama-cpp-python matches (faster, not reproducible).
* **Cancelled generation** ends with ``GenEvent(DONE, finish_reason="cancelled")`` rather
  than an exception, so a caller keeps the partial answer.
* **Batched decoding** (:meth:`LlamaCppGenerator.generate_many`): delegated to
  :class:`rag_desktop.backends.llama_batch.BatchDecoder`, which owns its own batch context;
  its module doc says why flash attention is on in both contexts.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_desktop.backends.errors import ModelUnavailable, require
from rag_desktop.backends.ggml_cpu import ensure_cpu_backend
from rag_desktop.backends.gguf_meta import (
    MIN_N_CTX,
    mem_available_bytes,
    physical_cores,
    plan_n_ctx,
    read_gguf_metadata,
)
from rag_desktop.backends.llama_abort import AbortHook
from rag_desktop.backends.llama_batch import BatchDecoder, BatchStats, longest_common_prefix
from rag_desktop.backends.llama_prompt import render_prompt
from rag_desktop.backends.llama_segments import PromptCache, Render, cuts, log_softmax_at, prefix_cut, score_tail
from rag_desktop.core.generation import GenRequest, GenResult, TokenSink
from rag_desktop.core.prompting import ThinkFilter
from rag_desktop.core.types import Cancelled, CancelToken, ChatMessage, GenEvent, GenEventKind

NO_THINK_SWITCH = "/no_think"


# --------------------------------------------------------------------------- exit handling

_LIVE: weakref.WeakSet[LlamaCppGenerator] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Free every loaded model before interpreter teardown (llama-cpp-python's __del__
    otherwise runs when its module globals are already gone and prints a TypeError)."""
    for gen in list(_LIVE):
        with contextlib.suppress(Exception):
            gen.close()


# --------------------------------------------------------------------------- generator


class LlamaCppGenerator:
    """A GGUF chat model run in-process by llama-cpp-python."""

    # generate_many's sequences share one context of n_ctx cells (core.cfrag sizes its
    # hypothesis prompts so that M of them fit together).
    batch_shares_context = True

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        n_gpu_layers: int = 0,
        threads: int = 0,
        thinking: bool = False,
        n_batch: int = 512,
        min_n_ctx: int = MIN_N_CTX,
        check_memory: bool = True,
        cache_prompt: bool = False,
        keep_prefix: bool = True,
        reuse_prefix_state: bool = True,
    ) -> None:
        self.model_path = Path(model_path)
        self.requested_n_ctx = n_ctx
        self.n_gpu_layers = n_gpu_layers
        self.threads = threads if threads > 0 else physical_cores()
        self.thinking = thinking
        self.n_batch = n_batch
        self.min_n_ctx = min_n_ctx
        self.check_memory = check_memory
        self.cache_prompt = cache_prompt
        self.keep_prefix = keep_prefix  # generate_many keeps the last shared prefix's KV (see backends/llama_batch.py)
        self.reuse_prefix_state = reuse_prefix_state  # stream: keep what the last prompt read (llama_segments)
        self.last_prefix_reused = 0  # prompt tokens the last stream() took from a saved state or the cache
        self.metadata: dict[str, Any] = {}
        self.last_thinking = ""
        self.load_attempts: list[int] = []  # n_ctx values tried by the last load()
        self._llm: Any = None
        self._n_ctx = n_ctx
        self._lock = threading.Lock()
        self._busy = 0  # threads inside a llama.cpp call right now (see close())
        self._closing = False
        self._abort = AbortHook()  # stops a prefill (backends/llama_abort.py)
        self._lc: Any = None  # llama_cpp.llama_cpp, the low-level bindings (set by load())
        self._batcher = BatchDecoder(self)  # generate_many: its batch context and last_batch
        self._cache = PromptCache()  # stream(): the pieces the context holds, the fixed prefixes' states
        self._kept: tuple[int, ...] | None = None  # first_token_logprobs(keep=True)'s prompt, for the next stream

    # -- protocol properties -------------------------------------------------------

    @property
    def identity(self) -> str:
        return f"llama_cpp:{self.model_path.name}"

    @property
    def n_ctx(self) -> int:
        """The context actually allocated once loaded (it may be below the requested one)."""
        return self._n_ctx

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def is_qwen3(self) -> bool:
        return self.architecture.startswith("qwen3")

    @property
    def last_batch(self) -> BatchStats:
        """What the last :meth:`generate_many` call evaluated, copied and wrote."""
        return self._batcher.last_stats

    # -- lifecycle --------------------------------------------------------------

    def load(self) -> None:
        """Load the model once (idempotent); see the module doc for the n_ctx policy."""
        with self._lock:
            if self._llm is not None:
                self._closing = False  # load() after a deferred close() keeps the model
                return
            if not self.model_path.is_file():
                raise ModelUnavailable(f"generator model file {self.model_path} does not exist; "
                                       f"check models.generator in the settings")
            llama_cpp: Any = require("llama_cpp", "Local generation", "llama-cpp-python")
            try:
                ensure_cpu_backend()  # the CPU kernels of a GGML_BACKEND_DL build (backends/ggml_cpu.py)
            except RuntimeError as exc:
                raise ModelUnavailable(str(exc)) from exc
            meta = read_gguf_metadata(self.model_path)
            available = mem_available_bytes() if self.check_memory else None
            n_ctx = plan_n_ctx(self.requested_n_ctx, meta, self.model_path.stat().st_size,
                               available, self.min_n_ctx)
            self.load_attempts = []
            floor = min(self.min_n_ctx, n_ctx)
            while True:
                self.load_attempts.append(n_ctx)
                try:
                    llm = self._new_llama(llama_cpp, n_ctx)
                    break
                except ValueError as exc:
                    if "context" in str(exc).lower() and n_ctx > floor:
                        n_ctx = max(floor, n_ctx // 2)
                        continue
                    raise ModelUnavailable(
                        f"llama.cpp could not load {self.model_path} with n_ctx={n_ctx}: {exc}. "
                        f"Check that the file is a complete GGUF model and that enough memory is free"
                    ) from exc
            self._install(llama_cpp, llm, meta)

    def _new_llama(self, llama_cpp: Any, n_ctx: int) -> Any:
        return llama_cpp.Llama(
            model_path=str(self.model_path),
            n_ctx=n_ctx,
            n_batch=min(self.n_batch, n_ctx),
            n_threads=self.threads,
            n_threads_batch=self.threads,
            n_gpu_layers=self.n_gpu_layers,
            flash_attn=True,  # row-independent attention: see backends/llama_batch.py
            verbose=False,
        )

    def _install(self, llama_cpp: Any, llm: Any, meta: dict[str, Any]) -> None:
        """Adopt a freshly loaded model (called by load() under the lock)."""
        self._llm = llm
        self._n_ctx = int(llm.n_ctx())
        self.metadata = {**meta, **dict(llm.metadata)}
        self._lc = llama_cpp.llama_cpp
        self._abort.install(llama_cpp, lambda: self._closing)
        _LIVE.add(self)

    def close(self) -> None:
        """Free the model (idempotent); call before loading another model and at exit.

        Never blocks and never frees memory under a running llama.cpp call: if another
        thread is inside one, its stream stops at the next token (or aborts its prefill),
        ends with ``DONE("cancelled")`` and frees the model itself. A stream that is merely
        suspended between tokens (its consumer has not asked for the next one) is not
        running: the model is freed now and that stream ends as cancelled when resumed.
        """
        with self._lock:
            if self._busy:
                self._closing = True
                return
            self._free_locked()

    def _free_locked(self) -> None:
        llm, self._llm = self._llm, None
        self._closing = False
        self._cache.clear()
        self._kept = None
        self._batcher.free()
        if llm is not None:
            llm.close()
        _LIVE.discard(self)

    def _enter(self, llm: Any) -> bool:
        """Mark a llama.cpp call as running on ``llm``; False if that model was closed meanwhile."""
        with self._lock:
            if llm is None or self._llm is not llm or self._closing:
                return False
            self._busy += 1
            return True

    def _leave(self) -> None:
        with self._lock:
            self._busy -= 1
            if self._closing and self._busy == 0:
                self._free_locked()

    # -- tokens --------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's own tokenizer (no BOS, special tokens as text)."""
        if not text:
            return 0
        self.load()
        llm = self._llm
        if not self._enter(llm):
            raise ModelUnavailable(f"{self.model_path.name} was closed while counting tokens; try again")
        try:
            return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        finally:
            self._leave()

    # -- generation ------------------------------------------------------------------

    def _chat_messages(self, messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        out = [{"role": m.role, "content": m.content} for m in messages]
        if self.is_qwen3 and not self.thinking:
            for msg in reversed(out):
                if msg["role"] == "user":
                    msg["content"] = f"{msg['content'].rstrip()} {NO_THINK_SWITCH}"
                    break
        return out

    def _template_opens_think(self) -> bool:
        """Templates like Qwen3-Thinking-2507 put ``<think>`` in the generation prompt."""
        tpl = str(self.metadata.get("tokenizer.chat_template", ""))
        return "assistant\\n<think>" in tpl or "assistant\n<think>" in tpl

    def _arm_abort_ctx(self, ctx: Any, token: CancelToken | None, on: bool) -> None:
        """Install (on) or remove the prefill abort hook on ``ctx``; it fires on ``token`` or on close()."""
        self._abort.arm(ctx, token, on)

    def _stopping(self, cancel: CancelToken | None) -> bool:
        return self._closing or (cancel is not None and cancel.is_set)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        cancel: CancelToken | None = None,
        stop: Sequence[str] = (),
    ) -> Iterator[GenEvent]:
        """Stream the answer as TOKEN events, then one DONE ("stop", "length" or "cancelled").

        One stream at a time per generator (a llama.cpp context is not re-entrant); the
        app's single owner of the model serialises requests.
        """
        if cancel is not None and cancel.is_set:
            yield GenEvent(GenEventKind.DONE, finish_reason="cancelled")
            return
        self.load()
        llm = self._llm
        think = ThinkFilter(start_inside=self._template_opens_think())
        finish = "stop"
        chunks: Any = None
        try:
            while True:
                # Every step into llama.cpp happens between _enter and _leave, so close()
                # from another thread never frees the model under it (see close()).
                if not self._enter(llm):
                    finish = "cancelled"
                    break
                chunk: Any = None
                try:
                    first = chunks is None
                    kept = None
                    if first:
                        kept, self._kept = self._kept, None
                        if not self.cache_prompt and kept is None and not self.reuse_prefix_state:
                            llm.reset()  # reproducibility: see the module doc ("Seeded sampling")
                        self._arm_abort_ctx(llm.ctx, cancel, on=True)
                    try:
                        if first:
                            self.last_prefix_reused = 0
                            if kept is not None:  # llama-cpp-python's prefix match reads only the rest
                                self.last_prefix_reused = longest_common_prefix(
                                    [list(kept), self._prompt(llm, messages)[0]])
                            elif not self.cache_prompt and self.reuse_prefix_state:
                                self.last_prefix_reused = self._read_in_pieces(llm, messages)
                            chunks = llm.create_chat_completion(
                                messages=self._chat_messages(messages),
                                max_tokens=max_tokens,
                                temperature=temperature,
                                seed=seed,
                                stop=list(stop),
                                stream=True,
                            )
                        chunk = next(chunks, None)
                    except RuntimeError as exc:
                        if not (self._stopping(cancel) and "llama_decode" in str(exc)):
                            raise
                        # Aborted during prefill: the KV cache past n_tokens is discarded by
                        # the next eval; resetting also drops the reusable prefix (safe choice).
                        llm.reset()
                        self._cache.forget()
                        finish = "cancelled"
                    except ValueError as exc:
                        if "exceed context window" in str(exc):
                            raise ValueError(
                                f"{exc}; the prompt must leave room for the answer within "
                                f"n_ctx={self._n_ctx} (see prompting.build_answer_messages)") from exc
                        raise
                    finally:
                        if first:  # prefill is over (see the module doc on the abort hook)
                            self._arm_abort_ctx(llm.ctx, None, on=False)
                finally:
                    self._leave()
                if chunk is None or finish == "cancelled":
                    break
                if self._stopping(cancel):
                    finish = "cancelled"
                    break
                choice = chunk["choices"][0]
                text = choice.get("delta", {}).get("content") or ""
                if text:
                    visible = think.feed(text)
                    if visible:
                        yield GenEvent(GenEventKind.TOKEN, visible)
                if choice.get("finish_reason"):
                    finish = str(choice["finish_reason"])
        finally:
            if chunks is not None:
                # Stops llama-cpp's generator; pure Python unwinding, safe even after close().
                chunks.close()
        rest = think.flush()
        if rest and finish != "cancelled":
            yield GenEvent(GenEventKind.TOKEN, rest)
        self.last_thinking = "".join(think.thinking)
        yield GenEvent(GenEventKind.DONE, finish_reason=finish)

    def generate(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float,
                 seed: int, cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> str:
        """The whole answer as one string (convenience over :meth:`stream`)."""
        return "".join(e.text for e in self.stream(messages, max_tokens=max_tokens, temperature=temperature,
                                                    seed=seed, cancel=cancel, stop=stop)
                       if e.kind is GenEventKind.TOKEN)

    def warm(self, prompts: Sequence[Sequence[ChatMessage]], cancel: CancelToken | None = None) -> int:
        """Evaluate the fixed prefix of each of ``prompts`` and keep its state (see
        backends/llama_segments.py), so the first request with that prefix loads it instead of
        evaluating it. Returns the number of prefixes made. The caller guarantees nothing else
        uses the model meanwhile (``app.runtime.Runtime.generator`` warms before it hands the
        generator out)."""
        if not self.reuse_prefix_state or self.cache_prompt:
            return 0
        self.load()
        llm, made = self._llm, 0
        self._kept = None
        for messages in prompts:
            if self._stopping(cancel) or not self._enter(llm):
                break
            try:
                _, full, cut = self._prefix_of(llm, messages)
                if cut and not self._cache.prefix(llm, full, cut):  # 0 tokens loaded: made here
                    made += 1
            finally:
                self._leave()
        return made

    def read_ahead(self, messages: Sequence[ChatMessage], cancel: CancelToken | None = None) -> int:
        """Read ``messages``' prompt into the cache up to its last cut, writing nothing, so that a stream or a
        score of a prompt that starts the same reads only the rest (app.read_ahead: the answer prompt of the
        question being typed). The pieces are the ones :meth:`stream` reads, so a seed keeps its text. Stopped
        by ``cancel``, it keeps the pieces read whole. Returns the prompt's tokens in the cache (0: none read
        ahead, e.g. with ``cache_prompt``)."""
        if not self.reuse_prefix_state or self.cache_prompt or self._stopping(cancel):
            return 0
        llm = self._scoring(cancel)
        try:
            self._kept = None
            with contextlib.suppress(Cancelled), _prefilling(self, llm, cancel):
                self._read_in_pieces(llm, messages)
            return self._cache.cuts[-1] if self._cache.cuts else 0
        finally:
            self._leave()

    def _prefix_of(self, llm: Any, messages: Sequence[ChatMessage]) -> tuple[Render, list[int], int]:
        """How this generator renders messages, ``messages``' prompt tokens, and where its fixed prefix
        ends (llama_segments.prefix_cut; 0: none worth keeping)."""
        def render(ms: Sequence[ChatMessage]) -> list[int]:
            return self._prompt(llm, ms)[0]

        full = render(messages)
        return render, full, prefix_cut(render, messages, full)

    def _read_in_pieces(self, llm: Any, messages: Sequence[ChatMessage]) -> int:
        """Put ``messages``' prompt in the cache up to its last cut before ``create_chat_completion``,
        keeping what the last prompt read the same way (backends/llama_segments.py); llama-cpp-python's
        prefix match then evaluates only the rest. Returns the tokens kept or loaded from a state."""
        render, full, head = self._prefix_of(llm, messages)
        if len(full) >= self._n_ctx:  # create_chat_completion says so, in its own words (stream)
            llm.reset()
            self._cache.forget()
            return 0
        return self._cache.read(llm, full, cuts(render, messages, full, head=head), head)

    # -- scoring (core.protocols.TokenScorer) -------------------------------------------

    def first_token_logprobs(self, messages: Sequence[ChatMessage], words: Sequence[str], *,
                             cancel: CancelToken | None = None, keep: bool = False,
                             after: bool = False) -> list[float]:
        """log P(first token of each word | the chat prompt), from one prompt evaluation.

        The prompt is the one ``stream`` would send (same template, same /no_think switch), from a
        cleared cache: a score does not depend on what ran before. Qwen3 with thinking off opens an
        empty ``<think></think>`` block first; it is appended, so the logits are the first *visible*
        token's. Raises Cancelled when ``cancel`` fires. ``keep`` (core.abstain.JUDGE): the fixed
        prefix comes from its saved state and the prompt stays in the cache for the next
        :meth:`stream`, which evaluates only what follows the tokens the two share; the split
        depends on the messages alone, so a seed still gives one text. ``after``: evaluated from the
        last stream's cache, only what follows the tokens the two prompts share."""

        llm = self._scoring(cancel)
        try:
            toks, _ = self._prompt(llm, messages)
            if self.is_qwen3 and not self.thinking:
                opened = self._template_opens_think()
                toks += list(llm.tokenize(("\n\n</think>\n\n" if opened else "<think>\n\n</think>\n\n")
                                          .encode("utf-8"), add_bos=False, special=True))
            if len(toks) >= self._n_ctx:
                raise ValueError(f"prompt of {len(toks)} tokens does not fit n_ctx={self._n_ctx}")
            ids = _first_token_ids(llm, words)
            self._kept = None
            shared = longest_common_prefix([list(llm.input_ids[: llm.n_tokens]), toks]) if after else 0
            llm.reset()
            self._cache.keep_below(shared if shared >= len(toks) // 2 else 0)
            if shared >= len(toks) // 2:  # the cache up to there stays: eval() drops only what follows
                llm.n_tokens = min(shared, len(toks) - 1)
            with _prefilling(self, llm, cancel):
                if keep and not shared and self.reuse_prefix_state and not self.cache_prompt:
                    _, full, cut = self._prefix_of(llm, messages)
                    self._cache.prefix(llm, full, cut)
                llm.eval(toks[llm.n_tokens:])
            self._kept = tuple(toks) if keep else None
            return log_softmax_at(self._lc.llama_get_logits_ith(llm.ctx, -1), int(llm.n_vocab()), ids)
        finally:
            self._leave()

    def _scoring(self, cancel: CancelToken | None) -> Any:
        """The loaded model, entered for a scoring evaluation (the caller leaves it); Cancelled first when
        ``cancel`` is set already."""
        if cancel is not None and cancel.is_set:
            raise Cancelled()
        self.load()
        llm = self._llm
        if not self._enter(llm):
            raise ModelUnavailable(f"{self.model_path.name} was closed while scoring; try again")
        return llm

    def tail_logprob(self, messages: Sequence[ChatMessage], tail: str, *,
                     cancel: CancelToken | None = None) -> tuple[float, int]:
        """core.protocols.PromptScorer: log P of the tokens of ``tail``, the end of the last message, given the
        prompt before it (summed), and how many there are. Read in the prompt's pieces as :meth:`stream` reads
        it (backends/llama_segments.py), so an answer prompt that follows keeps what this one read."""
        llm = self._scoring(cancel)
        try:
            render, full, head = self._prefix_of(llm, messages)
            if len(full) >= self._n_ctx:
                raise ValueError(f"prompt of {len(full)} tokens does not fit n_ctx={self._n_ctx}")
            self._kept = None
            if not (pieces := self.reuse_prefix_state and not self.cache_prompt):
                self._cache.forget()
            with _prefilling(self, llm, cancel):
                lps = score_tail(llm, self._cache if pieces else None, render, messages, full, head, tail)
            return sum(lps), len(lps)
        finally:
            self._leave()

    # -- prompts and batched generation (generate_many: backends/llama_batch.py) ---------

    def _prompt(self, llm: Any, messages: Sequence[ChatMessage]) -> tuple[list[int], tuple[str, ...]]:
        """Prompt tokens and the template's stop strings, as ``create_chat_completion`` makes them."""
        template = str(self.metadata.get("tokenizer.chat_template", ""))
        if not template:
            raise ModelUnavailable(f"{self.model_path.name} has no chat template (tokenizer.chat_template) in "
                                   f"its GGUF metadata; use an instruction-tuned chat model")
        return render_prompt(self._lc, llm, template, self._chat_messages(messages))

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens the model reads for ``messages`` (chat template included)."""
        self.load()
        llm = self._llm
        if not self._enter(llm):
            raise ModelUnavailable(f"{self.model_path.name} was closed while counting tokens; try again")
        try:
            return len(self._prompt(llm, messages)[0])
        finally:
            self._leave()

    def generate_many(
        self,
        requests: Sequence[GenRequest],
        *,
        cancel: CancelToken | None = None,
        on_token: TokenSink | None = None,
    ) -> list[GenResult]:
        """Decode independent requests together: several sequences per ``llama_decode``.

        How (one sequence per request, the shared prefix read once and kept across calls,
        waves, cancel): :meth:`rag_desktop.backends.llama_batch.BatchDecoder.run`.
        ``on_token(i, text)`` receives request i's visible text as it is decoded;
        :attr:`last_batch` tells what was evaluated.
        """
        reqs = list(requests)
        if not reqs:
            return []
        if cancel is not None and cancel.is_set:
            return [GenResult("", "cancelled", 0, 0) for _ in reqs]
        self.load()
        llm = self._llm
        if not self._enter(llm):
            return [GenResult("", "cancelled", 0, 0) for _ in reqs]
        try:
            return self._batcher.run(llm, reqs, cancel, on_token)
        finally:
            self._leave()


@contextlib.contextmanager
def _prefilling(gen: LlamaCppGenerator, llm: Any, cancel: CancelToken | None) -> Iterator[None]:
    """An evaluation with ``gen``'s abort hook armed: stopped by ``cancel``, it raises Cancelled and leaves the
    cache holding the prompt's pieces read whole (the decode under way was rolled back: backends/llama_abort.py)."""
    gen._arm_abort_ctx(llm.ctx, cancel, on=True)
    try:
        yield
    except RuntimeError as exc:
        if gen._stopping(cancel) and "llama_decode" in str(exc):
            kept = min(gen._cache.cuts[-1] if gen._cache.cuts else 0, llm.n_tokens)
            llm.reset()
            llm.n_tokens = kept
            gen._cache.keep_below(kept)
            raise Cancelled() from exc
        raise
    finally:
        gen._arm_abort_ctx(llm.ctx, None, on=False)


def _first_token_ids(llm: Any, words: Sequence[str]) -> list[int]:
    """The first token of each of ``words`` in ``llm``'s vocabulary (first_token_logprobs)."""
    ids = []
    for w in words:
        t = llm.tokenize(w.encode("utf-8"), add_bos=False, special=False)
        if not t:
            raise ValueError(f"first_token_logprobs: {w!r} has no tokens")
        ids.append(int(t[0]))
    return ids
