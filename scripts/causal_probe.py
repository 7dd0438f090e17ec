"""Why s_c orders the window as it does (docs/evaluation.md §1.1): per query, the target's and the
stuffed documents' A, B and s_c, and what v_B is made of.

    PYTHONPATH=. python scripts/causal_probe.py tests/data/diagnostic [--library /tmp/probe-lib] \
        [--score paper] [--query q3] [--json probe.json]

Per query of a BEIR-format set (ingested as ``eval`` ingests it; ``--library`` keeps the library,
its corpus files go to ``<library>-corpus``), document level, the baseline window of 20, τ as the
app resolves it. For the target, the two stuffed documents and every document s_c puts above the
target: baseline rank, rank by s_c (``--score``, a ``ScoreVariant``), |A|/|K_d|, s_c, and the B
terms that weigh most in v_B (Eq. 4) as ``term share/cos`` — the term's share of B's weight and
cos(E(q), E(t)); with ``--score context`` also the text embedded as B in context. ``common`` and
``resid`` split the paper's s_c along the library's mean term direction μ̂_T:
s_c = (q̂·μ̂_T)(v̂_B·μ̂_T) + q̂⊥·v̂_B⊥, the first part shared by every B, the second what can tell
one B from another.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import BeirData, load_beir, write_corpus_files
from rag_desktop.app.retrieval import QueryContext, Retriever
from rag_desktop.app.service import RagService
from rag_desktop.core.causal import (
    SCORE_VARIANTS,
    STATS_VARIANTS,
    ContextRequest,
    ScoreVariant,
    TermSet,
    causal_scores,
)

TOP_B = 5  # B terms shown per document
CONTEXT_SHOWN = 160  # characters of a "context" B text shown


def role(data: BeirData, qid: str, doc: str) -> str:
    rel = data.qrels.get(qid, {})
    if rel and rel.get(doc) == max(rel.values()):
        return "TARGET"
    if doc in rel:
        return "near"
    return "STUFF" if doc in data.stuffing.get(qid, {}) else "-"


def b_terms(c: TermSet, absorbed: np.ndarray, q: np.ndarray) -> list[tuple[str, float, float]]:
    """B(d) as (term, share of B's weight, cos(E(q), E(t))), heaviest first."""
    b = [(t, float(w), float(u @ q)) for t, w, u, a in zip(c.terms, c.weights, c.unit, absorbed, strict=True)
         if not a]
    total = sum(w for _, w, _ in b) or 1.0
    return sorted(((t, w / total, cq) for t, w, cq in b), key=lambda x: -x[1])


def probe_query(r: Retriever, ctx: QueryContext, data: BeirData, qid: str, ids: list[str],
                score: ScoreVariant) -> dict[str, Any]:
    tau, _ = r.tau()
    mu_t, _ = r.score_means()
    m_hat = mu_t / np.linalg.norm(mu_t)
    stats = r.library_stats(ctx.level) if score in STATS_VARIANTS else None
    contexts: dict[int, str] = {}
    context = None
    if score == "context":
        encoder = r.context_encoder(ctx.baseline.hits, ctx.level)

        def context(requests: Sequence[ContextRequest]) -> Sequence[npt.ArrayLike | None]:
            for req in requests:
                contexts[req.candidate] = r.b_context_text(ctx.baseline.hits[req.candidate], ctx.level, req)
            return encoder(requests)

    paper = causal_scores(ctx.query_vec, ctx.query_terms, ctx.candidate_terms, tau=tau)
    seconds: list[float] = []
    for _ in range(2 if score == "context" else 1):  # "context": a new question, then the same again
        t0 = time.perf_counter()
        arr = paper if score == "paper" else causal_scores(
            ctx.query_vec, ctx.query_terms, ctx.candidate_terms, tau=tau, score=score, stats=stats, context=context)
        seconds.append(time.perf_counter() - t0)
    q = ctx.query_vec.astype(np.float64)
    q /= np.linalg.norm(q)
    alpha = float(q @ m_hat)
    q_perp = q - alpha * m_hat
    n = len(ids)
    s_c = np.where(arr.empty_b, -np.inf, arr.s_c)
    rank_sc = np.empty(n, dtype=int)
    rank_sc[np.lexsort((np.arange(n), -s_c))] = np.arange(1, n + 1)
    offsets = np.concatenate([[0], np.cumsum([len(c.keywords) for c in ctx.candidate_terms])]).astype(int)
    rows = []
    for j in range(n):
        c = ctx.candidate_terms[j]
        absorbed = arr.absorbed[offsets[j]:offsets[j + 1]]
        w = np.where(absorbed, 0.0, c.weights)
        common = resid = float("nan")
        if w.sum() > 0:
            v = (w @ c.unit) / w.sum()
            v /= np.linalg.norm(v)
            beta = float(v @ m_hat)
            common, resid = alpha * beta, float(q_perp @ (v - beta * m_hat))
        rows.append({
            "doc": ids[j], "role": role(data, qid, ids[j]), "baseline_rank": j + 1, "s_c_rank": int(rank_sc[j]),
            "s_sim": round(ctx.baseline.hits[j].s_sim, 4), "a": int(absorbed.sum()), "k_d": len(c.keywords),
            "s_c": None if arr.empty_b[j] else round(float(arr.s_c[j]), 4),
            "paper_s_c": None if paper.empty_b[j] else round(float(paper.s_c[j]), 4),
            "common": round(common, 4), "resid": round(resid, 4),
            "b": [(t, round(sh, 2), round(cq, 3)) for t, sh, cq in b_terms(c, absorbed, q)],
            "context": contexts.get(j),
        })
    defined = arr.s_c[~arr.empty_b]
    return {"query": qid, "text": data.queries[qid], "k_q": list(ctx.query_terms.terms), "tau": tau,
            "s_c_min": float(defined.min()) if defined.size else None,
            "s_c_max": float(defined.max()) if defined.size else None,
            "s_c_sd": float(defined.std()) if defined.size else None, "rows": rows,
            "baseline_ms": round(1000 * (ctx.timings["embed_query"] + ctx.timings["search"]), 1),
            "s_c_ms": [round(1000 * x, 1) for x in seconds], "context_chars": sum(map(len, contexts.values()))}


def print_query(p: dict[str, Any]) -> None:
    print(f"\n== {p['query']} {p['text']}\n   K_q = {' '.join(p['k_q'])}   τ = {p['tau']:.3f}   "
          f"s_c over the window {p['s_c_min']:.3f}–{p['s_c_max']:.3f} (sd {p['s_c_sd']:.4f})")
    if p["context_chars"]:
        new, again = p["s_c_ms"]
        print(f"   s_c of the window: {new:.0f} ms new ({p['context_chars']} characters of B context embedded), "
              f"{again:.1f} ms asked again; the baseline query {p['baseline_ms']:.0f} ms")
    target = next((r for r in p["rows"] if r["role"] == "TARGET"), None)
    cut = target["s_c_rank"] if target else 0
    shown = [r for r in p["rows"] if r["role"] in ("TARGET", "STUFF") or r["s_c_rank"] < cut]
    print(f"   {'role':6} {'doc':8} base s_c# s_sim  A/K_d  s_c     common  resid   B: term share/cos(E(q),E(t))")
    for r in sorted(shown, key=lambda r: r["s_c_rank"]):
        sc = "   —  " if r["s_c"] is None else f"{r['s_c']:.4f}"
        b = "  ".join(f"{t} {sh:.2f}/{cq:.3f}" for t, sh, cq in r["b"][:TOP_B])
        print(f"   {r['role']:6} {r['doc']:8} {r['baseline_rank']:4} {r['s_c_rank']:4} {r['s_sim']:.3f} "
              f"{r['a']:2}/{r['k_d']:2} {sc}  {r['common']:.4f} {r['resid']:+.4f}  {b}")
        if r["context"] is not None and r["role"] in ("TARGET", "STUFF"):
            print(f"{'':16}B in context: {r['context'][:CONTEXT_SHOWN].replace(chr(10), ' / ')}")


def print_summary(probes: list[dict[str, Any]]) -> None:
    """Per role over all queries: how close B's terms are to the question, and where s_c puts them."""
    by_role: dict[str, list[tuple[float, int]]] = {}
    for p in probes:
        for r in p["rows"]:
            if r["b"]:
                by_role.setdefault(r["role"], []).append((sum(sh * cq for _, sh, cq in r["b"]), r["s_c_rank"]))
    print("\nrole    docs  mean Σ share·cos(E(q),E(t)) over B  mean rank by s_c")
    for name in ("TARGET", "near", "STUFF", "-"):
        v = by_role.get(name, [])
        if v:
            print(f"{name:6} {len(v):5}  {np.mean([x[0] for x in v]):.3f}{'':31}{np.mean([x[1] for x in v]):.2f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path)
    ap.add_argument("--library", type=Path)
    ap.add_argument("--score", default="paper", choices=SCORE_VARIANTS)
    ap.add_argument("--query", action="append", help="only this query id (repeatable)")
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    data = load_beir(args.data)
    with tempfile.TemporaryDirectory(prefix="causal-probe-") as tmp:
        lib = args.library or Path(tmp) / "library"
        mapping = write_corpus_files(data, Path(f"{lib}-corpus"))
        svc = RagService(lib, load_settings())
        try:
            list(svc.ingest([Path(f"{lib}-corpus")]))
            r = svc.retriever()
            mu_t, _ = r.score_means()
            print(f"|μ_T| = {np.linalg.norm(mu_t):.3f} (the norm of the mean unit term vector; 1 = all terms alike)")
            out = []
            for qid in sorted(args.query or data.queries):
                if qid not in data.qrels:
                    continue
                ctx = r.context(data.queries[qid], "doc", args.k)
                ids = [mapping[str(Path(h.path).resolve())] for h in ctx.baseline.hits]
                p = probe_query(r, ctx, data, qid, ids, args.score)
                print_query(p)
                out.append(p)
        finally:
            svc.close()
    print_summary(out)
    if out and out[0]["context_chars"]:
        new_ms = [p["s_c_ms"][0] for p in out]
        print(f"\n\"context\" s_c of a window, new question: median {np.median(new_ms):.0f} ms, worst "
              f"{max(new_ms):.0f} ms; baseline query median {np.median([p['baseline_ms'] for p in out]):.0f} ms")
    if args.json:
        args.json.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
