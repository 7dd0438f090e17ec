"""CF-RAG (paper 002, ``papers/002_db86d620498a8d34.txt``) as pure steps plus one pipeline.

The method, step by step (section numbers are the paper's "关键设计" items), and the
module of each:

1. Counterfactual exploration (§1, :mod:`.counterfactuals`): the generator writes
   ``n_candidates`` questions q' by controlled transformations τ_i (role, time, entity,
   category, scope). Each is validated by V(q, q') = [sim_sem(q, q') > θ_sim] ∧ [L(q) ≠ L(q')]
   and ranked by Info(q, q') = α·Div_sem + β·Div_ans + γ·Rel_dom; the top N are kept.
2. Dialectical retrieval (§2, :mod:`.evidence`): R(q) ∪ ⋃_{q'} R(q'); near-duplicates
   (embedding cosine > θ_dedup) collapse onto one representative; then a quality filter
   Q(e) and a relevance cut on max_{q* ∈ {q} ∪ Q_cf} s(q*, e).
3. s(q, e) comes from a :class:`~rag_desktop.core.protocols.CrossEncoder`; the whole
   matrix s(q_i, e) is computed once (:mod:`.evidence`).
4. Evidence division (§3, :mod:`.spectral`): spectral clustering (Gaussian affinity,
   normalised Laplacian, leading eigenvectors, k-means on the row-normalised eigenvector
   rows) into K clusters.
5. Parallel hypotheses (§3, :mod:`.sampling`): M subsets by stratified,
   temperature-weighted sampling across clusters; one (answer, rationale) per subset.
6. Arbitration (§4, :mod:`.arbitration`): Ψ_j = (1 − λ)·φ_coh + λ·φ_causal with
   φ_causal(E_j) = (1/|E_j|) Σ_e [ s(q, e) − max_{q' ∈ Q_cf} s(q', e) ].
7. Decision: if the hypotheses agree, the highest Ψ; otherwise a synthesis of the top 3.

:mod:`.pipeline` runs the steps over a frozen :class:`~.state.CFState`; :mod:`.prompts`
renders every prompt from ``rag_desktop/prompts/cfrag_*.txt``; :mod:`rag_desktop.core.replies`
reads the replies; :mod:`.seeds` derives every random stream from one seed; :mod:`.trace` builds the
trace and what the UI shows of it; :mod:`.types` holds the trace's dataclasses.

We follow the paper's formulas, not the shortcuts of the authors' public code (KMeans on
raw embeddings, mean over q' instead of max, no counterfactual validation, exact-text
dedup, always regenerating from the best draft).

Where the paper is silent the choice is documented at the function that makes it; the
user-facing knobs are :class:`~rag_desktop.core.settings.CFRagSettings`, the other
constants :class:`~.tuning.CFTuning`.
"""

from rag_desktop.core.cfrag.arbitration import (
    agreement,
    answer_presence,
    citations_for,
    phi_causal,
    phi_coh,
    psi,
    synthesis_is_grounded,
)
from rag_desktop.core.cfrag.calls import Generated, generate_group, generate_text
from rag_desktop.core.cfrag.common import cosine_rows
from rag_desktop.core.cfrag.counterfactuals import (
    adds_content,
    closed_book_is_degenerate,
    evaluate_counterfactuals,
    explore_counterfactuals,
    judge_answers,
)
from rag_desktop.core.cfrag.evidence import (
    dedup_by_embedding,
    normalise_scores,
    pool_union,
    quality_score,
    resolve_score_scale,
    score_matrix,
    select_evidence,
)
from rag_desktop.core.cfrag.pipeline import PIPELINE, cfrag_result, iter_cfrag, run_cfrag
from rag_desktop.core.cfrag.prompts import (
    EXAMPLE_COUNTERFACTUALS,
    EXAMPLE_QUERIES,
    SYSTEM_CLOSED_BOOK,
    SYSTEM_COUNTERFACTUAL,
    SYSTEM_HYPOTHESIS,
    SYSTEM_SYNTHESIS,
    TRANSFORMATIONS,
    TYPE_EXAMPLE_QUERIES,
    TYPE_EXAMPLES,
    TYPE_INSTRUCTIONS,
    closed_book_messages,
    counterfactual_messages,
    counterfactual_type_messages,
    fit_passages,
    hypothesis_messages,
    hypothesis_overhead,
    synthesis_messages,
)
from rag_desktop.core.cfrag.sampling import Subset, sample_subsets, softmax
from rag_desktop.core.cfrag.seeds import SEED_ROLES, derive_seed, stream_rng
from rag_desktop.core.cfrag.spectral import (
    SpectralResult,
    gaussian_affinity,
    kmeans_pp,
    median_sigma,
    normalized_laplacian,
    spectral_clustering,
)
from rag_desktop.core.cfrag.trace import (
    MARGIN_NOISE_FLOOR,
    METHOD_NAME,
    PARAPHRASE_SIM,
    evidence_rows,
    margin_summary,
)
from rag_desktop.core.cfrag.tuning import DEFAULT_TUNING, CFTuning
from rag_desktop.core.cfrag.types import (
    AnswerJudgement,
    CFResult,
    CFTrace,
    ClusterTrace,
    CounterfactualCandidate,
    DecisionKind,
    DecisionTrace,
    EvidenceRow,
    EvidenceStatus,
    EvidenceTrace,
    GenerationUsage,
    HypothesisTrace,
    MarginSummary,
    SpectralTrace,
    StepTiming,
    SubsetTrace,
    to_jsonable,
    trace_to_json,
)

__all__ = [
    "DEFAULT_TUNING",
    "EXAMPLE_COUNTERFACTUALS",
    "EXAMPLE_QUERIES",
    "MARGIN_NOISE_FLOOR",
    "METHOD_NAME",
    "PARAPHRASE_SIM",
    "PIPELINE",
    "SEED_ROLES",
    "SYSTEM_CLOSED_BOOK",
    "SYSTEM_COUNTERFACTUAL",
    "SYSTEM_HYPOTHESIS",
    "SYSTEM_SYNTHESIS",
    "TRANSFORMATIONS",
    "TYPE_EXAMPLES",
    "TYPE_EXAMPLE_QUERIES",
    "TYPE_INSTRUCTIONS",
    "AnswerJudgement",
    "CFResult",
    "CFTrace",
    "CFTuning",
    "ClusterTrace",
    "CounterfactualCandidate",
    "DecisionKind",
    "DecisionTrace",
    "EvidenceRow",
    "EvidenceStatus",
    "EvidenceTrace",
    "Generated",
    "GenerationUsage",
    "HypothesisTrace",
    "MarginSummary",
    "SpectralResult",
    "SpectralTrace",
    "StepTiming",
    "Subset",
    "SubsetTrace",
    "adds_content",
    "agreement",
    "answer_presence",
    "cfrag_result",
    "citations_for",
    "closed_book_is_degenerate",
    "closed_book_messages",
    "cosine_rows",
    "counterfactual_messages",
    "counterfactual_type_messages",
    "dedup_by_embedding",
    "derive_seed",
    "evaluate_counterfactuals",
    "evidence_rows",
    "explore_counterfactuals",
    "fit_passages",
    "gaussian_affinity",
    "generate_group",
    "generate_text",
    "hypothesis_messages",
    "hypothesis_overhead",
    "iter_cfrag",
    "judge_answers",
    "kmeans_pp",
    "margin_summary",
    "median_sigma",
    "normalise_scores",
    "normalized_laplacian",
    "phi_causal",
    "phi_coh",
    "pool_union",
    "psi",
    "quality_score",
    "resolve_score_scale",
    "run_cfrag",
    "sample_subsets",
    "score_matrix",
    "select_evidence",
    "softmax",
    "spectral_clustering",
    "stream_rng",
    "synthesis_is_grounded",
    "synthesis_messages",
    "to_jsonable",
    "trace_to_json",
]
