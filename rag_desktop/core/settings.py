"""Every parameter of both papers, with the papers' defaults, as frozen dataclasses.

Loading/saving TOML lives in ``rag_desktop.app.config``; this module only knows
the values and how to validate them, so ``core`` stays free of I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from rag_desktop.core.errors import ErrorKind, RagError


class SettingsError(RagError, ValueError):
    """An invalid setting; the message names the key, e.g. ``retrieval.k``."""

    kind = ErrorKind.SETTINGS


@dataclass(frozen=True)
class ModelSettings:
    # "embedded" = the packaged defaults; anything else is a path to a GGUF file
    # (generator) or a local model folder (embedder / reranker).
    generator: str = "embedded"
    embedder: str = "embedded"
    reranker: str = ""  # empty: no cross-encoder; the substitute is labelled in the UI
    model_dir: str = ""  # empty: the platform's user data folder / models
    # Generator backend: "llama_cpp" (in-process) or "openai" (an OpenAI-compatible server).
    generator_backend: Literal["llama_cpp", "openai"] = "llama_cpp"
    openai_base_url: str = "http://127.0.0.1:8080/v1"
    openai_model: str = "local"
    openai_timeout_s: float = 120.0
    # Embedder backend: "local" (models.embedder, in-process) or "openai" (an OpenAI-compatible
    # /v1/embeddings server: llama.cpp --embedding, vLLM, TEI). Texts go out in batches of
    # ingest.embed_batch_size; timeouts and HTTP 429/5xx are retried embed_retries times.
    embedder_backend: Literal["local", "openai"] = "local"
    embed_base_url: str = "http://127.0.0.1:8081/v1"
    embed_model: str = "local"
    embed_timeout_s: float = 60.0
    embed_retries: int = 3
    # Prepended for instruction-trained encoders (e5: "query: " / "passage: "); terms take the query one.
    embed_query_prefix: str = ""
    embed_passage_prefix: str = ""
    # A cross-encoder behind TEI's POST <reranker_url>/rerank; empty: models.reranker (a local folder) if set.
    reranker_url: str = ""
    reranker_timeout_s: float = 60.0
    n_ctx: int = 8192
    n_gpu_layers: int = 0
    threads: int = 0  # 0: physical cores


@dataclass(frozen=True)
class IngestSettings:
    # Paper 000 §4.1: chunks of 4,096 characters with 512 overlap.
    chunk_size: int = 4096
    chunk_overlap: int = 512
    keywords_per_chunk: int = 15
    embed_batch_size: int = 16
    # Flat index up to this many vectors; IVF above (docs/architecture.md).
    flat_index_max: int = 200_000
    # OCR (RapidOCR, offline) for PDF pages without a usable text layer and .png/.jpg/.tif files;
    # pages are rendered at ocr_dpi (docs/evaluation.md "OCR": accuracy and pages/s by dpi).
    ocr: bool = True
    ocr_dpi: int = 150
    # While the app runs, re-ingest the library's folders when files in them change (app/watcher.py);
    # watch_poll_s > 0 polls every that many seconds instead (network drives deliver no events).
    watch: bool = True
    watch_debounce_s: float = 2.0
    watch_poll_s: float = 0.0
    # Files larger than this are skipped with a reason (0: no limit). A 50 MB text file is
    # ~15,000 chunks, over two hours of embedding on a laptop CPU (issue 15).
    max_file_mb: float = 100.0


@dataclass(frozen=True)
class RetrievalSettings:
    level: Literal["chunk", "doc"] = "doc"
    k: int = 20  # candidate window (paper 000 §4.5)
    theta: float = 0.0  # similarity threshold θ of Eq. 2 (0: keep the whole window)
    query_keywords: int = 10  # |K_q| (paper 000 §4.4)
    doc_keywords: int = 15  # |K_d|
    # τ of Eq. 3. "auto" calibrates an encoder-aware τ from the library's own
    # term-pair cosine distribution at ingest; a number uses it as given.
    tau: float | Literal["auto"] = "auto"
    tau_paper: float = 0.6
    tau_percentile: float = 97.0
    hybrid_weight: float = 0.5  # w of w·minmax(s_sim) + (1−w)·minmax(s_c)
    keyword_variant: Literal["plain", "improved"] = "improved"
    empty_b_rule: Literal["demote", "fallback"] = "demote"
    # How s_c is read off B (core.causal.ScoreVariant): "paper" = Eq. 4–5 exactly; "centred",
    # "idf", "contrast", "centred_idf" put it on the encoder's own scale (docs/evaluation.md §1).
    score_variant: Literal["paper", "centred", "idf", "contrast", "centred_idf"] = "paper"
    # "gated": the causal column follows the library's calibration gate (app.auto_gate calibrates
    # it in the background after an ingest); the hybrid, labelled "not calibrated yet", until then.
    default_method: Literal["baseline", "causal", "hybrid", "gated"] = "gated"


@dataclass(frozen=True)
class CFRagSettings:
    # Paper 002 defaults: N = 3 counterfactuals, K = 4 clusters, M = 3 hypotheses, λ = 0.4.
    n_counterfactuals: int = 3
    n_candidates: int = 6  # over-generate so validation has something to reject
    n_clusters: int = 4
    n_hypotheses: int = 3
    lam: float = 0.4
    # The paper gives no values for θ_sim, θ_dedup, σ. With ``rescale_cosines`` the two
    # thresholds are read on the encoder's own scale: cos' = (cos − b) / (1 − b), where b is
    # the library's mean random chunk-pair cosine (e5 puts unrelated texts near 0.75, BGE-M3
    # near 0.35, so one raw threshold cannot mean the same thing for both).
    theta_sim: float = 0.5
    theta_dedup: float = 0.95
    rescale_cosines: bool = True
    sigma: float = 0.5
    # "median": σ = median pairwise evidence distance (self-tuning; a fixed σ gives e5's
    # compressed distances an affinity graph with no structure); "fixed": σ as given.
    sigma_rule: Literal["fixed", "median"] = "median"
    # φ_coh = w_embed·(answer–evidence similarity) + w_query·(query relevance) + w_presence·(answer in evidence)
    coh_w_embed: float = 0.4
    coh_w_query: float = 0.3
    coh_w_presence: float = 0.3
    answer_same_f1: float = 0.5  # closed-book answers with token F1 above this count as L(q) = L(q')
    temperature: float = 1.0
    alpha: float = 0.4
    beta: float = 0.4
    gamma: float = 0.2
    agreement_threshold: float = 0.6
    retrieve_k: int = 8
    evidence_per_hypothesis: int = 4
    quality_min: float = 0.2
    seed: int = 0
    use_counterfactuals: bool = True
    use_division: bool = True


@dataclass(frozen=True)
class GenerationSettings:
    temperature: float = 0.2
    max_tokens: int = 512
    answer_reserve: int = 512
    thinking: bool = False
    seed: int = 42
    translate: bool = True
    # Answer passages (issue 12): the model reads paragraph-sized windows of the top chunks
    # (at most this many), not whole 4,096-character chunks.
    passages: bool = True
    max_passages: int = 8
    # Follow-up questions (issue 12): a rewrite that takes longer falls back to the user's words.
    rewrite_timeout_s: float = 30.0


@dataclass(frozen=True)
class UISettings:
    language: Literal["en", "zh"] = "en"
    # The question history moved to app.config.UIState (ui_state.toml): it is not a setting.


@dataclass(frozen=True)
class Settings:
    models: ModelSettings = field(default_factory=ModelSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    cfrag: CFRagSettings = field(default_factory=CFRagSettings)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    ui: UISettings = field(default_factory=UISettings)

    def validate(self) -> Settings:
        _check(self)
        return self

    def replace(self, section: str, **values: Any) -> Settings:
        """A copy with ``section.key = value`` for each given key (validated)."""
        current = getattr(self, section)
        return dataclasses.replace(self, **{section: dataclasses.replace(current, **values)}).validate()


def _need(cond: bool, key: str, why: str) -> None:
    if not cond:
        raise SettingsError(f"invalid setting {key}: {why}")


def _check(s: Settings) -> None:
    r, i, c, g = s.retrieval, s.ingest, s.cfrag, s.generation
    _need(i.chunk_size >= 64, "ingest.chunk_size", "must be at least 64 characters")
    _need(0 <= i.chunk_overlap < i.chunk_size, "ingest.chunk_overlap", "must be >= 0 and < chunk_size")
    _need(i.keywords_per_chunk >= 1, "ingest.keywords_per_chunk", "must be >= 1")
    _need(i.embed_batch_size >= 1, "ingest.embed_batch_size", "must be >= 1")
    _need(72 <= i.ocr_dpi <= 600, "ingest.ocr_dpi", "must be in 72..600")
    _need(i.watch_debounce_s > 0, "ingest.watch_debounce_s", "must be > 0")
    _need(i.watch_poll_s >= 0, "ingest.watch_poll_s", "must be >= 0 (0: the OS's change events)")
    _need(i.max_file_mb >= 0, "ingest.max_file_mb", "must be >= 0 (0: no limit)")
    _need(r.level in ("chunk", "doc"), "retrieval.level", "must be 'chunk' or 'doc'")
    _need(r.k >= 1, "retrieval.k", "must be >= 1")
    _need(-1.0 <= r.theta <= 1.0, "retrieval.theta", "must be a cosine in [-1, 1]")
    _need(r.query_keywords >= 1, "retrieval.query_keywords", "must be >= 1")
    _need(r.doc_keywords >= 1, "retrieval.doc_keywords", "must be >= 1")
    _need(r.tau == "auto" or (isinstance(r.tau, (int, float)) and -1.0 <= r.tau <= 1.0),
          "retrieval.tau", "must be 'auto' or a cosine in [-1, 1]")
    _need(0.0 < r.tau_percentile < 100.0, "retrieval.tau_percentile", "must be in (0, 100)")
    _need(0.0 <= r.hybrid_weight <= 1.0, "retrieval.hybrid_weight", "must be in [0, 1]")
    _need(r.keyword_variant in ("plain", "improved"), "retrieval.keyword_variant", "'plain' or 'improved'")
    _need(r.empty_b_rule in ("demote", "fallback"), "retrieval.empty_b_rule", "'demote' or 'fallback'")
    _need(r.score_variant in ("paper", "centred", "idf", "contrast", "centred_idf"), "retrieval.score_variant",
          "one of paper, centred, idf, contrast, centred_idf")
    _need(r.default_method in ("baseline", "causal", "hybrid", "gated"), "retrieval.default_method",
          "one of baseline, causal, hybrid, gated")
    _need(c.n_counterfactuals >= 1, "cfrag.n_counterfactuals", "must be >= 1")
    _need(c.n_candidates >= c.n_counterfactuals, "cfrag.n_candidates", "must be >= n_counterfactuals")
    _need(c.n_clusters >= 1, "cfrag.n_clusters", "must be >= 1")
    _need(c.n_hypotheses >= 1, "cfrag.n_hypotheses", "must be >= 1")
    _need(0.0 <= c.lam <= 1.0, "cfrag.lam", "must be in [0, 1]")
    _need(c.sigma > 0, "cfrag.sigma", "must be > 0")
    _need(c.sigma_rule in ("fixed", "median"), "cfrag.sigma_rule", "'fixed' or 'median'")
    _need(min(c.coh_w_embed, c.coh_w_query, c.coh_w_presence) >= 0
          and abs(c.coh_w_embed + c.coh_w_query + c.coh_w_presence - 1.0) < 1e-9,
          "cfrag.coh_w_embed", "the three φ_coh weights must be >= 0 and sum to 1")
    _need(0.0 <= c.answer_same_f1 < 1.0, "cfrag.answer_same_f1", "must be in [0, 1)")
    _need(-1.0 <= c.theta_sim <= 1.0 and -1.0 <= c.theta_dedup <= 1.0, "cfrag.theta_sim",
          "theta_sim and theta_dedup must be cosines in [-1, 1]")
    _need(c.temperature > 0, "cfrag.temperature", "must be > 0")
    _need(0.0 <= c.agreement_threshold <= 1.0, "cfrag.agreement_threshold", "must be in [0, 1]")
    _need(c.retrieve_k >= 1, "cfrag.retrieve_k", "must be >= 1")
    _need(c.evidence_per_hypothesis >= 1, "cfrag.evidence_per_hypothesis", "must be >= 1")
    _need(0.0 <= g.temperature <= 2.0, "generation.temperature", "must be in [0, 2]")
    _need(g.max_tokens >= 1, "generation.max_tokens", "must be >= 1")
    _need(g.max_passages >= 1, "generation.max_passages", "must be >= 1")
    _need(g.rewrite_timeout_s > 0, "generation.rewrite_timeout_s", "must be > 0")
    _need(s.models.n_ctx >= 512, "models.n_ctx", "must be >= 512")
    _need(s.models.generator_backend in ("llama_cpp", "openai"), "models.generator_backend",
          "'llama_cpp' or 'openai'")
    _need(s.models.embedder_backend in ("local", "openai"), "models.embedder_backend", "'local' or 'openai'")
    _need(s.models.embed_timeout_s > 0, "models.embed_timeout_s", "must be > 0")
    _need(s.models.embed_retries >= 0, "models.embed_retries", "must be >= 0")
    _need(s.models.reranker_timeout_s > 0, "models.reranker_timeout_s", "must be > 0")
    _need(s.ui.language in ("en", "zh"), "ui.language", "'en' or 'zh'")
