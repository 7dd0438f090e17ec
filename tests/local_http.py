"""A fake HTTP server on loopback for a test: the OpenAI-compatible generator and embedder and the
TEI reranker tests each script one with their own request handler."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free port of 127.0.0.1 in a thread; yields its base URL."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


class JsonHandler(http.server.BaseHTTPRequestHandler):
    """A quiet request handler that reads a JSON request body and answers JSON (or given bytes)."""

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def _request_json(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def _send(self, status: int, obj: object, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
