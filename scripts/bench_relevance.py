#!/usr/bin/env python3
"""What the relevance check costs the first answer token (core.abstain.MIN_QUESTION_LIFT).

Asks each question of a QA set (default: tests/data/demo_qa over resources/demo) as the window's first
column does (``RagService.answer`` on the comparison's first column), with the app's default settings and
the embedded generator, twice, the order alternating from one question to the next:

* ``checked`` — this build: before the answer, the prompt without passages and the answer prompt up to
  its question are read and the question scored (app.abstention.relevance); the answer keeps what the
  second read;
* ``unchecked`` — ``generation.check_relevance = false``: the answer reads its prompt alone.

Each run starts from the cache as the window leaves it between questions (the fixed prefix's saved state,
no kept answer), and times the seconds to the first visible token, or to "not in your documents".

    .venv/bin/python scripts/bench_relevance.py --json relevance.json
"""

from __future__ import annotations

import bench_common as bc

bc.pin_threads(2)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402


def first_token(svc: Any, question: str, checked: bool) -> dict[str, Any]:
    """Seconds from the call to the first visible token of the first column's answer (or to its abstention)."""
    from rag_desktop.core.types import Answer, GenEvent, GenEventKind

    base = svc.settings
    svc.settings = base.replace("generation", check_relevance=checked)
    svc._written = None  # nothing kept from the run before
    svc.runtime.generator()._cache.forget()  # the prefix's saved state only, as between two questions
    try:
        comp = svc.compare(question, translate=False)
        ranked = comp.answer_list(comp.first_column)
        t0 = time.perf_counter()
        for ev in svc.answer(question, ranked, cancel=None):
            if isinstance(ev, GenEvent) and ev.kind == GenEventKind.TOKEN and ev.text.strip():
                return {"s": round(time.perf_counter() - t0, 2), "abstained": ""}
            if isinstance(ev, Answer):
                return {"s": round(time.perf_counter() - t0, 2),
                        "abstained": ev.abstention.reason if ev.abstained and ev.abstention else ""}
        return {"s": round(time.perf_counter() - t0, 2), "abstained": "?"}
    finally:
        svc.settings = base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bc.qa_arguments(ap)
    args = ap.parse_args()

    machine = bc.Machine()
    bc.header("bench_relevance: the relevance check before the first token", machine, args)
    t_all = time.perf_counter()
    svc, questions = bc.qa_service(args)
    rows: list[dict[str, Any]] = []
    try:
        list(svc.prepare_generator())  # as the window does at launch
        for i, q in enumerate(questions):
            runs = {}
            for checked in ((True, False) if i % 2 == 0 else (False, True)):
                runs[checked] = first_token(svc, q, checked)
            rows.append({"question": q[:32], "checked s": runs[True]["s"], "unchecked s": runs[False]["s"],
                         "abstained": runs[True]["abstained"] or "-"})
            print("   ", rows[-1], flush=True)
        print(bc.table(rows, ["question", "checked s", "unchecked s", "abstained"]))
        answered = [r for r in rows if r["abstained"] == "-"]
        ratio = statistics.median(r["checked s"] / r["unchecked s"] for r in answered) if answered else float("nan")
        extra = statistics.median(r["checked s"] - r["unchecked s"] for r in answered) if answered else float("nan")
        print(f"\nfirst token, checked / unchecked (answered questions): median {ratio:.3f}, "
              f"median +{extra:.2f} s")
        bc.finish({"rows": rows, "ratio": ratio, "extra_s": extra}, machine, t_all, ["llama_cpp_python"], args.json)
    finally:
        svc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
