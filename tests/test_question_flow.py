"""The question's flow without Qt (app.question_flow): from a question's text to its answer events.

The flow object is the real one; the service is the GUI tests' in-memory FakeService (canned
rankings, a scripted generator). No module here imports PySide6.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from test_gui_support import ANSWER_TEXT, FakeService, ScriptedGenerator, make_comparison

from rag_desktop.app import flow_events as fe
from rag_desktop.app.question_flow import QuestionFlow
from rag_desktop.core.abstain import Abstention, Support
from rag_desktop.core.cfrag.types import CFResult
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, CancelToken, Hit, Progress, RankedList

QUESTION = "Why do people fail the Wason selection task?"


class GeneratorWatch(ScriptedGenerator):
    """A scripted generator that records how many columns events had been seen at each call."""

    def __init__(self, seen: list[fe.FlowEvent], fail: BaseException | None = None) -> None:
        super().__init__(fail=fail)
        self.seen = seen
        self.columns_before_call: list[int] = []

    def stream(self, *args: object, **kwargs: object) -> Iterator[object]:  # type: ignore[override]
        self.columns_before_call.append(sum(isinstance(e, fe.ColumnsReady) for e in self.seen))
        return super().stream(*args, **kwargs)  # type: ignore[arg-type]


class PreparingService(FakeService):
    """A service whose model is made ready with progress (the fake's own has none to make)."""

    def prepare_generator(self, cancel: CancelToken | None = None) -> Iterator[Progress]:
        yield Progress("model_ready", 1, 1, "scripted")


def run(svc: FakeService, **kw: object) -> list[fe.FlowEvent]:
    seen: list[fe.FlowEvent] = []
    flow = QuestionFlow(svc, QUESTION, **kw)  # type: ignore[arg-type]
    for ev in flow.events():
        seen.append(ev)
    return seen


def test_the_flow_module_loads_no_qt() -> None:
    code = ("import sys, rag_desktop.app.question_flow, rag_desktop.app.flow_events; "
            "sys.exit(any(m.split('.')[0] == 'PySide6' for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_question_goes_from_text_to_columns_answers_and_cfrag(tmp_path: Path) -> None:
    seen: list[fe.FlowEvent] = []
    gen = GeneratorWatch(seen)
    svc = PreparingService(tmp_path / "lib", Settings(), gen)
    for ev in QuestionFlow(svc, QUESTION).events():
        seen.append(ev)
    assert isinstance(seen[0], fe.ColumnsReady) and seen[0].comparison.query == QUESTION
    assert not seen[0].translated and seen[0].surfaces.get("select") == "selection"
    assert gen.columns_before_call and all(n == 1 for n in gen.columns_before_call)  # columns before any model call
    done = [e for e in seen if isinstance(e, fe.AnswerDone)]
    # the gate's ranking (hybrid: the causal column) is answered first; the two columns read different passages
    assert [d.column for d in done] == ["causal", "baseline"] and svc.answer_calls == ["hybrid", "baseline"]
    assert all(d.answer.text == ANSWER_TEXT.strip() and d.shared_from == "" for d in done)
    tokens = "".join(e.text for e in seen if isinstance(e, fe.Token) and e.group.lead == "causal")
    assert tokens.strip() == ANSWER_TEXT.strip()
    assert any(isinstance(e, fe.AnswerProgress) for e in seen)  # the model made ready first, with progress
    steps = [e.progress.stage for e in seen if isinstance(e, fe.CFProgress)]
    assert steps[-4:] == ["cfrag.retrieve", "cfrag.counterfactuals", "cfrag.hypotheses", "cfrag.decision"]
    assert isinstance(seen[-1], fe.CFDone) and seen[-1].result.answer.method == "cfrag"
    assert not any(isinstance(e, fe.Failed) for e in seen)
    # CF-RAG starts from the first column's answer, handed over, not written again (cfrag.keep_standard)
    assert svc.cfrag_standards == [done[0].answer]


def test_cfrag_alone_writes_its_own_standard_answer(tmp_path: Path) -> None:
    """No answer written by the flow (answers off, then CF-RAG asked for): nothing is handed over."""
    svc = FakeService(tmp_path / "lib", Settings())
    flow = QuestionFlow(svc, QUESTION)
    list(flow.events(answers=False))
    assert flow.standard() is None
    list(flow.cfrag())
    assert svc.cfrag_standards == [None]


def test_columns_reading_the_same_passages_share_one_answer(tmp_path: Path) -> None:
    svc = FakeService(tmp_path / "lib", Settings())
    svc.causal_as_baseline = True
    seen = run(svc)
    done = [e for e in seen if isinstance(e, fe.AnswerDone)]
    assert svc.answer_calls == ["baseline"]  # written once
    assert [(d.column, d.shared_from) for d in done] == [("baseline", ""), ("causal", "baseline")]
    assert done[0].answer.text == done[1].answer.text
    tokens = [e for e in seen if isinstance(e, fe.Token)]
    assert tokens and all(t.group.members == ("baseline", "causal") for t in tokens)


def test_answers_off_draws_the_columns_only(tmp_path: Path) -> None:
    svc = FakeService(tmp_path / "lib", Settings())
    flow = QuestionFlow(svc, QUESTION, cross_language=True)
    seen = list(flow.events(answers=False))
    assert [type(e) for e in seen] == [fe.ColumnsReady]  # no translation either: it feeds the answers
    assert svc.answer_calls == [] and svc.runtime.gen.calls == []


def test_cross_language_ranks_again_with_the_translation_before_the_answers(tmp_path: Path) -> None:
    svc = FakeService(tmp_path / "lib", Settings())
    seen = run(svc, cross_language=True)
    ready = [e for e in seen if isinstance(e, fe.ColumnsReady)]
    assert [r.translated for r in ready] == [False, True]
    assert seen.index(ready[1]) < min(i for i, e in enumerate(seen) if isinstance(e, fe.AnswerDone))


def test_a_failed_generation_stops_the_rest_of_the_question(tmp_path: Path) -> None:
    seen: list[fe.FlowEvent] = []
    svc = FakeService(tmp_path / "lib", Settings(), GeneratorWatch(seen, fail=ConnectionError("server down")))
    flow = QuestionFlow(svc, QUESTION)
    seen.extend(flow.events())
    assert isinstance(seen[-1], fe.Failed) and seen[-1].step == "answer" and seen[-1].columns == ("causal",)
    assert isinstance(seen[-1].error, ConnectionError)
    assert not any(isinstance(e, fe.AnswerDone | fe.CFProgress | fe.CFDone) for e in seen)
    assert flow.generation_failed.is_set()


def test_a_failed_ranking_is_a_failed_event(tmp_path: Path) -> None:
    svc = FakeService(tmp_path / "lib", Settings())
    svc.compare_error = ValueError("bad level")
    seen = run(svc)
    assert len(seen) == 1 and isinstance(seen[0], fe.Failed) and seen[0].step == "compare"


class AbstainingService(FakeService):
    def cfrag_or_abstain(self, query: str, cancel: CancelToken | None = None, standard: Answer | None = None,
                         ) -> Iterator[Progress | CFResult | Answer]:
        yield Answer("", method="cfrag", abstention=Abstention(True, "off_topic", Support(4, 0, 0.2, 0.19)))


def test_abstention_replaces_cfrag(tmp_path: Path) -> None:
    svc = AbstainingService(tmp_path / "lib", Settings())
    seen = run(svc)
    assert isinstance(seen[-1], fe.Abstained) and seen[-1].answer.abstained and seen[-1].column == "cfrag"
    assert not any(isinstance(e, fe.CFDone) for e in seen)


def test_one_column_alone_as_the_cli_asks_it(tmp_path: Path) -> None:
    svc = PreparingService(tmp_path / "lib", Settings())
    flow = QuestionFlow(svc, QUESTION, highlights=False, prepare=False)
    ready = flow.retrieve(translate=True)
    assert ready.translated and ready.surfaces == {} and ready.words == {}
    events = list(flow.answer(flow.group_for(ready.comparison, "baseline")))
    assert not any(isinstance(e, fe.AnswerProgress) for e in events)  # no model preparation asked for
    done = [e for e in events if isinstance(e, fe.AnswerDone)]
    assert len(done) == 1 and done[0].column == "baseline" and done[0].answer.method == "baseline"


class SamePassagesService(FakeService):
    """Columns with different rankings whose answers read the same passages: the real service then
    shows the first answer again (RagService.answer keeps the last prompt's answer), as this one does."""

    def answer(self, query: str, ranked: RankedList, n_sources: int = 5,
               cancel: CancelToken | None = None) -> Iterator[Any]:
        for ev in super().answer(query, ranked, n_sources, cancel):
            yield dataclasses.replace(ev, sources=self.passages()) if isinstance(ev, Answer) else ev

    def passages(self) -> tuple[Hit, ...]:
        """The same passages each time; their scores, which the column's other hits move, differ."""
        return tuple(dataclasses.replace(h, s_sim=h.s_sim + len(self.answer_calls))
                     for h in make_comparison(QUESTION).baseline.hits[:1])


def test_a_later_answer_reading_the_same_passages_is_said_to_share_them(tmp_path: Path) -> None:
    seen = run(SamePassagesService(tmp_path / "lib", Settings()))
    done = [e for e in seen if isinstance(e, fe.AnswerDone)]
    assert [(d.column, d.shared_from) for d in done] == [("causal", ""), ("baseline", "causal")]
    assert done[0].answer.text == done[1].answer.text and done[1].answer.method == "baseline"


def test_a_later_answer_with_other_passages_is_its_own(tmp_path: Path) -> None:
    seen = run(FakeService(tmp_path / "lib", Settings()))
    done = [e for e in seen if isinstance(e, fe.AnswerDone)]
    assert done[0].answer.text == done[1].answer.text  # the scripted text is one for all prompts
    assert done[0].answer.sources != done[1].answer.sources and all(d.shared_from == "" for d in done)
