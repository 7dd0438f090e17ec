"""The automatic calibration gate: paper 000 §4.6 without a person labelling (``calibrate --auto``).

Not "a question written from one passage, that passage is the answer": such a question repeats its
passage's words, so the baseline ranks it first and the probes never meet the regime the re-ranker
exists for (documents that repeat the question's words without answering it). Measured on a poisoned
fact-checking set: that design said "neither, 100 % reliable" where labelled queries gain +0.21 MRR@10.

Per probe (all steps seeded, so a run is reproducible):

1. **Probes phrased as people ask.** The person's own recent questions (``log_question``, up to half
   the plan), then sampled documents (``make_plan``: question titles and the strongest stuffing signals
   first, then a seeded sample), never a body: a title's own question verbatim (``title_question``),
   else a question the model writes about the subject the title shares with other documents, shown only
   those words (``topic_words``), else one from the title and its headings. People name a topic in its
   title's words, the words a keyword-stuffed document repeats, so the probe meets the stuffing.
2. **The person's own labels where they exist** (``log_label``): the documents an answer to their
   question cited or that they opened are its relevant set, no model asked.
3. **Otherwise labelled over the pool**: the union of the three rankings' first ``pool`` documents is
   shown to the model, which *answers* the probe from them once per rotation of their order; the
   documents holding most of the answer's own words are relevant (``answer_support``).
4. **The gate itself is unchanged**: MRR@10 per probe and method, then ``core.gate.calibrate`` through
   ``app.calibration.score_labels`` — the code the wizard and ``calibrate --probes-file`` use.

Runs in a detached low-priority process (``start_background``) that never blocks questions; the plan
and every finished probe are stored in the catalog (``AUTO_KEY``), so a crash resumes where it stopped
and a cancel (``request_cancel``) is honoured between model calls. ``needs_calibration`` says when to run
again: never calibrated; ``RECALIBRATE_FRACTION`` of the documents changed (by content hash); or
``RECALIBRATE_QUESTIONS`` new questions or ``RECALIBRATE_LABELS`` new labels since. Our choice: a fifth
of a library can move its regime, fewer changes are within what a dozen probes resolve; twenty new
questions replace most of the question half of the probes.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_desktop.app.calibration import (
    METHODS,
    TOP,
    CandidateDoc,
    Probe,
    ProbeCandidates,
    score_labels,
)
from rag_desktop.app.catalog import Catalog
from rag_desktop.app.gate_probes import (
    complete,
    document_frequency,
    document_term_counts,
    heading_lines,
    is_subject_word,
    keyword_topic,
    make_plan,
    title_question,
    topic_words,
    write_probe,
    write_topic_probe,
)
from rag_desktop.app.question_log import QUESTION_LOG_KEY, as_logged, question_log, user_labels
from rag_desktop.core.attribution import content_tokens
from rag_desktop.core.gate import GateDecision
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.protocols import Generator
from rag_desktop.core.types import (
    Cancelled,
    CancelToken,
    Document,
    Hit,
    Progress,
)

if TYPE_CHECKING:  # annotations only
    from rag_desktop.app.retrieval import Retriever

log = logging.getLogger(__name__)

AUTO_KEY = "gate_auto"  # catalog meta: the background calibration's plan, progress and finished probes
GATE_KEY = "gate"  # catalog meta: the stored decision (GateDecision fields + how it was made)
RECALIBRATE_FRACTION = 0.2
RECALIBRATE_QUESTIONS = 20
# Re-calibrate after this many new labelled questions: one user-labelled probe replaces a judged
# one (the judge is what fails, docs/evaluation.md §1.2.1), so a few are worth a new decision.
RECALIBRATE_LABELS = 5
STATE_VERSION = 1
# What the removed ``calibrate --auto-label`` stored: a passage's own question labelled by that passage, the
# design the module docstring explains is wrong. It stored no fingerprint, so without this it would pass
# for the person's own labels and never be replaced.
PASSAGE_LABELS = "passage-written probes, source passage as answer"
NO_BACKGROUND_ENV = "RAG_DESKTOP_NO_BACKGROUND"  # "1": never start the background process (the test suite)
# how the probes of an automatic decision were labelled, stored with it (the heading and the CLI show it)
LABELS_USER = "your own questions, labelled by the documents their answers cited or you opened"
LABELS_ANSWER = "the local model's answer from the pooled documents; each document labelled by how much of " \
    "that answer it holds (probes: the titles' own questions, else questions on the subjects titles share)"


@dataclass(frozen=True)
class AutoGateConfig:
    # The cost is the local model's calls: per probe one to write it, and per disputed probe one answer
    # per pooled document (twice that when the answers say nothing and a quote is asked for);
    # docs/evaluation.md §1.2 measures it. Paper §4.6 uses n = 30 labelled probes; 12 is the smallest
    # count above MIN_PROBES_FOR_RELIABILITY with room for a probe the judge finds nothing for.
    n_probes: int = 12
    # The first document of each ranking is judged (2–3 documents a probe): MRR@10 then says which
    # ranking puts an answering document first, and where the others put it — the question the gate
    # asks. Deeper pools cost one model call per extra document.
    pool: int = 1
    seed: int = 0
    headings: int = 4  # short heading-like lines of the first chunk shown beside the title
    # The judge: the model *answers* the probe from the pooled documents, once per rotation of their
    # order; each document's label score is the share of the answer's own words (not the question's)
    # that it holds, weighed by the share of the question's words it holds (answer_support, on_topic:
    # an unrelated document the model borrowed words from is not relevant, docs/evaluation.md §1.2.5).
    # The model generates, it never judges, and the label is read off the text: measured on the sets'
    # own queries (docs/evaluation.md §1.2.4) asked to judge instead — yes/no, its likelihood, or which
    # of two — the embedded models follow the repeated words or the position. The scores are summed
    # over the rotations (0 to the pool's size); documents within answer_tie of the best are all
    # relevant. Our choice: 0.2 is a tenth of the answer's words over two answers, less than one word
    # of a short answer, so a document holding a word fewer still counts.
    answer_tie: float = 0.2
    answer_chars: int = 400  # of each pooled document shown to the answering call (3 fit in ~700 tokens)
    answer_tokens: int = 60  # a one-sentence answer; a longer one only adds words every document repeats
    # A sampled document's probe is written from the title's words that other documents also hold
    # (topic_words, at most topic_terms), never from the title itself: the question is then about a
    # subject several documents share and no document wrote it. Measured (docs/evaluation.md §1.2.5):
    # shown a whole title, the 1.5B asks about *that* document, which then answers it, so the probe
    # never meets the regime where documents compete.
    topic_terms: int = 4
    # Fewer shared words than this is no shared subject (a question on one common word asks nothing
    # the library is about): the title probe instead.
    topic_min: int = 2


# The answer judge's prompt: the pooled documents, numbered, and a request for the answer itself. Measured
# (docs/evaluation.md §1.2.4): asked *which* document answers, the 1.5B follows the position; asked for the
# answer, it writes the same fact in both orders, and only the answering document holds that fact.
_ANSWER_PROMPT = {
    "en": "Question: {q}\n\n{docs}\n\nAnswer the question in one short sentence, with the specific facts the "
    "documents give. Reply with the answer only.",
    "zh": "问题：{q}\n\n{docs}\n\n用一句简短的话回答问题，写出文档给出的具体信息。只回复答案。",
}
# The answer judge's second question, asked only when no answer held a word of its own that a document holds
# (the model restated the question, listed or copied the documents): an extractive choice is what a small model
# still makes when it will not write an answer, and a probe that would otherwise be a tie is the only place it
# runs, so it never overrules an answer. Our choice, measured in docs/evaluation.md §1.2.7.
_QUOTE_PROMPT = {
    "en": "Question: {q}\n\n{docs}\n\nCopy the one sentence from the documents above that best answers the "
    "question. Reply with that sentence only.",
    "zh": "问题：{q}\n\n{docs}\n\n从上面的文档中摘录一句最能回答问题的原文。只回复这句原文。",
}
_DOC_LABEL = {"en": "Document", "zh": "文档"}


# --------------------------------------------------------------------------- when to calibrate


def fingerprint(catalog: Catalog) -> list[str]:
    """The library's documents by content: sorted 16-hex prefixes of their sha256."""
    return sorted(d.sha256[:16] for d in catalog.documents())


def change_fraction(old: Sequence[str], new: Sequence[str]) -> float:
    """Share of documents added, removed or changed: |old △ new| / max(|old|, |new|)."""
    a, b = set(old), set(new)
    if not a and not b:
        return 0.0
    return len(a ^ b) / max(len(a), len(b))


def needs_calibration(catalog: Catalog) -> str | None:
    """Why this library needs a (re-)calibration, or None (module docstring)."""
    if catalog.count("documents") == 0:
        return None
    gate = catalog.get_json(GATE_KEY)
    if not gate:
        return "never calibrated"
    old = gate.get("fingerprint")
    if old is None:
        if gate.get("labels") == PASSAGE_LABELS:
            return "decided by the removed passage-written calibration"
        return None  # a decision from the wizard or typed probes: the user's own labels, kept
    frac = change_fraction(old, fingerprint(catalog))
    if frac >= RECALIBRATE_FRACTION:
        return f"{frac:.0%} of the documents changed since the last calibration"
    new_q = question_log(catalog)[0] - int(gate.get("questions_logged", 0))
    if new_q >= RECALIBRATE_QUESTIONS:
        return f"{new_q} new questions since the last calibration"
    new_l = int((catalog.get_json(QUESTION_LOG_KEY) or {}).get("n_labels", 0)) - int(gate.get("labels_logged", 0))
    if new_l >= RECALIBRATE_LABELS:
        return f"{new_l} new answers cited or documents opened since the last calibration"
    return None


# --------------------------------------------------------------------------- state


def load_state(catalog: Catalog) -> dict[str, Any] | None:
    st = catalog.get_json(AUTO_KEY)
    return st if isinstance(st, dict) and st.get("version") == STATE_VERSION else None


def _save_state(catalog: Catalog, state: dict[str, Any]) -> None:
    state["updated"] = time.time()
    with catalog.transaction():
        catalog.set_json(AUTO_KEY, state)


def request_cancel(catalog: Catalog) -> None:
    """Ask a running calibration (in this or another process) to stop after its current model call."""
    st = load_state(catalog)
    if st is not None and st.get("status") == "running":
        st["cancel"] = True
        _save_state(catalog, st)


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def progress(catalog: Catalog) -> dict[str, Any]:
    """What the library panel shows: status (idle, running, done, cancelled, failed), done/total."""
    st = load_state(catalog)
    if st is None:
        return {"status": "idle", "done": 0, "total": 0}
    status = st.get("status", "idle")
    if status == "running" and not _pid_alive(st.get("pid")):
        status = "interrupted"  # a crash or a kill: the next start resumes
    return {
        "status": status,
        "done": len(st.get("probes", [])),
        "total": len(st.get("plan", [])),
        "error": st.get("error", ""),
    }


def _same_question(question: str) -> str:
    """The key two probes share when they ask the same thing: as the question log keeps them, case aside."""
    return as_logged(question).casefold()


def best_scored(scores: dict[int, float], tie: float) -> list[int]:
    """The documents within ``tie`` of the best score, in the given order."""
    if not scores:
        return []
    top = max(scores.values())
    return [d for d, v in scores.items() if v >= top - tie]


def _labelled_by_score(scores: dict[int, float], tie: float) -> tuple[list[int], list[int], bool, dict[str, Any]]:
    """A scoring judge's labels: (judged, the best-scored within ``tie``, undecided = all of them
    tied, {"scores": …} for the probe's record)."""
    best = best_scored(scores, tie)
    kept = {"scores": {str(d): round(v, 3) for d, v in scores.items()}}
    return list(scores), best, len(best) == len(scores) > 1, kept


def support(answer: str, question: str, shown: Sequence[str]) -> list[float]:
    """Per shown document, the share of the answer's own content words that it holds.

    share(a, D) = |T(a) ∖ T(q) ∩ T(D)| / |T(a) ∖ T(q)|, T = ``core.attribution.content_tokens``
    (lower-cased words, single CJK characters, digits; no stopwords). The question's words are left
    out because every pooled document repeats them — a keyword-stuffed one most of all — so they
    would make any document "hold" the answer. An answer with no word of its own (a restatement of
    the question, "I don't know") gives every document 0: no document is preferred.
    """
    words = content_tokens(answer, frozenset(content_tokens(question)))
    return _held(words, shown) if words else [0.0] * len(shown)


def on_topic(question: str, shown: Sequence[str]) -> list[float]:
    """Per shown document, the share of the question's content words it holds (1.0 for a question
    with none): whether the document is about what was asked at all.

    on(q, D) = |T(q) ∩ T(D)| / |T(q)|, the same token sets as ``support``. The answer judge weighs
    each document's support by it (``answer_support``): relevance needs both the answer's words and the
    question's subject: shown a stuffed document and an unrelated one, a small model may answer with
    the unrelated one's words (docs/evaluation.md §1.2.5), which support alone would label relevant.
    A stuffed document holds the question's words and not the answer's, an unrelated one the
    reverse; the product gives both ≈ 0.
    """
    words = content_tokens(question)
    return _held(words, shown) if words else [1.0] * len(shown)


def _held(words: set[str], shown: Sequence[str]) -> list[float]:
    """Per shown text, the share of ``words`` (non-empty) its content tokens hold."""
    return [len(words & content_tokens(text)) / len(words) for text in shown]


def _answer_only(answer: str, lang: str, shown: Sequence[tuple[str, str]] = ()) -> str:
    """The answer without the prompt's document labels; "" when it names two or more documents, or
    when it copies one of the ``shown`` documents (title, shown text) from its title on.

    A small model may list the documents or summarise each in turn instead of answering
    (docs/evaluation.md §1.2.5): such a reply holds every document's own words, so it would prefer
    whichever has the longest title; it answers nothing, so it prefers no document. One label
    ("according to Document 2, …") is a citation: the label goes, the answer stays. It may also read
    the first document back from its title on (§1.2.6), which "supports" whichever stood first;
    ``copies`` tells that from an answer quoting a document's sentences, as an extractive answer does.
    """
    pattern = re.compile(rf"{_DOC_LABEL[lang]}\s*(\d+)", re.IGNORECASE)
    if len(set(pattern.findall(answer))) >= 2 or any(copies(answer, title, text) for title, text in shown):
        return ""
    return pattern.sub(" ", answer)


ECHO_CHARS = 12  # of the document's own text after its title, whitespace removed (about 3 English words)


def copies(answer: str, title: str, text: str) -> bool:
    """Whether ``answer`` reproduces the document from its title on: the title and the next
    ``ECHO_CHARS`` characters of the document's text as they stand (whitespace ignored).

    Our choice of test: an answer may name a title as its subject and may quote any sentence of the
    body; only a copy of the title *followed by the document's own next words* is the prompt read
    back. A title of under 4 characters is too short to tell.
    """
    head = "".join(title.split())
    if len(head) < 4:
        return False
    return (head + "".join(text.split()))[: len(head) + ECHO_CHARS] in "".join(answer.split())


def answer_support(gen: Generator, question: str, hits: Sequence[Hit], chars: int, max_tokens: int, seed: int,
                   cancel: CancelToken | None = None, quote: bool = False) -> tuple[list[float], list[str]]:
    """The answer judge: (support × on_topic per document, summed over the orders; the answers).

    The model answers from all pooled documents at once, once per rotation of their order (2 calls for
    two documents, 3 for three), so every document stands in every position once and a model that
    copies whatever stands first prefers none of them (reversing three would keep the middle one in
    the middle). Each document is scored on what the model was shown of it (title + the first
    ``chars`` characters). Our choice of judge and its limit, measured (docs/evaluation.md §1.2.4):
    a multi-hop question whose second hop the pool holds only as a look-alike (another person of the
    same film) gets a composed answer that the look-alike supports.

    ``quote``: when every document's total is 0 — no answer said anything a document holds — the same
    rotations are asked for the documents' one sentence that best answers (``_QUOTE_PROMPT``) and
    scored the same way; those replies follow the answers in the returned list.
    """
    lang = "zh" if detect_lang(question) == "zh" else "en"
    pairs = [(h.title, h.text[:chars]) for h in hits]
    shown = [f"{title}\n{text}" for title, text in pairs]
    n = len(hits)
    topical = on_topic(question, shown)

    def rotations(template: str) -> tuple[list[float], list[str]]:
        totals = [0.0] * n
        replies: list[str] = []
        for order in ([(start + k) % n for k in range(n)] for start in range(n)):
            docs = "\n\n".join(f"{_DOC_LABEL[lang]} {pos}: {shown[i]}" for pos, i in enumerate(order, start=1))
            reply = complete(gen, template.format(q=question, docs=docs), max_tokens, seed, cancel)
            replies.append(reply)
            # a document's share does not depend on where it stood
            shares = support(_answer_only(reply, lang, pairs), question, shown)
            totals = [t + share * on for t, share, on in zip(totals, shares, topical, strict=True)]
        return totals, replies

    totals, answers = rotations(_ANSWER_PROMPT[lang])
    if quote and not any(totals):
        totals, quoted = rotations(_QUOTE_PROMPT[lang])
        answers += quoted
    return totals, answers


@dataclass
class _Run:
    """What the steps of one calibration run share: the library, its retriever, the model, the settings,
    the stored state (updated in place) and the subjects' document frequency (computed once, if needed)."""

    cat: Catalog
    retriever: Retriever
    gen: Generator
    cfg: AutoGateConfig
    st: dict[str, Any]
    doc_frequency: Callable[[], dict[str, int]]
    cancel: CancelToken | None

    def check(self) -> None:
        """Raise Cancelled when the token is set or a cancel was requested through the catalog."""
        if self.cancel is not None and self.cancel.is_set:
            raise Cancelled()
        now = load_state(self.cat)
        if now is not None and now.get("cancel"):
            raise Cancelled()

    def called(self, n: int = 1) -> None:
        self.st["model_calls"] = self.st.get("model_calls", 0) + n


def _start_state(cat: Catalog, cfg: AutoGateConfig, fp: list[str], plan: Callable[[], list[int | str]],
                 clock: Callable[[], float]) -> dict[str, Any]:
    """The stored run to resume (same library, same settings, not finished), else a new one with its
    plan; marked running in this process, with any earlier cancel request cleared."""
    st = load_state(cat)
    resumable = (
        st is not None
        and st.get("fingerprint") == fp
        and st.get("config") == cfg.__dict__
        and st.get("status") in ("running", "cancelled", "failed")
    )
    if st is None or not resumable:
        st = {"version": STATE_VERSION, "fingerprint": fp, "config": dict(cfg.__dict__), "plan": plan(),
              "probes": [], "started": clock()}
    st.update(status="running", pid=os.getpid(), cancel=False, error="")
    _save_state(cat, st)
    return st


def _document_probe(run: _Run, doc: Document, i: int) -> tuple[str, str]:
    """A sampled document's probe and its source: the title's own question verbatim ("title-question", no
    model call); else a question on the subject the title shares with other documents ("topic") or, for a
    title that names no subject at all, on its body's shared keywords ("keywords"); else a question from
    the title and its headings ("title")."""
    cfg, r = run.cfg, run.retriever
    asks = title_question(doc.title)
    if asks:
        return asks, "title-question"
    surface = r.tokenizer.surface_form
    title_kw = r.query_keywords(doc.title, "doc")
    words = topic_words(doc.title, title_kw, run.doc_frequency(), surface, cfg.topic_terms)
    source = "topic"
    named = sum(1 for k in title_kw if k.weight > 0 and is_subject_word(surface(k.term)))
    if len(words) < cfg.topic_min and named < cfg.topic_min:
        # A title made of numbers and place words names no subject: its body's shared keywords do. A title
        # with subject words of its own, even unshared ones, still describes its document best.
        kd = run.cat.keywords("d", [doc.doc_id]).get(doc.doc_id, [])
        words = keyword_topic(kd, run.doc_frequency(), surface, cfg.topic_terms)
        source = "keywords"
    if len(words) >= cfg.topic_min:
        question = write_topic_probe(run.gen, words, doc.title, cfg.seed + i, run.cancel)
    else:
        chunks = run.cat.chunks_of(doc.doc_id)
        heads = heading_lines(chunks[0].text if chunks else "", doc.title, cfg.headings)
        question, source = write_probe(run.gen, doc.title, heads, cfg.seed + i, run.cancel), "title"
    run.called()
    return question, source


def _judge_by_answer(run: _Run, question: str, hits: dict[int, Hit],
                     i: int) -> tuple[list[int], list[int], bool, dict[str, Any]]:
    """(judged, relevant, undecided, what the probe's record keeps of the judge) of one disputed probe's
    pooled documents: the model answers from them (every rotation); the documents holding most of the
    answer's own words are the relevant set. All tied (every share 0 included): undecided."""
    run.check()
    pooled = list(hits.items())
    cfg = run.cfg
    shares, answers = answer_support(run.gen, question, [h for _d, h in pooled], cfg.answer_chars,
                                     cfg.answer_tokens, cfg.seed + 1000 * i, run.cancel, quote=True)
    run.called(len(answers))  # a call per rotation, quotes included
    held = {d: v for (d, _h), v in zip(pooled, shares, strict=True)}
    judged, best, undecided, kept = _labelled_by_score(held, cfg.answer_tie)
    return judged, best, undecided, kept | {"answers": answers}


def _ranked_probe(run: _Run, question: str, source: str, mine: list[int], i: int) -> dict[str, Any]:
    """The probe ranked by the three methods and labelled over the pool of their first documents: its record."""
    r = run.retriever
    ctx = r.context(question, "doc")
    ranked = {"baseline": ctx.baseline, "causal": r.rerank(ctx, "causal")[0], "hybrid": r.rerank(ctx, "hybrid")[0]}
    hits: dict[int, Hit] = {}
    for m in METHODS:
        for h in ranked[m].hits[: run.cfg.pool]:
            hits.setdefault(h.doc_id, h)
    tops = {tuple(h.doc_id for h in ranked[m].hits[: run.cfg.pool]) for m in METHODS}
    relevant: list[int] = []
    judged: list[int] = []
    undecided = False
    kept: dict[str, Any] = {}  # the judge's scores and answers
    if mine:
        # Labelled by the person (cited by an answer, or opened): no judge. The gate's MRR@10
        # then asks which ranking puts one of those documents first.
        relevant, judged = list(mine), list(mine)
    elif len(tops) == 1 and hits:
        # Undisputed: the three rankings share their pooled prefix, so whichever of those
        # documents is relevant, it has the same rank in all three: Δ = 0 for this probe
        # whatever a judge would say. Counted as such (a probe where re-ranking changes
        # nothing is evidence too), not judged: no model call.
        relevant = [next(iter(hits))]
    else:
        judged, relevant, undecided, kept = _judge_by_answer(run, question, hits, i)
    return {
        "question": question,
        "source": source,
        "rankings": {m: [h.doc_id for h in ranked[m].hits[:TOP]] for m in METHODS},
        "relevant": relevant,
        "judged": judged,
        "agreed": len(tops) == 1 and not mine,
        "undecided": undecided,
        "user_labelled": bool(mine),
        **kept,
    }


def _probe(run: _Run, entry: int | str, i: int) -> dict[str, Any]:
    """The record of the plan's probe ``entry``: a question the person asked (str) or a document (id)."""
    mine: list[int] = []  # the person's own labels for their own question (log_label)
    if isinstance(entry, str):
        question, source = entry, "asked"
        mine = user_labels(run.cat).get(entry, [])
    else:
        doc = run.cat.document(entry)
        if doc is None:  # removed meanwhile: the fingerprint check makes this rare
            return {"question": "", "rankings": {}, "relevant": [], "doc": entry}
        question, source = _document_probe(run, doc, i)
    if _same_question(question) in {_same_question(p["question"]) for p in run.st["probes"]}:
        # Asked already in this run (two titles sharing the same words give the same subject probe;
        # a person's question that a title also asks): counted once, so no question weighs double.
        return {"question": question, "source": source, "duplicate": True, "rankings": {}, "relevant": [],
                "judged": []}
    return _ranked_probe(run, question, source, mine, i)


def _gate_record(cat: Catalog, st: dict[str, Any], decision: GateDecision, fp: list[str],
                 clock: Callable[[], float]) -> dict[str, Any]:
    """The stored decision: the gate's fields, how its probes were labelled, and the counts
    ``needs_calibration`` compares against."""
    probes = st["probes"]
    n_user = sum(1 for p in probes if p.get("user_labelled"))
    record = decision.to_dict()
    record.update(
        labels=_labels_text(LABELS_ANSWER, n_user, len(probes)),
        calibrated_at=datetime.fromtimestamp(clock(), UTC).isoformat(timespec="seconds"),
        fingerprint=fp,
        n_judged=sum(len(p.get("judged", [])) for p in probes),
        n_agreed=sum(1 for p in probes if p.get("agreed")),
        # Disputed probes on which every pooled document held as much of the answers: counted as
        # ties (Δ = 0). When they are most of the disputed ones, a "neither" says the judge could
        # not tell, not that re-ranking hurts (describe() says so).
        n_undecided=sum(1 for p in probes if p.get("undecided")),
        model_calls=st.get("model_calls", 0),
        n_unlabelled=sum(1 for p in probes if not p["relevant"] and not p.get("duplicate")),
        n_duplicate=sum(1 for p in probes if p.get("duplicate")),
        n_asked=sum(1 for p in probes if p.get("source") == "asked"),
        questions_logged=question_log(cat)[0],
        n_user_labelled=n_user,
        labels_logged=int((cat.get_json(QUESTION_LOG_KEY) or {}).get("n_labels", 0)),
    )
    return record


def run_auto_gate(
    svc: Any,
    generator: Generator | None = None,
    config: AutoGateConfig | None = None,
    cancel: CancelToken | None = None,
    clock: Callable[[], float] = time.time,
) -> Iterator[Progress | GateDecision]:
    """Write, rank and judge the probes (resuming a stored run), then decide and store the gate.

    ``svc`` is the library's RagService. Yields Progress per probe and finally the GateDecision.
    Raises Cancelled when ``cancel`` is set or a cancel was requested through the catalog; the
    state stays resumable either way.
    """
    cfg = config or AutoGateConfig()
    cat: Catalog = svc.library.catalog
    r = svc.retriever()
    fp = fingerprint(cat)

    @functools.cache
    def term_counts() -> dict[int, dict[str, int]]:
        # once per run (a sum over every stored chunk), shared by the plan's stuffing signal and the
        # subject probes' document frequency, and only read when one of them needs it
        return document_term_counts(cat)

    st = _start_state(cat, cfg, fp, lambda: make_plan(cat, cfg.n_probes, cfg.seed,
                                                      lambda t: r.query_keywords(t, "doc"), term_counts), clock)
    t0 = time.monotonic()
    run = _Run(cat, r, generator or svc.runtime.generator(), cfg, st,
               functools.cache(lambda: document_frequency(term_counts())), cancel)
    try:
        plan: list[int | str] = st["plan"]
        for i in range(len(st["probes"]), len(plan)):
            run.check()
            yield Progress("calibrate", i, len(plan), f"probe {i + 1} of {len(plan)}")
            st["probes"].append(_probe(run, plan[i], i))
            # a cancel asked during this probe's model calls: saving first would overwrite the request
            run.check()
            _save_state(cat, st)
        decision = decide_from_state(st, cfg.seed)
    except Cancelled:
        st["status"] = "cancelled"
        _save_state(cat, st)
        raise
    except Exception as exc:
        st["status"] = "failed"
        st["error"] = f"{type(exc).__name__}: {exc}"
        _save_state(cat, st)
        raise
    st["status"] = "done"
    st["seconds"] = round(st.get("seconds", 0.0) + time.monotonic() - t0, 1)
    record = _gate_record(cat, st, decision, fp, clock)
    with cat.transaction():
        cat.set_json(GATE_KEY, record)
        st["updated"] = clock()
        cat.set_json(AUTO_KEY, st)
    yield Progress("calibrate", len(plan), len(plan), "done")
    yield decision


def _labels_text(method: str, n_user: int, n: int) -> str:
    """How the probes were labelled, for the stored decision (the heading and the CLI show it)."""
    if n_user == 0:
        return method
    if n_user == n:
        return LABELS_USER
    return f"{LABELS_USER} on {n_user} of {n} probes; the rest: {method}"


def decide_from_state(st: dict[str, Any], seed: int = 0) -> GateDecision:
    """The §4.6 gate over the stored probes (those with at least one judged-relevant document)."""
    items: list[ProbeCandidates] = []
    labels: list[frozenset[int]] = []
    for p in st["probes"]:
        if not p.get("rankings"):
            continue
        rankings = tuple((m, tuple(p["rankings"].get(m, []))) for m in METHODS)
        cands = tuple(CandidateDoc(d, "", "", ()) for d in p.get("judged", []))
        items.append(ProbeCandidates(Probe(p["question"], frozenset(), "generated"), rankings, cands))
        labels.append(frozenset(p["relevant"]))
    if not any(labels):
        raise ValueError(
            "automatic calibration: the local model judged no document relevant to any probe; "
            "calibrate with your own questions instead (Calibrate… in the app, or calibrate --probes-file)"
        )
    return score_labels(items, labels, seed=seed).decision


# --------------------------------------------------------------------------- background process


def start_background(library_dir: Path, catalog: Catalog, force: bool = False) -> int | None:
    """Start ``rag-desktop calibrate --auto`` for this library as a detached low-priority process.

    Returns its pid, or None when nothing needs doing or a live run is already on it.
    ``force``: calibrate even if ``needs_calibration`` says no (an interrupted run resumes anyway).
    """
    if os.environ.get(NO_BACKGROUND_ENV) == "1":
        return None
    st = load_state(catalog)
    if st is not None and st.get("status") == "running" and _pid_alive(st.get("pid")):
        return None
    interrupted = st is not None and st.get("status") == "running"
    if not (force or interrupted or needs_calibration(catalog)):
        return None
    cmd = [sys.executable, "-m", "rag_desktop", "calibrate", "--auto", "--library", str(library_dir)]
    log_path = library_dir / "calibration.log"
    with log_path.open("ab") as logf:
        proc = subprocess.Popen(  # our own interpreter and module, no shell
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            start_new_session=True,  # survives the terminal / the app closing; Ctrl-C is not forwarded
            preexec_fn=(lambda: os.nice(10)) if hasattr(os, "nice") else None,
        )
    return proc.pid


def undecided_probes(gate: dict[str, Any] | None) -> tuple[int, int] | None:
    """(undecided, disputed) when the judge could not tell the documents apart on most of the
    probes where the rankings disagreed, else None.

    Such a decision is ties, not evidence: "neither" then means "could not decide", and the
    column says so instead of "re-ranking would hurt, 100 % reliable" (the bootstrap over
    Δ = 0 ties is 100 % sure of nothing).
    """
    if not gate:
        return None
    disputed = int(gate.get("n_probes", 0)) - int(gate.get("n_agreed", 0))
    undecided = int(gate.get("n_undecided", 0))
    return (undecided, disputed) if disputed > 0 and 2 * undecided > disputed else None


def describe(gate: dict[str, Any] | None) -> str:
    """One line for logs and the CLI."""
    if not gate:
        return "not calibrated yet"
    text = (f"{gate.get('decision')} ({gate.get('n_probes')} probes, {float(gate.get('reliability', 0)):.0%} "
            f"reliable, labels: {gate.get('labels', 'typed or wizard')})")
    und = undecided_probes(gate)
    if und is not None:
        text += f"; the judge could not tell the documents apart on {und[0]} of {und[1]} disputed probes"
    return text


@dataclass(frozen=True)
class AutoCalibrationReport:
    """What ``calibrate --auto`` decided: the stored gate record, its probes and how long it took."""

    gate: dict[str, Any] | None
    probes: tuple[str, ...]
    seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.gate, "probes": list(self.probes), "seconds": self.seconds}


def cancel_auto(svc: Any) -> dict[str, Any]:
    """Ask a running automatic calibration of this library to stop; returns how far it got."""
    request_cancel(svc.library.catalog)
    return progress(svc.library.catalog)


def run_auto(svc: Any, n_probes: int | None = None,
             on_progress: Callable[[Progress], None] | None = None) -> AutoCalibrationReport:
    """``calibrate --auto`` (also the background process after an ingest); raises Cancelled when
    ``calibrate --cancel`` asked it to stop (a later run resumes)."""
    cfg = AutoGateConfig() if n_probes is None else AutoGateConfig(n_probes=n_probes)
    decision: GateDecision | None = None
    for ev in run_auto_gate(svc, config=cfg):
        if isinstance(ev, GateDecision):
            decision = ev
        elif on_progress is not None:
            on_progress(ev)
    assert decision is not None
    gate = svc.library.catalog.get_json("gate")
    state = load_state(svc.library.catalog) or {}
    return AutoCalibrationReport(gate, tuple(p["question"] for p in state.get("probes", [])), state.get("seconds"))
