"""The Models page's Qt-free parts: the catalogue's rows, the measured speed, and a download task
cancelled mid-file (against the fake hub on loopback, tests/fake_hub.py)."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest
from fake_hub import TINY, FakeHub, hub, serve_tiny
from test_gui_models_page import gguf_bytes

from rag_desktop.app import fetch
from rag_desktop.app.fetch import SOURCES
from rag_desktop.app.model_download import DownloadDone, download
from rag_desktop.app.model_files import smollm2_path
from rag_desktop.app.model_speed import Speed, SpeedMeter, load_speeds, record_speed
from rag_desktop.app.models_catalog import (
    COMPUTE_ALLOWANCE_BYTES,
    GGUF_MEMORY_FACTOR,
    TORCH_MEMORY_FACTOR,
    catalog,
    check_gguf,
    use,
)
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.gguf_meta import kv_cache_bytes, read_gguf_metadata
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Cancelled, CancelToken, Progress

__all__ = ["hub"]  # the fixture, used by name


def _settings(tmp_path: Path, **models: object) -> Settings:
    s = Settings()
    m = dataclasses.replace(s.models, model_dir=str(tmp_path / "models"), **models)  # type: ignore[arg-type]
    return dataclasses.replace(s, models=m).validate()


def test_rows_for_the_defaults_say_what_is_in_use_and_what_a_download_weighs(tmp_path: Path) -> None:
    rows = {r.key: r for r in catalog(_settings(tmp_path), speeds={})}
    assert [k.split(":")[0] for k in rows] == ["generator"] * 3 + ["embedder"] * 2 + ["reranker"] * 2
    assert rows["generator:embedded"].in_use and not rows["generator:embedded-fast"].in_use
    assert rows["embedder:embedded"].in_use and rows["reranker:none"].in_use
    qwen = rows[f"generator:{SOURCES['generator'].target}"]
    assert qwen.source is SOURCES["generator"] and not qwen.on_disk and not qwen.in_use
    assert qwen.size_is_download and qwen.size_bytes == SOURCES["generator"].approx_bytes
    # Not on disk: size × the documented factor + llama.cpp's compute allowance.
    assert qwen.memory_bytes == int(qwen.size_bytes * GGUF_MEMORY_FACTOR) + COMPUTE_ALLOWANCE_BYTES
    m3 = rows["embedder:bge-m3"]
    assert m3.memory_bytes == int(SOURCES["embedder"].approx_bytes * TORCH_MEMORY_FACTOR)
    assert all(r.speed is None for r in rows.values())  # nothing measured: no number


def test_a_downloaded_model_on_disk_is_sized_from_the_disk_and_its_header(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    gguf = folder / SOURCES["generator"].target
    data = smollm2_path().read_bytes()
    gguf.write_bytes(data)
    (folder / "bge-m3").mkdir()
    (folder / "bge-m3" / "config.json").write_text("{}")
    (folder / "bge-m3" / "model.safetensors").write_bytes(b"\0" * 1000)
    s = _settings(tmp_path, generator=str(gguf), n_ctx=1024)
    rows = {r.key: r for r in catalog(s, speeds={})}
    qwen = rows[f"generator:{gguf.name}"]
    assert qwen.on_disk and qwen.in_use and not qwen.size_is_download and qwen.size_bytes == len(data)
    assert qwen.memory_bytes == (len(data) + kv_cache_bytes(read_gguf_metadata(gguf), 1024)
                                 + COMPUTE_ALLOWANCE_BYTES)
    assert not rows["generator:embedded"].in_use and "generator:own" not in rows
    assert rows["embedder:bge-m3"].on_disk and rows["embedder:bge-m3"].size_bytes == 1002
    # The same model under openai: a GGUF row is not "in use" when another backend answers.
    served = dataclasses.replace(s, models=dataclasses.replace(s.models, generator_backend="openai"))
    assert not any(r.in_use for r in catalog(served, speeds={}) if r.role == "generator")


def test_use_sets_the_role_and_its_local_backend(tmp_path: Path) -> None:
    s = _settings(tmp_path, embedder_backend="openai", reranker_url="http://127.0.0.1:9/rerank")
    rows = {r.key: r for r in catalog(s, speeds={})}
    s2 = use(s, rows["embedder:bge-m3"])
    assert s2.models.embedder == str(tmp_path / "models" / "bge-m3") and s2.models.embedder_backend == "local"
    s3 = use(s2, rows["reranker:none"])
    assert s3.models.reranker == "" and s3.models.reranker_url == ""
    s4 = use(s3, rows["generator:embedded-fast"])
    assert s4.models.generator == "embedded-fast"
    own = {r.key: r for r in catalog(_settings(tmp_path, embedder=str(tmp_path / "mine")), speeds={})}
    assert own["embedder:own"].in_use and not own["embedder:own"].on_disk


def test_check_gguf_names_the_file_and_the_reason(tmp_path: Path) -> None:
    good = tmp_path / "a.gguf"
    good.write_bytes(gguf_bytes(2048))
    assert check_gguf(good) == good.resolve()
    for name, data, reason in [("b.gguf", b"PK\x03\x04zip", "starts with b'PK\\x03\\x04'"),
                               ("c.gguf", b"", "starts with b''"),
                               ("d.gguf", b"GGUF\x01\x00\x00\x00", "version 1")]:
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ModelUnavailable) as err:
            check_gguf(p)
        assert str(p) in str(err.value) and reason in str(err.value)
    with pytest.raises(ModelUnavailable, match="is a folder"):
        check_gguf(tmp_path)


def test_a_measured_speed_is_kept_and_shown_for_its_model(tmp_path: Path) -> None:
    meter = SpeedMeter(prompt_tokens=200)
    assert meter.result(10) is None  # no token yet: nothing measured
    meter.t0 -= 2.0  # the prompt took two seconds to read
    meter.token()
    meter.t_first = (meter.t_first or 0) - 1.0  # and nine more tokens one second
    for _ in range(9):
        meter.token()
    speed = meter.result(10)
    assert speed is not None
    assert speed.prompt_tok_s == pytest.approx(200 / 1.0, rel=0.05)
    assert speed.answer_tok_s == pytest.approx(9 / 1.0, rel=0.05)
    path = tmp_path / "speeds.json"
    record_speed("llama_cpp:Qwen3-4B-Q4_K_M.gguf", speed, path)
    assert load_speeds(path) == {"llama_cpp:Qwen3-4B-Q4_K_M.gguf": speed}
    rows = {r.key: r for r in catalog(_settings(tmp_path), speeds=load_speeds(path))}
    assert rows[f"generator:{SOURCES['generator'].target}"].speed == speed
    assert rows["generator:embedded"].speed is None
    path.write_text("{not json")
    assert load_speeds(path) == {}  # an unreadable file: nothing measured, no crash


def test_the_service_records_the_speed_of_a_real_answer(tmp_path: Path) -> None:
    from rag_desktop.app.model_speed import speeds_path
    from rag_desktop.app.runtime import Runtime
    from rag_desktop.app.service import RagService
    from rag_desktop.core.types import RankedList

    s = _settings(tmp_path, generator=str(smollm2_path()), n_ctx=1024)
    # abstain=False: the library is empty, and the model must be asked for its speed to be measured
    s = dataclasses.replace(s, generation=dataclasses.replace(s.generation, max_tokens=24, passages=False,
                                                              abstain=False))
    service = RagService(tmp_path / "library", s, runtime=Runtime(s))
    try:
        for _ in service.answer("What is the Wason selection task?", RankedList("baseline", ())):
            pass
    finally:
        service.runtime.close()
        service.close()
    speeds = load_speeds(speeds_path())
    got = speeds.get(f"llama_cpp:{smollm2_path().name}")
    assert isinstance(got, Speed) and got.prompt_tok_s > 0 and got.answer_tok_s > 0 and got.answer_tokens >= 4
    assert json.loads(speeds_path().read_text())  # written as JSON beside the app's data


def test_cancel_mid_file_stops_the_transfer_and_keeps_the_partial_file(hub: FakeHub, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1024)
    # A cancel reaches a read blocked on a silent server when the read times out (fetch.py's docstring).
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 1)
    f = serve_tiny(hub, size=60_000)
    hub.stall_after[(TINY.repo_id, "tiny.gguf")] = 20_000
    dest = tmp_path / "models"
    cancel = CancelToken()
    events = download(TINY, dest, endpoint=hub.url, cancel=cancel, cache_dir=tmp_path / "hf", max_attempts=1,
                      retry_wait=0.0)
    seen: list[Progress] = []
    with pytest.raises(Cancelled):
        for ev in events:
            assert isinstance(ev, Progress)
            seen.append(ev)
            if ev.current > 0:
                cancel.set()  # while the server still hangs: only the cancel can end this transfer
    assert seen[-1].total == len(f.content) and 0 < seen[-1].current <= 20_000
    assert not (dest / "tiny.gguf").exists()
    partial = list((dest / fetch.STAGING_DIR).rglob("*.incomplete"))
    assert len(partial) == 1 and 0 < partial[0].stat().st_size <= 20_000
    kept = partial[0].stat().st_size
    assert not [t for t in threading.enumerate() if t.name.startswith(("download-", "fetch-watch"))]

    hub.release.set()
    out = list(download(TINY, dest, endpoint=hub.url, cache_dir=tmp_path / "hf", max_attempts=1, retry_wait=0.0))
    assert isinstance(out[-1], DownloadDone) and (dest / "tiny.gguf").read_bytes() == f.content
    assert hub.gets("tiny.gguf")[-1] == f"bytes={kept}-"  # the next Download resumed the kept bytes
