#!/usr/bin/env python3
"""The automatic calibration gate at library scale (docs/benchmarks.md §10).

The gate's model calls are fixed by the probe count; what grows with the library is the part
before them: the per-document term counts, the stuffing signal of every title, the plan, and
each probe's retrieval. This measures that part on seeded libraries of statute-like articles
titled by their number alone ("第946条": a title that names no subject, the case the probe writer
must handle), at several sizes, as a **ratio against one probe's model time**: how much of a
calibration the library's size costs. ``--full`` also runs the whole automatic calibration on the
largest library (``auto_gate.run_auto``, the embedded generator) and reports its wall time, its
probes and the process's peak RSS.

The articles are random combinations of legal phrases: their *decision* means nothing (no regime
was built in), only the time, the memory and whether the probes are distinct questions.

    PYTHONPATH=. .venv/bin/python scripts/bench_gate.py [--docs 500 1000 3000] [--full] \\
        [--work /tmp/bench_gate] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc  # must come first: it pins the thread count

if TYPE_CHECKING:
    from rag_desktop.app.service import RagService

SUBJECTS = ["用人单位", "劳动者", "承租人", "出租人", "债权人", "债务人", "当事人", "行为人", "监护人", "被告人",
            "消费者", "经营者"]
VERBS = ["应当", "可以", "不得", "有权", "应当依法"]
OBJECTS = ["支付赔偿金", "解除合同", "承担连带责任", "返还财产", "赔偿损失", "提起诉讼", "申请仲裁", "履行义务",
           "支付违约金", "停止侵害"]
CONDITIONS = ["因不可抗力不能履行合同的", "违反本法规定的", "造成他人损害的", "在试用期内的", "合同期满后",
              "经协商一致", "未按照约定", "无正当理由"]


def articles(n: int, seed: int = 0) -> dict[str, str]:
    """n seeded articles: file name → "第i条" line + 2–5 clauses."""
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        clauses = (f"{rng.choice(CONDITIONS)}，{rng.choice(SUBJECTS)}{rng.choice(VERBS)}{rng.choice(OBJECTS)}"
                   for _ in range(rng.randint(2, 5)))
        out[f"a{i:05d}.txt"] = f"第{i + 1}条\n" + "；".join(clauses) + "。"
    return out


def library(work: Path, n: int) -> tuple[RagService, float | None]:
    """The n-article library under ``work`` (built once, then reused); (service, ingest seconds or None)."""
    from rag_desktop.app.config import load_settings
    from rag_desktop.app.library import IngestReport
    from rag_desktop.app.service import RagService

    root = work / f"articles_{n}"
    lib = root / "library"
    if (root / "ready").exists():
        return RagService(lib, load_settings()), None
    shutil.rmtree(root, ignore_errors=True)
    folder = root / "docs"
    folder.mkdir(parents=True)
    for name, text in articles(n).items():
        (folder / name).write_text(text, encoding="utf-8")
    svc = RagService(lib, load_settings())
    t0 = time.perf_counter()
    last = None
    for ev in svc.ingest([folder]):
        last = ev
    took = time.perf_counter() - t0
    if not isinstance(last, IngestReport) or len(last.added) != n:
        raise SystemExit(f"ingest of {n} articles did not add them all: {last}")
    (root / "ready").write_text("", encoding="utf-8")
    return svc, took


def one_probe_model_seconds(svc: RagService, repeats: int) -> bc.Samples:
    """One probe's model work as the gate does it: write a topic probe, then answer it from two documents
    in both orders (the answer judge with a pool of two)."""
    from rag_desktop.app import auto_gate, gate_probes

    gen = svc.runtime.generator()
    r = svc.retriever()
    doc = svc.library.catalog.documents()[0]
    words = ["用人单位", "解除合同"]

    def run() -> None:
        q = gate_probes.write_topic_probe(gen, words, doc.title, 0)
        hits = r.context(q, "doc").baseline.hits[:2]
        auto_gate.answer_support(gen, q, hits, 400, 60, 0)

    return bc.interleaved({"one probe (model)": run}, warmup=1, repeats=repeats)["one probe (model)"]


def model_free(svc: RagService, repeats: int) -> dict[str, bc.Samples]:
    """The gate's library-size part: a new plan (term counts, stuffing signal, document frequency)
    and one probe's retrieval (baseline, causal and hybrid), timed interleaved."""
    from rag_desktop.app import gate_probes

    cat = svc.library.catalog
    r = svc.retriever()

    def plan() -> None:
        counts = gate_probes.document_term_counts(cat)
        gate_probes.make_plan(cat, 12, 0, lambda t: r.query_keywords(t, "doc"), lambda: counts)
        gate_probes.document_frequency(counts)

    def probe_retrieval() -> None:
        ctx = r.context("用人单位在什么情况下应当支付赔偿金？", "doc")
        r.rerank(ctx, "causal")
        r.rerank(ctx, "hybrid")

    return bc.interleaved({"plan": plan, "retrieval": probe_retrieval}, warmup=1, repeats=repeats)


def main() -> int:
    bc.pin_threads(1)
    from rag_desktop.app import auto_gate  # after pinning the threads

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[500, 1000, 3000])
    ap.add_argument("--full", action="store_true", help="also run the whole automatic calibration on the largest")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_gate"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    machine = bc.Machine()
    print(machine.line(), flush=True)
    rows: list[dict[str, Any]] = []
    probe_model: bc.Samples | None = None
    for n in sorted(args.docs):
        svc, ingest_s = library(args.work, n)
        try:
            s = model_free(svc, args.repeats)
            if probe_model is None:
                probe_model = one_probe_model_seconds(svc, args.repeats)
            row = {"docs": n, "ingest_s": None if ingest_s is None else round(ingest_s, 1),
                   "plan_s": s["plan"].median, "probe_retrieval_s": s["retrieval"].median,
                   "one_probe_model_s": probe_model.median,
                   # the library-size part of a 12-probe calibration against its model part
                   "size_share": (s["plan"].median + 12 * s["retrieval"].median)
                   / (s["plan"].median + 12 * (s["retrieval"].median + probe_model.median))}
            if args.full and n == max(args.docs):
                t0 = time.perf_counter()
                report = auto_gate.run_auto(svc)
                gate = report.gate or {}
                row["full"] = {"seconds": round(time.perf_counter() - t0, 1), "probes": list(report.probes),
                               "n_probes": gate.get("n_probes"), "n_duplicate": gate.get("n_duplicate"),
                               "model_calls": gate.get("model_calls"),
                               "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
        finally:
            svc.close()
    machine.finish(["faiss-cpu", "llama-cpp-python", "jieba"])
    print(bc.table(rows, ["docs", "ingest_s", "plan_s", "probe_retrieval_s", "one_probe_model_s", "size_share"]))
    print(machine.line())
    if (warn := machine.busy_warning()) is not None:
        print(warn)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine.__dict__, "rows": rows}, ensure_ascii=False, indent=2),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
