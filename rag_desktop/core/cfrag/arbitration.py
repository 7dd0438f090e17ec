"""Steps 6–7 of CF-RAG (paper 002 §4): arbitration of the hypotheses and the decision.

Ψ_j = (1 − λ)·φ_coh + λ·φ_causal with
φ_causal(E_j) = (1/|E_j|) Σ_e [ s(q, e) − max_{q' ∈ Q_cf} s(q', e) ]; if the hypotheses
agree, the highest Ψ; otherwise a synthesis (``cfrag.synthesis_prompt``: by default all the
kept evidence re-read as one path; or a prompt over the top-3 candidates), kept only when grounded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rag_desktop.core.qa_metrics import token_f1
from rag_desktop.core.replies import parse_citations
from rag_desktop.core.settings import CFRagSettings
from rag_desktop.core.text import answer_tokens, normalize_answer
from rag_desktop.core.types import Citation, Hit

_DEFAULT_SETTINGS = CFRagSettings()


def phi_causal(s_q: npt.ArrayLike, s_cf: npt.ArrayLike) -> float:
    """φ_causal(E_j, q, Q_cf) = (1/|E_j|) Σ_{e∈E_j} [ s(q, e) − max_{q'∈Q_cf} s(q', e) ].

    Paper 002 §4, exactly: the MAX over counterfactuals (the authors' code uses the
    mean, which lets one strongly competing q' be diluted by unrelated ones). ``s_q`` has
    one score per passage of E_j; ``s_cf`` is |Q_cf| × |E_j|. With no counterfactuals
    (or an empty E_j) the max is undefined and φ_causal = 0: Ψ then ranks by φ_coh alone.
    """
    sq = np.asarray(s_q, dtype=np.float64).reshape(-1)
    cf = np.asarray(s_cf, dtype=np.float64)
    if sq.size == 0 or cf.size == 0:
        return 0.0
    cf = cf.reshape(-1, sq.size)
    return float(np.mean(sq - cf.max(axis=0)))


def answer_presence(answer: str, texts: Sequence[str]) -> float:
    """Explicit presence of the answer in the evidence, in [0, 1].

    1.0 when the normalised answer is a substring of some normalised passage; otherwise
    the best token recall max_e |tok(a) ∩ tok(e)| / |tok(a)| (CJK characters as tokens),
    so "Christian Bale" against a passage naming only "Bale" scores 0.5. Empty answer: 0.
    """
    na = normalize_answer(answer)
    if not na:
        return 0.0
    at = set(answer_tokens(answer))
    best = 0.0
    for t in texts:
        nt = normalize_answer(t)
        if na in nt:
            return 1.0
        et = set(answer_tokens(t))
        best = max(best, len(at & et) / len(at))
    return best


def phi_coh(sim_answer_evidence: float, query_relevance: float, presence: float,
            settings: CFRagSettings = _DEFAULT_SETTINGS) -> float:
    """Internal coherence φ_coh (paper 002 §4 lists the three ingredients; weights are ours).

    φ_coh = 0.4·sim_ae + 0.3·rel_q + 0.3·presence (the settings ``cfrag.coh_w_*``, summing to 1):

    * sim_ae   = max_{e∈E_j} max(0, cos(E(a_j), E(e))): the answer is semantically
      supported by at least one passage (the max, because φ_causal already averages
      over E_j and a path needs one supporting passage, not all). E(a_j) is the
      embedder's *query* embedding of the short answer text, E(e) the passage embedding,
      as for retrieval;
    * rel_q    = mean_{e∈E_j} s(q, e) (normalised scale): the path's evidence is about q;
    * presence = :func:`answer_presence`: the answer string literally occurs.

    Every term is in [0, 1], so φ_coh ∈ [0, 1], comparable to φ_causal ∈ [−1, 1].
    """
    return (settings.coh_w_embed * sim_answer_evidence + settings.coh_w_query * query_relevance
            + settings.coh_w_presence * presence)


def psi(coh: float, causal: float, lam: float) -> float:
    """Ψ_j = (1 − λ)·φ_coh + λ·φ_causal (paper 002 §4; λ = 0.4)."""
    return (1.0 - lam) * coh + lam * causal


AGREEMENT_MEASURE = "mean pairwise token F1 of normalised answers"  # what agreement() computes


def agreement(answers: Sequence[str]) -> float:
    """Agreement of the hypotheses: the mean pairwise token F1 of their normalised answers.

    1.0 when all answers are equal after normalisation, 0.0 when no two share a token;
    "Bale, Bale, Ledger" → (1 + 0 + 0) / 3 = 0.33. Partial matches count partially
    ("Christian Bale" vs "Bale" → 0.67). Fewer than two hypotheses → 1.0 (nothing to
    disagree with).
    """
    n = len(answers)
    if n < 2:
        return 1.0
    total, pairs = 0.0, 0
    for i in range(n):
        for j in range(i + 1, n):
            total += token_f1(answers[i], answers[j])
            pairs += 1
    return total / pairs


def synthesis_is_grounded(answer: str, candidates: Sequence[str], texts: Sequence[str]) -> bool:
    """Whether a synthesised answer comes from the material it was given.

    Grounded: :func:`answer_presence` in the evidence > 0.5, or token F1 > 0.5 with one of
    the candidate answers. Qwen2.5 0.5B, given the long synthesis prompt, sometimes replies
    with an unrelated word ("Marketing", "Markov, p. 1" on the QA fixture); such a reply
    is not a synthesis, and the decision falls back to the highest-Ψ hypothesis.
    """
    if answer_presence(answer, texts) > 0.5:
        return True
    return any(normalize_answer(c) and token_f1(answer, c) > 0.5 for c in candidates)


def citations_for(text: str, sources: Sequence[Hit]) -> tuple[Citation, ...]:
    """Every citation in ``text``, first appearance order, mapped to ``sources`` (the one
    grammar of :mod:`rag_desktop.core.citations`: 【1】, [1-2] and lists included)."""
    return parse_citations(text, sources)
