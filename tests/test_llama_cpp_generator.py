"""The llama-cpp-python Generator.

Fast tests cover the pure helpers (GGUF header reader, context planning, core counting,
the Qwen3 switch). Slow tests run the real SmolLM2-135M GGUF (and the joined Qwen2.5-0.5B
for Chinese) through llama-cpp-python.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_desktop.backends import gguf_meta
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.gguf_meta import kv_cache_bytes, physical_cores, plan_n_ctx, read_gguf_metadata
from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator
from rag_desktop.core.prompting import build_answer_messages, build_translation_messages
from rag_desktop.core.replies import parse_citations
from rag_desktop.core.types import CancelToken, ChatMessage, GenEvent, GenEventKind, Hit

# --------------------------------------------------------------------------- GGUF header


def write_gguf(path: Path, kv: list[tuple[str, int, Any]], version: int = 3) -> None:
    """Minimal GGUF writer (header only) used as the reference for the reader."""
    fmts = {0: "<B", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 12: "<d"}

    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    out = b"GGUF" + struct.pack("<IQQ", version, 0, len(kv))
    for key, vtype, value in kv:
        out += s(key) + struct.pack("<I", vtype)
        if vtype == 8:
            out += s(value)
        elif vtype == 9:
            etype, items = value
            out += struct.pack("<IQ", etype, len(items))
            out += b"".join(s(i) if etype == 8 else struct.pack(fmts[etype], i) for i in items)
        else:
            out += struct.pack(fmts[vtype], value)
    path.write_bytes(out + b"\0" * 64)


def test_gguf_reader_reads_scalars_strings_and_skips_arrays(tmp_path: Path) -> None:
    p = tmp_path / "m.gguf"
    write_gguf(p, [
        ("general.architecture", 8, "qwen3"),
        ("general.name", 8, "Qwen3 4B 中文"),
        ("tokenizer.ggml.tokens", 9, (8, ["a", "bb", "<think>"] * 50)),
        ("tokenizer.ggml.scores", 9, (6, [0.5] * 30)),
        ("qwen3.context_length", 4, 40960),
        ("qwen3.block_count", 10, 36),
        ("qwen3.rope.freq_base", 6, 1000000.0),
        ("general.flag", 7, True),
        ("nested", 9, (9, [])),
        ("after.arrays", 5, -7),
    ])
    meta = read_gguf_metadata(p)
    assert meta == {"general.architecture": "qwen3", "general.name": "Qwen3 4B 中文",
                    "qwen3.context_length": 40960, "qwen3.block_count": 36,
                    "qwen3.rope.freq_base": 1000000.0, "general.flag": True, "after.arrays": -7}


def test_gguf_reader_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelUnavailable, match=r"x\.gguf is not a GGUF"):
        read_gguf_metadata(bad)
    truncated = tmp_path / "t.gguf"
    truncated.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 5))
    with pytest.raises(ModelUnavailable, match=r"cannot read the GGUF header of .*t\.gguf"):
        read_gguf_metadata(truncated)


# --------------------------------------------------------------------------- context planning

SMOL_META = {"general.architecture": "llama", "llama.block_count": 30, "llama.context_length": 8192,
             "llama.embedding_length": 576, "llama.attention.head_count": 9,
             "llama.attention.head_count_kv": 3}


def test_kv_cache_size_formula() -> None:
    # 2 (K,V) · 30 layers · 3 kv heads · 64 dims · 2 bytes = 23,040 bytes per token.
    assert kv_cache_bytes(SMOL_META, 1) == 23_040
    assert kv_cache_bytes(SMOL_META, 4096) == 4096 * 23_040
    gqa = {**SMOL_META, "llama.attention.key_length": 128, "llama.attention.value_length": 128}
    assert kv_cache_bytes(gqa, 1) == 30 * 3 * 256 * 2


def test_plan_caps_at_training_context_and_halves_for_memory() -> None:
    gib = 1 << 30
    assert plan_n_ctx(65536, SMOL_META, 100 << 20, 64 * gib) == 8192  # training context cap
    assert plan_n_ctx(4096, SMOL_META, 100 << 20, None) == 4096  # memory unknown: as asked
    # 8192 ctx needs 180 MiB of KV; leave room for only ~50 MiB → halve to 2048.
    avail = int((100 << 20) + gguf_meta.COMPUTE_ALLOWANCE_BYTES + (50 << 20)) / gguf_meta.MEMORY_FRACTION
    assert plan_n_ctx(8192, SMOL_META, 100 << 20, int(avail)) == 2048
    assert plan_n_ctx(8192, SMOL_META, 100 << 20, 1) == 2048  # never below the floor
    assert plan_n_ctx(1024, SMOL_META, 100 << 20, 1) == 1024  # a small request stays as it is


def test_physical_cores_from_cpuinfo() -> None:
    ht = "".join(f"processor\t: {i}\nphysical id\t: 0\ncore id\t\t: {i % 2}\n\n" for i in range(4))
    assert physical_cores(ht, usable=4) == 2  # 4 hyper-threads on 2 cores
    two_sockets = "".join(f"processor\t: {i}\nphysical id\t: {i // 2}\ncore id\t\t: {i % 2}\n\n"
                          for i in range(4))
    assert physical_cores(two_sockets, usable=4) == 4
    assert physical_cores(two_sockets, usable=3) == 3  # affinity limits it
    assert physical_cores("", usable=6) == 6  # no topology info: usable CPUs
    assert physical_cores() >= 1


def test_qwen3_gets_no_think_switch_only_when_thinking_is_off(tmp_path: Path) -> None:
    msgs = [ChatMessage("system", "S"), ChatMessage("user", "first"), ChatMessage("assistant", "A"),
            ChatMessage("user", "second question ")]
    gen = LlamaCppGenerator(tmp_path / "none.gguf")
    gen.metadata = {"general.architecture": "qwen3"}
    assert [m["content"] for m in gen._chat_messages(msgs)] == ["S", "first", "A", "second question /no_think"]
    gen.thinking = True
    assert gen._chat_messages(msgs)[-1]["content"] == "second question "
    gen.metadata = {"general.architecture": "qwen2"}
    gen.thinking = False
    assert gen._chat_messages(msgs)[-1]["content"] == "second question "


def test_think_opening_templates_are_detected(tmp_path: Path) -> None:
    gen = LlamaCppGenerator(tmp_path / "none.gguf")
    gen.metadata = {"tokenizer.chat_template":
                    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"}
    assert gen._template_opens_think()
    gen.metadata = {"tokenizer.chat_template": "{{- '<|im_start|>assistant\\n' }}"}
    assert not gen._template_opens_think()


def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    gen = LlamaCppGenerator(tmp_path / "absent.gguf")
    with pytest.raises(ModelUnavailable, match=r"absent\.gguf does not exist.*models\.generator"):
        gen.load()
    assert not gen.loaded


# --------------------------------------------------------------------------- real models (slow)


def smollm2() -> Path:
    from rag_desktop.app.model_files import smollm2_path

    try:
        return smollm2_path()
    except ModelUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def smol() -> Iterator[LlamaCppGenerator]:
    gen = LlamaCppGenerator(smollm2(), n_ctx=8192)
    gen.load()
    yield gen
    gen.close()


def tokens(events: list[GenEvent]) -> str:
    return "".join(e.text for e in events if e.kind is GenEventKind.TOKEN)


STORY = [ChatMessage("user", "Write a long story about a dragon and a knight.")]


@pytest.mark.slow
def test_stream_yields_tokens_then_one_done(smol: LlamaCppGenerator) -> None:
    events = list(smol.stream([ChatMessage("system", "You are helpful."),
                               ChatMessage("user", "What is the capital of France?")],
                              max_tokens=40, temperature=0.0, seed=1))
    assert events[-1].kind is GenEventKind.DONE and events[-1].finish_reason in ("stop", "length")
    assert all(e.kind is GenEventKind.TOKEN for e in events[:-1]) and len(events) > 3
    assert tokens(events).strip()
    long = list(smol.stream(STORY, max_tokens=20, temperature=0.0, seed=1))
    assert long[-1].finish_reason == "length"
    assert smol.count_tokens(tokens(long)) in range(17, 24)


@pytest.mark.slow
def test_seeded_sampling_is_reproducible(smol: LlamaCppGenerator) -> None:
    a = smol.generate(STORY, max_tokens=64, temperature=0.8, seed=7)
    smol.generate([ChatMessage("user", "Explain photosynthesis.")], max_tokens=16, temperature=0.8, seed=3)
    b = smol.generate(STORY, max_tokens=64, temperature=0.8, seed=7)
    c = smol.generate(STORY, max_tokens=64, temperature=0.8, seed=8)
    assert a == b
    assert a != c


def _answer_prompt(question: str) -> list[ChatMessage]:
    """The shape of the app's answer prompts: system, a worked example pair, the real turn."""
    return [ChatMessage("system", "You answer questions from the numbered sources and cite them as [n]."),
            ChatMessage("user", "Sources:\n[1] The library opens at nine.\n\nQuestion: When does the library open?"),
            ChatMessage("assistant", "It opens at nine [1]."),
            ChatMessage("user", f"Sources:\n[1] The museum opens at ten and closes at six.\n\nQuestion: {question}")]


def test_stream_reuses_the_saved_prefix_state_and_a_seed_keeps_its_text(smol: LlamaCppGenerator) -> None:
    """The answer columns' shared prefix (system + worked example) is evaluated once
    and its KV state loaded afterwards; the text for a seed does not depend on what ran before."""
    first = _answer_prompt("When does the museum close?")
    a = smol.generate(first, max_tokens=24, temperature=0.8, seed=5)
    assert smol.last_prefix_reused == 0  # made (and kept) here
    other = smol.generate(_answer_prompt("When does the museum open?"), max_tokens=24, temperature=0.8, seed=5)
    head = smol.last_prefix_reused
    assert head > 30  # the system message and the worked example, taken from the saved state
    smol.generate([ChatMessage("user", "Explain photosynthesis.")], max_tokens=16, temperature=0.8, seed=3)
    assert smol.last_prefix_reused == 0  # one message: no fixed prefix
    b = smol.generate(first, max_tokens=24, temperature=0.8, seed=5)
    assert smol.last_prefix_reused == head and a == b and other
    # A fresh generator, whose first request makes the state, gives the same text for the
    # seed: the fixed split of the prompt, not where the state came from, decides the numbers.
    plain = LlamaCppGenerator(smollm2(), n_ctx=smol.n_ctx)
    try:
        assert plain.generate(first, max_tokens=24, temperature=0.8, seed=5) == a
        assert plain.last_prefix_reused == 0
    finally:
        plain.close()


def _sources_prompt(sources: list[str], question: str) -> list[ChatMessage]:
    """An answer prompt as core.prompting builds it: its sources and question marked as pieces."""
    from rag_desktop.core.prompting import SOURCE_SEPARATOR, source_breaks

    blocks = [f"[{i}] {s}" for i, s in enumerate(sources, start=1)]
    content = f"Sources:\n\n{SOURCE_SEPARATOR.join(blocks)}\n\nQuestion: {question}"
    return [*_answer_prompt("?")[:3], ChatMessage("user", content, source_breaks(content, blocks))]


def test_the_next_prompt_keeps_the_sources_it_shares_and_a_seed_keeps_its_text(smol: LlamaCppGenerator) -> None:
    """The second answer column reads the same first sources as the first: they stay in the cache,
    and the text for a seed is the one a generator that read nothing before writes."""
    # long enough for a piece each (llama_segments.MIN_PIECE)
    opens = "The city museum opens at ten in the morning, every day of the week except Mondays and holidays. " * 14
    closes = "On weekdays it closes at six in the evening; on Saturdays and Sundays it stays open until eight. " * 14
    first = _sources_prompt([opens, closes, "Tickets cost five euros."], "When does the museum close?")
    second = _sources_prompt([opens, closes, "The cafe on the roof closes at five."], "When does the museum close?")
    smol.generate(first, max_tokens=24, temperature=0.8, seed=5)
    b = smol.generate(second, max_tokens=24, temperature=0.8, seed=5)
    from rag_desktop.backends.llama_segments import cuts

    def render(ms: object) -> list[int]:
        return smol._prompt(smol._llm, ms)[0]  # type: ignore[arg-type]  # the prompt's own tokens

    at = cuts(render, second, render(second))
    assert len(at) >= 3 and smol.last_prefix_reused == at[-1]  # the fixed prefix and the first two sources
    fresh = LlamaCppGenerator(smollm2(), n_ctx=smol.n_ctx)
    try:
        assert fresh.generate(second, max_tokens=24, temperature=0.8, seed=5) == b
        assert fresh.last_prefix_reused == 0
        # read after a prompt that shares only the fixed prefix: the same text again
        fresh.generate(_sources_prompt(["Bread is baked daily."], "When is bread baked?"), max_tokens=8,
                       temperature=0.8, seed=1)
        assert fresh.generate(second, max_tokens=24, temperature=0.8, seed=5) == b
    finally:
        fresh.close()


def test_a_prompt_in_pieces_longer_than_the_context_is_refused_in_words() -> None:
    """A prompt with pieces that does not fit n_ctx fails as one without them does (the message names
    n_ctx), not in a decode of one of its pieces."""
    gen = LlamaCppGenerator(smollm2(), n_ctx=1024)
    try:
        long = "The museum opens at ten in the morning on every day of the week but Mondays. " * 40
        with pytest.raises(ValueError, match="n_ctx"):
            gen.generate(_sources_prompt([long, long], "When?"), max_tokens=8, temperature=0.0, seed=0)
        assert gen.generate(_sources_prompt(["It opens at ten."], "When?"), max_tokens=4, temperature=0.0, seed=0)
    finally:
        gen.close()


def test_a_warmed_prefix_is_loaded_by_the_first_request_and_gives_the_same_text() -> None:
    """``warm`` evaluates the fixed prefix ahead of the first question: that question then
    loads it (the wait it saves), and its text for a seed is the text an unwarmed generator gives."""
    prompt = _answer_prompt("When does the museum close?")
    cold = LlamaCppGenerator(smollm2(), n_ctx=1024)
    warm = LlamaCppGenerator(smollm2(), n_ctx=1024)
    try:
        expected = cold.generate(prompt, max_tokens=24, temperature=0.8, seed=5)
        assert cold.last_prefix_reused == 0
        assert warm.warm([[*prompt[:3], ChatMessage("user", "?")]]) == 1
        assert warm.warm([[*prompt[:3], ChatMessage("user", "?")]]) == 0  # kept, not made again
        assert warm.generate(prompt, max_tokens=24, temperature=0.8, seed=5) == expected
        assert warm.last_prefix_reused > 30
        cancelled = CancelToken()
        cancelled.set()
        other = [*_answer_prompt("x")[:1], ChatMessage("user", "?"), ChatMessage("assistant", "!"),
                 ChatMessage("user", "?")]
        assert warm.warm([other], cancelled) == 0
    finally:
        cold.close()
        warm.close()


def _cancel_after(delay: float, gen: LlamaCppGenerator, messages: list[ChatMessage]) -> tuple[list[GenEvent],
                                                                                              float]:
    token = CancelToken()
    timer = threading.Timer(delay, token.set)
    t0 = time.monotonic()
    timer.start()
    events = list(gen.stream(messages, max_tokens=4000, temperature=0.8, seed=1, cancel=token))
    return events, time.monotonic() - t0 - delay


@pytest.mark.slow
def test_cancel_during_decode_within_a_second(smol: LlamaCppGenerator) -> None:
    token = CancelToken()
    events: list[GenEvent] = []
    set_at = 0.0

    def cancel() -> None:
        nonlocal set_at
        set_at = time.monotonic()
        token.set()

    for ev in smol.stream(STORY, max_tokens=4000, temperature=0.8, seed=1, cancel=token):
        if not events:  # decoding has started: cancel from another thread half a second later
            threading.Timer(0.5, cancel).start()
        events.append(ev)
    latency = time.monotonic() - set_at
    assert events[-1].finish_reason == "cancelled"
    assert set_at > 0 and len(events) > 2
    assert latency < 1.0
    assert smol.generate([ChatMessage("user", "Say hello.")], max_tokens=8, temperature=0, seed=1)


@pytest.mark.slow
def test_cancel_during_long_prefill_within_a_second(smol: LlamaCppGenerator,
                                                    capfd: pytest.CaptureFixture[str]) -> None:
    filler = " ".join(f"Note {i}: apples, pears and plums were counted in crate {i}." for i in range(330))
    messages = [ChatMessage("user", filler + "\nSummarise the notes.")]
    n_prompt = smol.count_tokens(filler)
    assert 5000 < n_prompt < smol.n_ctx - 200
    events, latency = _cancel_after(0.3, smol, messages)
    assert [e.finish_reason for e in events] == ["cancelled"]  # no token: stopped inside the prefill
    assert latency < 1.0
    assert "decode" not in capfd.readouterr().err  # llama.cpp's rollback message is muted
    # The context is usable afterwards, and the abort left no trace in the results.
    question = [ChatMessage("user", "What is the capital of France?")]
    after = smol.generate(question, max_tokens=20, temperature=0.7, seed=1)
    fresh = LlamaCppGenerator(smollm2(), n_ctx=smol.n_ctx)
    try:
        assert after == fresh.generate(question, max_tokens=20, temperature=0.7, seed=1)
    finally:
        fresh.close()


@pytest.mark.slow
def test_count_tokens_uses_the_models_tokenizer(smol: LlamaCppGenerator) -> None:
    import llama_cpp

    raw = smol._llm
    assert isinstance(raw, llama_cpp.Llama)
    for text in ["Hello world", "数据出境安全评估", "<|im_start|> is plain text here"]:
        assert smol.count_tokens(text) == len(raw.tokenize(text.encode(), add_bos=False, special=False))
    assert smol.count_tokens("") == 0
    assert smol.count_tokens("Hello world") == 2


@pytest.mark.slow
def test_training_context_cap_and_context_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    capped = LlamaCppGenerator(smollm2(), n_ctx=65536)
    capped.load()
    assert capped.n_ctx == 8192 and capped.load_attempts == [8192]
    capped.close()

    real = llama_cpp.Llama

    def short_of_memory(*args: Any, **kwargs: Any) -> Any:
        # A fake collaborator: context creation fails above 2048 as it would when memory is short.
        if kwargs["n_ctx"] > 2048:
            raise ValueError("Failed to create llama_context")
        return real(*args, **kwargs)

    monkeypatch.setattr(llama_cpp, "Llama", short_of_memory)
    gen = LlamaCppGenerator(smollm2(), n_ctx=8192, check_memory=False)
    gen.load()
    assert gen.load_attempts == [8192, 4096, 2048] and gen.n_ctx == 2048
    assert gen.generate([ChatMessage("user", "Hi")], max_tokens=4, temperature=0, seed=1)
    gen.close()


@pytest.mark.slow
def test_close_is_idempotent_and_load_reopens() -> None:
    gen = LlamaCppGenerator(smollm2(), n_ctx=2048)
    gen.load()
    gen.load()  # idempotent
    assert gen.loaded
    gen.close()
    gen.close()
    assert not gen.loaded
    assert gen.count_tokens("Hello world") == 2  # loads again on demand
    gen.close()


@pytest.mark.slow
def test_close_from_another_thread_stops_the_stream_then_frees_the_model() -> None:
    gen = LlamaCppGenerator(smollm2(), n_ctx=2048)
    events: list[GenEvent] = []
    t_close = 0.0

    def close() -> None:
        nonlocal t_close
        t_close = time.monotonic()
        gen.close()  # returns at once: the stream is still running

    for ev in gen.stream(STORY, max_tokens=4000, temperature=0.8, seed=1):
        if not events:
            threading.Timer(0.3, close).start()
        events.append(ev)
    assert events[-1].finish_reason == "cancelled" and len(events) > 1
    assert time.monotonic() - t_close < 1.0
    assert not gen.loaded  # freed by the stream when it stopped
    assert gen.count_tokens("Hello world") == 2  # and can be loaded again
    gen.close()
    assert not gen.loaded


@pytest.mark.slow
def test_models_are_closed_at_exit_without_traceback() -> None:
    script = textwrap.dedent(f"""
        import atexit
        state = {{}}
        # Registered first, so it runs last: after the generator module's own handler.
        atexit.register(lambda: print("closed-at-exit", not state["gen"].loaded))
        from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator
        from rag_desktop.core.types import ChatMessage

        class Owner:  # a reference cycle keeps the model alive until interpreter teardown
            def __init__(self):
                self.gen = LlamaCppGenerator({str(smollm2())!r}, n_ctx=1024)
                self.me = self

        owner = Owner()
        state["gen"] = owner.gen
        stream = owner.gen.stream([ChatMessage("user", "Tell a story.")], max_tokens=50,
                                  temperature=0.5, seed=1)
        print(next(stream).kind)  # left half-consumed on purpose
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "closed-at-exit True" in done.stdout
    assert "Traceback" not in done.stderr and "TypeError" not in done.stderr


# --------------------------------------------------------------------------- the embedded Qwen2.5-0.5B


@pytest.fixture(scope="module")
def qwen() -> Iterator[LlamaCppGenerator]:
    from rag_desktop.app.model_files import QWEN_0_5B, locate_parts, prepare_joined

    try:
        locate_parts(QWEN_0_5B)
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    gen = LlamaCppGenerator(prepare_joined(QWEN_0_5B), n_ctx=4096)
    gen.load()
    yield gen
    gen.close()


def zh_hit(i: int, text: str, title: str, page: int) -> Hit:
    return Hit(unit_id=i, doc_id=100 + i, level="chunk", title=title, path=f"/docs/{i}.pdf", page=page,
               text=text, s_sim=0.8, rank=i, lang="zh")


@pytest.mark.slow
def test_qwen_answers_chinese_question_from_sources_with_citation(qwen: LlamaCppGenerator) -> None:
    sources = [
        zh_hit(1, "青松市位于江南丘陵地带，气候温和湿润。青松市的市花是紫藤花，每年四月举办紫藤花节。",
               "青松市概况", 3),
        zh_hit(2, "白石县以大理石闻名，县内有三座采石场。", "白石县志", 12),
    ]
    messages, used = build_answer_messages("青松市的市花是什么？", sources, "zh", qwen.count_tokens,
                                           qwen.n_ctx, 256)
    assert len(used) == 2
    events = list(qwen.stream(messages, max_tokens=120, temperature=0.0, seed=1))
    answer = tokens(events)
    assert "紫藤" in answer
    assert events[-1].finish_reason == "stop"
    cits = parse_citations(answer, used)
    assert any(c.valid and c.n == 1 and c.page == 3 for c in cits), answer
    assert all(c.valid for c in cits), answer


@pytest.mark.slow
def test_qwen_translates_english_to_chinese_with_terms(qwen: LlamaCppGenerator) -> None:
    text = "The Wason selection task is a logic puzzle that tests deductive reasoning."
    out = qwen.generate(list(build_translation_messages(text, "en", "zh")), max_tokens=200,
                        temperature=0.0, seed=1)
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in out) >= 8, out
    assert "Wason" in out, out


@pytest.mark.slow
def test_http_backend_token_estimate_errs_high_against_qwen_tokenizer(qwen: LlamaCppGenerator) -> None:
    from rag_desktop.backends.openai_generator import estimate_tokens

    texts = ["The Wason selection task tests deductive reasoning.",
             "In 2023, the EU's AI Act (Regulation 2024/1689) set rules.\n\n- item one\n- item two",
             "青松市位于江南丘陵地带，气候温和湿润。青松市的市花是紫藤花，每年四月举办紫藤花节。",
             "数据出境安全评估是指数据处理者向境外提供重要数据前进行的安全评估。ColBERT 使用 late interaction。",
             (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()[:3000]]
    for text in texts:
        real = qwen.count_tokens(text)
        assert real <= estimate_tokens(text) <= 2 * real, text[:40]


# --------------------------------------------------------------------------- generate_many (batched)

from rag_desktop.core.generation import GenRequest, generate_sequentially  # noqa: E402

SHARED_SYSTEM = ChatMessage("system", "You are a careful assistant. Answer in one or two sentences, plainly, "
                                      "without lists, and do not repeat the question.")
BATCH_QUESTIONS = ["What is the capital of France?", "Why is the sky blue?", "Name three fruits.",
                   "What do bees make?", "How many legs does a spider have?"]


def batch_requests(temperature: float, max_tokens: int = 40) -> list[GenRequest]:
    return [GenRequest((SHARED_SYSTEM, ChatMessage("user", q)), max_tokens=max_tokens, temperature=temperature,
                       seed=11 + 7 * i) for i, q in enumerate(BATCH_QUESTIONS)]


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_generate_many_batched_equals_one_at_a_time(smol: LlamaCppGenerator, temperature: float) -> None:
    reqs = batch_requests(temperature)
    batched = smol.generate_many(reqs)
    stats = smol.last_batch
    assert stats.requests == 5 and stats.waves == 1
    assert stats.shared_prefix_tokens > 20  # the system prompt and the template's opening were read once
    assert stats.evaluated_tokens < stats.prompt_tokens
    # decode calls: a handful of prefill chunks plus one per generated step, not one per token per sequence
    assert stats.decode_calls <= 2 + max(r.completion_tokens for r in batched) + 1
    alone = [smol.generate_many([r])[0] for r in reqs]
    assert [r.text for r in batched] == [r.text for r in alone]
    assert [r.finish_reason for r in batched] == [r.finish_reason for r in alone]
    assert all(r.text.strip() for r in batched)
    assert len({r.text for r in batched}) == 5  # five different questions, five different answers


@pytest.mark.slow
def test_generate_many_matches_stream_and_the_sequential_fallback(smol: LlamaCppGenerator) -> None:
    reqs = batch_requests(0.0)[:3]
    batched = smol.generate_many(reqs)
    streamed = [smol.generate(list(r.messages), max_tokens=r.max_tokens, temperature=0.0, seed=r.seed)
                for r in reqs]
    fallback = generate_sequentially(smol, reqs)
    assert [r.text for r in batched] == streamed == [r.text for r in fallback]
    # Seeded sampling: the same seed gives the same text, another seed another text.
    a = smol.generate_many(batch_requests(0.9, 48))
    b = smol.generate_many(list(reversed(batch_requests(0.9, 48))))
    assert [r.text for r in a] == [r.text for r in reversed(b)]
    other = [GenRequest(r.messages, r.max_tokens, r.temperature, r.seed + 1) for r in batch_requests(0.9, 48)]
    assert [r.text for r in smol.generate_many(other)] != [r.text for r in a]


@pytest.mark.slow
def test_generate_many_stop_strings_max_tokens_and_length_flag(smol: LlamaCppGenerator) -> None:
    count = [ChatMessage("user", "Count from 1 to 30, separated by commas.")]
    reqs = [GenRequest(tuple(count), max_tokens=60, temperature=0.0, seed=1, stop=("5.",)),
            GenRequest(tuple(count), max_tokens=5, temperature=0.0, seed=1),
            GenRequest(tuple(STORY), max_tokens=12, temperature=0.0, seed=1)]
    stopped, short, story = smol.generate_many(reqs)
    # SmolLM2 counts as "1. 1\n2. 2\n…": the stop string ends the text before its first occurrence.
    assert stopped.finish_reason == "stop" and "5." not in stopped.text and stopped.text.rstrip().endswith("4. 4")
    assert short.finish_reason == "length" and short.truncated and short.completion_tokens == 5
    assert story.finish_reason == "length" and story.completion_tokens == 12
    assert smol.generate_many([reqs[1]])[0].text == short.text


@pytest.mark.slow
def test_generate_many_keeps_the_shared_prefix_for_the_next_call(smol: LlamaCppGenerator) -> None:
    reqs = batch_requests(0.0)
    first = smol.generate_many(reqs[:2])
    again = smol.generate_many(reqs[2:4])  # same system prompt: its KV is still in seq 0
    assert smol.last_batch.reused_prefix_tokens >= smol.last_batch.shared_prefix_tokens > 20
    assert smol.last_batch.evaluated_tokens == smol.last_batch.prompt_tokens - 2 * smol.last_batch.shared_prefix_tokens
    # A lone request: only what the last call left counts as cached, the rest it read itself
    [alone] = smol.generate_many(reqs[4:])
    stats = smol.last_batch
    assert 20 < alone.cached_tokens == stats.reused_prefix_tokens < alone.prompt_tokens
    assert alone.prompt_tokens - alone.cached_tokens == stats.evaluated_tokens
    fresh = LlamaCppGenerator(smollm2(), n_ctx=smol.n_ctx, keep_prefix=False)
    try:
        assert [r.text for r in fresh.generate_many(reqs[2:4])] == [r.text for r in again]
        assert fresh.last_batch.reused_prefix_tokens == 0
        assert [r.text for r in fresh.generate_many(reqs[:2])] == [r.text for r in first]
    finally:
        fresh.close()


@pytest.mark.slow
def test_generate_many_runs_in_waves_when_the_context_is_small() -> None:
    gen = LlamaCppGenerator(smollm2(), n_ctx=2048, check_memory=False)
    try:
        notes = " ".join(f"crate {j} holds {j % 7} pears." for j in range(70))  # ~500 tokens per prompt
        reqs = [GenRequest((ChatMessage("user", f"Question {i}: {q}\n{notes}"),), max_tokens=60, temperature=0.0,
                           seed=1) for i, q in enumerate(BATCH_QUESTIONS[:4])]
        out = gen.generate_many(reqs)
        assert gen.last_batch.waves >= 2  # 4 × (~500 prompt + 60 answer) tokens cannot share 2048 cells
        assert all(r.text.strip() and r.finish_reason in ("stop", "length") for r in out)
        # Reproducible for its seeds. (Not always equal to one-at-a-time here: these long suffixes
        # interleave their KV cells; see the module doc, "Batched decoding".)
        assert [r.text for r in gen.generate_many(reqs)] == [r.text for r in out]
    finally:
        gen.close()


@pytest.mark.slow
def test_generate_many_cancel_stops_every_sequence_within_a_second(smol: LlamaCppGenerator) -> None:
    token = CancelToken()
    set_at = [0.0]
    seen: set[int] = set()

    def on_token(i: int, _text: str) -> None:
        seen.add(i)
        if len(seen) == 4 and not set_at[0]:  # every sequence is decoding: cancel half a second later
            set_at[0] = time.monotonic() + 0.5
            threading.Timer(0.5, token.set).start()

    reqs = [GenRequest(tuple(STORY), max_tokens=1500, temperature=0.8, seed=i) for i in range(4)]  # one wave
    out = smol.generate_many(reqs, cancel=token, on_token=on_token)
    assert smol.last_batch.waves == 1
    latency = time.monotonic() - set_at[0]
    assert [r.finish_reason for r in out] == ["cancelled"] * 4
    assert all(r.text for r in out) and latency < 1.0
    # The context is usable afterwards and gives the same results as before.
    reqs2 = batch_requests(0.0)[:2]
    assert [r.text for r in smol.generate_many(reqs2)] == [smol.generate_many([r])[0].text for r in reqs2]


@pytest.mark.slow
def test_generate_many_cancel_during_long_prefill(smol: LlamaCppGenerator) -> None:
    filler = " ".join(f"Note {i}: apples, pears and plums were counted in crate {i}." for i in range(300))
    reqs = [GenRequest((ChatMessage("user", f"{filler}\nQuestion {i}: summarise the notes."),), max_tokens=50,
                       temperature=0.0, seed=1) for i in range(2)]
    token = CancelToken()
    threading.Timer(0.3, token.set).start()
    t0 = time.monotonic()
    out = smol.generate_many(reqs, cancel=token)
    assert [r.finish_reason for r in out] == ["cancelled", "cancelled"]
    assert time.monotonic() - t0 - 0.3 < 1.0
    assert smol.generate_many([batch_requests(0.0)[0]])[0].text


@pytest.mark.slow
def test_generate_many_too_long_prompt_is_a_clear_error() -> None:
    gen = LlamaCppGenerator(smollm2(), n_ctx=2048, check_memory=False)
    try:
        long = " ".join(["word"] * 4000)
        with pytest.raises(ValueError, match=r"exceed context window of 2048"):
            gen.generate_many([GenRequest((ChatMessage("user", long),), 10, 0.0, 1)])
    finally:
        gen.close()


@pytest.mark.slow
def test_qwen_generate_many_greedy_batched_equals_one_at_a_time(qwen: LlamaCppGenerator) -> None:
    """Greedy answers with a shared prefix match; seeded sampling is reproducible for the batch
    (with weight repacking, rows differ in the last bits between batch heights: module doc)."""
    reqs = [GenRequest((ChatMessage("system", "用一句话回答。"), ChatMessage("user", q)), max_tokens=32,
                       temperature=t, seed=5 + i)
            for i, (q, t) in enumerate([("中国的首都是哪里？", 0.0), ("水的化学式是什么？", 0.0),
                                         ("太阳从哪边升起？", 0.7), ("一年有几个月？", 0.7)])]
    batched = qwen.generate_many(reqs)
    assert [r.text for r in batched[:2]] == [qwen.generate_many([r])[0].text for r in reqs[:2]]
    assert "北京" in batched[0].text
    assert [r.text for r in qwen.generate_many(reqs)] == [r.text for r in batched]


@pytest.mark.slow
def test_first_token_logprobs_agree_with_a_full_softmax_reference(smol: LlamaCppGenerator) -> None:
    """The scorer's log P(first token) against the obvious reference: a second model with
    ``logits_all=True`` evaluating the same prompt tokens, and a softmax over its last logits row."""
    import numpy as np
    from llama_cpp import Llama

    from rag_desktop.core.protocols import TokenScorer

    assert isinstance(smol, TokenScorer)
    messages = [ChatMessage("user", "Is Paris the capital of France? Answer yes or no.")]
    words = ["yes", "Yes", "no", "No"]
    got = smol.first_token_logprobs(messages, words)
    assert all(v < 0 for v in got)
    # Reproducible, and unaffected by a stream that ran in between.
    smol.generate(messages, max_tokens=4, temperature=0.0, seed=0)
    assert smol.first_token_logprobs(messages, words) == got

    toks, _ = smol._prompt(smol._llm, messages)
    # The same context settings as the generator's (flash attention, batch size): the layout effects
    # of the module doc then do not apply, and the two must agree to float precision.
    ref = Llama(model_path=str(smollm2()), n_ctx=smol.n_ctx, n_batch=min(smol.n_batch, smol.n_ctx),
                logits_all=True, flash_attn=True, verbose=False, n_threads=smol.threads,
                n_threads_batch=smol.threads)
    try:
        ref.eval(toks)
        row = np.array(ref.scores[len(toks) - 1], dtype=np.float64)
        row = row - row.max()
        logp = row - np.log(np.exp(row).sum())
        ids = [ref.tokenize(w.encode(), add_bos=False, special=False)[0] for w in words]
        assert np.allclose(got, [logp[i] for i in ids], atol=1e-3)
        # The greedy first token is the most likely of the scored words when it is one of them.
        first = smol.generate(messages, max_tokens=1, temperature=0.0, seed=0).strip()
        if first in words:
            assert words[int(np.argmax(got))] == first
    finally:
        ref.close()


def test_first_token_logprobs_refuses_when_cancelled_before(tmp_path: Path) -> None:
    from rag_desktop.core.types import Cancelled

    gen = LlamaCppGenerator(tmp_path / "never-loaded.gguf")
    token = CancelToken()
    token.set()
    with pytest.raises(Cancelled):
        gen.first_token_logprobs([ChatMessage("user", "x")], ["yes"], cancel=token)


@pytest.mark.slow
def test_a_kept_judgement_is_shared_by_the_answer_that_follows(smol: LlamaCppGenerator) -> None:
    """first_token_logprobs(keep=True) on the answer prompt with a question after it: its scores are
    near those of a cleared cache (evaluated from the saved prefix, the split moves the logits by
    ~0.1 on SmolLM2; the app always judges with keep, so a question is always judged the same), and the
    next stream evaluates only what follows the tokens the two prompts share; one text each time."""
    system = ChatMessage("system", "You answer from the sources in one short sentence.")
    example = (ChatMessage("user", "Sources: [1] The canteen opens at 11:30.\nQuestion: When does it open?"),
               ChatMessage("assistant", "At 11:30 [1]."))
    user = "Sources: [1] The library opens at nine and closes at five.\nQuestion: When does the library open?"
    answer = [system, *example, ChatMessage("user", user)]
    judge = [system, *example, ChatMessage("user", user + "\n\nDo the sources answer it? Reply yes or no.")]
    words = ["yes", "no"]
    plain = smol.first_token_logprobs(judge, words)
    texts = []
    for _ in range(2):
        kept = smol.first_token_logprobs(judge, words, keep=True)
        assert all(abs(a - b) < 0.3 for a, b in zip(kept, plain, strict=True)), (kept, plain)
        assert kept == smol.first_token_logprobs(judge, words, keep=True)  # and the same each time
        texts.append(tokens(list(smol.stream(answer, max_tokens=12, temperature=0.0, seed=1))))
        n_full = len(smol._prompt(smol._llm, answer)[0])
        # everything up to the question's end came from the judgement's evaluation: the answer read
        # only the end of the user's turn and the generation prompt
        assert n_full - 8 <= smol.last_prefix_reused < n_full, (smol.last_prefix_reused, n_full)
    assert texts[0] == texts[1] and texts[0].strip()
    # a stream with no judgement before it starts from the saved prefix as always
    tokens(list(smol.stream(answer, max_tokens=4, temperature=0.0, seed=1)))
    assert smol.last_prefix_reused < n_full - 8


@pytest.mark.slow
def test_a_judgement_after_the_answer_reads_only_its_own_tokens(smol: LlamaCppGenerator) -> None:
    """first_token_logprobs(after=True) right after a stream: the prompt shares the stream's up to the
    question, so only the judgement's own tokens are evaluated, and its scores are near a cleared
    cache's and the same each time."""
    system = ChatMessage("system", "You answer from the sources in one short sentence.")
    user = "Sources: [1] The library opens at nine and closes at five.\nQuestion: When does the library open?"
    answer = [system, ChatMessage("user", user)]
    judge = [system, ChatMessage("user", user + "\n\nDo the sources answer it? Reply yes or no.")]
    words = ["yes", "no"]
    plain = smol.first_token_logprobs(judge, words)
    llm = smol._llm
    real_eval = llm.eval
    fed: list[int] = []

    def counting(tokens):  # type: ignore[no-untyped-def]
        fed.append(len(tokens))
        return real_eval(tokens)

    runs = []
    for _ in range(2):
        tokens(list(smol.stream(answer, max_tokens=12, temperature=0.0, seed=1)))
        llm.eval = counting
        try:
            runs.append(smol.first_token_logprobs(judge, words, after=True))
        finally:
            llm.eval = real_eval
        n_judge = len(smol._prompt(llm, judge)[0])
        assert fed and fed[-1] <= 24 < n_judge, (fed, n_judge)  # the judgement's line, not the sources again
    assert runs[0] == runs[1]
    assert all(abs(a - b) < 0.3 for a, b in zip(runs[0], plain, strict=True)), (runs[0], plain)


def _reference_logprobs(toks: list[int], start: int, end: int, n_ctx: int, n_batch: int, threads: int) -> list[float]:
    """log P(toks[i] | toks[:i]) for i in [start, end) from a second model with ``logits_all=True`` that reads
    ``toks[:end]`` at once, and a softmax over each row: the obvious reference."""
    import numpy as np
    from llama_cpp import Llama

    ref = Llama(model_path=str(smollm2()), n_ctx=n_ctx, n_batch=n_batch, logits_all=True, flash_attn=True,
                verbose=False, n_threads=threads, n_threads_batch=threads)
    try:
        ref.eval(toks[:end])
        out = []
        for i in range(start, end):
            row = np.array(ref.scores[i - 1], dtype=np.float64)
            row = row - row.max()
            out.append(float(row[toks[i]] - np.log(np.exp(row).sum())))
        return out
    finally:
        ref.close()


@pytest.mark.slow
def test_a_prompts_tail_is_scored_as_a_full_softmax_reference_scores_it(smol: LlamaCppGenerator) -> None:
    """tail_logprob's sum over the question's tokens against the reference: from a cleared cache (no pieces)
    the same batch as the reference's, so equal to float precision; read in pieces after the prefix's saved
    state, near it (the split moves SmolLM2's logits in the last bits, the module doc of llama_segments)."""
    from rag_desktop.backends.llama_segments import tail_span
    from rag_desktop.core.protocols import PromptScorer

    question = "When does the museum close on Sundays?"
    messages = _answer_prompt(question)
    assert isinstance(smol, PromptScorer)
    toks = smol._prompt(smol._llm, messages)[0]
    start, end = tail_span(smol._llm, lambda ms: smol._prompt(smol._llm, ms)[0], messages, toks, question)
    # the span is the question's own tokens: they spell it, and the turn ends after them
    assert smol._llm.detokenize(toks[start:end]).decode().strip() == question
    assert not smol._llm.detokenize([toks[end]], special=False)
    want = _reference_logprobs(toks, start, end, smol.n_ctx, min(smol.n_batch, smol.n_ctx), smol.threads)
    plain = LlamaCppGenerator(smollm2(), n_ctx=smol.n_ctx, reuse_prefix_state=False)
    try:
        lp, n = plain.tail_logprob(messages, question)
        assert n == end - start and lp == pytest.approx(sum(want), abs=1e-3)
    finally:
        plain.close()
    lp, n = smol.tail_logprob(messages, question)
    assert n == end - start and lp == pytest.approx(sum(want), abs=0.1 * n)
    assert smol.tail_logprob(messages, question) == (lp, n)  # the same pieces each time
    with pytest.raises(ValueError, match="does not end with"):
        smol.tail_logprob(messages, "When does the museum open?")


@pytest.mark.slow
def test_the_answer_after_a_scored_question_keeps_its_sources_and_a_seed_keeps_its_text(
        smol: LlamaCppGenerator) -> None:
    """The relevance check reads the answer prompt up to its question's end (app.abstention.relevance): the
    answer that follows keeps all of it and reads only the end of the turn, and writes for the seed the text
    a generator that read nothing before writes after the same check."""
    from rag_desktop.backends.llama_segments import cuts

    opens = "The city museum opens at ten in the morning, every day of the week except Mondays and holidays. " * 14
    closes = "On weekdays it closes at six in the evening; on Saturdays and Sundays it stays open until eight. " * 14
    question = "When does the museum close?"
    prompt = _sources_prompt([opens, closes, "Tickets cost five euros."], question)
    bare = _sources_prompt([], question)
    smol.tail_logprob(bare, question)  # as the check reads it: the bare prompt first
    smol.tail_logprob(prompt, question)
    text = smol.generate(prompt, max_tokens=24, temperature=0.8, seed=5)

    def render(ms: object) -> list[int]:
        return smol._prompt(smol._llm, ms)[0]  # type: ignore[arg-type]

    full = render(prompt)
    at = cuts(render, prompt, full)
    assert len(at) >= 3  # the prefix and two sources, then the last source and the question in one piece
    assert len(full) - 8 <= smol.last_prefix_reused < len(full)  # everything but the end of the turn
    fresh = LlamaCppGenerator(smollm2(), n_ctx=smol.n_ctx)
    try:
        fresh.tail_logprob(prompt, question)
        assert fresh.generate(prompt, max_tokens=24, temperature=0.8, seed=5) == text
        # after another prompt, and after a check of another question on the same sources: the same text
        fresh.generate(_sources_prompt(["Bread is baked daily."], "When is bread baked?"), max_tokens=8,
                       temperature=0.8, seed=1)
        other = _sources_prompt([opens, closes, "Tickets cost five euros."], "When does the museum open?")
        fresh.tail_logprob(other, "When does the museum open?")
        fresh.tail_logprob(prompt, question)
        assert fresh.generate(prompt, max_tokens=24, temperature=0.8, seed=5) == text
        # a stream of another prompt after a check keeps the pieces only, not the scored end
        fresh.tail_logprob(prompt, question)
        fresh.generate(other, max_tokens=4, temperature=0.8, seed=5)
        assert fresh.last_prefix_reused == at[-1]
    finally:
        fresh.close()


def test_scoring_a_tail_refuses_when_cancelled_before(tmp_path: Path) -> None:
    from rag_desktop.core.types import Cancelled

    gen = LlamaCppGenerator(tmp_path / "never-loaded.gguf")
    token = CancelToken()
    token.set()
    with pytest.raises(Cancelled):
        gen.tail_logprob([ChatMessage("user", "x")], "x", cancel=token)
