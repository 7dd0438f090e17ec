"""Reciprocal rank fusion (core.fusion) against a slow, obvious reference, and the question-translation
helpers of app.crosslang."""

from __future__ import annotations

import itertools
import random

import pytest

from rag_desktop.app.crosslang import needs_translation
from rag_desktop.core.fusion import RRF_K, fuse, rrf_order, rrf_scores
from rag_desktop.core.replies import clean_translation
from rag_desktop.core.types import Explanation, Hit, RankedList


def reference_rrf(rankings: list[list[int]], k: int) -> list[tuple[int, float]]:
    """Cormack et al. (2009) written out as plainly as possible: for every document of the union,
    look it up in every ranking by a linear scan, add 1/(k + rank); then sort by hand-written
    comparisons (bubble sort), ties by best single rank, then earlier ranking, then id."""
    union: list[int] = []
    for r in rankings:
        for d in r:
            if d not in union:
                union.append(d)
    rows = []
    for d in union:
        score = 0.0
        best = (10**9, 10**9)
        for i, r in enumerate(rankings):
            for pos in range(len(r)):
                if r[pos] == d:
                    score += 1.0 / (k + pos + 1)
                    if (pos + 1, i) < best:
                        best = (pos + 1, i)
        rows.append((d, score, best))

    def before(a: tuple[int, float, tuple[int, int]], b: tuple[int, float, tuple[int, int]]) -> bool:
        if abs(a[1] - b[1]) > 1e-15:
            return a[1] > b[1]
        if a[2] != b[2]:
            return a[2] < b[2]
        return a[0] < b[0]

    for i in range(len(rows)):
        for j in range(len(rows) - 1 - i):
            if before(rows[j + 1], rows[j]):
                rows[j], rows[j + 1] = rows[j + 1], rows[j]
    return [(d, s) for d, s, _ in rows]


@pytest.mark.parametrize("seed", range(40))
def test_rrf_matches_the_reference_on_random_rankings(seed: int) -> None:
    rng = random.Random(seed)
    n_lists = rng.choice([1, 2, 3])
    pool = list(range(rng.randint(1, 30)))
    rankings = [rng.sample(pool, rng.randint(0, len(pool))) for _ in range(n_lists)]
    k = rng.choice([0, 1, 10, RRF_K])
    ref = reference_rrf(rankings, k)
    scores = rrf_scores(rankings, k)
    assert rrf_order(rankings, k) == [d for d, _ in ref]
    for d, s in ref:
        assert scores[d] == pytest.approx(s, abs=1e-12)


def test_rrf_k60_prefers_agreement_over_one_first_place() -> None:
    # 2nd and 3rd in both rankings beats 1st in one ranking and absent in the other (the reason for k = 60)
    order = rrf_order([[10, 20, 30], [40, 30, 20]])
    assert order.index(20) < order.index(10) and order.index(30) < order.index(40)
    assert RRF_K == 60


def test_rrf_ties_are_deterministic() -> None:
    # 1 is first in the typed question's ranking, 2 first in the translation's: same score, the typed one wins
    assert rrf_order([[1, 3], [2, 4]]) == [1, 2, 3, 4]
    assert rrf_order([[1, 3], [2, 3]]) == [3, 1, 2]  # 2nd in both beats 1st in one
    for perm in itertools.permutations([5, 6, 7]):
        assert rrf_order([list(perm), list(reversed(perm))]) == rrf_order([list(perm), list(reversed(perm))])


def _hit(uid: int, rank: int, lang: str = "en") -> Hit:
    return Hit(uid, uid, "doc", f"doc {uid}", f"/d/{uid}.txt", 1, f"text {uid}", 0.5 + uid / 100, rank, lang)  # type: ignore[arg-type]


def _expl(uid: int, base: int, new: int, s_c: float) -> Explanation:
    return Explanation(uid, base, new, 0.5, s_c, None, None, False, 0)


def test_fuse_keeps_the_best_rankings_hit_and_explanation() -> None:
    typed = RankedList("hybrid", (_hit(1, 1), _hit(2, 2), _hit(3, 3)),
                       (_expl(1, 2, 1, 0.9), _expl(2, 1, 2, 0.8), _expl(3, 3, 3, 0.7)), ("w1",), "typed")
    other = RankedList("hybrid", (_hit(3, 1, "zh"), _hit(4, 2, "zh"), _hit(1, 3, "zh")),
                       (_expl(3, 1, 1, 0.95), _expl(4, 2, 2, 0.6), _expl(1, 3, 3, 0.5)), ("w1", "w2"), "other")
    base_ranks = {1: 2, 3: 1, 2: 3, 4: 4}
    f = fuse([typed, other], limit=3, baseline_ranks=base_ranks)
    uids = [h.unit_id for h in f.ranked.hits]
    assert uids == rrf_order([[1, 2, 3], [3, 4, 1]])[:3]
    assert [h.rank for h in f.ranked.hits] == [1, 2, 3]
    for h, src, e in zip(f.ranked.hits, f.found_by, f.ranked.explanations, strict=True):
        assert e.unit_id == h.unit_id and e.new_rank == h.rank and e.baseline_rank == base_ranks[h.unit_id]
        best = typed if src == 0 else other
        assert h.lang == next(x.lang for x in best.hits if x.unit_id == h.unit_id)
    # 3 was 1st for the translation (3rd typed): its explanation is the translation's
    e3 = next(e for e in f.ranked.explanations if e.unit_id == 3)
    assert e3.s_c == 0.95 and f.found_by[uids.index(3)] == 1
    assert f.ranked.warnings == ("w1", "w2") and f.ranked.label == "typed"


@pytest.mark.parametrize("seed", range(20))
def test_keep_holds_the_first_rankings_head_and_orders_the_rest_by_rrf(seed: int) -> None:
    rng = random.Random(seed)
    pool = list(range(1, rng.randint(4, 25)))
    first = rng.sample(pool, len(pool))
    leg = rng.sample(pool, rng.randint(1, len(pool)))  # a keyword leg: some of the same units
    keep = rng.randint(0, 5)
    f = fuse([RankedList("baseline", tuple(_hit(u, r) for r, u in enumerate(first, 1))),
              RankedList("keyword", tuple(_hit(u, r) for r, u in enumerate(leg, 1)))], limit=len(pool), keep=keep)
    head = first[:keep]
    rest = [d for d, _ in reference_rrf([first, leg], RRF_K) if d not in head]
    assert [h.unit_id for h in f.ranked.hits] == head + rest
    assert [h.rank for h in f.ranked.hits] == list(range(1, len(pool) + 1))


def test_a_keyword_leg_does_not_push_the_columns_best_unit_out_of_the_sources() -> None:
    # The column's best unit (7) shares no word with the question, so the keyword leg does not hold it;
    # five units that share one everyday word each do. Plain RRF puts all five above it: out of the five
    # sources an answer reads. Kept, the column's first three stay, and the leg's best fills the rest.
    column = [7, 8, 9, 1, 2, 3, 4, 5]
    leg = [1, 2, 3, 4, 5]
    lists = [RankedList("baseline", tuple(_hit(u, r) for r, u in enumerate(column, 1))),
             RankedList("keyword", tuple(_hit(u, r) for r, u in enumerate(leg, 1)))]
    assert [h.unit_id for h in fuse(lists, limit=8).ranked.hits][:5] == [1, 2, 3, 4, 5]
    assert [h.unit_id for h in fuse(lists, limit=8, keep=3).ranked.hits][:5] == [7, 8, 9, 1, 2]


def test_one_ranking_passes_through_unchanged() -> None:
    r = RankedList("baseline", (_hit(1, 1), _hit(2, 2)))
    f = fuse([r], limit=1, baseline_ranks={1: 1})
    assert f.ranked is r and f.found_by == (0, 0)


def test_needs_translation_only_for_the_other_language_present() -> None:
    assert needs_translation("zh", {"zh": 3, "en": 1}) == "en"
    assert needs_translation("en", {"zh": 3, "en": 1}) == "zh"
    assert needs_translation("zh", {"zh": 3}) is None
    assert needs_translation("en", {"en": 2, "other": 1}) is None
    assert needs_translation("other", {"zh": 1, "en": 1}) is None


def test_clean_translation_takes_one_line_without_source_terms() -> None:
    raw = "How does ColBERT's late interaction (后期交互) score passages?\nExtra explanation."
    assert clean_translation(raw, "zh", "en") == "How does ColBERT's late interaction score passages?"
    assert clean_translation("译文：“ColBERT 的后期交互（late interaction）如何打分？”", "en", "zh") == \
        "ColBERT 的后期交互如何打分？"
    assert clean_translation("Translation: \"Why (the cards)?\"", "zh", "en") == "Why (the cards)?"
    assert clean_translation("   ", "zh", "en") == ""
    # A title mark that opens the question is the title's, not a quote (seen: "玻璃小屋》的主角是谁？").
    assert clean_translation("《玻璃港》的主角是谁？", "en", "zh") == "《玻璃港》的主角是谁？"
    assert clean_translation("“《玻璃港》的导演出生在哪个城市？”", "en", "zh") == "《玻璃港》的导演出生在哪个城市？"
    assert clean_translation("仍然是中文的回答", "zh", "en") == ""  # not in the target language: unusable


@pytest.mark.parametrize(("source", "target", "question"), [("zh", "en", "ColBERT 的后期交互是如何给段落打分的？"),
                                                             ("en", "zh", "How long is the conclusion valid?")])
def test_question_translation_prompt_is_short_and_names_the_languages(source: str, target: str,
                                                                      question: str) -> None:
    from rag_desktop.core import prompting

    msgs = prompting.build_question_translation_messages(question, source, target)  # type: ignore[arg-type]
    assert [m.role for m in msgs] == ["system", "user"] and msgs[-1].content == question
    assert ("Chinese" if source == "zh" else "英文") in msgs[0].content
    with pytest.raises(ValueError):
        prompting.build_question_translation_messages(question, target, target)  # type: ignore[arg-type]
