"""Start llama-cpp-python's real server on loopback for a test, wait until it answers, stop it.

One place for what the generator and the embedder tests both need (they start the same server
with different arguments)."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

# What ``python -m llama_cpp.server`` imports beyond llama-cpp-python itself (its [server] extra).
SERVER_DEPS = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")


def server_model_or_skip() -> Path:
    """The SmolLM2 GGUF a test server runs; skips the test when the server's extra packages or the
    model are missing (the generator and the embedder tests both start one)."""
    from rag_desktop.app.model_files import smollm2_path
    from rag_desktop.backends.errors import ModelUnavailable

    missing = [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama_cpp.server needs {', '.join(missing)} (pip install 'llama-cpp-python[server]')")
    try:
        return smollm2_path()
    except ModelUnavailable as exc:
        pytest.skip(str(exc))


@contextlib.contextmanager
def running_server(argv: Sequence[str], port: int, log: Path, start_timeout: float = 120) -> Iterator[str]:
    """Run ``argv`` (a server listening on 127.0.0.1:``port``, output to ``log``); yields its
    ``/v1`` base URL once ``/v1/models`` answers, fails the test with the log's tail otherwise."""
    with log.open("wb") as out:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start in {start_timeout:.0f} s:\n{log.read_text()[-2000:]}")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
