"""The library's own gate against the decision from labelled queries (docs/evaluation.md, "The gate").

    PYTHONPATH=. python scripts/gate_agreement.py tests/data/diagnostic tests/data/qa_clean ... \
        [--level doc] --json /tmp/gate_agreement.json

Per BEIR-format set: ingest the corpus into a fresh library (the real pipeline, as ``eval`` does);
the *labelled* decision is ``eval``'s gate (the set's queries and qrels as probes, MRR@10, §4.6);
the *self* decision is ``app.self_gate`` (the share of documents that echo another's key terms; no
generator), with its wall time. Results are written after every set, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_desktop.app import self_gate
from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import gate_on_queries, load_beir, rank_all, write_corpus_files
from rag_desktop.app.service import RagService
from rag_desktop.core.gate import GateDecision


def _row(d: GateDecision) -> dict[str, Any]:
    return {"decision": d.decision, "reliability": round(d.reliability, 3), "n_probes": d.n_probes,
            "delta_causal": round(d.delta_causal, 3), "delta_hybrid": round(d.delta_hybrid, 3),
            "mean_baseline": round(d.mean_baseline, 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--level", default="doc", choices=("doc", "chunk"))
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    settings = load_settings().replace("retrieval", cross_language=False, level=args.level)
    results: dict[str, Any] = {}
    for folder in args.sets:
        data = load_beir(folder)
        with tempfile.TemporaryDirectory(prefix="rag-gate-") as tmp:
            mapping = write_corpus_files(data, Path(tmp) / "corpus")
            svc = RagService(Path(tmp) / "library", settings)
            try:
                t0 = time.monotonic()
                list(svc.ingest([Path(tmp) / "corpus"]))
                ingest_s = time.monotonic() - t0
                runs, _ = rank_all(svc, data, ["baseline", "causal", "hybrid"], 20, args.level, mapping)
                labelled = gate_on_queries(runs, data)
                labelled_top = gate_on_queries(runs, data, top_grade_only=True)
                t0, c0 = time.monotonic(), time.process_time()
                rec = self_gate.self_calibrate(svc.retriever(), "-")
                wall, cpu = time.monotonic() - t0, time.process_time() - c0
            finally:
                svc.close()
        row: dict[str, Any] = {
            "documents": len(data.corpus), "queries": len(data.qrels), "ingest_s": round(ingest_s, 1),
            "labelled": None if labelled is None else _row(labelled),
            "labelled_top_grade": None if labelled_top is None else _row(labelled_top),
            "self": None if rec is None else {"decision": rec.decision, "reliability": round(rec.reliability, 3),
                                              "documents": rec.n_probes, "echo_share": rec.echo_share,
                                              "seconds": round(wall, 2), "cpu_s": round(cpu, 2)},
            "load": os.getloadavg()[0],
        }
        row["agrees"] = labelled is not None and rec is not None and rec.decision == labelled.decision
        results[folder.name] = row
        print(folder.name, json.dumps(row), flush=True)
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
