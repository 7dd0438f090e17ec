"""The passage check (core.cfrag.anchor.unsupported) scored on answers already written, without the model.

    PYTHONPATH=. python scripts/passage_check_eval.py --eval-qa REC.json --data D [--docs DOCS] [--library DIR]
    PYTHONPATH=. python scripts/passage_check_eval.py --abstain REC.json --libraries DIR

``eval-qa --json`` and ``abstain_eval.py --answers N --json`` record each answer's text and the verdicts
of the day (``unsupported``, ``doubted``). This reads the passages each answer read again, as the answer
path placed them (qa_eval.answer_ranking and app.answer_prompt.answer_prompt for ``eval-qa``; the window's first
column for ``abstain_eval``, whose ``--libraries`` folder keeps the libraries), checks that they are the
recorded ones, and measures the present check against the recorded one:

* ``--eval-qa``: of the right answers (containment > 0) and the wrong ones, per question language, how many
  each check marks, and how many the after-answer rule (core.abstain.after_answer: judged not held *and*
  marked) would end;
* ``--abstain``: per split, question kind and language, the answered rows the rule ends, then and now.

Retrieval and passages need the embedder and the generator's tokenizer only; nothing is decoded.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from rag_desktop.app.answer_prompt import answer_prompt
from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import BeirData, read_jsonl, write_corpus_files
from rag_desktop.app.qa_eval import answer_ranking
from rag_desktop.app.service import RagService
from rag_desktop.core import prompting
from rag_desktop.core.cfrag.anchor import says_not_found, unsupported
from rag_desktop.core.types import Hit, RankedList


def _as_read(svc: RagService, question: str, ranked: RankedList) -> tuple[tuple[Hit, ...], list[str]]:
    """The passages the answer read, and each as read (header and text: prompting.sources_as_read)."""
    p = answer_prompt(svc, svc.runtime.generator(), question, ranked, prompting.ANSWER_SOURCES,
                      svc.settings.generation.passages, None)
    return p.used, prompting.sources_as_read(p.used, p.locators, p.lang)


def eval_qa(rec: Path, data: Path, docs: Path | None, library: Path | None) -> dict[str, int]:
    rows = json.loads(rec.read_text(encoding="utf-8"))["per_question"]["passages"]
    questions = {str(q["_id"]): str(q["question"]) for q in read_jsonl(data / "questions.jsonl")}
    off = all(r.get("cross_language") in (None, "off") for r in rows)
    settings = load_settings().replace("retrieval", level="chunk", cross_language=not off)
    c: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="rag-check-") as tmp:
        files = docs
        if files is None:
            corpus = {str(d["_id"]): (str(d.get("title", "")), str(d.get("text", "")))
                      for d in read_jsonl(data / "corpus.jsonl")}
            files = Path(tmp) / "corpus"
            write_corpus_files(BeirData(corpus, {}, {}, {}), files)
        svc = RagService(library or Path(tmp) / "library", settings)
        try:
            list(svc.ingest([files]))
            for r in rows:
                if not r["prediction"]:
                    continue
                q = questions[str(r["id"])]
                ranked, _ = answer_ranking(svc, q)
                used, read = _as_read(svc, q, ranked)
                if [f"{h.title} p.{h.page}" for h in used] != r["sources"]:  # not this answer's passages
                    c["passages differ"] += 1
                    continue
                kind = f"{'right' if r['containment'] > 0 else 'wrong'} {r.get('lang', '?')}"
                now = unsupported(r["prediction"], q, read)
                c[f"{kind}"] += 1
                c[f"{kind} marked then"] += bool(r["unsupported"])
                c[f"{kind} marked now"] += now
                c[f"{kind} ended now"] += now and bool(r["doubted"])
        finally:
            svc.close()
    return dict(sorted(c.items()))


def abstain(rec: Path, libraries: Path) -> dict[str, int]:
    runs = json.loads(rec.read_text(encoding="utf-8"))["runs"]
    settings = load_settings().replace("retrieval", cross_language=False)
    c: Counter[str] = Counter()
    for lib in sorted({r["library"] for r in runs}):
        svc = RagService(libraries / f"lib-{lib}", settings)
        try:
            for run in (r for r in runs if r["library"] == lib):
                for row in run["rows"]:
                    a = row.get("answer")
                    if not a or "passages" not in a:
                        continue
                    q = row["q"]  # the row's question (abstain_eval records it once, with the row)
                    comp = svc.compare(q, translate=False)
                    used, read = _as_read(svc, q, comp.answer_list(comp.first_column))
                    recorded = ast.literal_eval(a["passages"]) if isinstance(a["passages"], str) else a["passages"]
                    if [h.text for h in used] != recorded:  # the library changed since: not this answer's passages
                        c["passages differ"] += 1
                        continue
                    key = f"{run['split']} {'answerable' if run['answerable'] else 'other'} {row['lang']}"
                    said = says_not_found(a["text"])
                    c[key] += 1
                    c[f"{key} ended then"] += said or (a["doubted"] and a["unsupported"])
                    c[f"{key} ended now"] += said or (a["doubted"] and unsupported(a["text"], q, read))
        finally:
            svc.close()
    return dict(sorted(c.items()))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval-qa", type=Path, help="an eval-qa --json report with the passages method")
    ap.add_argument("--data", type=Path, help="its --data folder")
    ap.add_argument("--docs", type=Path, default=None, help="its --docs folder, if it had one")
    ap.add_argument("--library", type=Path, default=None, help="keep the library here (default: a temporary one)")
    ap.add_argument("--abstain", type=Path, help="an abstain_eval.py --answers N --json report")
    ap.add_argument("--libraries", type=Path, help="its --libraries folder")
    args = ap.parse_args()
    if args.eval_qa and args.data:
        out = eval_qa(args.eval_qa, args.data, args.docs, args.library)
    elif args.abstain and args.libraries:
        out = abstain(args.abstain, args.libraries)
    else:
        ap.error("give --eval-qa REC --data D, or --abstain REC --libraries DIR")
    print(json.dumps(out, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
