"""In-process generation with llama-cpp-python (any GGUF; the embedded Qwen2.5-0.5B by default).

Implements :class:`rag_desktop.core.protocols.Generator`. ``llama_cpp`` is imported only
inside :meth:`LlamaCppGenerator.load`; constructing the object is free.

Choices made where issue 5 leaves room (each one tested in tests/test_llama_cpp_generator.py):

* **Chat template**: from the GGUF metadata (llama-cpp-python's ``create_chat_completion``
  renders ``tokenizer.chat_template``; we never pass a ``chat_format``).
* **n_ctx**: capped at the model's training context (``<arch>.context_length``; beyond it
  quality collapses), then lowered *before* loading while the estimated memory
  (weights + f16 KV cache + a fixed compute allowance) exceeds 90 % of MemAvailable, and
  halved *after* a failed context creation, never below ``min_n_ctx`` (2048).
  Linux overcommits, so an allocation rarely fails outright — without the estimate a too
  large context would end in the OOM killer rather than in the fallback.
* **Threads**: physical cores (unique (physical id, core id) pairs in /proc/cpuinfo, no
  more than the CPUs this process may run on); llama.cpp's decode is memory-bound and
  hyper-threads slow it down.
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
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import struct
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from rag_desktop.backends.errors import ModelUnavailable, require
from rag_desktop.core.prompting import ThinkFilter
from rag_desktop.core.types import CancelToken, ChatMessage, GenEvent, GenEventKind

_LLAMA_LOG = logging.getLogger("llama-cpp-python")  # llama-cpp-python routes llama.cpp's log here

MIN_N_CTX = 2048
COMPUTE_ALLOWANCE_BYTES = 384 * 1024 * 1024  # llama.cpp compute buffers + runtime, measured ~250 MB
MEMORY_FRACTION = 0.9
NO_THINK_SWITCH = "/no_think"


# --------------------------------------------------------------------------- GGUF metadata

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def _read(fh: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = fh.read(size)
    if len(data) != size:
        raise ValueError("unexpected end of file")
    return struct.unpack(fmt, data)[0]


def _read_str(fh: BinaryIO) -> str:
    n = _read(fh, "<Q")
    return fh.read(n).decode("utf-8", errors="replace")


def _skip_value(fh: BinaryIO, vtype: int) -> None:
    if vtype in _GGUF_SCALARS:
        fh.seek(struct.calcsize(_GGUF_SCALARS[vtype]), os.SEEK_CUR)
    elif vtype == _GGUF_STRING:
        fh.seek(_read(fh, "<Q"), os.SEEK_CUR)
    elif vtype == _GGUF_ARRAY:
        etype, count = _read(fh, "<I"), _read(fh, "<Q")
        if etype in _GGUF_SCALARS:
            fh.seek(count * struct.calcsize(_GGUF_SCALARS[etype]), os.SEEK_CUR)
        else:
            for _ in range(count):
                _skip_value(fh, etype)
    else:
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    """Scalar and string key/values of a GGUF header (arrays are skipped), without llama.cpp.

    Used before loading, to size the context and detect Qwen3. GGUF v2/v3 layout:
    magic, version u32, tensor count u64, kv count u64, then (string key, u32 type, value).
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            if fh.read(4) != b"GGUF":
                raise ModelUnavailable(f"{p} is not a GGUF model file (wrong magic bytes)")
            version = _read(fh, "<I")
            if version < 2:
                raise ModelUnavailable(f"{p} is GGUF version {version}; versions 2 and 3 are supported")
            _read(fh, "<Q")  # tensor count
            n_kv = _read(fh, "<Q")
            meta: dict[str, Any] = {}
            for _ in range(n_kv):
                key = _read_str(fh)
                vtype = _read(fh, "<I")
                if vtype in _GGUF_SCALARS:
                    meta[key] = _read(fh, _GGUF_SCALARS[vtype])
                elif vtype == _GGUF_STRING:
                    meta[key] = _read_str(fh)
                else:
                    _skip_value(fh, vtype)
            return meta
    except (OSError, ValueError, struct.error) as exc:
        if isinstance(exc, ModelUnavailable):
            raise
        raise ModelUnavailable(f"cannot read the GGUF header of {p}: {exc}") from exc


def kv_cache_bytes(meta: dict[str, Any], n_ctx: int) -> int:
    """f16 K and V for every layer: 2 · n_layer · n_ctx · n_head_kv · head_dim · 2 bytes."""
    arch = str(meta.get("general.architecture", ""))
    n_layer = int(meta.get(f"{arch}.block_count", 0))
    n_head = int(meta.get(f"{arch}.attention.head_count", 0)) or 1
    n_head_kv = int(meta.get(f"{arch}.attention.head_count_kv", n_head))
    n_embd = int(meta.get(f"{arch}.embedding_length", 0))
    k_dim = int(meta.get(f"{arch}.attention.key_length", n_embd // n_head))
    v_dim = int(meta.get(f"{arch}.attention.value_length", k_dim))
    return n_layer * n_ctx * n_head_kv * (k_dim + v_dim) * 2


def mem_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def plan_n_ctx(requested: int, meta: dict[str, Any], model_bytes: int, available: int | None,
               min_n_ctx: int = MIN_N_CTX) -> int:
    """The context size to try first: capped by training context and by memory (see module doc)."""
    arch = str(meta.get("general.architecture", ""))
    n_train = int(meta.get(f"{arch}.context_length", 0) or 0)
    n_ctx = min(requested, n_train) if n_train > 0 else requested
    floor = min(min_n_ctx, n_ctx)
    if available is None:
        return n_ctx
    budget = available * MEMORY_FRACTION - model_bytes - COMPUTE_ALLOWANCE_BYTES
    while n_ctx > floor and kv_cache_bytes(meta, n_ctx) > budget:
        n_ctx = max(floor, n_ctx // 2)
    return n_ctx


# --------------------------------------------------------------------------- threads


def physical_cores(cpuinfo: str | None = None, usable: int | None = None) -> int:
    """Physical cores this process can use (see module doc); at least 1."""
    if usable is None:
        try:
            usable = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            usable = os.cpu_count() or 1
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read()
        except OSError:
            cpuinfo = ""
    cores: set[tuple[str, str]] = set()
    phys = core = ""
    for line in [*cpuinfo.splitlines(), ""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip():
            if core:
                cores.add((phys, core))
            phys = core = ""
    n = len(cores) if cores else usable
    return max(1, min(n, usable))


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
            meta = read_gguf_metadata(self.model_path)
            available = mem_available_bytes() if self.check_memory else None
            n_ctx = plan_n_ctx(self.requested_n_ctx, meta, self.model_path.stat().st_size,
                               available, self.min_n_ctx)
            self.load_attempts = []
            floor = min(self.min_n_ctx, n_ctx)
            while True:
                self.load_attempts.append(n_ctx)
                try:
                    llm = llama_cpp.Llama(
                        model_path=str(self.model_path),
                        n_ctx=n_ctx,
                        n_batch=min(self.n_batch, n_ctx),
                        n_threads=self.threads,
                        n_threads_batch=self.threads,
                        n_gpu_layers=self.n_gpu_layers,
                        verbose=False,
                    )
                    break
                except ValueError as exc:
                    if "context" in str(exc).lower() and n_ctx > floor:
                        n_ctx = max(floor, n_ctx // 2)
                        continue
                    raise ModelUnavailable(
                        f"llama.cpp could not load {self.model_path} with n_ctx={n_ctx}: {exc}. "
                        f"Check that the file is a complete GGUF model and that enough memory is free"
                    ) from exc
            self._llm = llm
            self._n_ctx = int(llm.n_ctx())
            self.metadata = {**meta, **dict(llm.metadata)}
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
        if self._set_abort is None:
            return
        self._abort_token = token
        self._set_abort(llm.ctx, self._abort_cb if on else self._null_cb, None)

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
                        chunks = llm.create_chat_completion(
                            messages=self._chat_messages(messages),
                            max_tokens=max_tokens,
                            temperature=temperature,
                            seed=seed,
                            stop=list(stop),
                            stream=True,
                        )
                    try:
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
