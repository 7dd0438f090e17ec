#!/usr/bin/env python3
"""What a step before the first answer token costs it: the relevance check (core.abstain.MIN_QUESTION_LIFT), or
asking the other language's documents where the passages are about something else (app.asked_across).

Asks each question of a QA set (default: tests/data/demo_qa over resources/demo) as the window's first
column does (``RagService.answer`` on the comparison's first column), with the app's default settings and
the embedded generator, twice, the order alternating from one question to the next:

* ``checked`` — this build: before the answer, the prompt without passages and the answer prompt up to
  its question are read and the question scored (app.abstention.relevance); the answer keeps what the
  second read;
* ``unchecked`` — ``generation.check_relevance = false``: the answer reads its prompt alone.

``--toggle ask_other_language`` compares ``generation.ask_other_language`` on and off instead (the check on both
times): asked across languages, the first token comes after the question's translation and the other
language's prompt; without, "not in your documents" comes after the first prompt.

Each run starts from the cache as the window leaves it between questions (the fixed prefix's saved state,
no kept answer), and times the seconds to the first visible token, or to "not in your documents".

    .venv/bin/python scripts/bench_relevance.py --json relevance.json
    .venv/bin/python scripts/bench_relevance.py --toggle ask_other_language --data tests/data/crosslang \
        --cache-dir /tmp/rag_desktop_bench/crosslang --json across.json
"""

from __future__ import annotations

import bench_common as bc

bc.pin_threads(2)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402


def first_token(svc: Any, question: str, on: bool, toggle: str = "check_relevance") -> dict[str, Any]:
    """Seconds from the call to the first visible token of the first column's answer (or to its abstention),
    with the generation setting ``toggle`` ``on`` or off."""
    from rag_desktop.core.types import Answer, GenEvent, GenEventKind

    base = svc.settings
    svc.settings = base.replace("generation", **{toggle: on})
    svc._question_translations.clear()  # each run translates as the question's first asking does
    svc._written = []  # nothing kept from the run before
    svc.runtime.generator()._cache.forget()  # the prefix's saved state only, as between two questions
    try:
        comp = svc.compare(question, translate=False)
        ranked = comp.answer_list(comp.first_column)
        t0 = time.perf_counter()
        asked = ""
        for ev in svc.answer(question, ranked, cancel=None):
            if getattr(ev, "stage", "") == "asked_across":
                asked = str(ev.message)
            if isinstance(ev, GenEvent) and ev.kind == GenEventKind.TOKEN and ev.text.strip():
                return {"s": round(time.perf_counter() - t0, 2), "abstained": "", "asked_as": asked}
            if isinstance(ev, Answer):
                return {"s": round(time.perf_counter() - t0, 2), "asked_as": ev.asked_as,
                        "abstained": ev.abstention.reason if ev.abstained and ev.abstention else ""}
        return {"s": round(time.perf_counter() - t0, 2), "abstained": "?", "asked_as": asked}
    finally:
        svc.settings = base


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bc.qa_arguments(ap)
    ap.add_argument("--toggle", choices=("check_relevance", "ask_other_language"), default="check_relevance",
                    help="the generation setting compared on and off")
    args, machine, t_all, svc, questions = bc.start_qa(
        ap, lambda a: f"bench_relevance: generation.{a.toggle} before the first token")
    rows: list[dict[str, Any]] = []
    try:
        list(svc.prepare_generator())  # as the window does at launch
        for i, q in enumerate(questions):
            runs = {}
            for checked in ((True, False) if i % 2 == 0 else (False, True)):
                runs[checked] = first_token(svc, q, checked, args.toggle)
            rows.append({"question": q[:32], "checked s": runs[True]["s"], "unchecked s": runs[False]["s"],
                         "abstained": runs[True]["abstained"] or "-", "off: abstained": runs[False]["abstained"] or "-",
                         "asked across": "yes" if runs[True]["asked_as"] else "-"})
            print("   ", rows[-1], flush=True)
        print(bc.table(rows, ["question", "checked s", "unchecked s", "abstained", "off: abstained", "asked across"]))
        answered = [r for r in rows if r["abstained"] == "-" and r["off: abstained"] == "-"]
        ratio = statistics.median(r["checked s"] / r["unchecked s"] for r in answered) if answered else float("nan")
        extra = statistics.median(r["checked s"] - r["unchecked s"] for r in answered) if answered else float("nan")
        print(f"\nfirst token, checked / unchecked (answered questions): median {ratio:.3f}, "
              f"median +{extra:.2f} s")
        crossed = [r for r in rows if r["asked across"] == "yes"]
        if crossed:  # --toggle ask_other_language: off, these end "not in your documents"
            print(f"asked across languages: {len(crossed)} of {len(rows)}; on: first token or verdict median "
                  f"{statistics.median(r['checked s'] for r in crossed):.2f} s; off: verdict median "
                  f"{statistics.median(r['unchecked s'] for r in crossed):.2f} s")
        bc.finish({"rows": rows, "ratio": ratio, "extra_s": extra}, machine, t_all, ["llama_cpp_python"], args.json)
    finally:
        svc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
