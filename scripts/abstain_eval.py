"""How often the answer path says "not in your documents" (core.abstain; docs/evaluation.md).

    PYTHONPATH=. python scripts/abstain_eval.py --json /tmp/abstain.json [--split tune|heldout|all]

It calls ``RagService.abstention`` on the list the Baseline column's answer reads, exactly as
``RagService.answer`` does before it would load the model; a question about to abstain in a mixed-language
library is translated first (the one model call, timed in ``seconds``). Each row of :data:`RUNS` asks one set of
questions of one library; ``answerable`` says whether that library holds their answers (a set asked
of another set's library is about another subject). The held-out rows were frozen before the rule
was written and are reported once, separately.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import read_jsonl
from rag_desktop.app.service import RagService
from rag_desktop.core.lang import detect_lang

DATA = Path("tests/data")


@dataclass(frozen=True)
class Run:
    library: str  # a key of LIBRARIES
    questions: str  # a key of QUESTIONS
    answerable: bool
    split: str  # "tune" or "heldout"


def _lines(path: Path) -> list[str]:
    return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]


QUESTIONS = {
    "demo_qa": lambda: [str(r["question"]) for r in read_jsonl(DATA / "demo_qa/questions.jsonl")],
    "demo_questions": lambda: [str(r["text"]) for r in read_jsonl(DATA / "demo_questions/queries.jsonl")],
    "qa_fixture": lambda: [str(r["question"]) for r in read_jsonl(DATA / "qa_fixture/questions.jsonl")],
    "diagnostic": lambda: [str(r["text"]) for r in read_jsonl(DATA / "diagnostic/queries.jsonl")],
    "crosslang": lambda: [str(r["question"]) for r in read_jsonl(DATA / "crosslang/questions.jsonl")],
    "crosslang_fixture": lambda: _lines(DATA / "abstain/crosslang_fixture.txt"),
    "crosslang_fixture_names": lambda: _lines(DATA / "abstain/crosslang_fixture_names.txt"),
    "complete": lambda: _lines(DATA / "standalone/complete.txt"),
}

RUNS = (
    Run("demo", "demo_qa", True, "tune"),
    Run("demo", "qa_fixture", False, "tune"),
    Run("qa_fixture", "qa_fixture", True, "tune"),
    Run("qa_fixture", "demo_qa", False, "tune"),
    Run("qa_fixture", "diagnostic", False, "tune"),
    Run("diagnostic", "diagnostic", True, "tune"),
    Run("demo", "demo_questions", True, "heldout"),
    Run("demo", "crosslang", True, "heldout"),
    Run("qa_fixture", "complete", False, "heldout"),
    Run("qa_fixture", "crosslang_fixture", True, "heldout"),
    Run("qa_fixture", "crosslang_fixture_names", True, "heldout"),
)


def _corpus_folder(name: str, tmp: Path) -> Path:
    """The library's documents: the demo's PDFs and Word files, or a corpus.jsonl as one .txt each."""
    if name == "demo":
        return Path("resources/demo")
    out = tmp / f"docs-{name}"
    out.mkdir(parents=True, exist_ok=True)
    for r in read_jsonl(DATA / name / "corpus.jsonl"):
        body = f"{r.get('title', '')}\n\n{r['text']}".strip()
        (out / f"{r['_id']}.txt").write_text(body + "\n", encoding="utf-8")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--split", default="all", choices=("tune", "heldout", "all"))
    args = ap.parse_args()
    runs = [r for r in RUNS if args.split in ("all", r.split)]
    settings = load_settings().replace("retrieval", cross_language=False)
    out: dict[str, Any] = {"load": os.getloadavg()[0], "runs": []}
    with tempfile.TemporaryDirectory(prefix="rag-abstain-") as tmp_s:
        tmp = Path(tmp_s)
        for lib in sorted({r.library for r in runs}):
            svc = RagService(tmp / f"lib-{lib}", settings)
            try:
                list(svc.ingest([_corpus_folder(lib, tmp)]))
                for run in (r for r in runs if r.library == lib):
                    t0 = time.perf_counter()
                    rows = []
                    for q in QUESTIONS[run.questions]():
                        ranked = svc.compare(q, translate=False).answer_list("baseline")
                        t1 = time.perf_counter()
                        a = svc.abstention(q, ranked)
                        rows.append({"q": q, "lang": detect_lang(q), **a.as_json(),
                                     "seconds": round(time.perf_counter() - t1, 3)})
                    n_abs = sum(1 for r in rows if r["abstained"])
                    summary = {"library": lib, "questions": run.questions, "answerable": run.answerable,
                               "split": run.split, "n": len(rows), "abstained": n_abs,
                               "rate": round(n_abs / max(1, len(rows)), 3),
                               "translated": sum(1 for r in rows if r["translated"]),
                               "mean_s": round((time.perf_counter() - t0) / max(1, len(rows)), 2),
                               "max_s": max((r["seconds"] for r in rows), default=0.0)}
                    print(json.dumps(summary, ensure_ascii=False), flush=True)
                    out["runs"].append({**summary, "rows": rows})
            finally:
                svc.close()
    for split in ("tune", "heldout"):
        for answerable in (True, False):
            sel = [r for r in out["runs"] if r["split"] == split and r["answerable"] == answerable]
            if sel:
                n = sum(r["n"] for r in sel)
                k = sum(r["abstained"] for r in sel)
                what = "answers lost (abstained on answerable)" if answerable else "abstained on other subjects"
                print(f"{split}: {what}: {k}/{n} = {k / n:.3f}")
    args.json.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
