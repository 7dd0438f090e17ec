"""A fake Hugging Face Hub on loopback for the download tests (never the internet).

The fake hub answers exactly what huggingface_hub 0.36 asks for:

* ``GET /api/models/{repo}/revision/{rev}?blobs=True`` (``HfApi.model_info(files_metadata=True)``):
  ``sha`` and ``siblings`` with ``size``, ``blobId`` and, for LFS files, ``lfs.{sha256,size,pointerSize}``;
* ``HEAD /{repo}/resolve/{rev}/{file}`` (``get_hf_file_metadata``): ``X-Repo-Commit``, ``ETag``
  (git blob sha1 for regular files) or ``X-Linked-Etag`` + ``X-Linked-Size`` (sha256 for LFS files),
  ``Content-Length``;
* ``GET`` of the same URL (``http_get``), honouring ``Range: bytes=N-`` with ``206`` + ``Content-Range``.

It can cut a transfer mid-file (headers promise the whole file, the socket closes after part of it),
stall mid-file, and lie about a checksum. Used by tests/test_fetch_models.py (the CLI) and
tests/test_gui_models_page.py (the Models page); test modules import the fixtures they use.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rag_desktop.app.fetch import ModelSource


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


def handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
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
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(state))
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


def fake_bytes(name: str, size: int, prefix: bytes = b"") -> bytes:
    rng = random.Random(name)
    return (prefix + rng.randbytes(size))[:size]


def lfs_file(name: str, size: int, prefix: bytes = b"") -> FakeFile:
    return FakeFile(fake_bytes(name, size, prefix), lfs=True)


def git_file(text: str) -> FakeFile:
    return FakeFile(text.encode(), lfs=False)


def serve_real_table(hub: FakeHub) -> None:
    """The three real repos with their real file lists (as of 2025) and tiny fake contents."""
    hub.xet_backed = True
    hub.repos["Qwen/Qwen3-4B-GGUF"] = {
        ".gitattributes": git_file("*.gguf filter=lfs diff=lfs merge=lfs -text\n"),
        "README.md": git_file("# Qwen3-4B-GGUF\n"),
        "LICENSE": git_file("Apache-2.0\n"),
        "params": git_file('{"temperature": 0.6}\n'),
        "Qwen3-4B-Q4_K_M.gguf": lfs_file("q4km", 8000, b"GGUF"),
        "Qwen3-4B-Q5_K_M.gguf": lfs_file("q5km", 9000, b"GGUF"),
        "Qwen3-4B-Q8_0.gguf": lfs_file("q8", 9500, b"GGUF"),
    }
    tok = {
        "tokenizer.json": lfs_file("tokenizer.json", 3000),
        "tokenizer_config.json": git_file('{"model_max_length": 8192}\n'),
        "special_tokens_map.json": git_file('{"bos_token": "<s>"}\n'),
        "sentencepiece.bpe.model": lfs_file("spm", 2000),
        "config.json": git_file('{"model_type": "xlm-roberta", "hidden_size": 1024}\n'),
    }
    hub.repos["BAAI/bge-m3"] = {
        ".gitattributes": git_file("*.bin filter=lfs\n"),
        "README.md": git_file("# BGE-M3\n"),
        "1_Pooling/config.json": git_file('{"pooling_mode_cls_token": true}\n'),
        "colbert_linear.pt": lfs_file("colbert", 1500),
        "sparse_linear.pt": lfs_file("sparse", 700),
        "config_sentence_transformers.json": git_file("{}\n"),
        "modules.json": git_file("[]\n"),
        "sentence_bert_config.json": git_file('{"max_seq_length": 8192}\n'),
        "pytorch_model.bin": lfs_file("m3-weights", 6000),
        "long.jpg": lfs_file("long.jpg", 900),
        "imgs/miracl.jpg": lfs_file("miracl.jpg", 900),
        "onnx/model.onnx": lfs_file("onnx", 4000),
        "onnx/config.json": git_file("{}\n"),
        "onnx/tokenizer.json": lfs_file("onnx-tok", 1000),
        **tok,
    }
    hub.repos["BAAI/bge-reranker-v2-m3"] = {
        ".gitattributes": git_file("*.safetensors filter=lfs\n"),
        "README.md": git_file("# bge-reranker-v2-m3\n"),
        "assets/BEIR-bge-en-v1.5.png": lfs_file("beir.png", 800),
        "model.safetensors": lfs_file("reranker-weights", 6000),
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
    f = lfs_file("tiny.gguf", size, b"GGUF")
    hub.repos[TINY.repo_id] = {"tiny.gguf": f, "README.md": git_file("tiny\n")}
    return f
