"""The request and result of one generator call (``Generator.generate_many``; core.generation's doc).

Their own module because both sides use them: core.protocols declares the Generator seam with
them, and core.generation (which calls that seam) builds them — so neither imports the other
for its types (docs/architecture.md, "Limits": no import cycle, annotations included).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rag_desktop.core.types import ChatMessage

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
    replayed: bool = False  # served from a ReplayGenerator's memory: written earlier, not now

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"
