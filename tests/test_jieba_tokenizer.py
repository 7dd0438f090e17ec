"""The jieba/Snowball Tokenizer backend, alone and feeding kw(·)."""

from __future__ import annotations

import sys

import pytest

from rag_desktop.backends.errors import MissingDependency
from rag_desktop.backends.jieba_tokenizer import JiebaTokenizer
from rag_desktop.core import keywords as K
from rag_desktop.core.protocols import Tokenizer

pytest.importorskip("jieba")
pytest.importorskip("snowballstemmer")


@pytest.fixture(scope="module")
def improved() -> JiebaTokenizer:
    tk = JiebaTokenizer("improved")
    tk.load()
    return tk


@pytest.fixture(scope="module")
def plain() -> JiebaTokenizer:
    tk = JiebaTokenizer("plain")
    tk.load()
    return tk


def test_satisfies_protocol(improved: JiebaTokenizer) -> None:
    assert isinstance(improved, Tokenizer)


def test_construction_is_cheap_and_load_idempotent(plain: JiebaTokenizer) -> None:
    assert JiebaTokenizer("plain")._jieba is None  # nothing heavy in __init__
    first = plain._jieba
    assert first is not None
    plain.load()
    assert plain._jieba is first


def test_mixed_text_split_into_runs(plain: JiebaTokenizer) -> None:
    toks = plain.tokenize("如何评估数据出境的安全？Cross-Border Data，每次10g，3.5%的Qwen3", "zh")
    assert toks == [
        "如何",
        "评估",
        "数据",
        "出境",
        "的",
        "安全",
        "cross",
        "border",
        "data",
        "每次",
        "10g",
        "3.5%",
        "的",
        "qwen3",
    ]


def test_full_width_text_is_normalised(plain: JiebaTokenizer) -> None:
    assert plain.tokenize("ＡＰＩ　１０ｇ", "en") == ["api", "10g"]


def test_plain_lowercases_improved_stems(plain: JiebaTokenizer, improved: JiebaTokenizer) -> None:
    text = "Requests and the request; Reasoning about a reason"
    assert plain.tokenize(text, "en") == [
        "requests",
        "and",
        "the",
        "request",
        "reasoning",
        "about",
        "a",
        "reason",
    ]
    assert improved.tokenize(text, "en") == [
        "request",
        "and",
        "the",
        "request",
        "reason",
        "about",
        "a",
        "reason",
    ]


def test_english_words_in_chinese_text_are_stemmed_but_not_other_languages(improved: JiebaTokenizer) -> None:
    assert improved.tokenize("关于requests的说明", "zh") == ["关于", "request", "的", "说明"]
    assert improved.tokenize("les requests", "other") == ["les", "requests"]


def test_surface_form_recovers_a_word_for_a_stem(improved: JiebaTokenizer) -> None:
    toks = improved.tokenize("security securities security", "en")
    assert toks == ["secur", "secur", "secur"]
    assert improved.surface_form("secur") == "security"
    assert improved.surface_form("数据") == "数据"


def test_prior_idf_from_jieba_table(improved: JiebaTokenizer) -> None:
    common = improved.prior_idf("数据")
    rare = improved.prior_idf("出境")
    assert common is not None and rare is not None
    assert 0 < common < rare  # 数据 is far more common than 出境 in jieba's corpus
    assert improved.prior_idf("zz-not-a-word") is None


@pytest.mark.slow  # builds two private dictionaries and jieba's global one (~2.5 s)
def test_user_words_are_private_to_the_instance() -> None:
    import jieba

    a = JiebaTokenizer("plain")
    a.add_words(["久咳"])  # before load: applied when loading
    assert a.tokenize("久咳", "zh") == ["久咳"]
    b = JiebaTokenizer("plain")
    assert b.tokenize("久咳", "zh") == ["久", "咳"]
    assert [w for w in jieba.cut("久咳")] == ["久", "咳"]  # the global jieba untouched
    b.add_words(["久咳"])  # after load
    assert b.tokenize("久咳", "zh") == ["久咳"]


def test_discovered_terms_repair_jieba_splits() -> None:
    corpus = [
        "患者久咳不愈，医生认为久咳多由肺气虚弱引起。小儿久咳怎么办？久咳需要辨证论治。",
        "对于久咳，中医主张先分寒热，久咳日久则补肺。老人久咳夜甚，治宜润肺，久咳痰少者加麦冬。",
        "大模型的预训练需要大量数据。预训练语料要清洗，大模型才能学好。",
        "训练大模型之前，先做预训练数据去重；预训练阶段耗时最长。",
        "开源大模型越来越多，大模型评测也很重要。部分大模型只做预训练。",
        "清洗预训练数据时，大模型团队会过滤低质量网页。",
        "数据出境安全评估适用于重要数据和个人信息的出境活动，评估结论有效期为两年。",
        "失眠的中医治疗强调调和阴阳，常用方剂包括酸枣仁汤和归脾汤等经典方药。",
    ]
    tk = JiebaTokenizer("improved")
    before = tk.tokenize("大模型预训练与久咳", "zh")
    assert before == ["大", "模型", "预", "训练", "与", "久", "咳"]
    found = K.discover_cjk_terms(corpus, min_count=5, segment=tk.segment)
    assert {"久咳", "大模型", "预训练"} <= set(found)
    tk.add_words(found)
    assert tk.tokenize("大模型预训练与久咳", "zh") == ["大模型", "预训练", "与", "久咳"]


def test_kw_plain_vs_improved_on_a_query(plain: JiebaTokenizer, improved: JiebaTokenizer) -> None:
    q = "久咳怎么治疗，应该吃哪些药？一般每次10g"
    idf = K.IdfTable()
    kp = K.kw(q, "zh", plain, idf, K.build_filter("plain", plain), query=True)
    ki = K.kw(q, "zh", improved, idf, K.build_filter("improved", improved), query=True)
    # The paper's variant lets question filler and numbers through ...
    assert {"怎么", "应该", "哪些", "一般", "10g"} <= {k.term for k in kp}
    # ... the improved one keeps only the topic.
    assert {k.term for k in ki} == {"治疗"}


def test_kw_improved_matches_word_forms(improved: JiebaTokenizer) -> None:
    f = K.build_filter("improved", improved)
    idf = K.IdfTable()
    docs = ["The server rejects malformed requests.", "Reasoning about each request takes time."]
    for d in docs:
        idf.add_document(K.document_terms(improved.tokenize(d, "en"), f))
    q = {k.term for k in K.kw("How should a request be handled?", "en", improved, idf, f, query=True)}
    d0 = {k.term for k in K.kw(docs[0], "en", improved, idf, f, query=False)}
    assert "request" in q and "request" in d0
    assert not {"how", "should"} & q


def test_bad_variant() -> None:
    with pytest.raises(ValueError, match="variant"):
        JiebaTokenizer("stemmed")  # type: ignore[arg-type]


def test_missing_jieba_raises_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jieba", None)  # makes `import jieba` fail
    with pytest.raises(MissingDependency, match="jieba"):
        JiebaTokenizer("plain").load()


def test_missing_snowball_raises_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snowballstemmer", None)
    with pytest.raises(MissingDependency, match="snowballstemmer"):
        JiebaTokenizer("improved").load()
