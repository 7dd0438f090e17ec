#!/usr/bin/env python3
"""What reading the question's first answer prompt while it is typed saves the wait after Enter
(app.read_ahead, ``generation.read_ahead``).

Asks each question of a QA set (default: tests/data/demo_qa over resources/demo) as the window's first
column does, with the app's default settings and the embedded generator, three ways, the order rotating
from one question to the next:

* ``none`` — nothing read ahead (the person pressed Enter without a pause, or the setting is off);
* ``whole`` — the whole question read ahead first (a pause before Enter long enough for it: its seconds are
  reported as ``ahead s``);
* ``3/4`` — the first three quarters of the question's characters read ahead (the last pause came before
  its last words), then the whole question asked.

Each run starts from the cache as the window leaves it between questions (the fixed prefix's saved state,
no prompt set aside, no kept answer) and times Enter → the first visible token: the ranking and the answer
(``RagService.compare`` then ``RagService.answer``), or → "not in your documents". The texts of the three
runs are compared: a read ahead must not change them.

    .venv/bin/python scripts/bench_read_ahead.py --json read_ahead.json
"""

from __future__ import annotations

import bench_common as bc

bc.pin_threads(2)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

WAYS = ("none", "whole", "3/4")


def asked(svc: Any, question: str, way: str) -> dict[str, Any]:
    """One way: the read ahead (untimed against Enter), then Enter → first token, and the answer's text."""
    from rag_desktop.app.question_flow import QuestionFlow
    from rag_desktop.core.types import Answer, GenEvent, GenEventKind

    svc._written = []  # nothing kept from the run before
    cache = svc.runtime.generator()._cache
    cache.forget()  # the prefix's saved state only, as between two questions
    cache.spare = None
    ahead_s, ahead_tokens = 0.0, 0
    if way != "none":
        typed = question if way == "whole" else question[: max(1, len(question) * 3 // 4)]
        t = time.perf_counter()
        *_, ahead_tokens = QuestionFlow(svc, typed).read_ahead()  # its columns, then the tokens read
        ahead_s = time.perf_counter() - t
    t0 = time.perf_counter()
    comp = svc.compare(question, translate=False)
    ranked = comp.answer_list(comp.first_column)
    first, parts, abstained = None, [], ""
    for ev in svc.answer(question, ranked, cancel=None):
        if isinstance(ev, GenEvent) and ev.kind == GenEventKind.TOKEN:
            if first is None and ev.text.strip():
                first = time.perf_counter() - t0
            parts.append(ev.text)
        if isinstance(ev, Answer) and ev.abstained and ev.abstention is not None:
            abstained = ev.abstention.reason
    if first is None:
        first = time.perf_counter() - t0
    return {"s": round(first, 2), "ahead_s": round(ahead_s, 2), "ahead_tokens": ahead_tokens,
            "text": "".join(parts).strip(), "abstained": abstained}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bc.qa_arguments(ap)
    args, machine, t_all, svc, questions = bc.start_qa(
        ap, lambda a: "bench_read_ahead: the first answer prompt read while the question is typed")
    rows: list[dict[str, Any]] = []
    try:
        list(svc.prepare_generator())  # as the window does at launch
        for i, q in enumerate(questions):
            order = WAYS[i % 3:] + WAYS[: i % 3]
            runs = {way: asked(svc, q, way) for way in order}
            same = len({r["text"] for r in runs.values()}) == 1
            rows.append({"question": q[:32], "none s": runs["none"]["s"], "whole s": runs["whole"]["s"],
                         "3/4 s": runs["3/4"]["s"], "ahead s": runs["whole"]["ahead_s"],
                         "ahead tokens": runs["whole"]["ahead_tokens"],
                         "3/4 ahead tokens": runs["3/4"]["ahead_tokens"],
                         "abstained": runs["none"]["abstained"] or "-", "same text": "yes" if same else "NO"})
            print("   ", rows[-1], flush=True)
        cols = ["question", "none s", "whole s", "3/4 s", "ahead s", "ahead tokens", "3/4 ahead tokens", "abstained",
                "same text"]
        print(bc.table(rows, cols))
        summary = {}
        for way in ("whole", "3/4"):
            key = f"{way} s"
            summary[way] = {"median_s": statistics.median(r[key] for r in rows),
                            "median_ratio": statistics.median(r[key] / r["none s"] for r in rows),
                            "under_10s": sum(r[key] <= 10 for r in rows)}
        summary["none"] = {"median_s": statistics.median(r["none s"] for r in rows),
                           "under_10s": sum(r["none s"] <= 10 for r in rows)}
        for way, s in summary.items():
            print(f"{way}: first token median {s['median_s']:.2f} s"
                  + (f", {s['median_ratio']:.3f}× of none" if "median_ratio" in s else "")
                  + f"; ≤ 10 s on {s['under_10s']} of {len(rows)}")
        print(f"same text every way: {sum(r['same text'] == 'yes' for r in rows)} of {len(rows)}")
        bc.finish({"rows": rows, "summary": summary}, machine, t_all, ["llama_cpp_python"], args.json)
    finally:
        svc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
