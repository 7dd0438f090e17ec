"""The CF-RAG trace (paper 002): everything the UI and the CLI show about one run.

Plain frozen dataclasses of str / int / float / bool / None / tuples (plus the shared
:class:`~rag_desktop.core.types.Hit` and :class:`~rag_desktop.core.settings.CFRagSettings`,
which are of the same kind), so :func:`to_jsonable` / :func:`trace_to_json` serialise
them with no custom encoder.

Query indices used throughout: ``0`` is the original question q, ``i >= 1`` is the
i-th *kept* counterfactual q'_i (in Info order, see ``CFTrace.counterfactuals``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from rag_desktop.core.replies import ParseMethod
from rag_desktop.core.settings import CFRagSettings
from rag_desktop.core.types import Answer, Hit

AnswerJudgement = Literal["differ", "same", "undetermined"]
EvidenceStatus = Literal["kept", "duplicate", "low_quality", "below_cut"]
# "standard": the standard RAG answer beside CF-RAG stands (core.cfrag.anchor; StandardCheck says why)
DecisionKind = Literal["select", "synthesize", "synthesis_fallback", "single", "no_evidence", "standard"]
StandardOutcome = Literal["confident", "agrees", "replaced", "unsupported"]


@dataclass(frozen=True)
class StandardCheck:
    """The standard answer CF-RAG started from (core.cfrag.anchor) and what became of it.

    ``presence``: the share of what it adds to the question that one passage it read holds;
    ``not_found``: it says the sources do not hold the answer. ``outcome``: "confident" — it
    stands and CF-RAG's paths did not run; otherwise the paths ran and their answer "agrees"
    with it (it stands), "replaced" it (CF-RAG's answer is held by its passages), or was itself
    not held by its passages ("unsupported": the standard answer stands, flagged).
    ``candidate_presence``: the same measure for the paths' answer (-1 when they did not run).
    """

    answer: str
    presence: float
    not_found: bool
    presence_min: float
    outcome: StandardOutcome
    candidate: str = ""
    candidate_presence: float = -1.0

    @property
    def confident(self) -> bool:
        return not self.not_found and self.presence >= self.presence_min


@dataclass(frozen=True)
class CounterfactualCandidate:
    """One generated q' with the components of V(q, q') and Info(q, q') (paper 002 §1).

    ``sim_sem`` is cos(E(q), E(q')); ``answer_q``/``answer_cf`` are the closed-book
    answers used as the proxy for L(q) ≠ L(q'); ``answer_f1`` their token F1.
    ``valid`` = V(q, q'); ``kept`` = valid and among the top N by ``info``.
    ``reason`` is empty for kept candidates and says why otherwise.
    """

    order: int  # position in the model's output (0-based)
    text: str
    transformation: str  # role / time / entity / category / scope / unknown
    sim_sem: float
    answer_q: str
    answer_cf: str
    answer_f1: float
    answers: AnswerJudgement
    div_sem: float
    div_ans: float
    rel_dom: float
    info: float
    valid: bool
    kept: bool
    reason: str


@dataclass(frozen=True)
class EvidenceTrace:
    """One passage of the dialectical pool R(q) ∪ ⋃ R(q').

    Scores are the *normalised* s(·, e) used by the formulas (see ``CFTrace.score_scale``);
    ``s_q_raw`` is the scorer's raw output for q. ``s_cf[i-1]`` is s(q'_i, e).
    ``max_s_cf``/``argmax_cf`` are max_{q'} s(q', e) and the index (1-based) of that q';
    None / -1 without counterfactuals. ``retrieved_by`` lists the query indices whose
    retrieval returned the passage (merged from its near-duplicates).
    """

    pool_id: int
    hit: Hit
    retrieved_by: tuple[int, ...]
    s_q: float
    s_q_raw: float
    s_cf: tuple[float, ...]
    max_s_cf: float | None
    argmax_cf: int
    relevance: float  # max over {q} ∪ Q_cf of s(·, e): the filter's relevance
    quality: float  # Q(e) in [0, 1]
    status: EvidenceStatus
    duplicate_of: int  # pool_id of the representative, -1 unless status == "duplicate"
    cluster: int  # -1 unless kept and clustered


@dataclass(frozen=True)
class ClusterTrace:
    cluster: int
    members: tuple[int, ...]  # pool_ids


@dataclass(frozen=True)
class SpectralTrace:
    """Spectral clustering summary: K asked, K used (min(K, n)), the σ used and λ_1..λ_K of L."""

    k_requested: int
    k_used: int
    sigma: float
    eigenvalues: tuple[float, ...]
    inertia: float
    used_division: bool


@dataclass(frozen=True)
class SubsetTrace:
    """Evidence subset E_j: the per-cluster weights w_jm and the sampled passages."""

    index: int
    weights: tuple[float, ...]  # w_j1..w_jK (softmax of noise / temperature); () without division
    members: tuple[int, ...]  # pool_ids, in prompt order


@dataclass(frozen=True)
class HypothesisTrace:
    """(a_j, r_j) = H(q, E_j) and its arbitration scores."""

    index: int
    subset: int
    answer: str
    rationale: str
    parse: ParseMethod
    raw_text: str
    seed: int
    sim_answer_evidence: float
    query_relevance: float
    presence: float
    phi_coh: float
    phi_causal: float
    psi: float
    mean_logprob: float | None  # recorded when the generator reports log-probs; not used in Ψ
    rank: int  # 1 = highest Ψ
    finish_reason: str = "stop"  # "length": the reply used all of its token budget and may be cut


@dataclass(frozen=True)
class DecisionTrace:
    agreement: float
    agreement_measure: str
    threshold: float
    kind: DecisionKind
    chosen: int  # hypothesis index, -1 when the answer was synthesised
    synthesized_from: tuple[int, ...]  # the candidates the synthesis prompt showed (none for "reread")
    # The pool ids the call the answer comes from read, in its prompt's order (position + 1 = its
    # [n]): the chosen hypothesis's subset, the synthesised candidates' evidence, or all kept
    # evidence for the "reread" synthesis. One place, so the evidence list and the answer's
    # sources cannot disagree about what was read.
    read_ids: tuple[int, ...]
    synthesis_raw: str
    final_answer: str
    final_rationale: str
    truncated: bool = False  # the reply the answer comes from hit its token budget (see CFTrace.warnings)
    synthesis_style: str = ""  # cfrag.synthesis_prompt when a synthesis call ran, else ""
    standard: StandardCheck | None = None  # the standard answer CF-RAG started from (cfrag.keep_standard)

    @property
    def citing_text(self) -> str:
        """Where the answer's [n] are read from: the answer and its rationale (the hypothesis
        prompt asks the rationale to cite the deciding passage). One definition for the answer's
        citations and the evidence list's "cited" rows."""
        return f"{self.final_answer}\n{self.final_rationale}"


@dataclass(frozen=True)
class StepTiming:
    step: str
    seconds: float


@dataclass(frozen=True)
class GenerationUsage:
    """One group of generator calls made together (``generate_many``): what it cost.

    ``prompt_tokens`` is every request's whole prompt; ``cached_tokens`` the part read
    from a shared prefix instead of evaluated per request (-1 counts: unknown to the
    backend); ``truncated`` how many replies hit their token budget; ``replayed`` how many
    were answered from a :class:`~rag_desktop.core.generation.ReplayGenerator`'s memory
    (eval-qa's paired ablations: written by an earlier run of the same request, not now).
    """

    step: str  # counterfactuals, closed_book, hypotheses, synthesis
    calls: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float
    truncated: int
    replayed: int = 0


@dataclass(frozen=True)
class EvidenceRow:
    """One line of the CF-RAG evidence list as the product shows it (see ``cfrag.evidence_rows``).

    ``group``: "chosen" — read by the call the answer comes from (``DecisionTrace.read_ids``:
    the chosen hypothesis, the synthesis, or for "reread" all kept evidence), ``slot`` = its [n]
    in that prompt; "kept" — other evidence that passed the filters; "filtered" — removed
    (``status`` says why). ``cited``: the answer's rationale cites it as [slot]. ``margin`` is
    Δ = s(q, e) − max_{q'} s(q', e) (None without counterfactuals), an annotation, not the order.
    """

    evidence: EvidenceTrace
    group: Literal["chosen", "kept", "filtered"]
    slot: int  # [n] in the chosen prompt (1-based), 0 outside the chosen group
    margin: float | None
    cited: bool = False


@dataclass(frozen=True)
class MarginSummary:
    """Whether the counterfactual margins Δ say anything about the kept evidence.

    ``noise`` = max(``floor``, 10 % of the spread of s(q, e) over the kept evidence): below it
    differences of Δ are within the scorer's resolution relative to how much the passages
    differ at all. ``separates`` is False when the spread of Δ is below ``noise`` (or there
    are no counterfactuals / fewer than two passages); ``reason`` says why in words.
    """

    spread: float  # max Δ − min Δ over the kept evidence
    noise: float
    separates: bool
    closest_counterfactual_sim: float  # max sim_sem(q, q') of the kept q' (a paraphrase is ~1)
    reason: str


@dataclass(frozen=True)
class CFTrace:
    query: str
    seed: int
    settings: CFRagSettings
    lam: float
    use_counterfactuals: bool
    use_division: bool
    generator: str
    embedder: str
    scorer: str
    scorer_is_substitute: bool
    score_scale: str  # "sigmoid" (logits → probabilities) or "identity"
    counterfactual_raw: str
    counterfactuals: tuple[CounterfactualCandidate, ...]  # kept, Info order
    rejected_counterfactuals: tuple[CounterfactualCandidate, ...]
    queries: tuple[str, ...]  # q, q'_1..q'_N (the index space used below)
    evidence: tuple[EvidenceTrace, ...]  # the whole pool, including dropped passages
    spectral: SpectralTrace
    clusters: tuple[ClusterTrace, ...]
    subsets: tuple[SubsetTrace, ...]
    hypotheses: tuple[HypothesisTrace, ...]
    decision: DecisionTrace
    timings: tuple[StepTiming, ...]
    warnings: tuple[str, ...] = ()
    generation: tuple[GenerationUsage, ...] = ()  # per group of generator calls, in call order
    evidence_budget: int = -1  # prompt tokens of evidence per hypothesis (-1: not computed)

    @property
    def kept_evidence(self) -> tuple[EvidenceTrace, ...]:
        return tuple(e for e in self.evidence if e.status == "kept")


@dataclass(frozen=True)
class CFResult:
    answer: Answer
    trace: CFTrace


def to_jsonable(obj: Any) -> Any:
    """Dataclasses → dicts, tuples → lists; non-finite floats are an error (JSON has none)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"trace: non-finite float {obj!r} cannot be written as JSON")
        return obj
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if hasattr(obj, "value") and isinstance(obj.value, (str, int)):  # Enum
        return obj.value
    raise TypeError(f"trace: cannot serialise {type(obj).__name__} to JSON")


def trace_to_json(trace: CFTrace, *, indent: int | None = None) -> str:
    return json.dumps(to_jsonable(trace), ensure_ascii=False, indent=indent, allow_nan=False)
