"""``rag-desktop eval-qa``: standard RAG vs CF-RAG (and its ablations) on a QA set.

Data: ``questions.jsonl`` (``_id``, ``question``, ``answers``) and ``corpus.jsonl``
(``_id``, ``title``, ``text``), a passage pool with distractors. The pool is
ingested through the real pipeline (chunk level). Scores: strict EM (SQuAD
normalisation), containment EM (the CF-RAG authors' lenient match, reported
separately and labelled), token F1, and mean latency per method; the JSON report
adds per question, for the CF-RAG methods, how many counterfactuals were parsed,
valid and kept, the hypotheses and the decision (:func:`cf_digest`).

``passages`` is standard RAG reading answer passages (paragraph windows of the top
chunks, with their locators) where ``standard`` reads the whole chunks; ``--docs FOLDER``
ingests a folder of real documents (PDF/Word/text) instead of ``corpus.jsonl`` (the demo QA
set, tests/data/demo_qa); ``--generator`` picks the model (``embedded`` = 1.5B,
``embedded-fast`` = 0.5B, or a GGUF path). Every answer also gets its citation precision
(the share of its ``[n]`` that point at a source holding a gold answer) and its time to first
token; the table has one row per method and one per method and question language.

Adversarial setting (paper 002): ``--distractors n`` adds, per question, n
passages built to be highly similar to the question while carrying no answer:
they restate the question's own words in several declarative frames. They are
built from templates (no model), so the setting is reproducible.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from rag_desktop.app.config import load_settings
from rag_desktop.app.crosslang import CrossLanguage
from rag_desktop.app.evaluation import BeirData, DataError, read_jsonl, write_corpus_files
from rag_desktop.app.retrieval import answer_list
from rag_desktop.app.service import RagService
from rag_desktop.core import prompting
from rag_desktop.core.cfrag import cfrag_result
from rag_desktop.core.cfrag.types import CFTrace
from rag_desktop.core.fusion import fuse
from rag_desktop.core.generation import ReplayGenerator
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.qa_metrics import QAScores, citation_precision, mean_scores, score_answer
from rag_desktop.core.settings import Settings, SynthesisPrompt
from rag_desktop.core.types import Answer, GenEvent, GenEventKind, Progress, RankedList

# cfrag_synth_<style>: the full method with cfrag.synthesis_prompt = <style> (not paper ablations:
# variants of the one step the paper leaves unspecified, paired with cfrag through the replay).
SYNTH_METHODS = tuple(f"cfrag_synth_{style}" for style in get_args(SynthesisPrompt))
QA_METHODS = ("standard", "passages", "cfrag", "cfrag_no_cf", "cfrag_no_div", "cfrag_no_causal", *SYNTH_METHODS)
# What ``eval-qa`` runs when no --methods is given (the CLI passes nothing then).
DEFAULT_QA_METHODS = ("standard", "cfrag", "cfrag_no_cf", "cfrag_no_div", "cfrag_no_causal")

_FRAMES = {
    "en": [
        "Many readers ask: {q} This question comes up often in discussions of the topic.",
        'A frequently asked question is "{q}" Commentators have debated it at length without settling it.',
        "Regarding {q} — opinions differ, and the sources quoted here do not say.",
        "{q} is a popular quiz question; this note only lists it among other trivia.",
    ],
    "zh": [
        "很多读者都在问：{q}这个问题在相关讨论中经常出现。",
        "常见问题之一是“{q}”评论者对此讨论了很久，但没有定论。",
        "关于“{q}”，各方看法不一，本文引用的材料并没有给出答案。",
        "“{q}”是一道常见的问答题，本文只是把它列在其他趣闻之中。",
    ],
}


def distractor_passages(qid: str, question: str, n: int) -> dict[str, tuple[str, str]]:
    lang = "zh" if detect_lang(question) == "zh" else "en"
    frames = _FRAMES[lang]
    out = {}
    for i in range(n):
        text = frames[i % len(frames)].format(q=question.strip())
        if i >= len(frames):
            text += f" ({i + 1})"
        out[f"adv-{qid}-{i}"] = (question.strip()[:60], text)
    return out


def _settings_for(method: str, base: Settings) -> Settings:
    if method in ("standard", "passages"):
        return base  # RagService.answer(passages=…) decides; the same settings keep the caches
    if method == "cfrag_no_cf":
        return base.replace("cfrag", use_counterfactuals=False)
    if method == "cfrag_no_div":
        return base.replace("cfrag", use_division=False)
    if method == "cfrag_no_causal":
        return base.replace("cfrag", lam=0.0)
    if method in SYNTH_METHODS:
        return base.replace("cfrag", synthesis_prompt=method.removeprefix("cfrag_synth_"))
    return base


@dataclass(frozen=True)
class QAEvalOptions:
    """What ``rag-desktop eval-qa`` was asked for. ``json_out``: the report file, rewritten after
    every answer so an interrupted run keeps what it measured (a checkpoint, hence written here)."""

    data: Path
    methods: tuple[str, ...] = DEFAULT_QA_METHODS
    limit: int | None = None
    distractors: int = 0
    docs: Path | None = None
    generator: str | None = None
    json_out: Path | None = None
    # None keeps retrieval.cross_language from settings (as ``eval``'s EvalOptions).
    cross_language: bool | None = None
    # None keeps cfrag.seed and generation.seed; a number sets both (a run per seed gives the spread).
    seed: int | None = None
    # CF-RAG's generator calls through a ReplayGenerator (core.generation): an ablation replays the
    # full method's identical requests, so it is paired with it and costs only what it changes.
    # False: every call decoded again, so each ablation's latency is its own.
    replay: bool = True
    # A file that keeps the replay memory across runs (JSON lines, one request and its result
    # each, tagged with the model): read before the first answer, rewritten after every answer.
    # A later run that changes one step (the synthesis prompt) then decodes only the calls that
    # step changed, paired with the earlier run. Its latencies are then not its own either.
    replay_store: Path | None = None
    # ``passages`` is asked as the app asks (the question as typed, the column's top
    # prompting.ANSWER_SOURCES hits); True asks it as ``standard`` is (asked_question), the protocol of
    # the runs recorded before this option.
    passages_as_standard: bool = False


@dataclass(frozen=True)
class AnswerTimed:
    """One answer done (for a progress line): the method, how many of its answers are done, of how many."""

    method: str
    done: int
    total: int
    seconds: float


@dataclass(frozen=True)
class QAEvalReport:
    """One row per method (and per method and question language): scores and latencies."""

    table: dict[str, dict[str, float]]


def run_qa_eval(opts: QAEvalOptions, on_progress: Callable[[Progress], None] | None = None,
                on_answer: Callable[[AnswerTimed], None] | None = None) -> QAEvalReport:
    """Ingest the passage pool (or ``opts.docs``), answer every question with each method, score."""
    questions = list(read_jsonl(opts.data / "questions.jsonl"))
    if opts.limit:
        questions = questions[: opts.limit]
    docs = opts.docs
    if docs is not None and not docs.is_dir():
        raise DataError(f"--docs {docs}: not a folder of documents")
    corpus = {} if docs is not None else {
        str(d["_id"]): (str(d.get("title", "")), str(d.get("text", ""))) for d in read_jsonl(opts.data / "corpus.jsonl")
    }
    for q in questions:
        if not q.get("answers"):
            raise DataError(f"question {q.get('_id')} has no answers")
        if opts.distractors:
            corpus.update(distractor_passages(str(q["_id"]), str(q["question"]), opts.distractors))
    methods = list(opts.methods)
    bad = [m for m in methods if m not in QA_METHODS]
    if bad:
        raise DataError(f"unknown method(s) {bad}; choose from {', '.join(QA_METHODS)}")
    base = load_settings().replace("retrieval", level="chunk")
    if opts.generator:
        base = base.replace("models", generator=opts.generator)
    if opts.cross_language is not None:
        base = base.replace("retrieval", cross_language=opts.cross_language)
    if opts.seed is not None:
        base = base.replace("cfrag", seed=opts.seed).replace("generation", seed=opts.seed)
    meta = {"distractors": opts.distractors, "seeds": {"cfrag": base.cfrag.seed, "generation": base.generation.seed},
            "replay": opts.replay, "passages_as_standard": opts.passages_as_standard}
    results: dict[str, list[tuple[str, QAScores, float, str, dict[str, Any]]]] = {m: [] for m in methods}
    with tempfile.TemporaryDirectory(prefix="rag-qa-") as tmp:
        files = Path(tmp) / "corpus"
        if docs is not None:
            files = docs
        else:
            write_corpus_files(BeirData(corpus, {}, {}, {}), files)
        svc = RagService(Path(tmp) / "library", base)
        try:
            for ev in svc.ingest([files]):
                if isinstance(ev, Progress) and on_progress is not None:
                    on_progress(ev)
            if any(m in ("standard", "passages") for m in methods):
                svc.runtime.generator()  # load the model before the clock runs: not part of any answer
            replay = opts.replay and any(m.startswith("cfrag") for m in methods)
            memory: ReplayGenerator | None = None
            if replay:
                memory = svc.runtime.wrap_generator(ReplayGenerator)
                if opts.replay_store is not None:
                    meta["replay_store_taken"] = _absorb_store(memory, opts.replay_store)
            # standard and passages differ only in what the model reads: run them question by
            # question (paired), so an interrupted run still compares them on the same questions.
            order = ([(m, q) for q in questions for m in methods] if set(methods) <= {"standard", "passages"}
                     else [(m, q) for m in methods for q in questions])
            # CF-RAG starts from the standard answer beside it (cfrag.keep_standard): the row of
            # ``passages`` (else ``standard``) for the same question, whose seconds count in its time.
            anchor_method = next((m for m in ("passages", "standard") if m in methods), None)
            written: dict[str, tuple[Answer, float]] = {}
            for method, q in order:
                wanted = _settings_for(method, base)
                if wanted != svc.settings:  # a new Retriever (and its caches) only when settings change
                    svc.update_settings(wanted)
                qid = str(q["_id"])
                anchor = written.get(qid) if method.startswith("cfrag") and svc.settings.cfrag.keep_standard else None
                t0 = time.perf_counter()
                pred, extra = _predict(svc, method, str(q["question"]), anchor[0] if anchor else None,
                                       as_standard=opts.passages_as_standard)
                dt = time.perf_counter() - t0
                answer_obj = extra.pop("answer", None)
                if method == anchor_method and isinstance(answer_obj, Answer):
                    written[qid] = (answer_obj, dt)
                if anchor is not None:
                    extra["standard_s"] = round(anchor[1], 2)
                    dt += anchor[1]
                if replay and "cf_steps" in extra:
                    # calls answered from the full method's run: this row's latency is not all its own
                    extra["replayed_calls"] = sum(st["replayed"] for st in extra["cf_steps"])
                golds = list(q["answers"])
                extra["lang"] = str(q.get("lang") or ("zh" if detect_lang(str(q["question"])) == "zh" else "en"))
                if "source_texts" in extra:
                    extra["citation_precision"] = citation_precision(pred, extra.pop("source_texts"), golds)
                results[method].append((str(q["_id"]), score_answer(pred, golds), dt, pred, extra))
                if on_answer is not None:
                    on_answer(AnswerTimed(method, len(results[method]), len(questions), dt))
                if memory is not None and opts.replay_store is not None:
                    _write_store(opts.replay_store, memory.export())
                if opts.json_out:  # after every answer, so an interrupted run keeps what it measured
                    _write_json(opts.json_out, _table(results), results, meta, partial=True)
        finally:
            svc.close()
    table = _table(results)
    if opts.json_out:
        _write_json(opts.json_out, table, results, meta, partial=False)
    return QAEvalReport(table)


_Rows = dict[str, list[tuple[str, QAScores, float, str, dict[str, Any]]]]


def _table(results: _Rows) -> dict[str, dict[str, float]]:
    """One row per method, then one per method and question language ("standard/zh")."""
    table = {}
    for m, all_rows in results.items():
        langs = sorted({str(r[4].get("lang", "")) for r in all_rows} - {""})
        for name, rows in [(m, all_rows), *((f"{m}/{lg}", [r for r in all_rows if r[4].get("lang") == lg])
                                             for lg in (langs if len(langs) > 1 else []))]:
            if not rows:
                continue
            s = mean_scores([r[1] for r in rows])
            precisions = [float(r[4]["citation_precision"]) for r in rows
                          if r[4].get("citation_precision") is not None]
            ttfts = [float(r[4]["ttft_s"]) for r in rows if r[4].get("ttft_s") is not None]
            row = {
                **{k: float(v) for k, v in dataclasses.asdict(s).items()},
                "mean_latency_s": sum(r[2] for r in rows) / max(1, len(rows)),
            }
            if precisions or any("citation_precision" in r[4] for r in rows):
                # mean over the answers that cite anything; cited_share says how many did
                row["citation_precision"] = sum(precisions) / len(precisions) if precisions else float("nan")
                row["cited_share"] = len(precisions) / len(rows)
                # answers with a citation the app added after generation (core.attribution): the
                # rest of cited_share is the model's own
                row["matched_share"] = sum(1 for r in rows if r[4].get("matched_citations")) / len(rows)
            if ttfts:
                row["mean_ttft_s"] = sum(ttfts) / len(ttfts)
            if any("abstained" in r[4] for r in rows):  # "not in your documents", before or after the answer
                row["abstained_share"] = sum(1 for r in rows if r[4].get("abstained")) / len(rows)
            judged = [r for r in rows if "doubted" in r[4]]
            if judged:
                # The passages' judgement (generation.judge_passages, docs/evaluation.md §5.1): the
                # answers it doubts, and of the right ones (containment) those "abstain" would not write.
                right = [r for r in judged if r[1].containment >= 1.0]
                row["doubted_share"] = sum(1 for r in judged if r[4]["doubted"]) / len(judged)
                row["right_doubted_share"] = (sum(1 for r in right if r[4]["doubted"]) / len(right) if right
                                              else float("nan"))
            table[name] = row
    return table


def _absorb_store(memory: ReplayGenerator, path: Path) -> int:
    """Load a replay store into ``memory``; a missing file is an empty store (this run makes it)."""
    if not path.exists():
        return 0
    try:
        return memory.absorb(list(read_jsonl(path)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataError(f"--replay-store {path}: not a replay store ({exc!r})") from exc


def _write_store(path: Path, records: list[dict[str, Any]]) -> None:
    _replace_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def _replace_text(path: Path, text: str) -> None:
    """Write ``text`` beside ``path`` and rename it into place: an interrupted run never leaves a
    half-written report or store."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _write_json(path: Path, table: dict[str, dict[str, float]], results: _Rows, meta: dict[str, Any],
                *, partial: bool) -> None:
    out: dict[str, Any] = {
        "methods": table,
        **meta,
        "complete": not partial,
        "per_question": {
            m: [{"id": r[0], "prediction": r[3], **dataclasses.asdict(r[1]), "latency_s": r[2], **r[4]}
                for r in rows]
            for m, rows in results.items()
        },
    }
    _replace_text(path, json.dumps(out, ensure_ascii=False, indent=2))


SHORT_ANSWER = {"zh": " 请用简短的词语回答。", "en": " Answer in a few words."}


@dataclass(frozen=True)
class Asked:
    """What the model is asked for one question: the text and how many of the column's top hits it reads."""

    question: str
    n_sources: int


def asked_question(method: str, question: str, settings: Settings, as_standard: bool = False) -> Asked:
    """What the model is asked for ``question`` under ``method`` (``standard`` or ``passages``).

    ``standard`` (whole chunks, the paper's baseline) asks for a few words from the top
    ``cfrag.evidence_per_hypothesis`` hits, so that strict EM and F1 compare with CF-RAG's short
    "answer" field read from as many. Tried and reverted: asking for "[n]" in that suffix as well made
    the 1.5B write whole sentences (EM 0 on the fixture's first answers) or list the sources' headers;
    so models often drop the [n] there (``cited_share``); score_answer ignores markers either way.
    ``passages`` is the app's answer path and is asked as the window asks: what the person typed, from
    the column's top prompting.ANSWER_SOURCES hits. With the suffix the 1.5B answered a Chinese manual's
    "复旦大学的学号一共有几位？" with a bare "11" (the gold is "11 位") where the app's answer is
    "复旦大学的学号一共有11位", and dropped its citations (docs/evaluation.md, "Real manuals").
    ``as_standard`` asks ``passages`` as ``standard`` is (the runs recorded before that change).
    """
    if method == "standard" or as_standard:
        return Asked(question + SHORT_ANSWER["zh" if detect_lang(question) == "zh" else "en"],
                     settings.cfrag.evidence_per_hypothesis)
    return Asked(question, prompting.ANSWER_SOURCES)


def answer_ranking(svc: RagService, question: str) -> tuple[RankedList, CrossLanguage]:
    """What ``standard`` and ``passages`` answer from: the baseline as the app ranks it. Across languages
    (retrieval.cross_language) the question's translation also retrieves, and the two rankings are fused
    as the columns are (core.fusion); with the keyword leg, as the app's answers read it."""
    ctxs, cross = svc.query_contexts(question, "chunk")
    ranked = fuse([c.baseline for c in ctxs], svc.settings.retrieval.k).ranked
    return answer_list(ranked, ctxs) or ranked, cross


def _predict(svc: RagService, method: str, question: str, standard: Answer | None = None,
             *, as_standard: bool = False) -> tuple[str, dict[str, Any]]:
    """The method's answer text and, for CF-RAG, a digest of its trace for the JSON report
    (``standard``: the standard answer CF-RAG starts from; standard RAG's Answer is ``extra["answer"]``)."""
    if method in ("standard", "passages"):
        ranked, cross = answer_ranking(svc, question)
        asked = asked_question(method, question, svc.settings, as_standard)
        answer: Answer | None = None
        t0 = time.perf_counter()
        ttft: float | None = None
        for ev in svc.answer(asked.question, ranked, n_sources=asked.n_sources, passages=method == "passages"):
            if isinstance(ev, Answer):
                answer = ev
            elif isinstance(ev, GenEvent) and ev.kind == GenEventKind.TOKEN and ttft is None and ev.text.strip():
                ttft = time.perf_counter() - t0
        if answer is None:
            return "", {}
        extra: dict[str, Any] = {"source_texts": [h.text for h in answer.sources], "ttft_s": ttft,
                                 "matched_citations": len(answer.matched),
                                 "dropped_citations": len(answer.dropped_citations),
                                 "unsupported": "unsupported" in answer.warnings,
                                 "doubted": "doubted" in answer.warnings,
                                 "sources": [f"{h.title} p.{h.page}" for h in answer.sources],
                                 "cross_language": str(cross.status), "translated_question": cross.translated,
                                 "translate_s": round(cross.seconds, 3), "answer": answer,
                                 "abstained": answer.abstention.reason if answer.abstention else "",
                                 "asked_as": answer.asked_as}
        # An answer said "not in your documents" after it was written (core.abstain.after_answer) is scored
        # as what the person is told, not as the text shown beside it for reference.
        return ("" if answer.abstained else answer.text), extra
    res = cfrag_result(svc.cfrag(question, standard=standard))
    return res.answer.text, cf_digest(res.trace)


def cf_digest(t: CFTrace) -> dict[str, Any]:
    """Per-question CF-RAG facts for eval-qa's JSON: how step 1 went and how it decided."""
    every = (*t.counterfactuals, *t.rejected_counterfactuals)
    return {
        "cf_parsed": len(every),
        "cf_valid": sum(1 for c in every if c.valid),
        "cf_kept": len(t.counterfactuals),
        "cf_kept_texts": [f"[{c.transformation}] {c.text}" for c in t.counterfactuals],
        "cf_rejections": [c.reason for c in t.rejected_counterfactuals],
        "hypotheses": [h.answer for h in t.hypotheses],
        # the arbitration's scores per hypothesis (Eq. Ψ = (1 − λ)·φ_coh + λ·φ_causal), so another
        # decision rule can be read off a run without decoding it again
        "psi": [round(h.psi, 4) for h in t.hypotheses],
        "phi_coh": [round(h.phi_coh, 4) for h in t.hypotheses],
        "phi_causal": [round(h.phi_causal, 4) for h in t.hypotheses],
        "decision": t.decision.kind,
        "standard_outcome": t.decision.standard.outcome if t.decision.standard else "",
        "standard_presence": round(t.decision.standard.presence, 3) if t.decision.standard else None,
        "agreement": t.decision.agreement,
        # where the question's time went ("know where the time goes"), per group of
        # generator calls in call order: what bench_llm's cfrag_steps reports, on eval-qa's questions
        "cf_steps": [{"step": u.step, "calls": u.calls, "prompt_tokens": u.prompt_tokens,
                      "cached_tokens": u.cached_tokens, "completion_tokens": u.completion_tokens,
                      "seconds": round(u.seconds, 2), "truncated": u.truncated, "replayed": u.replayed}
                     for u in t.generation],
    }
