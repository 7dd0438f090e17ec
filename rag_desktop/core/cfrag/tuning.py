"""CF-RAG's implementation constants that are not user settings.

The user-facing knobs (φ_coh weights ``coh_w_*``, ``answer_same_f1``, ``sigma_rule``, and
everything the paper names) live in :class:`~rag_desktop.core.settings.CFRagSettings`
(``[cfrag]`` in settings.toml) and are read from there; this class holds only what a
user is not meant to tune (one source of truth per idea).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rag_desktop.core.settings import SettingsError


@dataclass(frozen=True)
class CFTuning:
    """Implementation constants the paper does not give and ``CFRagSettings`` does not carry.

    * ``score_scale`` — how raw s(q, e) is mapped to [0, 1] (see :func:`resolve_score_scale`).
    * ``quality_ref_chars`` — content characters at which Q(e)'s length factor reaches 1.
    * ``counterfactual_prompt`` — "per_type" (default): one short call per transformation
      τ_i, each writing one line (:func:`counterfactual_type_messages`), each with its own
      seed (:func:`derive_seed`) and sampled at ``counterfactual_temperature`` for diversity;
      "batch": one call writing all ``n_candidates`` lines (:func:`counterfactual_messages`).
    * temperatures / token limits of the generator calls; k-means restarts.
    * ``synthesis_top`` — the paper's "top-3" for synthesis.
    """

    score_scale: Literal["auto", "sigmoid", "identity"] = "auto"
    quality_ref_chars: int = 100
    counterfactual_prompt: Literal["per_type", "batch"] = "per_type"
    counterfactual_temperature: float = 0.7
    closed_book_temperature: float = 0.0
    hypothesis_temperature: float = 0.2
    synthesis_temperature: float = 0.2
    max_tokens_counterfactuals: int = 320
    max_tokens_counterfactual_line: int = 48
    max_tokens_closed_book: int = 192
    # A hypothesis is a JSON object with an answer and a one-sentence rationale (it was "one to
    # three sentences": the three hypotheses then wrote ~130 tokens each against 65 for a standard
    # answer, and on a CPU the written tokens are CF-RAG's largest cost / benchmarks §8).
    # At 256 tokens the 0.5B model's longer replies were cut inside the answer string ("…cross-
    # encoders are too"), so the budget stays as a ceiling, not a target.
    max_tokens_hypothesis: int = 384
    max_tokens_synthesis: int = 448
    min_evidence_tokens: int = 256  # evidence per hypothesis is never shrunk below this (see _evidence_budget)
    kmeans_n_init: int = 8
    kmeans_max_iter: int = 100
    synthesis_top: int = 3
    context_margin_tokens: int = 64
    # An answer is held by its passages when one passage holds at least this share of what it adds
    # to the question (core.cfrag.anchor.claim_presence): "most of it", not tuned on any set.
    presence_min: float = 0.5

    def __post_init__(self) -> None:
        if self.synthesis_top < 1:
            raise SettingsError("invalid setting cfrag tuning synthesis_top: must be >= 1")


DEFAULT_TUNING = CFTuning()
