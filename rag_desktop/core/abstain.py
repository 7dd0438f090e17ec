"""Say "not in your documents" before asking the model (docs/architecture.md, "Abstaining").

A small model asked a question its sources do not hold invents an answer. Whether the library holds
one is decided here from two things retrieval already has, with no model call:

* **coverage** — which of the question's search terms (the keyword leg's tokens, core.bm25) occur
  anywhere in the library. A question about another subject often uses no word the library uses.
  Lexical, so it is the same on every encoder.
* **lift** — how far the best unit's cosine stands above the question's mean cosine to the
  library's documents, ``s_top − cos(q, μ_D)`` with μ_D the mean unit document vector
  (app.retrieval.Retriever.score_means; the mean of a dot product is the dot product with the
  mean, so this is the question's average similarity to every document, exactly). It is measured
  against *this library*, not as an absolute cosine: encoders differ in scale (e5-small puts
  unrelated text at 0.7–0.8), and a library on one subject raises every document together.

The question is abstained on only when **none** of its search terms occur in the library and no
unit stands out (lift < MIN_LIFT); one known term or the lift is enough to answer. Asking for more
of the question's words — "most of them", coverage ≥ ½ — was measured and lost answers a person
needs: on 36 questions people ask about three real Chinese statutes, in everyday words the statutes
do not use ("老板不发薪水，我走人还能拿补偿吗？"), it abstained on 27, and in a library of 319 pages
of real manuals nearly every question about another subject had half its words somewhere, so it
abstained on few of those either (docs/evaluation.md, "Not in your documents"). A missed answer
costs the person the answer; an answer written for a question about another subject costs a model
call whose prompt says to answer only from the sources. So the rule protects answers and abstains
where the evidence is plain. A question with no search terms at all is decided by the lift alone.
A question asked in the other language of a mixed library shares no words with its answer, so the
service checks its translation before abstaining (app.service.RagService.abstention).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

# The best unit stands 0.10 above the question's mean similarity to the library. On the first tuning
# sets, answerable questions reached 0.06–0.20 and questions about other subjects 0.045–0.075
# (e5-small); 0.10 sits above every unanswerable one, and a known term carries the answerable ones below it.
MIN_LIFT = 0.10

# The second check, for the questions the rule above lets through: one prompt evaluation that asks the
# answer's own model whether the passages it is about to read hold the answer, the question put
# after them as the answer prompt puts it, and reads the first token's odds of "yes" against "no"
# (TokenScorer.first_token_logprobs; no sampling). The answer prompt's evaluation is shared: asked
# before the answer, the answer reads only the few tokens after the question; asked after it, the
# judgement reads only its own line (backends.llama_cpp_generator).
# Asked about its own finished answer instead ("Is your answer stated in the sources?"), the 1.5B
# said yes to nearly every one, invented or not (AUC 0.72 against 0.86 for this question, on the
# first 34 answered rows of the tuning splits; docs/evaluation.md, "Not in your documents").
JUDGE = {
    "en": ("Do the sources above contain the answer to this question? Reply with yes or no.",
           ("yes", "Yes"), ("no", "No")),
    "zh": ("上面的资料中有这个问题的答案吗？请只回答“有”或“没有”。", ("有",), ("没有",)),
}
# log P(yes) − log P(no) below this: not answered (P(yes) ≈ 0.62 of the two). Chosen on the first 34
# answered rows of the tuning splits (evaluation §5): the answerable questions whose passages are in
# their language were judged 0.68–3.17, 12 of the 18 about other subjects below 0.5; 0.5 leaves room
# under the lowest answerable one. The statutes' rows were held out of the choice.
MIN_JUDGED = 0.5

# The third check, before the answer too: does reading the passages make the question more likely?
#
#     lift_q = (1/|q|) Σ_t [ log P(q_t | prefix, passages, q_<t) − log P(q_t | prefix, no passages, q_<t) ]
#
# over the question's tokens q_t, in the answer prompt itself (the passages, then the question) and in
# the same prompt with no passages (TokenScorer's sibling PromptScorer.tail_logprob). It is the pointwise
# mutual information of the question with the passages, per token: the query likelihood that UPR
# (Sachan et al., 2022) reranks passages with, measured against the model's prior instead of between
# passages. Passages about the question's subject make its words expected; passages about another subject
# make them less expected than no passages at all (the model then expects a question about *them*).
# The cut is its sign, 0 — more likely with the passages than without — not a tuned number: on the tuning
# rows (docs/evaluation.md §5.4) every answerable same-language question stood at 0.36 or above, and 56
# of 61 about other subjects below 0; cuts from −0.1 to 0.3 lost none of those answers.
MIN_QUESTION_LIFT = 0.0


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
    """The decision and why: ``reason`` is "" when the question is answered, else "off_topic" (the
    library's words and similarities, :func:`decide`), "not_held" (the model's judgement of the
    passages, :func:`judged`), "unrelated" (the passages make the question no likelier, :func:`lifted`),
    or one of AFTER_ANSWER (:func:`after_answer`)."""

    abstained: bool
    reason: str
    support: Support
    # The question's other-language phrasing that was checked too ("" when none was): a question
    # asked in the other language of a mixed library (app.service.RagService.abstention).
    translated: str = ""
    # The model's log-odds that the passages hold the answer (JUDGE), None when it was not asked.
    judged: float | None = None
    # A verdict on passages in the question's language only, in a library that also holds this
    # language ("zh"/"en"), searched only through a translation (retrieval.cross_language): the answer
    # may stand there, so the person is told where else to ask.
    other_language: str = ""
    # lift_q: how much likelier the passages make the question, per token (MIN_QUESTION_LIFT); None: not measured.
    question_lift: float | None = None

    @property
    def written(self) -> bool:
        """Decided on an answer already written (AFTER_ANSWER), whose text is there to be shown."""
        return self.abstained and self.reason in AFTER_ANSWER

    @property
    def judged_yes(self) -> float | None:
        """P(yes) of the two answers, from :attr:`judged`: the share a person reads."""
        return None if self.judged is None else yes_share(self.judged)

    def as_json(self) -> dict[str, object]:
        s = self.support
        cov = s.coverage
        return {"abstained": self.abstained, "reason": self.reason,
                "coverage": None if cov is None else round(cov, 3), "terms": s.n_terms, "known_terms": s.n_known,
                "lift": round(s.lift, 4), "top_sim": round(s.top_sim, 4), "library_sim": round(s.library_sim, 4),
                "translated": self.translated,
                "judged": None if self.judged is None else round(self.judged, 3), "other_language": self.other_language,
                "question_lift": None if self.question_lift is None else round(self.question_lift, 3)}


def decide(support: Support, min_lift: float = MIN_LIFT) -> Abstention:
    """Abstain only when none of the question's words is the library's and no unit stands out."""
    answered = support.lift >= min_lift or support.n_known > 0
    return Abstention(not answered, "" if answered else "off_topic", support)


def yes_share(odds: float) -> float:
    """P(yes) / (P(yes) + P(no)) from their log-odds: what MIN_JUDGED and a judgement read as."""
    return 1.0 / (1.0 + math.exp(-odds))


def log_odds(logprobs: Sequence[float], n_yes: int) -> float:
    """log P(yes) − log P(no) from the first-token log-probabilities of JUDGE's yes words (the first
    ``n_yes``) and no words (the rest): each side's probabilities summed ("yes" and "Yes" are one answer)."""
    def lse(xs: Sequence[float]) -> float:
        top = max(xs)
        return top + math.log(sum(math.exp(x - top) for x in xs))

    return lse(logprobs[:n_yes]) - lse(logprobs[n_yes:])


# Decided after the answer is written, whose text the person still sees beside the verdict: the
# answer says itself that the sources lack it, or two independent checks agree that nothing read
# holds it (:func:`after_answer`).
AFTER_ANSWER = ("said_not_found", "unheld")


def after_answer(first: Abstention, doubted: Abstention | None, *, said_not_found: bool,
                 unsupported: bool) -> Abstention | None:
    """The verdict on a written answer that ``first`` (the library's words) let through: abstained as
    "said_not_found" when the answer says the sources do not hold it (core.cfrag.anchor.says_not_found),
    as "unheld" when the model judged its passages not to hold the answer (``doubted``: :func:`judged`,
    asked after the answer) *and* no passage holds what the answer adds to the question
    (``unsupported``: core.cfrag.anchor.unsupported); else ``doubted`` (a warning, or None).

    Why both for "unheld": each alone marks right answers. The judgement doubted 13 of 112 right answers
    of the answer sets, where people ask in their own words (statutes, data-set descriptions), and the
    passage check marked others whose words differ from the passages' (manuals: 4 of 111 right answers as it
    reads now, docs/evaluation.md §5.3); no right answer was
    marked by both, while an answer invented for a question about another subject usually is. The one is
    the model's reading of the passages, the other the answer's words against them: a right answer in
    everyday words passes the second, a paraphrase of the passages the first (docs/evaluation.md, "Not
    in your documents"). No threshold of its own: each check keeps its own."""
    if said_not_found:
        return dataclasses.replace(first, abstained=True, reason="said_not_found",
                                   judged=doubted.judged if doubted is not None else first.judged)
    if doubted is not None and unsupported:
        return dataclasses.replace(doubted, abstained=True, reason="unheld")
    return doubted


def judged(abstention: Abstention, odds: float, min_judged: float = MIN_JUDGED) -> Abstention:
    """``abstention`` (answered by :func:`decide`) with the model's judgement: abstained as "not_held"
    when the odds that the passages hold the answer are below ``min_judged``."""
    held = odds >= min_judged
    return dataclasses.replace(abstention, abstained=not held, reason="" if held else "not_held", judged=odds)


def question_lift(with_passages: tuple[float, int], without: tuple[float, int]) -> float:
    """lift_q (MIN_QUESTION_LIFT's formula) from the question's summed log-probability and token count
    after the passages and after none. The two prompts hold the same question, so the counts agree but
    for a token at the seam; each sum is averaged over its own count."""
    (lp1, n1), (lp0, n0) = with_passages, without
    if n1 <= 0 or n0 <= 0:
        raise ValueError("the question has no tokens to score")
    return lp1 / n1 - lp0 / n0


def lifted(abstention: Abstention, lift: float, min_lift: float = MIN_QUESTION_LIFT) -> Abstention:
    """``abstention`` (answered so far) with the question's lift: abstained as "unrelated" when the
    passages do not make the question likelier than no passages do (lift < ``min_lift``)."""
    if lift >= min_lift:
        return dataclasses.replace(abstention, question_lift=lift)
    return dataclasses.replace(abstention, abstained=True, reason="unrelated", question_lift=lift)
