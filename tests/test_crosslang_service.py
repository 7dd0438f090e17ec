"""Questions across languages through the real RagService on a small mixed library.

Everything is real (embedder, tokenizer, FAISS, catalog) but the generator, a scripted
collaborator that translates the few questions asked here; the fallbacks (no generator, a
failing one, a slow one, a single-language library, the setting off) rank with the question
as typed and say so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from library_helpers import MIXED_DOCS, ingest_texts
from test_gui_support import ScriptedGenerator

from rag_desktop.app.crosslang import CrossStatus
from rag_desktop.app.service import Comparison, RagService
from rag_desktop.core.fusion import rrf_order
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import ChatMessage

pytestmark = pytest.mark.integration

DOCS = {
    **MIXED_DOCS,
    "tax_zh.txt": "企业所得税按季度预缴，年度终了后五个月内汇算清缴。小型微利企业享受减免优惠。" * 6,
}
QUESTION_ZH = "沃森选择任务中人们为什么选错卡片？"
TRANSLATIONS = {
    QUESTION_ZH: "Why do people choose the wrong cards in the Wason selection task (沃森选择任务)?",
    "How does Chinese medicine treat a chronic cough?": "中医如何治疗久咳（chronic cough）？",
}


class Translator(ScriptedGenerator):
    """The scripted generator, replying to the translate prompt with a fixed translation."""

    def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
        system, user = messages[0].content, messages[-1].content
        if "translator" in system or "翻译" in system:
            body = user.split("\n\n", 1)[-1].strip()
            if body in TRANSLATIONS:
                return "translation", TRANSLATIONS[body] + "\n"
        return super()._reply(messages)


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    return ingest_texts(tmp_path_factory.mktemp("xl"), DOCS,
                        Settings().replace("retrieval", level="chunk", cross_language=True))


@pytest.fixture
def gen(svc: RagService) -> Translator:
    g = Translator()
    svc.runtime._generator = g
    svc._question_translations.clear()
    svc.settings = Settings().replace("retrieval", level="chunk", cross_language=True).validate()
    return g


def _paths(ranked: object) -> list[str]:
    return [Path(h.path).name for h in ranked.hits]  # type: ignore[attr-defined]


def test_the_library_languages_are_counted_once(svc: RagService) -> None:
    svc._lang_counts = None
    assert svc.library_languages() == {"en": 2, "zh": 2}
    svc.library.catalog.language_counts = lambda: {"zh": 99}  # type: ignore[method-assign]
    try:
        assert svc.library_languages() == {"en": 2, "zh": 2}  # cached until the next ingest
    finally:
        del svc.library.catalog.language_counts


def test_a_chinese_question_is_also_searched_in_english_and_fused(svc: RagService, gen: Translator) -> None:
    comp = svc.compare(QUESTION_ZH)
    cross = comp.cross_language
    assert cross is not None and cross.status == CrossStatus.FUSED and cross.fused
    # the parenthesised Chinese term of the translate prompt is dropped: the typed question has it
    assert cross.translated == "Why do people choose the wrong cards in the Wason selection task?"
    assert gen.calls.count("translation") == 1
    # the Baseline column is the typed question's plain similarity order, never fused
    r = svc.retriever()
    typed, other = r.context(QUESTION_ZH), r.context(cross.translated)
    assert [h.unit_id for h in comp.baseline.hits] == [h.unit_id for h in typed.baseline.hits]
    sims = [h.s_sim for h in comp.baseline.hits]
    assert sims == sorted(sims, reverse=True)
    assert cross.translated_found.get("baseline", ()) == ()
    # the re-ranked column is the RRF of the two phrasings' re-rankings (the retriever's own lists)
    t_ranked, o_ranked = r.rerank(typed, comp.causal_variant)[0], r.rerank(other, comp.causal_variant)[0]
    expected = rrf_order([[h.unit_id for h in t_ranked.hits], [h.unit_id for h in o_ranked.hits]])
    assert [h.unit_id for h in comp.causal.hits] == expected[: svc.settings.retrieval.k]
    # the translation lifts the English answer in the fused column above its typed-only place
    assert _paths(comp.causal).index("wason_en.txt") <= _paths(t_ranked).index("wason_en.txt")
    # the Why card's numbers still line up: new rank = the column's rank, baseline rank = the Baseline column's
    base_rank = {h.unit_id: h.rank for h in comp.baseline.hits}
    by_uid = {e.unit_id: e for e in comp.causal.explanations}
    for h in comp.causal.hits:
        e = by_uid[h.unit_id]
        assert e.new_rank == h.rank and e.baseline_rank == base_rank.get(h.unit_id, e.baseline_rank)
    # "found by the translated question": the hits it ranked strictly better than the typed one did
    t_rank = {h.unit_id: h.rank for h in t_ranked.hits}
    o_rank = {h.unit_id: h.rank for h in o_ranked.hits}
    assert set(cross.translated_found["causal"]) == {
        h.unit_id for h in comp.causal.hits if o_rank.get(h.unit_id, 10**6) < t_rank.get(h.unit_id, 10**6)}
    # compare --json carries the translation and whether fusion ran
    data = json.loads(json.dumps(comp.to_json(), ensure_ascii=False))
    assert data["cross_language"]["translated"] == cross.translated
    assert data["cross_language"]["fused"] is True and data["cross_language"]["status"] == "fused"
    assert comp.timings["translate_question"] >= 0


def test_the_translation_is_cached_per_question(svc: RagService, gen: Translator) -> None:
    svc.compare(QUESTION_ZH)
    svc.compare(QUESTION_ZH)
    assert gen.calls.count("translation") == 1


def test_an_english_question_is_also_searched_in_chinese(svc: RagService, gen: Translator) -> None:
    comp = svc.compare("How does Chinese medicine treat a chronic cough?")
    assert comp.cross_language is not None and comp.cross_language.translated == "中医如何治疗久咳？"
    assert _paths(comp.causal)[0] == "cough_zh.txt"


def _typed_only(svc: RagService, q: str) -> list[int]:
    return [h.unit_id for h in svc.retriever().context(q).baseline.hits]


def test_no_generator_ranks_the_question_as_typed(svc: RagService, gen: Translator, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # An empty model folder (the shared test folder may hold the joined embedded model by now):
    # nothing is ready to load.
    monkeypatch.setenv("RAG_DESKTOP_MODEL_DIR", str(tmp_path))
    svc.runtime._generator = None
    assert not svc.runtime.generator_ready()
    comp = svc.compare(QUESTION_ZH)
    assert comp.cross_language is not None and comp.cross_language.status == CrossStatus.NO_GENERATOR
    assert comp.cross_language.fallback and not comp.cross_language.fused
    assert "ranked as typed only" in comp.cross_language.describe()
    assert [h.unit_id for h in comp.baseline.hits] == _typed_only(svc, QUESTION_ZH)
    assert gen.calls == []


def test_a_failing_generator_ranks_the_question_as_typed(svc: RagService) -> None:
    svc.runtime._generator = ScriptedGenerator(fail=RuntimeError("model crashed"))
    svc._question_translations.clear()
    comp = svc.compare(QUESTION_ZH)
    assert comp.cross_language is not None and comp.cross_language.status == CrossStatus.FAILED
    assert "model crashed" in comp.cross_language.note
    assert [h.unit_id for h in comp.baseline.hits] == _typed_only(svc, QUESTION_ZH)


def test_a_slow_translation_times_out_and_is_not_cached(svc: RagService, gen: Translator) -> None:
    slow = Translator(delay=0.3)
    svc.runtime._generator = slow
    svc.settings = svc.settings.replace("retrieval", cross_language_timeout_s=0.2).validate()
    comp = svc.compare(QUESTION_ZH)
    cross = comp.cross_language
    assert cross is not None and cross.status == CrossStatus.TIMEOUT and cross.timeout_s == 0.2
    assert cross.seconds < 2.0
    assert [h.unit_id for h in comp.baseline.hits] == _typed_only(svc, QUESTION_ZH)
    assert not svc._question_translations  # the next question tries again


def _compare_translated_as(svc: RagService, q: str, translation: str) -> Comparison:
    """``svc.compare(q)`` with the scripted translator replying ``translation`` for ``q``."""
    TRANSLATIONS[q] = translation
    try:
        return svc.compare(q)
    finally:
        del TRANSLATIONS[q]


def test_a_translation_that_adds_a_figure_is_not_used(svc: RagService, gen: Translator) -> None:
    """Seen with the 0.5B model: "出差住宿费的报销标准是多少？" → "… fees is 1000 yuan." — a made-up
    answer inside the question would be searched for and shown on the "also searched as" line."""
    q = "企业所得税多久汇算清缴？"
    cross = _compare_translated_as(svc, q, "Corporate income tax is settled within 5 months, how long?").cross_language
    assert cross is not None and cross.status == CrossStatus.FAILED and not cross.fused
    assert "added a number the question does not have (5)" in cross.describe()
    # numerals are read as digits: 第五十条 and "Article 50" agree
    from rag_desktop.app.crosslang import invented_numbers

    assert invented_numbers("第五十条规定了什么？", "What does Article 50 say?") == []
    assert invented_numbers("What happened in Q3 2025?", "2025年第三季度发生了什么？") == []
    # a lone 一 is a word (the 1.5B: "…如何得分一个段落？", "一般"); after 第 or in a numeral it is a number
    assert invented_numbers("How does ColBERT score a passage?", "ColBERT的延迟交互如何得分一个段落？") == []
    assert invented_numbers("Within how many working days is it reviewed?", "一般需要多少个工作日完成审查？") == []
    assert invented_numbers("What does the article say?", "第一条规定了什么？") == ["1"]
    assert invented_numbers("How long is it valid?", "有效期是十一个月吗？") == ["11"]


def test_a_translation_that_keeps_an_english_name_is_used(svc: RagService, gen: Translator) -> None:
    """The 1.5B's translation of the demo's headline question keeps the task's English name, so the
    reply holds more Latin letters than Han characters; what it wrote anew is Chinese."""
    q = "What did the Wason selection task show?"
    cross = _compare_translated_as(svc, q, "Wason selection task展示了什么？").cross_language
    assert cross is not None and cross.status == CrossStatus.FUSED
    assert cross.translated == "Wason selection task展示了什么？"
    from rag_desktop.core.replies import clean_translation, written_anew

    assert written_anew("Wason selection task展示了什么？", q).strip() == "展示了什么？"
    assert clean_translation(q, "en", "zh", q) == ""  # the question echoed: nothing written anew
    assert clean_translation("Who plays the lead in 澜川往事?", "zh", "en", "《澜川往事》的男主角由谁扮演？") != ""


def test_a_reply_that_answers_instead_of_translating_is_not_used(svc: RagService, gen: Translator) -> None:
    """Seen with the 1.5B in the demo walkthrough: an English question came back as a Chinese
    statement about its topic, whose words pulled unrelated Chinese documents into the columns."""
    q = "What did the Wason selection task show?"
    comp = _compare_translated_as(svc, q, "Wason selection task展示了选择任务的复杂性。")
    cross = comp.cross_language
    assert cross is not None and cross.status == CrossStatus.FAILED and not cross.fused
    assert "answered the question instead of translating it" in cross.describe()
    assert [h.unit_id for h in comp.baseline.hits] == _typed_only(svc, q)
    from rag_desktop.app.crosslang import answered_instead

    assert not answered_instead("企业所得税多久汇算清缴？", "How long until corporate income tax is settled?")
    assert not answered_instead("What is late interaction?", "什么是后期交互")  # no final mark: kept
    assert not answered_instead("请说明出差标准。", "Explain the travel standards.")  # not a question


def test_the_setting_off_translates_nothing(svc: RagService, gen: Translator) -> None:
    svc.settings = svc.settings.replace("retrieval", cross_language=False).validate()
    comp = svc.compare(QUESTION_ZH)
    assert comp.cross_language is not None and comp.cross_language.status == CrossStatus.OFF
    assert gen.calls == [] and "translate_question" not in comp.timings


def test_cfrag_retrieves_for_both_phrasings_of_the_question(svc: RagService, gen: Translator) -> None:
    svc.compare(QUESTION_ZH)  # the translation is cached; CF-RAG reuses it
    seen: list[list[str]] = []
    from rag_desktop.core import cfrag as cf

    original = cf.iter_cfrag

    def spy(query: str, *, retrieve, **kw):  # type: ignore[no-untyped-def]
        seen.append([Path(h.path).name for h in retrieve(query, 4)])
        return iter(())

    import rag_desktop.app.service as service_mod

    service_mod.iter_cfrag = spy  # type: ignore[assignment]
    try:
        list(svc.cfrag(QUESTION_ZH))
    finally:
        service_mod.iter_cfrag = original
    assert seen and seen[0][0] == "wason_en.txt"
    assert gen.calls.count("translation") == 1


def test_a_single_language_library_is_never_translated(tmp_path: Path) -> None:
    one = ingest_texts(tmp_path, {k: v for k, v in DOCS.items() if k.endswith("_en.txt")},
                       Settings().replace("retrieval", level="chunk", cross_language=True))
    try:
        g = Translator()
        one.runtime._generator = g
        comp = one.compare("Why do people fail the Wason selection task?")
        assert comp.cross_language is not None and comp.cross_language.status == CrossStatus.SINGLE
        assert g.calls == []
        assert [h.unit_id for h in comp.baseline.hits] == [
            h.unit_id for h in one.retriever().context("Why do people fail the Wason selection task?").baseline.hits]
    finally:
        one.close()


def test_eval_fuses_each_method_and_reports_the_translations(svc: RagService, gen: Translator) -> None:
    from rag_desktop.app.evaluation import BeirData, evaluate_rankings, rank_all
    from rag_desktop.cli.parser import build_parser

    docs = svc.library.catalog.documents()
    mapping = {str(Path(d.path).resolve()): Path(d.path).stem for d in docs}
    data = BeirData({Path(d.path).stem: (d.title, "") for d in docs}, {"x1": QUESTION_ZH},
                    {"x1": {"wason_en": 2.0}}, {})
    translations: dict[str, dict[str, object]] = {}
    runs, _ = rank_all(svc, data, ["baseline", "hybrid"], 20, "chunk", mapping, translations)
    assert translations["x1"]["status"] == "fused" and translations["x1"]["translated"]
    assert runs["baseline"]["x1"][0] == "wason_en"
    table, _ = evaluate_rankings(runs, data, 20)
    assert table["baseline"]["MRR@10"] == 1.0
    args = build_parser().parse_args(["eval", "--data", "d", "--cross-language", "off"])
    assert args.cross_language == "off"
