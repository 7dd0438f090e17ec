"""The trained cross-encoder s(q, e): FlagEmbedding's ``FlagReranker`` over a local folder.

The real default is BAAI/bge-reranker-v2-m3 (``scripts/fetch_models.py`` downloads it);
any local ``AutoModelForSequenceClassification`` folder with one output logit works.
No reranker ships in a PyPI package, so when none is configured the app uses
:class:`rag_desktop.core.substitute_scorer.EmbeddingCosineScorer` and labels it.

Scores are the model's raw logits (higher = more relevant), not sigmoids: CF-RAG's
phi_causal (paper 002) subtracts scores, and raw logits keep the differences from
being squashed near 0 and 1. ``normalize=True`` gives sigmoid(logit) in (0, 1) for display.

Batching: like its embedders, FlagEmbedding's ``compute_score`` runs the longest batch
once more as a GPU out-of-memory probe on every call, and CF-RAG calls ``score`` once per
query (the original and each counterfactual) with a pool smaller than one batch — so
each call would cost two forward passes. By default we run FlagReranker's own steps on
its loaded tokenizer and model (query truncated to ¾ of ``max_length``, pair built by
``prepare_for_model`` with ``only_second`` truncation, length-sorted batches, logits,
un-sorted) without the probe; the tests check the scores equal ``compute_score``'s, and
``use_library_score=True`` calls ``compute_score`` itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.errors import ModelUnavailable, require
from rag_desktop.backends.flag_embedder import FlagModelFolder, check_model_folder, model_fingerprint
from rag_desktop.core.checks import at_least, score_inputs


class FlagCrossEncoder(FlagModelFolder):
    """:class:`~rag_desktop.core.protocols.CrossEncoder` over ``FlagEmbedding.FlagReranker``."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        batch_size: int = 16,
        max_length: int = 512,
        normalize: bool = False,
        threads: int = 0,
        use_library_score: bool = False,
    ) -> None:
        at_least("FlagCrossEncoder", batch_size=(batch_size, 1), max_length=(max_length, 8), threads=(threads, 0))
        super().__init__(model_path, batch_size, threads)
        self._max_length = max_length
        self._normalize = normalize
        self._use_library_score = use_library_score

    @property
    def identity(self) -> str:
        try:
            folder = check_model_folder(self._path, "cross-encoder")
            return f"flagreranker/{folder.name}@{model_fingerprint(folder)}"
        except (ModelUnavailable, OSError):
            return f"flagreranker/{self._path.name}@unavailable"

    @property
    def is_substitute(self) -> bool:
        return False

    def _create(self) -> Any:
        folder = check_model_folder(self._path, "cross-encoder")
        flag = self._flag_embedding("The cross-encoder (bge-reranker-v2-m3)")
        try:
            model = flag.FlagReranker(
                str(folder),
                use_fp16=False,
                devices="cpu",
                batch_size=self._batch_size,
                max_length=self._max_length,
                normalize=self._normalize,
            )
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelUnavailable(f"FlagEmbedding could not load the cross-encoder at {folder}: {exc}") from exc
        labels = int(getattr(model.model.config, "num_labels", 1))
        if labels != 1:
            raise ModelUnavailable(
                f"{folder} is a classifier with {labels} labels; a reranker has a single relevance logit"
            )
        model.model.float()  # what compute_score does on a CPU before every call, done once
        model.model.to("cpu")
        model.model.eval()
        return model

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float64]:
        """s(q, e) for each passage, in the order given."""
        items = score_inputs("FlagCrossEncoder.score", query, passages)
        if not items:
            return np.empty(0, dtype=np.float64)
        self.load()
        with self._lock:
            model = self._model
            if model is None:
                raise ModelUnavailable("FlagCrossEncoder was closed while scoring")
            if self._use_library_score:
                scores = model.compute_score([[query, p] for p in items])
            else:
                scores = self._score_pairs(model, query, items)
        out = np.asarray(scores, dtype=np.float64).reshape(-1)
        if out.shape[0] != len(items):
            raise RuntimeError(f"FlagReranker returned {out.shape[0]} scores for {len(items)} passages")
        return out

    def _score_pairs(self, model: Any, query: str, passages: list[str]) -> npt.NDArray[np.float64]:
        """FlagReranker.compute_score_single_gpu without its out-of-memory probe (module doc)."""
        torch: Any = require("torch", "The cross-encoder (bge-reranker-v2-m3)", "torch")
        compat: Any = require("FlagEmbedding.utils.tokenizer_compat", "The cross-encoder (bge-reranker-v2-m3)",
                              "FlagEmbedding")
        tok = model.tokenizer
        max_length = int(model.max_length)
        q_max = int(model.query_max_length) if model.query_max_length is not None else max_length * 3 // 4
        pairs = model.get_detailed_inputs([[query, p] for p in passages])  # instructions, if configured
        query, passages = pairs[0][0], [b for _, b in pairs]
        q_ids = tok([query], return_tensors=None, add_special_tokens=False, max_length=q_max,
                    truncation=True)["input_ids"][0]
        p_ids = tok(passages, return_tensors=None, add_special_tokens=False, max_length=max_length,
                    truncation=True)["input_ids"]
        items = [compat.prepare_for_model_compat(tok, q_ids, d, truncation="only_second", max_length=max_length,
                                                 padding=False) for d in p_ids]
        order = np.argsort([-len(x["input_ids"]) for x in items], kind="stable")
        out = np.empty(len(items), dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, len(items), self._batch_size):
                idx = order[start : start + self._batch_size]
                batch = compat.pad_with_compat(tok, [items[i] for i in idx], padding=True, return_tensors="pt")
                logits = model.model(**batch, return_dict=True).logits.view(-1).float()
                out[idx] = logits.numpy()
        if model.normalize:
            out = 1.0 / (1.0 + np.exp(-out))
        return out
