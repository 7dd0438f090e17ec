"""The CF-RAG trace's reasons and warnings: one English template per kind of note.

The trace keeps the English sentence (the CLI and the JSON report print it as it is); the
desktop UI reads the template's name and values back from it (ui.cf_notes) and says it in
the UI language. A note made here is therefore always one the UI can translate.
"""

from __future__ import annotations

from rag_desktop.core.notes import NoteBook

TEMPLATES: dict[str, str] = {
    # why a counterfactual question was rejected (CounterfactualCandidate.reason, joined by "; ")
    "identical": "identical to the original question",
    "duplicate": "duplicate of candidate #{n}",
    "restates": "restates the question: adds no content word, so it asks for the same answer (L(q) = L(q'))",
    "copied_example": "copied from the prompt's example, not about this question",
    "near_example": "closer to the prompt's example (cos {ex}) than to the question ({sim}): a paraphrase of "
                    "the example",
    "off_topic": "sim_sem {sim} <= θ_sim {theta}: off topic",
    "answers_agree": "closed-book answers agree (token F1 {f1} > {limit}): L(q) = L(q')",
    "below_top": "valid, but Info {info} ranks below the top N = {n}",
    # CFTrace.warnings
    "no_counterfactual": "the generator wrote no usable counterfactual question; running without Q_cf",
    "closed_book_same": "the closed-book answers were all identical, so L(q) ≠ L(q') could not be judged; "
                        "candidates were ranked with Div_ans = 0.5",
    "none_valid": "no counterfactual passed validation V(q, q'); φ_causal = 0 for every path",
    "substitute_scorer": "s(q, e) comes from a substitute scorer ({scorer}), not a trained cross-encoder",
    "all_filtered": "every retrieved passage was removed by the quality filter",
    "no_evidence": "no evidence passed retrieval and filtering; no answer was generated",
    "synthesis_empty": "the synthesis reply had no answer; using the highest-Ψ hypothesis",
    "synthesis_ungrounded": "the synthesis answer {answer} is neither in the evidence nor one of the candidates; "
                            "using the highest-Ψ hypothesis",
    "evidence_shrunk": "the context (n_ctx = {n_ctx}) is too small for {m} hypotheses with full evidence decoded "
                       "together: evidence per hypothesis shrunk from {full} to {budget} tokens",
    "evidence_shrunk_batches": "the context (n_ctx = {n_ctx}) is too small for {m} hypotheses with full evidence "
                               "decoded together: evidence per hypothesis shrunk from {full} to {budget} tokens; "
                               "the hypotheses are decoded in more than one batch",
    "budget_used": "the answer comes from a reply that used all of its {limit}-token budget, so it may be cut "
                   "short (CFTuning.max_tokens_hypothesis / max_tokens_synthesis)",
}

NOTES = NoteBook("cfnote", TEMPLATES)
say = NOTES.say
read = NOTES.read
