"""The automatic gate against the decision from labelled queries (issue 13, docs/evaluation.md §1.2).

    PYTHONPATH=. python scripts/gate_agreement.py tests/data/diagnostic tests/data/qa_clean ... \
        [--probes 24] [--old] --json /tmp/gate_agreement.json

Per BEIR-format set: ingest the corpus into a fresh library (the real pipeline, as ``eval`` does);
the *labelled* decision is ``eval``'s gate (the set's queries and qrels as probes, MRR@10), and
``labelled_top_grade`` the same with only each query's highest-grade documents relevant;
the *automatic* decision is ``app.auto_gate.run_auto_gate`` with the local model (wall time
measured); with ``--old`` also the passage-written ``calibrate --auto-label`` gate for contrast.
Results are written after every set, so an interrupted run keeps what it measured.

With ``--ask N`` a person is simulated first: the set's first N queries are asked through the app's
own path (``RagService.compare``, then ``RagService.answer`` from the baseline and the causal column,
as *Generate answers* does), so the documents each answer cites become that question's labels
(``auto_gate.log_label``); the automatic gate then takes those questions as its first probes, with
no judge. The report says how often a question's cited documents include one the set's qrels call
relevant (the labels' precision), next to the decision.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_desktop.app import auto_gate
from rag_desktop.app.calibration import Probe, generate_probes, score_probes
from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import gate_on_queries, load_beir, rank_all, write_corpus_files
from rag_desktop.app.service import RagService
from rag_desktop.core.gate import GateDecision


def _row(d: GateDecision) -> dict[str, Any]:
    return {"decision": d.decision, "reliability": d.reliability, "n_probes": d.n_probes,
            "delta_causal": d.delta_causal, "delta_hybrid": d.delta_hybrid, "mean_baseline": d.mean_baseline}


def _probe_row(p: dict[str, Any], ids: dict[int, str], data: Any) -> dict[str, Any]:
    """One probe with corpus ids, and whether each judged document is relevant to any of the set's
    own queries (a hint for reading the judge, not a label: the probe is not one of those queries)."""
    qrel_docs = {d for q in data.qrels.values() for d, g in q.items() if g > 0}
    return {"question": p["question"], "source": p.get("source"), "agreed": p.get("agreed"),
            "top": {m: [ids.get(d, d) for d in r[:3]] for m, r in p.get("rankings", {}).items()},
            "judged": {ids.get(d, d): (d in p["relevant"], ids.get(d, d) in qrel_docs) for d in p.get("judged", [])},
            "scores": {ids.get(int(d), d): v for d, v in p.get("scores", {}).items()},
            "answers": p.get("answers", [])}


def _ask(svc: RagService, data: Any, mapping: dict[str, str], n: int) -> dict[str, Any]:
    """Ask the set's first n queries as a person would, with answers from two columns; what they cited."""
    ids = {d.doc_id: mapping.get(str(Path(d.path).resolve()), "?") for d in svc.library.catalog.documents()}
    rows, t0 = [], time.monotonic()
    for qid, q in [(i, t) for i, t in data.queries.items() if i in data.qrels][:n]:
        cmp = svc.compare(q)
        for ranked in (cmp.baseline, cmp.causal):
            for _ev in svc.answer(q, ranked):
                pass
        cited = auto_gate.user_labels(svc.library.catalog).get(" ".join(q.split()), [])
        rel = {d for d, g in data.qrels.get(qid, {}).items() if g > 0}
        rows.append({"qid": qid, "cited": [ids.get(d, d) for d in cited],
                     "hit": any(ids.get(d) in rel for d in cited),
                     "precision": (sum(ids.get(d) in rel for d in cited) / len(cited)) if cited else None})
    labelled = [r for r in rows if r["cited"]]
    return {"n": len(rows), "n_labelled": len(labelled), "seconds": round(time.monotonic() - t0, 1),
            "labels_hit": sum(r["hit"] for r in labelled), "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--probes", type=int, default=auto_gate.AutoGateConfig().n_probes)
    ap.add_argument("--old", action="store_true", help="also the passage-written auto-label gate")
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--generator", help="models.generator for the probes and the judge (default: the settings')")
    ap.add_argument("--no-cross-language", action="store_true",
                    help="rank the labelled queries in their own language only, as the automatic gate ranks its probes")
    ap.add_argument("--ask", type=int, default=0,
                    help="first ask the set's first N queries with answers: their citations become labels")
    ap.add_argument("--keep", type=Path, help="keep each set's library in KEEP/<set> and reuse it (no re-ingest)")
    args = ap.parse_args()
    settings = load_settings()
    if args.no_cross_language:
        settings = settings.replace("retrieval", cross_language=False)
    if args.generator:
        settings = settings.replace("models", generator=args.generator)
    results: dict[str, Any] = {}
    for folder in args.sets:
        data = load_beir(folder)
        with tempfile.TemporaryDirectory(prefix="rag-gate-") as tmp_dir:
            tmp = str(args.keep / folder.name) if args.keep else tmp_dir
            mapping = write_corpus_files(data, Path(tmp) / "corpus")
            svc = RagService(Path(tmp) / "library", settings)
            try:
                list(svc.ingest([Path(tmp) / "corpus"]))
                runs, _ = rank_all(svc, data, ["baseline", "causal", "hybrid"], 20, "doc", mapping)
                labelled = gate_on_queries(runs, data)
                # the stricter reference: only each query's highest-grade (answer-bearing) documents relevant
                labelled_top = gate_on_queries(runs, data, top_grade_only=True)
                asked = _ask(svc, data, mapping, args.ask) if args.ask else None
                t0 = time.monotonic()
                auto = [ev for ev in auto_gate.run_auto_gate(svc, config=auto_gate.AutoGateConfig(n_probes=args.probes))
                        if isinstance(ev, GateDecision)][-1]
                auto_s = time.monotonic() - t0
                st = auto_gate.load_state(svc.library.catalog) or {}
                ids = {d.doc_id: mapping.get(str(Path(d.path).resolve()), "?") for d in svc.library.catalog.documents()}
                row: dict[str, Any] = {
                    "labelled": None if labelled is None else _row(labelled),
                    "labelled_top_grade": None if labelled_top is None else _row(labelled_top),
                    "auto": _row(auto) | {"seconds": round(auto_s, 1),
                                          "n_judged": sum(len(p.get("judged", [])) for p in st.get("probes", [])),
                                          "n_unlabelled": sum(1 for p in st.get("probes", []) if not p["relevant"]),
                                          "model_calls": st.get("model_calls"),
                                          "probes": [_probe_row(p, ids, data) for p in st.get("probes", [])]},
                }
                if asked is not None:
                    row["asked"] = asked
                if args.old:
                    t0 = time.monotonic()
                    probes = [ev for ev in generate_probes(svc, args.probes, seed=0) if isinstance(ev, Probe)]
                    old = score_probes(svc, probes)
                    row["old_auto_label"] = _row(old) | {"seconds": round(time.monotonic() - t0, 1)}
            finally:
                svc.close()
        row["agrees"] = labelled is not None and auto.decision == labelled.decision
        results[folder.name] = row
        print(folder.name, json.dumps({k: v for k, v in row.items() if k != "auto"}), "auto:",
              json.dumps({k: v for k, v in row["auto"].items() if k != "probes"}), flush=True)
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
