"""Download the real default models from the Hugging Face Hub (``scripts/fetch_models.py``).

The app itself never downloads (docs/architecture.md, "Models": offline unless the user asks); this module is what
runs when the user *does* ask. It is importable so the script and its tests share one code path.

What it fetches — :data:`SOURCES`, the one table to edit when a repo or file name changes:

* ``generator``: one GGUF file (Qwen3-4B, Q4_K_M) → ``<dest>/Qwen3-4B-Q4_K_M.gguf``;
* ``embedder``: the BAAI/bge-m3 files FlagEmbedding's ``BGEM3FlagModel`` reads (config, tokenizer,
  weights, the sparse/ColBERT heads) → ``<dest>/bge-m3/``;
* ``reranker``: the BAAI/bge-reranker-v2-m3 files ``FlagReranker`` reads → ``<dest>/bge-reranker-v2-m3/``.

How a model is fetched (:func:`fetch_model`):

1. ``HfApi.model_info(repo, revision, files_metadata=True)`` gives the commit sha and, for every
   file, its size and checksum: the LFS sha256 for large files, the git blob sha1 for small ones.
   The file list is chosen from it like ``snapshot_download(allow_patterns=...)`` does (same
   ``filter_repo_objects``), but file by file so each one gets its own retry, its own line of
   output and its own checksum; every file is requested at the *pinned commit sha*, so the
   bytes and the metadata describe the same revision even if the repo moves meanwhile.
2. If the final file/folder already exists and every file matches size + checksum, nothing is
   downloaded ("already present, verified").
3. Otherwise each file goes through ``hf_hub_download(local_dir=<dest>/.fetch/<name>)`` — a
   staging folder next to the final one (same filesystem, so the final move is a rename).
   huggingface_hub 0.36 writes to ``<staging>/.cache/huggingface/download/*.incomplete`` and
   resumes from that file with an HTTP ``Range`` request on the next call (``_download_to_tmp_and_move``
   opens it in append mode; ``http_get`` sends ``Range: bytes=<size>-``). A transfer that breaks
   mid-file (connection reset, truncated body) is retried here up to ``max_attempts`` times and
   resumes; after the last attempt the partial file is kept, so running the script again resumes
   too. Most large files on the hub are Xet-backed, and huggingface_hub would hand those to
   ``hf_xet``, which rewrites the file from the start (a resume then depends on hf_xet's chunk
   cache, which its Python wheels may build with size 0). So by default the fetch turns Xet off
   for its own calls (``constants.HF_HUB_DISABLE_XET``, restored afterwards) and every file
   takes the plain-HTTP path whose Range resume is tested; ``--xet`` opts back in (faster on a
   good link, resume not guaranteed).
4. Every downloaded file is checked: size, then sha256 against the hub's LFS ``sha256`` (large
   files) or the git blob sha1 ``sha1(b"blob <size>\\0" + bytes)`` against ``blobId`` (small
   files). A mismatch deletes the staged copy and raises :class:`ChecksumError`.
5. Only when every file of the model verified is the staging copy renamed to the final name
   (a folder replaces an outdated one by rename-aside, rename-in, delete-old). So an offline
   machine, a Ctrl-C, a bad checksum or a crash never leaves a half-written model under the
   final name; the settings can point there safely.

Progress and cancel (the desktop app's Models page): ``progress(done, total)`` hears the bytes on
disk of the model — the verified files plus the partial ``*.incomplete`` file huggingface_hub is
appending to, polled by a watcher thread every :data:`WATCH_INTERVAL_S` (``hf_hub_download`` has no
progress callback). ``cancel`` is a :class:`~rag_desktop.core.types.CancelToken`: between files it
is checked as usual; during a file the watcher raises :class:`~rag_desktop.core.types.Cancelled`
in the downloading thread (``PyThreadState_SetAsyncExc``), the in-process equivalent of the CLI's
Ctrl-C: it arrives between two chunks (or when a stalled read times out), only while
``hf_hub_download`` runs, and the partial file is kept for the next run to resume.

``allow_network``: the app forces ``HF_HUB_OFFLINE=1`` once a local embedder loads
(backends/flag_embedder.py); a person pressing Download is asking for the network, so the
fetch lifts huggingface_hub's offline switch for its own calls and puts it back afterwards.

``huggingface_hub`` (and ``requests``, its dependency) are imported lazily: importing this
module costs nothing and works without them.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomli_w

from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.types import Cancelled, CancelToken

Role = Literal["generator", "embedder", "reranker"]
ROLES: tuple[Role, ...] = ("generator", "embedder", "reranker")
STAGING_DIR = ".fetch"  # under the destination; hidden, removed once empty
HASH_BLOCK = 8 * 1024 * 1024
WATCH_INTERVAL_S = 0.2  # how often the bytes on disk are reported during a download


@dataclass(frozen=True)
class ModelSource:
    """One model to fetch: where it lives on the hub and what of it the app needs.

    ``required`` are exact repo paths that must exist (missing → a clear error *before* any
    download, e.g. when a repo renames its files). ``weights`` are alternatives: the first one
    present in the repo is fetched (safetensors preferred over the pickle-based ``.bin``, and
    never both — they hold the same weights). ``optional`` are ``allow_patterns`` in
    ``snapshot_download``'s fnmatch syntax, fetched when present.
    """

    role: Role
    repo_id: str
    target: str  # name under the destination: the file (kind "file") or the folder (kind "folder")
    kind: Literal["file", "folder"]
    required: tuple[str, ...]
    weights: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    revision: str = "main"
    description: str = ""
    # What the download weighs, for the Models page while the hub has not been asked (offline):
    # the plan's exact total replaces it as soon as a download starts.
    approx_bytes: int = 0


# The real defaults (docs/architecture.md, "Models"). Edit here when a repo changes.
SOURCES: dict[Role, ModelSource] = {
    "generator": ModelSource(
        role="generator",
        repo_id="Qwen/Qwen3-4B-GGUF",  # Qwen's official GGUF conversions
        target="Qwen3-4B-Q4_K_M.gguf",
        kind="file",
        required=("Qwen3-4B-Q4_K_M.gguf",),
        description="generator + translator, llama-cpp-python (about 2.5 GB)",
        approx_bytes=2_497_000_000,
    ),
    "embedder": ModelSource(
        role="embedder",
        repo_id="BAAI/bge-m3",
        target="bge-m3",
        kind="folder",
        # sparse_linear.pt + colbert_linear.pt are what makes FlagEmbedder pick BGEM3FlagModel.
        required=("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                  "sparse_linear.pt", "colbert_linear.pt"),
        weights=("model.safetensors", "pytorch_model.bin"),
        # Exact names, not "*.json": fnmatch's "*" crosses "/" and would pull in onnx/ (another 2 GB).
        optional=("sentencepiece.bpe.model", "1_Pooling/config.json", "modules.json",
                  "config_sentence_transformers.json", "sentence_bert_config.json"),
        description="embedder E(·), FlagEmbedding BGEM3FlagModel (about 2.3 GB)",
        approx_bytes=2_290_000_000,
    ),
    "reranker": ModelSource(
        role="reranker",
        repo_id="BAAI/bge-reranker-v2-m3",
        target="bge-reranker-v2-m3",
        kind="folder",
        required=("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"),
        weights=("model.safetensors", "pytorch_model.bin"),
        optional=("sentencepiece.bpe.model",),
        description="cross-encoder s(q,e), FlagEmbedding FlagReranker (about 2.3 GB)",
        approx_bytes=2_290_000_000,
    ),
}


class FetchError(RagError, RuntimeError):
    """A download could not be completed; the message says why and what to do."""

    kind = ErrorKind.DOWNLOAD


class ChecksumError(FetchError):
    """A downloaded file does not match the hub's checksum; the bad copy has been deleted."""


class OfflineError(FetchError):
    """The hub (or mirror) cannot be reached at all: no network, a firewall, a wrong endpoint."""


class InterruptedDownload(FetchError):
    """A transfer broke off on every attempt; the partial file is kept and the next run resumes it."""


@dataclass(frozen=True)
class RemoteFile:
    """One repo file and the hub's checksum for it (exactly one of sha256 / git_sha1 is set)."""

    path: str
    size: int
    sha256: str | None = None  # LFS files: the LFS object id
    git_sha1: str | None = None  # regular git files: the blob id


@dataclass(frozen=True)
class FetchPlan:
    source: ModelSource
    commit: str
    files: tuple[RemoteFile, ...]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class FetchResult:
    role: Role
    path: Path  # the final file or folder
    repo_id: str
    commit: str
    files: int
    bytes: int
    reused: bool  # already present and verified: nothing downloaded


Log = Callable[[str], None]


def _silent(_: str) -> None:
    pass


# --------------------------------------------------------------------------- checksums


def git_blob_sha1(path: Path) -> str:
    """The git object id of a file: sha1 over ``b"blob <size>\\0"`` + the bytes (the hub's ``blobId``)."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as fh:
        while block := fh.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def check_file(path: Path, remote: RemoteFile) -> str | None:
    """``None`` when ``path`` is the hub's file, else the reason it is not."""
    if not path.is_file():
        return f"{path} is missing"
    size = path.stat().st_size
    if size != remote.size:
        return f"{path} has {size} bytes, the hub says {remote.size}"
    if remote.sha256 is not None:
        got = file_sha256(path)
        if got != remote.sha256.lower():
            return f"{path}: sha256 {got} does not match the hub's {remote.sha256}"
    elif remote.git_sha1 is not None:
        got = git_blob_sha1(path)
        if got != remote.git_sha1.lower():
            return f"{path}: git blob sha1 {got} does not match the hub's {remote.git_sha1}"
    else:  # plan() refuses such files; kept so a hand-built RemoteFile cannot pass unchecked
        return f"{path}: the hub gave no checksum to verify it against"
    return None


def _checksum_name(remote: RemoteFile) -> str:
    return "sha256" if remote.sha256 is not None else "git-sha1"


# --------------------------------------------------------------------------- hub access


def _endpoint(endpoint: str | None) -> str:
    from huggingface_hub import constants

    return (endpoint or constants.ENDPOINT).rstrip("/")


def _short(exc: BaseException, limit: int = 240) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _offline_message(endpoint: str, exc: BaseException, dest: Path) -> str:
    return (
        f"cannot reach {endpoint} ({_short(exc)}). This machine looks offline, or a firewall/proxy "
        f"blocks the hub. Connect to a network (or set HF_ENDPOINT / --endpoint to a reachable "
        f"mirror) and run again. Nothing was installed under {dest}; partial downloads are kept "
        f"under {dest / STAGING_DIR} and resume on the next run."
    )


@contextmanager
def _xet_disabled(disable: bool) -> Iterator[None]:
    """Force huggingface_hub's plain-HTTP download path (see the module docstring, step 3)."""
    from huggingface_hub import constants

    saved = constants.HF_HUB_DISABLE_XET
    constants.HF_HUB_DISABLE_XET = saved or disable
    try:
        yield
    finally:
        constants.HF_HUB_DISABLE_XET = saved


def _check_online_mode() -> None:
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise FetchError(
            "HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set in the environment, so huggingface_hub "
            "refuses to use the network. Downloading is what this command is for: run it as "
            "`HF_HUB_OFFLINE=0 python scripts/fetch_models.py ...`."
        )


@contextmanager
def _hub_errors(endpoint: str, dest: Path, what: str) -> Iterator[None]:
    """Turn huggingface_hub/requests failures of a metadata call into one readable FetchError."""
    import requests
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except OfflineModeIsEnabled as exc:
        raise FetchError(f"{what}: offline mode is enabled (HF_HUB_OFFLINE=1); run with HF_HUB_OFFLINE=0") from exc
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise OfflineError(_offline_message(endpoint, exc, dest)) from exc
    except GatedRepoError as exc:
        raise FetchError(f"{what}: the repo is gated; accept its terms on the hub and log in "
                         f"(`huggingface-cli login` or HF_TOKEN)") from exc
    except RepositoryNotFoundError as exc:
        raise FetchError(f"{what}: no such repo on {endpoint} (renamed? edit SOURCES in "
                         f"rag_desktop/app/fetch.py)") from exc
    except RevisionNotFoundError as exc:
        raise FetchError(f"{what}: no such revision on {endpoint}") from exc
    except HfHubHTTPError as exc:
        raise FetchError(f"{what}: the hub answered with an error ({_short(exc)})") from exc


def plan(source: ModelSource, api: Any) -> FetchPlan:
    """The commit and the files (with checksums) to fetch for ``source``; no download yet."""
    from huggingface_hub.utils import filter_repo_objects

    what = f"{source.repo_id}@{source.revision}"
    info = api.model_info(source.repo_id, revision=source.revision, files_metadata=True, timeout=30)
    commit = info.sha
    if not commit:
        raise FetchError(f"{what}: the hub did not say which commit it serves")
    siblings = {s.rfilename: s for s in (info.siblings or [])}

    missing = [name for name in source.required if name not in siblings]
    if missing:
        raise FetchError(f"{what} has no {', '.join(missing)} (the repo changed? edit SOURCES in "
                         f"rag_desktop/app/fetch.py)")
    names = list(source.required)
    if source.weights:
        weights = next((w for w in source.weights if w in siblings), None)
        if weights is None:
            raise FetchError(f"{what} has none of the weight files {', '.join(source.weights)}")
        names.append(weights)
    if source.optional:
        names += sorted(filter_repo_objects(siblings, allow_patterns=list(source.optional)))

    files: list[RemoteFile] = []
    for name in dict.fromkeys(names):  # de-duplicated, order kept
        s = siblings[name]
        if s.lfs is not None:
            files.append(RemoteFile(name, int(s.lfs.size), sha256=str(s.lfs.sha256)))
        elif s.blob_id is not None and s.size is not None:
            files.append(RemoteFile(name, int(s.size), git_sha1=str(s.blob_id)))
        else:
            raise FetchError(f"{what}: the hub gave no size/checksum for {name}; refusing to fetch it unverified")
    return FetchPlan(source, commit, tuple(files))


# --------------------------------------------------------------------------- local layout


def final_path(source: ModelSource, dest: Path) -> Path:
    return dest / source.target


def verify_installed(plan_: FetchPlan, dest: Path) -> str | None:
    """``None`` when the final file/folder holds every planned file with the hub's checksum."""
    final = final_path(plan_.source, dest)
    for remote in plan_.files:
        local = final if plan_.source.kind == "file" else final / remote.path
        reason = check_file(local, remote)
        if reason:
            return reason
    return None


def _incomplete_dir(staging: Path, filename: str) -> Path:
    # huggingface_hub's documented local_dir layout: <local_dir>/.cache/huggingface/download/<subdir>/
    return staging / ".cache" / "huggingface" / "download" / Path(filename).parent


def _forget_partial(staging: Path, filename: str) -> None:
    """Drop a staged file and any partial download of it, so the next attempt starts clean."""
    (staging / filename).unlink(missing_ok=True)
    folder = _incomplete_dir(staging, filename)
    if folder.is_dir():
        for p in folder.glob("*.incomplete"):
            p.unlink(missing_ok=True)


def _install(plan_: FetchPlan, staging: Path, dest: Path) -> Path:
    """Move the verified staging copy to its final name with renames only (same filesystem)."""
    final = final_path(plan_.source, dest)
    if plan_.source.kind == "file":
        os.replace(staging / plan_.files[0].path, final)
        shutil.rmtree(staging, ignore_errors=True)
        return final
    shutil.rmtree(staging / ".cache", ignore_errors=True)
    wanted = {Path(f.path) for f in plan_.files}
    for p in sorted(staging.rglob("*"), reverse=True):  # files before their folders
        rel = p.relative_to(staging)
        if p.is_file() and rel not in wanted:
            p.unlink()  # left over from an older plan (another revision / weights file)
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    old: Path | None = None
    if final.exists():
        old = staging.with_name(staging.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(final, old)
    os.replace(staging, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


# --------------------------------------------------------------------------- fetching


def _download(
    plan_: FetchPlan,
    remote: RemoteFile,
    staging: Path,
    *,
    endpoint: str,
    token: str | bool | None,
    cache_dir: Path | None,
    max_attempts: int,
    retry_wait: float,
    log: Log,
    dest: Path,
) -> Path:
    """One file into ``staging``; transient network failures are retried and resume from the partial file."""
    import requests
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    transient: tuple[type[BaseException], ...] = (
        requests.ConnectionError,  # reset/refused; urllib3 read timeouts arrive as this too
        requests.Timeout,
        requests.exceptions.ChunkedEncodingError,  # body cut short: urllib3 IncompleteRead/ProtocolError
        LocalEntryNotFoundError,  # what hf_hub_download raises when its HEAD request failed on the network
    )
    source = plan_.source
    for attempt in range(1, max_attempts + 1):
        try:
            got = hf_hub_download(
                source.repo_id,
                remote.path,
                revision=plan_.commit,
                local_dir=staging,
                cache_dir=cache_dir,
                endpoint=endpoint,
                token=token,
            )
            return Path(got)
        except OfflineModeIsEnabled as exc:
            raise FetchError(f"{remote.path}: offline mode is enabled (HF_HUB_OFFLINE=1)") from exc
        except transient as exc:
            if attempt == max_attempts:
                raise InterruptedDownload(
                    f"downloading {source.repo_id}/{remote.path} was interrupted {max_attempts} time(s), last: "
                    f"{_short(exc)}. Run the command again to resume: the partial file is kept under "
                    f"{dest / STAGING_DIR}; nothing was installed under the final name."
                ) from exc
            wait = retry_wait * 2 ** (attempt - 1)
            log(f"      interrupted ({_short(exc, 120)}); resuming in {wait:.0f} s "
                f"(attempt {attempt + 1}/{max_attempts})")
            time.sleep(wait)
        except OSError as exc:
            if "Consistency check failed" in str(exc):
                # huggingface_hub got a body of the wrong size: the partial file is not resumable.
                _forget_partial(staging, remote.path)
            raise FetchError(f"downloading {source.repo_id}/{remote.path} failed: {_short(exc)}") from exc
    raise AssertionError("unreachable")  # pragma: no cover


Progress = Callable[[int, int], None]  # (bytes on disk, bytes in the plan)


def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    """Schedule ``exc`` in another Python thread (it is raised at its next bytecode)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))


def _bytes_on_disk(staging: Path, remote: RemoteFile) -> int:
    """What has arrived of ``remote``: the staged file, else huggingface_hub's partial file.

    huggingface_hub names the partial file ``<hash>.<etag>.incomplete``; the etag of an LFS file is
    its sha256, of a regular file its git blob id — the checksums the plan already holds.
    """
    staged = staging / remote.path
    if staged.is_file():
        return staged.stat().st_size
    etag = remote.sha256 or remote.git_sha1 or ""
    sizes = [p.stat().st_size for p in _incomplete_dir(staging, remote.path).glob(f"*.{etag}.incomplete")]
    return max(sizes, default=0)


class _Watch:
    """While one file downloads: report the bytes on disk, and turn a cancel into
    :class:`Cancelled` in the downloading thread (see the module docstring)."""

    def __init__(self, staging: Path, remote: RemoteFile, done_before: int, total: int,
                 progress: Progress | None, cancel: CancelToken | None) -> None:
        self.staging, self.remote, self.done_before, self.total = staging, remote, done_before, total
        self.progress, self.cancel = progress, cancel
        self.target = threading.get_ident()
        self.stop = threading.Event()
        self.lock = threading.Lock()  # the raise happens only while the download is still running
        self.active = True
        self.thread = threading.Thread(target=self._run, name="fetch-watch", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(WATCH_INTERVAL_S):
            if self.progress is not None:
                try:
                    arrived = _bytes_on_disk(self.staging, self.remote)
                except OSError:  # the partial file was renamed between listing and stat
                    continue
                self.progress(self.done_before + arrived, self.total)
            if self.cancel is not None and self.cancel.is_set:
                with self.lock:
                    if self.active:
                        _raise_in_thread(self.target, Cancelled)
                # Once raised, nothing is left to report: the download is unwinding.
                return

    def __enter__(self) -> _Watch:
        if self.progress is not None or self.cancel is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        with self.lock:
            self.active = False
        if self.thread.is_alive():
            self.thread.join()


@contextmanager
def _network_allowed(allow: bool) -> Iterator[None]:
    """Lift huggingface_hub's offline switch for this fetch (the person asked for it), then restore it."""
    if not allow:
        _check_online_mode()
        yield
        return
    from huggingface_hub import constants
    from huggingface_hub.utils import reset_sessions

    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    reset_sessions()  # a cached session carries the offline adapter of the switch it was made under
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved
        reset_sessions()


def fetch_model(
    source: ModelSource,
    dest: Path,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    cache_dir: Path | None = None,
    max_attempts: int = 5,
    retry_wait: float = 2.0,
    use_xet: bool = False,
    log: Log | None = None,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    allow_network: bool = False,
) -> FetchResult:
    """Fetch one model into ``dest`` (see the module docstring for the steps and guarantees).

    ``log`` hears one line per step (the CLI prints them); None: silent. ``progress``, ``cancel``
    and ``allow_network``: the module docstring, "Progress and cancel".
    """
    with _network_allowed(allow_network):
        return _fetch_model(source, Path(dest).expanduser().resolve(), endpoint=_endpoint(endpoint), token=token,
                            cache_dir=cache_dir, max_attempts=max_attempts, retry_wait=retry_wait,
                            use_xet=use_xet, log=log or _silent, progress=progress, cancel=cancel)


def _fetch_model(source: ModelSource, dest: Path, *, endpoint: str, token: str | bool | None,
                 cache_dir: Path | None, max_attempts: int, retry_wait: float, use_xet: bool, log: Log,
                 progress: Progress | None, cancel: CancelToken | None) -> FetchResult:
    from huggingface_hub import HfApi

    what = f"{source.repo_id}@{source.revision}"
    with _hub_errors(endpoint, dest, what):
        plan_ = plan(source, HfApi(endpoint=endpoint, token=token))
    final = final_path(source, dest)
    log(f"{source.role}: {source.repo_id}@{plan_.commit[:12]} — {len(plan_.files)} file(s), "
        f"{_human(plan_.total_bytes)} → {final}")

    if final.exists():
        log(f"  {final} exists; verifying it against the hub's checksums")
        reason = verify_installed(plan_, dest)
        if reason is None:
            log("  already present, verified")
            if progress is not None:
                progress(plan_.total_bytes, plan_.total_bytes)
            return FetchResult(source.role, final, source.repo_id, plan_.commit, len(plan_.files),
                               plan_.total_bytes, reused=True)
        log(f"  {reason}; downloading again (the current copy stays until the new one is verified)")

    staging = dest / STAGING_DIR / source.target
    staging.mkdir(parents=True, exist_ok=True)
    n = len(plan_.files)
    done = 0
    for i, remote in enumerate(plan_.files, start=1):
        if cancel is not None:
            cancel.raise_if_set()
        with _xet_disabled(not use_xet), _Watch(staging, remote, done, plan_.total_bytes, progress, cancel):
            got = _download(plan_, remote, staging, endpoint=endpoint, token=token, cache_dir=cache_dir,
                            max_attempts=max_attempts, retry_wait=retry_wait, log=log, dest=dest)
        reason = check_file(got, remote)
        if reason:
            _forget_partial(staging, remote.path)
            raise ChecksumError(
                f"{source.repo_id}/{remote.path} at {plan_.commit[:12]}: {reason}. The bad copy was deleted and "
                f"nothing was installed under {final}; run again to retry (a proxy or mirror may be "
                f"serving a corrupted or different file)."
            )
        done += remote.size
        if progress is not None:
            progress(done, plan_.total_bytes)
        log(f"  [{i}/{n}] {remote.path}  {_human(remote.size)}  {_checksum_name(remote)} ok")

    if cancel is not None:
        cancel.raise_if_set()
    installed = _install(plan_, staging, dest)
    staging_root = dest / STAGING_DIR
    if staging_root.is_dir() and not any(staging_root.iterdir()):
        staging_root.rmdir()
    log(f"  installed {installed}")
    return FetchResult(source.role, installed, source.repo_id, plan_.commit, n, plan_.total_bytes, reused=False)


def settings_lines(results: Sequence[FetchResult]) -> str:
    """The ``[models]`` TOML lines that point the app at the fetched models."""
    return tomli_w.dumps({"models": {r.role: str(r.path) for r in results}})


def list_sources(dest: Path, sources: Mapping[Role, ModelSource] = SOURCES) -> str:
    """The table of what would be fetched, and whether it is already there (no network)."""
    lines = [f"destination: {dest}"]
    for role in ROLES:
        s = sources[role]
        final = final_path(s, dest)
        state = "present (run without --list to verify)" if final.exists() else "missing"
        files = ", ".join((*s.required, *(("|".join(s.weights),) if s.weights else ()), *s.optional))
        lines += [
            f"{role}: {s.repo_id}@{s.revision} — {s.description}",
            f"    files: {files}",
            f"    → {final}  [{state}]",
        ]
    return "\n".join(lines)
