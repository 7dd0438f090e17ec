"""Saying "not in your documents" (core.abstain, RagService.abstention / answer, `answer --json`).

The decision is pure (core.abstain.decide); the service's support figures come from the real library,
embedder and keyword index; the generator is a scripted collaborator except in the CLI test, which
runs the real embedded model for the one translation an off-topic question in a mixed library gets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from library_helpers import ingest_texts
from test_gui_support import ScriptedGenerator

from rag_desktop.app.service import RagService, judged_abstention
from rag_desktop.core.abstain import MIN_LIFT, Support, decide
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, GenEvent

ROOT = Path(__file__).resolve().parent.parent

DOCS = {
    "wason_en.txt": "The Wason selection task asks which cards must be turned to test a rule. Most people choose "
                    "the matching cards instead of the falsifying ones; this is called matching bias. " * 4,
    "cough_zh.txt": "中医治疗久咳，先辨寒热虚实。风寒咳嗽用止嗽散，肺阴亏虚用沙参麦冬汤。" * 6,
    "noodles_en.txt": "Boil water, add the noodles, cook five minutes, drain and serve with sauce. " * 4,
}
# Questions none of whose words the demo or DOCS use (one shared word, as "design" or "open", is
# enough to answer: core.abstain).
OFF_TOPIC = ("Who painted the ceiling of the Sistine Chapel?", "火星探测器是哪一年着陆的？")
# What the scripted translator replies for each question (its other-language phrasing).
TRANSLATIONS = {OFF_TOPIC[0]: "西斯廷教堂的天顶画是谁画的？",
                OFF_TOPIC[1]: "In which year did the Mars rover land?",
                "沃森选择任务中必须翻开哪几张卡片？": "Which cards must be turned in the Wason selection task?"}


def _panes(qtbot, answer: Answer):  # type: ignore[no-untyped-def]
    """An answer pane showing ``answer``, in the en UI and then in the zh UI (yielded in each)."""
    from rag_desktop.ui import i18n
    from rag_desktop.ui.answer_pane import AnswerPane

    for lang in ("en", "zh"):
        with i18n.using(lang):
            pane = AnswerPane("baseline", "col.baseline")
            qtbot.addWidget(pane)
            pane.start()
            pane.set_answer(answer)
            yield pane


class Translator(ScriptedGenerator):
    """The scripted collaborator, translating a question as TRANSLATIONS says."""

    def _reply(self, messages):  # type: ignore[no-untyped-def]
        kind, text = super()._reply(messages)
        if kind != "translation":
            return kind, text
        return kind, next(v for k, v in TRANSLATIONS.items() if k in messages[-1].content)


def test_abstain_only_when_no_word_is_the_librarys_and_nothing_stands_out() -> None:
    low = MIN_LIFT - 0.01
    assert decide(Support(10, 0, 0.80, 0.80 - low)).abstained
    assert decide(Support(10, 0, 0.80, 0.80 - low)).reason == "off_topic"
    # Either signal is enough to answer: one of the question's words in the library, or the lift at its limit.
    assert not decide(Support(10, 1, 0.80, 0.80 - low)).abstained
    assert not decide(Support(10, 0, MIN_LIFT, 0.0)).abstained
    # A question with no search terms is decided by the lift alone.
    assert Support(0, 0, 0.8, 0.75).coverage is None
    assert decide(Support(0, 0, 0.80, 0.80 - low)).abstained
    assert not decide(Support(0, 0, 0.90, 0.70)).abstained
    out = decide(Support(4, 0, 0.81, 0.75)).as_json()
    assert out["abstained"] is True and out["coverage"] == 0.0 and out["terms"] == 4 and out["lift"] == 0.06


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    service = ingest_texts(tmp_path_factory.mktemp("abstain"), DOCS, Settings().replace("retrieval", level="chunk"))
    return service


def _answer(svc: RagService, q: str) -> tuple[Answer, ScriptedGenerator]:
    gen = Translator()
    svc.runtime._generator = gen  # the collaborator; library, embedder and retrieval are real
    events = list(svc.answer(q, svc.compare(q, translate=False).answer_list("baseline")))
    answer = events[-1]
    assert isinstance(answer, Answer)
    assert not any(isinstance(e, GenEvent) for e in events) or not answer.abstained
    return answer, gen


@pytest.mark.integration
def test_the_librarys_own_questions_are_answered(svc: RagService) -> None:
    for q in ("Which cards must be turned in the Wason selection task?", "中医怎么治疗久咳？",
              "How long do the noodles cook?"):
        answer, gen = _answer(svc, q)
        assert not answer.abstained, (q, answer.abstention)
        assert "answer" in gen.calls and answer.text


@pytest.mark.integration
def test_a_question_about_another_subject_abstains_without_an_answer_call(svc: RagService) -> None:
    for q in OFF_TOPIC:
        answer, gen = _answer(svc, q)
        assert answer.abstained and answer.text == "" and not answer.sources, (q, answer.abstention)
        assert answer.abstention is not None and answer.abstention.reason == "off_topic"
        # The library holds both languages, so the question's translation was checked too (one
        # short call) and the model never answered.
        assert gen.calls == ["translation"], gen.calls
        assert answer.abstention.translated == TRANSLATIONS[q]


@pytest.mark.integration
def test_the_setting_off_answers_anyway(svc: RagService) -> None:
    before = svc.settings
    svc.settings = svc.settings.replace("generation", abstain=False)
    try:
        answer, gen = _answer(svc, OFF_TOPIC[0])
    finally:
        svc.settings = before
    assert not answer.abstained and answer.abstention is None and gen.calls == ["answer"]


@pytest.mark.integration
def test_a_translation_that_finds_the_library_answers(tmp_path: Path) -> None:
    """A question in the other language of a mixed library: its own words miss, its translation hits."""

    service = ingest_texts(tmp_path, DOCS)
    try:
        gen = Translator()
        service.runtime._generator = gen
        q = "沃森选择任务中必须翻开哪几张卡片？"
        ranked = service.compare(q, translate=False).answer_list("baseline")
        first = service.abstention(q, ranked)
        assert not first.abstained and first.translated, first
        assert gen.calls == ["translation"]
    finally:
        service.close()


@pytest.mark.integration
@pytest.mark.slow
def test_answer_json_says_abstained_on_the_demo_for_other_subjects_baseline_and_cfrag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_desktop.cli import main

    lib = tmp_path / "lib"
    assert main(["ingest", str(ROOT / "resources" / "demo"), "--library", str(lib), "--json"]) == 0
    capsys.readouterr()
    for q, method in zip(OFF_TOPIC, ("baseline", "cfrag"), strict=True):
        assert main(["answer", q, "--library", str(lib), "--method", method, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["abstained"] is True and out["abstain_reason"] == "off_topic", out
        assert out["text"] == "" and out["abstention"]["known_terms"] == 0


@pytest.mark.gui
def test_the_answer_pane_says_not_in_your_documents_in_both_languages(qtbot, svc: RagService) -> None:  # type: ignore[no-untyped-def]
    from rag_desktop.ui.i18n import tr

    answer, _ = _answer(svc, OFF_TOPIC[0])
    for pane in _panes(qtbot, answer):
        assert pane.text() == tr("answer.abstained_text")
        assert pane.status.text().startswith(tr("answer.abstained"))
        s = answer.abstention.support if answer.abstention else None
        assert s is not None and f"{s.n_known}" in pane.status.toolTip()


# ----------------------------------------------------------------------------- the model's judgement


def test_log_odds_sum_each_sides_words_and_the_cut_is_min_judged() -> None:
    import math

    from rag_desktop.core.abstain import MIN_JUDGED, judged, log_odds, yes_share

    lp = [math.log(0.5), math.log(0.2), math.log(0.1)]  # "yes", "Yes" | "no"
    assert log_odds(lp, 2) == pytest.approx(math.log(0.7 / 0.1))
    assert yes_share(log_odds(lp, 2)) == pytest.approx(0.7 / 0.8)
    first = decide(Support(3, 2, 0.9, 0.8))
    assert not first.abstained
    held, not_held = judged(first, MIN_JUDGED), judged(first, MIN_JUDGED - 1e-9)
    assert not held.abstained and held.reason == "" and held.judged == MIN_JUDGED
    assert not_held.abstained and not_held.reason == "not_held" and not_held.support == first.support
    assert not_held.as_json()["judged"] == round(MIN_JUDGED - 1e-9, 3)


class Judge(ScriptedGenerator):
    """The scripted collaborator, also a TokenScorer: ``yes`` is the probability it gives "yes"."""

    def __init__(self, yes: float) -> None:
        super().__init__()
        self.yes = yes
        self.judged: list[tuple[tuple[object, ...], bool]] = []
        self.after = False  # the last judgement's ``after``

    def first_token_logprobs(self, messages, words, *, cancel=None, keep=False, after=False):  # type: ignore[no-untyped-def]
        import math

        self.calls.append("judge")
        self.judged.append((tuple(messages), keep))
        self.after = after
        n_yes = len(words) // 2  # JUDGE's words: yes words, then as many no words (en: 2 + 2)
        return [math.log(self.yes / n_yes)] * n_yes + [math.log((1 - self.yes) / (len(words) - n_yes))] * (
            len(words) - n_yes)


WASON = "Which cards must be turned in the Wason selection task?"


@contextmanager
def _judging(svc: RagService, mode: str) -> Iterator[None]:
    """generation.judge_passages = ``mode`` inside the block; the settings put back after it."""
    before = svc.settings
    svc.settings = svc.settings.replace("generation", judge_passages=mode)
    try:
        yield
    finally:
        svc.settings = before


def _answered(svc: RagService, q: str = WASON) -> Answer:
    """The Answer the baseline column's answer ends with."""
    return [e for e in svc.answer(q, svc.compare(q).answer_list("baseline")) if isinstance(e, Answer)][-1]


@pytest.mark.integration
def test_passages_judged_not_to_hold_the_answer_abstain_before_a_word_is_written(svc: RagService) -> None:
    from rag_desktop.core.abstain import JUDGE

    with _judging(svc, "abstain"):
        for yes, abstains in ((0.2, True), (0.9, False)):
            _judged_once(svc, WASON, yes, abstains, JUDGE["en"][0])


def _judged_once(svc: RagService, q: str, yes: float, abstains: bool, judge_line: str) -> None:
    """One answer with the model judging the passages' P(yes) = ``yes``, in "abstain" mode."""
    gen = Judge(yes)
    svc.runtime._generator = gen
    ranked = svc.compare(q, translate=False).answer_list("baseline")
    events = list(svc.answer(q, ranked))
    answer = events[-1]
    assert isinstance(answer, Answer)
    # the judgement reads the answer's own prompt with JUDGE's question after the user's turn
    (messages, keep), = gen.judged
    assert keep and messages[-1].content.endswith("\n\n" + judge_line)  # type: ignore[attr-defined]
    assert q in messages[-1].content  # type: ignore[attr-defined]
    assert answer.abstained is abstains, answer.abstention
    if abstains:
        assert gen.calls == ["judge"] and answer.text == "" and answer.sources  # the passages it judged
        assert answer.abstention is not None and answer.abstention.reason == "not_held"
        assert answer.abstention.judged_yes == pytest.approx(0.2)
        assert not any(isinstance(e, GenEvent) for e in events)
        assert judged_abstention(svc, q, ranked).reason == "not_held"  # what the eval measures
    else:
        assert gen.calls == ["judge", "answer"] and answer.text and "doubted" not in answer.warnings
    assert not gen.after  # before the answer, its evaluation kept for the answer's stream


@pytest.mark.integration
def test_by_default_an_answer_judged_not_held_is_written_and_marked(svc: RagService) -> None:
    assert Settings().generation.judge_passages == "warn"
    gen = Judge(0.3)
    svc.runtime._generator = gen
    answer = _answered(svc)
    # judged after the answer, from its cache: the first token waits for nothing
    assert gen.calls == ["answer", "judge"] and gen.after and answer.text and "doubted" in answer.warnings
    assert not answer.abstained and answer.abstention is not None and answer.abstention.reason == ""
    assert answer.abstention.judged_yes == pytest.approx(0.3)


@pytest.mark.integration
def test_the_judgement_setting_off_asks_no_judgement(svc: RagService) -> None:
    gen = Judge(0.01)
    svc.runtime._generator = gen
    with _judging(svc, "off"):
        answer = _answered(svc)
    assert not answer.abstained and gen.calls == ["answer"]


@pytest.mark.integration
def test_cfrag_says_what_the_first_column_said_when_its_passages_were_judged(svc: RagService) -> None:
    from rag_desktop.app.flow_events import Abstained
    from rag_desktop.app.question_flow import QuestionFlow

    gen = Judge(0.1)
    svc.runtime._generator = gen
    with _judging(svc, "abstain"):
        flow = QuestionFlow(svc, WASON, highlights=False, prepare=False)
        list(flow.events(cfrag=False))
        assert flow.comparison is not None and flow.written[flow.comparison.first_column].abstained
        n_calls = len(gen.calls)
        done = list(flow.cfrag())
        assert len(done) == 1 and isinstance(done[0], Abstained)
        assert done[0].answer.method == "cfrag" and done[0].answer.abstention is not None
        assert done[0].answer.abstention.reason == "not_held"
        assert len(gen.calls) == n_calls and "answer" not in gen.calls  # CF-RAG asked the model nothing
        # the CLI's path, not handed the first column's answer, writes it and says the same
        last = list(svc.cfrag_or_abstain(WASON))[-1]
        assert isinstance(last, Answer) and last.abstained and last.method == "cfrag"


@pytest.mark.gui
def test_the_answer_pane_says_the_passages_were_judged_in_both_languages(qtbot, svc: RagService) -> None:  # type: ignore[no-untyped-def]
    from rag_desktop.ui.i18n import tr

    svc.runtime._generator = Judge(0.25)
    with _judging(svc, "abstain"):
        answer = _answered(svc)
    assert answer.abstained
    for pane in _panes(qtbot, answer):
        assert pane.text() == tr("answer.not_held_text")
        assert pane.status.text().startswith(tr("answer.not_held"))
        assert "25%" in pane.status.toolTip() and "62%" in pane.status.toolTip()


def test_passages_none_of_which_is_in_the_questions_language_are_not_judged() -> None:
    from rag_desktop.app.abstention import judge
    from rag_desktop.core.types import ChatMessage, Hit

    gen = Judge(0.01)
    first = decide(Support(3, 2, 0.9, 0.8))
    msgs = (ChatMessage("user", "Sources: [1] …\n\nQuestion: 卡片？"),)
    english = [Hit(1, 1, "chunk", "t", "p", 1, "The A and the 7.", 0.5, 1, "en")]
    assert judge(gen, msgs, english, "zh", first) is first and gen.calls == []
    chinese = [*english, Hit(2, 2, "chunk", "t", "p", 1, "翻开A和7。", 0.5, 2, "zh")]
    assert judge(gen, msgs, chinese, "zh", first).reason == "not_held" and gen.calls == ["judge"]


@pytest.mark.gui
def test_the_answer_pane_marks_an_answer_written_from_doubted_passages(qtbot, svc: RagService) -> None:  # type: ignore[no-untyped-def]
    from rag_desktop.ui.i18n import tr

    svc.runtime._generator = Judge(0.3)
    answer = _answered(svc)
    for pane in _panes(qtbot, answer):
        assert pane.text() == answer.text and pane.status.text().startswith(tr("answer.doubted"))
        assert "30%" in pane.status.toolTip()


@pytest.mark.gui
def test_a_narrow_pane_shows_its_whole_status_with_the_notes(qtbot, svc: RagService) -> None:  # type: ignore[no-untyped-def]
    """At 1280 pixels an answer pane is ~330 px wide: the status ("Causal rerank's answer (same
    sources) · ⚠ … · done · 1 citation · 5.4 s") wraps under the title instead of being clipped."""
    from PySide6.QtCore import Qt

    svc.runtime._generator = Judge(0.3)
    answer = _answered(svc)
    for pane in _panes(qtbot, answer):
        pane.add_note(lambda: "Causal rerank's answer (same sources)")
        pane.resize(330, 300)
        pane.show()
        qtbot.waitExposed(pane)
        status = pane.status
        assert status.wordWrap() and status.width() >= pane.width() - 20  # the pane's width, not the title's rest
        lines = status.fontMetrics().boundingRect(0, 0, status.width(), 10_000, int(Qt.TextFlag.TextWordWrap),
                                                  status.text()).height()
        assert status.height() >= lines > status.fontMetrics().height()  # on more than one line, none cut off


# --------------------------------------------------------------------------- the question's lift


def test_the_question_lift_is_the_per_token_log_likelihood_gained_and_its_sign_decides() -> None:
    from rag_desktop.core.abstain import MIN_QUESTION_LIFT, lifted, question_lift

    assert MIN_QUESTION_LIFT == 0.0
    assert question_lift((-10.0, 5), (-20.0, 5)) == pytest.approx(2.0)
    assert question_lift((-21.0, 6), (-20.0, 5)) == pytest.approx(-21 / 6 + 4)  # each sum over its own tokens
    with pytest.raises(ValueError):
        question_lift((0.0, 0), (-1.0, 1))
    first = decide(Support(3, 2, 0.9, 0.8))
    up, down = lifted(first, 0.0), lifted(first, -1e-9)
    assert not up.abstained and up.reason == "" and up.question_lift == 0.0
    assert down.abstained and down.reason == "unrelated" and down.support == first.support
    assert down.as_json()["question_lift"] == round(-1e-9, 3) and not down.written


class Lifter(ScriptedGenerator):
    """The scripted collaborator, also a PromptScorer: the question's log-probability per token is
    ``with_`` after the passages and ``without`` after none (the prompt's text says which)."""

    n_ctx = 4096

    def __init__(self, with_: float, without: float = -2.0) -> None:
        super().__init__()
        self.with_, self.without = with_, without
        self.scored: list[str] = []  # the prompts scored, their last message

    def tail_logprob(self, messages, tail, *, cancel=None):  # type: ignore[no-untyped-def]
        self.calls.append("score")
        last = messages[-1].content
        assert last.rstrip().endswith(tail)
        self.scored.append(last)
        n = len(tail.split())
        return (self.with_ if "[1]" in last else self.without) * n, n


def test_the_lift_compares_the_question_after_the_passages_with_it_after_none() -> None:
    from rag_desktop.app.abstention import relevance
    from rag_desktop.core.prompting import build_answer_messages
    from rag_desktop.core.types import Hit

    first = decide(Support(3, 2, 0.9, 0.8))
    q = "Which cards must be turned?"
    hits = [Hit(1, 1, "chunk", "t", "p", 1, "Turn the A and the 7.", 0.5, 1, "en")]
    msgs, _ = build_answer_messages(q, hits, "en", lambda t: len(t) // 4 + 1, 4096, 512)
    gen = Lifter(with_=-1.5)
    got = relevance(gen, msgs, q, hits, "en", first)
    assert not got.abstained and got.question_lift == pytest.approx(0.5)
    # the bare prompt first (from the prefix's saved state), then the answer prompt the answer reads next
    assert gen.calls == ["score", "score"] and "[1]" not in gen.scored[0] and gen.scored[1] == msgs[-1].content
    assert relevance(Lifter(with_=-2.5), msgs, q, hits, "en", first).reason == "unrelated"
    # a question typed with a space after it: scored without it (the prompts end with it all the same)
    spaced, _ = build_answer_messages(q + "  ", hits, "en", lambda t: len(t) // 4 + 1, 4096, 512)
    assert relevance(Lifter(with_=-1.5), spaced, q + "  ", hits, "en", first).question_lift == pytest.approx(0.5)
    # skipped where the judgement is: no passage in the question's language, or a generator that cannot score
    assert relevance(Lifter(with_=-9.0), msgs, "卡片？", hits, "zh", first) is first
    assert relevance(ScriptedGenerator(), msgs, q, hits, "en", first) is first


@contextmanager
def _relevance(svc: RagService, on: bool = True, mode: str = "warn") -> Iterator[None]:
    before = svc.settings
    svc.settings = svc.settings.replace("generation", check_relevance=on, judge_passages=mode)
    try:
        yield
    finally:
        svc.settings = before


class LiftJudge(Lifter, Judge):
    """Both scorers at once: the lift, then (if it lets the question through) the judgement."""

    def __init__(self, with_: float, yes: float) -> None:
        Judge.__init__(self, yes)
        self.with_, self.without, self.scored = with_, -2.0, []


@pytest.mark.integration
def test_passages_that_make_the_question_no_likelier_say_not_in_your_documents_before_a_word(
        svc: RagService) -> None:
    assert Settings().generation.check_relevance
    gen = Lifter(with_=-2.4)
    svc.runtime._generator = gen
    ranked = svc.compare(WASON, translate=False).answer_list("baseline")
    events = list(svc.answer(WASON, ranked))
    answer = events[-1]
    assert isinstance(answer, Answer) and answer.abstained and answer.text == "" and answer.sources
    assert answer.abstention is not None and answer.abstention.reason == "unrelated"
    assert answer.abstention.question_lift == pytest.approx(-0.4)
    assert gen.calls == ["score", "score"] and not any(isinstance(e, GenEvent) for e in events)
    assert judged_abstention(svc, WASON, ranked).reason == "unrelated"  # what the eval measures
    # passages that make it likelier: answered, the lift recorded
    svc.runtime._generator = gen = Lifter(with_=-1.0)
    answer = _answered(svc)
    assert not answer.abstained and answer.text and gen.calls == ["score", "score", "answer"]
    assert judged_abstention(svc, WASON, ranked).question_lift == pytest.approx(1.0)
    with _relevance(svc, on=False):
        svc.runtime._generator = gen = Lifter(with_=-9.0)
        assert not _answered(svc).abstained and gen.calls == ["answer"]


@pytest.mark.integration
def test_the_same_prompt_again_is_not_scored_again_and_the_judgement_comes_after_the_lift(svc: RagService) -> None:
    svc.runtime._generator = gen = LiftJudge(with_=-1.0, yes=0.9)
    first = _answered(svc)
    again = _answered(svc)  # the kept answer: neither scored nor written again
    assert gen.calls == ["score", "score", "answer", "judge"] and again.text == first.text
    with _relevance(svc, mode="abstain"):
        svc.runtime._generator = gen = LiftJudge(with_=-3.0, yes=0.9)
        assert _answered(svc).abstention.reason == "unrelated" and "judge" not in gen.calls  # type: ignore[union-attr]
        svc.runtime._generator = gen = LiftJudge(with_=-1.0, yes=0.1)
        assert _answered(svc).abstention.reason == "not_held" and gen.calls[:2] == ["score", "score"]  # type: ignore[union-attr]


@pytest.mark.integration
def test_the_same_prompt_after_a_verdict_gets_the_verdict_without_reading_it_again(svc: RagService) -> None:
    """A second column handing the model the same passages: the first column's "about something else" is
    said again with no model call (reading the prompt again would cost a whole prefill), and a changed
    prompt is read."""
    svc.runtime._generator = gen = Lifter(with_=-2.4)
    ranked = svc.compare(WASON, translate=False).answer_list("baseline")
    first = [e for e in svc.answer(WASON, ranked) if isinstance(e, Answer)][-1]
    again = [e for e in svc.answer(WASON, ranked) if isinstance(e, Answer)][-1]
    assert gen.calls == ["score", "score"]
    assert again.abstention == first.abstention and again.sources == first.sources and again.text == ""
    with _relevance(svc, mode="abstain"):  # another prompt key (the settings): read and judged afresh
        svc.runtime._generator = gen = LiftJudge(with_=-1.0, yes=0.1)
        assert _answered(svc).abstention.reason == "not_held"  # type: ignore[union-attr]
        assert _answered(svc).abstention.reason == "not_held"  # type: ignore[union-attr]
        assert gen.calls == ["score", "score", "judge"]
    svc.runtime._generator = gen = Lifter(with_=-1.0)  # the same messages, a generator that lets it through
    assert _answered(svc).text and gen.calls == ["score", "score", "answer"]


@pytest.mark.gui
def test_the_answer_pane_says_the_passages_are_about_something_else_in_both_languages(
        qtbot, svc: RagService) -> None:  # type: ignore[no-untyped-def]
    from rag_desktop.cli.common import abstained_line
    from rag_desktop.ui.i18n import tr

    svc.runtime._generator = Lifter(with_=-2.5)
    answer = _answered(svc)
    assert answer.abstained
    for pane in _panes(qtbot, answer):
        assert pane.text().startswith(tr("answer.unrelated_text"))
        assert pane.status.text().startswith(tr("answer.unrelated"))
        assert "-0.50" in pane.status.toolTip() and "+0.00" in pane.status.toolTip()
    assert "-0.50 per token" in abstained_line(answer)


@pytest.mark.integration
def test_a_kept_answer_is_not_shown_for_a_new_generator_where_a_freed_one_stood(svc: RagService) -> None:
    """The kept answer's key holds its generator weakly: a generator created after the one that wrote it was
    freed (CPython may give it the same id) writes its own answer."""
    import gc

    svc.runtime._generator = Lifter(with_=-1.0)
    _answered(svc)
    assert svc._written  # kept
    svc.runtime._generator = None
    gc.collect()
    svc.runtime._generator = gen = Lifter(with_=-1.0)
    _answered(svc)
    assert "answer" in gen.calls  # written, not shown again
