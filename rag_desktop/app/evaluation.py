"""``rag-desktop eval`` (retrieval, BEIR format) and ``eval-qa`` (answers, EM/F1).

The corpus goes through the real ingest pipeline (each BEIR document becomes a
text file: title, blank line, text), so what is measured is what the app does.
Metrics come from ir-measures (which agrees with trec_eval); the rank of the
first relevant document and of the stuffing documents come from core.metrics.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_desktop.app.config import load_settings
from rag_desktop.app.crosslang import CrossStatus
from rag_desktop.app.retrieval import variant_names
from rag_desktop.app.service import RagService
from rag_desktop.core import metrics
from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.fusion import fuse
from rag_desktop.core.gate import GateDecision, calibrate
from rag_desktop.core.types import Progress, RankedList

ALL_METHODS = ("baseline", "cross_encoder", *variant_names())
# What ``eval`` ranks when no --methods is given (the CLI passes nothing then).
DEFAULT_METHODS = ("baseline", "cross_encoder", "causal_exact", "causal", "causal_fb", "hybrid")


class DataError(RagError, ValueError):
    """The evaluation data is not in the expected BEIR layout; the message says which file and line."""

    kind = ErrorKind.DATA


@dataclass(frozen=True)
class BeirData:
    corpus: dict[str, tuple[str, str]]  # _id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, float]]
    stuffing: dict[str, set[str]]


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise DataError(f"{path} is missing")
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{n}: not JSON ({exc.msg})") from exc


def _tsv(path: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            parts = line.rstrip("\n").split("\t")
            if n == 1 and parts[0] == "query-id":
                continue
            if len(parts) < 3:
                raise DataError(f"{path}:{n}: expected query-id, corpus-id, score separated by tabs")
            out.setdefault(parts[0], {})[parts[1]] = float(parts[2])
    return out


def load_beir(folder: Path) -> BeirData:
    corpus = {
        str(d["_id"]): (str(d.get("title", "")), str(d.get("text", ""))) for d in read_jsonl(folder / "corpus.jsonl")
    }
    queries = {str(d["_id"]): str(d["text"]) for d in read_jsonl(folder / "queries.jsonl")}
    qrels_path = folder / "qrels" / "test.tsv"
    if not qrels_path.is_file():
        raise DataError(f"{qrels_path} is missing")
    qrels = _tsv(qrels_path)
    stuffing_path = folder / "qrels" / "stuffing.tsv"
    stuffing = {q: set(d) for q, d in _tsv(stuffing_path).items()} if stuffing_path.is_file() else {}
    for q, rel in qrels.items():
        unknown = [d for d in rel if d not in corpus]
        if unknown:
            raise DataError(f"{qrels_path}: query {q} names documents not in corpus.jsonl: {unknown[:3]}")
    return BeirData(corpus, queries, qrels, stuffing)


def _safe_name(doc_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", doc_id)[:100]


def write_corpus_files(data: BeirData, folder: Path) -> dict[str, str]:
    """One .txt per document; returns file path -> corpus id."""
    folder.mkdir(parents=True, exist_ok=True)
    mapping: dict[str, str] = {}
    for i, (doc_id, (title, text)) in enumerate(sorted(data.corpus.items())):
        p = folder / f"{i:06d}_{_safe_name(doc_id)}.txt"
        body = f"{title}\n\n{text}" if title else text
        if not p.exists() or p.read_text(encoding="utf-8") != body:
            p.write_text(body, encoding="utf-8")
        mapping[str(p.resolve())] = doc_id
    return mapping


def doc_ranking(ranked: RankedList, path_to_id: dict[str, str]) -> list[str]:
    """Corpus ids in rank order; at chunk level a document takes its best chunk's place."""
    out: list[str] = []
    seen: set[str] = set()
    for h in ranked.hits:
        d = path_to_id.get(str(Path(h.path).resolve()))
        if d is not None and d not in seen:
            seen.add(d)
            out.append(d)
    return out


def evaluate_rankings(
    runs: dict[str, dict[str, list[str]]], data: BeirData, k: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, Any]]]]:
    """Aggregate metrics per method (ir-measures) and per-query ranks."""
    import ir_measures
    from ir_measures import RR, P, nDCG

    qrels = [ir_measures.Qrel(q, d, int(s)) for q, rel in data.qrels.items() for d, s in rel.items()]
    table: dict[str, dict[str, float]] = {}
    per_query: dict[str, dict[str, dict[str, Any]]] = {}
    missing = k + 1  # a relevant document outside the window counts as rank k+1 (stated in docs)
    for method, run in runs.items():
        scored = [
            ir_measures.ScoredDoc(q, d, float(len(docs) - i)) for q, docs in run.items() for i, d in enumerate(docs)
        ]
        agg = ir_measures.calc_aggregate([nDCG @ 10, P @ 5, RR @ 10], qrels, scored)
        first, stuff = [], []
        pq: dict[str, dict[str, Any]] = {}
        for q, docs in run.items():
            rel = data.qrels.get(q, {})
            fr = metrics.first_relevant_rank(docs, rel)
            first.append(fr)
            top_grade = max(rel.values()) if rel else 0
            targets = [d for d, s in rel.items() if s == top_grade]
            target_rank = min((metrics.rank_of(docs, d) or missing for d in targets), default=None)
            s_ranks = [metrics.rank_of(docs, d) or missing for d in sorted(data.stuffing.get(q, ()))]
            stuff.extend(s_ranks)
            pq[q] = {
                "first_relevant_rank": fr,
                "target_rank": target_rank,
                "stuffing_ranks": s_ranks,
                "top10": docs[:10],
            }
        row = {
            "nDCG@10": float(agg[nDCG @ 10]),
            "P@5": float(agg[P @ 5]),
            "MRR@10": float(agg[RR @ 10]),
            "mean_first_relevant_rank": metrics.mean_rank(first, missing_rank=missing),
            "mean_target_rank": metrics.mean_rank([v["target_rank"] for v in pq.values()], missing_rank=missing),
        }
        if data.stuffing:
            row["mean_stuffing_rank"] = sum(stuff) / len(stuff) if stuff else float("nan")
        table[method] = row
        per_query[method] = pq
    return table, per_query


@dataclass(frozen=True)
class EvalOptions:
    """What ``rag-desktop eval`` was asked for; ``library`` None: a temporary library."""

    data: Path
    methods: tuple[str, ...] = DEFAULT_METHODS
    k: int = 20
    level: str = "doc"
    keywords: str | None = None
    library: Path | None = None
    # Questions across languages: None keeps retrieval.cross_language from settings.
    cross_language: bool | None = None


@dataclass(frozen=True)
class EvalReport:
    """The measurements of one retrieval evaluation; the CLI prints them and writes ``to_json()``."""

    table: dict[str, dict[str, float]]
    per_query: dict[str, dict[str, dict[str, Any]]]
    notes: tuple[str, ...]
    gate: GateDecision | None
    config: dict[str, Any]
    # query id -> the question's other-language search: status, translation, seconds
    translations: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "methods": self.table,
            "per_query": self.per_query,
            "notes": list(self.notes),
            "gate": None if self.gate is None else self.gate.to_dict(),
            "config": self.config,
            "translations": self.translations,
        }


def run_eval(opts: EvalOptions, on_progress: Callable[[Progress], None] | None = None) -> EvalReport:
    """Ingest the BEIR corpus, rank every query under each method and measure; ``on_progress``
    hears the ingest's progress events."""
    data = load_beir(opts.data)
    methods = list(opts.methods)
    unknown = [m for m in methods if m not in ALL_METHODS]
    if unknown:
        raise DataError(f"unknown method(s) {unknown}; choose from {', '.join(ALL_METHODS)}")
    settings = load_settings()
    if opts.keywords:
        settings = settings.replace("retrieval", keyword_variant=opts.keywords)
    if opts.cross_language is not None:
        settings = settings.replace("retrieval", cross_language=opts.cross_language)
    translations: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="rag-eval-") as tmp:
        lib_dir = opts.library or Path(tmp) / "library"
        files = Path(tmp) / "corpus"
        mapping = write_corpus_files(data, files)
        svc = RagService(Path(lib_dir), settings)
        try:
            t0 = time.monotonic()
            for ev in svc.ingest([files]):
                if isinstance(ev, Progress) and on_progress is not None:
                    on_progress(ev)
            ingest_s = time.monotonic() - t0
            runs, notes = rank_all(svc, data, methods, opts.k, opts.level, mapping, translations)
        finally:
            svc.close()
    table, per_query = evaluate_rankings(runs, data, opts.k)
    config = {
        "k": opts.k,
        "level": opts.level,
        "keywords": settings.retrieval.keyword_variant,
        "tau": settings.retrieval.tau,
        "ingest_seconds": round(ingest_s, 2),
        "cross_language": settings.retrieval.cross_language,
    }
    return EvalReport(table, per_query, tuple(notes), gate_on_queries(runs, data), config, translations)


def rank_all(
    svc: RagService, data: BeirData, methods: list[str], k: int, level: str, mapping: dict[str, str],
    translations: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, dict[str, list[str]]], list[str]]:
    """Every query under every method, each column fused across languages as RagService.compare
    fuses it (retrieval.cross_language); ``translations`` receives each query's translation."""
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in methods}
    notes: list[str] = []
    r = svc.retriever()
    have_ce = svc.runtime.has_cross_encoder()
    if "cross_encoder" in methods and not have_ce:
        notes.append("cross_encoder skipped: no reranker model configured (models.reranker)")
        del runs["cross_encoder"]
    for qid, text in sorted(data.queries.items()):
        if qid not in data.qrels:
            continue
        ctxs, cross = svc.query_contexts(text, level, k)
        if translations is not None and cross.status != CrossStatus.OFF:
            translations[qid] = {"status": str(cross.status), "translated": cross.translated,
                                 "seconds": round(cross.seconds, 3), "note": cross.note}
        for m in list(runs):
            lists: list[RankedList] = []
            for ctx in ctxs:
                if m == "baseline":
                    lists.append(ctx.baseline)
                elif m == "cross_encoder":
                    lists.append(r.cross_encode(ctx, svc.runtime.scorer()))
                else:
                    ranked, diag = r.rerank(ctx, m)
                    lists.append(ranked)
                    for w in diag.warnings:
                        note = f"{m}: {w}"
                        if note not in notes:
                            notes.append(note)
            runs[m][qid] = doc_ranking(fuse(lists, k).ranked, mapping)
    tau, source = r.tau()
    notes.append(f"tau = {tau:.3f} ({source})")
    return runs, notes


def gate_on_queries(runs: dict[str, dict[str, list[str]]], data: BeirData,
                    top_grade_only: bool = False) -> GateDecision | None:
    """The calibration gate (§4.6) with these queries as the labelled probes (needs all three orders).

    ``top_grade_only``: a query's relevant documents are those of its highest grade only (the
    answer-bearing target of a graded set such as the diagnostic one), not every grade > 0 — the
    stricter reference the automatic gate's answer judge corresponds to (docs/evaluation.md §1.2.7).
    """
    if not {"baseline", "causal", "hybrid"} <= set(runs):
        return None
    qids = sorted(runs["baseline"])
    if len(qids) < 2:
        return None

    def relevant(q: str) -> dict[str, float]:
        rel = data.qrels.get(q, {})
        if not (top_grade_only and rel):
            return rel
        top = max(rel.values())
        return {d: s for d, s in rel.items() if s == top}

    per = {
        m: [metrics.reciprocal_rank_at_k(runs[m][q], relevant(q), 10) for q in qids]
        for m in ("baseline", "causal", "hybrid")
    }
    return calibrate(per["baseline"], per["causal"], per["hybrid"], metric="MRR@10", seed=0)
