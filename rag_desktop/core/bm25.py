"""The keyword leg of the candidate pool: Okapi BM25 over the library's stored term counts.

Dense similarity with a small multilingual encoder misses pages that a person names by an exact
word: a command, an option, a package or a statute's own term (docs/evaluation.md, "Finding the
page"). BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
2009, Eq. 3.15 with the Lucene idf that keeps every weight positive):

    score(q, d) = Σ_{t ∈ q} idf(t) · tf(t, d)·(k1 + 1) / (tf(t, d) + k1·(1 − b + b·|d| / avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

k1 = 1.2, b = 0.75 (the textbook values; Lucene's and bm25s' defaults). The terms are the ones
ingest already counts per chunk (the tokenizer, jieba for Chinese and Snowball stems for English,
through the keyword filter), so the index needs no second pass over the text: a document's counts
are the sum of its chunks'. A query term the library never saw scores nothing.

Pure: rows of counts in, unit ids out; the app builds it once per library state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

K1 = 1.2
B = 0.75


@dataclass(frozen=True)
class Posting:
    rows: npt.NDArray[np.int64]  # positions in Bm25Index.unit_ids
    tf: npt.NDArray[np.float64]


class Bm25Index:
    """BM25 over units (chunks or documents) given as (unit id, {term: count})."""

    def __init__(self, units: Iterable[tuple[int, Mapping[str, int]]], k1: float = K1, b: float = B) -> None:
        ids: list[int] = []
        lengths: list[float] = []
        post: dict[str, tuple[list[int], list[float]]] = {}
        for row, (uid, counts) in enumerate(units):
            ids.append(int(uid))
            lengths.append(float(sum(counts.values())))
            for term, n in counts.items():
                p = post.setdefault(term, ([], []))
                p[0].append(row)
                p[1].append(float(n))
        self.k1, self.b = k1, b
        self.unit_ids = np.asarray(ids, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.float64)
        self.avgdl = float(self.lengths.mean()) if ids else 0.0
        self.postings = {t: Posting(np.asarray(r, dtype=np.int64), np.asarray(f)) for t, (r, f) in post.items()}

    def __len__(self) -> int:
        return int(self.unit_ids.shape[0])

    def __contains__(self, term: object) -> bool:
        """Whether any unit contains ``term`` (core.abstain's coverage)."""
        return term in self.postings

    def idf(self, term: str) -> float:
        p = self.postings.get(term)
        df = 0 if p is None else int(p.rows.shape[0])
        n = len(self)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64]:
        """score(q, d) for every unit, in ``unit_ids`` order (a repeated query term counts again)."""
        out = np.zeros(len(self), dtype=np.float64)
        if not len(self):
            return out
        norm = self.k1 * (1.0 - self.b + self.b * self.lengths / max(self.avgdl, 1e-12))
        for t in terms:
            p = self.postings.get(t)
            if p is None:
                continue
            tf = p.tf
            out[p.rows] += self.idf(t) * tf * (self.k1 + 1.0) / (tf + norm[p.rows])
        return out

    def top(self, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """The ``k`` best (unit id, score) with a score > 0; ties by unit id."""
        s = self.scores(terms)
        hit = np.flatnonzero(s > 0)
        if hit.size == 0 or k <= 0:
            return []
        order = sorted(hit.tolist(), key=lambda i: (-s[i], int(self.unit_ids[i])))[:k]
        return [(int(self.unit_ids[i]), float(s[i])) for i in order]


__all__ = ["K1", "B", "Bm25Index"]
