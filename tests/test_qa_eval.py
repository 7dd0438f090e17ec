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
