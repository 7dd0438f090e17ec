"""The first answer prompt read while the question is typed (app.read_ahead, ``generation.read_ahead``,
QuestionFlow.read_ahead, LlamaCppGenerator.read_ahead).

The first tests run the real library, embedder, retrieval and prompt with a recording generator (the
collaborator): what is read ahead is the prompt the answer then reads. The slow ones run the real tiny
GGUF model through the whole answer path (the question's lift, its bare prompt, the stream): after a read
ahead the answer reads fewer prompt tokens and writes the same text, and a read ahead stopped half way
keeps what it read whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from library_helpers import ingest_texts
from test_abstain import svc  # noqa: F401  (the module's library fixture)
from test_gui_support import ScriptedGenerator

from rag_desktop.app import flow_events as fe
from rag_desktop.app.question_flow import QuestionFlow
from rag_desktop.app.service import RagService
from rag_desktop.core.types import Answer, CancelToken, ChatMessage

QUESTION = "How does traditional Chinese medicine treat a chronic cough?"


class Reader(ScriptedGenerator):
    """Records the messages it is asked to read ahead and to stream."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead: list[tuple[ChatMessage, ...]] = []
        self.streamed: list[tuple[ChatMessage, ...]] = []

    def read_ahead(self, messages: Sequence[ChatMessage], cancel: CancelToken | None = None) -> int:
        self.ahead.append(tuple(messages))
        return sum(self.count_tokens(m.content) for m in messages)

    def stream(self, messages, **kw):  # type: ignore[no-untyped-def]
        self.streamed.append(tuple(messages))
        yield from super().stream(messages, **kw)


def _ahead(flow: QuestionFlow, cancel: CancelToken | None = None) -> int:
    """The tokens a flow's read ahead left in the cache (its last event)."""
    n = list(flow.read_ahead(cancel))[-1]
    assert isinstance(n, int)
    return n


@contextlib.contextmanager
def _generation(svc: RagService, **changes: Any) -> Iterator[None]:  # noqa: F811
    before = svc.settings
    svc.settings = dataclasses.replace(before, generation=dataclasses.replace(before.generation, **changes))
    try:
        yield
    finally:
        svc.settings = before


def test_the_prompt_read_ahead_is_the_one_the_first_answer_reads(svc: RagService) -> None:  # noqa: F811
    gen = Reader()
    svc.runtime._generator = gen  # the collaborator; library, embedder, retrieval and prompt are real
    with _generation(svc, check_relevance=False, abstain=False):
        events = list(QuestionFlow(svc, QUESTION).read_ahead())
        assert isinstance(events[0], fe.ColumnsReady) and events[0].comparison.query == QUESTION
        n = events[-1]
        assert isinstance(n, int) and n > 0 and len(gen.ahead) == 1
        flow = QuestionFlow(svc, QUESTION)
        comp = svc.compare(QUESTION, translate=False)
        group = flow.answer_groups(comp)[0]
        events = list(flow.answer(group))
    assert gen.streamed and gen.streamed[0] == gen.ahead[0]
    assert [e.column for e in events if isinstance(e, fe.AnswerDone)] == list(group.members)


def test_nothing_is_read_ahead_off_unloaded_translated_or_without_hits(svc: RagService) -> None:  # noqa: F811
    gen = Reader()
    ranked = svc.compare(QUESTION, translate=False).answer_list("baseline")
    svc.runtime._generator = None  # not loaded: a pause in typing never loads a model
    assert svc.read_ahead(QUESTION, ranked) == 0
    svc.runtime._generator = gen
    with _generation(svc, read_ahead=False):
        assert svc.read_ahead(QUESTION, ranked) == 0
    with _generation(svc, translate=True):  # the sources would be translated first: model calls
        assert svc.read_ahead(QUESTION, ranked) == 0
    assert svc.read_ahead(QUESTION, dataclasses.replace(ranked, hits=())) == 0
    assert gen.ahead == [] and gen.calls == []
    assert svc.read_ahead(QUESTION, ranked) > 0 and len(gen.ahead) == 1


# --------------------------------------------------------------------------- the real model (slow)

# Long enough that the sources make pieces of their own (backends/llama_segments.MIN_PIECE).
MUSEUM = {
    "hours_en.txt": ("The city museum opens at ten in the morning on every day of the week except Mondays, and it "
                     "closes at six in the evening. On public holidays it opens at noon. ") * 6,
    "tickets_en.txt": ("Tickets for the city museum cost twelve euros for adults and five euros for children under "
                       "fourteen; on the first Sunday of each month entry is free for everybody. ") * 6,
    "cafe_en.txt": ("The museum cafe on the roof serves coffee, tea and cakes from eleven in the morning until "
                    "five in the afternoon, and it closes an hour before the museum does. ") * 6,
}
ASKED = "When does the city museum close in the evening?"


def _library(tmp_path: Path) -> RagService:
    from rag_desktop.app.model_files import smollm2_path
    from rag_desktop.backends.errors import ModelUnavailable
    from rag_desktop.core.settings import Settings

    try:
        model = smollm2_path()
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    settings = (Settings().replace("models", generator=str(model), n_ctx=4096)
                .replace("generation", max_tokens=24, temperature=0.8)
                .replace("retrieval", level="chunk"))
    tmp_path.mkdir(parents=True, exist_ok=True)
    service = ingest_texts(tmp_path, MUSEUM, settings)
    list(service.prepare_generator())
    return service


def _answered(service: RagService, question: str) -> tuple[str, int]:
    """The first column's answer text as the window asks it, and the prompt tokens the model read for it."""
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator

    gen = service.runtime.generator()
    assert isinstance(gen, LlamaCppGenerator)
    llm = gen._llm
    read: list[int] = []
    plain_eval = llm.eval

    def counting(tokens: Sequence[int]) -> None:  # a spy on llama-cpp-python's Llama, the collaborator
        read.append(len(tokens))
        plain_eval(tokens)

    llm.eval = counting
    try:
        flow = QuestionFlow(service, question)
        comp = service.compare(question, translate=False)
        events = list(flow.answer(flow.answer_groups(comp)[0]))
    finally:
        del llm.eval
    done = [e for e in events if isinstance(e, fe.AnswerDone)]
    assert done
    answer = done[0].answer
    assert isinstance(answer, Answer) and answer.text
    return answer.text, sum(n for n in read if n > 1)  # decode steps read one token each


@pytest.mark.slow
@pytest.mark.integration
def test_an_answer_after_a_read_ahead_reads_less_and_writes_the_same_text(tmp_path: Path) -> None:
    plain = _library(tmp_path / "plain")
    ahead = _library(tmp_path / "ahead")
    with contextlib.closing(plain), contextlib.closing(ahead):
        text, tokens = _answered(plain, ASKED)
        n = _ahead(QuestionFlow(ahead, ASKED))
        assert n > 256  # the fixed prefix and the sources
        text_ahead, tokens_ahead = _answered(ahead, ASKED)
        assert text_ahead == text
        # read ahead: only the question, the lift's bare prompt and what follows the last cut
        assert tokens_ahead <= tokens - (n - 250)
        # the words typed so far, not the whole question: the sources they share are kept, the text is the same
        partial = ASKED.rsplit(" ", 2)[0]
        ahead._written.clear()  # else the answer kept for this prompt is shown with no model call
        _ahead(QuestionFlow(ahead, partial))
        again, tokens_again = _answered(ahead, ASKED)
        assert again == text and tokens_again <= tokens - (n - 250)


@pytest.mark.slow
@pytest.mark.integration
def test_a_read_ahead_stopped_half_way_keeps_its_whole_pieces_and_the_text(tmp_path: Path) -> None:
    service = _library(tmp_path)
    with contextlib.closing(service):
        text, tokens = _answered(service, ASKED)
        service._written.clear()  # else the answer kept for this prompt is shown with no model call
        gen = service.runtime.generator()
        gen.close()  # an empty cache, no prefix state: the read ahead reads every piece
        gen.load()
        llm = gen._llm
        plain_eval = llm.eval
        stop = CancelToken()
        pieces: list[int] = []

        def stopping(tokens: Sequence[int]) -> None:  # the person types on after the first source's piece
            pieces.append(len(tokens))
            if len(pieces) == 3:
                stop.set()  # the abort hook stops llama.cpp inside this piece's decode
            plain_eval(tokens)

        llm.eval = stopping
        try:
            kept = _ahead(QuestionFlow(service, ASKED), stop)
        finally:
            del llm.eval
        head = gen._cache.cuts[0]  # the fixed prefix, which the first answer loaded from its warmed state
        assert len(pieces) == 3 and kept == pieces[0] + pieces[1] == gen._cache.cuts[-1] == llm.n_tokens
        again, tokens_again = _answered(service, ASKED)  # the third piece is read again, in the same pieces
        assert again == text and tokens_again == tokens - (kept - head)


@pytest.mark.slow
def test_a_prompt_without_pieces_or_a_stopped_request_reads_nothing_ahead() -> None:
    from rag_desktop.app.model_files import smollm2_path
    from rag_desktop.backends.errors import ModelUnavailable
    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator

    try:
        model = smollm2_path()
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    gen = LlamaCppGenerator(model, n_ctx=1024)
    try:
        assert gen.read_ahead([ChatMessage("user", "Say hello.")]) == 0  # one message: no fixed prefix, no cut
        stopped = CancelToken()
        stopped.set()
        prompt = [ChatMessage("system", "Answer briefly."), ChatMessage("user", "Hi."),
                  ChatMessage("assistant", "Hello."), ChatMessage("user", "Say hello.")]
        assert gen.read_ahead(prompt, stopped) == 0 and gen._llm.n_tokens == 0
        assert gen.read_ahead(prompt) > 0  # the fixed prefix
    finally:
        gen.close()
