"""Presentation logic without Qt: rank changes, highlight spans, citations, the "Why" text.

Kept free of PySide6 so it is fast to test and the HTML/JSON report can share it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rag_desktop.core import citations
from rag_desktop.core.abstain import Abstention
from rag_desktop.core.causal_context import WordSpan
from rag_desktop.core.cfrag import evidence_rows, margin_summary
from rag_desktop.core.cfrag.arbitration import AGREEMENT_MEASURE
from rag_desktop.core.cfrag.plain import hypothesis_name
from rag_desktop.core.cfrag.types import CFTrace, DecisionTrace, EvidenceTrace
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.text import HAN_RUN
from rag_desktop.core.types import Explanation, Hit, KeywordSplit, Progress, RankedList
from rag_desktop.ui.cf_notes import cf_note
from rag_desktop.ui.i18n import has_tr, tr

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
    """One CF-RAG column row (order and groups: :func:`rag_desktop.core.cfrag.evidence_rows`)."""

    rank: int
    evidence: EvidenceTrace
    used_by_chosen: bool  # read by the call the answer comes from (DecisionTrace.read_ids)
    group: str = "kept"  # "chosen", "kept" or "filtered" (then evidence.status says why)
    cited: bool = False  # the answer's rationale cites it

    @property
    def margin(self) -> float:
        """s(q,e) − max_q' s(q',e): the passage's share of φ_causal (paper 002, Eq. for φ_causal)."""
        return self.evidence.s_q - (self.evidence.max_s_cf if self.evidence.max_s_cf is not None else 0.0)


def cfrag_rows(trace: CFTrace) -> list[CFRow]:
    """What CF-RAG used first — the chosen hypothesis's evidence in its prompt order — then
    the other kept evidence by s(q,e), then the filtered-out passages (marked); Δ is an
    annotation, not the order (ordering by Δ ranked noise first)."""
    return [CFRow(i, r.evidence, r.group == "chosen", r.group, r.cited)
            for i, r in enumerate(evidence_rows(trace), start=1)]


def decision_key(d: DecisionTrace) -> str:
    """The i18n key that says how the CF-RAG answer was decided. A "reread" synthesis has its
    own words: it showed the model no candidate, so "synthesised" would misstate it."""
    return "trace.decision.reread" if d.kind == "synthesize" and d.synthesis_style == "reread" \
        else f"trace.decision.{d.kind}"


def abstention_key(abstention: Abstention) -> str:
    """The i18n key of the status that says why an answer is "not in your documents" (core.abstain's
    reasons; "not_held" without recorded odds reads as the words' decision)."""
    if abstention.written or abstention.reason == "unrelated":
        return f"answer.{abstention.reason}"
    return "answer.not_held" if abstention.reason == "not_held" and abstention.judged is not None \
        else "answer.abstained"


def paths_ran(trace: CFTrace) -> bool:
    """Whether CF-RAG's counterfactual paths ran: where the standard answer stood before them, the
    trace has no questions, evidence, clusters or drafts, and no agreement was measured."""
    return bool(trace.hypotheses or trace.counterfactuals or trace.evidence)


def decision_line(trace: CFTrace) -> str:
    """The decision with its agreement and threshold, in the person's language; where the paths did
    not run, the decision alone (an agreement of 1.00 against 0.00 would be numbers nothing measured)."""
    d = trace.decision
    if not paths_ran(trace):
        return tr("trace.decision_not_run", kind=tr(decision_key(d)))
    measure = tr("trace.agreement_measure") if d.agreement_measure == AGREEMENT_MEASURE else d.agreement_measure
    return tr("trace.decision_line", kind=tr(decision_key(d)), agr=fmt(d.agreement, 2), measure=measure,
              thr=fmt(d.threshold, 2))


def cf_detail_lines(trace: CFTrace) -> list[str]:
    """The numbers behind the CF-RAG column's plain sentences (its "Details" fold): the decision and
    its agreement, Δ's spread and noise, each draft's φ_coh, φ_causal and Ψ, the run's warnings."""
    d = trace.decision
    lines = [tr("col.cf_sub", kind=tr(decision_key(d)), n=len(trace.counterfactuals),
                scorer=scorer_text(trace.scorer, trace.scorer_is_substitute))]
    if trace.counterfactuals:
        m = margin_summary(trace)  # Δ is an annotation with its noise level, not the order
        lines.append(tr("col.cf_margin_ok" if m.separates else "col.cf_margin_noise",
                        spread=fmt(m.spread, 3), noise=fmt(m.noise, 3)))
    for h in sorted(trace.hypotheses, key=lambda h: h.rank):
        lines.append(tr("trace.hyp_scores", j=hypothesis_name(h.index), coh=fmt(h.phi_coh),
                        causal=fmt(h.phi_causal), psi=fmt(h.psi)))
    if trace.hypotheses:
        lines.append(tr("trace.agreement", agr=fmt(d.agreement, 2), thr=fmt(d.threshold, 2)))
    lines += ["⚠ " + cf_note(w) for w in trace.warnings]
    lines.append(tr("trace.all_numbers"))
    return lines


def cfrag_row_note(trace: CFTrace, row: CFRow) -> tuple[str, dict[str, str]]:
    """The note on a CF-RAG row (an i18n key and its arguments): cited by the answer, read by
    the winning hypothesis or by the answering call, filtered out (and why), or nothing."""
    if row.cited:
        return "col.cf_cited", {}
    if row.used_by_chosen:
        return ("col.cf_used" if trace.decision.chosen >= 0 else "col.cf_read"), {}
    if row.group == "filtered":
        return "col.cf_filtered", {"why": tr(f"trace.status.{row.evidence.status}")}
    return "", {}


def cfrag_hits(trace: CFTrace) -> list[Hit]:
    """The CF-RAG rows as hits ranked 1..n (for rank changes, selection and the report)."""
    out: list[Hit] = []
    for row in cfrag_rows(trace):
        h = row.evidence.hit
        out.append(Hit(h.unit_id, h.doc_id, h.level, h.title, h.path, h.page, h.text, h.s_sim, row.rank, h.lang))
    return out


# --------------------------------------------------------------------------- highlighting

_HAN = HAN_RUN  # core.text: the one Han class (keywords, jieba and the language detector use it too)


def _term_pattern(term: str) -> re.Pattern[str] | None:
    t = term.strip()
    if not t:
        return None
    if _HAN.search(t):
        return re.compile(re.escape(t))
    # Latin terms may be Snowball stems ("secur"): match them as word prefixes, never
    # inside another word ("art" must not light up "start").
    return re.compile(rf"(?<![^\W_]){re.escape(t)}[^\W_]*", re.IGNORECASE)


def _norm(term: str) -> str:
    return unicodedata.normalize("NFKC", term.strip()).casefold()


def _word_matches(term: str, words: Sequence[WordSpan]) -> Iterable[tuple[int, int]]:
    """Where ``term`` covers whole words: a word whose text or key (stem) is the term; for a
    Chinese term also a run of adjacent jieba words that spell it (a domain word the
    segmenter splits, e.g. 数据 + 出境)."""
    key = _norm(term)
    han = bool(_HAN.search(key))
    for i, (s, e, word, k) in enumerate(words):
        if word == key or k == key:
            yield s, e
            continue
        if han and key.startswith(word):
            acc, end, j = word, e, i + 1
            while j < len(words) and len(acc) < len(key) and words[j][0] == end and key.startswith(acc + words[j][2]):
                acc += words[j][2]
                end = words[j][1]
                j += 1
            if acc == key:
                yield s, end


def highlight_spans(text: str, terms: Iterable[tuple[str, SpanKind]],
                    words: Sequence[WordSpan] | None = None) -> list[tuple[int, int, SpanKind]]:
    """Non-overlapping (start, end, kind) spans of ``terms`` in ``text``, sorted by start.

    With ``words`` (the text's words from the keyword tokenizer) a term lights whole words
    only: "one" never inside "alone", and the stem "particip" all of "participants"; Chinese
    terms light jieba's words. Without them (no tokenizer at hand) a Latin term matches as a
    word prefix, never inside a word, and a Chinese term as a substring.

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
        if key in seen or not key:
            continue
        seen.add(key)
        if words is not None:
            found: Iterable[tuple[int, int]] = _word_matches(term, words)
        else:
            pat = _term_pattern(term)
            if pat is None:
                continue
            found = (m.span() for m in pat.finditer(text))
        for s, e in found:
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
    start, end = snippet_bounds(flat, limit, focus)
    piece = flat[start:end]
    if start > 0:
        piece = "…" + piece
    if end < len(flat):
        piece += "…"
    return piece


def snippet_bounds(flat: str, limit: int = 240, focus: int | None = None) -> tuple[int, int]:
    """[start, end) of :func:`snippet`'s excerpt in ``flat`` (text with single spaces)."""
    start = 0
    if focus is not None and focus > 60:
        start = focus - 40
        # begin at a word boundary (any character is a boundary in Chinese text)
        while 0 < start < len(flat) and flat[start - 1] != " " and not _HAN.match(flat[start]):
            start -= 1
    return start, min(len(flat), start + limit)


# --------------------------------------------------------------------------- column labels


def variant_text(variant: str) -> str:
    """The causal column's ordering in the UI language (hybrid / causal / baseline order)."""
    key = f"choice.{variant}"
    return tr(key) if has_tr(key) else variant


def tau_source_text(source: str, percentile: float | None = None) -> str:
    """Where τ came from, in the UI language. The retriever says it in English for the CLI
    (app/retrieval.py: "settings", "calibrated at ingest (…)", "paper default (…)")."""
    if source == "settings":
        return tr("tau.src.settings")
    if source.startswith("calibrated at ingest"):
        m = re.search(r"\((\d+(?:\.\d+)?)", source)
        p = f"{percentile:g}" if percentile is not None else (m.group(1) if m else "?")
        return tr("tau.src.ingest", p=p)
    if source.startswith("paper default"):
        return tr("tau.src.paper")
    return source


def scorer_text(identity: str, is_substitute: bool) -> str:
    """Who computes s(q,e): a cross-encoder's name, or the labelled substitute in the UI language."""
    return tr("scorer.substitute") if is_substitute else identity


def ce_label_text(label: str) -> str:
    """The cross-encoder column's subtitle in the UI language from the retriever's English label
    ("Cross-encoder: <model>" / "Substitute (not a cross-encoder): <identity>", app/retrieval.py)."""
    substitute = label.startswith("Substitute")
    identity = label.split(": ", 1)[-1] if label else ""
    return tr("col.ce_sub", scorer=scorer_text(identity, substitute))


def crosslang_text(cross: object | None) -> str:
    """The question's other-language search (``Comparison.cross_language``) in one line, or ""
    when there was none to make (single-language library, setting off, not zh/en)."""
    status = str(getattr(cross, "status", ""))
    if status == "fused":
        q = str(getattr(cross, "translated", ""))
        secs = float(getattr(cross, "seconds", 0.0) or 0.0)
        return tr("crosslang.also_in", q=q, s=fmt(secs, 1)) if secs > 0 else tr("crosslang.also", q=q)
    if status == "timeout":
        return tr("crosslang.timeout", s=fmt(float(getattr(cross, "timeout_s", 0.0) or 0.0), 0))
    if status in ("no_generator", "failed"):
        return tr(f"crosslang.{status}")
    return ""


def found_by_translation(cross: object | None, column: str, unit_id: int) -> bool:
    """True when the translated question, not the typed one, ranked this hit best in ``column``."""
    found = getattr(cross, "translated_found", None) or {}
    return unit_id in found.get(column, ())


def causal_off_text(off: object) -> str:
    """Why the causal column shows the baseline order (``Comparison.causal_off``), in words."""
    code = str(getattr(off, "code", ""))
    if code == "chosen":
        return tr("col.causal_off_chosen")
    if code == "gate":
        n = getattr(off, "n_probes", None)
        rel = getattr(off, "reliability", None)
        share = getattr(off, "echo_share", None)
        if getattr(off, "own_probes", False) and share is not None:
            return tr("col.causal_off_gate_self", n=n if n is not None else "—", share=f"{share:.0%}",
                      rel=f"{rel:.0%}" if rel is not None else "—")
        return tr("col.causal_off_gate", dc=fmt(getattr(off, "delta_causal", None)),
                  dh=fmt(getattr(off, "delta_hybrid", None)), metric=getattr(off, "metric", "") or "—",
                  n=n if n is not None else "—", rel=f"{rel:.0%}" if rel is not None else "—")
    return ""


def gate_evidence_text(verdict: Mapping[str, Any] | None) -> str:
    """How the gate's decision in ``verdict`` (app.verdict.Verdict.to_json) was reached, in words:
    who labelled its probes, how many, the means and Δs, the reliability and when ("" when the
    verdict carries no record and was not left uncalibrated)."""
    if not verdict:
        return ""
    if verdict.get("calibrated_by") is None:
        return tr("gate.evidence.none") if verdict.get("reason") == "not_calibrated" else ""
    when = str(verdict.get("calibrated_at") or "")[:10] or tr("gate.when_unknown")
    rel = verdict.get("reliability")
    share, thr, k = verdict.get("echo_share"), verdict.get("echo_threshold"), verdict.get("echo_count")
    if verdict.get("calibrated_by") == "library" and isinstance(share, int | float) and k is not None:
        return tr("gate.evidence.library", k=k, n=verdict.get("n_probes"), share=round(100 * share),
                  thr=round(100 * float(thr)) if isinstance(thr, int | float) else "—",
                  rel=round(100 * float(rel)) if isinstance(rel, int | float) else "—", when=when,
                  s=fmt(verdict.get("seconds"), 3))
    return tr(f"gate.evidence.{verdict.get('calibrated_by')}", n=verdict.get("n_probes") or 0,
              metric=verdict.get("metric") or "MRR@10", mb=fmt(verdict.get("mean_baseline")),
              mc=fmt(verdict.get("mean_causal")), mh=fmt(verdict.get("mean_hybrid")),
              dc=fmt(verdict.get("delta_causal")), dh=fmt(verdict.get("delta_hybrid")),
              rel=round(100 * float(rel)) if isinstance(rel, int | float) else "—", when=when,
              s=fmt(verdict.get("seconds"), 1))


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
    text = f"{x:.{digits}f}"
    # a tiny negative rounds to "-0.000": show it as the zero it reads as
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


# Below this spread of s_c over the candidates (cosine units) the re-ranker cannot tell them
# apart: e5-style encoders put related texts within a few hundredths. Our choice, for wording.
FLAT_SPREAD = 0.02


def hold_lines(expl: Explanation, ranked: RankedList) -> list[str]:
    """Why a candidate kept its baseline rank, from the scores of every candidate (read from
    the explanations, never recomputed): the column's own order, a flat s_c, or its neighbours."""
    if ranked.method in ("baseline", "gated_off"):
        return [tr("why.hold_baseline_order")]
    out: list[str] = []
    s_c = [e.s_c for e in ranked.explanations if e.s_c is not None]
    if len(s_c) >= 2 and max(s_c) - min(s_c) < FLAT_SPREAD:
        out.append(tr("why.hold_flat", lo=fmt(min(s_c)), hi=fmt(max(s_c)), n=len(s_c)))
    use_hybrid = expl.s_hybrid is not None
    label = tr("score.hybrid") if use_hybrid else tr("score.s_c")

    def score(e: Explanation) -> float | None:
        return e.s_hybrid if use_hybrid else e.s_c

    by_rank = {e.new_rank: e for e in ranked.explanations}
    above, below = by_rank.get(expl.new_rank - 1), by_rank.get(expl.new_rank + 1)
    v = score(expl)
    if v is None:
        return out
    parts = []
    if above is not None and score(above) is not None:
        parts.append(tr("why.hold_above", v=fmt(score(above)), r=above.new_rank))
    if below is not None and score(below) is not None:
        parts.append(tr("why.hold_below", v=fmt(score(below)), r=below.new_rank))
    out.append(tr("why.hold_between", score=label, v=fmt(v), n=len(ranked.explanations),
                  r=expl.new_rank, where="; ".join(parts) or "—"))
    return out


# How many of its own (B) words the plain sentence names: the heaviest few carry the point; the
# rest are in the fold (why_lines) with their weights.
PLAIN_B_TERMS = 3


def why_sentence(expl: Explanation, display: Mapping[str, str] | None = None) -> str:
    """The "Why" card's opening: one plain sentence (current UI language) built only from the
    recorded explanation — the direction from its baseline and causal ranks, the question's words
    it only repeats (what its A terms were absorbed by) and its heaviest own B words."""
    d_ = display or {}

    def quoted(terms: Iterable[str]) -> str:  # the same quotation marks in both languages
        return tr("why.plain.sep").join(f"“{d_.get(t, t)}”" for t in terms)

    d = expl.baseline_rank - expl.new_rank
    if d > 0:
        head = tr("why.plain.up", old=expl.baseline_rank, new=expl.new_rank)
    elif d < 0:
        head = tr("why.plain.down", old=expl.baseline_rank, new=expl.new_rank)
    else:
        head = tr("why.plain.kept", old=expl.baseline_rank)
    sp = expl.split
    repeated = list(dict.fromkeys(a.absorbed_by for a in sp.a_terms)) if sp is not None else []
    own = [b.term for b in sorted(sp.b_terms, key=lambda b: -b.weight)[:PLAIN_B_TERMS]] if sp is not None else []
    rep = tr("why.plain.repeats", terms=quoted(repeated)) if repeated else tr("why.plain.repeats_none")
    carry = tr("why.plain.own", terms=quoted(own)) if own else tr("why.plain.own_none")
    return tr("why.plain.sentence", head=head, repeats=rep, own=carry)


def why_lines(expl: Explanation, hit: Hit | None = None, hybrid_weight: float | None = None,
              display: Mapping[str, str] | None = None, ranked: RankedList | None = None) -> list[str]:
    """The "Why" card in plain words (current UI language), one sentence per line.

    ``display`` maps stored terms (Snowball stems such as "secur") to readable words;
    ``ranked`` (the causal list) lets a candidate that kept its rank say what held it there.
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
        if ranked is not None:
            lines.extend(hold_lines(expl, ranked))
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


def progress_text(p: Progress) -> str:
    """A status line for a Progress on the way to an answer: model preparation (the model's full name,
    MB done of MB, ETA), passages, the prompt read, the question asked across languages, the needs check's
    source left out."""
    if p.stage in ("join_model", "verify_model") and p.total > 0:
        key = "answer.preparing_eta" if p.eta_s is not None else "answer.preparing_bytes"
        return tr(key, msg=p.message or tr(f"stage.{p.stage}"), done=f"{p.current / 1e6:,.0f}",
                  total=f"{p.total / 1e6:,.0f}", eta=f"{p.eta_s or 0:.0f}")
    if p.stage == "model_ready":  # the model's name and size, not its bytes as "n/N"
        return tr("answer.model_ready", msg=p.message or tr("stage.model_ready"), total=f"{p.total / 1e6:,.0f}")
    if p.stage == "reading":
        return tr("answer.reading", n=f"{p.current:,}", model=p.message)
    if p.stage == "asked_across":  # app.asked_across: the question's translation, asked of the other language
        return tr("answer.asking_across", q=p.message, lang=tr("lang." + detect_lang(p.message)))
    if p.stage == "passages":
        return tr("answer.passages", n=p.current, total=p.total)
    if p.stage == "needs":  # app.source_needs: k of n cited sources left out so far
        if p.total <= 0:
            return tr("needs.starting")
        return tr("needs.running", k=min(p.current + 1, p.total), n=p.total, title=p.message)
    return tr("answer.preparing", msg=p.message or p.stage, cur=p.current, total=p.total)
