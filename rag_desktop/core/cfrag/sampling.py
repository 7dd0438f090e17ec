"""Step 5 of CF-RAG (paper 002 §3): M evidence subsets, one per parallel hypothesis."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rag_desktop.core.cfrag.common import FloatMatrix


def softmax(z: npt.ArrayLike) -> FloatMatrix:
    v = np.asarray(z, dtype=np.float64)
    e = np.exp(v - np.max(v))
    return np.asarray(e / e.sum(), dtype=np.float64)


@dataclass(frozen=True)
class Subset:
    weights: tuple[float, ...]
    members: tuple[int, ...]  # indices into the clustered evidence, ascending


def sample_subsets(
    labels: npt.ArrayLike,
    *,
    n_subsets: int,
    size: int,
    temperature: float,
    rng: np.random.Generator,
) -> list[Subset]:
    """M evidence subsets E_j by stratified, temperature-weighted sampling (paper 002 §3).

    For each subset j (the paper names weights w_jm but not their law; this is ours):

    1. noise g_jm ~ N(0, 1) for each cluster m, and w_j = softmax(g_j / temperature).
       High temperature → near-uniform weights (every path sees an even mix); low
       temperature → each path leans on one cluster (paths differ more).
    2. stratified pass: with s = min(size, n) slots and K clusters, if s ≥ K one passage
       from every cluster (each path covers all topics); if s < K, s distinct clusters
       drawn without replacement with probabilities w_j.
    3. the remaining s − K slots: repeatedly draw a cluster with probability ∝ w_jm among
       clusters that still have unused passages.

    Within a cluster passages are taken in a uniformly random order (no repeats inside a
    subset). Probabilities get a 1e-12 floor so a weight that underflowed to 0 at very
    low temperature cannot make sampling impossible. Everything draws from ``rng``, so a
    seeded generator reproduces the subsets exactly.
    """
    if temperature <= 0:
        raise ValueError("cfrag.temperature: must be > 0")
    lab = np.asarray(labels, dtype=np.int64)
    n = len(lab)
    if n == 0:
        return []
    k = int(lab.max()) + 1
    members = [np.flatnonzero(lab == c) for c in range(k)]
    if any(len(m) == 0 for m in members):
        raise ValueError("sample_subsets: cluster labels must be 0..K-1 with no empty cluster")
    s = min(size, n)
    out: list[Subset] = []
    for _ in range(n_subsets):
        w = softmax(rng.standard_normal(k) / temperature)
        p = w + 1e-12
        queues = [list(rng.permutation(m)) for m in members]
        chosen: list[int] = []
        # Stratified pass: every cluster once, or s distinct clusters drawn by w_j.
        first = list(range(k)) if s >= k else [int(c) for c in rng.choice(k, size=s, replace=False, p=p / p.sum())]
        for c in first:
            chosen.append(int(queues[c].pop(0)))
        while len(chosen) < s:
            avail = [c for c in range(k) if queues[c]]
            pa = p[avail] / p[avail].sum()
            c = int(avail[int(rng.choice(len(avail), p=pa))])
            chosen.append(int(queues[c].pop(0)))
        out.append(Subset(tuple(float(v) for v in w), tuple(sorted(chosen))))
    return out
