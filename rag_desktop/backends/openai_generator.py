"""Generation through an OpenAI-compatible HTTP server (llama.cpp server, vLLM, llama-cpp-python's).

The scale path of docs/architecture.md ("Deploying a shared library"): the same
:class:`rag_desktop.core.protocols.Generator`
protocol, spoken over ``POST <base_url>/chat/completions`` with ``stream: true``
(server-sent events). Standard library only (``http.client``), so this backend has no
dependency to install.

Behaviour a caller can rely on:

* Every failure is a :class:`GeneratorError` whose message names the URL and what to
  check: connection refused, unknown host, timeout (no byte for ``timeout`` seconds —
  it bounds each wait, not the whole answer), an HTTP error status (with the server's
  own message), or a response that is not OpenAI-shaped.
* ``cancel`` closes the connection from a watcher thread, which unblocks a read that is
  waiting on the socket; the stream then ends with ``DONE(finish_reason="cancelled")``.
  Servers stop generating when their client goes away.
* ``count_tokens`` asks the server's tokenizer: ``/tokenize`` (llama.cpp server:
  ``{"content"}``; vLLM: ``{"model", "prompt"}``) or llama-cpp-python's
  ``/extras/tokenize/count``. Without any of them it falls back to
  :func:`estimate_tokens`, a deliberately high estimate so that prompts stay inside n_ctx.
* ``n_ctx``: the configured value, lowered to what the server reports (vLLM's
  ``max_model_len`` in ``/v1/models``, llama.cpp server's ``/props``) when it reports one.
* ``generate_many`` sends the requests concurrently, one connection and thread each (at
  most ``max_parallel`` at a time), so a server with parallel slots (llama.cpp server
  ``--parallel N``, vLLM) decodes them together; each request carries its own seed, and
  the results are what :meth:`OpenAIGenerator.stream` gives for it alone. llama-cpp-python's
  own server is the exception (:attr:`OpenAIGenerator.serial_server`): a new request
  interrupts the running one there, so the requests go one at a time.
* Thinking text (``<think>…</think>`` in the content) is removed as for the local
  backend; a ``reasoning_content`` field (vLLM's reasoning parser) is ignored. For models
  whose name contains "qwen3" the "/no_think" switch is added unless ``thinking=True``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rag_desktop.backends.http_client import EndpointError, HttpEndpoint
from rag_desktop.core.generation import GenRequest, GenResult, TokenSink, generate_sequentially
from rag_desktop.core.prompting import ThinkFilter
from rag_desktop.core.types import Cancelled, CancelToken, ChatMessage, GenEvent, GenEventKind

NO_THINK_SWITCH = "/no_think"
TOP_LOGPROBS = 20  # the most OpenAI's API allows
_WATCH_INTERVAL_S = 0.05  # cancel is noticed within this (plus the socket shutdown)


class GeneratorError(EndpointError):
    """The server could not be reached or answered something unusable; the message says what to check."""


_PIECE_RE = re.compile(r"[A-Za-z]+|\s+|.", re.DOTALL)


def estimate_tokens(text: str) -> int:
    """A deliberately high token count for when the server cannot tokenize.

    Rules, for the multilingual BPE vocabularies of Llama-3/Qwen-class models: an ASCII
    word is one token per 4 letters, rounded up; a single space is free (it merges into
    the next word); every other character — a digit (these vocabularies split numbers
    into digits), a CJK character (Qwen needs about 0.7 per character), punctuation — and
    every other whitespace run is one token. Measured against Qwen2.5's tokenizer this is
    1.0–2.0× the real count on English, Chinese and Markdown text. English-only
    vocabularies (e.g. SmolLM2) spend several tokens per Chinese character, so the
    estimate is low there. Overestimating only costs context; underestimating would
    overflow it.
    """
    n = 0
    for piece in _PIECE_RE.findall(text):
        if piece == " ":
            continue
        if piece[0].isascii() and piece[0].isalpha():
            n += math.ceil(len(piece) / 4)
        else:
            n += 1
    return n


class OpenAIGenerator:
    """A Generator backed by an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080/v1",
        model: str = "local",
        timeout: float = 120.0,
        *,
        n_ctx: int = 8192,
        api_key: str = "",
        thinking: bool = False,
        max_parallel: int = 8,
    ) -> None:
        self._http = HttpEndpoint(base_url, timeout, url_setting="models.openai_base_url",
                                  timeout_setting="models.openai_timeout_s", error=GeneratorError,
                                  api_key=api_key)
        self.base_url = self._http.base_url
        self.model = model
        self.timeout = self._http.timeout
        self.api_key = api_key
        self.thinking = thinking
        self.max_parallel = max(1, int(max_parallel))
        self._prefix = self._http.prefix  # e.g. "/v1"
        # Tokenizer and /props endpoints live at the server root, not under /v1.
        self._root = self._prefix[: -len("/v1")] if self._prefix.endswith("/v1") else self._prefix
        self._configured_n_ctx = n_ctx
        self._n_ctx = n_ctx
        self._loaded = False
        self._tokenize_route: tuple[str, str] | None = None  # (path, body kind), once probed
        self._tokenize_probed = False
        self.server_models: tuple[str, ...] = ()
        self.last_thinking = ""

    # -- protocol properties -------------------------------------------------------

    @property
    def identity(self) -> str:
        return f"openai:{self.base_url}#{self.model}"

    @property
    def n_ctx(self) -> int:
        return self._n_ctx

    # -- HTTP (backends/http_client.py, shared with the embedder and reranker) -----

    def _url(self, path: str) -> str:
        return self._http.url(path)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        return self._http.connection(timeout)

    def _headers(self, stream: bool = False) -> dict[str, str]:
        return self._http.headers(stream)

    def _network_error(self, url: str, exc: BaseException) -> EndpointError:
        return self._http.network_error(url, exc)

    def _json(self, method: str, path: str, body: dict[str, Any] | None = None,
              timeout: float | None = None) -> tuple[int, Any]:
        """(status, parsed JSON or None) for a small request."""
        return self._http.json(method, path, body, timeout)

    def _http_error(self, url: str, status: int, reason: str, raw: bytes) -> EndpointError:
        hint = {401: "check the API key", 403: "check the API key",
                404: f"check models.openai_base_url ({self.base_url}); it should end in /v1",
                400: f"check models.openai_model ({self.model}) and that the prompt fits the "
                     f"server's context"}
        return self._http.http_error(url, status, reason, raw, hint.get(status, "See the server log"))

    def _malformed(self, url: str, what: str, sample: str) -> EndpointError:
        return self._http.malformed(url, what, sample)

    # -- lifecycle --------------------------------------------------------------

    def load(self) -> None:
        """Check that the server answers ``GET /models`` and learn its context size (idempotent)."""
        if self._loaded:
            return
        path = f"{self._prefix}/models"
        url = self._url(path)
        status, data = self._json("GET", path)
        if status != 200:
            raise GeneratorError(f"{url} answered HTTP {status}; check models.openai_base_url "
                                 f"({self.base_url}); it should end in /v1", url)
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise self._malformed(url, "expected a JSON object with a 'data' list of models",
                                  json.dumps(data) if data is not None else "non-JSON body")
        entries = [m for m in data["data"] if isinstance(m, dict)]
        self.server_models = tuple(str(m.get("id", "")) for m in entries)
        limits = [int(m["max_model_len"]) for m in entries
                  if m.get("id") == self.model and isinstance(m.get("max_model_len"), int)]
        if not limits:
            limits = self._props_n_ctx()
        if limits:
            self._n_ctx = min(self._configured_n_ctx, limits[0])
        self._loaded = True

    def _props_n_ctx(self) -> list[int]:
        try:
            status, props = self._json("GET", f"{self._root}/props", timeout=min(self.timeout, 10.0))
        except GeneratorError:
            return []
        if status != 200 or not isinstance(props, dict):
            return []
        settings = props.get("default_generation_settings")
        for source in (settings if isinstance(settings, dict) else {}, props):
            value = source.get("n_ctx")
            if isinstance(value, int) and value > 0:
                return [value]
        return []

    def close(self) -> None:
        """Nothing is held between requests (one connection per request)."""
        self._loaded = False

    # -- tokens --------------------------------------------------------------------

    def _tokenize_body(self, kind: str, text: str) -> dict[str, Any]:
        if kind == "content":
            return {"content": text, "add_special": False}
        if kind == "prompt":
            return {"model": self.model, "prompt": text, "add_special_tokens": False}
        return {"model": self.model, "input": text}

    @staticmethod
    def _token_count(data: Any) -> int | None:
        if isinstance(data, dict):
            if isinstance(data.get("count"), int):
                return int(data["count"])
            if isinstance(data.get("tokens"), list):
                return len(data["tokens"])
        return None

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the server's tokenizer, else :func:`estimate_tokens`."""
        if not text:
            return 0
        if not self._tokenize_probed:
            self._tokenize_probed = True
            routes = [(f"{self._root}/tokenize", "content"), (f"{self._root}/tokenize", "prompt"),
                      (f"{self._root}/extras/tokenize/count", "input")]
            for path, kind in routes:
                try:
                    status, data = self._json("POST", path, self._tokenize_body(kind, text),
                                              timeout=min(self.timeout, 10.0))
                except GeneratorError:
                    break  # the server is unreachable: streaming will report it properly
                n = self._token_count(data) if status == 200 else None
                if n is not None:
                    self._tokenize_route = (path, kind)
                    return n
        if self._tokenize_route is None:
            return estimate_tokens(text)
        path, kind = self._tokenize_route
        status, data = self._json("POST", path, self._tokenize_body(kind, text))
        n = self._token_count(data) if status == 200 else None
        if n is None:
            raise self._malformed(self._url(path), "expected {'tokens': [...]} or {'count': n}",
                                  json.dumps(data) if data is not None else f"HTTP {status}")
        return n

    # -- generation ------------------------------------------------------------------

    def _payload(self, messages: Sequence[ChatMessage], max_tokens: int, temperature: float,
                 seed: int, stop: Sequence[str]) -> dict[str, Any]:
        msgs = [{"role": m.role, "content": m.content} for m in messages]
        if "qwen3" in self.model.lower() and not self.thinking:
            for msg in reversed(msgs):
                if msg["role"] == "user":
                    msg["content"] = f"{msg['content'].rstrip()} {NO_THINK_SWITCH}"
                    break
        body: dict[str, Any] = {"model": self.model, "messages": msgs, "max_tokens": max_tokens,
                                "temperature": temperature, "seed": seed, "stream": True}
        if stop:
            body["stop"] = list(stop)
        return body

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
        """Stream TOKEN events, then DONE ("stop", "length", … or "cancelled")."""
        path = f"{self._prefix}/chat/completions"
        url = self._url(path)
        if cancel is not None and cancel.is_set:
            yield GenEvent(GenEventKind.DONE, finish_reason="cancelled")
            return
        # The watcher starts before the request is sent: the longest wait is often for the
        # response headers, while the server evaluates a long prompt.
        conn = self._connection(self.timeout)
        finished = threading.Event()
        sockets: list[socket.socket] = []  # the connected socket, for the watcher
        watcher = None
        if cancel is not None:
            watcher = threading.Thread(target=_close_on_cancel, args=(conn, sockets, cancel, finished),
                                       name="openai-generator-cancel", daemon=True)
            watcher.start()
        payload = json.dumps(self._payload(messages, max_tokens, temperature, seed, stop)).encode("utf-8")
        think = ThinkFilter()
        finish = ""
        try:
            conn.request("POST", path, body=payload, headers=self._headers(stream=True))
            if conn.sock is not None:
                # http.client drops conn.sock for a response that ends with the connection
                # (no length, no chunking); the reader still uses the socket, so keep it.
                sockets.append(conn.sock)
            resp = conn.getresponse()
            if resp.status != 200:
                raise self._http_error(url, resp.status, resp.reason, _read_some(resp))
            ctype = resp.getheader("Content-Type", "")
            if "text/event-stream" not in ctype:
                # A server that ignores stream=true answers one JSON object.
                raw = _read_some(resp, 1 << 24)
                yield from self._whole_response(url, raw, think)
                return
            n_events = 0
            for data in _sse_data(resp):
                n_events += 1
                if data == "[DONE]":
                    break
                delta = self._stream_delta(url, data)
                if delta is None:  # e.g. a final usage-only event
                    continue
                text, reason = delta
                if text:
                    visible = think.feed(text)
                    if visible:
                        yield GenEvent(GenEventKind.TOKEN, visible)
                if reason:
                    finish = reason
                if cancel is not None and cancel.is_set:
                    break
            else:
                if not finish and not (cancel is not None and cancel.is_set):
                    if n_events == 0:
                        raise GeneratorError(
                            f"the server at {url} closed the stream without sending anything. "
                            f"llama-cpp-python's server does this when the prompt does not fit its "
                            f"context (start it with a larger --n_ctx); see the server log", url)
                    raise GeneratorError(
                        f"the server at {url} ended the stream before the answer was finished "
                        f"(no finish_reason, no [DONE]); see the server log", url)
        except (OSError, http.client.HTTPException) as exc:
            if cancel is None or not cancel.is_set:
                raise self._network_error(url, exc) from exc
        finally:
            finished.set()
            conn.close()
            if watcher is not None:
                watcher.join(timeout=1.0)
        if cancel is not None and cancel.is_set:
            yield GenEvent(GenEventKind.DONE, finish_reason="cancelled")
            return
        rest = think.flush()
        if rest:
            yield GenEvent(GenEventKind.TOKEN, rest)
        self.last_thinking = "".join(think.thinking)
        yield GenEvent(GenEventKind.DONE, finish_reason=finish or "stop")

    def _stream_delta(self, url: str, data: str) -> tuple[str, str] | None:
        """One SSE event of a streamed chat completion: (its text, its finish_reason or ""), or
        None for an event without choices; a server error or a malformed event raises."""
        try:
            event = json.loads(data)
        except ValueError:
            raise self._malformed(url, "an SSE event that is not JSON", data) from None
        if not isinstance(event, dict):
            raise self._malformed(url, "an SSE event that is not a JSON object", data)
        if "error" in event:
            err = event["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise GeneratorError(f"{url} reported an error while generating: {msg}", url)
        choices = event.get("choices")
        if not isinstance(choices, list):
            raise self._malformed(url, "an event without a 'choices' list", data)
        if not choices:
            return None
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            raise self._malformed(url, "a choice without a 'delta' object", data)
        text = delta.get("content") or ""
        if not isinstance(text, str):
            raise self._malformed(url, "delta.content is not a string", data)
        return text, str(choice["finish_reason"]) if choice.get("finish_reason") else ""

    def first_token_logprobs(self, messages: Sequence[ChatMessage], words: Sequence[str], *,
                             cancel: CancelToken | None = None, keep: bool = False,
                             after: bool = False) -> list[float]:
        """log P(first token of each word | the chat prompt): :class:`~rag_desktop.core.protocols.TokenScorer`.
        (``keep`` and ``after`` change nothing here: a server that caches prompts shares by itself.)

        One non-streamed request for a single token with ``logprobs`` and the OpenAI maximum of
        ``top_logprobs`` (20), greedy. A word is matched to a listed token by its text (surrounding
        spaces ignored); a word not among the 20 gets the smallest listed log-probability, an upper
        bound of its own (our choice: the judge compares margins, and a word outside the top 20 is
        unlikely either way). Raises NotImplementedError when the server returns no logprobs (some
        servers and models do not) or when the reply opens a thinking block, whose first token says
        nothing about the answer.
        """
        if cancel is not None and cancel.is_set:
            raise Cancelled()
        path = f"{self._prefix}/chat/completions"
        url = self._url(path)
        body = self._payload(messages, 1, 0.0, 0, ())
        body.update(stream=False, logprobs=True, top_logprobs=TOP_LOGPROBS)
        status, reason, raw = self._http.request("POST", path, body, None)
        if status != 200:
            raise self._http_error(url, status, reason, raw)
        try:
            data = json.loads(raw.decode("utf-8"))
            first = data["choices"][0]["logprobs"]["content"][0]
            top = {str(t["token"]).strip(): float(t["logprob"]) for t in first["top_logprobs"]}
        except (UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise NotImplementedError(f"{url} returned no token log-probabilities ({type(exc).__name__}: {exc}); "
                                      f"the judge falls back to sampled replies") from None
        if not top:
            raise NotImplementedError(f"{url} returned an empty top_logprobs list")
        if str(first.get("token", "")).strip().startswith("<think"):
            raise NotImplementedError(f"the model behind {url} opens a thinking block before answering")
        floor = min(top.values())
        return [top.get(w.strip(), floor) for w in words]

    @property
    def serial_server(self) -> bool:
        """True for llama-cpp-python's own server (recognised by its ``/extras/tokenize/count``
        route): it has no parallel slots and by default interrupts the running request when
        a new one arrives (``interrupt_requests``), so concurrent requests would cancel each
        other — generate_many sends them one at a time there."""
        if not self._tokenize_probed:
            with contextlib.suppress(GeneratorError):
                self.count_tokens("probe")
        return self._tokenize_route is not None and self._tokenize_route[0].endswith("/extras/tokenize/count")

    def generate_many(
        self,
        requests: Sequence[GenRequest],
        *,
        cancel: CancelToken | None = None,
        on_token: TokenSink | None = None,
    ) -> list[GenResult]:
        """The requests concurrently, each as :meth:`stream` would run it (see the module doc).

        A failure of any request is raised once all have ended (the first one, in request
        order); ``on_token`` is called from the worker threads, serialised by a lock.
        """
        reqs = list(requests)
        if len(reqs) <= 1 or self.max_parallel == 1 or self.serial_server:
            return generate_sequentially(self, reqs, cancel=cancel, on_token=on_token)
        lock = threading.Lock()

        def sink(offset: int) -> TokenSink | None:
            if on_token is None:
                return None

            def put(_i: int, text: str) -> None:
                with lock:
                    on_token(offset, text)
            return put

        def one(i: int) -> GenResult:
            return generate_sequentially(self, [reqs[i]], cancel=cancel, on_token=sink(i))[0]

        with ThreadPoolExecutor(max_workers=min(self.max_parallel, len(reqs)),
                                thread_name_prefix="openai-generate-many") as pool:
            futures = [pool.submit(one, i) for i in range(len(reqs))]
            errors = [f.exception() for f in futures]
        for err in errors:
            if err is not None:
                raise err
        return [f.result() for f in futures]

    def _whole_response(self, url: str, raw: bytes, think: ThinkFilter) -> Iterator[GenEvent]:
        sample = raw.decode("utf-8", errors="replace")
        try:
            data = json.loads(sample)
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
            finish = str(choice.get("finish_reason") or "stop")
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._malformed(url, "neither an SSE stream nor a chat.completion JSON object",
                                  sample) from None
        visible = think.feed(str(text)) + think.flush()
        if visible:
            yield GenEvent(GenEventKind.TOKEN, visible)
        self.last_thinking = "".join(think.thinking)
        yield GenEvent(GenEventKind.DONE, finish_reason=finish)

    def generate(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float,
                 seed: int, cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> str:
        """The whole answer as one string (convenience over :meth:`stream`)."""
        return "".join(e.text for e in self.stream(messages, max_tokens=max_tokens, temperature=temperature,
                                                    seed=seed, cancel=cancel, stop=stop)
                       if e.kind is GenEventKind.TOKEN)


def _read_some(resp: http.client.HTTPResponse, limit: int = 4096) -> bytes:
    try:
        return resp.read(limit)
    except (OSError, http.client.HTTPException):
        return b""


def _sse_data(resp: http.client.HTTPResponse) -> Iterator[str]:
    """The ``data`` payload of each server-sent event (multi-line data joined by newlines)."""
    lines: list[str] = []
    while True:
        raw = resp.readline()
        if not raw:
            if lines:
                yield "\n".join(lines)
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
            continue
        if line.startswith(":"):  # SSE comment / keep-alive ping
            continue
        field, _, value = line.partition(":")
        if field == "data":
            lines.append(value[1:] if value.startswith(" ") else value)


def _close_on_cancel(conn: http.client.HTTPConnection, sockets: list[socket.socket], cancel: CancelToken,
                     finished: threading.Event) -> None:
    """Shut the socket down when ``cancel`` is set, unblocking a reader waiting on it.

    If the socket does not exist yet (cancel during connect), keep watching until it does.
    """
    while not finished.wait(_WATCH_INTERVAL_S):
        if not cancel.is_set:
            continue
        sock = sockets[0] if sockets else conn.sock
        if sock is None:
            continue
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return
