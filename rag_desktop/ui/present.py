"""Presentation logic without Qt: rank changes, highlight spans, citations, the "Why" text.

Kept free of PySide6 so it is fast to test and the HTML/JSON report can share it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from rag_desktop.core import citations
from rag_desktop.core.cfrag_types import CFTrace, EvidenceTrace
from rag_desktop.core.types import Explanation, Hit, KeywordSplit, RankedList
from rag_desktop.ui.i18n import tr

# Two colours that stay distinct for the common colour-vision deficiencies
# (Okabe–Ito orange and blue), used in chips, snippets, the viewer and the legend.
COLOR_A = "#E69F00"  # A(d): terms shared with / absorbed by the query
COLOR_B = "#56B4E9"  # B(d): the residual terms that drive s_c
COLOR_REGION = "#F0E442"  # the chunk's own text region in the viewer
COLOR_SELECTED = "#D55E00"

SpanKind = Literal["A", "B", "region"]


# --------------------------------------------------------------------------- rank changes


@dataclass(frozen=True)
class RankChange:
    """Movement of one row against the baseline: ``delta`` > 0 means it moved up."""

    delta: int | None  # None: not in the baseline list ("new")

    @property
    def text(self) -> str:
        if self.delta is None:
            return tr("rank.new")
        if self.delta > 0:
            return f"▲{self.delta}"
        if self.delta < 0:
            return f"▼{-self.delta}"
        return "="


def match_key(hit: Hit, baseline_level: str) -> tuple[str, int]:
    """How a row finds itself in the baseline: the same unit, or (across levels) the same document."""
    if hit.level == baseline_level:
        return (hit.level, hit.unit_id)
    return ("doc", hit.doc_id)


def baseline_ranks(baseline: RankedList) -> tuple[str, dict[tuple[str, int], int]]:
    """The baseline's level and rank per key; across levels a document keeps its best rank."""
    level = baseline.hits[0].level if baseline.hits else "doc"
    ranks: dict[tuple[str, int], int] = {}
    for h in baseline.hits:
        ranks.setdefault((h.level, h.unit_id), h.rank)
        ranks.setdefault(("doc", h.doc_id), h.rank)
    return level, ranks


def rank_change(baseline: RankedList, hit: Hit, new_rank: int | None = None) -> RankChange:
    """▲n / ▼n / = / new for ``hit`` at ``new_rank`` (default ``hit.rank``) vs the baseline."""
    level, ranks = baseline_ranks(baseline)
    old = ranks.get(match_key(hit, level))
    if old is None:
        return RankChange(None)
    return RankChange(old - (new_rank if new_rank is not None else hit.rank))


# --------------------------------------------------------------------------- CF-RAG rows


@dataclass(frozen=True)
class CFRow:
    """One CF-RAG column row: a kept evidence passage in the order the arbitration favours."""

    rank: int
    evidence: EvidenceTrace
    used_by_chosen: bool

    @property
    def margin(self) -> float:
        """s(q,e) − max_q' s(q',e): the passage's share of φ_causal (paper 002, Eq. for φ_causal)."""
        return self.evidence.s_q - (self.evidence.max_s_cf if self.evidence.max_s_cf is not None else 0.0)


def cfrag_rows(trace: CFTrace) -> list[CFRow]:
    """Kept evidence, ordered: passages of the winning hypothesis first, then by causal margin.

    Paper 002 produces an answer, not a ranking; to sit beside the other columns we show
    the kept evidence pool. Choice (documented here, tested): evidence given to the chosen
    hypothesis (or to every hypothesis synthesised from) comes first, and within each
    group passages are ordered by the per-passage causal margin s(q,e) − max s(q',e),
    the quantity φ_causal averages, ties by s(q,e).
    """
    chosen: set[int] = set()
    d = trace.decision
    hyp_ids = {d.chosen} if d.chosen >= 0 else set(d.synthesized_from)
    subsets = {s.index: s for s in trace.subsets}
    for h in trace.hypotheses:
        if h.index in hyp_ids and h.subset in subsets:
            chosen.update(subsets[h.subset].members)
    kept = [e for e in trace.evidence if e.status == "kept"]

    def margin(e: EvidenceTrace) -> float:
        return e.s_q - (e.max_s_cf if e.max_s_cf is not None else 0.0)

    kept.sort(key=lambda e: (e.pool_id not in chosen, -margin(e), -e.s_q, e.pool_id))
    return [CFRow(i, e, e.pool_id in chosen) for i, e in enumerate(kept, start=1)]


def cfrag_hits(trace: CFTrace) -> list[Hit]:
    """The CF-RAG rows as hits ranked 1..n (for rank changes, selection and the report)."""
    out: list[Hit] = []
    for row in cfrag_rows(trace):
        h = row.evidence.hit
        out.append(Hit(h.unit_id, h.doc_id, h.level, h.title, h.path, h.page, h.text, h.s_sim, row.rank, h.lang))
    return out


# --------------------------------------------------------------------------- highlighting

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _term_pattern(term: str) -> re.Pattern[str] | None:
    t = term.strip()
    if not t:
        return None
    if _HAN.search(t):
        return re.compile(re.escape(t))
    # Latin terms may be Snowball stems ("secur"): match them as word prefixes, never
    # inside another word ("art" must not light up "start").
    return re.compile(rf"(?<![^\W_]){re.escape(t)}[^\W_]*", re.IGNORECASE)


def highlight_spans(text: str, terms: Iterable[tuple[str, SpanKind]]) -> list[tuple[int, int, SpanKind]]:
    """Non-overlapping (start, end, kind) spans of ``terms`` in ``text``, sorted by start.

    Longer terms claim their characters first, so "数据出境" is not split by "数据"; a
    term that is in both A and B (it cannot be, by Eq. 3, but a caller might pass both)
    keeps the first kind given.
    """
    taken = [False] * len(text)
    spans: list[tuple[int, int, SpanKind]] = []
    seen: set[str] = set()
    ordered = sorted(((t, k) for t, k in terms), key=lambda tk: -len(tk[0]))
    for term, kind in ordered:
        key = term.strip().lower()
        if key in seen:
            continue
        seen.add(key)
        pat = _term_pattern(term)
        if pat is None:
            continue
        for m in pat.finditer(text):
            s, e = m.span()
            if e > s and not any(taken[s:e]):
                for i in range(s, e):
                    taken[i] = True
                spans.append((s, e, kind))
    spans.sort()
    return spans


def split_terms(split: KeywordSplit | None) -> list[tuple[str, SpanKind]]:
    if split is None:
        return []
    terms: list[tuple[str, SpanKind]] = [(a.term, "A") for a in split.a_terms]
    terms += [(b.term, "B") for b in split.b_terms]
    return terms


def snippet(text: str, limit: int = 240, focus: int | None = None) -> str:
    """A one-line excerpt of ``text``; starts a little before ``focus`` (a character offset).

    Rows focus on their first highlighted term, so the snippet shows why the row is there.
    Highlights are computed again on the excerpt itself.
    """
    flat = " ".join(text.split())
    start = 0
    if focus is not None and focus > 60:
        start = focus - 40
        # begin at a word boundary (any character is a boundary in Chinese text)
        while 0 < start < len(flat) and flat[start - 1] != " " and not _HAN.match(flat[start]):
            start -= 1
    piece = flat[start : start + limit]
    if start > 0:
        piece = "…" + piece
    if start + limit < len(flat):
        piece += "…"
    return piece


# --------------------------------------------------------------------------- citations

def citation_spans(text: str) -> list[tuple[int, int, int]]:
    """(start, end, n) for every number inside a [n] / [1, 2] / [2-3] marker.

    The one grammar of ``core.citations`` (shared with the prompt, CF-RAG and the metrics):
    a bracketed year such as [2023] is not a citation. For a range the span covers the whole
    range text and points at its first number.
    """
    return citations.citation_spans(text)


# --------------------------------------------------------------------------- the "Why" card


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.{digits}f}"


def why_lines(expl: Explanation, hit: Hit | None = None, hybrid_weight: float | None = None,
              display: Mapping[str, str] | None = None) -> list[str]:
    """The "Why" card in plain words (current UI language), one sentence per line.

    ``display`` maps stored terms (Snowball stems such as "secur") to readable words.
    """
    d_ = display or {}

    def word(t: str) -> str:
        return d_.get(t, t)

    lines: list[str] = []
    d = expl.baseline_rank - expl.new_rank
    if d > 0:
        lines.append(tr("why.moved_up", old=expl.baseline_rank, new=expl.new_rank, n=d))
    elif d < 0:
        lines.append(tr("why.moved_down", old=expl.baseline_rank, new=expl.new_rank, n=-d))
    else:
        lines.append(tr("why.stayed", old=expl.baseline_rank))
    lines.append(tr("why.s_sim", v=fmt(expl.s_sim)))
    if expl.s_c is None:
        lines.append(tr("why.no_sc"))
    else:
        lines.append(tr("why.s_c", v=fmt(expl.s_c)))
    if expl.s_hybrid is not None:
        if hybrid_weight is not None:
            lines.append(tr("why.hybrid_w", v=fmt(expl.s_hybrid), w=fmt(hybrid_weight, 2)))
        else:
            lines.append(tr("why.hybrid", v=fmt(expl.s_hybrid)))
    sp = expl.split
    if sp is not None:
        if sp.a_terms:
            parts = []
            for a in sp.a_terms:
                how = tr("why.exact") if a.cosine is None else tr("why.cos", v=fmt(a.cosine, 2))
                parts.append(f"{word(a.term)} ({fmt(a.weight, 2)}; ← {word(a.absorbed_by)}, {how})")
            lines.append(tr("why.a_terms", n=len(sp.a_terms), terms="; ".join(parts)))
        else:
            lines.append(tr("why.a_none"))
        if sp.b_terms:
            lines.append(tr("why.b_terms", n=len(sp.b_terms),
                            terms="; ".join(f"{word(b.term)} ({fmt(b.weight, 2)})" for b in sp.b_terms)))
        else:
            lines.append(tr("why.b_none"))
    if expl.fallback_used:
        lines.append(tr("why.fallback_used"))
    elif sp is not None and not sp.b_terms:
        lines.append(tr("why.empty_b_demoted"))
    else:
        lines.append(tr("why.no_fallback"))
    return lines


def explanation_for(ranked: RankedList, unit_id: int) -> Explanation | None:
    for e in ranked.explanations:
        if e.unit_id == unit_id:
            return e
    return None


def format_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return ""
    s = round(seconds)
    if s < 60:
        return tr("eta.seconds", n=s)
    return tr("eta.minutes", m=s // 60, s=s % 60)
