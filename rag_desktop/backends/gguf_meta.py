"""Loading decisions made from the GGUF file and the machine, before llama.cpp is imported.

:func:`read_gguf_metadata` reads a GGUF header's key/values; :func:`plan_n_ctx` picks the
context size to try first and :func:`physical_cores` the thread count. Nothing here
imports ``llama_cpp`` (tested in tests/test_llama_cpp_generator.py):

* **n_ctx**: capped at the model's training context (``<arch>.context_length``; beyond it
  quality collapses), then lowered *before* loading while the estimated memory
  (weights + f16 KV cache + a fixed compute allowance) exceeds 90 % of MemAvailable,
  never below ``min_n_ctx`` (2048). Linux overcommits, so an allocation rarely fails
  outright — without the estimate a too large context would end in the OOM killer rather
  than in the loader's fallback (halving after a failed context creation).
* **Threads**: physical cores (unique (physical id, core id) pairs in /proc/cpuinfo, no
  more than the CPUs this process may run on); llama.cpp's decode is memory-bound and
  hyper-threads slow it down.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

from rag_desktop.backends.errors import ModelUnavailable

MIN_N_CTX = 2048
COMPUTE_ALLOWANCE_BYTES = 384 * 1024 * 1024  # llama.cpp compute buffers + runtime, measured ~250 MB
MEMORY_FRACTION = 0.9


# --------------------------------------------------------------------------- GGUF metadata

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def _read(fh: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = fh.read(size)
    if len(data) != size:
        raise ValueError("unexpected end of file")
    return struct.unpack(fmt, data)[0]


def _read_str(fh: BinaryIO) -> str:
    n = _read(fh, "<Q")
    return fh.read(n).decode("utf-8", errors="replace")


def _skip_value(fh: BinaryIO, vtype: int) -> None:
    if vtype in _GGUF_SCALARS:
        fh.seek(struct.calcsize(_GGUF_SCALARS[vtype]), os.SEEK_CUR)
    elif vtype == _GGUF_STRING:
        fh.seek(_read(fh, "<Q"), os.SEEK_CUR)
    elif vtype == _GGUF_ARRAY:
        etype, count = _read(fh, "<I"), _read(fh, "<Q")
        if etype in _GGUF_SCALARS:
            fh.seek(count * struct.calcsize(_GGUF_SCALARS[etype]), os.SEEK_CUR)
        else:
            for _ in range(count):
                _skip_value(fh, etype)
    else:
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    """Scalar and string key/values of a GGUF header (arrays are skipped), without llama.cpp.

    Used before loading, to size the context and detect Qwen3. GGUF v2/v3 layout:
    magic, version u32, tensor count u64, kv count u64, then (string key, u32 type, value).
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            if fh.read(4) != b"GGUF":
                raise ModelUnavailable(f"{p} is not a GGUF model file (wrong magic bytes)")
            version = _read(fh, "<I")
            if version < 2:
                raise ModelUnavailable(f"{p} is GGUF version {version}; versions 2 and 3 are supported")
            _read(fh, "<Q")  # tensor count
            n_kv = _read(fh, "<Q")
            meta: dict[str, Any] = {}
            for _ in range(n_kv):
                key = _read_str(fh)
                vtype = _read(fh, "<I")
                if vtype in _GGUF_SCALARS:
                    meta[key] = _read(fh, _GGUF_SCALARS[vtype])
                elif vtype == _GGUF_STRING:
                    meta[key] = _read_str(fh)
                else:
                    _skip_value(fh, vtype)
            return meta
    except (OSError, ValueError, struct.error) as exc:
        if isinstance(exc, ModelUnavailable):
            raise
        raise ModelUnavailable(f"cannot read the GGUF header of {p}: {exc}") from exc


def kv_cache_bytes(meta: dict[str, Any], n_ctx: int) -> int:
    """f16 K and V for every layer: 2 · n_layer · n_ctx · n_head_kv · head_dim · 2 bytes."""
    arch = str(meta.get("general.architecture", ""))
    n_layer = int(meta.get(f"{arch}.block_count", 0))
    n_head = int(meta.get(f"{arch}.attention.head_count", 0)) or 1
    n_head_kv = int(meta.get(f"{arch}.attention.head_count_kv", n_head))
    n_embd = int(meta.get(f"{arch}.embedding_length", 0))
    k_dim = int(meta.get(f"{arch}.attention.key_length", n_embd // n_head))
    v_dim = int(meta.get(f"{arch}.attention.value_length", k_dim))
    return n_layer * n_ctx * n_head_kv * (k_dim + v_dim) * 2


def mem_available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def plan_n_ctx(requested: int, meta: dict[str, Any], model_bytes: int, available: int | None,
               min_n_ctx: int = MIN_N_CTX) -> int:
    """The context size to try first: capped by training context and by memory (see module doc)."""
    arch = str(meta.get("general.architecture", ""))
    n_train = int(meta.get(f"{arch}.context_length", 0) or 0)
    n_ctx = min(requested, n_train) if n_train > 0 else requested
    floor = min(min_n_ctx, n_ctx)
    if available is None:
        return n_ctx
    budget = available * MEMORY_FRACTION - model_bytes - COMPUTE_ALLOWANCE_BYTES
    while n_ctx > floor and kv_cache_bytes(meta, n_ctx) > budget:
        n_ctx = max(floor, n_ctx // 2)
    return n_ctx


# --------------------------------------------------------------------------- threads


def physical_cores(cpuinfo: str | None = None, usable: int | None = None) -> int:
    """Physical cores this process can use (see module doc); at least 1."""
    if usable is None:
        try:
            usable = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            usable = os.cpu_count() or 1
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read()
        except OSError:
            cpuinfo = ""
    cores: set[tuple[str, str]] = set()
    phys = core = ""
    for line in [*cpuinfo.splitlines(), ""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            phys = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip():
            if core:
                cores.add((phys, core))
            phys = core = ""
    n = len(cores) if cores else usable
    return max(1, min(n, usable))
