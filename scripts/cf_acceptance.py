"""How many counterfactual questions survive validation V(q, q'), per question (CF-RAG step 1).

Runs only step 1 of CF-RAG (generation, closed-book answers, validation, Info ranking) with
the configured local models on a QA set (default: the bilingual fixture), for one or more
prompt modes ("batch": one call for all candidates, the original prompt; "per_type": one
short call per transformation), and prints per question the number of candidates parsed,
valid and kept (top N), plus the rejection reasons. Usage::

    .venv/bin/python scripts/cf_acceptance.py --modes batch,per_type --json /tmp/cf_acc.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import BeirData, read_jsonl, write_corpus_files
from rag_desktop.app.service import RagService
from rag_desktop.core.cfrag import CFTuning, explore_counterfactuals

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "qa_fixture"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=FIXTURE)
    ap.add_argument("--modes", default="batch,per_type")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--json", type=Path, default=None, dest="json_out")
    args = ap.parse_args()
    questions = list(read_jsonl(args.data / "questions.jsonl"))[: args.limit]
    corpus = {str(d["_id"]): (str(d.get("title", "")), str(d.get("text", "")))
              for d in read_jsonl(args.data / "corpus.jsonl")}
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    base = load_settings().replace("retrieval", level="chunk")
    out: dict[str, list[dict[str, object]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="rag-cfacc-") as tmp:
        files = Path(tmp) / "corpus"
        write_corpus_files(BeirData(corpus, {}, {}, {}), files)
        svc = RagService(Path(tmp) / "library", base)
        try:
            for _ in svc.ingest([files]):
                pass
            r = svc.retriever()
            c = svc.cfrag_settings()  # the thresholds RagService.cfrag uses
            gen = svc.runtime.generator()
            gen.load()
            for mode in modes:
                tuning = CFTuning(counterfactual_prompt=mode)  # type: ignore[arg-type]
                for q in questions:
                    text = str(q["question"])
                    qv = np.asarray(r.embedder.embed_queries([text]), dtype=np.float64)[0]
                    hits = r.baseline(qv, "chunk", c.retrieve_k, -1.0)
                    cen = (np.mean(np.asarray(r.embedder.embed_passages([h.text for h in hits])), axis=0)
                           if hits else None)
                    t0 = time.perf_counter()
                    kept, rejected, raw, warns = explore_counterfactuals(
                        text, q_vec=qv, context_centroid=cen, embedder=r.embedder, generator=gen,
                        settings=c, seed=c.seed, tuning=tuning)
                    dt = time.perf_counter() - t0
                    valid = [x for x in (*kept, *rejected) if x.valid]
                    row = {
                        "id": q["_id"], "question": text, "seconds": dt,
                        "parsed": len(kept) + len(rejected), "valid": len(valid), "kept": len(kept),
                        "kept_texts": [f"[{x.transformation}] {x.text}" for x in kept],
                        "rejected": [{"text": x.text, "transformation": x.transformation, "reason": x.reason}
                                     for x in rejected],
                        "raw": raw, "warnings": warns,
                    }
                    out[mode].append(row)
                    print(f"{mode} {q['_id']}: parsed {row['parsed']} valid {row['valid']} kept {row['kept']} "
                          f"({dt:.1f}s)", file=sys.stderr, flush=True)
        finally:
            svc.close()
    print(f"{'mode':>9} {'lang':>4} {'questions':>9} {'parsed/q':>9} {'valid/q':>8} {'kept/q':>7} "
          f"{'q with ≥1 kept':>14} {'s/q':>6}")
    for mode, rows in out.items():
        for lang in ("en", "zh", "all"):
            sel = [x for x in rows if lang == "all" or str(x["id"]).startswith(lang)]
            if not sel:
                continue
            n = len(sel)

            def mean(key: str, sel: list[dict[str, object]] = sel, n: int = n) -> float:
                return sum(float(x[key]) for x in sel) / n  # type: ignore[arg-type]

            print(f"{mode:>9} {lang:>4} {n:>9} {mean('parsed'):>9.2f} {mean('valid'):>8.2f} {mean('kept'):>7.2f} "
                  f"{sum(1 for x in sel if x['kept']):>14} {mean('seconds'):>6.1f}")
        reasons: collections.Counter[str] = collections.Counter()
        for x in rows:
            for rj in x["rejected"]:  # type: ignore[attr-defined]
                for part in str(rj["reason"]).split("; "):
                    reasons[part.split(" (")[0].split(":")[0].split(" 0.")[0][:60]] += 1
        print(f"  {mode} rejection reasons: " + "; ".join(f"{k} ×{v}" for k, v in reasons.most_common()))
    if args.json_out:
        args.json_out.write_text(json.dumps(out, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
