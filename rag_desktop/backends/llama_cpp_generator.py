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
  0.7, the sampled text. So the KV cache is cleared before every request unless
  ``cache_prompt=True`` (faster for repeated prefixes, not reproducible).
* **Cancelled generation** ends with ``GenEvent(DONE, finish_reason="cancelled")`` rather
  than an exception, so a caller keeps the partial answer.
* **Batched decoding** (:meth:`LlamaCppGenerator.generate_many`, issue 14): independent
  requests are llama.cpp sequences of one batch context (a unified KV cache of n_ctx
  cells, created on first use), each with its own sampler chain and seed; their common
  token prefix is evaluated once and shared with ``llama_memory_seq_cp``.
  **Flash attention is on** in both contexts: measured with SmolLM2 and Qwen2.5-0.5B,
  without it llama.cpp's CPU attention gives a token different logits depending on how
  the batch around it is laid out (up to 0.9 on logits of ~33 between a prompt evaluated
  in one batch and token by token, so greedy answers differed after a few tokens); with
  it the logits of a sequence decoded among others are bit-identical to those of the
  sequence decoded alone, which is what makes batched and one-at-a-time results equal
  for requests that share their prefix and differ in short suffixes (tested, greedy and
  seeded). It is not a general guarantee — two more layout effects remain, measured: (1)
  llama.cpp's CPU weight repacking (Q4_0/Q4_K/IQ4_NL/Q8_0 on AVX2) multiplies 4 rows at a
  time with one kernel and the rest with another, so a row depends on the batch height
  (Qwen2.5-0.5B Q4_K_M: 0.38 on logits of ~20 for a sequence decoded among four vs alone;
  0 with repacking off); (2) with long suffixes whose KV cells interleave with other
  sequences' cells, flash attention's blocked CPU kernel sums them in a different grouping
  (SmolLM2, four ~500-token prompts: a greedy answer diverged). So a batched call is
  reproducible for its seeds (same requests → same texts), and usually but not always
  equal to the requests run one at a time. Full equality would need per-sequence KV
  buffers (``kv_unified=False``, whose memory grows with the number of sequences) and
  repacking off (slower prefill); not done.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import ctypes
import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
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
from rag_desktop.core.generation import GenRequest, GenResult, TokenSink
from rag_desktop.core.prompting import ThinkFilter
from rag_desktop.core.types import Cancelled, CancelToken, ChatMessage, GenEvent, GenEventKind

_LLAMA_LOG = logging.getLogger("llama-cpp-python")  # llama-cpp-python routes llama.cpp's log here

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
        self.keep_prefix = keep_prefix  # generate_many keeps the last shared prefix's KV (see there)
        self.reuse_prefix_state = reuse_prefix_state  # stream: the fixed prefix's saved KV (see _start_from_prefix)
        self.last_prefix_reused = 0  # prompt tokens the last stream() took from a saved state
        self.last_batch = BatchStats()
        self.metadata: dict[str, Any] = {}
        self.last_thinking = ""
        self.load_attempts: list[int] = []  # n_ctx values tried by the last load()
        self._llm: Any = None
        self._n_ctx = n_ctx
        self._lock = threading.Lock()
        self._busy = 0  # threads inside a llama.cpp call right now (see close())
        self._closing = False
        self._abort_token: CancelToken | None = None
        self._abort_cb: Any = None
        self._null_cb: Any = None
        self._set_abort: Any = None
        self._lc: Any = None  # llama_cpp.llama_cpp, the low-level bindings (set by load())
        self._bctx: Any = None  # the batch context of generate_many (created on first use)
        self._bctx_n_ctx = 0
        self._bctx_n_batch = 0
        self._bbatch: Any = None
        self._prefix_tokens: list[int] = []  # what seq 0 of the batch context holds
        # stream(): llama.cpp states after the fixed prefix of a prompt, most recent last
        self._prefix_states: OrderedDict[tuple[int, ...], Any] = OrderedDict()

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
            flash_attn=True,  # row-independent attention: see the module doc ("Batched decoding")
            verbose=False,
        )

    def _install(self, llama_cpp: Any, llm: Any, meta: dict[str, Any]) -> None:
        """Adopt a freshly loaded model (called by load() under the lock)."""
        self._llm = llm
        self._n_ctx = int(llm.n_ctx())
        self.metadata = {**meta, **dict(llm.metadata)}
        self._lc = llama_cpp.llama_cpp
        self._set_abort = _bind_abort_setter(llama_cpp)
        if self._set_abort is not None:
            token_ref = self

            def _abort(_data: Any) -> bool:
                tok = token_ref._abort_token
                stop = bool(token_ref._closing or (tok is not None and tok.is_set))
                if stop:
                    # llama.cpp logs the rollback of an aborted decode as an error; it is
                    # expected here, so mute llama-cpp-python's log for this request.
                    _LLAMA_LOG.setLevel(logging.CRITICAL)
                return stop

            self._abort_cb = llama_cpp.llama_cpp.ggml_abort_callback(_abort)
            self._null_cb = llama_cpp.llama_cpp.ggml_abort_callback()
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
        self._prefix_states.clear()
        self._free_batch_context()
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

    def _arm_abort(self, llm: Any, token: CancelToken | None, on: bool) -> None:
        """Install (on) or remove the prefill abort hook; it fires on ``token`` or on close()."""
        self._arm_abort_ctx(llm.ctx, token, on)

    def _arm_abort_ctx(self, ctx: Any, token: CancelToken | None, on: bool) -> None:
        if self._set_abort is None:
            return
        self._abort_token = token
        self._set_abort(ctx, self._abort_cb if on else self._null_cb, None)

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
                    if first:
                        if not self.cache_prompt:
                            llm.reset()  # reproducibility: see the module doc ("Seeded sampling")
                        self._arm_abort(llm, cancel, on=True)
                    try:
                        if first:
                            self.last_prefix_reused = 0
                            if not self.cache_prompt and self.reuse_prefix_state:
                                self._start_from_prefix(llm, messages)
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
                        finish = "cancelled"
                    except ValueError as exc:
                        if "exceed context window" in str(exc):
                            raise ValueError(
                                f"{exc}; the prompt must leave room for the answer within "
                                f"n_ctx={self._n_ctx} (see prompting.build_answer_messages)") from exc
                        raise
                    finally:
                        if first:  # prefill is over (see the module doc on the abort hook)
                            self._arm_abort(llm, None, on=False)
                            if _LLAMA_LOG.level == logging.CRITICAL:
                                _LLAMA_LOG.setLevel(logging.ERROR)  # llama-cpp's level for verbose=False
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

    def _start_from_prefix(self, llm: Any, messages: Sequence[ChatMessage]) -> None:
        """Put the KV cache of the prompt's fixed prefix in place before ``create_chat_completion``.

        The fixed prefix is what every prompt of a kind shares — the system message and a worked
        example, i.e. all turns but the last (the answer prompts of the baseline and causal
        columns, of the next question, the translations): the tokens ``messages`` and
        ``messages[:-1]`` have in common. It is *always* evaluated on its own, from a cleared
        cache, and the state after it is kept (the last four prefixes): a later request with
        the same prefix loads that state instead of evaluating it (issue 12: the prefix of an
        answer prompt is ~250 tokens, seconds of prefill on a CPU). llama-cpp-python's
        prefix match then evaluates only the rest. Because the split does not depend on what
        ran before, a seed gives the same text whether the state was loaded or made — the
        reproducibility that ``llm.reset()`` before every request is there for (module doc).
        """
        if len(messages) < 2:
            return
        full, _ = self._prompt(llm, messages)
        head, _ = self._prompt(llm, messages[:-1])
        n = _longest_common_prefix([full, head])
        if n < 16 or n >= len(full) - 1:  # nothing worth keeping, or no suffix left to evaluate
            return
        key = tuple(full[:n])
        state = self._prefix_states.get(key)
        if state is not None:
            llm.load_state(state)
            self._prefix_states.move_to_end(key)
            self.last_prefix_reused = n
            return
        llm.eval(list(key))
        self._prefix_states[key] = llm.save_state()
        while len(self._prefix_states) > 4:
            self._prefix_states.popitem(last=False)

    # -- scoring (core.protocols.TokenScorer) -------------------------------------------

    def first_token_logprobs(self, messages: Sequence[ChatMessage], words: Sequence[str], *,
                             cancel: CancelToken | None = None) -> list[float]:
        """log P(first token of each word | the chat prompt), from one prompt evaluation.

        The prompt is the one ``stream`` would send (same template, same /no_think switch),
        evaluated from a cleared cache, so a score does not depend on what ran before. For
        Qwen3 with thinking off the template makes the model open an empty ``<think></think>``
        block first; that block is appended, so the logits read are those of the first
        *visible* token. Raises Cancelled when ``cancel`` fires during the evaluation.
        """
        import numpy as np

        if cancel is not None and cancel.is_set:
            raise Cancelled()
        self.load()
        llm = self._llm
        if not self._enter(llm):
            raise ModelUnavailable(f"{self.model_path.name} was closed while scoring; try again")
        try:
            toks, _ = self._prompt(llm, messages)
            if self.is_qwen3 and not self.thinking:
                opened = self._template_opens_think()
                toks += list(llm.tokenize(("\n\n</think>\n\n" if opened else "<think>\n\n</think>\n\n")
                                          .encode("utf-8"), add_bos=False, special=True))
            if len(toks) >= self._n_ctx:
                raise ValueError(f"prompt of {len(toks)} tokens does not fit n_ctx={self._n_ctx}")
            ids = []
            for w in words:
                t = llm.tokenize(w.encode("utf-8"), add_bos=False, special=False)
                if not t:
                    raise ValueError(f"first_token_logprobs: {w!r} has no tokens")
                ids.append(int(t[0]))
            llm.reset()
            self._arm_abort(llm, cancel, on=True)
            try:
                llm.eval(toks)
            except RuntimeError as exc:
                if self._stopping(cancel) and "llama_decode" in str(exc):
                    llm.reset()
                    raise Cancelled() from exc
                raise
            finally:
                self._arm_abort(llm, None, on=False)
            n_vocab = int(llm.n_vocab())
            row = np.ctypeslib.as_array(self._lc.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
            logits = row.astype(np.float64)
            top = float(logits.max())
            log_z = top + float(np.log(np.exp(logits - top).sum()))
            return [float(logits[i]) - log_z for i in ids]
        finally:
            self._leave()

    # -- batched generation (generate_many) --------------------------------------------

    def _prompt(self, llm: Any, messages: Sequence[ChatMessage]) -> tuple[list[int], tuple[str, ...]]:
        """Prompt tokens and the template's stop strings, as ``create_chat_completion`` makes them.

        The GGUF's ``tokenizer.chat_template`` rendered by llama-cpp-python's
        ``Jinja2ChatFormatter`` (what ``Llama`` builds from the same metadata), tokenized
        with special tokens parsed, BOS prepended when the vocabulary asks for it.
        """
        from llama_cpp import llama_chat_format

        template = str(self.metadata.get("tokenizer.chat_template", ""))
        if not template:
            raise ModelUnavailable(f"{self.model_path.name} has no chat template (tokenizer.chat_template) in "
                                   f"its GGUF metadata; use an instruction-tuned chat model")
        lc = self._lc
        vocab = lc.llama_model_get_vocab(llm.model)
        eos, bos = llm.token_eos(), llm.token_bos()
        vtext = llm._model.token_get_text  # the token's text, as Llama passes it to the template
        fmt = llama_chat_format.Jinja2ChatFormatter(
            template=template, eos_token=vtext(eos) if eos != -1 else "", bos_token=vtext(bos) if bos != -1 else "",
            stop_token_ids=[eos])
        resp = fmt(messages=self._chat_messages(messages))  # type: ignore[arg-type]  # plain dicts, as create_chat_completion gets
        stops = resp.stop if isinstance(resp.stop, list) else [resp.stop] if resp.stop else []
        toks = list(llm.tokenize(resp.prompt.encode("utf-8"), add_bos=False, special=True))
        if bos != -1 and lc.llama_vocab_get_add_bos(vocab):
            toks = [bos, *toks]
        return toks, tuple(s for s in stops if s)

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

    def _batch_context(self, llm: Any) -> Any:
        """The llama_context of generate_many: a unified KV cache of n_ctx cells shared by up to
        ``MAX_BATCH_SEQS`` sequences plus seq 0 (the shared prefix), otherwise the same
        parameters as the ``Llama`` context (threads, batch size, attention). Created once;
        sized like the main context, lowered if memory is short (see :func:`plan_n_ctx`)."""
        if self._bctx is not None:
            return self._bctx
        lc = self._lc
        params = type(llm.context_params).from_buffer_copy(llm.context_params)
        available = mem_available_bytes() if self.check_memory else None
        n_ctx = plan_n_ctx(self._n_ctx, self.metadata, 0, available, self.min_n_ctx)
        params.n_ctx = n_ctx
        params.n_batch = min(int(params.n_batch), n_ctx)
        params.n_ubatch = min(int(params.n_ubatch), int(params.n_batch))
        params.n_seq_max = MAX_BATCH_SEQS + 1
        params.kv_unified = True  # one cache: the prefix cells are shared, not copied
        ctx = lc.llama_init_from_model(llm.model, params)
        if not ctx:
            raise ModelUnavailable(f"llama.cpp could not create a batch context of n_ctx={n_ctx} for "
                                   f"{self.model_path.name}; free some memory or lower models.n_ctx")
        self._bctx, self._bctx_n_ctx = ctx, int(lc.llama_n_ctx(ctx))
        self._bctx_n_batch = int(params.n_batch)
        self._bbatch = lc.llama_batch_init(self._bctx_n_batch, 0, 1)
        self._prefix_tokens = []
        return ctx

    def _free_batch_context(self) -> None:
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
        if self._stopping(cancel):
            return False
        batch = self._bbatch
        batch.n_tokens = n
        if prefill:  # the abort hook only around prefill (see the module doc on its cost)
            self._arm_abort_ctx(ctx, cancel, on=True)
        try:
            rc = self._lc.llama_decode(ctx, batch)
        finally:
            if prefill:
                self._arm_abort_ctx(ctx, None, on=False)
                if _LLAMA_LOG.level == logging.CRITICAL:
                    _LLAMA_LOG.setLevel(logging.ERROR)
        counter[0] += 1
        if rc != 0 and self._stopping(cancel):
            return False
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} in the batch context of {self.model_path.name} "
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

    def generate_many(
        self,
        requests: Sequence[GenRequest],
        *,
        cancel: CancelToken | None = None,
        on_token: TokenSink | None = None,
    ) -> list[GenResult]:
        """Decode independent requests together: several sequences per ``llama_decode``.

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
          with others runs in the next wave. ``last_batch`` tells what was evaluated.
        * **Cancel** (or close()) stops every sequence within a decode step, or within a
          prefill graph node through the abort callback; unfinished sequences end as
          "cancelled" with their partial text, and the cache is cleared.
        * ``on_token(i, text)`` receives request i's visible text as it is decoded.

        One request gives exactly what :meth:`stream` gives (llama-cpp-python's chat
        template and sampler chain; tested, greedy and seeded). Several requests give the
        same texts as one at a time when they share a prefix and differ in short suffixes
        (tested); in general only up to llama.cpp's layout-dependent last bits (module
        doc, "Batched decoding"). The same call with the same seeds is reproducible.
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
            return self._generate_many(llm, reqs, cancel, on_token)
        finally:
            self._leave()

    def _generate_many(self, llm: Any, reqs: list[GenRequest], cancel: CancelToken | None,
                       on_token: TokenSink | None) -> list[GenResult]:
        t0 = time.perf_counter()
        lc = self._lc
        ctx = self._batch_context(llm)
        n_ctx = self._bctx_n_ctx
        n_batch = self._bctx_n_batch
        mem = lc.llama_get_memory(ctx)
        vocab = lc.llama_model_get_vocab(llm.model)
        opens_think = self._template_opens_think()
        seqs: list[_Seq] = []
        decodes = [0]
        try:
            for i, r in enumerate(reqs):
                toks, fmt_stops = self._prompt(llm, r.messages)
                if len(toks) >= n_ctx:
                    raise ValueError(f"Requested tokens ({len(toks)}) exceed context window of {n_ctx}; the prompt "
                                     f"must leave room for the answer (see prompting.build_answer_messages)")
                max_t = r.max_tokens if 0 < r.max_tokens <= n_ctx - len(toks) else n_ctx - len(toks)
                seqs.append(_Seq(i, toks, max_t, (*fmt_stops, *(x for x in r.stop if x)),
                                 self._sampler(r.temperature, r.seed), ThinkFilter(start_inside=opens_think),
                                 codecs.getincrementaldecoder("utf-8")(errors="replace")))
            # The shared prefix; every sequence keeps at least its last prompt token to evaluate.
            n_pre = min(_longest_common_prefix([s.tokens for s in seqs]), min(len(s.tokens) for s in seqs) - 1)
            if len(seqs) == 1 and not self.keep_prefix:
                n_pre = 0
            prefix = seqs[0].tokens[:n_pre]
            for sid in range(1, MAX_BATCH_SEQS + 1):
                lc.llama_memory_seq_rm(mem, sid, -1, -1)
            reused = _longest_common_prefix([self._prefix_tokens, prefix]) if self.keep_prefix else 0
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
            self.last_batch = BatchStats(
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


def _bind_abort_setter(llama_cpp: Any) -> Any:
    """ctypes binding of llama.cpp's ``llama_set_abort_callback`` (not wrapped by
    llama-cpp-python 0.3.x); None when the library does not export it."""
    lib = getattr(getattr(llama_cpp, "llama_cpp", None), "_lib", None)
    fn = getattr(lib, "llama_set_abort_callback", None) if lib is not None else None
    cb_type = getattr(llama_cpp.llama_cpp, "ggml_abort_callback", None) if lib is not None else None
    if fn is None or cb_type is None:
        return None
    fn.argtypes = [ctypes.c_void_p, cb_type, ctypes.c_void_p]
    fn.restype = None
    return fn


# --------------------------------------------------------------------------- batched decoding

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
    """One request in flight (see :meth:`LlamaCppGenerator.generate_many`)."""

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


def _longest_common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    first = seqs[0]
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs[1:]):
            return i
    return n
