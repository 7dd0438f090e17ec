"""The "Why" card's plain sentence (ui.present.why_sentence) from the explanations the real
causal scorer records on a small real library (real embedder, tokenizer and catalog): the
direction it states is the one the ranks show, the question's words it names are what the
document's A terms were absorbed by, and its own words are its heaviest B terms — in both languages.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from library_helpers import ingest_texts

from rag_desktop.app.service import RagService
from rag_desktop.core.types import Explanation
from rag_desktop.ui import i18n
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import PLAIN_B_TERMS, why_sentence

pytestmark = pytest.mark.integration

QUESTION = "How should a team prepare for a security audit of customer data?"
TEXTS = {
    # repeats the question's words and says little else
    "stuffed.txt": "Security audit of customer data. The security audit covers customer data. A team and a "
                   "security audit: customer data, security, audit, data, team, customer. " * 3,
    # answers it in words of its own
    "checklist.txt": "Before the auditors arrive, collect the access logs, the encryption key rotation records "
                     "and the incident response runbook; rehearse interviews and fix open findings. " * 3,
    "vehicles.txt": "Electric vehicles charge overnight; battery degradation depends on temperature and "
                    "charging speed. Fleet managers schedule maintenance by mileage. " * 3,
    "recipes.txt": "Knead the dough for ten minutes, let it rise, then bake the bread at two hundred degrees "
                   "until the crust is golden. " * 3,
    "policy.txt": "Customer data retention policy: records are deleted after seven years, backups are "
                  "encrypted and a team reviews access every quarter. " * 3,
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    return ingest_texts(tmp_path_factory.mktemp("why"), TEXTS)


def heads(e: Explanation) -> dict[str, str]:
    return {"up": tr("why.plain.up", old=e.baseline_rank, new=e.new_rank),
            "down": tr("why.plain.down", old=e.baseline_rank, new=e.new_rank),
            "kept": tr("why.plain.kept", old=e.baseline_rank)}


def check(e: Explanation, display: dict[str, str]) -> str:
    """The sentence for ``e`` in the current language, checked against the recorded numbers."""
    s = why_sentence(e, display)
    d = e.baseline_rank - e.new_rank
    want = "up" if d > 0 else "down" if d < 0 else "kept"
    for direction, head in heads(e).items():
        assert s.startswith(head) == (direction == want), (s, direction)
    assert s.count(str(e.new_rank)) >= 1
    sp = e.split
    assert sp is not None
    for a in sp.a_terms:
        assert f"“{display.get(a.absorbed_by, a.absorbed_by)}”" in s
    if not sp.a_terms:
        assert tr("why.plain.repeats_none") in s
    by_weight = sorted(sp.b_terms, key=lambda b: -b.weight)
    named = {f"“{display.get(b.term, b.term)}”" for b in by_weight[:PLAIN_B_TERMS]}
    repeated = {f"“{display.get(a.absorbed_by, a.absorbed_by)}”" for a in sp.a_terms}
    assert named <= set(re.findall(r"“[^”]*”", s))
    # a lighter own word is left to the fold (unless it reads as a word the sentence names anyway)
    assert set(re.findall(r"“[^”]*”", s)) == named | repeated, s
    if not sp.b_terms:
        assert tr("why.plain.own_none") in s
    return s


def test_the_sentence_says_what_the_recorded_explanation_shows(library: RagService) -> None:
    comp = library.compare(QUESTION, level="doc", ranking="causal", translate=False)
    causal, baseline = comp.causal, comp.baseline
    assert causal.explanations, causal.warnings
    base_rank = {h.unit_id: h.rank for h in baseline.hits}
    new_rank = {h.unit_id: h.rank for h in causal.hits}
    terms = {t for e in causal.explanations if e.split for t in
             [*(a.absorbed_by for a in e.split.a_terms), *(b.term for b in e.split.b_terms)]}
    display = library.surfaces(terms)
    moved = 0
    try:
        for e in causal.explanations:
            # the ranks the sentence reads are the two columns' ranks
            assert e.baseline_rank == base_rank[e.unit_id] and e.new_rank == new_rank[e.unit_id]
            moved += e.baseline_rank != e.new_rank
            i18n.set_language("en")
            en = check(e, display)
            assert en.endswith(".") and "\n" not in en
            i18n.set_language("zh")
            zh = check(e, display)
            assert zh.endswith("。") and re.search(r"[\u4e00-\u9fff]", zh)
            # no English of the sentence's own in the Chinese one (only the document's quoted words)
            assert not re.search(r"[A-Za-z]{2,}", re.sub(r"“[^”]*”", "", zh)), zh
    finally:
        i18n.set_language("en")
    assert moved, [(e.baseline_rank, e.new_rank) for e in causal.explanations]  # both heads are exercised
    path = {h.unit_id: Path(h.path).name for h in causal.hits}
    stuffed = next(e for e in causal.explanations if path[e.unit_id] == "stuffed.txt")
    assert stuffed.new_rank > stuffed.baseline_rank  # the document that only repeats the question fell
    assert stuffed.split is not None and stuffed.split.a_terms  # it repeats the question ...
    with i18n.using("en"):
        assert why_sentence(stuffed, display).startswith(heads(stuffed)["down"])
    assert "“audit”" in why_sentence(stuffed, display)  # ... and the sentence names what it repeats


def test_a_rank_that_did_not_move_is_never_called_a_move(library: RagService) -> None:
    comp = library.compare(QUESTION, level="doc", ranking="causal", translate=False)
    for e in comp.causal.explanations:
        for old in (e.new_rank - 1, e.new_rank, e.new_rank + 1):
            if old < 1:
                continue
            moved = dataclasses.replace(e, baseline_rank=old)
            for lang in ("en", "zh"):
                with i18n.using(lang):
                    s = why_sentence(moved)
                    up, down, kept = heads(moved).values()
                    assert s.startswith(up if old > e.new_rank else down if old < e.new_rank else kept), s
