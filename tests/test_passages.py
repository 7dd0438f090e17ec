"""Answer passages: windows inside a chunk, headings, selection, the prompt header."""

from __future__ import annotations

import pytest

from rag_desktop.core import passages as P
from rag_desktop.core.prompting import build_answer_messages, source_where
from rag_desktop.core.types import Hit, Locator

STATUTE = (
    "第二章 报销标准\n\n"
    "第七条 出差人员乘坐交通工具，按规定等级报销。\n\n"
    "第八条 住宿费实行限额标准：一线城市每晚不超过600元，省会城市每晚不超过450元，其他地区每晚不超过350元。\n\n"
    "第九条 伙食补助费按出差自然天数计算，每人每天100元。"
)

TEXTBOOK = (
    "7.3 The selection task\n\n"
    + "Wason showed people four cards and a rule about vowels and even numbers. " * 3
    + "\n\n"
    + "Fewer than one in ten people turn the A and the 7, the two cards that could falsify the rule. " * 2
    + "\n\n7.3.1 Content effects\n\n"
    + "With a drinking-age rule most people choose correctly; pragmatic schemas explain why. " * 2
)


def test_windows_cover_paragraphs_exactly_and_carry_their_heading() -> None:
    ws = P.split_windows(TEXTBOOK, min_chars=100, max_chars=400)
    for w in ws:
        assert TEXTBOOK[w.start:w.end] == w.text
    assert ws[0].text.startswith("7.3 The selection task\n\nWason")  # heading merged with its paragraph
    assert any(w.text.startswith("7.3.1 Content effects") for w in ws)
    assert all(len(w.text) <= 400 or len(P.paragraphs(w.text)) == 1 for w in ws)


def test_long_paragraph_is_cut_at_sentence_ends() -> None:
    para = "One sentence here. " * 60
    ws = P.split_windows(para.strip(), max_chars=200)
    assert len(ws) > 3
    assert all(w.text.endswith(".") for w in ws)
    assert all(len(w.text) <= 200 for w in ws)


def test_windows_never_merge_across_pages() -> None:
    text = "短段一。\n\n短段二。\n\n短段三。"
    ws = P.split_windows(text, pages=[1, 1, 2], min_chars=100)
    assert [w.text for w in ws] == ["短段一。\n\n短段二。", "短段三。"]


def test_headings_and_articles() -> None:
    assert P.is_heading("7.3 The selection task")
    assert P.is_heading("第四节 分证论治")
    assert P.is_heading("附录A 申报材料")
    assert P.is_heading("二、主要问题")
    assert not P.is_heading("The rule was tested on 7 people.")
    assert not P.is_heading("第八条 住宿费实行限额标准：一线城市每晚不超过600元，省会城市每晚不超过450元。")
    paras = [p.text for p in P.paragraphs(STATUTE)]
    assert P.heading_before(paras, 2) == "第八条"  # the article the paragraph itself starts with
    assert P.heading_before(paras, 0) == "第二章 报销标准"
    tb = [p.text for p in P.paragraphs(TEXTBOOK)]
    assert P.heading_before(tb, 2) == "7.3 The selection task"
    assert P.heading_before(tb, 4) == "7.3.1 Content effects"


def _cand(rank: int, start: int, score: float) -> P.Candidate:
    return P.Candidate(rank, P.Window(start, start + 10, f"w{rank}-{start}"), score)


def test_selection_takes_turns_in_rank_order_and_compares_scores_only_inside_a_chunk() -> None:
    cands = [_cand(1, 0, 0.5), _cand(1, 100, 0.9), _cand(1, 200, 0.2), _cand(1, 300, 0.7),
             _cand(2, 0, 9.0), _cand(2, 100, 8.0), _cand(2, 200, 7.0), _cand(3, 0, 0.0), _cand(3, 50, 0.3)]
    chosen = P.select(cands, 5)
    # turn 1: each chunk's best; turn 2: the window after each best. Chunk 2's high scores
    # (a keyword-stuffed distractor) do not buy it more turns than chunk 1.
    assert [(c.chunk_rank, c.window.start) for c in chosen] == [(1, 100), (1, 200), (2, 0), (2, 100), (3, 50)]
    assert [(c.chunk_rank, c.window.start) for c in P.select(cands, 2)] == [(1, 100), (2, 0)]
    assert all((c.chunk_rank, c.window.start) != (3, 0) for c in P.select(cands, 20))  # no question term
    assert len(P.select(cands, 20)) == 8
    assert P.select(cands, 0) == []
    heading_only = P.Candidate(5, P.Window(0, 20, "4 数据出境安全评估的工作流程"), 5.0)
    assert heading_only not in P.select([*cands, heading_only], 10)



def test_a_chunk_with_no_question_term_is_left_out_only_when_another_has_one_and_it_may_go() -> None:
    cands = [_cand(1, 0, 0.0), _cand(1, 100, 0.4), _cand(2, 0, 0.0), _cand(2, 50, 0.0), _cand(3, 0, 0.0),
             _cand(4, 0, 1.2)]
    # chunk 2 holds no term and may go; chunk 3 holds none but may not (another language); chunk 1
    # has a term in one window
    assert P.termless_chunks(cands, droppable={1, 2, 4}) == {2}
    assert P.termless_chunks([_cand(1, 0, 0.0), _cand(2, 0, 0.0)], droppable={1, 2}) == set()  # no term anywhere
    assert P.termless_chunks(cands, droppable=set()) == set()
    # the reference: a chunk goes iff it may, all its scores are 0, and some score anywhere is > 0
    for droppable in ({1}, {2, 3}, {1, 2, 3, 4}):
        any_term = any(c.score > 0 for c in cands)
        assert P.termless_chunks(cands, droppable) == {
            r for r in droppable if any_term and all(c.score == 0 for c in cands if c.chunk_rank == r)}


def test_prompt_header_names_title_heading_and_printed_page() -> None:
    hit = Hit(7, 3, "chunk", "差旅费管理办法", "/x.docx", 1, "第八条 住宿费……", 0.8, 1, "zh")
    assert source_where(hit, Locator("第八条", ""), "zh") == "《差旅费管理办法》 第八条（第 1 页）"
    en = Hit(8, 4, "chunk", "Reasoning", "/r.pdf", 2, "Wason …", 0.8, 1, "en")
    assert source_where(en, Locator("7.3 The selection task", "142"), "en") == \
        "Reasoning — 7.3 The selection task (page 142)"
    msgs, used = build_answer_messages("出差住宿费的报销标准是多少？", [hit], "zh", len, 4096, 256,
                                       [Locator("第八条", "")])
    assert "[1] 《差旅费管理办法》 第八条（第 1 页）\n第八条 住宿费" in msgs[-1].content
    assert used == (hit,)


def test_each_article_gets_its_own_window_named_by_chapter_and_article() -> None:
    text = ("第三章 交通费\n\n第七条 市内交通费每人每天包干80元。\n\n第四章 住宿费和伙食补助\n\n"
            "第八条 住宿费：一线城市每人每晚不超过600元，省会城市不超过450元，其他地区不超过350元。")
    ws = P.split_windows(text, min_chars=200)  # the articles are short: only the boundary splits them
    assert [w.text.split("\n\n")[-1][:3] for w in ws] == ["第七条", "第八条"]
    paras = [p.text for p in P.paragraphs(text)]
    first = next(i for i, p in enumerate(P.paragraphs(text)) if p.end > ws[1].start)
    assert P.window_locator(paras, first, ws[1].text) == "第四章 住宿费和伙食补助 第八条"
    tb = [p.text for p in P.paragraphs(TEXTBOOK)]
    assert P.window_locator(tb, 2, tb[2]) == "7.3 The selection task"


def _bm25_reference(q: list[str], docs: list[list[str]], idf: dict[str, float]) -> list[float]:
    """Robertson & Zaragoza Eq. 3.15 written out term by term, each distinct query term once."""
    avgdl = sum(len(d) for d in docs) / len(docs)
    out = []
    for d in docs:
        total = 0.0
        for t in set(q):
            f = d.count(t)
            if f:
                total += idf[t] * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(d) / avgdl))
        out.append(total)
    return out


def test_bm25_and_the_pool_idf_agree_with_their_formulas() -> None:
    import math

    docs = [["a", "b", "b", "c"], ["a", "d"], ["a", "b", "e", "e", "e"], ["f"]]
    q = ["a", "b", "e", "a", "zz"]
    idf = P.pool_idf(docs)
    n_t = {"a": 3, "b": 2, "e": 1, "zz": 0}
    expected_idf = {t: math.log(1 + (4 - n + 0.5) / (n + 0.5)) for t, n in n_t.items()}
    assert {t: idf(t) for t in n_t} == pytest.approx(expected_idf)
    assert idf("a") > 0  # a term in most windows keeps a weight
    assert P.bm25_scores(q, docs, idf) == pytest.approx(_bm25_reference(q, docs, expected_idf))


def test_the_answering_paragraph_beats_paragraphs_that_repeat_the_documents_title_terms() -> None:
    # demo-04: every window of the guideline says 数据出境安全评估; only §6 says 有效期. With the
    # library's IDF alone (the title terms are rare in the library) the repeating windows won.
    title = ["数据", "出境", "安全", "评估"]
    windows = [title * 3 + ["申报", "流程"], title * 2 + ["适用", "情形"], ["评估", "结论", "有效期", "2年"],
               [*title, "材料", "清单"]]
    library_idf = {"数据": 1.0, "出境": 3.0, "安全": 1.0, "评估": 3.0, "结论": 1.5, "有效期": 2.0}
    q = ["数据", "出境", "安全", "评估", "结论", "有效期"]
    lib_only = P.bm25_scores(q, windows, lambda t: library_idf.get(t, 0.0))
    local = P.pool_idf(windows)
    both = P.bm25_scores(q, windows, lambda t: library_idf.get(t, 0.0) * local(t))
    assert max(range(4), key=lib_only.__getitem__) == 0  # the failure, reproduced
    assert max(range(4), key=both.__getitem__) == 2
