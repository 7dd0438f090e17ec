"""The seams between the pure methods in ``core`` and the heavy models in ``backends``.

Core code receives these objects; it never imports a model library. Every
backend implements one of them, does nothing heavy in ``__init__`` and loads in an
idempotent ``load()`` (Haystack-style).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rag_desktop.core.gen_types import GenRequest, GenResult, TokenSink
from rag_desktop.core.types import CancelToken, ChatMessage, GenEvent, Lang, OcrLine

FloatArray = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """E(·) of both papers. All outputs are L2-normalised float32 rows."""

    @property
    def identity(self) -> str:
        """A stable string naming the model (a library refuses other embedders)."""
        ...

    @property
    def dim(self) -> int: ...

    def load(self) -> None: ...

    def embed_queries(self, texts: Sequence[str]) -> FloatArray: ...

    def embed_passages(self, texts: Sequence[str]) -> FloatArray: ...

    def embed_terms(self, terms: Sequence[str]) -> FloatArray:
        """E(t) for keyword terms, each embedded as a short text (paper 000 §3.1)."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """Inner-product search over normalised vectors with stable integer ids."""

    @property
    def ntotal(self) -> int: ...

    def add(self, ids: npt.NDArray[np.int64], vectors: FloatArray) -> None: ...

    def remove(self, ids: npt.NDArray[np.int64]) -> None: ...

    def search(
        self, query: FloatArray, k: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]: ...

    def ids(self) -> npt.NDArray[np.int64]: ...


@runtime_checkable
class Tokenizer(Protocol):
    """Word segmentation for kw(·): jieba for Chinese, a word tokenizer for English."""

    def load(self) -> None: ...

    def tokenize(self, text: str, lang: Lang) -> list[str]: ...

    def prior_idf(self, term: str) -> float | None:
        """IDF prior for a term never seen in the library (jieba's table), if known."""
        ...

    def add_words(self, words: Sequence[str]) -> None:
        """Teach the segmenter domain words (a corpus-derived user dictionary)."""
        ...

    def surface_form(self, term: str) -> str:
        """A readable word for a term (terms may be stems): what E(t) embeds and the UI shows."""
        ...


@runtime_checkable
class CrossEncoder(Protocol):
    """s(q, e): a relevance score for (query, passage) pairs; higher is better."""

    @property
    def identity(self) -> str: ...

    @property
    def is_substitute(self) -> bool:
        """True when this is not a trained cross-encoder (the UI labels it so)."""
        ...

    def load(self) -> None: ...

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float64]: ...


@runtime_checkable
class OcrEngine(Protocol):
    """Text lines and their boxes from a page image (scanned PDFs, photographed pages)."""

    @property
    def identity(self) -> str:
        """A stable string naming engine and models (cached results are keyed by it)."""
        ...

    def load(self) -> None: ...

    def recognise(self, image: npt.NDArray[np.uint8], scale: float) -> list[OcrLine]:
        """Lines of an RGB ``image`` (H×W×3) in reading order; boxes divided by ``scale``
        (pixels per output unit: dpi / 72 gives PDF points)."""
        ...


@runtime_checkable
class Generator(Protocol):
    """A chat model that streams tokens and can count its own tokens.

    ``generate_many`` runs independent requests (each with its own seed, stop strings and
    max_tokens) and returns their results in order; a backend that cannot batch delegates
    to :func:`rag_desktop.core.generation.generate_sequentially`, and a given request
    with a given seed gives the same text either way. Callers use
    :func:`rag_desktop.core.generation.generate_many`, which also accepts generators
    that only implement ``stream``.
    """

    @property
    def identity(self) -> str: ...

    @property
    def n_ctx(self) -> int: ...

    def load(self) -> None: ...

    def count_tokens(self, text: str) -> int: ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int,
        cancel: CancelToken | None = None,
        stop: Sequence[str] = (),
    ) -> Iterator[GenEvent]: ...

    def generate_many(
        self,
        requests: Sequence[GenRequest],
        *,
        cancel: CancelToken | None = None,
        on_token: TokenSink | None = None,
    ) -> list[GenResult]: ...

    def close(self) -> None: ...


@runtime_checkable
class TokenScorer(Protocol):
    """A generator that can also say how likely each of a few words is as its reply's first token.

    One prompt evaluation, no sampling: ``first_token_logprobs(messages, words)[i]`` is
    log P(first token of ``words[i]`` | the chat prompt of ``messages``), read off the
    logits after the template's generation prompt. The abstention asks it whether an answer's
    passages hold the answer (core.abstain.JUDGE). ``keep``: the next ``stream`` sends a prompt that
    shares this one's beginning, and may start from its evaluation; ``after``: this prompt shares its
    beginning with the last stream's, and may start from that (a server that caches prompts does
    both by itself). Optional: callers check
    ``isinstance(gen, TokenScorer)``; an instance that turns out unable to score (a server that
    returns no logprobs) raises NotImplementedError.
    """

    def first_token_logprobs(
        self, messages: Sequence[ChatMessage], words: Sequence[str], *, cancel: CancelToken | None = None,
        keep: bool = False, after: bool = False,
    ) -> list[float]: ...


@runtime_checkable
class PromptScorer(Protocol):
    """A generator that can say how likely the end of its own prompt is.

    One prompt evaluation, no sampling: ``tail_logprob(messages, tail)`` is the sum over the tokens of
    ``tail`` — the last message's text ends with it — of log P(token | the chat prompt before it), and
    how many tokens that is. The abstention compares a question's likelihood after the answer's
    passages with its likelihood after none (core.abstain.QUESTION_LIFT). The next ``stream`` of a
    prompt that starts the same way may start from this evaluation. Optional: callers check
    ``isinstance(gen, PromptScorer)``; a server's chat API gives no log-probabilities of prompt tokens.
    """

    def tail_logprob(self, messages: Sequence[ChatMessage], tail: str, *,
                     cancel: CancelToken | None = None) -> tuple[float, int]: ...
