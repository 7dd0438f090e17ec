"""Prompt templates, context budget, citations, translation prompts and thinking-text removal.

Pure unit tests: token counting comes from small deterministic fake tokenizers.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_desktop.core.prompting import (
    MESSAGE_OVERHEAD_TOKENS,
    PROMPT_OVERHEAD_TOKENS,
    SOURCE_SEPARATOR,
    TRUNCATION_MARK,
    PromptTooLong,
    TemplateError,
    ThinkFilter,
    build_answer_messages,
    build_translation_messages,
    cut_to_budget,
    load_template,
    parse_template,
    source_where,
    split_sentences,
)
from rag_desktop.core.replies import parse_citations
from rag_desktop.core.types import ChatMessage, Hit, Lang

# --------------------------------------------------------------------------- helpers

_TOKEN_RE = re.compile(r"[\u4e00-\u9fff]|[A-Za-z0-9]+|[^\sA-Za-z0-9]")


def word_tokens(text: str) -> int:
    """Fake tokenizer: one token per CJK character, ASCII word or symbol (additive over words)."""
    return len(_TOKEN_RE.findall(text))


def floor_tokens(text: str) -> int:
    """A super-additive fake: count(a + b) >= count(a) + count(b), so per-block sums underestimate."""
    return len(text) // 4


def hit(i: int, text: str, title: str = "", page: int = 1) -> Hit:
    return Hit(unit_id=100 + i, doc_id=10 + i, level="chunk", title=title or f"Doc {i}",
               path=f"/lib/doc{i}.pdf", page=page, text=text, s_sim=0.9 - i / 100, rank=i)


def prompt_cost(messages: tuple[ChatMessage, ...], count) -> int:  # type: ignore[no-untyped-def]
    return sum(count(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages) + PROMPT_OVERHEAD_TOKENS


EN_TEXT = " ".join(f"Sentence {i} explains step {i} of the assessment." for i in range(40))
ZH_TEXT = "".join(f"第{i}条规定了数据出境安全评估的具体流程。" for i in range(40))


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize("name", ["answer_en", "answer_zh", "translate_en", "translate_zh"])
def test_templates_load_from_resources(name: str) -> None:
    tpl = load_template(name)
    assert tpl.system.strip() and tpl.user.strip()
    assert tpl.name == f"{name}.txt"
    if name.startswith("answer_"):
        assert "$" not in tpl.render("source", n=1, title="T", page=2, where="T (page 2)", text="body")


def test_parse_template_reports_missing_section_with_file_name() -> None:
    with pytest.raises(TemplateError, match=r"broken\.txt.*\[user\]"):
        parse_template("broken.txt", "comment\n[system]\nhello\n")


def test_template_with_unknown_placeholder_names_the_file() -> None:
    tpl = parse_template("bad.txt", "[system]\nhi\n[user]\n$question $nonsense\n")
    with pytest.raises(TemplateError, match=r"bad\.txt.*\[user\]"):
        tpl.render("user", question="q", sources="s")


def test_example_sections_must_come_in_pairs() -> None:
    with pytest.raises(TemplateError, match=r"lonely\.txt.*go together"):
        parse_template("lonely.txt", "[system]\nS\n[example_user]\nU\n[user]\n$question\n")


def test_preamble_before_first_section_is_ignored() -> None:
    tpl = parse_template("x.txt", "notes about [system] usage\n[system]\nSYS\n[user]\nU $question\n")
    assert tpl.system == "SYS"
    assert tpl.user == "U $question"


# --------------------------------------------------------------------------- answer prompt


def test_template_language_follows_query_language() -> None:
    sources = [hit(1, "Paris is the capital of France.")]
    en, _ = build_answer_messages("What is the capital?", sources, "en", word_tokens, 4096, 256)
    zh, _ = build_answer_messages("首都是哪里？", sources, "zh", word_tokens, 4096, 256)
    other, _ = build_answer_messages("Quelle est la capitale ?", sources, "other", word_tokens, 4096, 256)
    assert "sources" in en[0].content and "资料" not in en[0].content
    assert "资料" in zh[0].content and zh[-1].content.endswith("问题：首都是哪里？")
    assert other[0].content == en[0].content  # anything but Chinese uses the English template


def test_sources_are_numbered_in_order_with_title_and_page() -> None:
    sources = [hit(1, "Alpha text.", "Alpha", 3), hit(2, "Beta text.", "Beta", 7), hit(3, "Gamma.", "", 1)]
    messages, used = build_answer_messages("q?", sources, "en", word_tokens, 4096, 256)
    user = messages[-1].content
    assert used == tuple(sources)
    assert user.index("[1] Alpha (page 3)\nAlpha text.") < user.index("[2] Beta (page 7)\nBeta text.")
    assert "[3] Doc 3 (page 1)" in user
    zh_messages, _ = build_answer_messages("问题？", sources, "zh", word_tokens, 4096, 256)
    assert "[2] 《Beta》（第 7 页）\nBeta text." in zh_messages[-1].content
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert "[2]" in messages[2].content  # the worked example shows how to cite


def test_source_text_with_dollar_and_braces_is_inserted_verbatim() -> None:
    text = "Costs $5 {per} unit; ${x} stays."
    messages, _ = build_answer_messages("price?", [hit(1, text)], "en", word_tokens, 4096, 64)
    assert text in messages[-1].content


def reference_fit(query: str, sources: list[Hit], lang: str, count, n_ctx: int,  # type: ignore[no-untyped-def]
                  reserve: int) -> list[str]:
    """Slow, obviously-correct reference: grow the prompt one sentence at a time, measuring the
    whole prompt each time, and stop at the first sentence that does not fit."""
    budget = n_ctx - reserve
    placed: list[str] = []
    for s in sources:
        pieces = split_sentences(s.text.strip())
        best = None
        for k in range(len(pieces), 0, -1):
            whole = k == len(pieces)
            text = "".join(pieces[:k]).strip() if whole else "".join(pieces[:k]).rstrip() + TRUNCATION_MARK
            trial = [*placed, text]
            fake = [hit(i + 1, t, s.title, s.page) for i, t in enumerate(trial)]
            msgs = _render(query, fake, sources, lang)
            if prompt_cost(msgs, count) <= budget:
                best = (text, whole)
                break
        if best is None:
            break
        placed.append(best[0])
        if not best[1]:
            break
    return placed


def _render(query: str, texts: list[Hit], originals: list[Hit], lang: str) -> tuple[ChatMessage, ...]:
    tpl = load_template(f"answer_{'zh' if lang == 'zh' else 'en'}")
    blocks = [tpl.render("source", n=i + 1, title=originals[i].title, page=originals[i].page,
                         where=source_where(originals[i], None, "zh" if lang == "zh" else "en"), text=h.text)
              for i, h in enumerate(texts)]
    return (ChatMessage("system", tpl.system), ChatMessage("user", tpl.example_user),
            ChatMessage("assistant", tpl.example_assistant),
            ChatMessage("user", tpl.render("user", sources=SOURCE_SEPARATOR.join(blocks), question=query)))


@pytest.mark.parametrize("lang,text", [("en", EN_TEXT), ("zh", ZH_TEXT)])
@pytest.mark.parametrize("n_ctx", [520, 700, 1100, 1550, 5000])
def test_budget_matches_slow_reference(lang: Lang, text: str, n_ctx: int) -> None:
    sources = [hit(i, text, f"Title {i}") for i in range(1, 5)]
    query = "How is the assessment done?" if lang == "en" else "评估如何进行？"
    messages, used = build_answer_messages(query, sources, lang, word_tokens, n_ctx, 128)
    assert [h.text for h in used] == reference_fit(query, sources, lang, word_tokens, n_ctx, 128)
    assert prompt_cost(messages, word_tokens) <= n_ctx - 128


@pytest.mark.parametrize("n_ctx", [380, 450, 800, 1300])
def test_budget_holds_for_super_additive_tokenizer(n_ctx: int) -> None:
    sources = [hit(i, EN_TEXT) for i in range(1, 6)]
    messages, used = build_answer_messages("How?", sources, "en", floor_tokens, n_ctx, 100)
    assert prompt_cost(messages, floor_tokens) <= n_ctx - 100
    assert used, "at least part of the first source fits"


def test_cut_source_ends_at_sentence_and_is_prefix_of_original() -> None:
    sources = [hit(1, ZH_TEXT), hit(2, ZH_TEXT)]
    _, used = build_answer_messages("评估如何进行？", sources, "zh", word_tokens, 1400, 128)
    assert len(used) == 2
    assert used[0].text == ZH_TEXT.strip()
    cut = used[1].text
    assert cut.endswith(TRUNCATION_MARK)
    body = cut.removesuffix(TRUNCATION_MARK)
    assert ZH_TEXT.startswith(body) and body.endswith("。")
    assert (used[1].unit_id, used[1].doc_id, used[1].page) == (sources[1].unit_id, sources[1].doc_id, 1)


def test_lower_ranked_source_never_displaces_a_cut_one() -> None:
    # Source 2 is too long to fit whole; the tiny source 3 would fit but must not be added.
    sources = [hit(1, EN_TEXT[:300]), hit(2, EN_TEXT), hit(3, "Tiny.")]
    _, used = build_answer_messages("How?", sources, "en", word_tokens, 600, 128)
    assert [h.unit_id for h in used] == [101, 102]
    assert used[1].text.endswith(TRUNCATION_MARK)


def test_unpunctuated_chinese_is_cut_between_characters() -> None:
    text = "数据出境安全评估" * 200  # no sentence end anywhere
    out = cut_to_budget(text, 50, word_tokens)
    assert out is not None and out.endswith(TRUNCATION_MARK)
    body = out.removesuffix(TRUNCATION_MARK)
    assert text.startswith(body) and 40 <= len(body) <= 50
    assert body.encode("utf-8").decode("utf-8") == body


def test_cut_prefers_a_word_boundary_in_long_english_sentence() -> None:
    text = " ".join(["assessment"] * 100)
    out = cut_to_budget(text, 20, word_tokens)
    assert out is not None
    assert out.removesuffix(TRUNCATION_MARK).split() == ["assessment"] * (len(out.split()) - 1)


def test_question_that_does_not_fit_raises_clear_error() -> None:
    with pytest.raises(PromptTooLong, match=r"n_ctx 300.*answer reserve 256"):
        build_answer_messages("why " * 200, [hit(1, "x")], "en", word_tokens, 300, 256)


def test_no_room_for_sources_gives_no_sources() -> None:
    empty, _ = build_answer_messages("Why?", [], "en", word_tokens, 4096, 100)
    room = prompt_cost(empty, word_tokens) + 100 + 3  # 3 tokens: less than any source header
    messages, used = build_answer_messages("Why?", [hit(1, EN_TEXT)], "en", word_tokens, room, 100)
    assert used == ()
    assert "[1]" not in messages[-1].content


def test_split_sentences_roundtrip_and_boundaries() -> None:
    text = "First. Second! 第三。第四？ last line\nnext 3.14 stays"
    pieces = split_sentences(text)
    assert "".join(pieces) == text
    assert pieces[:4] == ["First.", " Second!", " 第三。", "第四？"]
    assert any("3.14" in p for p in pieces)  # a decimal point is not a sentence end


# --------------------------------------------------------------------------- citations


def test_parse_citations_maps_numbers_to_sources() -> None:
    used = [hit(1, "a", "Alpha", 3), hit(2, "b", "Beta", 9)]
    cits = parse_citations("Paris [1]. Also Lyon [2][1].", used)
    assert [(c.n, c.valid, c.doc_id, c.unit_id, c.page, c.title) for c in cits] == [
        (1, True, 11, 101, 3, "Alpha"), (2, True, 12, 102, 9, "Beta")]
    assert cits[0].path == "/lib/doc1.pdf"


@pytest.mark.parametrize("answer,expected", [
    ("x 【1】 y", [1]),
    ("x [1, 2] y", [1, 2]),
    ("x [2,1] y", [2, 1]),
    ("x 【1，2】 y", [1, 2]),
    ("x [1][2] y", [1, 2]),
    ("x [1-3] y", [1, 2, 3]),
    ("x ［2］ y", [2]),
    ("x [1、3] y", [1, 3]),
    ("in [2023] the law [1] changed", [1]),
    ("see [1](http://x) and [2]", [2]),
    ("no citations here", []),
])
def test_citation_formats(answer: str, expected: list[int]) -> None:
    used = [hit(i, "t") for i in range(1, 4)]
    assert [c.n for c in parse_citations(answer, used)] == expected


def test_citation_to_a_source_not_given_is_flagged() -> None:
    used = [hit(1, "t")]
    cits = parse_citations("True [1], invented [4], zero [0].", used)
    assert [(c.n, c.valid) for c in cits] == [(1, True), (4, False), (0, False)]
    assert cits[1].doc_id is None and cits[1].page is None and cits[1].title == ""


# --------------------------------------------------------------------------- translation


def test_translation_prompt_to_chinese() -> None:
    msgs = build_translation_messages("The Wason selection task tests logic.", "en", "zh")
    assert msgs[0].role == "system" and "英文" in msgs[0].content and "括号" in msgs[0].content
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user"]
    assert "（vector database）" in msgs[2].content  # the example shows the annotation style
    assert msgs[-1].content.endswith("The Wason selection task tests logic.")


def test_translation_prompt_to_english() -> None:
    msgs = build_translation_messages("数据出境安全评估", "zh", "en")
    assert "from Chinese into English" in msgs[0].content and "parentheses" in msgs[0].content
    assert msgs[-1].content.endswith("数据出境安全评估")


@pytest.mark.parametrize("src,tgt,text", [("en", "en", "x"), ("zh", "other", "x"), ("en", "zh", "  ")])
def test_translation_rejects_pointless_requests(src: str, tgt: str, text: str) -> None:
    with pytest.raises(ValueError):
        build_translation_messages(text, src, tgt)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- thinking filter

OPEN, CLOSE = ThinkFilter.OPEN, ThinkFilter.CLOSE


def reference_strip(s: str, start_inside: bool = False) -> str:
    """Whole-string version of the filter's rules (the streaming one must agree for any split)."""
    out: list[str] = []
    inside, skip, i = start_inside, False, 0
    while i <= len(s):
        if inside:
            j = s.find(CLOSE, i)
            if j < 0:
                break
            i, inside, skip = j + len(CLOSE), False, True
            continue
        found = [k for k in (s.find(OPEN, i), s.find(CLOSE, i)) if k >= 0]
        j = min(found) if found else len(s)
        seg = s[i:j]
        if skip:
            seg = seg.lstrip()
            skip = not seg
        out.append(seg)
        if j == len(s):
            break
        if s.startswith(OPEN, j):
            i, inside = j + len(OPEN), True
        else:
            i, skip = j + len(CLOSE), True
    return "".join(out)


def run_filter(pieces: list[str], start_inside: bool = False) -> str:
    f = ThinkFilter(start_inside)
    return "".join(f.feed(p) for p in pieces) + f.flush()


def test_think_block_removed_even_when_tags_are_split() -> None:
    pieces = ["<th", "ink>\nI should", " say hi</", "think>\n\n", "Hello", " <", "b> [1]"]
    assert run_filter(pieces) == "Hello <b> [1]"


def test_qwen3_empty_think_block_removed() -> None:
    assert run_filter(["<think>", "\n\n", "</think>", "\n\n", "答案", "是[1]。"]) == "答案是[1]。"


def test_unterminated_think_never_leaks() -> None:
    f = ThinkFilter()
    shown = f.feed("Sure. <think>secret plan") + f.feed(" more secret") + f.flush()
    assert shown == "Sure. "
    assert "secret plan more secret" in "".join(f.thinking)


def test_template_opened_block_only_close_tag_emitted() -> None:
    assert run_filter(["reasoning...", "</thi", "nk>", "\nAnswer."], start_inside=True) == "Answer."


_think_text = st.lists(st.sampled_from(["a", " ", "\n", "<", ">", "/", "x", OPEN, CLOSE, "<th", "ink>"]),
                       max_size=25).map("".join)


@settings(max_examples=120, deadline=None)
@given(text=_think_text, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
       start_inside=st.booleans())
def test_streaming_filter_agrees_with_reference_for_any_split(text: str, cuts: list[int],
                                                              start_inside: bool) -> None:
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert run_filter(pieces, start_inside) == reference_strip(text, start_inside)
