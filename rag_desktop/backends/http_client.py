"""JSON over HTTP for the backends that talk to a server (generator, embedder, reranker).

Standard library only (``http.client``): one connection per request, nothing held between
requests. What the backends share lives here once:

* :class:`HttpEndpoint` parses and checks a base URL, opens requests and turns every
  network failure into an :class:`EndpointError` (or a subclass the backend names) whose
  message names the URL and the setting to check;
* :func:`error_detail` pulls the server's own message out of an error body (OpenAI's
  ``{"error": {"message"}}``, FastAPI's ``{"detail"}``, TEI's ``{"error"}``);
* :func:`with_retries` repeats a call on the failures that can pass (timeouts, dropped
  connections, HTTP 429/5xx) with exponential backoff, and never on the ones that cannot
  (4xx, malformed answers).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.types import CancelToken

T = TypeVar("T")

# Statuses a retry can cure: rate limiting, and a server that is busy, restarting or
# behind a proxy that lost it. 500 is included because llama.cpp and vLLM answer it for
# transient overloads as well as for real bugs; a real bug fails again and is reported.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


class EndpointError(RagError, RuntimeError):
    """A server could not be reached or answered something unusable; the message says what to check.

    ``retryable`` is True for failures that may pass if the same request is sent again.
    """

    kind = ErrorKind.ENDPOINT

    def __init__(self, message: str, url: str = "", *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.retryable = retryable


E = TypeVar("E", bound=EndpointError)


def error_detail(raw: bytes) -> str:
    """The server's own error message from an error body (JSON or text), at most 400 characters."""
    detail = raw.decode("utf-8", errors="replace").strip()
    try:
        err = json.loads(detail)
    except ValueError:
        return detail[:400]
    if isinstance(err, dict):
        inner = err.get("error", err.get("detail", err))
        detail = str(inner.get("message", inner) if isinstance(inner, dict) else inner)
    return detail[:400]


class HttpEndpoint:
    """A server at ``base_url``; requests go to paths on its host (``prefix`` is the URL's path).

    ``url_setting`` and ``timeout_setting`` are the settings keys named in error messages;
    ``error`` is the exception class raised (an :class:`EndpointError` subclass);
    ``kind`` says what the server should be ("an OpenAI-compatible server").
    """

    def __init__(
        self,
        base_url: str,
        timeout: float,
        *,
        url_setting: str,
        timeout_setting: str,
        error: type[EndpointError] = EndpointError,
        kind: str = "an OpenAI-compatible server",
        example: str = "http://HOST:PORT/v1",
        api_key: str = "",
    ) -> None:
        parts = urllib.parse.urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise error(f"{url_setting} must look like {example}, got {base_url!r}", base_url)
        if timeout <= 0:
            raise error(f"{timeout_setting} must be > 0, got {timeout}", base_url)
        self.base_url = base_url.strip().rstrip("/")
        self.timeout = float(timeout)
        self.api_key = api_key
        self.url_setting = url_setting
        self.timeout_setting = timeout_setting
        self.error = error
        self.kind = kind
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")  # e.g. "/v1"

    def url(self, path: str) -> str:
        netloc = self.host if self.port is None else f"{self.host}:{self.port}"
        if ":" in self.host and not self.host.startswith("["):
            netloc = f"[{self.host}]" + ("" if self.port is None else f":{self.port}")
        return f"{self.scheme}://{netloc}{path}"

    def connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        t = self.timeout if timeout is None else timeout
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=t)
        return http.client.HTTPConnection(self.host, self.port, timeout=t)

    def headers(self, stream: bool = False) -> dict[str, str]:
        headers = {"Content-Type": "application/json",
                   "Accept": "text/event-stream" if stream else "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def network_error(self, url: str, exc: BaseException) -> EndpointError:
        retryable = True
        if isinstance(exc, ConnectionRefusedError):
            why = (f"cannot connect to {url}: connection refused. Check that the server is running "
                   f"and that {self.url_setting} ({self.base_url}) names its host and port")
        elif isinstance(exc, (TimeoutError, socket.timeout)):
            why = (f"no response from {url} within {self.timeout:g} s. Check that the server is running "
                   f"and not overloaded, or raise {self.timeout_setting}")
        elif isinstance(exc, socket.gaierror):
            retryable = False
            why = f"cannot resolve the host of {url} ({exc}). Check {self.url_setting} ({self.base_url})"
        elif isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
            why = (f"the server at {url} closed the connection ({exc.__class__.__name__}). "
                   f"Check the server's log; is {self.url_setting} {self.kind}?")
        elif isinstance(exc, http.client.HTTPException):
            retryable = False
            why = (f"malformed HTTP response from {url} ({exc.__class__.__name__}: {exc}). "
                   f"Is {self.url_setting} ({self.base_url}) {self.kind}?")
        else:
            why = f"network error talking to {url}: {exc}. Check {self.url_setting} ({self.base_url})"
        return self.error(why, url, retryable=retryable)

    def malformed(self, url: str, what: str, sample: str) -> EndpointError:
        return self.error(
            f"malformed response from {url}: {what} (got {sample[:200]!r}). "
            f"Is {self.url_setting} ({self.base_url}) {self.kind}?", url)

    def open(self, method: str, path: str, body: Any, *, stream: bool = False,
             timeout: float | None = None) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send the request and read the status line; the caller reads and closes."""
        url = self.url(path)
        conn = self.connection(timeout)
        try:
            payload = json.dumps(body).encode("utf-8") if body is not None else None
            conn.request(method, path, body=payload, headers=self.headers(stream))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise self.network_error(url, exc) from exc
        return conn, resp

    def request(self, method: str, path: str, body: Any = None,
                timeout: float | None = None) -> tuple[int, str, bytes]:
        """(status, reason, raw body) of a small request."""
        url = self.url(path)
        conn, resp = self.open(method, path, body, timeout=timeout)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise self.network_error(url, exc) from exc
        finally:
            conn.close()
        return resp.status, resp.reason, raw

    def json(self, method: str, path: str, body: Any = None,
             timeout: float | None = None) -> tuple[int, Any]:
        """(status, parsed JSON or None) of a small request."""
        status, _, raw = self.request(method, path, body, timeout)
        try:
            return status, json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, ValueError):
            return status, None

    def http_error(self, url: str, status: int, reason: str, raw: bytes, hint: str) -> EndpointError:
        return self.error(f"{url} answered HTTP {status} {reason}: {error_detail(raw)}. {hint}", url,
                          status=status, retryable=status in RETRYABLE_STATUSES)


def with_retries(
    call: Callable[[], T],
    *,
    retries: int,
    backoff_s: float = 0.5,
    max_backoff_s: float = 8.0,
    cancel: CancelToken | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, repeated up to ``retries`` more times on a retryable :class:`EndpointError`.

    The n-th retry waits ``min(backoff_s · 2^(n-1), max_backoff_s)`` seconds (exponential
    backoff, so a server that is restarting gets room rather than a burst). The last error
    is raised with the number of attempts added to its message. Cancel is checked before
    each attempt.
    """
    attempt = 0
    while True:
        if cancel is not None:
            cancel.raise_if_set()
        try:
            return call()
        except EndpointError as exc:
            if not exc.retryable or attempt >= retries:
                if attempt:
                    exc.args = (f"{exc} (gave up after {attempt + 1} attempts)", *exc.args[1:])
                raise
            sleep(min(backoff_s * (2 ** attempt), max_backoff_s))
            attempt += 1
