"""Generator calls of CF-RAG: one completion, or a group of independent ones decoded together."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rag_desktop.core.cfrag.types import GenerationUsage
from rag_desktop.core.generation import GenRequest, GenResult, generate_many
from rag_desktop.core.protocols import Generator
from rag_desktop.core.types import CancelToken, ChatMessage, GenEventKind


@dataclass(frozen=True)
class Generated:
    text: str
    finish_reason: str
    mean_logprob: float | None


def generate_text(
    generator: Generator,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int,
    temperature: float,
    seed: int,
    cancel: CancelToken | None = None,
) -> Generated:
    """Run one chat completion and collect the streamed TOKEN events into text."""
    parts: list[str] = []
    logprobs: list[float] = []
    finish = ""
    for event in generator.stream(
        messages, max_tokens=max_tokens, temperature=temperature, seed=seed, cancel=cancel
    ):
        if event.kind == GenEventKind.TOKEN:
            parts.append(event.text)
            if event.logprob is not None:
                logprobs.append(event.logprob)
        elif event.kind == GenEventKind.DONE:
            finish = event.finish_reason
            break
    if cancel is not None:
        cancel.raise_if_set()
    mean_lp = float(np.mean(logprobs)) if logprobs else None
    return Generated("".join(parts), finish, mean_lp)


UsageSink = Callable[[GenerationUsage], None]


def generate_group(
    generator: Generator,
    step: str,
    requests: Sequence[GenRequest],
    *,
    cancel: CancelToken | None = None,
    usage: UsageSink | None = None,
) -> list[Generated]:
    """Independent calls decoded together (:func:`rag_desktop.core.generation.generate_many`).

    A batching backend decodes them in one batch and reads their shared prefix once;
    others run them one after another with the same results for the same seeds. The
    cost of the group goes to ``usage``; a cancel raises :class:`Cancelled` afterwards.
    """
    t0 = time.perf_counter()
    results: list[GenResult] = generate_many(generator, requests, cancel=cancel)
    if usage is not None:
        usage(GenerationUsage(
            step=step, calls=len(results), prompt_tokens=sum(r.prompt_tokens for r in results),
            cached_tokens=sum(r.cached_tokens for r in results),
            completion_tokens=sum(r.completion_tokens for r in results),
            seconds=time.perf_counter() - t0, truncated=sum(r.truncated for r in results),
            replayed=sum(r.replayed for r in results)))
    if cancel is not None:
        cancel.raise_if_set()
    return [Generated(r.text, r.finish_reason, r.mean_logprob) for r in results]
