"""The decision report: JSON with everything, HTML with everything escaped."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from test_gui_support import SURFACES, make_cf_result, make_comparison

from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, Citation, RankedList
from rag_desktop.ui import i18n
from rag_desktop.ui.report import DecisionReport

EVIL = "<script>alert(1)</script><img src='http://evil/x.png'>"


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def hostile_report() -> DecisionReport:
    comp = make_comparison(query="Why? " + EVIL)
    base = comp.baseline
    bad_hits = tuple(dataclasses.replace(h, title=h.title + EVIL, text=EVIL + h.text) for h in base.hits)
    comp = dataclasses.replace(comp, baseline=RankedList("baseline", bad_hits, (), (), base.label))
    ans = Answer("It is matching bias [1] " + EVIL + " [7].",
                 (Citation(1, True, 1, 1, "T" + EVIL, "/x.pdf", 1), Citation(7, False)), bad_hits[:2], "causal")
    return DecisionReport(comp.query, comp, {"causal": ans}, make_cf_result(), SURFACES, "en", Settings(),
                          created="2025-01-01T00:00:00+00:00")


def test_html_escapes_every_untrusted_string(tmp_path: Path) -> None:
    rep = hostile_report()
    html_path, json_path = rep.write(tmp_path / "report")
    assert html_path.suffix == ".html" and json_path.suffix == ".json"
    page = html_path.read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;" in page
    parser = TagCollector()
    parser.feed(page)
    assert "script" not in parser.tags and "img" not in parser.tags and "a" not in parser.tags
    assert not any(k.startswith("on") for k, _ in parser.attrs)
    assert "default-src 'none'" in page  # CSP: nothing remote, no scripts
    # the hypothesis answer "<b>and</b>" stays text
    assert "&lt;b&gt;and&lt;/b&gt;" in page


def test_html_shows_columns_arrows_chips_answers_and_trace() -> None:
    page = hostile_report().to_html()
    for needle in ("Baseline", "Causal rerank", "CF-RAG", "▲2", "▼1", "class='chip A'", "class='chip B'",
                   "selection", "security", "cite bad", "Counterfactual questions", "φ_causal", "Decision"):
        assert needle in page, needle
    i18n.set_language("en")
    zh = dataclasses.replace(hostile_report(), language="zh").to_html()
    assert "决策报告" in zh and "因果重排序" in zh and "lang='zh'" in zh
    assert i18n.language() == "en"  # writing a Chinese report does not switch the UI


def test_json_holds_everything_and_is_strict(tmp_path: Path) -> None:
    rep = hostile_report()
    _h, json_path = rep.write(tmp_path / "r.html")
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert data["format"] == "rag_desktop.decision_report/1"
    assert data["question"].startswith("Why?")
    assert [r["change_text"] for r in data["rank_changes"]["causal"]] == ["▲2", "▼1", "▲2", "▼2", "▼1"]
    assert [r["change"] for r in data["rank_changes"]["causal"]] == [2, -1, 2, -2, -1]
    causal = data["comparison"]["causal"]
    assert causal["explanations"][0]["split"]["b_terms"][0]["term"] == "lab"
    assert data["answers"]["causal"]["citations"][1] == {"n": 7, "valid": False, "doc_id": None, "unit_id": None,
                                                        "title": "", "path": "", "page": None}
    assert data["cfrag"]["trace"]["decision"]["kind"] == "select"
    assert len(data["cfrag"]["trace"]["counterfactuals"]) == 2
    assert data["why"]["3"][0].startswith("It moved up by 2")
    assert data["settings"]["retrieval"]["k"] == 20
    assert not re.search(r"\bNaN\b|Infinity", json_path.read_text(encoding="utf-8"))
