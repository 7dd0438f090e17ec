"""Does the answer reach the passages the model reads? (docs/evaluation.md, "Finding the page")

    PYTHONPATH=. python scripts/passage_recall.py eval/manuals/tune --docs DOCS --library /tmp/lib \
        [--set retrieval.level=chunk ...] --json /tmp/precall.json

Model-free, so a retrieval or passage-selection change is measured in seconds, not in an
``eval-qa`` hour. For each question of an ``eval-qa`` set (rows with ``answers`` and the
``document`` that holds them): the Baseline column's answer list as ``RagService.answer`` reads
it (``prompting.answer_hits``), then the answer passages ``PassageFinder.find`` picks inside it.
Reported per language: ``doc`` — the answer's document is among the hits the answer reads;
``passage`` — a gold answer is contained (``core.qa_metrics.containment_match``) in the text of
the passages the model reads; ``chars`` — the mean characters of those passages (the prompt's
size, which is the first token's wait). ``--library`` keeps the ingested library between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import tomllib
from pathlib import Path
from typing import Any

from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import read_jsonl
from rag_desktop.app.service import RagService
from rag_desktop.core import prompting
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.qa_metrics import containment_match


def _overrides(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """``section.name=value`` pairs, each value read as the settings file reads it (TOML), else as text."""
    out: dict[str, dict[str, Any]] = {}
    for p in pairs:
        key, raw = p.split("=", 1)
        section, name = key.split(".", 1)
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        out.setdefault(section, {})[name] = value
    return out


def run(data: Path, docs: Path, library: Path, sets: list[str]) -> dict[str, Any]:
    settings = load_settings()
    for section, values in _overrides(sets).items():
        settings = settings.replace(section, **values)
    rows = list(read_jsonl(data / "questions.jsonl"))
    svc = RagService(library, settings)
    per: list[dict[str, Any]] = []
    try:
        list(svc.ingest([docs]))
        t0 = time.perf_counter()
        for r in rows:
            q = str(r["question"])
            comp = svc.compare(q)
            ranked = comp.answer_list("baseline")
            hits = prompting.answer_hits(ranked.hits, prompting.ANSWER_SOURCES)
            ps = svc.passage_finder().find(q, hits) if settings.generation.passages else None
            read = list(ps.hits) if ps is not None and ps.hits else list(hits)
            text = "\n".join(h.text for h in read)
            per.append({
                "id": r["_id"], "lang": detect_lang(q),
                "doc": any(Path(h.path).name == r["document"] for h in hits),
                "passage": containment_match(text, [str(a) for a in r["answers"]]) > 0,
                "chars": len(text), "pages": [f"{Path(h.path).name[:12]} p{h.page}" for h in read],
            })
        seconds = time.perf_counter() - t0
    finally:
        svc.close()

    def summary(items: list[dict[str, Any]]) -> dict[str, Any]:
        n = max(1, len(items))
        return {"n": len(items), "doc": round(sum(i["doc"] for i in items) / n, 3),
                "passage": round(sum(i["passage"] for i in items) / n, 3),
                "chars": round(sum(i["chars"] for i in items) / n)}

    return {"settings": sets, "load": round(os.getloadavg()[0], 2),
            "all": summary(per), **{lang: summary([i for i in per if i["lang"] == lang]) for lang in ("zh", "en")},
            "seconds_per_question": round(seconds / max(1, len(rows)), 3), "per_question": per}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path)
    ap.add_argument("--docs", type=Path, required=True)
    ap.add_argument("--library", type=Path, required=True)
    ap.add_argument("--set", action="append", default=[], help="section.name=value, e.g. retrieval.level=chunk")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    out = run(args.data, args.docs, args.library, args.set)
    args.json.write_text(json.dumps(out, ensure_ascii=False, indent=2), encoding="utf-8")
    print(json.dumps({k: out[k] for k in ("settings", "load", "all", "zh", "en", "seconds_per_question")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
