"""Does the answer's document reach the sources the model reads? (docs/evaluation.md, "Finding the page")

    PYTHONPATH=. python scripts/answer_recall.py tests/data/demo_questions tests/data/qa_clean ... \
        --qa tests/data/demo_qa=resources/demo --json /tmp/recall.json [--level doc] [--n 5]

Model-free. For each set, with the keyword leg off (``retrieval.keyword_k = 0``: dense top k only) and on
(the default): the rank of the first relevant document in the list the answers read
(``RagService.answer_list``: the Baseline column's order fused with BM25), recall@n (n = the sources
an answer reads) and MRR@10, per language. BEIR-format sets (corpus.jsonl, queries.jsonl, qrels) are
ingested as ``eval`` ingests them; ``--qa DATA=DOCS`` takes an ``eval-qa`` set whose rows name their
``document`` (a file in DOCS) and ingests DOCS.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import doc_ranking, load_beir, read_jsonl, write_corpus_files
from rag_desktop.app.service import RagService
from rag_desktop.core.lang import detect_lang


def _questions(folder: Path, docs: Path | None) -> tuple[list[tuple[str, str, set[str]]], Path, dict[str, str] | None]:
    """(id, question, relevant ids) rows, the folder to ingest, and file path -> corpus id (BEIR)."""
    if docs is None:
        data = load_beir(folder)
        tmp = Path(tempfile.mkdtemp(prefix="rag-recall-"))
        mapping = write_corpus_files(data, tmp / "corpus")
        rows = [(q, data.queries[q], {d for d, g in rel.items() if g > 0}) for q, rel in sorted(data.qrels.items())]
        return rows, tmp / "corpus", mapping
    rows = [(str(r["_id"]), str(r["question"]), {str(r["document"])}) for r in read_jsonl(folder / "questions.jsonl")]
    return rows, docs, None


def _run(folder: Path, docs: Path | None, level: str, n: int, keyword_k: int) -> dict[str, Any]:
    rows, src, mapping = _questions(folder, docs)
    settings = load_settings().replace("retrieval", cross_language=False, level=level, keyword_k=keyword_k)
    with tempfile.TemporaryDirectory(prefix="rag-recall-lib-") as tmp:
        svc = RagService(Path(tmp) / "library", settings)
        try:
            list(svc.ingest([src]))
            if mapping is None:
                mapping = {str(Path(d.path).resolve()): Path(d.path).name for d in svc.library.catalog.documents()}
            t0 = time.perf_counter()
            per: list[dict[str, Any]] = []
            for qid, q, rel in rows:
                comp = svc.compare(q)
                order = doc_ranking(comp.answer_list("baseline"), mapping)
                first = next((i for i, d in enumerate(order, start=1) if d in rel), None)
                per.append({"id": qid, "lang": detect_lang(q), "first": first})
            seconds = time.perf_counter() - t0
        finally:
            svc.close()

    def summary(items: list[dict[str, Any]]) -> dict[str, Any]:
        if not items:
            return {}
        return {"n": len(items),
                f"recall@{n}": round(sum(1 for r in items if r["first"] and r["first"] <= n) / len(items), 3),
                "mrr@10": round(sum(1 / r["first"] for r in items if r["first"] and r["first"] <= 10) / len(items), 3)}

    return {"all": summary(per), **{lang: summary([r for r in per if r["lang"] == lang]) for lang in ("zh", "en")},
            "per_query": per, "seconds_per_question": round(seconds / max(1, len(rows)), 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="*", type=Path)
    ap.add_argument("--qa", action="append", default=[], help="DATA=DOCS: an eval-qa set and its documents")
    ap.add_argument("--level", default="doc", choices=("doc", "chunk"))
    ap.add_argument("--n", type=int, default=5, help="sources an answer reads")
    ap.add_argument("--keyword-k", type=int, default=10)
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    jobs: list[tuple[Path, Path | None]] = [(s, None) for s in args.sets]
    jobs += [(Path(a.split("=", 1)[0]), Path(a.split("=", 1)[1])) for a in args.qa]
    out: dict[str, Any] = {"level": args.level, "n": args.n, "load": os.getloadavg()[0]}
    for folder, docs in jobs:
        row = {"off": _run(folder, docs, args.level, args.n, 0), "on": _run(folder, docs, args.level, args.n,
                                                                          args.keyword_k)}
        out[folder.name] = row
        print(folder.name, json.dumps({m: {k: v for k, v in r.items() if k != "per_query"} for m, r in row.items()}),
              flush=True)
        args.json.write_text(json.dumps(out, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
