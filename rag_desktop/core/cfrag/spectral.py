"""Step 4 of CF-RAG (paper 002 §3): evidence division by spectral clustering.

Gaussian affinity, normalised Laplacian, leading eigenvectors, k-means++ on the
row-normalised eigenvector rows (Ng–Jordan–Weiss), into K clusters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rag_desktop.core.cfrag.common import FloatMatrix, IntArray


def gaussian_affinity(x: npt.ArrayLike, sigma: float) -> FloatMatrix:
    """W_ij = exp(−‖e_i − e_j‖² / 2σ²) (paper 002 §3), with W_ii = 0 as in Ng–Jordan–Weiss."""
    if sigma <= 0:
        raise ValueError("cfrag.sigma: must be > 0")
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    sq = np.sum(a * a, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (a @ a.T), 0.0)
    w = np.exp(-d2 / (2.0 * sigma * sigma))
    np.fill_diagonal(w, 0.0)
    return np.asarray(w, dtype=np.float64)


def normalized_laplacian(w: npt.ArrayLike) -> FloatMatrix:
    """L = I − D^{-1/2} W D^{-1/2}; an isolated node (degree 0) gets D^{-1/2} = 0."""
    m = np.asarray(w, dtype=np.float64)
    d = m.sum(axis=1)
    inv = np.zeros_like(d)
    np.divide(1.0, np.sqrt(d), out=inv, where=d > 0)
    lap = np.eye(len(d)) - inv[:, None] * m * inv[None, :]
    return np.asarray(0.5 * (lap + lap.T), dtype=np.float64)


def _canonical_labels(labels: npt.ArrayLike) -> IntArray:
    """Renumber clusters in order of first appearance (0, 1, …) so labels are stable."""
    mapping: dict[int, int] = {}
    out = np.empty(len(np.asarray(labels)), dtype=np.int64)
    for i, lab in enumerate(np.asarray(labels).tolist()):
        if lab not in mapping:
            mapping[lab] = len(mapping)
        out[i] = mapping[lab]
    return out


def _kmeanspp_init(x: FloatMatrix, k: int, rng: np.random.Generator) -> FloatMatrix:
    n = len(x)
    chosen = [int(rng.integers(n))]
    d2 = np.sum((x - x[chosen[0]]) ** 2, axis=1)
    while len(chosen) < k:
        total = float(d2.sum())
        if total <= 0.0:
            # All remaining points coincide with a centre: pick any unchosen one uniformly.
            rest = [i for i in range(n) if i not in chosen]
            nxt = int(rest[int(rng.integers(len(rest)))])
        else:
            nxt = int(rng.choice(n, p=d2 / total))
        chosen.append(nxt)
        d2 = np.minimum(d2, np.sum((x - x[nxt]) ** 2, axis=1))
    return np.asarray(x[chosen], dtype=np.float64)


def kmeans_pp(
    x: npt.ArrayLike, k: int, rng: np.random.Generator, *, n_init: int = 8, max_iter: int = 100
) -> tuple[IntArray, float]:
    """Lloyd's k-means with k-means++ seeding, best of ``n_init`` restarts by inertia.

    An emptied cluster takes the point farthest from its centre among clusters with more
    than one member, so exactly k clusters come back. Labels are canonical (first
    appearance order). Returns (labels, inertia).
    """
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = len(a)
    if not 1 <= k <= n:
        raise ValueError(f"k-means: k = {k} must be in [1, n = {n}]")
    best_labels: IntArray | None = None
    best_inertia = math.inf
    for _ in range(max(1, n_init)):
        centres = _kmeanspp_init(a, k, rng)
        labels = np.full(n, -1, dtype=np.int64)
        for _it in range(max_iter):
            d2 = np.sum((a[:, None, :] - centres[None, :, :]) ** 2, axis=2)
            new = np.asarray(np.argmin(d2, axis=1), dtype=np.int64)
            for c in range(k):
                if not np.any(new == c):
                    counts = np.bincount(new, minlength=k)
                    movable = counts[new] > 1
                    own = d2[np.arange(n), new]
                    far = int(np.argmax(np.where(movable, own, -np.inf)))
                    new[far] = c
            if np.array_equal(new, labels):
                break
            labels = new
            centres = np.stack([a[labels == c].mean(axis=0) for c in range(k)])
        inertia = float(np.sum((a - centres[labels]) ** 2))
        if inertia < best_inertia - 1e-12:
            best_inertia, best_labels = inertia, labels.copy()
    assert best_labels is not None
    return _canonical_labels(best_labels), best_inertia


def median_sigma(x: npt.ArrayLike, fallback: float) -> float:
    """The median heuristic for σ: the median Euclidean distance over pairs i < j.

    Scales the Gaussian affinity to the data, so a typical pair has W = exp(−1/2).
    Falls back to ``fallback`` with fewer than two points or a zero median.
    """
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = len(a) if a.size else 0
    if n < 2:
        return fallback
    sq = np.sum(a * a, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (a @ a.T), 0.0)
    med = float(np.median(np.sqrt(d2[np.triu_indices(n, k=1)])))
    return med if med > 1e-12 else fallback


@dataclass(frozen=True)
class SpectralResult:
    labels: IntArray
    k_used: int
    eigenvalues: tuple[float, ...]
    inertia: float


def spectral_clustering(
    x: npt.ArrayLike,
    k: int,
    sigma: float,
    rng: np.random.Generator,
    *,
    n_init: int = 8,
    max_iter: int = 100,
) -> SpectralResult:
    """Ng–Jordan–Weiss spectral clustering (paper 002 §3).

    W = Gaussian affinity (σ), L = I − D^{-1/2} W D^{-1/2}, U = the eigenvectors of the K
    smallest eigenvalues of L (the "leading" ones of the normalised affinity), rows of U
    normalised to unit length, then k-means++ on those rows. The paper's summary says
    "前 M 个特征向量" (first M eigenvectors); we read that as the cluster count K, as in
    standard spectral clustering, since the eigenvector count must match the clusters.

    K = min(K, n): fewer passages than clusters yields one cluster per passage; n = 0
    yields no clusters.
    """
    a = np.atleast_2d(np.asarray(x, dtype=np.float64))
    n = 0 if a.size == 0 else len(a)
    if n == 0:
        return SpectralResult(np.zeros(0, dtype=np.int64), 0, (), 0.0)
    k_used = max(1, min(k, n))
    if n == 1:
        return SpectralResult(np.zeros(1, dtype=np.int64), 1, (0.0,), 0.0)
    lap = normalized_laplacian(gaussian_affinity(a, sigma))
    vals, vecs = np.linalg.eigh(lap)  # ascending eigenvalues
    u = vecs[:, :k_used]
    norms = np.linalg.norm(u, axis=1, keepdims=True)
    u = np.divide(u, norms, out=np.zeros_like(u), where=norms > 1e-12)
    labels, inertia = kmeans_pp(u, k_used, rng, n_init=n_init, max_iter=max_iter)
    return SpectralResult(labels, k_used, tuple(float(v) for v in vals[:k_used]), inertia)
