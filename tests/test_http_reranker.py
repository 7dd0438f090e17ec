"""The cross-encoder over a TEI-shaped ``POST /rerank`` endpoint, on a scripted loopback server.

The scripted server implements TEI's request/response shape with a real (simple) scoring
rule — query-word overlap — and answers sorted by score as TEI does, so the client's
reordering, batching, retries and errors are what is tested.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from local_http import JsonHandler, serving
from test_openai_embedder import DOCS, _build, _settings
from test_openai_embedder import server as embed_server  # noqa: F401 (fixture)
from test_openai_generator import free_port

from rag_desktop.app.runtime import Runtime
from rag_desktop.backends.http_reranker import HttpCrossEncoder, RerankServerError
from rag_desktop.backends.openai_embedder import OpenAIEmbedder
from rag_desktop.core.protocols import CrossEncoder
from rag_desktop.core.settings import Settings


def overlap_score(query: str, text: str) -> float:
    q = set(re.findall(r"\w+", query.lower()))
    t = set(re.findall(r"\w+", text.lower()))
    return float(len(q & t)) - 0.001 * len(t)


class TeiServer(JsonHandler):
    batches: ClassVar[list[int]] = []
    calls: ClassVar[dict[str, int]] = {}

    def do_POST(self) -> None:
        req = self._request_json()
        mode = self.path.split("/")[1]
        TeiServer.calls[mode] = TeiServer.calls.get(mode, 0) + 1
        if self.path != f"/{mode}/rerank":
            self._send(404, {"error": "not found"})
            return
        if len(req["texts"]) > 4:  # TEI's --max-client-batch-size, set small here
            self._send(413, {"error": "batch size 5 > maximum allowed batch size 4", "error_type": "Validation"})
            return
        TeiServer.batches.append(len(req["texts"]))
        assert req["raw_scores"] is True
        results = [{"index": i, "score": overlap_score(req["query"], t)} for i, t in enumerate(req["texts"])]
        results.sort(key=lambda r: -r["score"])  # TEI answers best first
        if mode == "busy" and TeiServer.calls[mode] == 1:
            self._send(503, {"error": "model is loading", "error_type": "Overloaded"})
        elif mode == "wrapped":
            self._send(200, {"results": [{"index": r["index"], "relevance_score": r["score"]} for r in results]})
        elif mode == "short":
            self._send(200, results[:-1])
        else:
            self._send(200, results)


@pytest.fixture(scope="module")
def tei() -> Iterator[str]:
    with serving(TeiServer) as url:
        yield url


PASSAGES = ["the cat sat", "a chain needs grease", "grease the bicycle chain often", "rain", "tea leaves", "x"]


def test_scores_come_back_in_input_order_in_batches(tei: str) -> None:
    ce = HttpCrossEncoder(f"{tei}/ok", batch_size=4)
    assert isinstance(ce, CrossEncoder) and not ce.is_substitute
    ce.load()
    TeiServer.batches.clear()
    scores = ce.score("bicycle chain grease", PASSAGES)
    assert TeiServer.batches == [4, 2]
    np.testing.assert_allclose(scores, [overlap_score("bicycle chain grease", p) for p in PASSAGES])
    assert int(np.argmax(scores)) == 2


def test_a_busy_server_is_retried(tei: str) -> None:
    ce = HttpCrossEncoder(f"{tei}/busy", backoff_s=0.01)
    assert ce.score("rain", ["rain", "sun"]).tolist() == [overlap_score("rain", "rain"), overlap_score("rain", "sun")]


def test_cohere_style_wrapped_results_are_accepted(tei: str) -> None:
    ce = HttpCrossEncoder(f"{tei}/wrapped")
    assert ce.score("tea", ["tea leaves", "rain"])[0] > ce.score("tea", ["tea leaves", "rain"])[1]


@pytest.mark.parametrize("url,batch,pattern", [
    ("{tei}/ok", 8, r"answered HTTP 413 .*maximum allowed batch size 4.*max-client-batch-size"),
    ("{tei}/short", 4, r"malformed response from .*/short/rerank: expected a list of 3"),
    ("{tei}/ok/nothing-here", 4, r"HTTP 404 .*models\.reranker_url"),
])
def test_errors_name_the_cause(tei: str, url: str, batch: int, pattern: str) -> None:
    ce = HttpCrossEncoder(url.format(tei=tei), batch_size=batch, retries=0)
    with pytest.raises(RerankServerError, match=pattern):
        ce.score("q", PASSAGES[:5] if batch == 8 else PASSAGES[:3])


def test_connection_refused_at_load() -> None:
    ce = HttpCrossEncoder(f"http://127.0.0.1:{free_port()}", retries=0)
    with pytest.raises(RerankServerError, match=r"connection refused.*models\.reranker_url"):
        ce.load()


def test_runtime_picks_the_http_backends(tei: str, embed_server: str) -> None:  # noqa: F811
    rt = Runtime(_settings(f"{embed_server}/ok/v1").replace("models", reranker_url=f"{tei}/ok"))
    try:
        assert isinstance(rt.embedder(), OpenAIEmbedder)
        assert rt.has_cross_encoder() and isinstance(rt.scorer(), HttpCrossEncoder)
        rt.update(rt.settings.replace("models", reranker_url=""))
        assert not rt.has_cross_encoder()
    finally:
        rt.close()
    assert not Runtime(Settings()).has_cross_encoder()


def test_cross_encoder_column_over_http(tei: str, embed_server: str, tmp_path: Path) -> None:  # noqa: F811
    settings = _settings(f"{embed_server}/ok/v1").replace("models", reranker_url=f"{tei}/ok")
    svc = _build(tmp_path, settings)
    try:
        cmp = svc.compare("how often is a bicycle chain greased", level="doc", k=3)
        assert cmp.cross_encoder is not None and len(cmp.cross_encoder.hits) == len(DOCS)
        assert Path(cmp.cross_encoder.hits[0].path).name == "bikes.txt"
        assert list(cmp.cross_encoder.scores) == sorted(cmp.cross_encoder.scores, reverse=True)
    finally:
        svc.close()
