"""Which sources an answer needs (core.needs, app.source_needs, `answer --needs`): each cited source
left out in turn on the real library and prompt; the generator is a collaborator that answers only
from the sources it is given."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from library_helpers import ingest_texts
from test_gui_support import ScriptedGenerator

from rag_desktop.app.service import RagService
from rag_desktop.core.needs import SAME_F1, agreement, need_of
from rag_desktop.core.types import Answer, ChatMessage

pytestmark = pytest.mark.integration

DOCS = {
    "leave_policy.txt": "Paid leave. Employees have fifteen days of paid leave per year; part-time staff have "
                        "eight days. Leave is requested in the staff portal two weeks ahead. " * 3,
    "handbook_copy.txt": "Staff handbook, chapter 3. Employees have fifteen days of paid leave per year, as the "
                         "leave policy says. Unused days do not carry over. " * 3,
    "canteen.txt": "The canteen opens at 11:30 every day and closes at 14:00. Soup is served on Fridays. " * 3,
}
Q = "How many days of paid leave do employees get?"


class FromSources(ScriptedGenerator):
    """Answers from the numbered sources of the prompt: the first one stating the leave, cited."""

    def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
        user = messages[-1].content
        for m in re.finditer(r"^\[(\d+)\] .*?(?=^\[\d+\] |\Z)", user, re.MULTILINE | re.DOTALL):
            if "fifteen days" in m.group(0):
                return "answer", f"Employees get fifteen days of paid leave per year [{m.group(1)}]."
        return "answer", "The sources do not say how much paid leave there is."


def test_two_answers_agree_on_their_words_not_their_markers() -> None:
    assert agreement("Fifteen days [1].", "Fifteen days [3].") == 1.0
    assert agreement("十五天 [1]", "十五天。[2]") == 1.0
    assert agreement("Fifteen days of leave [1].", "The sources do not say.") < SAME_F1
    n = need_of(2, "Policy", "Fifteen days [2].", "The sources do not say.", 1.5)
    assert n.needed and n.n == 2 and n.seconds == 1.5


def _answer(svc: RagService) -> Answer:
    ranked = svc.compare(Q, translate=False).answer_list("baseline")
    answer = [e for e in svc.answer(Q, ranked) if isinstance(e, Answer)][-1]
    assert not answer.abstained and answer.citations, answer
    return answer


def test_a_source_another_one_repeats_is_not_needed_the_last_one_is(tmp_path: Path) -> None:
    (tmp_path / "both").mkdir()
    (tmp_path / "single").mkdir()
    svc = ingest_texts(tmp_path / "both", DOCS)
    try:
        svc.runtime._generator = FromSources()
        answer = _answer(svc)
        (need,) = next(r for r in svc.source_needs(Q, answer) if isinstance(r, tuple))
        # the cited one is one of the two stating the fact: without it the other is cited, same words
        assert not need.needed and need.agreement >= SAME_F1, need
        assert "fifteen days" in need.answer_without
    finally:
        svc.close()

    only = {k: v for k, v in DOCS.items() if k != "handbook_copy.txt"}
    svc = ingest_texts(tmp_path / "single", only)
    try:
        gen = FromSources()
        svc.runtime._generator = gen
        answer = _answer(svc)
        events = list(svc.source_needs(Q, answer))
        (need,) = events[-1]  # type: ignore[misc]
        assert need.needed and need.agreement < SAME_F1 and "do not say" in need.answer_without, need
        assert answer.sources[need.n - 1].title == need.title
        assert gen.calls.count("answer") == 2  # the answer, then once without its one cited source
    finally:
        svc.close()
