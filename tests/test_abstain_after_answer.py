"""Saying "not in your documents" after the answer is written (core.abstain.after_answer).

The rule is pure; the service's passages, their check and the library are real, the generator is the
scripted collaborator of tests/test_abstain.py (its answer text and its judgement set per test).
"""

from __future__ import annotations

import dataclasses

import pytest
from test_abstain import WASON, Judge, _answered, _panes, svc  # noqa: F401  (svc: the module's library fixture)

from rag_desktop.app.abstention import other_language_near, pointed
from rag_desktop.app.service import RagService
from rag_desktop.core.abstain import AFTER_ANSWER, MIN_JUDGED, Support, after_answer, decide, judged
from rag_desktop.core.types import Answer, Hit

INVENTED = "The Wason selection task was designed in London in 1962 by Harold Pemberton [1]."
REFUSAL = "The sources do not explicitly mention it [1]."


class Writer(Judge):
    """The scripted judge whose answer is ``text``."""

    def __init__(self, yes: float, text: str) -> None:
        super().__init__(yes)
        self.text = text

    def _reply(self, messages):  # type: ignore[no-untyped-def]
        kind, reply = super()._reply(messages)
        return (kind, self.text) if kind == "answer" else (kind, reply)


def test_abstained_after_the_answer_only_when_it_says_so_or_both_checks_agree() -> None:
    first = decide(Support(3, 2, 0.9, 0.8))
    doubted = judged(first, MIN_JUDGED - 1.0)
    assert doubted.abstained  # what judged says; the service passes it on as a warning
    warn = doubted.__class__(False, "", doubted.support, judged=doubted.judged)
    # the judgement alone, or the passage check alone, only marks the answer
    assert after_answer(first, warn, said_not_found=False, unsupported=False) is warn
    assert after_answer(first, None, said_not_found=False, unsupported=True) is None
    # both: not in your documents, the odds kept for the person
    both = after_answer(first, warn, said_not_found=False, unsupported=True)
    assert both is not None and both.abstained and both.reason == "unheld" and both.written
    assert both.judged == warn.judged
    # the answer saying the sources lack it, judged or not
    said = after_answer(first, None, said_not_found=True, unsupported=False)
    assert said is not None and said.abstained and said.reason == "said_not_found" and said.written
    assert set(AFTER_ANSWER) == {"unheld", "said_not_found"}
    assert not first.written and not judged(first, -3.0).written  # decided before a word is written


@pytest.mark.integration
def test_an_invented_answer_judged_not_held_is_said_not_in_your_documents_and_kept(svc: RagService) -> None:  # noqa: F811
    svc.runtime._generator = gen = Writer(0.2, INVENTED)
    answer = _answered(svc)
    assert gen.calls == ["answer", "judge"]  # the first token waited for nothing
    assert {"unsupported", "doubted"} <= set(answer.warnings)
    assert answer.abstained and answer.abstention is not None and answer.abstention.reason == "unheld"
    # what it wrote (its [1] dropped: that passage does not hold the sentence) and read, kept to be shown
    assert answer.text.startswith(INVENTED.removesuffix(" [1].")) and answer.sources
    assert answer.settles_cfrag
    # the library also holds Chinese, reached by a translation only: the person is told where else to ask,
    # unless a passage in Chinese was read (then the verdict saw it)
    english_only = all(h.lang == "en" for h in answer.sources)
    ranked = svc.compare(WASON).answer_list("baseline")
    near = other_language_near(ranked.hits, "en", answer.abstention.support.library_sim)
    assert answer.abstention.other_language == ("zh" if english_only and near else "")
    assert answer.abstention.as_json()["other_language"] == answer.abstention.other_language


def test_a_verdict_on_passages_of_one_language_says_where_else_to_ask() -> None:
    from rag_desktop.cli.common import abstained_line
    from rag_desktop.ui import i18n
    from rag_desktop.ui.i18n import tr

    first = decide(Support(3, 2, 0.9, 0.8))
    unheld = after_answer(first, judged(first, -1.0), said_not_found=False, unsupported=True)
    assert unheld is not None
    line = abstained_line(Answer(INVENTED, abstention=dataclasses.replace(unheld, other_language="zh")))
    assert "documents in Chinese" in line and "retrieval.cross_language" in line
    assert "Chinese" not in abstained_line(Answer(INVENTED, abstention=unheld))
    with i18n.using("zh"):
        assert "中文" in tr("answer.other_language", lang=tr("lang.zh"))


def _hit(lang: str, s_sim: float) -> Hit:
    return Hit(1, 1, "chunk", "t", "p", 1, "text", s_sim, 1, lang)


def test_the_other_language_is_named_only_where_a_document_in_it_is_nearer_than_the_library_average() -> None:
    """The hint "ask it in Chinese" sends a person on a second search: given only where a Chinese unit of
    the ranked list is closer to the question than the library's average document (Support.library_sim)."""
    first = decide(Support(3, 2, 0.80, 0.75))  # library_sim 0.75
    unheld = after_answer(first, judged(first, -1.0), said_not_found=False, unsupported=True)
    assert unheld is not None and unheld.support.library_sim == 0.75
    read = [_hit("en", 0.80), _hit("en", 0.79)]
    both = {"en": 3, "zh": 2}
    far, near = [*read, _hit("zh", 0.749)], [*read, _hit("zh", 0.75)]
    assert not other_language_near(far, "en", 0.75) and other_language_near(near, "en", 0.75)
    assert not other_language_near(read, "en", 0.0)  # no unit in another language at all
    assert pointed(unheld, "en", read, far, both, False).other_language == ""
    assert pointed(unheld, "en", read, near, both, False).other_language == "zh"
    # the conditions before it still hold: cross-language search on, a Chinese passage read, one language
    assert pointed(unheld, "en", read, near, both, True).other_language == ""
    assert pointed(unheld, "en", [*read, _hit("zh", 0.9)], near, both, False).other_language == ""
    assert pointed(unheld, "en", read, near, {"en": 3}, False).other_language == ""
    assert pointed(first, "en", read, near, both, False).other_language == ""  # answered: nothing to point


@pytest.mark.integration
def test_an_invented_answer_the_model_judges_held_is_written_and_marked(svc: RagService) -> None:  # noqa: F811
    svc.runtime._generator = Writer(0.9, INVENTED)
    answer = _answered(svc)
    assert "unsupported" in answer.warnings and not answer.abstained


@pytest.mark.integration
def test_an_answer_saying_the_sources_lack_it_is_said_not_in_your_documents(svc: RagService) -> None:  # noqa: F811
    svc.runtime._generator = Writer(0.9, REFUSAL)
    answer = _answered(svc)
    assert answer.abstained and answer.abstention is not None and answer.abstention.reason == "said_not_found"
    assert answer.text.startswith("The sources do not explicitly mention it")


@pytest.mark.integration
def test_cfrag_says_the_same_after_an_unheld_answer_and_searches_after_a_refusal(svc: RagService) -> None:  # noqa: F811
    from rag_desktop.app.flow_events import Abstained, CFProgress
    from rag_desktop.app.question_flow import QuestionFlow

    for text, settles in ((INVENTED, True), (REFUSAL, False)):
        svc.runtime._generator = gen = Writer(0.2, text)
        flow = QuestionFlow(svc, WASON, highlights=False, prepare=False)
        list(flow.events(cfrag=False))
        assert flow.comparison is not None and flow.written[flow.comparison.first_column].abstained
        n_calls = len(gen.calls)
        first = next(iter(flow.cfrag()))
        if settles:  # said once for both columns; CF-RAG asked the model nothing
            assert isinstance(first, Abstained) and first.answer.method == "cfrag"
            assert first.answer.abstention is not None and first.answer.abstention.reason == "unheld"
            assert len(gen.calls) == n_calls
        else:  # the answer says the sources lack it: CF-RAG searches other passages
            assert isinstance(first, CFProgress)


def test_the_cli_says_why_after_the_answer_it_printed() -> None:
    from rag_desktop.cli.common import abstained_line

    first = decide(Support(3, 2, 0.9, 0.8))
    unheld = after_answer(first, judged(first, -1.0), said_not_found=False, unsupported=True)
    line = abstained_line(Answer(INVENTED, abstention=unheld))
    assert line.startswith("Not in your documents") and "27%" in line and INVENTED not in line
    said = after_answer(first, None, said_not_found=True, unsupported=False)
    assert "so says the answer above" in abstained_line(Answer(REFUSAL, abstention=said))


@pytest.mark.gui
def test_the_answer_pane_says_not_in_your_documents_above_what_was_written(qtbot, svc: RagService) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from rag_desktop.ui.i18n import tr

    svc.runtime._generator = Writer(0.25, INVENTED)
    answer = _answered(svc)
    for pane in _panes(qtbot, answer):
        assert pane.text() == f"{tr('answer.unheld_text')}\n\n{answer.text}" and "Pemberton" in answer.text
        assert pane.status.text().startswith(tr("answer.unheld"))
        assert "25%" in pane.status.toolTip() and "62%" in pane.status.toolTip()
        assert pane.sources.rowCount() == len(answer.sources)
    assert answer.abstention is not None
    elsewhere = dataclasses.replace(answer, abstention=dataclasses.replace(answer.abstention, other_language="zh"))
    for pane in _panes(qtbot, elsewhere):
        # Where else to ask stands between the verdict and the kept text, so no scroll hides it.
        assert pane.text() == (f"{tr('answer.unheld_text')}\n\n{tr('answer.other_language', lang=tr('lang.zh'))}"
                               f"\n\n{answer.text}")


def test_the_exported_report_says_not_in_your_documents_above_the_text() -> None:
    from test_gui_support import SURFACES, make_comparison

    from rag_desktop.core.settings import Settings
    from rag_desktop.ui import i18n
    from rag_desktop.ui.i18n import tr
    from rag_desktop.ui.report import DecisionReport

    first = decide(Support(3, 2, 0.9, 0.8))
    unheld = after_answer(first, judged(first, -1.0), said_not_found=False, unsupported=True)
    comp = make_comparison()
    for lang in ("en", "zh"):
        with i18n.using(lang):
            page = DecisionReport(comp.query, comp, {"baseline": Answer(INVENTED, abstention=unheld)}, None,
                                  SURFACES, lang, Settings()).to_html()
            assert page.index(tr("answer.unheld")) < page.index("Harold Pemberton")


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["warn", "abstain"])
def test_the_same_prompt_again_is_judged_as_before_without_asking_the_model(svc: RagService, mode: str) -> None:  # noqa: F811
    """A column shown the answer just written for its prompt (RagService.answer keeps it) carries the
    same verdict, from the kept odds: no second answer and no second judgement."""
    from test_abstain import _judging

    svc.runtime._generator = gen = Writer(0.3 if mode == "warn" else 0.9, INVENTED)  # doubted; written
    with _judging(svc, mode):
        first = _answered(svc)
        calls = list(gen.calls)
        again = _answered(svc)
    assert gen.calls == calls and calls.count("answer") == 1 and calls.count("judge") == 1
    assert (again.text, again.warnings, again.abstention) == (first.text, first.warnings, first.abstention)
    if mode == "warn":  # doubted, written: the odds are what the verdict came from
        assert first.abstention is not None and first.abstention.judged is not None
