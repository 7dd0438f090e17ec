"""``rag-desktop calibrate``: the corpus-level gate of paper 000 §4.6 for one library.

Probes: n chunks sampled from the library (seeded), each turned into a question
by the local generator, or questions the user typed (a JSONL file of
``{"question": ..., "relevant": [paths]}``). Labels: with ``--auto-label`` the
probe's source document is taken as its relevant document (the question was
written from it), which is the LLM-as-labeller set-up the paper allows; typed
probes carry the user's labels. Per probe, MRR@10 of the relevant documents
under baseline, causal and hybrid; then gate.calibrate (2,000 seeded bootstrap
draws) decides, and the decision is stored in the library and shown.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rag_desktop.app.service import RagService
from rag_desktop.core import metrics
from rag_desktop.core.gate import GateDecision, calibrate
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.types import CancelToken, ChatMessage, GenEventKind, Progress

_PROBE_PROMPT = {
    "en": "Write one question that a reader could answer using only the passage below. "
    "Reply with the question only.\n\nPassage:\n{text}",
    "zh": "根据下面的段落写出一个读者只能用这段内容回答的问题。只回复问题本身。\n\n段落：\n{text}",
}


@dataclass(frozen=True)
class Probe:
    question: str
    relevant: frozenset[int]  # document ids
    source: str  # "generated" or "typed"


def generate_probes(
    svc: RagService, n: int, seed: int, cancel: CancelToken | None = None
) -> Iterator[Progress | Probe]:
    cat = svc.library.catalog
    docs = cat.documents()
    chunks = [c for d in docs for c in cat.chunks_of(d.doc_id)]
    if not chunks:
        raise ValueError("the library is empty: add documents before calibrating")
    rng = random.Random(seed)
    picked = rng.sample(chunks, k=min(n, len(chunks)))
    gen = svc.runtime.generator()
    for i, c in enumerate(picked, start=1):
        if cancel is not None:
            cancel.raise_if_set()
        yield Progress("probes", i, len(picked), f"writing probe question {i}")
        lang = "zh" if detect_lang(c.text) == "zh" else "en"
        msg = ChatMessage("user", _PROBE_PROMPT[lang].format(text=c.text[:1500]))
        text = "".join(
            e.text
            for e in gen.stream([msg], max_tokens=80, temperature=0.0, seed=seed + i, cancel=cancel)
            if e.kind == GenEventKind.TOKEN
        )
        q = text.strip().splitlines()[0].strip() if text.strip() else ""
        if q:
            yield Probe(q, frozenset({c.doc_id}), "generated")


def load_typed_probes(svc: RagService, path: Path) -> list[Probe]:
    by_path = {d.path: d.doc_id for d in svc.library.catalog.documents()}
    probes = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        rel = {by_path[str(Path(p).resolve())] for p in row.get("relevant", []) if str(Path(p).resolve()) in by_path}
        if not rel:
            raise ValueError(f"{path}:{n}: none of the relevant files is in the library")
        probes.append(Probe(str(row["question"]), frozenset(rel), "typed"))
    return probes


def score_probes(svc: RagService, probes: Sequence[Probe]) -> GateDecision:
    r = svc.retriever()
    per: dict[str, list[float]] = {"baseline": [], "causal": [], "hybrid": []}
    for p in probes:
        ctx = r.context(p.question, "doc")
        rankings = {
            "baseline": ctx.baseline,
            "causal": r.rerank(ctx, "causal")[0],
            "hybrid": r.rerank(ctx, "hybrid")[0],
        }
        for name, ranked in rankings.items():
            docs = [h.doc_id for h in ranked.hits]
            per[name].append(metrics.reciprocal_rank_at_k(docs, {d: 1.0 for d in p.relevant}, 10))
    return calibrate(per["baseline"], per["causal"], per["hybrid"], metric="MRR@10", seed=0)


def store_decision(svc: RagService, decision: GateDecision) -> None:
    with svc.library.catalog.transaction():
        svc.library.catalog.set_json("gate", decision.to_dict())


def run_calibrate(args: argparse.Namespace, svc: RagService) -> int:
    try:
        probes: list[Probe] = []
        if getattr(args, "probes_file", None):
            probes = load_typed_probes(svc, args.probes_file)
        elif args.auto_label:
            for ev in generate_probes(svc, args.probes, seed=0):
                if isinstance(ev, Probe):
                    probes.append(ev)
                elif sys.stderr.isatty() and not args.json:
                    sys.stderr.write(f"\r{ev.message} ({ev.current}/{ev.total})   ")
        else:
            print(
                "rag-desktop calibrate: give --auto-label (the local model writes and labels probes) or "
                "--probes-file FILE.jsonl with typed, labelled questions",
                file=sys.stderr,
            )
            return 2
        if not probes:
            print("rag-desktop calibrate: no usable probes", file=sys.stderr)
            return 1
        decision = score_probes(svc, probes)
        store_decision(svc, decision)
    finally:
        svc.close()
    if args.json:
        print(
            json.dumps(
                {"decision": decision.to_dict(), "probes": [p.question for p in probes]}, ensure_ascii=False, indent=2
            )
        )
    else:
        print(
            f"decision: {decision.decision} (reliability {decision.reliability:.1%} over "
            f"{decision.n_draws} bootstrap draws, {decision.n_probes} probes)"
        )
        print(
            f"MRR@10 baseline {decision.mean_baseline:.3f}, causal {decision.mean_causal:.3f} "
            f"(Δ {decision.delta_causal:+.3f}), hybrid {decision.mean_hybrid:.3f} (Δ {decision.delta_hybrid:+.3f})"
        )
    return 0
