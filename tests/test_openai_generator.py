"""The OpenAI-compatible HTTP Generator.

Against a REAL server: llama-cpp-python's own ``python -m llama_cpp.server`` serving the
SmolLM2 GGUF on loopback (slow). Failure modes (timeouts, malformed answers, early ends)
use a tiny scripted ``http.server`` on loopback; connection refused uses a closed port.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from llama_server import running_server, server_model_or_skip
from local_http import serving

from rag_desktop.backends.openai_generator import GeneratorError, OpenAIGenerator, estimate_tokens
from rag_desktop.core.types import CancelToken, ChatMessage, GenEvent, GenEventKind

HELLO = [ChatMessage("user", "Say hello.")]
STORY = [ChatMessage("user", "Write a long story about a dragon and a knight.")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def text_of(events: list[GenEvent]) -> str:
    return "".join(e.text for e in events if e.kind is GenEventKind.TOKEN)


# --------------------------------------------------------------------------- a scripted fake server


def _sse(obj: object) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _chunk(content: str | None = None, finish: str | None = None, **extra: object) -> dict[str, object]:
    delta: dict[str, object] = {} if content is None else {"content": content}
    delta.update(extra)
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                            "finish_reason": finish}]}


class Scripted(http.server.BaseHTTPRequestHandler):
    """Each first path segment selects a behaviour; everything else answers 404."""

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _send(self, status: int, ctype: str, body: bytes = b"", length: bool = True) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)
            self.wfile.flush()

    def do_GET(self) -> None:
        mode = self.path.split("/")[1]
        if mode == "junk" and self.path.endswith("/models"):
            self._send(200, "text/html", b"<html>hello</html>")
        elif mode == "ok" and self.path.endswith("/models"):
            self._send(200, "application/json",
                       json.dumps({"data": [{"id": "m", "max_model_len": 2048}]}).encode())
        else:
            self._send(404, "application/json", b'{"detail": "Not Found"}')

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(n) or b"{}")
        mode = self.path.split("/")[1]
        if mode == "junk":
            self._send(200, "text/event-stream", b"data: this is not json\n\n")
        elif mode == "json":
            self._send(200, "application/json", b"hello")
        elif mode == "err":
            self._send(500, "application/json", json.dumps({"error": {"message": "model exploded"}}).encode())
        elif mode == "empty":
            self._send(200, "text/event-stream", b"")
        elif mode == "early":
            self._send(200, "text/event-stream", _sse(_chunk("partial")))
        elif mode == "logprobs":  # one token with its top alternatives, as OpenAI's API returns them
            assert request["logprobs"] is True and request["max_tokens"] == 1 and not request["stream"]
            top = [{"token": " Yes", "logprob": -0.2}, {"token": "No", "logprob": -1.9},
                   {"token": "yes", "logprob": -3.0}]
            whole = {"choices": [{"message": {"role": "assistant", "content": "Yes"}, "finish_reason": "length",
                                  "logprobs": {"content": [{"token": "Yes", "logprob": -0.2, "top_logprobs": top}]}}]}
            self._send(200, "application/json", json.dumps(whole).encode())
        elif mode == "whole":
            whole = {"choices": [{"message": {"role": "assistant", "content": "<think>x</think>Whole answer."},
                                  "finish_reason": "stop"}]}
            self._send(200, "application/json", json.dumps(whole).encode())
        elif mode == "think":
            body = b"".join([
                b": keep-alive comment\n\n",
                _sse({"object": "chat.completion.chunk", "choices": [{"delta": {"role": "assistant"}}]}),
                _sse(_chunk("<thi")), _sse(_chunk("nk>secret")), _sse(_chunk(None, reasoning_content="hmm")),
                _sse(_chunk(" plan</think>\n\n")), _sse(_chunk("Visible")), _sse(_chunk(" answer [1].")),
                _sse(_chunk(None, finish="stop")), _sse({"choices": [], "usage": {"total_tokens": 3}}),
                b"data: [DONE]\n\n",
            ])
            self._send(200, "text/event-stream", body)
        elif mode == "echo":  # returns what it was sent, to check the request body
            content = json.dumps(request["messages"][-1]["content"])
            self._send(200, "text/event-stream",
                       _sse(_chunk(content)) + _sse(_chunk(None, finish="stop")) + b"data: [DONE]\n\n")
        elif mode == "slow":  # holds the request without answering
            time.sleep(5)
            self._send(500, "text/plain", b"too late")
        elif mode == "stall":  # headers and one token, then silence
            self._send(200, "text/event-stream", _sse(_chunk("first")), length=False)
            time.sleep(5)
        elif mode == "tok" and self.path.endswith("/tokenize"):
            self._send(200, "application/json", json.dumps({"tokens": [1] * len(request["content"])}).encode())
        else:
            self._send(404, "application/json", b'{"detail": "Not Found"}')


@pytest.fixture(scope="module")
def fake_server() -> Iterator[str]:
    with serving(Scripted) as url:
        yield url


# --------------------------------------------------------------------------- errors (fast)


def test_connection_refused_names_url_and_setting() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    gen = OpenAIGenerator(url, timeout=2)
    with pytest.raises(GeneratorError, match=r"cannot connect to http://127\.0\.0\.1:\d+/v1/models: "
                                             r"connection refused.*models\.openai_base_url"):
        gen.load()
    with pytest.raises(GeneratorError, match=r"/v1/chat/completions: connection refused"):
        list(gen.stream(HELLO, max_tokens=4, temperature=0, seed=1))


def test_timeout_while_server_thinks(fake_server: str) -> None:
    gen = OpenAIGenerator(f"{fake_server}/slow/v1", timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(GeneratorError, match=r"no response from .*/slow/v1/chat/completions within 0\.5 s"
                                             r".*models\.openai_timeout_s"):
        list(gen.stream(HELLO, max_tokens=4, temperature=0, seed=1))
    assert time.monotonic() - t0 < 3.0


def test_timeout_in_the_middle_of_a_stream(fake_server: str) -> None:
    gen = OpenAIGenerator(f"{fake_server}/stall/v1", timeout=0.5)
    seen: list[GenEvent] = []
    with pytest.raises(GeneratorError, match=r"within 0\.5 s"):
        for ev in gen.stream(HELLO, max_tokens=4, temperature=0, seed=1):
            seen.append(ev)
    assert text_of(seen) == "first"


@pytest.mark.parametrize("mode,pattern", [
    ("junk", r"malformed response from .*/junk/v1/chat/completions: an SSE event that is not JSON"),
    ("json", r"malformed response from .*/json/v1/chat/completions: neither an SSE stream nor"),
    ("err", r"/err/v1/chat/completions answered HTTP 500 .*model exploded"),
    ("early", r"ended the stream before the answer was finished"),
    ("empty", r"closed the stream without sending anything"),
    ("missing", r"answered HTTP 404 .*should end in /v1"),
])
def test_bad_responses_give_clear_errors(fake_server: str, mode: str, pattern: str) -> None:
    gen = OpenAIGenerator(f"{fake_server}/{mode}/v1", timeout=5)
    with pytest.raises(GeneratorError, match=pattern) as info:
        list(gen.stream(HELLO, max_tokens=4, temperature=0, seed=1))
    assert info.value.url.startswith(fake_server)


def test_load_rejects_a_non_openai_models_endpoint(fake_server: str) -> None:
    with pytest.raises(GeneratorError, match=r"malformed response from .*/junk/v1/models"):
        OpenAIGenerator(f"{fake_server}/junk/v1").load()
    with pytest.raises(GeneratorError, match=r"HTTP 404.*should end in /v1"):
        OpenAIGenerator(f"{fake_server}/nothing").load()


def test_load_learns_context_size_from_server(fake_server: str) -> None:
    gen = OpenAIGenerator(f"{fake_server}/ok/v1", model="m", n_ctx=8192)
    gen.load()
    assert gen.n_ctx == 2048 and gen.server_models == ("m",)


def test_thinking_text_and_reasoning_field_never_reach_the_answer(fake_server: str) -> None:
    gen = OpenAIGenerator(f"{fake_server}/think/v1")
    events = list(gen.stream(HELLO, max_tokens=4, temperature=0, seed=1))
    assert text_of(events) == "Visible answer [1]."
    assert events[-1] == GenEvent(GenEventKind.DONE, finish_reason="stop")
    assert gen.last_thinking == "secret plan"


def test_non_streaming_server_answer_is_accepted(fake_server: str) -> None:
    gen = OpenAIGenerator(f"{fake_server}/whole/v1")
    assert gen.generate(HELLO, max_tokens=4, temperature=0, seed=1) == "Whole answer."


def test_first_token_logprobs_read_off_top_logprobs_or_say_they_are_missing(fake_server: str) -> None:
    from rag_desktop.core.protocols import TokenScorer

    gen = OpenAIGenerator(f"{fake_server}/logprobs/v1")
    assert isinstance(gen, TokenScorer)
    # Matched by text (the leading space of " Yes" ignored); "nope" is not listed: the smallest listed value.
    assert gen.first_token_logprobs(HELLO, ["Yes", "No", "yes", "nope"]) == [-0.2, -1.9, -3.0, -3.0]
    # A server answering without logprobs cannot score: NotImplementedError, which the gate's judge
    # takes as "use sampled replies instead".
    with pytest.raises(NotImplementedError, match="no token log-probabilities"):
        OpenAIGenerator(f"{fake_server}/whole/v1").first_token_logprobs(HELLO, ["yes"])
    with pytest.raises(GeneratorError, match="HTTP 500"):
        OpenAIGenerator(f"{fake_server}/err/v1").first_token_logprobs(HELLO, ["yes"])


def test_qwen3_models_get_the_no_think_switch(fake_server: str) -> None:
    off = OpenAIGenerator(f"{fake_server}/echo/v1", model="Qwen3-4B-Instruct")
    assert json.loads(off.generate(HELLO, max_tokens=4, temperature=0, seed=1)) == "Say hello. /no_think"
    on = OpenAIGenerator(f"{fake_server}/echo/v1", model="Qwen3-4B-Instruct", thinking=True)
    assert json.loads(on.generate(HELLO, max_tokens=4, temperature=0, seed=1)) == "Say hello."
    other = OpenAIGenerator(f"{fake_server}/echo/v1", model="llama-3")
    assert json.loads(other.generate(HELLO, max_tokens=4, temperature=0, seed=1)) == "Say hello."


def cancelled_in_a_second(url: str) -> list[GenEvent]:
    """The events of a stream from ``url`` cancelled 0.3 s in, which must end within a second of that."""
    gen = OpenAIGenerator(url, timeout=30)
    cancel = CancelToken()
    threading.Timer(0.3, cancel.set).start()
    t0 = time.monotonic()
    events = list(gen.stream(HELLO, max_tokens=4, temperature=0, seed=1, cancel=cancel))
    assert time.monotonic() - t0 < 1.3
    return events


def test_cancel_while_waiting_for_headers(fake_server: str) -> None:
    events = cancelled_in_a_second(f"{fake_server}/slow/v1")
    assert [e.finish_reason for e in events] == ["cancelled"]


def test_cancel_while_stream_is_silent(fake_server: str) -> None:
    events = cancelled_in_a_second(f"{fake_server}/stall/v1")
    assert text_of(events) == "first" and events[-1].finish_reason == "cancelled"


def test_count_tokens_uses_server_tokenizer_then_estimate(fake_server: str) -> None:
    gen = OpenAIGenerator(f"{fake_server}/tok/v1")
    assert gen.count_tokens("abcdef") == 6  # the scripted /tokenize: one token per character
    assert gen._tokenize_route == ("/tok/tokenize", "content")
    plain = OpenAIGenerator(f"{fake_server}/ok/v1")
    assert plain.count_tokens("hello world, again") == estimate_tokens("hello world, again")
    assert plain._tokenize_route is None


def test_estimate_tokens_rule() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcdef") == 2  # ceil(6 / 4)
    assert estimate_tokens("Hello world") == 4  # the single space is free
    assert estimate_tokens("数据出境") == 4  # one per CJK character
    assert estimate_tokens("in 2023,\n\n数据") == 1 + 4 + 1 + 1 + 2  # digits one each


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "ftp://x/v1", "http:///v1"])
def test_bad_base_url_is_rejected(url: str) -> None:
    with pytest.raises(GeneratorError, match=r"models\.openai_base_url must look like"):
        OpenAIGenerator(url)


# --------------------------------------------------------------------------- a real llama.cpp server (slow)


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = server_model_or_skip()
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running_server(
            # the server module run with the CPU kernels loaded first (backends/ggml_cpu.py)
            [sys.executable, "-m", "rag_desktop.backends.ggml_cpu", "llama_cpp.server", "--model", str(model),
             "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", "4096", "--n_threads", str(os.cpu_count() or 1),
             "--n_threads_batch", str(os.cpu_count() or 1)],
        port, log,
    ) as base:
        yield base


@pytest.mark.slow
def test_real_server_streams_a_completion(real_server: str) -> None:
    gen = OpenAIGenerator(real_server, model="smollm2", timeout=60, n_ctx=4096)
    gen.load()
    assert gen.n_ctx == 4096 and len(gen.server_models) == 1
    events = list(gen.stream(STORY, max_tokens=24, temperature=0.7, seed=3))
    assert len([e for e in events if e.kind is GenEventKind.TOKEN]) > 5
    assert events[-1].kind is GenEventKind.DONE and events[-1].finish_reason == "length"
    assert text_of(events).strip()


@pytest.mark.slow
def test_real_server_seeded_sampling_is_reproducible(real_server: str) -> None:
    gen = OpenAIGenerator(real_server, model="smollm2", timeout=60)
    a = gen.generate(STORY, max_tokens=32, temperature=0.8, seed=5)
    b = gen.generate(STORY, max_tokens=32, temperature=0.8, seed=5)
    assert a == b and a.strip()


@pytest.mark.slow
def test_real_server_counts_tokens_like_the_local_tokenizer(real_server: str) -> None:
    from rag_desktop.app.model_files import smollm2_path
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator

    remote = OpenAIGenerator(real_server, model="smollm2", timeout=60)
    local = LlamaCppGenerator(smollm2_path(), n_ctx=512)
    try:
        for text in ["Hello world", "The Wason selection task tests deductive reasoning.", "a\nb  c",
                     "In 2023, the EU's AI Act (Regulation 2024/1689) set rules.\n\n- item one\n- item two"]:
            assert remote.count_tokens(text) == local.count_tokens(text)
            assert estimate_tokens(text) >= local.count_tokens(text)  # the fallback errs high
    finally:
        local.close()
    assert remote._tokenize_route is not None and remote._tokenize_route[0].endswith("/extras/tokenize/count")


@pytest.mark.slow
def test_real_server_cancel_within_a_second(real_server: str) -> None:
    gen = OpenAIGenerator(real_server, model="smollm2", timeout=60)
    cancel = CancelToken()
    threading.Timer(1.0, cancel.set).start()
    t0 = time.monotonic()
    events = list(gen.stream(STORY, max_tokens=2000, temperature=0.7, seed=1, cancel=cancel))
    assert events[-1].finish_reason == "cancelled"
    assert time.monotonic() - t0 - 1.0 < 1.0
    # The server is still usable afterwards.
    assert gen.generate(HELLO, max_tokens=8, temperature=0, seed=1)


@pytest.mark.slow
def test_real_server_rejects_prompt_beyond_its_context(real_server: str) -> None:
    gen = OpenAIGenerator(real_server, model="smollm2", timeout=60)
    huge = [ChatMessage("user", "word " * 6000)]
    # llama-cpp-python's server answers 200 and then closes an empty stream in this case.
    with pytest.raises(GeneratorError, match=r"closed the stream without sending anything.*--n_ctx"):
        list(gen.stream(huge, max_tokens=8, temperature=0, seed=1))



@pytest.mark.slow
def test_real_server_generate_many_gives_each_requests_own_result(real_server: str) -> None:
    """llama-cpp-python's server interrupts a running request when another arrives, so
    generate_many recognises it and sends one at a time; results equal stream's."""
    from rag_desktop.core.generation import GenRequest

    gen = OpenAIGenerator(real_server, model="smollm2", timeout=120)
    assert gen.serial_server
    questions = ["What is the capital of France?", "Name three fruits.", "What do bees make?"]
    reqs = [GenRequest((ChatMessage("user", q),), max_tokens=24, temperature=0.0, seed=i)
            for i, q in enumerate(questions)]
    pieces: dict[int, list[str]] = {0: [], 1: [], 2: []}
    out = gen.generate_many(reqs, on_token=lambda i, t: pieces[i].append(t))
    alone = [gen.generate(list(r.messages), max_tokens=24, temperature=0.0, seed=r.seed) for r in reqs]
    assert [r.text for r in out] == alone
    assert ["".join(pieces[i]) for i in range(3)] == alone
    assert all(r.finish_reason in ("stop", "length") and r.text for r in out)
    # Cancel stops every request within a second and leaves the server usable.
    cancel = CancelToken()
    threading.Timer(1.0, cancel.set).start()
    t0 = time.monotonic()
    long = [GenRequest(tuple(STORY), max_tokens=2000, temperature=0.7, seed=i) for i in range(3)]
    res = gen.generate_many(long, cancel=cancel)
    assert [r.finish_reason for r in res] == ["cancelled"] * 3
    assert time.monotonic() - t0 - 1.0 < 1.0
    assert gen.generate(HELLO, max_tokens=8, temperature=0, seed=1)


def test_generate_many_sends_concurrently_and_keeps_request_order(fake_server: str) -> None:
    from rag_desktop.core.generation import GenRequest

    gen = OpenAIGenerator(f"{fake_server}/echo/v1")
    assert not gen.serial_server
    reqs = [GenRequest((ChatMessage("user", f"question {i}"),), 8, 0.0, i) for i in range(5)]
    seen: list[int] = []
    out = gen.generate_many(reqs, on_token=lambda i, _t: seen.append(i))
    assert [r.text for r in out] == [json.dumps(f"question {i}") for i in range(5)]
    assert sorted(seen) == list(range(5)) and all(r.finish_reason == "stop" for r in out)
    with pytest.raises(GeneratorError, match="model exploded"):
        OpenAIGenerator(f"{fake_server}/err/v1").generate_many(reqs[:2])


@pytest.mark.slow
def test_real_server_scores_first_tokens_like_the_local_backend(real_server: str) -> None:
    """llama-cpp-python's server (top_logprobs) against the in-process scorer on the same model:
    the same most likely word and close values (the two contexts batch the prompt differently)."""
    from rag_desktop.app.model_files import smollm2_path
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator

    messages = [ChatMessage("user", "Is Paris the capital of France? Answer yes or no.")]
    words = ["Yes", "No"]
    remote = OpenAIGenerator(real_server, model="smollm2", timeout=60).first_token_logprobs(messages, words)
    local_gen = LlamaCppGenerator(smollm2_path(), n_ctx=512)
    try:
        local = local_gen.first_token_logprobs(messages, words)
    finally:
        local_gen.close()
    assert max(range(2), key=lambda k: remote[k]) == max(range(2), key=lambda k: local[k])
    assert all(abs(a - b) < 0.5 for a, b in zip(remote, local, strict=True))
