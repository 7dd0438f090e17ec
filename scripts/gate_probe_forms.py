"""Why the library's own gate does not label probes by provenance (docs/evaluation.md, "A gate from the library alone").

    PYTHONPATH=. python scripts/gate_probe_forms.py tests/data/diagnostic tests/data/qa_clean ... --json forms.json

Per BEIR-format set: ingest the corpus into a fresh library (the real pipeline), then decide §4.6
(``core.gate.calibrate``, MRR@10) on probes a library can make of itself, each labelled with the
document it came from, ranked as a question is (baseline, causal, hybrid over the same pool):

* ``sentence`` — one sentence of 40–400 characters cut from a seeded chunk of each sampled document;
* ``kw4`` / ``kw2`` — that sentence's top 4 / 2 query keywords K_q (paper §4.4), as a person types a topic;
* ``title`` — each document's title;
* ``sentence_echo`` — ``sentence``, but a probe cut from an *echo* document (``app.self_gate``) is
  labelled with the document it echoes, not with itself.

Beside them, the labelled decision from the set's own questions and the echo gate's decision.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_desktop.app import self_gate
from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import gate_on_queries, load_beir, rank_all, write_corpus_files
from rag_desktop.app.service import RagService
from rag_desktop.core.gate import GateDecision, calibrate
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.prompting import split_sentences

if TYPE_CHECKING:
    from rag_desktop.app.retrieval import Retriever
    from rag_desktop.core.types import RankedList

N_PROBES = 32
SENTENCE = (40, 400)  # characters


def _rr(ranked: RankedList, doc_id: int, k: int = 10) -> float:
    return next((1.0 / i for i, h in enumerate(ranked.hits[:k], 1) if h.doc_id == doc_id), 0.0)


def decide(r: Retriever, probes: list[tuple[str, int]]) -> GateDecision | None:
    if len(probes) < 2:
        return None
    per: dict[str, list[float]] = {"baseline": [], "causal": [], "hybrid": []}
    for text, doc in probes:
        ctx = r.context(text, "doc", 20)
        per["baseline"].append(_rr(ctx.baseline, doc))
        per["causal"].append(_rr(r.rerank(ctx, "causal")[0], doc))
        per["hybrid"].append(_rr(r.rerank(ctx, "hybrid")[0], doc))
    return calibrate(per["baseline"], per["causal"], per["hybrid"], metric="MRR@10", seed=0)


def sentences(svc: RagService, seed: int = 0) -> list[tuple[str, int]]:
    """One fitting sentence from a seeded chunk of each of up to N_PROBES seeded documents."""
    rng = random.Random(seed)
    cat = svc.library.catalog
    docs = [d.doc_id for d in cat.documents()]
    rng.shuffle(docs)
    out: list[tuple[str, int]] = []
    for doc in docs[:N_PROBES]:
        chunks = cat.chunks_of(doc)
        rng.shuffle(chunks)
        for c in chunks:
            fits = [s.strip() for line in c.text.splitlines() for s in split_sentences(line)
                    if SENTENCE[0] <= len(s.strip()) <= SENTENCE[1]]
            if fits:
                out.append((rng.choice(fits), doc))
                break
    return out


def forms(svc: RagService) -> dict[str, list[tuple[str, int]]]:
    r = svc.retriever()
    cat = svc.library.catalog
    cut = sentences(svc)

    def top_words(text: str, n: int) -> str:
        words = [r.tokenizer.surface_form(k.term) for k in r.query_keywords(text, "doc")[:n]]
        return ("" if detect_lang(text) == "zh" else " ").join(words)

    partners = self_gate.echo_partners(self_gate.keyword_sets(r))
    echoes = {e: d for e, (d, c) in partners.items() if c >= self_gate.ECHO_COVER}
    return {
        "sentence": cut,
        "kw4": [(top_words(t, 4), d) for t, d in cut],
        "kw2": [(top_words(t, 2), d) for t, d in cut],
        "title": [(d.title, d.doc_id) for d in cat.documents() if d.title][:N_PROBES],
        "sentence_echo": [(t, echoes.get(d, d)) for t, d in cut],
    }


def _row(d: GateDecision | None) -> dict[str, Any] | None:
    return None if d is None else {"decision": d.decision, "reliability": round(d.reliability, 3),
                                   "delta_causal": round(d.delta_causal, 3), "delta_hybrid": round(d.delta_hybrid, 3),
                                   "mean_baseline": round(d.mean_baseline, 3), "n_probes": d.n_probes}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    settings = load_settings().replace("retrieval", cross_language=False, level="doc")
    results: dict[str, Any] = {}
    for folder in args.sets:
        data = load_beir(folder)
        with tempfile.TemporaryDirectory(prefix="rag-forms-") as tmp:
            mapping = write_corpus_files(data, Path(tmp) / "corpus")
            svc = RagService(Path(tmp) / "library", settings)
            try:
                list(svc.ingest([Path(tmp) / "corpus"]))
                runs, _ = rank_all(svc, data, ["baseline", "causal", "hybrid"], 20, "doc", mapping)
                row: dict[str, Any] = {"labelled": _row(gate_on_queries(runs, data))}
                r = svc.retriever()
                for name, probes in forms(svc).items():
                    row[name] = _row(decide(r, probes))
                rec = self_gate.self_calibrate(r, "-")
                row["echo"] = None if rec is None else {"decision": rec.decision, "echo_share": rec.echo_share,
                                                        "reliability": round(rec.reliability, 3)}
            finally:
                svc.close()
        results[folder.name] = row
        print(folder.name, json.dumps(row, ensure_ascii=False), flush=True)
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
