"""Presentation logic of the UI (no Qt): rank changes, highlights, citations, the "Why" text."""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest
from test_gui_support import make_cf_result, make_lists

from rag_desktop.core import replies
from rag_desktop.core.types import Explanation, Hit, RankedList
from rag_desktop.ui import i18n
from rag_desktop.ui.i18n import has_tr
from rag_desktop.ui.present import (
    cfrag_hits,
    cfrag_row_note,
    cfrag_rows,
    citation_spans,
    decision_key,
    format_eta,
    highlight_spans,
    rank_change,
    snippet,
    why_lines,
)


@pytest.fixture(autouse=True)
def _english() -> None:
    i18n.set_language("en")


def reference_change(baseline: RankedList, h: Hit) -> str:
    """Obviously-correct reference: look the row's document up in the baseline by scanning."""
    same_level = baseline.hits and baseline.hits[0].level == h.level
    for b in baseline.hits:
        if (b.unit_id == h.unit_id) if same_level else (b.doc_id == h.doc_id):
            d = b.rank - h.rank
            return f"▲{d}" if d > 0 else f"▼{-d}" if d < 0 else "="
    return "new"


def test_rank_changes_match_the_reference() -> None:
    base, causal = make_lists()
    got = [rank_change(base, h).text for h in causal.hits]
    assert got == [reference_change(base, h) for h in causal.hits]
    assert got == ["▲2", "▼1", "▲2", "▼2", "▼1"]
    assert rank_change(base, base.hits[0]).text == "="


def test_rank_change_across_levels_uses_the_document_and_new_when_absent() -> None:
    base, _ = make_lists()
    chunk = Hit(999, 4, "chunk", "t", "/p", 1, "x", 0.5, 1, "en")
    assert rank_change(base, chunk).delta == 3  # doc 4 was 4th at doc level
    stranger = Hit(1000, 77, "chunk", "t", "/p", 1, "x", 0.5, 2, "en")
    assert rank_change(base, stranger).delta is None
    assert rank_change(base, stranger).text == "new"
    i18n.set_language("zh")
    assert rank_change(base, stranger).text == "新"


def test_cfrag_rows_show_what_cfrag_used_first_then_kept_then_filtered() -> None:
    res = make_cf_result()
    rows = cfrag_rows(res.trace)
    # kept pool ids 0..3 (s_q 0.8, 0.7, 0.6, 0.5); the chosen hypothesis used subset 0 = (0, 2) in
    # that prompt order; then the other kept ones by s(q,e); the duplicate 4 last, marked.
    assert [r.evidence.pool_id for r in rows] == [0, 2, 1, 3, 4]
    assert [r.group for r in rows] == ["chosen", "chosen", "kept", "kept", "filtered"]
    assert [r.used_by_chosen for r in rows] == [True, True, False, False, False]
    assert [r.rank for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0].margin == pytest.approx(0.3)
    assert rows[-1].evidence.status == "duplicate"
    assert [h.rank for h in cfrag_hits(res.trace)] == [1, 2, 3, 4, 5]
    # the rationale cites [1] (pool 0) and [3], which the two-passage prompt never had
    assert [r.cited for r in rows] == [True, False, False, False, False]
    assert [cfrag_row_note(res.trace, r)[0] for r in rows] == [
        "col.cf_cited", "col.cf_used", "", "", "col.cf_filtered"]
    reread = dataclasses.replace(res.trace.decision, kind="synthesize", chosen=-1, read_ids=(0, 1, 2, 3),
                                 synthesis_style="reread", final_rationale="Only [4] says it.")
    t = dataclasses.replace(res.trace, decision=reread)
    rows = cfrag_rows(t)
    assert [r.evidence.pool_id for r in rows] == [3, 0, 1, 2, 4]  # cited first, then prompt order
    assert [cfrag_row_note(t, r)[0] for r in rows] == [
        "col.cf_cited", "col.cf_read", "col.cf_read", "col.cf_read", "col.cf_filtered"]
    assert decision_key(reread) == "trace.decision.reread"
    assert decision_key(res.trace.decision) == "trace.decision.select"
    assert has_tr("trace.decision.reread") and has_tr("col.cf_read") and has_tr("col.cf_cited")


def test_the_decision_line_says_only_what_was_measured_in_the_persons_language() -> None:
    from rag_desktop.core.cfrag.arbitration import AGREEMENT_MEASURE
    from rag_desktop.core.cfrag.types import StandardCheck
    from rag_desktop.ui.present import decision_line, paths_ran

    res = make_cf_result()
    res = dataclasses.replace(res, trace=dataclasses.replace(
        res.trace, decision=dataclasses.replace(res.trace.decision, agreement_measure=AGREEMENT_MEASURE)))
    assert paths_ran(res.trace)
    i18n.set_language("zh")
    try:
        zh = decision_line(res.trace)
        assert "两两词元 F1" in zh and "mean pairwise" not in zh and zh.startswith("决策：")
    finally:
        i18n.set_language("en")
    en = decision_line(res.trace)
    assert "agreement" in en and "mean pairwise token F1 of normalised answers" in en
    # the standard answer stood before any path ran: no agreement 1.00 against a threshold of 0.00
    check = StandardCheck("Matching bias [1].", 1.0, False, 0.5, "confident")
    d = dataclasses.replace(res.trace.decision, kind="standard", chosen=-1, read_ids=(), standard=check,
                            agreement=1.0, threshold=0.0)
    stood = dataclasses.replace(res.trace, evidence=(), hypotheses=(), counterfactuals=(),
                                rejected_counterfactuals=(), decision=d)
    assert not paths_ran(stood)
    assert decision_line(stood) == ("Decision: the standard answer stands; the counterfactual paths did not run, "
                                    "so no agreement was measured")


def reference_spans(text: str, terms: list[tuple[str, str]]) -> set[tuple[int, int, str]]:
    """Slow reference: scan every position for every term (longest first), word-start for Latin."""
    taken = [False] * len(text)
    out = set()
    for term, kind in sorted(terms, key=lambda t: -len(t[0])):
        t = term.lower()
        for i in range(len(text)):
            if text[i:i + len(t)].lower() != t:
                continue
            latin = not re.search(r"[\u4e00-\u9fff]", t)
            if latin and i > 0 and (text[i - 1].isalnum()):
                continue
            j = i + len(t)
            if latin:
                while j < len(text) and text[j].isalnum():
                    j += 1
            if not any(taken[i:j]):
                for x in range(i, j):
                    taken[x] = True
                out.add((i, j, kind))
    return out


@pytest.mark.parametrize("text,terms", [
    ("Security of the secure building; insecure start.", [("secur", "B"), ("art", "A"), ("build", "B")]),
    ("数据出境安全评估：数据出境需要评估。", [("数据", "A"), ("数据出境", "B"), ("评估", "A")]),
    ("The Wason selection task, selections, WASON.", [("wason", "A"), ("select", "A"), ("task", "B")]),
])
def test_highlight_spans_agree_with_the_reference(text: str, terms: list[tuple[str, str]]) -> None:
    got = highlight_spans(text, terms)  # type: ignore[arg-type]
    assert set(got) == reference_spans(text, terms)
    assert got == sorted(got)
    for (_s1, e1, _k1), (s2, _e2, _k2) in itertools.pairwise(got):
        assert e1 <= s2  # never overlapping


def test_highlight_never_lights_a_term_inside_another_word() -> None:
    text = "start artistic art"
    spans = highlight_spans(text, [("art", "A")])
    assert [text[s:e] for s, e, _ in spans] == ["artistic", "art"]


def test_citation_spans_cover_the_numbers_the_core_parser_finds() -> None:
    text = "A [1]. B [2, 3] and [4-5]. C 【6】 D [1](http://x) E [12]."
    hits = [Hit(i, i, "chunk", f"t{i}", "/p", 1, "x", 0.5, i, "en") for i in range(1, 7)]
    core = [c.n for c in replies.parse_citations(text, hits)]
    spans = citation_spans(text)
    assert [n for _s, _e, n in spans] == [1, 2, 3, 4, 6, 12]  # the range "4-5" is one link to 4
    assert [text[s:e] for s, e, _ in spans] == ["1", "2", "3", "4-5", "6", "12"]
    covered: set[int] = set()
    for s, e, _n in spans:
        lo_hi = [int(x) for x in re.findall(r"\d+", text[s:e])]
        covered.update(range(lo_hi[0], lo_hi[-1] + 1))
    assert covered == set(core)
    assert text.index("[1](") + 1 not in [s for s, _e, _n in spans]  # a markdown link is not a citation


def test_why_lines_say_what_happened_in_both_languages() -> None:
    _base, causal = make_lists()
    e: Explanation = causal.explanations[0]  # doc 3: baseline 3 → 1
    lines = why_lines(e, causal.hits[0], 0.5, {"cardlog": "CardLogic"})
    text = "\n".join(lines)
    assert "moved up by 2" in text and "baseline rank 3" in text and "causal rank 1" in text
    assert "CardLogic" in text and "cardlog" not in text
    assert "No fallback" in text
    i18n.set_language("zh")
    zh = "\n".join(why_lines(e, causal.hits[0], 0.5))
    assert "上升了 2 位" in zh
    absorbed = causal.explanations[1]  # doc 1 has "research" absorbed by "task" at 0.903
    assert "余弦 0.90" in "\n".join(why_lines(absorbed))


def test_why_lines_report_the_fallback_and_an_empty_b() -> None:
    _base, causal = make_lists()
    e = causal.explanations[0]
    fb = Explanation(e.unit_id, 2, 2, 0.5, None, None, None, True, 0)
    assert any("fallback" in x for x in why_lines(fb))
    assert any("No s_c" in x for x in why_lines(fb))


def test_snippet_starts_near_the_focus_and_format_eta() -> None:
    text = "word " * 100 + "TARGET " + "more " * 100
    s = snippet(text, limit=80, focus=text.index("TARGET"))
    assert "TARGET" in s and s.startswith("…") and s.endswith("…")
    assert snippet("short text") == "short text"
    assert format_eta(None) == ""
    assert format_eta(42) == "42 s"
    assert format_eta(125) == "2 min 5 s"
