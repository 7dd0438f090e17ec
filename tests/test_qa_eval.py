"""What eval-qa asks the model: ``passages`` as the app asks, ``standard`` for a few words (app.qa_eval)."""

from __future__ import annotations

from rag_desktop.app.qa_eval import SHORT_ANSWER, asked_question
from rag_desktop.core import prompting
from rag_desktop.core.settings import Settings


def test_passages_is_asked_what_the_person_typed_from_the_apps_sources() -> None:
    s = Settings()
    for q in ("复旦大学的学号一共有几位？", "Which cards must be turned over in the Wason selection task?"):
        asked = asked_question("passages", q, s)
        assert asked.question == q
        assert asked.n_sources == prompting.ANSWER_SOURCES  # what RagService.answer reads for the window


def test_standard_asks_for_a_few_words_from_cfrags_evidence_count() -> None:
    s = Settings().replace("cfrag", evidence_per_hypothesis=3)
    zh = asked_question("standard", "复旦大学的学号一共有几位？", s)
    en = asked_question("standard", "How many digits?", s)
    assert zh.question == "复旦大学的学号一共有几位？" + SHORT_ANSWER["zh"]
    assert en.question == "How many digits?" + SHORT_ANSWER["en"]
    assert zh.n_sources == en.n_sources == 3


def test_passages_as_standard_restores_the_earlier_protocol() -> None:
    s = Settings()
    q = "出差住宿费的报销标准是多少？"
    assert asked_question("passages", q, s, as_standard=True) == asked_question("standard", q, s)
    assert asked_question("passages", q, s, as_standard=True) != asked_question("passages", q, s)


def test_the_table_counts_the_doubted_answers_and_the_right_ones_among_them() -> None:
    from rag_desktop.app.qa_eval import _table
    from rag_desktop.core.qa_metrics import QAScores

    def row(qid: str, right: bool, doubted: bool | None,
            lang: str) -> tuple[str, QAScores, float, str, dict[str, object]]:
        extra: dict[str, object] = {"lang": lang} if doubted is None else {"lang": lang, "doubted": doubted}
        return qid, QAScores(0.0, 1.0 if right else 0.0, 0.5), 1.0, "answer", extra

    rows = [row("a", True, True, "zh"), row("b", True, False, "zh"), row("c", False, True, "en"),
            row("d", True, False, "en"), row("e", False, False, "en")]
    table = _table({"passages": rows})
    assert table["passages"]["doubted_share"] == 2 / 5
    assert table["passages"]["right_doubted_share"] == 1 / 3  # a of the right a, b, d
    assert table["passages/zh"]["right_doubted_share"] == 1 / 2
    assert table["passages/en"]["right_doubted_share"] == 0.0
    assert table["passages/en"]["doubted_share"] == 1 / 3
    # rows without a judgement (a method that does not judge) add no such column
    assert "doubted_share" not in _table({"cfrag": [row("a", True, None, "zh")]})["cfrag"]
