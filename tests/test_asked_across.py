"""A question asked again of the library's other language where its own passages are about something else
(app.asked_across, RagService.answer, ``generation.ask_other_language``).

The library, the embedder, retrieval, the lift's rule and the hint's rule are real; the generator is a
scripted collaborator that translates as TRANSLATIONS says and scores the question as the passages' language
says: higher after Chinese passages about coughs, lower after English ones about other things.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from test_abstain import DOCS, Judge, Translator, _panes, svc  # noqa: F401  (svc: the module's library fixture)
from test_gui_support import ScriptedGenerator

from rag_desktop.app.service import RagService, judged_abstention
from rag_desktop.core.types import Answer, GenEvent, Progress, RankedList

COUGH = "How does traditional Chinese medicine treat a chronic cough?"
COUGH_ZH = "中医怎么治疗久咳？"


class CrossLifter(Translator):
    """Translates COUGH, and reads a question as likelier after passages that hold the Chinese document's
    words than after none, and less likely after passages without them."""

    def __init__(self, zh_lift: float = 1.0) -> None:
        super().__init__()
        self.zh_lift = zh_lift
        self.scored: list[str] = []

    def _reply(self, messages):  # type: ignore[no-untyped-def]
        kind, text = ScriptedGenerator._reply(self, messages)
        return (kind, COUGH_ZH) if kind == "translation" else (kind, text)

    def tail_logprob(self, messages, tail, *, cancel=None):  # type: ignore[no-untyped-def]
        self.calls.append("score")
        last = messages[-1].content
        self.scored.append(tail)
        n = max(1, len(tail.split()))
        if "[1]" not in last:  # no passages
            return -2.0 * n, n
        return (-2.0 + (self.zh_lift if "中医" in last else -1.0)) * n, n


class CrossJudge(CrossLifter, Judge):
    """CrossLifter that also judges the passages: "yes" with probability ``yes``."""

    def __init__(self, yes: float) -> None:
        Judge.__init__(self, yes)
        self.zh_lift, self.scored = 1.0, []


def _english_first(svc: RagService) -> tuple[RankedList, int]:  # noqa: F811
    """COUGH's list with its English units first: in a larger library the few sources an English question
    reads are English, and the Chinese document nearer the question than the library's average stands
    below them (the hint's rule, app.abstention.other_language_near, reads the whole list)."""
    ranked = svc.compare(COUGH, translate=False).answer_list("baseline")
    en = [h for h in ranked.hits if h.lang == "en"]
    zh = [h for h in ranked.hits if h.lang == "zh"]
    assert en and zh and max(h.s_sim for h in zh) >= svc.abstention(COUGH, ranked).support.library_sim
    hits = tuple(dataclasses.replace(h, rank=i) for i, h in enumerate([*en, *zh], start=1))
    return dataclasses.replace(ranked, hits=hits), len(en)


@contextmanager
def _set(svc: RagService, **generation: object) -> Iterator[None]:  # noqa: F811
    before = svc.settings
    svc.settings = svc.settings.replace("generation", **generation)
    try:
        yield
    finally:
        svc.settings = before


def _events(svc: RagService, gen: CrossLifter) -> list[object]:  # noqa: F811
    svc.runtime._generator = gen
    svc._written = []  # a fresh window: nothing kept from another test
    svc._question_translations.clear()
    ranked, n = _english_first(svc)
    return list(svc.answer(COUGH, ranked, n_sources=n))


@pytest.mark.integration
def test_passages_about_something_else_ask_the_other_languages_documents_and_answer_from_them(
        svc: RagService) -> None:  # noqa: F811
    assert set(DOCS) >= {"cough_zh.txt"}
    gen = CrossLifter()
    events = _events(svc, gen)
    answer = events[-1]
    assert isinstance(answer, Answer) and not answer.abstained and answer.text
    assert answer.asked_as == COUGH_ZH and answer.sources and all(h.lang == "zh" for h in answer.sources[:1])
    assert Progress("asked_across", 0, 0, COUGH_ZH) in events
    # the English passages were scored (about something else), the question translated once (by the words'
    # check, whose translation is kept), the Chinese passages scored with the Chinese question (they bear
    # on it), and the answer written once
    assert gen.calls.count("translation") == 1 and gen.calls.count("answer") == 1
    assert gen.calls[-1] == "answer" and gen.scored.count(COUGH) == 2 and gen.scored.count(COUGH_ZH) == 2
    assert [e for e in events if isinstance(e, GenEvent)], "the answer streams"
    # the second column handing the model the same English passages: no model call at all
    calls = list(gen.calls)
    ranked, n = _english_first(svc)
    again = [e for e in svc.answer(COUGH, ranked, n_sources=n) if isinstance(e, Answer)][-1]
    assert again.text == answer.text and again.asked_as == COUGH_ZH and gen.calls == calls
    # what the evaluation measures follows the same path
    verdict = judged_abstention(svc, COUGH, ranked)
    assert not verdict.abstained and verdict.translated == COUGH_ZH


@pytest.mark.integration
def test_it_crosses_once_and_the_setting_off_says_where_else_to_ask(svc: RagService) -> None:  # noqa: F811
    # the Chinese passages about something else too: said so, with no hint back to English
    answer = _events(svc, gen := CrossLifter(zh_lift=-0.5))[-1]
    assert isinstance(answer, Answer) and answer.abstained and answer.asked_as == COUGH_ZH
    assert answer.abstention is not None and answer.abstention.reason == "unrelated"
    assert answer.abstention.other_language == "" and "answer" not in gen.calls
    assert all(h.lang == "zh" for h in answer.sources[:1])
    # the setting off: the verdict on the English passages, naming Chinese as where else to ask
    with _set(svc, ask_other_language=False):
        answer = _events(svc, gen := CrossLifter())[-1]
    assert isinstance(answer, Answer) and answer.abstained and not answer.asked_as
    assert answer.abstention is not None and answer.abstention.other_language == "zh"
    # (its words are not the library's, so the words' check translated it: the one call before the scores)
    assert gen.calls == ["translation", "score", "score"]


@pytest.mark.integration
def test_an_answer_asked_across_is_written_only_where_the_model_also_judges_its_passages_to_hold_it(
        svc: RagService) -> None:  # noqa: F811
    assert svc.settings.generation.judge_passages == "warn"  # the default: asked after an answer in its language
    answer = _events(svc, gen := CrossJudge(yes=0.1))[-1]
    assert isinstance(answer, Answer) and answer.abstained and answer.asked_as == COUGH_ZH
    assert answer.abstention is not None and answer.abstention.reason == "not_held" and "answer" not in gen.calls
    # asked before a word of the answer asked across, reading on from the lift's read of the prompt
    assert gen.judged and gen.after
    answer = _events(svc, gen := CrossJudge(yes=0.9))[-1]
    assert isinstance(answer, Answer) and not answer.abstained and answer.text and "doubted" not in answer.warnings
    assert gen.calls.count("judge") == 1 and gen.calls.index("judge") < gen.calls.index("answer")


@pytest.mark.gui
@pytest.mark.integration
def test_the_answer_pane_says_which_question_it_asked(qtbot, svc: RagService) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from rag_desktop.ui.i18n import tr

    answer = _events(svc, CrossLifter())[-1]
    assert isinstance(answer, Answer)
    for pane in _panes(qtbot, answer):
        assert pane.status.text().startswith(tr("answer.asked_as", q=COUGH_ZH, lang=tr("lang.zh")))
        assert pane.text() == answer.text
    from rag_desktop.core.types import Progress
    from rag_desktop.ui.present import progress_text
    assert COUGH_ZH in progress_text(Progress("asked_across", 0, 0, COUGH_ZH))
    crossed_not_held = _events(svc, CrossLifter(zh_lift=-0.5))[-1]
    assert isinstance(crossed_not_held, Answer)
    for pane in _panes(qtbot, crossed_not_held):
        assert pane.status.text().startswith(tr("answer.asked_as", q=COUGH_ZH, lang=tr("lang.zh")))
        assert pane.text().startswith(tr("answer.unrelated_text"))


@pytest.mark.integration
def test_the_cli_and_its_json_say_which_question_it_asked(svc: RagService, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    import json

    from rag_desktop.cli.library import _print_answer

    answer = _events(svc, CrossLifter())[-1]
    assert isinstance(answer, Answer)
    _print_answer(answer, as_json=False)
    assert f"asked as: {COUGH_ZH}" in capsys.readouterr().out
    _print_answer(answer, as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert out["asked_as"] == COUGH_ZH and out["abstained"] is False
