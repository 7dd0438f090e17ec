"""A calibration gate from the library alone: inverse-cloze probes, no generator (measured, not used).

Measured with ``scripts/gate_agreement.py`` (docs/evaluation.md, "A gate from the library alone"):
on every set it decides "neither", right where re-ranking does not help and wrong on the three
sets where the labelled gate turns the hybrid on. A probe cut from a document is, by
construction, best found by similarity to that document's text, so these labels side with the
baseline as the model-judged ones did. Kept as the measurement's code; the app does not run it.

Paper 000 §4.6 decides from a labelled probe set: Δ = mean(re-ranked − baseline) of a per-probe
metric, enable iff Δ > 0, reliability by bootstrap (``core.gate.calibrate``). A fresh library has
no labels, and labels read off what a model says about the pooled top documents agree with the
ranking that pooled them (docs/architecture.md, "The calibration gate"). Here the library labels
itself: a probe is a sentence cut from one of its own chunks, and the relevant document is the one
it was cut from (the inverse cloze task of Lee, Chang & Toutanova, ACL 2019). The label does not
come from any ranking, so it cannot side with one.

Choices where neither source says:

* **Masking.** A sentence matches its own words, so the source would win by copying. Its
  similarity is measured against its chunk re-embedded *without* the sentence (at document level
  the mean-pooled document vector with that chunk replaced, §4.1); another unit whose text holds
  the sentence (an overlapping chunk) is left out of that probe's ranking. Every other unit keeps
  its stored vector. The source's keyword set K_d is kept as stored: the sentence's words are the
  probe's K_q, so the A/B split moves them into A whatever K_d holds.
* **Which sentences.** Sentences of 40–400 characters (a question-sized span that still names its
  subject), from a chunk that keeps ≥ 80 characters without it; one probe per sampled document
  (seeded), a second round from the same documents only when the library has fewer documents
  than probes wanted. ``N_PROBES`` = 32: the bootstrap's reliability is coarse below ~10
  (``core.gate.MIN_PROBES_FOR_RELIABILITY``) and the cost is one query and one passage embedding
  per probe.
* **Metric.** MRR@10 of the source, as ``eval``'s labelled gate uses.

"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from rag_desktop.core.gate import Decision, GateDecision, calibrate
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.prompting import split_sentences
from rag_desktop.core.types import Hit, Level, RankedList

if TYPE_CHECKING:  # annotations only
    from rag_desktop.app.retrieval import Retriever

N_PROBES = 32
MIN_SENTENCE, MAX_SENTENCE = 40, 400  # characters
MIN_REST = 80  # characters the source chunk keeps without its sentence
METRIC_AT = 10
KEYWORDS = 4
SELF_LABELS = "self: inverse cloze"

@dataclass(frozen=True)
class Probe:
    """One inverse-cloze probe: a sentence, the unit it was cut from and that unit without it."""

    text: str
    doc_id: int
    chunk_id: int
    masked: str  # the chunk's text with the sentence removed


@dataclass(frozen=True)
class ProbeResult:
    probe: Probe
    ranks: Mapping[str, int | None]  # the source's rank in each ranking (None: not in the top k)


@dataclass(frozen=True)
class GateRecord:
    """The gate's decision as stored with the library and shown in the Why card and ``compare --json``."""

    decision: Decision
    metric: str
    n_probes: int
    mean_baseline: float
    mean_causal: float
    mean_hybrid: float
    delta_causal: float
    delta_hybrid: float
    reliability: float
    labels: str  # SELF_LABELS, or how a person's labelled calibration was made
    fingerprint: str
    seconds: float
    calibrated_at: str
    probes: tuple[tuple[str, int, int | None, int | None, int | None], ...] = ()  # text, doc, ranks b/c/h

    @classmethod
    def from_decision(cls, d: GateDecision, *, labels: str, fingerprint: str, seconds: float,
                      probes: Sequence[ProbeResult] = ()) -> GateRecord:
        rows = tuple((r.probe.text, r.probe.doc_id, r.ranks.get("baseline"), r.ranks.get("causal"),
                      r.ranks.get("hybrid")) for r in probes)
        return cls(d.decision, d.metric, d.n_probes, d.mean_baseline, d.mean_causal, d.mean_hybrid,
                   d.delta_causal, d.delta_hybrid, d.reliability, labels, fingerprint, round(seconds, 3),
                   datetime.now(UTC).isoformat(timespec="seconds"), rows)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["probes"] = [list(p) for p in self.probes]
        return out



def sentences(text: str) -> list[str]:
    """``text`` cut at line breaks and at the sentence ends the prompts use (core.prompting)."""
    return [p.strip() for line in text.splitlines() for p in split_sentences(line) if p.strip()]


def probe_from(text: str, rng: np.random.Generator) -> tuple[str, str] | None:
    """(sentence, the text without it) for one sentence of ``text`` that fits, or None."""
    fits = [s for s in sentences(text) if MIN_SENTENCE <= len(s) <= MAX_SENTENCE]
    rng.shuffle(fits)
    for s in fits:
        rest = " ".join(text.replace(s, " ", 1).split())
        if len(rest) >= MIN_REST:
            return s, rest
    return None


def plan_probes(chunks_of: Callable[[int], Sequence[tuple[int, str]]], doc_ids: Sequence[int],
                n: int = N_PROBES, seed: int = 0) -> list[Probe]:
    """Up to ``n`` probes, one per sampled document (seeded), then more rounds while documents
    are fewer than ``n``. ``chunks_of(doc_id)`` gives the document's (chunk id, text)."""
    rng = np.random.default_rng(seed)
    order = [int(d) for d in rng.permutation(np.asarray(doc_ids, dtype=np.int64))]
    probes: list[Probe] = []
    used: set[str] = set()
    for _ in range(max(1, -(-n // max(1, len(order))))):
        for doc_id in order:
            if len(probes) >= n:
                return probes
            chunks = list(chunks_of(doc_id))
            for i in rng.permutation(len(chunks)):
                cid, text = chunks[int(i)]
                got = probe_from(text, rng)
                if got is not None and got[0] not in used:
                    used.add(got[0])
                    probes.append(Probe(got[0], doc_id, cid, got[1]))
                    break
    return probes


def first_rank(ranked: RankedList, unit_ids: set[int], k: int = METRIC_AT) -> int | None:
    for h in ranked.hits[:k]:
        if h.unit_id in unit_ids:
            return h.rank
    return None


def _unit(v: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    v64 = np.asarray(v, dtype=np.float64)
    return v64 / max(float(np.linalg.norm(v64)), 1e-12)


def masked_hits(retriever: Retriever, probe: Probe, qv: npt.NDArray[np.float32],
                masked_vec: npt.NDArray[np.float32], level: Level, k: int) -> list[Hit]:
    """The baseline top ``k`` for ``probe`` with its source masked: the source scored without its
    sentence, and any other unit holding the sentence left out."""
    cat = retriever.library.catalog
    hits = retriever.baseline(qv, level, k + 5, -1.0)
    if level == "chunk":
        source_id = probe.chunk_id
        vec = _unit(masked_vec)
    else:
        source_id = probe.doc_id
        rows = cat.chunk_vectors_of([probe.doc_id]).get(probe.doc_id, [])
        vs = [masked_vec if cid == probe.chunk_id else v for cid, v in rows] or [masked_vec]
        vec = _unit(np.mean(np.stack(vs), axis=0))  # §4.1: mean-pooled, as stored at ingest
    s = float(vec @ _unit(qv))
    kept = [h for h in hits if h.unit_id != source_id and not (level == "chunk" and probe.text in h.text)]
    if level == "chunk":
        chunk = cat.chunks([probe.chunk_id])[probe.chunk_id]
        doc = cat.document(probe.doc_id)
        assert doc is not None
        src = Hit(source_id, probe.doc_id, "chunk", doc.title, doc.path, chunk.page_start, probe.masked, s, 0,
                  chunk.lang)
    else:
        doc = cat.document(probe.doc_id)
        assert doc is not None
        src = Hit(source_id, probe.doc_id, "doc", doc.title, doc.path, 1, probe.masked, s, 0, doc.lang)
    merged = sorted([*kept, src], key=lambda h: -h.s_sim)[:k]
    return [dataclasses.replace(h, rank=i) for i, h in enumerate(merged, start=1)]


def run_probes(retriever: Retriever, probes: Sequence[Probe], level: Level, k: int,
               variants: tuple[str, str] = ("causal", "hybrid"), form: str = "sentence") -> list[ProbeResult]:
    """Each probe ranked by the baseline and both re-rankings, the source masked (module docstring)."""
    from rag_desktop.app.retrieval import QueryContext

    if not probes:
        return []
    emb = retriever.embedder
    if form == "keywords":  # the sentence's top K_q words, question-sized
        tok = retriever.tokenizer
        probes = [dataclasses.replace(p, text=(" " if detect_lang(p.text) != "zh" else "").join(
            tok.surface_form(k.term) for k in retriever.query_keywords(p.text, level)[:KEYWORDS])) for p in probes]
    qvs = emb.embed_queries([p.text for p in probes])
    mvs = emb.embed_passages([p.masked for p in probes])
    tau, source = retriever.tau()
    out: list[ProbeResult] = []
    for p, qv, mv in zip(probes, qvs, mvs, strict=True):
        hits = masked_hits(retriever, p, qv, mv, level, k)
        base = RankedList("baseline", tuple(hits), (), (), "Baseline (dense similarity)")
        ctx = QueryContext(p.text, level, qv, retriever.query_terms(p.text, level), base,
                           tuple(retriever.candidate_terms(hits, level)), tau, source)
        target = {p.chunk_id if level == "chunk" else p.doc_id}
        ranks: dict[str, int | None] = {"baseline": first_rank(base, target)}
        for name, variant in zip(("causal", "hybrid"), variants, strict=True):
            ranks[name] = first_rank(retriever.rerank(ctx, variant)[0], target)
        out.append(ProbeResult(p, ranks))
    return out


def reciprocal(rank: int | None) -> float:
    return 0.0 if rank is None else 1.0 / rank


def decide(results: Sequence[ProbeResult], *, fingerprint: str, seconds: float) -> GateRecord | None:
    """§4.6 on the probes' MRR@10 (``core.gate.calibrate``); None with no probe."""
    if not results:
        return None
    per = {m: [reciprocal(r.ranks.get(m)) for r in results] for m in ("baseline", "causal", "hybrid")}
    d = calibrate(per["baseline"], per["causal"], per["hybrid"], metric=f"MRR@{METRIC_AT}", higher_is_better=True)
    return GateRecord.from_decision(d, labels=SELF_LABELS, fingerprint=fingerprint, seconds=seconds,
                                    probes=results)


def self_calibrate(retriever: Retriever, level: Level, k: int, variants: tuple[str, str], fp: str,
                   n: int = N_PROBES, seed: int = 0, form: str = "sentence") -> GateRecord | None:
    """Plan, rank and decide for one library (no generator); None for a library with no probe."""
    t0 = time.perf_counter()
    cat = retriever.library.catalog
    docs = [d.doc_id for d in cat.documents()]

    def chunks_of(doc_id: int) -> list[tuple[int, str]]:
        return [(c.chunk_id, c.text) for c in cat.chunks_of(doc_id)]

    probes = plan_probes(chunks_of, docs, n, seed)
    results = run_probes(retriever, probes, level, k, variants, form)
    return decide(results, fingerprint=fp, seconds=time.perf_counter() - t0)


__all__ = ["N_PROBES", "SELF_LABELS", "GateRecord", "Probe", "ProbeResult", "decide",
           "first_rank", "masked_hits", "plan_probes", "probe_from", "run_probes", "self_calibrate", "sentences"]
