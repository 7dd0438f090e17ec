"""The OpenAI-compatible /v1/embeddings Embedder and the shared HTTP helpers.

Against a REAL server: llama-cpp-python's ``python -m llama_cpp.server --embedding true``
serving the SmolLM2 GGUF that ships in a package, on loopback (slow). Failure modes
(HTTP 500/503, timeouts, wrong dimensions, malformed bodies, a model swapped mid-session)
use a scripted ``http.server`` on loopback; connection refused uses a closed port.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from llama_server import running_server, server_model_or_skip
from local_http import JsonHandler, serving
from test_openai_generator import free_port

from rag_desktop.app.library import EmbedderMismatch, IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.backends.http_client import EndpointError, with_retries
from rag_desktop.backends.openai_embedder import EmbeddingServerError, OpenAIEmbedder
from rag_desktop.core.settings import Settings

DIM = 16


def bag_vector(text: str, dim: int = DIM) -> list[float]:
    """A real (if crude) text embedding: hashed bag of lower-cased words."""
    v = [0.0] * dim
    for w in re.findall(r"\w+", text.lower()):
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % dim] += 1.0
    v[0] += 0.01  # never the zero vector
    return v


class EmbedServer(JsonHandler):
    """POST /<mode>/v1/embeddings; the first path segment selects a behaviour."""

    calls: ClassVar[dict[str, int]] = {}
    bodies: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        req = self._request_json()
        mode = self.path.split("/")[1]
        EmbedServer.calls[mode] = EmbedServer.calls.get(mode, 0) + 1
        EmbedServer.bodies.append(req)
        call = EmbedServer.calls[mode]
        texts = req["input"]
        model = {"other": "other-model"}.get(mode, "bag-16")
        dim = {"dim8": 8}.get(mode, DIM)
        if mode == "switchdim" and call > 1:
            dim = 12
        if mode == "switchmodel" and call > 1:
            model = "bag-16-v2"
        data = [{"object": "embedding", "index": i, "embedding": bag_vector(t, dim)} for i, t in enumerate(texts)]
        data.reverse()  # servers may answer out of order; the index field decides
        if mode == "flaky" and call % 3 != 0:  # two 503s, then an answer, repeating
            self._send(503, {"error": {"message": "loading model"}})
        elif mode == "err":
            self._send(500, {"error": {"message": "model exploded"}})
        elif mode == "bad":
            self._send(400, {"error": {"message": "input too long"}})
        elif mode == "slow":
            time.sleep(3)
            self._send(200, {"data": data, "model": model})
        elif mode == "junk":
            self._send(200, None, b"<html>not json</html>")
        elif mode == "short" and call > 1:
            self._send(200, {"data": data[1:], "model": model})
        elif mode == "zero" and call > 1:
            self._send(200, {"data": [{"index": i, "embedding": [0.0] * DIM} for i in range(len(texts))]})
        elif mode == "tokens":
            self._send(200, {"data": [{"index": i, "embedding": [[0.1] * DIM] * 3} for i in range(len(texts))]})
        else:
            self._send(200, {"object": "list", "data": data, "model": model})


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving(EmbedServer) as url:
        yield url


def test_batches_keep_input_order_and_rows_are_normalised(server: str) -> None:
    emb = OpenAIEmbedder(f"{server}/ok/v1", "bag-16", batch_size=10, query_prefix="query: ")
    texts = [f"text number {i} about topic {i % 5}" for i in range(37)]
    before = EmbedServer.calls.get("ok", 0)
    out = emb.embed_passages(texts)
    assert EmbedServer.calls["ok"] - before == 1 + 4  # the probe, then ceil(37 / 10) batches
    assert out.shape == (37, DIM) and out.dtype == np.float32
    want = np.asarray([bag_vector(t) for t in texts])
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert emb.identity == "openai-embeddings/bag-16" and emb.dim == DIM
    emb.embed_queries(["what is it"])
    assert EmbedServer.bodies[-1]["input"] == ["query: what is it"]
    assert EmbedServer.bodies[-1]["model"] == "bag-16"
    assert emb.embed_terms([]).shape == (0, DIM)


def test_transient_503s_are_retried_with_backoff(server: str) -> None:
    emb = OpenAIEmbedder(f"{server}/flaky/v1", "bag-16", retries=3, backoff_s=0.01)
    out = emb.embed_passages(["hello world"])
    assert out.shape == (1, DIM)
    assert emb.requests_sent == 6  # probe: 503, 503, ok; batch: 503, 503, ok


def test_persistent_500_gives_up_with_the_servers_message(server: str) -> None:
    emb = OpenAIEmbedder(f"{server}/err/v1", retries=2, backoff_s=0.01)
    with pytest.raises(EmbeddingServerError, match=r"/err/v1/embeddings answered HTTP 500 .*model exploded.*"
                                                    r"gave up after 3 attempts") as info:
        emb.load()
    assert emb.requests_sent == 3 and info.value.status == 500


def test_400_is_not_retried(server: str) -> None:
    emb = OpenAIEmbedder(f"{server}/bad/v1", retries=5, backoff_s=0.01)
    with pytest.raises(EmbeddingServerError, match=r"HTTP 400 .*input too long.*models\.embed_model"):
        emb.load()
    assert emb.requests_sent == 1


def test_timeout_names_the_setting_and_is_retried(server: str) -> None:
    emb = OpenAIEmbedder(f"{server}/slow/v1", timeout=0.3, retries=1, backoff_s=0.01)
    t0 = time.monotonic()
    with pytest.raises(EmbeddingServerError, match=r"no response from .*/slow/v1/embeddings within 0\.3 s"
                                                    r".*models\.embed_timeout_s.*gave up after 2 attempts"):
        emb.load()
    assert time.monotonic() - t0 < 2.5


def test_connection_refused() -> None:
    emb = OpenAIEmbedder(f"http://127.0.0.1:{free_port()}/v1", retries=1, backoff_s=0.01)
    with pytest.raises(EmbeddingServerError, match=r"cannot connect to .*/v1/embeddings: connection refused"
                                                    r".*models\.embed_base_url"):
        emb.load()


@pytest.mark.parametrize("mode,pattern", [
    ("junk", r"malformed response from .*/junk/v1/embeddings: a body that is not JSON"),
    ("short", r"1 embeddings for 2 inputs"),
    ("zero", r"zero or non-finite embedding for input 0"),
    ("tokens", r"token-level embeddings .*--pooling mean"),
    ("switchdim", r"returned 12-dimensional embeddings, but it returned 16 when this session started"),
    ("switchmodel", r"now serves the model 'bag-16-v2', but it served 'bag-16'"),
])
def test_bad_answers_are_clear_errors_and_not_retried(server: str, mode: str, pattern: str) -> None:
    emb = OpenAIEmbedder(f"{server}/{mode}/v1", retries=3, backoff_s=0.01)
    with pytest.raises(EmbeddingServerError, match=pattern):
        emb.embed_passages(["one", "two"])
    assert emb.requests_sent <= 2


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(EmbeddingServerError, match=r"models\.embed_base_url must look like"):
        OpenAIEmbedder("localhost:8080")
    with pytest.raises(EmbeddingServerError, match=r"models\.embed_timeout_s must be > 0"):
        OpenAIEmbedder("http://127.0.0.1:1/v1", timeout=0)
    with pytest.raises(Exception, match=r"models\.embed_retries"):
        Settings().replace("models", embed_retries=-1)


def test_with_retries_backs_off_exponentially() -> None:
    waits: list[float] = []
    attempts = 0

    def call() -> int:
        nonlocal attempts
        attempts += 1
        if attempts < 6:
            raise EndpointError("busy", retryable=True)
        return 7

    assert with_retries(call, retries=5, backoff_s=0.5, max_backoff_s=4.0, sleep=waits.append) == 7
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0]


# --------------------------------------------------------------------------- a library over the server


DOCS = {
    "tea.txt": "Green tea is steamed or pan fired soon after picking. Tea leaves keep their colour.",
    "bikes.txt": "A bicycle chain must be greased every ninety days. Check tyre pressure weekly.",
    "rain.txt": "Rainfall in the monsoon season floods the river valley every summer.",
}


def _settings(url: str, model: str = "bag-16") -> Settings:
    return Settings().replace("models", embedder_backend="openai", embed_base_url=url, embed_model=model,
                              embed_retries=0)


def _build(root: Path, settings: Settings) -> RagService:
    folder = root / "docs"
    folder.mkdir(exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    svc = RagService(root / "library", settings)
    events = list(svc.ingest([folder]))
    report = events[-1]
    assert isinstance(report, IngestReport) and len(report.added) == len(DOCS), report
    return svc


def test_library_built_over_the_server_and_queried(server: str, tmp_path: Path) -> None:
    svc = _build(tmp_path, _settings(f"{server}/ok/v1"))
    try:
        assert svc.library.catalog.get_meta("embedder") == "openai-embeddings/bag-16"
        assert svc.library.catalog.get_meta("dim") == str(DIM)
        cmp = svc.compare("how often must a bicycle chain be greased", level="doc", k=3)
        assert Path(cmp.baseline.hits[0].path).name == "bikes.txt"
    finally:
        svc.close()


def test_library_refuses_another_model_or_dimension(server: str, tmp_path: Path) -> None:
    svc = _build(tmp_path, _settings(f"{server}/ok/v1"))
    svc.close()
    with (contextlib.closing(RagService(tmp_path / "library", _settings(f"{server}/other/v1"))) as other,
          pytest.raises(EmbedderMismatch, match=r"built with the embedder 'openai-embeddings/bag-16', but "
                                                r"'openai-embeddings/other-model'")):
        other.compare("chain")
    with contextlib.closing(RagService(tmp_path / "library", _settings(f"{server}/dim8/v1"))) as narrow:
        with pytest.raises(EmbedderMismatch, match=r"holds 16-dimensional vectors from 'openai-embeddings/bag-16'"
                                                   r", but the configured embedder gives 8-dimensional"):
            narrow.compare("chain")
        with pytest.raises(EmbedderMismatch):
            list(narrow.ingest([tmp_path / "docs"]))


# --------------------------------------------------------------------------- a real llama.cpp server (slow)


# llama-cpp-python's server has no --pooling flag (llama.cpp's own llama-server has
# --pooling mean), and a chat GGUF defaults to no pooling: one vector per token, which the
# embedder refuses (test above). The launcher sets the same context parameter the C++
# server's flag sets, then runs the unmodified server module.
MEAN_POOLING_SERVER = """
import functools, runpy, sys
import llama_cpp
from rag_desktop.backends.ggml_cpu import ensure_cpu_backend
ensure_cpu_backend()
_init = llama_cpp.Llama.__init__
@functools.wraps(_init)
def _with_mean_pooling(self, *args, **kwargs):
    kwargs.setdefault("pooling_type", llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    _init(self, *args, **kwargs)
llama_cpp.Llama.__init__ = _with_mean_pooling
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


@pytest.fixture(scope="module")
def real_embed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    model = server_model_or_skip()
    port = free_port()
    log = tmp_path_factory.mktemp("embed-server") / "server.log"
    with running_server(
            [sys.executable, "-c", MEAN_POOLING_SERVER, "--model", str(model), "--model_alias", "smollm2-embed",
             "--embedding", "true", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
             "--n_threads", str(os.cpu_count() or 1), "--n_threads_batch", str(os.cpu_count() or 1)],
        port, log,
    ) as base:
        yield base, model


@pytest.mark.slow
def test_real_server_vectors_match_the_model_run_locally(real_embed_server: tuple[str, Path]) -> None:
    base, model = real_embed_server
    emb = OpenAIEmbedder(base, "smollm2-embed", batch_size=2, timeout=60)
    texts = ["The cat sat on the mat.", "Green tea is steamed.", "A bicycle chain needs grease.", "Rain."]
    remote = emb.embed_passages(texts)
    assert emb.identity == "openai-embeddings/smollm2-embed" and emb.dim == 576
    import llama_cpp
    from llama_cpp import Llama

    from rag_desktop.backends.ggml_cpu import ensure_cpu_backend

    ensure_cpu_backend()
    local = Llama(str(model), embedding=True, n_ctx=2048, verbose=False,
                  pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    try:
        want = np.asarray(local.embed(texts, normalize=True), dtype=np.float64)
    finally:
        local.close()
    cos = np.sum(remote * want, axis=1) / np.linalg.norm(want, axis=1)
    assert np.all(cos > 0.999), cos
    np.testing.assert_allclose(np.linalg.norm(remote, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_real_server_builds_and_answers_a_library(real_embed_server: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = real_embed_server
    svc = _build(tmp_path, _settings(base, "smollm2-embed"))
    try:
        assert svc.library.catalog.get_meta("embedder") == "openai-embeddings/smollm2-embed"
        cmp = svc.compare("bicycle chain grease", level="doc", k=3)
        assert len(cmp.baseline.hits) == 3
        assert {Path(h.path).name for h in cmp.baseline.hits} == set(DOCS)
    finally:
        svc.close()
