"""The state CF-RAG's steps pass on (frozen; each step returns a copy with its results)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.core.cfrag.calls import Generated
from rag_desktop.core.cfrag.common import FloatMatrix, IntArray
from rag_desktop.core.cfrag.sampling import Subset
from rag_desktop.core.cfrag.spectral import SpectralResult
from rag_desktop.core.cfrag.tuning import CFTuning
from rag_desktop.core.cfrag.types import (
    CounterfactualCandidate,
    DecisionTrace,
    EvidenceStatus,
    GenerationUsage,
    HypothesisTrace,
    StandardCheck,
    StepTiming,
)
from rag_desktop.core.protocols import CrossEncoder, Embedder, Generator
from rag_desktop.core.settings import CFRagSettings
from rag_desktop.core.types import Answer, CancelToken, Hit

Retriever = Callable[[str, int], Sequence[Hit]]
# What the model reads of each evidence hit: (question, hits) → one hit per hit, same order
# (e.g. each chunk through its best paragraph: app.passages.PassageFinder.focus).
Reader = Callable[[str, Sequence[Hit]], Sequence[Hit]]
Vector = npt.NDArray[np.float64]
# The stored E(e) of hits where the library has one (None elsewhere): embedded at ingest by the
# same embedder, so CF-RAG need not embed 4,096-character chunks again at question time.
StoredVectors = Callable[[Sequence[Hit]], Sequence[npt.NDArray[np.floating[Any]] | None]]


@dataclass(frozen=True)
class CFRun:
    """What a run is given; the same for every step."""

    query: str
    retrieve: Retriever
    embedder: Embedder
    scorer: CrossEncoder
    generator: Generator
    settings: CFRagSettings
    seed: int
    cancel: CancelToken | None
    tuning: CFTuning
    read: Reader | None = None  # None: the hypotheses read the evidence hits as retrieved
    stored: StoredVectors | None = None  # None: every evidence vector is embedded here
    standard: Answer | None = None  # the standard RAG answer CF-RAG starts from (core.cfrag.anchor)


_NO_SPECTRAL = SpectralResult(np.zeros(0, dtype=np.int64), 0, (), 0.0)


@dataclass(frozen=True)
class CFState:
    """Everything the steps have found so far; each step fills in its own fields."""

    warnings: tuple[str, ...] = ()
    usage: tuple[GenerationUsage, ...] = ()
    timings: tuple[StepTiming, ...] = ()
    vectors: Mapping[tuple[str, int], Vector] = dataclasses.field(default_factory=dict)
    # retrieve
    hits_q: tuple[Hit, ...] = ()
    q_vec: Vector = dataclasses.field(default_factory=lambda: np.zeros(0))
    # counterfactuals
    kept_cf: tuple[CounterfactualCandidate, ...] = ()
    rejected_cf: tuple[CounterfactualCandidate, ...] = ()
    cf_raw: str = ""
    queries: tuple[str, ...] = ()
    # dialectical_retrieval
    pool: tuple[Hit, ...] = ()
    retrieved_by: tuple[tuple[int, ...], ...] = ()
    # scoring
    raw: FloatMatrix = dataclasses.field(default_factory=lambda: np.zeros((0, 0)))
    scores: FloatMatrix = dataclasses.field(default_factory=lambda: np.zeros((0, 0)))  # normalised S[i, e]
    scale: str = ""
    # filter
    pool_vecs: FloatMatrix = dataclasses.field(default_factory=lambda: np.zeros((0, 1)))
    rep: IntArray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    merged_by: tuple[frozenset[int], ...] = ()
    quality: tuple[float, ...] = ()
    relevance: FloatMatrix = dataclasses.field(default_factory=lambda: np.zeros(0))
    status: tuple[EvidenceStatus, ...] = ()
    kept_ids: tuple[int, ...] = ()
    # clustering
    sigma: float = 0.0
    spectral: SpectralResult = _NO_SPECTRAL
    labels: tuple[int, ...] = ()
    cluster_of: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # sampling
    subsets: tuple[Subset, ...] = ()
    subset_pids: tuple[tuple[int, ...], ...] = ()
    # hypotheses
    evidence_budget: int = -1
    # pool id → the hit as the model reads it (CFRun.read), for every evidence of a subset
    read_hits: Mapping[int, Hit] = dataclasses.field(default_factory=dict)
    replies: tuple[tuple[Generated, int], ...] = ()  # per subset: the reply and its generator seed
    # arbitration
    hypotheses: tuple[HypothesisTrace, ...] = ()
    order: tuple[int, ...] = ()  # hypothesis indices, highest Ψ first
    # decision
    decision: DecisionTrace | None = None
    standard_check: StandardCheck | None = None  # set when the standard answer was not confident
    sources: tuple[Hit, ...] = ()


