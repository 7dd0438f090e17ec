#!/usr/bin/env python3
"""The library's own calibration gate at library scale (docs/benchmarks.md, "The calibration gate").

The gate reads every document's stored keyword set once (``app.self_gate``: no model, no
embedding); its time grows with the library. This times it on seeded libraries of statute-like
articles titled by their number alone ("第946条"), at several sizes, with the ingest of the same
library as the reference: **gate seconds per ingest second** (the gate runs right after an ingest),
and the process's peak RSS.

The articles are random combinations of a few dozen legal phrases, so most of them repeat each
other's key terms: their *decision* measures nothing (no regime was built in), only the time.

    PYTHONPATH=. .venv/bin/python scripts/bench_gate.py [--docs 500 1000 3000] [--work /tmp/bench_gate] \\
        [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
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


def _gate_into(got: list[Any], retriever: Any) -> None:
    from rag_desktop.app import self_gate

    got.append(self_gate.self_calibrate(retriever, "-"))


def main() -> int:
    bc.pin_threads(1)
    from rag_desktop.app import self_gate  # after pinning the threads

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[500, 1000, 3000])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_gate"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    machine = bc.Machine()
    print(machine.line(), flush=True)
    rows: list[dict[str, Any]] = []
    for n in sorted(args.docs):
        svc, ingest_s = library(args.work, n)
        try:
            got: list[self_gate.GateRecord | None] = []
            gate = functools.partial(_gate_into, got, svc.retriever())
            s = bc.interleaved({"gate": gate}, warmup=1, repeats=args.repeats)["gate"]
            rec = got[-1]
            row = {"docs": n, "ingest_s": None if ingest_s is None else round(ingest_s, 1), "gate_s": s.median,
                   # the gate against the ingest it follows (only when this run built the library)
                   "gate_per_ingest": None if not ingest_s else round(s.median / ingest_s, 5),
                   "echo_share": None if rec is None else rec.echo_share,
                   "decision": None if rec is None else rec.decision,
                   "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
        finally:
            svc.close()
    machine.finish(["faiss-cpu", "jieba"])
    print(bc.table(rows, ["docs", "ingest_s", "gate_s", "gate_per_ingest", "echo_share", "decision"]))
    print(machine.line())
    if (warn := machine.busy_warning()) is not None:
        print(warn)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine.__dict__, "rows": rows}, ensure_ascii=False, indent=2),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
