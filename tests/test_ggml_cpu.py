"""llama.cpp's CPU kernels: the variant chosen from the kernel's flags, and a real load and decode with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_desktop.backends import ggml_cpu

SKYLAKE_AVX512 = ("flags\t\t: fpu sse4_2 avx f16c fma avx2 bmi2 avx512f avx512cd avx512vl avx512dq avx512bw "
                  "avx512_vnni avx512vbmi avx512_bf16\n")
ALL = [name for name, _ in ggml_cpu.VARIANTS]


def test_the_best_variant_the_flags_allow() -> None:
    flags = ggml_cpu.cpu_flags(SKYLAKE_AVX512)
    assert {"avx512f", "avx512_bf16"} <= flags
    # CPUID may report AMX the kernel did not enable: without amx_* flags it is not chosen
    assert ggml_cpu.choose_variant(ALL, flags) == "zen4"
    assert ggml_cpu.choose_variant(ALL, flags | {"amx_tile", "amx_int8"}) == "sapphirerapids"
    assert ggml_cpu.choose_variant(["haswell", "x64"], flags) == "haswell"  # only what was built
    assert ggml_cpu.choose_variant(ALL, frozenset({"sse4_2"})) == "sse42"
    assert ggml_cpu.choose_variant(ALL, frozenset()) == "x64"  # any x86-64
    assert ggml_cpu.choose_variant(["zen4"], frozenset({"avx2"})) is None
    assert ggml_cpu.cpu_flags("processor : 0\n") == frozenset()


def test_every_variant_needs_what_the_one_below_it_needs_or_differs_in_kind() -> None:
    # The list is best first: a later variant never needs a flag set that includes an earlier one's
    # (it would then never be reached on a CPU that has both).
    for i, (name, need) in enumerate(ggml_cpu.VARIANTS):
        for later, later_need in ggml_cpu.VARIANTS[i + 1:]:
            assert not set(need) < set(later_need), (name, later)


def test_variant_files_are_found_by_name(tmp_path: Path) -> None:
    for n in ("zen4", "haswell"):
        (tmp_path / f"libggml-cpu-{n}.so").write_bytes(b"")
    (tmp_path / "libggml.so").write_bytes(b"")
    assert sorted(ggml_cpu.variant_files(tmp_path)) == ["haswell", "zen4"]


@pytest.mark.slow
def test_the_installed_build_loads_its_best_variant_and_decodes() -> None:
    """The install (scripts/bootstrap.sh) builds every variant; the one this machine runs is loaded
    before a model and a real decode goes through it."""
    import llama_cpp

    from rag_desktop.app.model_files import smollm2_path
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator
    from rag_desktop.core.types import ChatMessage

    lib = Path(llama_cpp.__file__).parent / "lib"
    files = ggml_cpu.variant_files(lib)
    assert files, f"llama-cpp-python was installed without its CPU variants in {lib} (scripts/bootstrap.sh)"
    gen = LlamaCppGenerator(smollm2_path(), n_ctx=512, threads=2)
    gen.load()
    try:
        want = ggml_cpu.choose_variant(files, ggml_cpu.cpu_flags())
        assert ggml_cpu.ensure_cpu_backend() == want
        info = ggml_cpu.system_info()
        assert info.startswith("CPU :")
        if want in ("zen4", "cooperlake", "icelake", "cascadelake", "cannonlake", "skylakex", "sapphirerapids"):
            assert "AVX512 = 1" in info
        text = gen.generate([ChatMessage("user", "Say hello.")], max_tokens=4, temperature=0.0, seed=0)
        assert isinstance(text, str) and text.strip()
    finally:
        gen.close()
