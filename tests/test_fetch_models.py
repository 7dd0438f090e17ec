"""scripts/fetch_models.py against a fake Hugging Face Hub on loopback (never the internet;
tests/fake_hub.py). The unit under test — rag_desktop.app.fetch, its command line
rag_desktop.cli.fetch_models and the script — runs for real, with the real huggingface_hub doing the HTTP.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from fake_hub import TINY, FakeHub, git_file, hub, lfs_file, online, serve_real_table, serve_tiny, small_chunks

from rag_desktop.app import fetch
from rag_desktop.app.config import settings_from_dict
from rag_desktop.app.fetch import ChecksumError, FetchError, ModelSource

__all__ = ["hub", "online", "small_chunks"]  # fixtures used by name
from rag_desktop.cli import fetch_models as fetch_cli

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "fetch_models.py"


def _fetch(source: ModelSource, dest: Path, hub: FakeHub, tmp_path: Path, *,
           max_attempts: int = 5) -> fetch.FetchResult:
    return fetch.fetch_model(source, dest, endpoint=hub.url, token=False, cache_dir=tmp_path / "hf-cache",
                             max_attempts=max_attempts, retry_wait=0.0, log=lambda line: None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _script_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT")}
    env["HF_HUB_OFFLINE"] = "0"
    env["TRANSFORMERS_OFFLINE"] = "0"
    env["HF_HOME"] = str(tmp_path / "hf-home")  # no user token or cache is read
    return env


# --------------------------------------------------------------------------- tests


def test_git_blob_sha1_matches_git(tmp_path: Path) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    p = tmp_path / "f.json"
    p.write_bytes(b'{"a": 1}\n' * 37)
    ref = subprocess.run([git, "hash-object", str(p)], capture_output=True, text=True, check=True).stdout.strip()
    assert fetch.git_blob_sha1(p) == ref
    assert fetch.file_sha256(p) == hashlib.sha256(p.read_bytes()).hexdigest()


def test_full_fetch_of_the_real_table(hub: FakeHub, online: None, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    serve_real_table(hub)
    dest = tmp_path / "models"
    rc = fetch_cli.main(["--dest", str(dest), "--endpoint", hub.url], token=False, cache_dir=tmp_path / "hf-cache",
                    retry_wait=0.0)
    out = capsys.readouterr()
    assert rc == 0, out.err

    gguf = dest / "Qwen3-4B-Q4_K_M.gguf"
    assert gguf.read_bytes() == hub.repos["Qwen/Qwen3-4B-GGUF"]["Qwen3-4B-Q4_K_M.gguf"].content
    m3 = hub.repos["BAAI/bge-m3"]
    want_m3 = {"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
               "sentencepiece.bpe.model", "sparse_linear.pt", "colbert_linear.pt", "pytorch_model.bin",
               "1_Pooling/config.json", "modules.json", "config_sentence_transformers.json",
               "sentence_bert_config.json"}
    got_m3 = {str(p.relative_to(dest / "bge-m3")) for p in (dest / "bge-m3").rglob("*") if p.is_file()}
    assert got_m3 == want_m3  # no onnx/, images, README, .gitattributes, and no .cache/ left behind
    for name in want_m3:
        assert (dest / "bge-m3" / name).read_bytes() == m3[name].content
    rr = {str(p.relative_to(dest / "bge-reranker-v2-m3")) for p in (dest / "bge-reranker-v2-m3").rglob("*")}
    assert rr == {"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                  "sentencepiece.bpe.model", "model.safetensors"}
    assert sorted(p.name for p in dest.iterdir()) == ["Qwen3-4B-Q4_K_M.gguf", "bge-m3", "bge-reranker-v2-m3"]

    # Only the planned files crossed the wire, each at the pinned commit, each once.
    fetched = hub.downloads()
    assert not [p for p in fetched if "onnx" in p or "Q5_K_M" in p or "Q8_0" in p or "README" in p]
    assert all(f"/resolve/{hub.commit(p.split('/resolve/')[0].strip('/'))}/" in p for p in fetched)
    assert len(fetched) == len(set(fetched)) == 1 + len(want_m3) + 6

    # One line per file, and settings lines that the app's settings loader accepts.
    assert "[2/12] tokenizer.json" in out.out and "sha256 ok" in out.out and "git-sha1 ok" in out.out
    toml_text = out.out[out.out.index("[models]"):]
    settings = settings_from_dict(tomllib.loads(toml_text))
    assert Path(settings.models.generator) == gguf
    assert Path(settings.models.embedder) == dest / "bge-m3"
    assert Path(settings.models.reranker) == dest / "bge-reranker-v2-m3"

    # A second run verifies what is there and downloads nothing.
    hub.log.clear()
    rc = fetch_cli.main(["--dest", str(dest), "--endpoint", hub.url, "--only", "embedder"], token=False,
                    cache_dir=tmp_path / "hf-cache", retry_wait=0.0)
    out = capsys.readouterr()
    assert rc == 0 and "already present, verified" in out.out
    assert hub.downloads() == []


def test_script_runs_in_a_fresh_process(hub: FakeHub, tmp_path: Path) -> None:
    serve_real_table(hub)
    dest = tmp_path / "models"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "generator", "--dest", str(dest), "--endpoint", hub.url],
        capture_output=True, text=True, timeout=60, env=_script_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    gguf = dest / "Qwen3-4B-Q4_K_M.gguf"
    assert gguf.read_bytes()[:4] == b"GGUF"
    assert tomllib.loads(proc.stdout[proc.stdout.index("[models]"):]) == {"models": {"generator": str(gguf)}}
    assert not (dest / "bge-m3").exists()


def test_dropped_connection_resumes_with_range_and_verifies(hub: FakeHub, online: None, small_chunks: None,
                                                            tmp_path: Path) -> None:
    f = serve_tiny(hub, size=6000)
    hub.xet_backed = True  # like the real GGUF: the fetch must still take the HTTP path that resumes
    hub.drop_after[(TINY.repo_id, "tiny.gguf")] = 3000
    dest = tmp_path / "models"
    result = _fetch(TINY, dest, hub, tmp_path, max_attempts=3)

    assert (dest / "tiny.gguf").read_bytes() == f.content
    assert not result.reused
    ranges = hub.gets("tiny.gguf")
    assert len(ranges) == 2 and ranges[0] is None  # the first GET was cut, the second one resumed
    assert ranges[1] is not None
    start = int(ranges[1].removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= 3000  # resumed from what had arrived, not from zero
    assert not (dest / fetch.STAGING_DIR).exists()


def test_ctrl_c_mid_file_exits_130_and_installs_nothing(hub: FakeHub, tmp_path: Path) -> None:
    serve_real_table(hub)
    hub.stall_after[("Qwen/Qwen3-4B-GGUF", "Qwen3-4B-Q4_K_M.gguf")] = 3000
    dest = tmp_path / "models"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--only", "generator", "--dest", str(dest), "--endpoint", hub.url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_script_env(tmp_path),
        # A suite started in the background by a non-interactive shell ignores SIGINT and the
        # child would inherit that (Python then installs no KeyboardInterrupt handler).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 20
        while not list((dest / fetch.STAGING_DIR).rglob("*.incomplete")):  # the transfer has started
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "run again to resume" in err and "Traceback" not in err
    assert not (dest / "Qwen3-4B-Q4_K_M.gguf").exists()
    assert list((dest / fetch.STAGING_DIR).rglob("*.incomplete"))  # kept for the next run


def test_partial_file_survives_a_failed_run_and_the_next_run_resumes(hub: FakeHub, online: None,
                                                                    small_chunks: None, tmp_path: Path) -> None:
    f = serve_tiny(hub, size=6000)
    hub.drop_after[(TINY.repo_id, "tiny.gguf")] = 4000
    dest = tmp_path / "models"
    with pytest.raises(FetchError, match=r"(?s)interrupted 1 time\(s\).*Run the command again to resume"):
        _fetch(TINY, dest, hub, tmp_path, max_attempts=1)
    assert not (dest / "tiny.gguf").exists()  # nothing half-written under the final name
    partial = list((dest / fetch.STAGING_DIR).rglob("*.incomplete"))
    assert len(partial) == 1 and 0 < partial[0].stat().st_size < len(f.content)
    kept = partial[0].stat().st_size

    _fetch(TINY, dest, hub, tmp_path, max_attempts=1)  # "run the script again"
    assert (dest / "tiny.gguf").read_bytes() == f.content
    assert hub.gets("tiny.gguf")[-1] == f"bytes={kept}-"


@pytest.mark.parametrize("lfs", [True, False], ids=["lfs-sha256", "git-blob-sha1"])
def test_checksum_mismatch_is_reported_and_nothing_is_installed(hub: FakeHub, online: None, tmp_path: Path,
                                                                 lfs: bool) -> None:
    source = ModelSource(role="embedder", repo_id="tests/tiny-folder", target="tiny-folder", kind="folder",
                         required=("config.json", "weights.bin"))
    weights = lfs_file("weights", 3000)
    config = git_file('{"hidden_size": 8}\n')
    liar = weights if lfs else config
    if lfs:
        liar.claimed_sha256 = hashlib.sha256(b"something else").hexdigest()
    else:
        liar.claimed_blob_id = hashlib.sha1(b"something else").hexdigest()
    hub.repos[source.repo_id] = {"config.json": config, "weights.bin": weights}
    dest = tmp_path / "models"

    with pytest.raises(ChecksumError) as err:
        _fetch(source, dest, hub, tmp_path)
    bad = "weights.bin" if lfs else "config.json"
    msg = str(err.value)
    assert bad in msg and ("sha256" if lfs else "git blob sha1") in msg and "does not match" in msg
    assert not (dest / "tiny-folder").exists()
    assert not list((dest / fetch.STAGING_DIR).rglob(bad))  # the bad copy is gone, not just unused

    # Once the hub tells the truth, the same destination completes without manual cleanup.
    liar.claimed_sha256 = liar.claimed_blob_id = None
    _fetch(source, dest, hub, tmp_path)
    assert (dest / "tiny-folder" / "weights.bin").read_bytes() == weights.content
    assert (dest / "tiny-folder" / "config.json").read_bytes() == config.content


def test_outdated_folder_is_replaced_only_after_the_new_copy_verified(hub: FakeHub, online: None,
                                                                      tmp_path: Path) -> None:
    source = ModelSource(role="reranker", repo_id="tests/folder", target="folder", kind="folder",
                         required=("config.json",), weights=("model.safetensors", "pytorch_model.bin"))
    weights = lfs_file("w", 2000)
    hub.repos[source.repo_id] = {"config.json": git_file("{}\n"), "model.safetensors": weights,
                                 "pytorch_model.bin": lfs_file("same weights, pickled", 2500)}
    dest = tmp_path / "models"
    old = dest / "folder"
    old.mkdir(parents=True)
    (old / "config.json").write_text('{"stale": true}\n')

    # A failing download leaves the old folder exactly as it was.
    weights.claimed_sha256 = "0" * 64
    with pytest.raises(ChecksumError):
        _fetch(source, dest, hub, tmp_path)
    assert (old / "config.json").read_text() == '{"stale": true}\n'

    weights.claimed_sha256 = None
    result = _fetch(source, dest, hub, tmp_path)
    assert result.path == old and not result.reused
    assert sorted(p.name for p in old.iterdir()) == ["config.json", "model.safetensors"]  # safetensors, not both
    assert (old / "config.json").read_text() == "{}\n"


def test_missing_required_file_is_named_before_any_download(hub: FakeHub, online: None, tmp_path: Path) -> None:
    serve_tiny(hub)
    source = ModelSource(role="generator", repo_id=TINY.repo_id, target="x.gguf", kind="file",
                         required=("Qwen3-4B-Q4_K_M.gguf",))
    with pytest.raises(FetchError, match=r"tests/tiny-gguf@main has no Qwen3-4B-Q4_K_M.gguf"):
        _fetch(source, tmp_path / "models", hub, tmp_path)
    assert hub.downloads() == []
    unknown = ModelSource(role="generator", repo_id="tests/renamed", target="x.gguf", kind="file", required=("x",))
    with pytest.raises(FetchError, match=r"no such repo"):
        _fetch(unknown, tmp_path / "models", hub, tmp_path)


def test_connection_refused_gives_a_clear_message_and_exit_1(tmp_path: Path) -> None:
    dest = tmp_path / "models"
    url = f"http://127.0.0.1:{_free_port()}"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dest", str(dest), "--endpoint", url],
        capture_output=True, text=True, timeout=60, env=_script_env(tmp_path),
    )
    assert proc.returncode == 1
    assert f"cannot reach {url}" in proc.stderr and "offline" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not dest.exists() or not any(dest.iterdir())  # nothing written, let alone under a final name


def test_offline_mode_variable_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FetchError, match="HF_HUB_OFFLINE"):
        fetch.fetch_model(TINY, tmp_path / "models", endpoint=f"http://127.0.0.1:{_free_port()}", token=False)
    assert not (tmp_path / "models").exists()


def test_list_shows_the_table_without_network(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "models"
    (dest / "bge-m3").mkdir(parents=True)
    assert fetch_cli.main(["--list", "--dest", str(dest), "--endpoint", f"http://127.0.0.1:{_free_port()}"]) == 0
    out = capsys.readouterr().out
    for s in fetch.SOURCES.values():
        assert s.repo_id in out
    assert f"{dest / 'bge-m3'}  [present" in out
    assert f"{dest / 'Qwen3-4B-Q4_K_M.gguf'}  [missing]" in out


def test_corrupted_installed_file_is_detected_and_replaced(hub: FakeHub, online: None, tmp_path: Path) -> None:
    f = serve_tiny(hub)
    dest = tmp_path / "models"
    _fetch(TINY, dest, hub, tmp_path)
    assert _fetch(TINY, dest, hub, tmp_path).reused
    target = dest / "tiny.gguf"
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF  # same size, one flipped byte: only the checksum can tell
    target.write_bytes(bytes(data))

    result = _fetch(TINY, dest, hub, tmp_path)
    assert not result.reused
    assert target.read_bytes() == f.content
