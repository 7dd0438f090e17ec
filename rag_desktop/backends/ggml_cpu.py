"""llama.cpp's CPU kernels: the best variant this processor and its operating system can run.

scripts/bootstrap.sh builds llama-cpp-python with ``GGML_BACKEND_DL`` and ``GGML_CPU_ALL_VARIANTS``:
one ``libggml-cpu-<variant>.so`` per x86-64 level (SSE4.2 … AVX2 … AVX-512 VNNI/BF16 … AMX), so one
install runs on any x86-64 and uses the widest vector instructions where they exist (prefill, most of
a question's wait on a laptop, is bound by them; docs/benchmarks.md §11). llama-cpp-python does not load
a dynamic backend itself (its bindings expose no ``ggml_backend_load``), so :func:`ensure_cpu_backend`
loads one through ggml's own C entry point before any model is opened. A build without variants (the
CPU kernels inside libggml, as before) needs nothing and is left alone.

Which variant: the best whose instructions ``/proc/cpuinfo`` lists. Its flags are what the kernel
enabled, not only what CPUID reports; ggml's own chooser reads CPUID, which on this machine reports
AMX that the kernel has not enabled (no ``amx_*`` flags), and the AMX build crashed in its first decode
here. The feature lists are ggml's (``ggml/src/CMakeLists.txt``, ``ggml_add_cpu_backend_variant``);
"AVX512" there is F, CD, VL, DQ and BW.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

_AVX512 = ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")
_AVX2 = ("avx", "f16c", "fma", "avx2", "bmi2", "sse4_2")
# Best first. A variant is usable when every flag it needs is in /proc/cpuinfo.
VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("sapphirerapids", (*_AVX2, *_AVX512, "avx512vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8")),
    ("zen4", (*_AVX2, *_AVX512, "avx512vbmi", "avx512_vnni", "avx512_bf16")),
    ("cooperlake", (*_AVX2, *_AVX512, "avx512_vnni", "avx512_bf16")),
    ("icelake", (*_AVX2, *_AVX512, "avx512vbmi", "avx512_vnni")),
    ("cascadelake", (*_AVX2, *_AVX512, "avx512_vnni")),
    ("cannonlake", (*_AVX2, *_AVX512, "avx512vbmi")),
    ("skylakex", (*_AVX2, *_AVX512)),
    ("alderlake", (*_AVX2, "avx_vnni")),
    ("haswell", _AVX2),
    ("piledriver", ("sse4_2", "avx", "f16c", "fma")),
    ("ivybridge", ("sse4_2", "avx", "f16c")),
    ("sandybridge", ("sse4_2", "avx")),
    ("sse42", ("sse4_2",)),
    ("x64", ()),
)

_lock = threading.Lock()
_loaded: str | None = None


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The instruction-set flags the kernel reports (the first processor's ``flags`` line)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def choose_variant(available: Iterable[str], flags: frozenset[str]) -> str | None:
    """The best of ``available`` variant names whose flags are all in ``flags``."""
    have = set(available)
    for name, need in VARIANTS:
        if name in have and set(need) <= flags:
            return name
    return None


def variant_files(lib_dir: Path) -> dict[str, Path]:
    """``{variant: path}`` of the CPU backends beside libggml (empty for a build without variants)."""
    prefix = "libggml-cpu-"
    return {p.name[len(prefix):-3]: p for p in sorted(lib_dir.glob(f"{prefix}*.so"))}


def _loaded_ggml(lib_dir: Path) -> Path:
    """The libggml file llama.cpp's own library loaded (by its soname, ``libggml.so.0``): opening
    ``libggml.so`` by another name maps a second copy with a registry of its own, and a backend
    loaded into that one is never seen by llama.cpp."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        maps = ""
    for line in maps.splitlines():
        path = line.rpartition(" ")[2]
        if Path(path).name.startswith("libggml.so") and Path(path).parent == lib_dir:
            return Path(path)
    so0 = lib_dir / "libggml.so.0"
    return so0 if so0.exists() else lib_dir / "libggml.so"


def ensure_cpu_backend() -> str | None:
    """Load the best CPU variant once per process (after ``import llama_cpp``); its name, or None
    for a build whose CPU kernels are built in. Raises RuntimeError when none can run here."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        import llama_cpp  # its libraries first: libggml below is then the one it already loaded

        lib_dir = Path(llama_cpp.__file__).parent / "lib"
        files = variant_files(lib_dir)
        if not files:
            return None
        name = choose_variant(files, cpu_flags())
        if name is None:
            raise RuntimeError(f"no llama.cpp CPU backend in {lib_dir} runs on this processor "
                               f"(built: {', '.join(files)})")
        ggml = ctypes.CDLL(str(_loaded_ggml(lib_dir)), mode=ctypes.RTLD_GLOBAL)
        ggml.ggml_backend_load.restype = ctypes.c_void_p
        ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
        if not ggml.ggml_backend_load(str(files[name]).encode()):
            raise RuntimeError(f"llama.cpp could not load its CPU backend {files[name]}")
        log.info("llama.cpp CPU backend: %s", name)
        _loaded = name
        return name


def system_info() -> str:
    """``llama_print_system_info()`` after the backend is loaded: the instruction sets in use."""
    ensure_cpu_backend()
    import llama_cpp

    return bytes(llama_cpp.llama_print_system_info()).decode("utf-8", "replace").strip()


__all__ = ["VARIANTS", "choose_variant", "cpu_flags", "ensure_cpu_backend", "system_info", "variant_files"]


def main() -> None:
    """``python -m rag_desktop.backends.ggml_cpu MODULE ARGS…``: run a llama-cpp-python module (its
    OpenAI-compatible server, ``llama_cpp.server``) with the CPU backend loaded first."""
    import runpy
    import sys

    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m rag_desktop.backends.ggml_cpu MODULE [ARGS…]")
    ensure_cpu_backend()
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
