"""Several independent generator calls at once: the request/result types and the fallback.

:meth:`rag_desktop.core.protocols.Generator.generate_many` takes a sequence of
:class:`GenRequest` and returns one :class:`GenResult` per request, in order. A backend
that can decode several sequences together (llama.cpp: several sequences in one
``llama_decode``; an HTTP server: parallel slots) does so; a backend that cannot calls
:func:`generate_sequentially`, which runs the requests one after another through
``stream`` — so a given request with a given seed yields the same text either way.

:func:`generate_many` is what callers use: it dispatches to the backend's own
``generate_many`` and falls back to :func:`generate_sequentially` for generator objects
that only implement ``stream`` (scripted test generators, older wrappers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from rag_desktop.core.gen_types import FinishReason as FinishReason
from rag_desktop.core.gen_types import GenRequest as GenRequest
from rag_desktop.core.gen_types import GenResult as GenResult
from rag_desktop.core.gen_types import TokenSink as TokenSink
from rag_desktop.core.types import Cancelled, CancelToken, ChatMessage, GenEvent, GenEventKind

if TYPE_CHECKING:
    from rag_desktop.core.protocols import Generator

def collect_text(events: Iterator[GenEvent]) -> str:
    """A stream's tokens joined: the whole reply, stripped."""
    return "".join(e.text for e in events if e.kind == GenEventKind.TOKEN).strip()


def generate_sequentially(
    generator: Generator,
    requests: Sequence[GenRequest],
    *,
    cancel: CancelToken | None = None,
    on_token: TokenSink | None = None,
) -> list[GenResult]:
    """The fallback of ``generate_many``: each request through ``generator.stream`` in turn.

    After a cancel, the running request ends as "cancelled" with its partial text and
    the ones not started end as "cancelled" with no text (no exception, as ``stream``).
    Prompt tokens are counted with ``count_tokens`` over the message contents (the chat
    template's few tokens are not included); completion tokens from the text.
    """
    out: list[GenResult] = []
    for i, req in enumerate(requests):
        if cancel is not None and cancel.is_set:
            out.append(GenResult("", "cancelled", 0, 0))
            continue
        parts: list[str] = []
        logprobs: list[float] = []
        finish = ""
        for event in generator.stream(req.messages, max_tokens=req.max_tokens, temperature=req.temperature,
                                      seed=req.seed, cancel=cancel, stop=req.stop):
            if event.kind == GenEventKind.TOKEN:
                parts.append(event.text)
                if event.logprob is not None:
                    logprobs.append(event.logprob)
                if on_token is not None and event.text:
                    on_token(i, event.text)
            elif event.kind == GenEventKind.DONE:
                finish = event.finish_reason
                break
        text = "".join(parts)
        prompt = sum(generator.count_tokens(m.content) for m in req.messages)
        out.append(GenResult(text, finish or "stop", prompt, generator.count_tokens(text) if text else 0, 0,
                             sum(logprobs) / len(logprobs) if logprobs else None))
    return out


def generate_many(
    generator: Generator,
    requests: Sequence[GenRequest],
    *,
    cancel: CancelToken | None = None,
    on_token: TokenSink | None = None,
) -> list[GenResult]:
    """``generator.generate_many`` when the object has it, else :func:`generate_sequentially`."""
    if not requests:
        return []
    many = getattr(generator, "generate_many", None)
    if callable(many):
        results = list(many(requests, cancel=cancel, on_token=on_token))
        if len(results) != len(requests):
            raise ValueError(f"generator {generator.identity}: generate_many returned {len(results)} results "
                             f"for {len(requests)} requests")
        return results
    return generate_sequentially(generator, requests, cancel=cancel, on_token=on_token)


class ReplayGenerator:
    """A generator that answers a request it has already answered from memory (eval-qa's paired
    CF-RAG ablations).

    Why: an ablation (``cfrag_no_cf``, ``cfrag_no_div``, ``cfrag_no_causal``) changes one step of
    CF-RAG; every call before that step, and every later call whose prompt the change did not
    touch, is the same request with the same seed as in the full method's run of the question.
    Decoding it again costs the time (step 1 alone is ~30 % of a CF-RAG question here) and adds
    the backend's run-to-run noise to the difference the ablation is meant to measure (two runs of
    one fixture question at one seed gave different answers). Replayed, the ablations are *paired*
    with the full method: they differ from it exactly where the ablated step changed a prompt.
    The price, said where it is reported: a replayed call takes no time, so an ablation's latency
    is not its own (``GenResult.replayed``; eval-qa counts them per question).

    Only :meth:`generate_many` replays (every CF-RAG call goes through it); ``stream`` passes
    through. A request is the key as a whole — messages, max_tokens, temperature, seed, stops —
    and only finished results ("stop", "length") are kept, never a cancelled one. The misses of
    a group are decoded together by the wrapped backend, in their order.
    """

    def __init__(self, inner: Generator) -> None:
        self.inner = inner
        self._memory: dict[GenRequest, GenResult] = {}
        self._lock = threading.Lock()
        self.replayed = 0  # requests answered from memory so far

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def n_ctx(self) -> int:
        return self.inner.n_ctx

    def load(self) -> None:
        self.inner.load()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        return self.inner.stream(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                 cancel=cancel, stop=stop)

    def generate_many(self, requests: Sequence[GenRequest], *, cancel: CancelToken | None = None,
                      on_token: TokenSink | None = None) -> list[GenResult]:
        with self._lock:
            known = {i: self._memory[r] for i, r in enumerate(requests) if r in self._memory}
        todo = [i for i in range(len(requests)) if i not in known]
        sink = None if on_token is None else (lambda j, piece: on_token(todo[j], piece))
        fresh = generate_many(self.inner, [requests[i] for i in todo], cancel=cancel, on_token=sink)
        out: dict[int, GenResult] = {}
        with self._lock:
            for i, res in zip(todo, fresh, strict=True):
                if res.finish_reason in ("stop", "length"):
                    self._memory[requests[i]] = res
                out[i] = res
            self.replayed += len(known)
        for i, res in known.items():
            # nothing of the prompt was evaluated for this request: all of it counts as cached
            out[i] = replace(res, cached_tokens=max(res.prompt_tokens, 0), replayed=True)
            if on_token is not None and res.text:
                on_token(i, res.text)
        return [out[i] for i in range(len(requests))]

    def export(self) -> list[dict[str, object]]:
        """The memory as JSON-ready records, each tagged with the backend's identity.

        Why: eval-qa's ``--replay-store`` keeps it across runs, so a change to one late step
        (the synthesis prompt, say) is measured paired with an earlier run at the cost of
        the calls it changed — minutes instead of the whole matrix again — and without the
        backend's run-to-run noise in every earlier step.
        """
        with self._lock:
            items = list(self._memory.items())
        return [{"identity": self.identity, "request": _request_json(req), "result": asdict(res)}
                for req, res in items]

    def absorb(self, records: Sequence[dict[str, object]]) -> int:
        """Remember the records of :meth:`export` made by this backend (same ``identity``:
        a store from another model is never replayed); returns how many were taken."""
        taken = 0
        with self._lock:
            for rec in records:
                req, res = rec.get("request"), rec.get("result")
                if not isinstance(req, dict) or not isinstance(res, dict):
                    raise TypeError(f"a replay record needs a request and a result object: {rec!r:.120}")
                if rec.get("identity") != self.identity:
                    continue
                key = GenRequest(tuple(ChatMessage(m["role"], m["content"]) for m in req["messages"]),
                                 int(req["max_tokens"]), float(req["temperature"]), int(req["seed"]),
                                 tuple(req.get("stop", ())))
                self._memory[key] = GenResult(**{**res, "replayed": False})
                taken += 1
        return taken

    def close(self) -> None:
        self.inner.close()


def _request_json(req: GenRequest) -> dict[str, object]:
    return {"messages": [{"role": m.role, "content": m.content} for m in req.messages],
            "max_tokens": req.max_tokens, "temperature": req.temperature, "seed": req.seed,
            "stop": list(req.stop)}


@dataclass(frozen=True)
class LineResult:
    """What :func:`generate_line` read: the reply (up to its first line break), whether the
    deadline cut it, and the seconds it took."""

    text: str
    timed_out: bool
    seconds: float


def generate_line(generator: Generator, messages: Sequence[ChatMessage], *, max_tokens: int, seed: int,
                  timeout_s: float, cancel: CancelToken | None = None) -> LineResult:
    """One greedy line from ``generator`` under a deadline: the follow-up rewrite and the question
    translation ask for one line and must never hold a question up for long.

    The deadline also stops a model that is still reading the prompt (no token yet); it is reported
    as ``timed_out``, never raised. A user's ``cancel`` raises Cancelled; a generator error
    propagates, for the caller to fall back on the user's words.
    """
    t0 = time.perf_counter()
    deadline = CancelToken()
    timer = threading.Timer(timeout_s, deadline.set)
    timer.daemon = True
    timer.start()
    parts: list[str] = []
    try:
        for ev in generator.stream(messages, max_tokens=max_tokens, temperature=0.0, seed=seed, cancel=deadline):
            if cancel is not None:
                cancel.raise_if_set()
            if ev.kind == GenEventKind.TOKEN:
                parts.append(ev.text)
                if "\n" in "".join(parts).strip():
                    break  # one line is all that was asked for
    except Cancelled:
        if cancel is not None and cancel.is_set:
            raise
    finally:
        timer.cancel()
    return LineResult("".join(parts), deadline.is_set, time.perf_counter() - t0)
