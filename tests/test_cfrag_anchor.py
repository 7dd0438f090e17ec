"""CF-RAG starting from the standard answer beside it (core.cfrag.anchor, cfrag.keep_standard)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest
from test_cfrag_pipeline import BALE, QUERY, SETTINGS, WATER, ScriptedGenerator, make

from rag_desktop.core.cfrag import SYSTEM_HYPOTHESIS, cfrag_result, iter_cfrag
from rag_desktop.core.cfrag.anchor import answers_agree, claim_presence, says_not_found, unsupported
from rag_desktop.core.cfrag.types import CFResult
from rag_desktop.core.prompting import sources_as_read
from rag_desktop.core.text import arabic_numerals
from rag_desktop.core.types import Answer, ChatMessage, Hit

FORM_WORDS = {"which", "what", "where", "when", "why", "how", "in", "on", "at", "of", "the", "a", "an", "is", "was",
              "are", "were", "did", "does", "do", "to", "for", "by", "and", "or", "with", "from", "s", "its", "their",
              "his", "her"}
FORM_CHARS = set("哪里个座所什么几多少何吗呢在于是的由其了被为位有")


def reference_presence(answer: str, query: str, texts: Sequence[str]) -> float:
    """Obviously correct: lower-cased words; Han text as overlapping character pairs (a lone character
    as itself), pairs of question-shaping characters out; the answer's 《titles》, (brackets) and
    "第 N 页" out; a pair made of the question's characters claims nothing; a passage holds a pair it
    contains and a single character it contains anywhere."""
    def clean(t: str) -> str:
        return arabic_numerals(re.sub(r"\[\d+\]", " ", t)).lower()

    def units(t: str) -> set[str]:
        out = {w for w in re.findall(r"[a-z0-9]+", clean(t)) if w not in FORM_WORDS}
        for run in re.findall(r"[\u4e00-\u9fff]+", clean(t)):
            if len(run) == 1 and run not in FORM_CHARS:
                out.add(run)
            for i in range(len(run) - 1):
                if not set(run[i:i + 2]) <= FORM_CHARS:
                    out.add(run[i:i + 2])
        return out

    said = re.sub(r"《[^》]*》|\([^()]*\)|（[^（）]*）|第\s*\d+\s*[页条章节款项]", " ", arabic_numerals(answer))
    q_chars = set(re.findall(r"[\u4e00-\u9fff]", clean(query))) | FORM_CHARS
    claim = {u for u in units(said) - units(query)
             if not (re.fullmatch(r"[\u4e00-\u9fff]+", u) and set(u) <= q_chars)}
    if not claim:
        return 0.0
    return max((len(claim & (units(t) | set(re.findall(r"[\u4e00-\u9fff]", clean(t))))) / len(claim)
                for t in texts), default=0.0)


INVENTED = "承建澜川大桥的公司创始人毕业于上海交通大学 [1]。"
BRIDGE = "承建澜川大桥的公司创始人毕业于哪所学校？"
# A long passage that holds every character of the invented university, none of them side by side.
SCATTERED = ["澜川大桥由青岚公司承建，全长三公里。大桥通车那天，上游的水面很宽，海鸟成群；交警在桥头疏导，"
             "通行的车辆排成长队。公司的创始人早年学习土木，后来在本地开设工程大学的夜校。"]


@pytest.mark.parametrize(("answer", "query", "texts"), [
    ("Christian Bale [1].", QUERY, BALE),
    ("The lead actor is Heath Ledger [2].", QUERY, BALE),
    ("The lead actor in The Dark Knight.", QUERY, BALE),  # adds nothing to the question
    ("评估结果有效期为2年 [1]。", "评估结果的有效期是多久？", ["评估结果自出具之日起二年内有效。"]),
    ("Water boils at 100 degrees.", "At what temperature does water boil?", [WATER, BALE[0]]),
    ("", QUERY, BALE),
    (INVENTED, BRIDGE, SCATTERED),
    ("用 zhnumber 的古体写法，数字 40 会写成 卌 [1]。", "古体写法中，数字 40 会写成哪个字？",
     ["四十古作卌，三十作卅。"]),
    ("根据《导演苏映》，苏映出生在临州 [1]。", "《澜川往事》的导演出生在哪个城市？",
     ["《导演苏映》（第 1 页）\n苏映生于临州。"]),
    ("The director was born in Linzhou (Director Su Ying, page 1) [1].", "Where was the director born?",
     ["Director Su Ying (page 1)\nSu Ying was born in Linzhou."]),
])
def test_claim_presence_matches_the_reference(answer: str, query: str, texts: list[str]) -> None:
    assert claim_presence(answer, query, texts) == pytest.approx(reference_presence(answer, query, texts))


def test_character_pairs_do_not_hold_an_invented_answer_a_long_passage_spells_out() -> None:
    # Every character of "上海交通大学" is in the passage; no pair of them is (character by character it
    # was held at more than half).
    assert claim_presence(INVENTED, BRIDGE, SCATTERED) < 0.5
    assert unsupported(INVENTED, BRIDGE, SCATTERED)
    assert not unsupported("承建澜川大桥的是青岚公司 [1]。", "澜川大桥由哪家公司承建？", SCATTERED)


def test_a_one_character_answer_is_held_where_the_character_stands() -> None:
    assert not unsupported("数字 40 会写成 卌 [1]。", "古体写法中，数字 40 会写成哪个字？", ["四十古作卌，三十作卅。"])
    assert unsupported("数字 40 会写成 圩 [1]。", "古体写法中，数字 40 会写成哪个字？", ["四十古作卌，三十作卅。"])


def test_the_source_an_answer_names_is_held_by_its_header_and_claims_nothing() -> None:
    q = "《澜川往事》的导演出生在哪个城市？"
    read = sources_as_read([Hit(unit_id=1, doc_id=1, level="chunk", title="导演苏映", path="/d.txt", page=1,
                                text="苏映 1970 年出生在临州，毕业于临州艺术学院。", s_sim=0.9, rank=1, lang="zh")],
                           None, "zh")
    assert read == ["《导演苏映》（第 1 页）\n苏映 1970 年出生在临州，毕业于临州艺术学院。"]
    assert not unsupported("根据《导演苏映》第 1 页，苏映出生在临州 [1]。", q, read)
    # The answer in the title itself ("由周启明扮演" over a source titled 《演员周启明》) is held by it.
    actor = sources_as_read([Hit(unit_id=2, doc_id=2, level="chunk", title="演员周启明", path="/a.txt", page=1,
                                 text="他在剧中饰演男主角。", s_sim=0.9, rank=1, lang="zh")], None, "zh")
    assert not unsupported("电视剧《澜川往事》的男主角由周启明扮演 [1]。", "电视剧《澜川往事》的男主角由谁扮演？",
                           actor)
    # Naming a source does not hold what is invented beside it.
    assert unsupported("根据《导演苏映》第 1 页，苏映出生在南京 [1]。", q, read)


def test_claim_presence_reads_what_the_answer_adds() -> None:
    assert claim_presence("Christian Bale [1].", QUERY, BALE) == 1.0
    assert claim_presence("The lead actor in The Dark Knight.", QUERY, BALE) == 0.0
    assert claim_presence("Heath Ledger", QUERY, BALE) == 0.0
    zh = claim_presence("评估结果有效期为2年 [1]。", "评估结果的有效期是多久？", ["评估结果自出具之日起二年内有效。"])
    assert zh >= 0.5
    assert answers_agree("Christian Bale", "The lead actor is Christian Bale [1].", QUERY)
    assert not answers_agree("Heath Ledger", "The lead actor is Christian Bale [1].", QUERY)


def test_an_answer_no_passage_holds_is_unsupported_and_one_claiming_nothing_is_not() -> None:
    assert not unsupported("The lead actor is Christian Bale [1].", QUERY, BALE)
    assert unsupported("The lead actor is Heath Ledger [2].", QUERY, BALE)  # Ledger is in no passage
    assert unsupported("Heath Ledger", QUERY, BALE, presence_min=0.5)
    # The same "most of it" as CF-RAG's standard check, at its limit.
    half = "Christian Bale and Heath Ledger"
    assert claim_presence(half, QUERY, BALE) == pytest.approx(0.5)
    assert not unsupported(half, QUERY, BALE) and unsupported(half, QUERY, BALE, presence_min=0.51)
    # Nothing claimed: no warning.
    assert not unsupported("", QUERY, BALE)
    assert not unsupported("The sources do not say who the lead actor is.", QUERY, BALE)
    assert not unsupported("白鹭湖", "白鹭湖和青梅湖，哪个湖的水面面积更大？", ["青梅湖水面面积为十二平方公里。"])
    assert not unsupported("评估结果有效期为2年 [1]。", "评估结果的有效期是多久？",
                           ["评估结果自出具之日起二年内有效。"])
    # Measured against passages in the answer's language only: across languages a lexical share says nothing.
    assert not unsupported("主角由克里斯蒂安·贝尔扮演 [1]。", "谁是《黑暗骑士》的主角？", BALE)
    zh_too = [*BALE, "主角由克里斯蒂安·贝尔扮演。"]
    assert unsupported("主角是周润发，出生于香港 [1]。", "谁是《黑暗骑士》的主角？", zh_too)


@pytest.mark.parametrize("text", [
    "The sources do not say who the lead actor is.",
    "The provided passages don't mention the boiling point.",
    "This information is not mentioned in the sources.",
    "There is no information about the deadline in the sources.",
    "The answer cannot be determined from the sources.",
    "资料中没有提到评估结果的有效期。",
    "文档未提及该期限。",
    "根据资料，无法确定答案。",
    "The sources do not explicitly mention who designed it [2].",
    "资料中没有直接提到承建澜川大桥的公司创始人毕业于哪所学校的信息[4]。",
])
def test_an_answer_saying_the_sources_lack_it_is_recognised(text: str) -> None:
    assert says_not_found(text)


@pytest.mark.parametrize("text", [
    "Employees may not work more than eight hours a day [1].",
    "Christian Bale plays Bruce Wayne [1].",
    "评估结果自出具之日起2年内有效 [1]。",
    "未满十八周岁的劳动者不得从事夜班工作 [2]。",
    "The card with a vowel must be turned, not the consonant [1].",
    "The firm not only provided the funds but also built the barrier [1].",
])
def test_an_ordinary_answer_is_not_taken_for_a_refusal(text: str) -> None:
    assert not says_not_found(text)


def hit(text: str, n: int) -> Hit:
    return Hit(unit_id=100 + n, doc_id=100 + n, level="chunk", title=f"std {n}", path=f"/s{n}.txt", page=1,
               text=text, s_sim=0.9, rank=n + 1, lang="en")


def standard(text: str, *sources: str) -> Answer:
    return Answer(text, (), tuple(hit(s, i) for i, s in enumerate(sources)), "baseline")


class FixedHypotheses(ScriptedGenerator):
    """Every hypothesis answers ``answer``, citing passage [1]; the rest as scripted."""

    def __init__(self, answer: str, rationale: str = "Passage [1] says so.") -> None:
        super().__init__()
        self.answer, self.rationale = answer, rationale

    def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
        if messages[0].content.startswith(SYSTEM_HYPOTHESIS):
            return "hypothesis", json.dumps({"answer": self.answer, "rationale": self.rationale})
        return super()._reply(messages)


def cf(std: Answer | None, gen: ScriptedGenerator | None = None, **settings: object) -> tuple[CFResult,
                                                                                            ScriptedGenerator]:
    emb, scorer, retr, g = make(gen)
    s = SETTINGS if not settings else SETTINGS.__class__(**{**SETTINGS.__dict__, **settings})
    res = cfrag_result(iter_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=scorer, generator=g, settings=s,
                                  seed=0, standard=std))
    return res, g


def test_a_standard_answer_its_passage_holds_stands_and_no_model_call_is_made() -> None:
    std = standard("The lead actor is Christian Bale [1].", BALE[0])
    res, gen = cf(std)
    d = res.trace.decision
    assert d.kind == "standard" and d.standard is not None and d.standard.outcome == "confident"
    assert d.standard.presence == 1.0 and gen.calls == []
    assert [t.step for t in res.trace.timings] == ["standard"]
    assert res.answer.text == std.text and res.answer.sources == std.sources and res.answer.method == "cfrag"


def test_a_standard_answer_saying_not_found_is_replaced_by_an_answer_its_passages_hold() -> None:
    std = standard("The sources do not say who the lead actor is.", WATER)
    res, gen = cf(std)
    d = res.trace.decision
    assert d.standard is not None and d.standard.not_found and d.standard.outcome == "replaced"
    assert d.kind != "standard" and res.answer.text == d.final_answer != std.text
    assert d.standard.candidate_presence >= 0.5 and "hypothesis" in gen.kinds()


def test_the_paths_answer_agreeing_with_the_standard_keeps_the_standard_one() -> None:
    std = standard("I believe it is Christian Bale.", WATER)  # not held by its own passage
    res, _ = cf(std, FixedHypotheses("Christian Bale"))
    d = res.trace.decision
    assert d.standard is not None and d.standard.presence < 0.5 and d.standard.outcome == "agrees"
    assert d.kind == "standard" and res.answer.text == std.text and res.trace.hypotheses


def test_an_answer_the_paths_passages_do_not_hold_never_replaces_the_standard_one() -> None:
    std = standard("The sources do not say.", WATER)
    res, _ = cf(std, FixedHypotheses("Michael Caine"))
    d = res.trace.decision
    assert d.standard is not None and d.standard.outcome == "unsupported" and d.standard.candidate == "Michael Caine"
    assert d.kind == "standard" and res.answer.text == std.text


def test_keep_standard_off_runs_the_paper_method_whatever_the_standard_answer() -> None:
    std = standard("The lead actor is Christian Bale [1].", BALE[0])
    res, gen = cf(std, keep_standard=False)
    assert res.trace.decision.standard is None and res.trace.decision.kind != "standard"
    assert "hypothesis" in gen.kinds()


def test_an_answer_that_replaces_the_standard_one_cites_the_passage_that_holds_it() -> None:
    std = standard("The sources do not say who the lead actor is.", WATER)
    res, _ = cf(std, FixedHypotheses("Christian Bale", rationale="He leads the cast."))
    d = res.trace.decision
    assert d.standard is not None and d.standard.outcome == "replaced"
    [c] = res.answer.citations
    assert "Christian Bale" in res.answer.sources[c.n - 1].text
