"""The cross-encoder s(q, e) behind an HTTP endpoint in Hugging Face TEI's ``/rerank`` shape.

``POST <reranker_url>/rerank`` with ``{"query", "texts", "raw_scores": true, "truncate": true}``
answers ``[{"index": i, "score": s}, ...]`` (TEI sorts by score; we put the scores back in
input order). TEI serves bge-reranker-v2-m3 this way, and so do the rerank routes of
Infinity and llama.cpp's server (``--reranking``, which also accepts ``documents`` — we send
``texts`` as TEI does). Standard library HTTP (:mod:`rag_desktop.backends.http_client`).

Scores are the raw logits (``raw_scores: true``), like :class:`FlagCrossEncoder` returns, so
CF-RAG's φ_causal differences are on the same scale whichever backend scores.
Passages go out in batches of ``batch_size`` (TEI refuses more than its
``--max-client-batch-size``, 32 by default); failures are retried like the embedder's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.http_client import EndpointError, HttpEndpoint, with_retries
from rag_desktop.core.checks import at_least


class RerankServerError(EndpointError):
    """The rerank server could not be reached or answered something unusable."""


class HttpCrossEncoder:
    """:class:`~rag_desktop.core.protocols.CrossEncoder` over a TEI-style ``/rerank`` endpoint."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        batch_size: int = 16,
        retries: int = 3,
        backoff_s: float = 0.5,
        api_key: str = "",
    ) -> None:
        at_least("HttpCrossEncoder", batch_size=(batch_size, 1))
        self._http = HttpEndpoint(base_url, timeout, url_setting="models.reranker_url",
                                  timeout_setting="models.reranker_timeout_s", error=RerankServerError,
                                  kind="a TEI-style rerank server", example="http://HOST:PORT", api_key=api_key)
        self.base_url = self._http.base_url
        self._path = f"{self._http.prefix}/rerank"
        self.batch_size = batch_size
        self.retries = retries
        self.backoff_s = backoff_s
        self._loaded = False

    @property
    def identity(self) -> str:
        return f"rerank:{self.base_url}"

    @property
    def is_substitute(self) -> bool:
        return False

    def load(self) -> None:
        """Score one probe pair, so a wrong URL fails here and not in the middle of a question."""
        if self._loaded:
            return
        self._score_batch("probe", ["probe"])
        self._loaded = True

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float64]:
        items = list(passages)
        out = np.empty(len(items), dtype=np.float64)
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            out[start : start + len(batch)] = self._score_batch(query, batch)
        return out

    def _score_batch(self, query: str, texts: list[str]) -> list[float]:
        return with_retries(lambda: self._post(query, texts), retries=self.retries, backoff_s=self.backoff_s)

    def _post(self, query: str, texts: list[str]) -> list[float]:
        url = self._http.url(self._path)
        body = {"query": query, "texts": texts, "raw_scores": True, "truncate": True}
        status, reason, raw = self._http.request("POST", self._path, body)
        if status != 200:
            hint = {404: f"check models.reranker_url ({self.base_url}): the server must serve POST /rerank",
                    413: "the passages are too large for the server (start TEI with a larger "
                         "--max-client-batch-size or --max-batch-tokens)",
                    422: "the server did not accept the request (is it a reranker model?)"}
            raise self._http.http_error(url, status, reason, raw, hint.get(status, "See the server log"))
        sample = raw.decode("utf-8", errors="replace")
        try:
            data: Any = json.loads(sample)
        except ValueError:
            raise self._http.malformed(url, "a body that is not JSON", sample) from None
        if isinstance(data, dict) and isinstance(data.get("results"), list):
            data = data["results"]  # llama.cpp's and Jina/Cohere-style servers wrap the list
        if not isinstance(data, list) or len(data) != len(texts):
            raise self._http.malformed(url, f"expected a list of {len(texts)} {{index, score}} objects", sample)
        scores: list[float | None] = [None] * len(texts)
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get("score", item.get("relevance_score")) if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < len(texts) or scores[index] is not None:
                raise self._http.malformed(url, f"a bad or repeated 'index' {index!r}", sample)
            if not isinstance(score, (int, float)) or not math.isfinite(float(score)):
                raise self._http.malformed(url, f"a score that is not a finite number: {score!r}", sample)
            scores[index] = float(score)
        return [float(s) for s in scores if s is not None]
