"""``rag-desktop calibrate``: the corpus-level gate of paper 000 §4.6 for one library.

Probes: questions the user typed (a JSONL file of ``{"question": ..., "relevant": [paths]}``,
``calibrate --probes-file``), or in the wizard n chunks sampled from the library (seeded), each
turned into a question by the local generator, which the user then labels. A generated probe's
source passage is never taken as its answer on its own: such a question repeats its passage's
words, so the baseline ranks that passage first and the probe never meets the documents that
repeat a question's words without answering it. Per probe, MRR@10 of the relevant documents under
baseline, causal and hybrid; then gate.calibrate (2,000 seeded bootstrap draws) decides, and the
decision is stored in the library as the gate's record (app.library_gate, the shape the library's
own gate stores) and shown; the library's own gate leaves it alone until the library's documents
change (docs/architecture.md, "The calibration gate").

The desktop app's calibration wizard (ui/calibration_wizard.py) uses the same steps in
pieces: ``probe_candidates`` ranks a probe once under every method and lists the documents
worth labelling (the union of each method's top 10, plus a generated probe's source), the
user ticks the relevant ones, and ``score_labels`` computes MRR@10 from the stored rankings
and runs the gate; ``score_probes`` (the CLI) is the two composed.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rag_desktop.app.library import Library
from rag_desktop.app.library_gate import GATE_KEY, PERSON_LABELS, fingerprint
from rag_desktop.app.retrieval import Retriever
from rag_desktop.app.runtime import Runtime
from rag_desktop.app.self_gate import GateRecord
from rag_desktop.core import metrics
from rag_desktop.core.errors import UserInputError
from rag_desktop.core.gate import GateDecision, calibrate
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, ChatMessage, GenEventKind, Progress


class ProbeService(Protocol):
    """What calibration uses of app.service.RagService: naming what it needs, not importing the
    service, keeps the two out of an import cycle (docs/architecture.md, "Limits": annotations
    included)."""

    @property
    def library(self) -> Library: ...

    @property
    def runtime(self) -> Runtime: ...

    def retriever(self) -> Retriever: ...


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
    svc: ProbeService, n: int, seed: int, cancel: CancelToken | None = None
) -> Iterator[Progress | Probe]:
    cat = svc.library.catalog
    docs = cat.documents()
    chunks = [c for d in docs for c in cat.chunks_of(d.doc_id)]
    if not chunks:
        raise UserInputError("the library is empty: add documents before calibrating")
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


def load_typed_probes(svc: ProbeService, path: Path) -> list[Probe]:
    by_path = {d.path: d.doc_id for d in svc.library.catalog.documents()}
    probes = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        rel = {by_path[str(Path(p).resolve())] for p in row.get("relevant", []) if str(Path(p).resolve()) in by_path}
        if not rel:
            raise UserInputError(f"{path}:{n}: none of the relevant files is in the library")
        probes.append(Probe(str(row["question"]), frozenset(rel), "typed"))
    return probes


METHODS = ("baseline", "causal", "hybrid")
TOP = 10  # MRR@10: a document below rank 10 in every method cannot change any probe's score


@dataclass(frozen=True)
class CandidateDoc:
    """A document the user may tick as relevant for one probe, with its rank per method (None: not in the top)."""

    doc_id: int
    title: str
    path: str
    ranks: tuple[tuple[str, int | None], ...]  # (method, 1-based rank within the top) in METHODS order

    def rank(self, method: str) -> int | None:
        return dict(self.ranks).get(method)


@dataclass(frozen=True)
class ProbeCandidates:
    """One probe with its rankings (document ids, best first) and the documents worth labelling.

    ``candidates`` is the union of the top ``TOP`` of the baseline, causal and hybrid rankings
    (every document that can affect MRR@10) plus, for a generated probe, its source document.
    """

    probe: Probe
    rankings: tuple[tuple[str, tuple[int, ...]], ...]  # (method, doc ids) in METHODS order
    candidates: tuple[CandidateDoc, ...]

    def ranking(self, method: str) -> tuple[int, ...]:
        return dict(self.rankings)[method]


@dataclass(frozen=True)
class ProbeScore:
    question: str
    relevant: frozenset[int]
    rr: tuple[float, float, float]  # reciprocal rank @10 under baseline, causal, hybrid


@dataclass(frozen=True)
class CalibrationOutcome:
    decision: GateDecision
    scores: tuple[ProbeScore, ...]
    n_unlabelled: int  # probes left out because no document was marked relevant


def questions_from_text(text: str) -> list[str]:
    """Typed probe questions: one per line; blank lines and repeats dropped, order kept."""
    seen: set[str] = set()
    out: list[str] = []
    for line in text.splitlines():
        q = " ".join(line.split())
        if q and q not in seen:
            seen.add(q)
            out.append(q)
    return out


def probe_candidates(svc: ProbeService, probe: Probe, top: int = TOP) -> ProbeCandidates:
    """Rank ``probe`` at document level under every method and list the documents to label."""
    r = svc.retriever()
    ctx = r.context(probe.question, "doc")
    ranked = {
        "baseline": ctx.baseline,
        "causal": r.rerank(ctx, "causal")[0],
        "hybrid": r.rerank(ctx, "hybrid")[0],
    }
    rankings = tuple((m, tuple(h.doc_id for h in ranked[m].hits)) for m in METHODS)
    titles: dict[int, tuple[str, str]] = {}
    order: list[int] = []
    for m in METHODS:
        for h in ranked[m].hits[:top]:
            if h.doc_id not in titles:
                titles[h.doc_id] = (h.title, h.path)
                order.append(h.doc_id)
    cat = svc.library.catalog
    for d in sorted(probe.relevant):  # a generated probe's source document, even if no method found it
        if d not in titles:
            doc = cat.document(d)
            if doc is not None:
                titles[d] = (doc.title, doc.path)
                order.append(d)
    cands = []
    for d in order:
        ranks = []
        for m, ids in rankings:
            pos = ids.index(d) + 1 if d in ids[:top] else None
            ranks.append((m, pos))
        cands.append(CandidateDoc(d, titles[d][0], titles[d][1], tuple(ranks)))
    return ProbeCandidates(probe, rankings, tuple(cands))


def iter_probe_candidates(
    svc: ProbeService, probes: Sequence[Probe], cancel: CancelToken | None = None
) -> Iterator[Progress | ProbeCandidates]:
    for i, p in enumerate(probes, start=1):
        if cancel is not None:
            cancel.raise_if_set()
        yield Progress("rank_probes", i, len(probes), p.question)
        yield probe_candidates(svc, p)


def score_labels(
    items: Sequence[ProbeCandidates], labels: Sequence[frozenset[int]] | None = None, seed: int = 0
) -> CalibrationOutcome:
    """MRR@10 per probe and method from the stored rankings, then the §4.6 gate.

    ``labels[i]`` are the documents the user marked relevant for ``items[i]`` (default: the
    probes' own labels). Probes with no relevant document say nothing about the methods and
    are left out (counted in ``n_unlabelled``); none left raises ValueError.
    """
    if labels is None:
        labels = [it.probe.relevant for it in items]
    if len(labels) != len(items):
        raise ValueError(f"score_labels: {len(items)} probes but {len(labels)} label sets")
    scores: list[ProbeScore] = []
    skipped = 0
    for it, rel in zip(items, labels, strict=True):
        if not rel:
            skipped += 1
            continue
        qrels = {d: 1.0 for d in rel}
        rr = tuple(metrics.reciprocal_rank_at_k(list(it.ranking(m)), qrels, TOP) for m in METHODS)
        scores.append(ProbeScore(it.probe.question, frozenset(rel), (rr[0], rr[1], rr[2])))
    if not scores:
        raise UserInputError("no probe has a document marked relevant: tick at least one document for some question")
    decision = calibrate(
        [s.rr[0] for s in scores], [s.rr[1] for s in scores], [s.rr[2] for s in scores], metric="MRR@10", seed=seed
    )
    return CalibrationOutcome(decision, tuple(scores), skipped)


def score_probes(svc: ProbeService, probes: Sequence[Probe]) -> GateDecision:
    return score_labels([probe_candidates(svc, p) for p in probes]).decision


def gated_settings(settings: Settings) -> Settings:
    """The settings with the causal column following the stored gate decision."""
    return settings.replace("retrieval", default_method="gated")


def store_decision(svc: ProbeService, decision: GateDecision, labels: str = PERSON_LABELS,
                   seconds: float = 0.0) -> GateRecord:
    """Store the decision as the library's gate record (app.library_gate): how its probes were
    labelled, the library's fingerprint now, and ``seconds`` of scoring."""
    cat = svc.library.catalog
    record = GateRecord.from_decision(decision, labels=labels, fingerprint=fingerprint(cat), seconds=seconds)
    with cat.transaction():
        cat.set_json(GATE_KEY, record.to_json())
    return record


@dataclass(frozen=True)
class CalibrationReport:
    """What ``calibrate --probes-file`` decided; ``decision`` None: no usable probe."""

    decision: GateDecision | None
    probes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"decision": None if self.decision is None else self.decision.to_dict(), "probes": list(self.probes)}


def run_calibrate(svc: ProbeService, probes_file: Path) -> CalibrationReport:
    """Typed probes (``probes_file``, the person's own labels) scored and the decision stored in the library."""
    probes = load_typed_probes(svc, probes_file)
    if not probes:
        return CalibrationReport(None, ())
    t0 = time.perf_counter()
    decision = score_probes(svc, probes)
    store_decision(svc, decision, "typed", time.perf_counter() - t0)
    return CalibrationReport(decision, tuple(p.question for p in probes))
