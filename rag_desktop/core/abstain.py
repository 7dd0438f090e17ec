"""Say "not in your documents" before asking the model (docs/architecture.md, "Abstaining").

A small model asked a question its sources do not hold invents an answer. Whether the library holds
one is decided here from two things retrieval already has, with no model call:

* **coverage** — the share of the question's search terms (the keyword leg's tokens, core.bm25) that
  occur anywhere in the library. A question about another subject uses words the library never
  uses. Lexical, so it is the same on every encoder.
* **lift** — how far the best unit's cosine stands above the question's mean cosine to the
  library's documents, ``s_top − cos(q, μ_D)`` with μ_D the mean unit document vector
  (app.retrieval.Retriever.score_means; the mean of a dot product is the dot product with the
  mean, so this is the question's average similarity to every document, exactly). It is measured
  against *this library*, not as an absolute cosine: encoders differ in scale (e5-small puts
  unrelated text at 0.7–0.8), and a library on one subject raises every document together.

The question is answered when either says so: coverage ≥ MIN_COVERAGE or lift ≥ MIN_LIFT.
Abstaining needs both to be low, so a question in other words than the library's (low coverage)
still gets an answer when one unit stands out, and a vague question in the library's words still
gets one. A question with no search terms at all is decided by the lift alone. A question asked in the
other language of a mixed library shares no words with its answer, so the service checks its
translation before abstaining (app.service.RagService.abstention). The limits, and what they cost on
held-out questions, are in docs/evaluation.md ("Not in your documents").
"""

from __future__ import annotations

from dataclasses import dataclass

# At least half of the question's search terms are the library's words (chosen before the data was
# seen as "most of the question"; docs/evaluation.md gives the rows on each side).
MIN_COVERAGE = 0.5
# The best unit stands 0.10 above the question's mean similarity to the library. On the tuning
# sets, answerable questions reached 0.06–0.20 and questions about other subjects 0.045–0.075
# (e5-small); 0.10 sits above every unanswerable one, and coverage carries the answerable ones below it.
MIN_LIFT = 0.10


@dataclass(frozen=True)
class Support:
    """What the library offers a question, from retrieval alone."""

    n_terms: int  # the question's search terms (distinct)
    n_known: int  # of those, the ones the library's text contains
    top_sim: float  # cosine of the best-ranked unit (the Baseline column's first score)
    library_sim: float  # the question's mean cosine to the library's documents, cos(q, μ_D)

    @property
    def coverage(self) -> float | None:
        return self.n_known / self.n_terms if self.n_terms else None

    @property
    def lift(self) -> float:
        return self.top_sim - self.library_sim


@dataclass(frozen=True)
class Abstention:
    """The decision and why: ``reason`` is "" when the question is answered, else "off_topic"."""

    abstained: bool
    reason: str
    support: Support
    # The question's other-language phrasing that was checked too ("" when none was): a question
    # asked in the other language of a mixed library (app.service.RagService.abstention).
    translated: str = ""

    def as_json(self) -> dict[str, object]:
        s = self.support
        cov = s.coverage
        return {"abstained": self.abstained, "reason": self.reason,
                "coverage": None if cov is None else round(cov, 3), "terms": s.n_terms, "known_terms": s.n_known,
                "lift": round(s.lift, 4), "top_sim": round(s.top_sim, 4), "library_sim": round(s.library_sim, 4),
                "translated": self.translated}


def decide(support: Support, min_coverage: float = MIN_COVERAGE, min_lift: float = MIN_LIFT) -> Abstention:
    """Abstain only when the question's words are mostly not the library's and no unit stands out."""
    cov = support.coverage
    answered = support.lift >= min_lift or (cov is not None and cov >= min_coverage)
    return Abstention(not answered, "" if answered else "off_topic", support)
