"""kw(·) (paper 000 §3.1/§4.4), its two variants, the IDF table and CJK term discovery."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_desktop.core import keywords as K
from rag_desktop.core.protocols import Tokenizer
from rag_desktop.core.text import is_han
from rag_desktop.core.types import Keyword, Lang


class FakeTokenizer:
    """A collaborator fake: splits on non-word characters, lower-cases, applies a
    small stem table, and answers prior_idf from a dict."""

    STEMS: ClassVar[dict[str, str]] = {
        "requests": "request",
        "reasoning": "reason",
        "using": "use",
        "used": "use",
        "uses": "use",
    }

    def __init__(
        self,
        priors: dict[str, float] | None = None,
        split: dict[str, list[str]] | None = None,
        stems: dict[str, str] | None = None,
    ) -> None:
        self.stems = {**self.STEMS, **(stems or {})}
        self.priors = priors or {}
        self.split = split or {}
        self.words: list[str] = []

    def load(self) -> None:
        pass

    def tokenize(self, text: str, lang: Lang) -> list[str]:
        out: list[str] = []
        for w in re.findall(r"[^\W_]+(?:[.,]\d+)*%?", text):
            w = w.lower()
            if w in self.split:
                out.extend(self.split[w])
            else:
                out.append(self.stems.get(w, w))
        return out

    def prior_idf(self, term: str) -> float | None:
        return self.priors.get(term)

    def add_words(self, words: Sequence[str]) -> None:
        self.words.extend(words)

    def surface_form(self, term: str) -> str:
        return term


def test_fake_satisfies_protocol() -> None:
    assert isinstance(FakeTokenizer(), Tokenizer)


# --------------------------------------------------------------------------- stopwords


@pytest.mark.parametrize(
    ("name", "present"),
    [
        ("zh", ["的", "我们", "因为"]),
        ("en", ["the", "of", "which"]),
        ("query_zh", ["怎么", "应该", "哪些", "一般", "如何", "什么"]),
        ("query_en", ["how", "what", "should", "which"]),
        ("verbs_en", ["use", "using", "make", "provide"]),
        ("verbs_zh", ["进行", "使用", "通过"]),
    ],
)
def test_stopword_files_load(name: str, present: list[str]) -> None:
    words = K.load_stopwords(name)
    assert set(present) <= words
    assert not any(w.startswith("#") or not w for w in words)


def test_plain_generic_lists_do_not_contain_content_words() -> None:
    # The case-study query's content words must survive both variants.
    for name in ("zh", "en", "query_zh", "query_en", "verbs_zh", "verbs_en"):
        assert not {"评估", "数据", "出境", "安全", "security", "assessment"} & K.load_stopwords(name)


def test_unknown_stopword_list() -> None:
    with pytest.raises(ValueError, match="unknown stopword list"):
        K.load_stopwords("fr")


# --------------------------------------------------------------------------- normalisation


def test_normalise_term_folds_width_and_case() -> None:
    assert K.normalise_term(" ＡＰＩ ") == "api"
    assert K.normalise_term("１０ｇ") == "10g"
    assert K.normalise_term("Straße") == "strasse"


@given(st.text(max_size=12))
def test_normalise_term_is_idempotent(s: str) -> None:
    once = K.normalise_term(s)
    assert K.normalise_term(once) == once


@pytest.mark.parametrize(
    "tok", ["10g", "6g", "2024", "3.5%", "1,000", "2024年", "50mg", "12.5kg", "3月", "10克", "-5"]
)
def test_numbers_and_units_detected(tok: str) -> None:
    assert K.is_number_or_unit(tok)


@pytest.mark.parametrize("tok", ["h100", "qwen3", "mp3", "数据", "g10", "covid", "10gigabytes"])
def test_names_and_words_are_not_numbers(tok: str) -> None:
    assert not K.is_number_or_unit(tok)


# --------------------------------------------------------------------------- filters


def test_plain_keeps_filler_and_numbers_improved_drops_them() -> None:
    toks = ["怎么", "治疗", "久咳", "应该", "哪些", "一般", "10g", "2024", "的", "data"]
    plain = K.build_filter("plain")
    improved = K.build_filter("improved")
    assert K.filter_terms(toks, plain, query=True) == [
        "怎么",
        "治疗",
        "久咳",
        "应该",
        "哪些",
        "一般",
        "10g",
        "2024",
        "data",
    ]
    assert K.filter_terms(toks, improved, query=True) == ["治疗", "久咳", "data"]


def test_query_filler_only_removed_from_queries() -> None:
    f = K.build_filter("improved")
    toks = ["一般", "治疗"]
    assert K.filter_terms(toks, f, query=True) == ["治疗"]
    assert K.filter_terms(toks, f, query=False) == ["一般", "治疗"]


def test_short_and_symbol_tokens_dropped_in_both_variants() -> None:
    for variant in K.VARIANTS:
        f = K.build_filter(variant)
        assert K.filter_terms(["a", "咳", "--", "··", "ok"], f, query=False) == ["ok"]


def test_common_verbs_only_in_improved() -> None:
    toks = ["using", "provides", "model", "进行", "评估"]
    assert K.filter_terms(toks, K.build_filter("plain"), query=False) == toks
    assert K.filter_terms(toks, K.build_filter("improved"), query=False) == ["model", "评估"]


def test_stopwords_pass_through_the_tokenizer() -> None:
    # Documents arrive already normalised by the tokenizer (e.g. stemmed), so each
    # stopword must also be matched in its normalised form: the fake maps "showed"
    # to the key "shew", which appears in no list as written.
    tok = FakeTokenizer(stems={"showed": "shew"})
    f = K.build_filter("improved", tok)
    assert "shew" in f.doc_stop
    assert "shew" not in K.build_filter("improved").doc_stop
    assert K.filter_terms(tok.tokenize("It showed the requests", "en"), f, query=False) == ["request"]


def test_multi_token_stopword_matched_only_as_written() -> None:
    # A stopword the tokenizer splits ("怎么办" -> 怎么 + 办) is matched as written;
    # its pieces are not added (办 alone could be content elsewhere).
    tok = FakeTokenizer(split={"怎么办": ["怎么", "办"]})
    f = K.build_filter("improved", tok)
    assert "怎么办" in f.query_stop
    assert "办" not in f.query_stop and "办" not in f.doc_stop


def test_bad_variant() -> None:
    with pytest.raises(ValueError, match="keyword variant"):
        K.build_filter("fancy")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- IDF


def test_idf_formula() -> None:
    t = K.IdfTable()
    t.add_document({"a", "b"})
    t.add_document({"a"})
    t.add_document({"c"})
    assert t.n_docs == 3
    assert t.idf("a") == pytest.approx(math.log(4 / 3) + 1)
    assert t.idf("b") == pytest.approx(math.log(4 / 2) + 1)
    assert t.max_idf == pytest.approx(math.log(4) + 1)
    assert t.idf("zzz") == pytest.approx(t.max_idf)


def test_add_document_counts_a_term_once() -> None:
    t = K.IdfTable()
    t.add_document(["a", "a", "a"])
    assert t.df == {"a": 1}


def test_unseen_terms_use_prior_clipped_to_the_library_scale() -> None:
    t = K.IdfTable()
    assert t.idf("x", lambda _: 11.5) == 11.5  # empty library: the prior is all we have
    for i in range(9):
        t.add_document({f"d{i}"})
    assert t.idf("x", lambda _: 2.0) == pytest.approx(2.0)
    assert t.idf("x", lambda _: 11.5) == pytest.approx(t.max_idf)  # jieba's scale clipped
    assert t.idf("x", lambda _: 0.2) == pytest.approx(1.0)
    assert t.idf("x", lambda _: None) == pytest.approx(t.max_idf)
    # A seen term ignores the prior.
    assert t.idf("d0", lambda _: 11.5) == pytest.approx(math.log(10 / 2) + 1)


docs_strategy = st.lists(st.frozensets(st.sampled_from("abcdefgh"), max_size=5), max_size=12)


@given(docs_strategy, st.data())
def test_incremental_add_remove_equals_rebuild(docs: list[frozenset[str]], data: st.DataObject) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(docs), max_size=len(docs)))
    inc = K.IdfTable()
    for d in docs:
        inc.add_document(d)
    for d, k in zip(docs, keep, strict=True):
        if not k:
            inc.remove_document(d)
    fresh = K.IdfTable()
    for d, k in zip(docs, keep, strict=True):
        if k:
            fresh.add_document(d)
    assert inc == fresh
    assert K.IdfTable.from_dict(inc.to_dict()) == inc


def test_remove_unknown_terms_raises_and_changes_nothing() -> None:
    t = K.IdfTable()
    t.add_document({"a"})
    with pytest.raises(ValueError, match="never counted"):
        t.remove_document({"a", "b"})
    assert t.df == {"a": 1} and t.n_docs == 1
    t.remove_document({"a"})
    with pytest.raises(ValueError, match="no documents"):
        t.remove_document(set())


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"version": 2, "n_docs": 0, "df": {}}, "version"),
        ({"version": 1, "n_docs": -1, "df": {}}, "n_docs"),
        ({"version": 1, "n_docs": "3", "df": {}}, "n_docs"),
        ({"version": 1, "n_docs": 1, "df": []}, "df"),
        ({"version": 1, "n_docs": 1, "df": {"a": 2}}, "df"),
        ({"version": 1, "n_docs": 1, "df": {"a": 0}}, "df"),
    ],
)
def test_idf_from_dict_rejects_bad_input(data: dict, key: str) -> None:
    with pytest.raises(ValueError, match=f"'{key}'"):
        K.IdfTable.from_dict(data)


# --------------------------------------------------------------------------- TF-IDF


def test_tfidf_hand_computed() -> None:
    t = K.IdfTable()
    for d in [{"data", "security"}, {"data", "car"}, {"data"}]:
        t.add_document(d)
    kws = K.tfidf_keywords(["data", "security", "security", "car"], t, top_n=None)
    idf_sec = math.log(4 / 2) + 1
    idf_data = math.log(4 / 4) + 1
    assert [k.term for k in kws] == ["security", "car", "data"]
    assert kws[0].weight == pytest.approx(2 / 4 * idf_sec)
    assert kws[1].weight == pytest.approx(1 / 4 * idf_sec)
    assert kws[2].weight == pytest.approx(1 / 4 * idf_data)


def test_tfidf_ties_broken_by_term_and_top_n() -> None:
    t = K.IdfTable()
    kws = K.tfidf_keywords(["b", "a", "c", "d"], t, top_n=2)
    assert [k.term for k in kws] == ["a", "b"]
    assert K.tfidf_keywords([], t, top_n=3) == ()
    with pytest.raises(ValueError):
        K.tfidf_keywords(["a"], t, top_n=0)


def test_paper_sizes_top15_doc_top10_query() -> None:
    tokens = [f"w{i:02d}" for i in range(40)]
    t = K.IdfTable()
    f = K.build_filter("plain")
    assert len(K.extract_keywords(tokens, t, f, query=False)) == 15
    assert len(K.extract_keywords(tokens, t, f, query=True)) == 10


def test_kw_end_to_end_with_stemming_tokenizer() -> None:
    tok = FakeTokenizer(priors={"unseen": 1.5})
    t = K.IdfTable()
    f = K.build_filter("improved", tok)
    for text in ["requests about data", "data data", "reasoning about requests"]:
        t.add_document(K.document_terms(tok.tokenize(text, "en"), f))
    q = K.kw("How should requests be handled? unseen", "en", tok, t, f, query=True)
    terms = {k.term for k in q}
    assert terms == {"request", "handled", "unseen"}
    weights = {k.term: k.weight for k in q}
    assert weights["unseen"] == pytest.approx(1 / 3 * 1.5)  # prior used (within the library's range)
    d = K.kw("Reasoning, reasoning and requests", "en", tok, t, f, query=False)
    assert [k.term for k in d] == ["reason", "request"]  # the stem collapses both forms


def test_merge_keywords_sums_duplicates() -> None:
    merged = K.merge_keywords(
        [[Keyword("a", 1.0), Keyword("b", 0.5)], [Keyword("a", 0.25), Keyword("c", 2.0)]]
    )
    assert merged == (Keyword("c", 2.0), Keyword("a", 1.25), Keyword("b", 0.5))
    assert K.merge_keywords([[Keyword("a", 1.0)], [Keyword("b", 2.0)]], top_n=1) == (Keyword("b", 2.0),)


# --------------------------------------------------------------------------- CJK term discovery

_CORPUS = [
    "患者久咳不愈，医生认为久咳多由肺气虚弱引起。",
    "小儿久咳怎么办？久咳需要辨证论治。",
    "对于久咳，中医主张先分寒热，久咳日久则补肺。",
    "老人久咳夜甚，治宜润肺，久咳痰少者加麦冬。",
    "大模型的预训练需要大量数据。预训练语料要清洗，大模型才能学好。",
    "训练大模型之前，先做预训练数据去重；预训练阶段耗时最长。",
    "开源大模型越来越多，大模型评测也很重要。部分大模型只做预训练。",
    "清洗预训练数据时，大模型团队会过滤低质量网页。",
    # Unrelated text, as any library has: it sets the chance level of co-occurrence.
    "数据出境安全评估适用于重要数据和个人信息的出境活动，评估结论有效期为两年。",
    "华生选择任务考察人们如何检验条件规则，多数被试只翻看能够证实规则的卡片。",
    "失眠的中医治疗强调调和阴阳，常用方剂包括酸枣仁汤和归脾汤等经典方药。",
]


def test_discover_finds_domain_words() -> None:
    terms = K.discover_cjk_terms(_CORPUS, min_count=5, max_len=4)
    assert "久咳" in terms
    assert "大模型" in terms
    assert "预训练" in terms


def test_discover_rejects_fragments_and_phrases() -> None:
    terms = K.discover_cjk_terms(_CORPUS, min_count=5, max_len=4)
    assert "预训" not in terms  # always followed by 练: no right freedom
    assert "模型" not in terms  # always preceded by 大 here: no left freedom
    assert not any(t[0] in "的了是在和" or t[-1] in "的了是在和" for t in terms)
    assert all(2 <= len(t) <= 4 for t in terms)


def test_discover_respects_min_count_and_order() -> None:
    assert K.discover_cjk_terms(_CORPUS, min_count=50) == []
    terms = K.discover_cjk_terms(_CORPUS, min_count=5)
    counts = [sum(t.count(w) for t in _CORPUS) for w in terms]
    assert counts == sorted(counts, reverse=True)


def test_discover_keeps_only_what_the_segmenter_splits() -> None:
    # A fake segmenter that already knows 大模型: it need not be taught.
    def segment(s: str) -> list[str]:
        return [s] if s == "大模型" else list(s)

    terms = K.discover_cjk_terms(_CORPUS, min_count=5, segment=segment)
    assert "大模型" not in terms and "久咳" in terms


def test_discover_validates_arguments() -> None:
    with pytest.raises(ValueError, match="min_count"):
        K.discover_cjk_terms([], min_count=0)
    with pytest.raises(ValueError, match="max_len"):
        K.discover_cjk_terms([], max_len=1)
    assert K.discover_cjk_terms(["no chinese here"]) == []


def test_cjk_helpers() -> None:
    assert K.cjk_runs("abc数据出境x安全") == ["数据出境", "安全"]
    assert is_han("数") and not is_han("a") and not is_han("，") and not is_han("か")
