#!/usr/bin/env python3
"""What the app itself answers to demo questions 3–12, with no eval suffix.

``RagService.compare`` + ``RagService.answer`` over the baseline column, as the window runs them
(answer passages, cross-language fusion, matched citations, the app's own prompt and generator).
For each answer: containment of a gold answer, the model's own ``[n]`` and the matched ones, and
whether each cited source holds a gold answer (normalised containment, as citation precision).

    .venv/bin/python scripts/demo_app_answers.py [--library DIR] [--json OUT]

The library defaults to the one scripts/passage_prompt_sizes.py builds from resources/demo.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rag_desktop.app.service import RagService
from rag_desktop.core.citations import cited_numbers
from rag_desktop.core.qa_metrics import score_answer
from rag_desktop.core.settings import Settings
from rag_desktop.core.text import normalize_answer
from rag_desktop.core.types import Answer, GenEvent, GenEventKind

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--library", type=Path, default=Path("/tmp/rag_desktop_prompt_sizes/lib"))
    ap.add_argument("--data", type=Path, default=ROOT / "tests/data/demo_qa/questions.jsonl")
    ap.add_argument("--json", type=Path, default=Path("demo_app_answers.json"))
    args = ap.parse_args()
    svc = RagService(args.library, Settings().replace("retrieval", level="chunk"))
    if not svc.library.catalog.documents():
        for _ in svc.ingest([ROOT / "resources/demo"]):
            pass
    questions = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = []
    for q in (q for q in questions if not q["_id"].startswith("demo-n")):  # 3–12; n1–n3 are neighbours
        t0 = time.perf_counter()
        comp = svc.compare(q["question"], level="chunk")
        ttft = None
        ans: Answer | None = None
        for ev in svc.answer(q["question"], comp.baseline):
            if isinstance(ev, GenEvent) and ev.kind == GenEventKind.TOKEN and ttft is None and ev.text.strip():
                ttft = time.perf_counter() - t0
            elif isinstance(ev, Answer):
                ans = ev
        assert ans is not None
        matched = [n for _a, _b, n in ans.matched]
        golds = [normalize_answer(g) for g in q["answers"]]
        holds = {n: any(g in normalize_answer(ans.sources[n - 1].text) for g in golds)
                 for n in sorted(set(cited_numbers(ans.text))) if 0 < n <= len(ans.sources)}
        rows.append({"id": q["_id"], "lang": q["lang"], "answer": ans.text,
                     "containment": score_answer(ans.text, q["answers"]).containment,
                     "model_cited": sorted(set(cited_numbers(ans.text)) - set(matched)), "matched": matched,
                     "gold_in_cited": holds, "warnings": list(ans.warnings),
                     "where": [f"{h.title} p.{h.page}" for h in ans.sources],
                     "ttft_s": ttft, "total_s": time.perf_counter() - t0})
        print(json.dumps(rows[-1], ensure_ascii=False)[:300], flush=True)
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    right = sum(r["containment"] for r in rows)
    cited = sum(1 for r in rows if r["gold_in_cited"])
    print(f"right {right:.0f}/{len(rows)}; answers citing anything {cited}/{len(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
