"""The real default embedder path: a local model folder through FlagEmbedding.

* BGE-M3 folders → ``BGEM3FlagModel`` (dense vectors for E(·); the sparse lexical
  weights are available through :meth:`FlagEmbedder.sparse_weights` when the folder has
  the trained ``sparse_linear.pt`` head).
* Any other Hugging Face encoder folder → ``FlagModel`` (BGE v1.5, MiniLM, ...).

``FlagEmbedding`` (and with it torch/transformers) is imported lazily in :meth:`load`.
Only local folders are accepted: ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` are
set before the import, and a missing folder raises :class:`ModelUnavailable` *before*
FlagEmbedding sees the name — FlagEmbedding would otherwise treat a non-existent path
as a hub id and try to download it.

Batching. FlagEmbedding's ``encode`` already tokenises the whole list, sorts it by
token length (longest first), pads per batch and restores the input order. But every
``encode`` call also runs its longest batch once more as a GPU out-of-memory probe and
throws the result away — and the library embeds a file's chunks in slices of
``settings.ingest.embed_batch_size`` so that Cancel stays responsive, i.e. one ``encode``
call per batch: measured with ``scripts/bench_embed.py`` that ran at 0.41–0.63× the raw
whole-list speed. So by default (``use_library_encode=False``) we run the same steps
ourselves on FlagEmbedding's own loaded model, tokenizer, pooling and (for M3) dense
head — tokenise, sort by length, pad per batch, pool, normalise, un-sort — minus the
probe, which guards GPU memory and means nothing on a CPU. The tests check that the
vectors equal FlagEmbedding's ``encode`` output; ``use_library_encode=True`` calls
FlagEmbedding's ``encode_*`` instead.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.errors import ModelUnavailable, require
from rag_desktop.backends.loading import LoadedOnce
from rag_desktop.core.checks import at_least, text_list

FloatArray = npt.NDArray[np.float32]
Kind = Literal["flag", "m3"]
Pooling = Literal["cls", "mean"]

FETCH_HINT = "run `scripts/fetch_models.py` to download the real default models, or point the setting at a local folder"


def force_offline() -> None:
    # Read by huggingface_hub/transformers when they are first imported.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def check_model_folder(path: str | os.PathLike[str], role: str) -> Path:
    """The folder as a Path, or :class:`ModelUnavailable` saying what is wrong and how to fix it."""
    folder = Path(path).expanduser()
    if not folder.exists():
        raise ModelUnavailable(f"{role} model folder not found: {folder} — {FETCH_HINT}")
    if not folder.is_dir():
        raise ModelUnavailable(f"{role} model path is not a folder: {folder} — {FETCH_HINT}")
    if not (folder / "config.json").is_file():
        raise ModelUnavailable(
            f"{role} model folder {folder} has no config.json (not a Hugging Face model folder, "
            f"or an interrupted download) — {FETCH_HINT}"
        )
    return folder


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelUnavailable(f"{path} does not hold a JSON object")
    return data


def detect_kind(folder: Path) -> Kind:
    """BGE-M3 when the folder carries M3's extra heads or is named like bge-m3.

    The name test looks at the last three path components, as given and resolved, so a
    hub cache layout (``models--BAAI--bge-m3/snapshots/<sha>``) is recognised too."""
    if (folder / "sparse_linear.pt").is_file() and (folder / "colbert_linear.pt").is_file():
        return "m3"
    parts = [*folder.absolute().parts[-3:], *folder.resolve().parts[-3:]]
    return "m3" if any("bge-m3" in p.lower().replace("_", "-") for p in parts) else "flag"


def detect_pooling(folder: Path, kind: Kind) -> Pooling:
    """Pooling from a sentence-transformers ``1_Pooling/config.json`` when present
    (MiniLM: mean), else CLS — what BGE models (v1.5 and M3) are trained with."""
    cfg = folder / "1_Pooling" / "config.json"
    if cfg.is_file():
        data = _read_json(cfg)
        if data.get("pooling_mode_mean_tokens"):
            return "mean"
        if data.get("pooling_mode_cls_token"):
            return "cls"
    return "cls"


def model_fingerprint(folder: Path) -> str:
    """A short hash of config.json and the weight files' names and sizes: it changes when
    the model changes, without reading gigabytes of weights at every start."""
    h = hashlib.sha256()
    h.update((folder / "config.json").read_bytes())
    for f in sorted(folder.iterdir()):
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".pt"):
            h.update(f"{f.name}:{f.stat().st_size}".encode())
    return h.hexdigest()[:12]


class FlagModelFolder(LoadedOnce):
    """A FlagEmbedding model in a local folder (the embedder below, the cross-encoder in
    backends/flag_reranker.py): loaded offline, with torch's threads set, and released by
    stopping FlagEmbedding's worker pool."""

    def __init__(self, model_path: str | os.PathLike[str], batch_size: int, threads: int) -> None:
        super().__init__()
        self._path = Path(model_path).expanduser()
        self._batch_size = batch_size
        self._threads = threads

    def _flag_embedding(self, purpose: str) -> Any:
        """The FlagEmbedding module, imported offline; ``threads`` > 0 sets torch's (process-wide)."""
        force_offline()
        flag: Any = require("FlagEmbedding", purpose, "FlagEmbedding")
        if self._threads:
            torch: Any = require("torch", purpose, "torch")
            torch.set_num_threads(self._threads)
        return flag

    def _release(self, model: Any) -> None:
        model.stop_self_pool()


class FlagEmbedder(FlagModelFolder):
    """:class:`~rag_desktop.core.protocols.Embedder` over FlagEmbedding (``FlagModel`` / ``BGEM3FlagModel``).

    ``kind`` and ``pooling`` are detected from the folder unless given. Queries get
    ``query_instruction`` (None for BGE-M3 and MiniLM, which use none); passages and
    keyword terms are embedded without instruction (BGE's guidance for short-to-short
    similarity). ``threads`` > 0 sets torch's intra-op threads (process-wide in torch).
    ``passage_max_length`` defaults to the model's position limit (8,192 tokens for
    BGE-M3, 512 for BERT-size models), so 4,096-character chunks are not truncated.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        kind: Kind | Literal["auto"] = "auto",
        pooling: Pooling | Literal["auto"] = "auto",
        batch_size: int = 16,
        query_instruction: str | None = None,
        query_max_length: int = 512,
        passage_max_length: int | None = None,
        threads: int = 0,
        use_library_encode: bool = False,
    ) -> None:
        if kind not in ("auto", "flag", "m3"):
            raise ValueError(f"FlagEmbedder: kind must be auto, flag or m3, got {kind!r}")
        if pooling not in ("auto", "cls", "mean"):
            raise ValueError(f"FlagEmbedder: pooling must be auto, cls or mean, got {pooling!r}")
        at_least("FlagEmbedder", batch_size=(batch_size, 1), threads=(threads, 0))
        super().__init__(model_path, batch_size, threads)
        self._kind_arg = kind
        self._pooling_arg = pooling
        self._query_instruction = query_instruction
        self._query_max_length = query_max_length
        self._passage_max_length = passage_max_length
        self._use_library_encode = use_library_encode
        self._dim: int | None = None
        self._kind: Kind | None = None
        self._pooling: Pooling | None = None
        self._has_sparse = False

    # ------------------------------------------------------------------ description

    def _describe(self) -> tuple[Path, Kind, Pooling]:
        folder = check_model_folder(self._path, "embedder")
        kind: Kind = detect_kind(folder) if self._kind_arg == "auto" else self._kind_arg
        pooling: Pooling = detect_pooling(folder, kind) if self._pooling_arg == "auto" else self._pooling_arg
        return folder, kind, pooling

    @property
    def model_path(self) -> Path:
        return self._path

    @property
    def kind(self) -> Kind:
        return self._describe()[1] if self._kind is None else self._kind

    @property
    def pooling(self) -> Pooling:
        return self._describe()[2] if self._pooling is None else self._pooling

    @property
    def identity(self) -> str:
        """``flagembedding/<kind>/<folder name>/<pooling>@<fingerprint>``; readable without loading."""
        try:
            folder, kind, pooling = self._describe()
            fp = model_fingerprint(folder)
        except (ModelUnavailable, OSError):
            return f"flagembedding/?/{self._path.name}/?@unavailable"
        return f"flagembedding/{kind}/{folder.name}/{pooling}@{fp}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            folder = check_model_folder(self._path, "embedder")
            hidden = _read_json(folder / "config.json").get("hidden_size")
            if not isinstance(hidden, int) or hidden < 1:
                raise ModelUnavailable(f"{folder / 'config.json'} has no valid hidden_size")
            self._dim = hidden
        return self._dim

    @property
    def has_sparse(self) -> bool:
        """True once loaded when the folder carries a trained BGE-M3 sparse head."""
        return self._has_sparse

    # ------------------------------------------------------------------ lifetime

    def _create(self) -> Any:
        folder, kind, pooling = self._describe()
        cfg = _read_json(folder / "config.json")
        flag = self._flag_embedding("The FlagEmbedding embedder (BGE-M3)")
        limit = int(cfg.get("max_position_embeddings", 514))
        # XLM-R style models reserve two positions for the padding offset.
        passage_max = self._passage_max_length or (limit - 2 if cfg.get("model_type") == "xlm-roberta" else limit)
        common: dict[str, Any] = {
            "pooling_method": pooling,
            "normalize_embeddings": True,
            "use_fp16": False,  # CPU: fp16 is slower and FlagEmbedding upcasts anyway
            "devices": "cpu",
            "batch_size": self._batch_size,
            "query_max_length": min(self._query_max_length, passage_max),
            "passage_max_length": passage_max,
            "query_instruction_for_retrieval": self._query_instruction,
        }
        try:
            if kind == "m3":
                model = flag.BGEM3FlagModel(str(folder), return_dense=True, return_sparse=False,
                                            return_colbert_vecs=False, **common)
            else:
                model = flag.FlagModel(str(folder), **common)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelUnavailable(f"FlagEmbedding could not load the embedder at {folder}: {exc}") from exc
        # What FlagEmbedding's encode does before every batch on a CPU, done once.
        model.model.float()
        model.model.to("cpu")
        model.model.eval()
        self._dim = int(model.model.config.hidden_size)
        self._kind, self._pooling = kind, pooling
        self._has_sparse = kind == "m3" and (folder / "sparse_linear.pt").is_file()
        return model

    # ------------------------------------------------------------------ embedding

    def _run(self, texts: Sequence[str], mode: Literal["query", "passage", "term"]) -> FloatArray:
        items = text_list(texts, f"embed_{mode}s" if mode != "passage" else "embed_passages")
        if not items:
            return np.empty((0, self.dim), dtype=np.float32)
        self.load()
        model = self._model
        if model is None:
            raise ModelUnavailable("FlagEmbedder was closed while embedding")
        if mode == "query":
            instruction, max_length = model.query_instruction_for_retrieval, model.query_max_length
        elif mode == "passage":
            instruction, max_length = None, model.passage_max_length
        else:  # keyword terms: short texts, no instruction
            instruction, max_length = None, model.query_max_length
        if self._use_library_encode:
            with self._lock:
                out = self._library_encode(model, items, mode)
        else:
            out = self._encode_dense(model, items, instruction, max_length)
        arr = np.ascontiguousarray(np.asarray(out, dtype=np.float32).reshape(len(items), -1))
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        np.divide(arr, norms, out=arr, where=norms > 0)
        return arr

    def _library_encode(self, model: Any, items: list[str], mode: str) -> Any:
        if mode == "query":
            out = model.encode_queries(items, batch_size=self._batch_size)
        elif mode == "passage":
            out = model.encode_corpus(items, batch_size=self._batch_size)
        else:
            out = model.encode(items, batch_size=self._batch_size, max_length=model.query_max_length)
        return out["dense_vecs"] if isinstance(out, dict) else out  # BGEM3FlagModel returns a dict

    def _encode_dense(self, model: Any, items: list[str], instruction: str | None, max_length: int) -> FloatArray:
        """FlagEmbedding's encode_single_device without its out-of-memory probe (see module doc)."""
        torch: Any = require("torch", "The FlagEmbedding embedder", "torch")
        compat: Any = require("FlagEmbedding.utils.tokenizer_compat", "The FlagEmbedding embedder",
                              "FlagEmbedding")
        if instruction is not None:
            items = [model.get_detailed_instruct(model.query_instruction_format, instruction, t) for t in items]
        tok = model.tokenizer
        # Fast tokenizers are not safe to call from two threads at once ("Already borrowed"),
        # so tokenising and padding happen under the same lock as the forward pass.
        with self._lock:
            enc = tok(items, truncation=True, max_length=max_length)
        keys = list(enc.keys())
        order = np.argsort([-len(ids) for ids in enc["input_ids"]], kind="stable")  # longest first
        out = np.empty((len(items), self.dim), dtype=np.float32)
        m3 = self.kind == "m3"
        with torch.inference_mode():
            for start in range(0, len(items), self._batch_size):
                idx = order[start : start + self._batch_size]
                feats = [{k: enc[k][i] for k in keys} for i in idx]
                with self._lock:  # per batch, so a query can slip in between an ingest's batches
                    batch = compat.pad_with_compat(tok, feats, padding=True, return_tensors="pt")
                    vecs = self._forward(model, batch, m3)
                vecs = torch.nn.functional.normalize(vecs.float(), dim=-1)
                out[idx] = vecs.numpy()
        return out

    @staticmethod
    def _forward(model: Any, batch: Any, m3: bool) -> Any:
        if m3:
            return model.model(batch, return_dense=True, return_sparse=False, return_colbert_vecs=False)["dense_vecs"]
        hidden = model.model(**batch, return_dict=True).last_hidden_state
        return model.pooling(hidden, batch["attention_mask"])

    def embed_queries(self, texts: Sequence[str]) -> FloatArray:
        return self._run(texts, "query")

    def embed_passages(self, texts: Sequence[str]) -> FloatArray:
        return self._run(texts, "passage")

    def embed_terms(self, terms: Sequence[str]) -> FloatArray:
        """E(t) for keyword terms: each term as a short text, no instruction (paper 000 §3.1)."""
        return self._run(terms, "term")

    def sparse_weights(self, texts: Sequence[str]) -> list[dict[str, float]]:
        """BGE-M3's lexical weights per text (token → weight), from its trained sparse head.

        Only for BGE-M3 folders that carry ``sparse_linear.pt``: without it FlagEmbedding
        would use a randomly initialised head, whose weights mean nothing."""
        items = text_list(texts, "sparse_weights")
        self.load()
        if not self._has_sparse:
            raise ModelUnavailable(
                f"{self._path} has no trained sparse head (sparse_linear.pt); sparse weights need a BGE-M3 folder"
            )
        if not items:
            return []
        with self._lock:
            model = self._model
            if model is None:
                raise ModelUnavailable("FlagEmbedder was closed while embedding")
            out = model.encode_corpus(items, batch_size=self._batch_size, return_dense=False,
                                      return_sparse=True, return_colbert_vecs=False)
            weights = out["lexical_weights"]
            tokens = model.convert_id_to_token(list(weights))
        if isinstance(tokens, dict):  # FlagEmbedding unwraps single-item lists
            tokens = [tokens]
        return [{str(k): float(v) for k, v in d.items()} for d in tokens]
