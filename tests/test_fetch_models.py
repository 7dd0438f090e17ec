"""scripts/fetch_models.py against a fake Hugging Face Hub on loopback (never the internet).

The fake hub answers exactly what huggingface_hub 0.36 asks for:

* ``GET /api/models/{repo}/revision/{rev}?blobs=True`` (``HfApi.model_info(files_metadata=True)``):
  ``sha`` and ``siblings`` with ``size``, ``blobId`` and, for LFS files, ``lfs.{sha256,size,pointerSize}``;
* ``HEAD /{repo}/resolve/{rev}/{file}`` (``get_hf_file_metadata``): ``X-Repo-Commit``, ``ETag``
  (git blob sha1 for regular files) or ``X-Linked-Etag`` + ``X-Linked-Size`` (sha256 for LFS files),
  ``Content-Length``;
* ``GET`` of the same URL (``http_get``), honouring ``Range: bytes=N-`` with ``206`` + ``Content-Range``.

It can cut a transfer mid-file (headers promise the whole file, the socket closes after part of it)
and can lie about a checksum. The unit under test — rag_desktop.app.fetch, its command line
rag_desktop.cli.fetch_models and the script — runs for real, with the real huggingface_hub doing the HTTP.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rag_desktop.app import fetch
from rag_desktop.app.config import settings_from_dict
from rag_desktop.app.fetch import ChecksumError, FetchError, ModelSource
from rag_desktop.cli import fetch_models as fetch_cli

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "fetch_models.py"


# --------------------------------------------------------------------------- the fake hub


@dataclass
class FakeFile:
    content: bytes
    lfs: bool
    claimed_sha256: str | None = None  # a lie told by the metadata (and the LFS etag)
    claimed_blob_id: str | None = None

    @property
    def sha256(self) -> str:
        return self.claimed_sha256 or hashlib.sha256(self.content).hexdigest()

    @property
    def blob_id(self) -> str:
        # Reference formula written out independently of fetch.git_blob_sha1.
        return self.claimed_blob_id or hashlib.sha1(b"blob %d\x00" % len(self.content) + self.content).hexdigest()


@dataclass
class FakeHub:
    repos: dict[str, dict[str, FakeFile]] = field(default_factory=dict)
    drop_after: dict[tuple[str, str], int] = field(default_factory=dict)  # (repo, file) -> bytes sent, once
    log: list[tuple[str, str, str | None]] = field(default_factory=list)  # (method, path, Range)
    url: str = ""
    xet_backed: bool = False  # LFS files also advertise Xet storage, as most large files on the hub do
    stall_after: dict[tuple[str, str], int] = field(default_factory=dict)  # send this much, then hang
    release: threading.Event = field(default_factory=threading.Event)  # ends a hang

    def commit(self, repo: str) -> str:
        return hashlib.sha1(repo.encode()).hexdigest()

    def gets(self, filename: str) -> list[str | None]:
        """The Range header of every GET of ``filename``."""
        return [rng for (m, path, rng) in self.log if m == "GET" and path.endswith("/" + filename)]

    def downloads(self) -> list[str]:
        return [path for (m, path, _) in self.log if m == "GET" and "/resolve/" in path]


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
            pass

        def _not_found(self, code: str) -> None:
            self.send_response(404)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _model_info(self, rest: str) -> None:
            repo, _, _rev = rest.partition("/revision/")
            files = hub.repos.get(repo)
            if files is None:
                return self._not_found("RepoNotFound")
            siblings = []
            for name, f in sorted(files.items()):
                entry: dict[str, object] = {"rfilename": name, "size": len(f.content)}
                if f.lfs:
                    entry["blobId"] = hashlib.sha1(name.encode()).hexdigest()  # the pointer file's id
                    entry["lfs"] = {"sha256": f.sha256, "size": len(f.content), "pointerSize": 134}
                else:
                    entry["blobId"] = f.blob_id
                siblings.append(entry)
            body = json.dumps({"id": repo, "sha": hub.commit(repo), "siblings": siblings}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _resolve(self, head: bool) -> None:
            path = urllib.parse.urlsplit(self.path).path
            left, _, right = path.partition("/resolve/")
            repo = left.strip("/")
            _rev, _, filename = right.partition("/")
            filename = urllib.parse.unquote(filename)
            files = hub.repos.get(repo)
            if files is None:
                return self._not_found("RepoNotFound")
            f = files.get(filename)
            if f is None:
                return self._not_found("EntryNotFound")
            data = f.content
            start = 0
            rng = self.headers.get("Range")
            if rng and not head:
                start = int(rng.removeprefix("bytes=").split("-")[0])
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", hub.commit(repo))
            if f.lfs:
                self.send_header("ETag", f'"{f.sha256}"')
                self.send_header("X-Linked-Etag", f'"{f.sha256}"')
                self.send_header("X-Linked-Size", str(len(data)))
                if hub.xet_backed:
                    # Had huggingface_hub taken the hf_xet path it would call this route (a 404 here).
                    self.send_header("X-Xet-Hash", f.sha256)
                    self.send_header("X-Xet-Refresh-Route", f"/api/models/{repo}/xet-read-token/{hub.commit(repo)}")
            else:
                self.send_header("ETag", f'"{f.blob_id}"')
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            if head:
                return
            body = data[start:]
            stall = hub.stall_after.pop((repo, filename), None)
            if stall is not None:
                self.wfile.write(body[:stall])
                self.wfile.flush()
                hub.release.wait(timeout=20)
                self.close_connection = True
                return
            cut = hub.drop_after.pop((repo, filename), None)
            if cut is not None:
                # Promise the whole body, send part of it, hang up: a dropped connection mid-file.
                self.wfile.write(body[:cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def do_HEAD(self) -> None:
            hub.log.append(("HEAD", self.path, None))
            self._resolve(head=True)

        def do_GET(self) -> None:
            hub.log.append(("GET", urllib.parse.urlsplit(self.path).path, self.headers.get("Range")))
            if self.path.startswith("/api/models/"):
                return self._model_info(urllib.parse.urlsplit(self.path).path.removeprefix("/api/models/"))
            return self._resolve(head=False)

    return Handler


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    state = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """HF_HUB_OFFLINE=0 for this test only.

    conftest sets HF_HUB_OFFLINE=1 and huggingface_hub reads it into ``constants`` at import time
    (and mounts an offline adapter on every per-thread session it caches), so the constant is
    patched and the session cache dropped — before and after.
    """
    from huggingface_hub import constants
    from huggingface_hub.utils import reset_sessions

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    reset_sessions()
    yield
    reset_sessions()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads 10 MB per chunk; with KB-sized fake files a cut body would then reach
    the partial file as nothing at all. 1 KB chunks make the partial file non-empty, as for a real
    multi-GB download, so a resume really sends ``Range: bytes=N-`` with N > 0."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1024)


def _bytes(name: str, size: int, prefix: bytes = b"") -> bytes:
    rng = random.Random(name)
    return (prefix + rng.randbytes(size))[:size]


def _lfs(name: str, size: int, prefix: bytes = b"") -> FakeFile:
    return FakeFile(_bytes(name, size, prefix), lfs=True)


def _git(text: str) -> FakeFile:
    return FakeFile(text.encode(), lfs=False)


def serve_real_table(hub: FakeHub) -> None:
    """The three real repos with their real file lists (as of 2025) and tiny fake contents."""
    hub.xet_backed = True
    hub.repos["Qwen/Qwen3-4B-GGUF"] = {
        ".gitattributes": _git("*.gguf filter=lfs diff=lfs merge=lfs -text\n"),
        "README.md": _git("# Qwen3-4B-GGUF\n"),
        "LICENSE": _git("Apache-2.0\n"),
        "params": _git('{"temperature": 0.6}\n'),
        "Qwen3-4B-Q4_K_M.gguf": _lfs("q4km", 8000, b"GGUF"),
        "Qwen3-4B-Q5_K_M.gguf": _lfs("q5km", 9000, b"GGUF"),
        "Qwen3-4B-Q8_0.gguf": _lfs("q8", 9500, b"GGUF"),
    }
    tok = {
        "tokenizer.json": _lfs("tokenizer.json", 3000),
        "tokenizer_config.json": _git('{"model_max_length": 8192}\n'),
        "special_tokens_map.json": _git('{"bos_token": "<s>"}\n'),
        "sentencepiece.bpe.model": _lfs("spm", 2000),
        "config.json": _git('{"model_type": "xlm-roberta", "hidden_size": 1024}\n'),
    }
    hub.repos["BAAI/bge-m3"] = {
        ".gitattributes": _git("*.bin filter=lfs\n"),
        "README.md": _git("# BGE-M3\n"),
        "1_Pooling/config.json": _git('{"pooling_mode_cls_token": true}\n'),
        "colbert_linear.pt": _lfs("colbert", 1500),
        "sparse_linear.pt": _lfs("sparse", 700),
        "config_sentence_transformers.json": _git("{}\n"),
        "modules.json": _git("[]\n"),
        "sentence_bert_config.json": _git('{"max_seq_length": 8192}\n'),
        "pytorch_model.bin": _lfs("m3-weights", 6000),
        "long.jpg": _lfs("long.jpg", 900),
        "imgs/miracl.jpg": _lfs("miracl.jpg", 900),
        "onnx/model.onnx": _lfs("onnx", 4000),
        "onnx/config.json": _git("{}\n"),
        "onnx/tokenizer.json": _lfs("onnx-tok", 1000),
        **tok,
    }
    hub.repos["BAAI/bge-reranker-v2-m3"] = {
        ".gitattributes": _git("*.safetensors filter=lfs\n"),
        "README.md": _git("# bge-reranker-v2-m3\n"),
        "assets/BEIR-bge-en-v1.5.png": _lfs("beir.png", 800),
        "model.safetensors": _lfs("reranker-weights", 6000),
        **tok,
    }


TINY = ModelSource(
    role="generator",
    repo_id="tests/tiny-gguf",
    target="tiny.gguf",
    kind="file",
    required=("tiny.gguf",),
)


def serve_tiny(hub: FakeHub, size: int = 6000) -> FakeFile:
    f = _lfs("tiny.gguf", size, b"GGUF")
    hub.repos[TINY.repo_id] = {"tiny.gguf": f, "README.md": _git("tiny\n")}
    return f


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
    weights = _lfs("weights", 3000)
    config = _git('{"hidden_size": 8}\n')
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
    weights = _lfs("w", 2000)
    hub.repos[source.repo_id] = {"config.json": _git("{}\n"), "model.safetensors": weights,
                                 "pytorch_model.bin": _lfs("same weights, pickled", 2500)}
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
