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
from rag_desktop.core.text import arabic_numerals
from rag_desktop.core.types import Answer, ChatMessage, Hit


def reference_presence(answer: str, query: str, texts: Sequence[str]) -> float:
    """Obviously correct: lower-cased words and single Han characters, question-shaping words out."""
    form = {"which", "what", "where", "when", "why", "how", "in", "on", "at", "of", "the", "a", "an", "is", "was",
            "are", "were", "did", "does", "do", "to", "for", "by", "and", "or", "with", "from", "s", "its", "their",
            "his", "her"} | set("哪里个座所什么几多少何吗呢在于是的由其了被为位有")

    def toks(t: str) -> set[str]:
        t = arabic_numerals(re.sub(r"\[\d+\]", " ", t)).lower()
        return {w for w in re.findall(r"[a-z0-9]+|[\u4e00-\u9fff]", t) if w not in form}

    claim = toks(answer) - toks(query)
    if not claim:
        return 0.0
    return max((len(claim & toks(t)) / len(claim) for t in texts), default=0.0)


@pytest.mark.parametrize(("answer", "query", "texts"), [
    ("Christian Bale [1].", QUERY, BALE),
    ("The lead actor is Heath Ledger [2].", QUERY, BALE),
    ("The lead actor in The Dark Knight.", QUERY, BALE),  # adds nothing to the question
    ("评估结果有效期为2年 [1]。", "评估结果的有效期是多久？", ["评估结果自出具之日起二年内有效。"]),
    ("Water boils at 100 degrees.", "At what temperature does water boil?", [WATER, BALE[0]]),
    ("", QUERY, BALE),
])
def test_claim_presence_matches_the_reference(answer: str, query: str, texts: list[str]) -> None:
    assert claim_presence(answer, query, texts) == pytest.approx(reference_presence(answer, query, texts))


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
