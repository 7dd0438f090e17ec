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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_desktop.core.types import Cancelled, CancelToken, ChatMessage, GenEventKind

if TYPE_CHECKING:
    from rag_desktop.core.protocols import Generator

FinishReason = str  # "stop" (end of text or a stop string), "length" (max_tokens), "cancelled"
TokenSink = Callable[[int, str], None]  # (request index, visible text piece)


@dataclass(frozen=True)
class GenRequest:
    """One chat completion: the prompt and its own sampling settings (seed per request)."""

    messages: tuple[ChatMessage, ...]
    max_tokens: int
    temperature: float
    seed: int
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenResult:
    """The text of one request and what it cost.

    ``finish_reason`` is "length" when the answer stopped because it used all of
    ``max_tokens`` (the text is then cut where the budget ran out). Token counts are -1
    when the backend cannot tell; ``prompt_tokens`` counts every prompt token, of which
    ``cached_tokens`` were not evaluated for this request (read from a prefix shared with
    other requests or kept from an earlier call).
    """

    text: str
    finish_reason: FinishReason
    prompt_tokens: int = -1
    completion_tokens: int = -1
    cached_tokens: int = 0
    mean_logprob: float | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


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
    translation (issue 12) ask for one line and must never hold a question up for long.

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
