"""One question's way from its text to its answers, without Qt (docs/architecture.md, "The question's path").

:class:`QuestionFlow` holds the steps; each is a plain call or a generator of the frozen events of
app.flow_events. The window runs each step as one task of its worker (ui/worker.py) and only draws
the events; the CLI and the tests iterate them directly (:meth:`QuestionFlow.events` runs them all
in the window's order). What stays the same whoever runs it:

* the columns come first, from a ranking with no generator call (``translate=False``); with
  ``retrieval.cross_language`` on and answers wanted, the translated question's rankings follow and
  feed the answers;
* columns whose answers read the same passages in the same order get one answer (with the fixed
  seed it would be the same text), shown in each; the ranking the gate feeds the answers with is
  answered first;
* every generation first makes the model ready (with progress), and after one generation of the
  question fails the others stop at once: the same cause (no model, server down) fails them too;
* CF-RAG, or the abstention that replaces it when the library holds no answer, comes last.

The follow-up rewrite is not a step here: it runs before a question exists (ui.conversation_dock).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, TypeVar

from rag_desktop.app.flow_events import (
    Abstained,
    AnswerDone,
    AnswerGroup,
    AnswerProgress,
    CFDone,
    CFProgress,
    ColumnsReady,
    Failed,
    FlowEvent,
    NeedsDone,
    NeedsProgress,
    Token,
    WordSpan,
)
from rag_desktop.core import prompting
from rag_desktop.core.cfrag.types import CFResult
from rag_desktop.core.types import Answer, Cancelled, CancelToken, GenEvent, GenEventKind, Progress, RankedList

if TYPE_CHECKING:
    from rag_desktop.app.service import Comparison
    from rag_desktop.app.service_api import LibraryService

E = TypeVar("E")
RANKED_COLUMNS = ("baseline", "causal", "cross_encoder")  # the columns a ranking fills (CF-RAG's is its own)


def flat_text(text: str) -> str:
    """The passage as rows show it: whitespace runs as single spaces (word spans refer to this)."""
    return " ".join(text.split())


def comparison_terms(comparison: Comparison) -> set[str]:
    """Every keyword the causal column's explanations name (stems: their readable words are looked up)."""
    terms: set[str] = set()
    for e in comparison.causal.explanations:
        if e.split is not None:
            terms.update(k.term for k in e.split.query_terms)
            terms.update(a.term for a in e.split.a_terms)
            terms.update(a.absorbed_by for a in e.split.a_terms)
            terms.update(b.term for b in e.split.b_terms)
    return terms


class QuestionFlow:
    """The steps of one question on one library's service.

    ``level`` and ``ranking`` are the question's choices (None: the settings, the gate);
    ``cross_language`` is ``retrieval.cross_language``; ``highlights`` looks up the words the
    window marks (readable forms of stems, word spans), which a terminal does not show;
    ``prepare`` makes the model ready before each generation, with progress.
    """

    def __init__(self, service: LibraryService, question: str, *, level: str | None = None,
                 ranking: str | None = None, k: int | None = None, cross_language: bool = False,
                 highlights: bool = True, prepare: bool = True) -> None:
        self.service = service
        self.question = question
        self.level, self.ranking, self.k = level, ranking, k
        self.cross_language = cross_language
        self.highlights = highlights
        self.prepare = prepare
        # Set on the worker thread by the first failing generation, read by the next one.
        self.generation_failed = threading.Event()
        # The comparison the answers were written from and the answers written, by column: CF-RAG
        # starts from the first column's (cfrag.keep_standard) instead of writing it again. Written
        # and read on the one worker thread, steps in order.
        self.comparison: Comparison | None = None
        self.written: dict[str, Answer] = {}

    # ------------------------------------------------------------------ rankings
    def retrieve(self, *, translate: bool, cancel: CancelToken | None = None) -> ColumnsReady:
        """Rank the question: as typed (``translate=False``: no model call, the columns show at
        once), or also with its translation when ``retrieval.cross_language`` is on."""
        svc = self.service
        comp = svc.compare(self.question, level=self.level, k=self.k, ranking=self.ranking, translate=translate)
        if cancel is not None:
            cancel.raise_if_set()
        self.comparison = comp
        if not self.highlights:
            return ColumnsReady(comp, translated=translate)
        surfaces = {t: s for t, s in svc.surfaces(sorted(comparison_terms(comp))).items() if s}
        words: dict[str, tuple[WordSpan, ...]] = {}
        for ranked in (comp.baseline, comp.causal, comp.cross_encoder):
            for h in (ranked.hits if ranked is not None else ()):
                flat = flat_text(h.text)
                if flat not in words:
                    words[flat] = tuple(svc.word_spans(flat))
        return ColumnsReady(comp, surfaces, words, translated=translate)

    def translates_next(self, ready: ColumnsReady, *, answers: bool) -> bool:
        """Whether the translated question's rankings (a model call) come before the answers."""
        return not ready.translated and self.cross_language and answers

    # ------------------------------------------------------------------ answers
    def answer_groups(self, comparison: Comparison) -> tuple[AnswerGroup, ...]:
        """The answers to write, in order: one per set of columns reading the same passages."""
        c = comparison
        columns = ["baseline", "causal"] + (["cross_encoder"] if c.cross_encoder is not None else [])
        # what each column's answer reads: its order fused with the keyword leg (Comparison.answer_list)
        lists = [(m, c.answer_list(m)) for m in columns]
        # The ranking the gate feeds the answers with is answered first: a person's first answer
        # token does not wait for the other column's whole answer.
        first = c.first_column
        groups: dict[tuple[object, ...], list[tuple[str, RankedList]]] = {}
        for m, ranked in sorted(lists, key=lambda mr: mr[0] != first):
            groups.setdefault(prompting.answer_key(ranked.hits), []).append((m, ranked))
        return tuple(AnswerGroup(tuple(m for m, _ in g), tuple(r for _, r in g)) for g in groups.values())

    def read_ahead(self, cancel: CancelToken | None = None) -> Iterator[ColumnsReady | int]:
        """What the window does at a pause in the typing: the question as typed so far ranked (its columns,
        as Enter would show them), then the prompt its first answer would read read into the model's cache
        (app.read_ahead; the prompt's tokens in the cache). Enter on the same words goes on from here."""
        ready = self.retrieve(translate=False, cancel=cancel)
        yield ready
        group = self.answer_groups(ready.comparison)[0]
        yield self.service.read_ahead(self.question, group.ranked, cancel)

    def group_for(self, comparison: Comparison, column: str) -> AnswerGroup:
        """``column``'s answer alone (the CLI's ``answer --method``)."""
        return AnswerGroup((column,), (comparison.answer_list(column),))

    def answer(self, group: AnswerGroup, cancel: CancelToken | None = None
               ) -> Iterator[AnswerProgress | Token | AnswerDone]:
        """Write ``group``'s one answer: its progress, its tokens, then one AnswerDone per column."""
        svc = self.service
        for ev in self._guarded(lambda: svc.answer(self.question, group.ranked, cancel=cancel), cancel):
            if isinstance(ev, Progress):
                yield AnswerProgress(group, ev)
            elif isinstance(ev, GenEvent):
                if ev.kind == GenEventKind.TOKEN and ev.text:
                    yield Token(group, ev.text)
            elif isinstance(ev, Answer):
                # A group whose columns differ from an earlier one's but whose passages do not gets that
                # answer again (RagService.answer keeps the last prompt's answer): said as shared.
                same = next((m for m, a in self.written.items() if a.text and _as_read(a) == _as_read(ev)), "")
                for i, (m, ranked) in enumerate(zip(group.members, group.lists, strict=True)):
                    shown = ev if i == 0 else dataclasses.replace(ev, method=ranked.method)
                    self.written[m] = shown
                    yield AnswerDone(m, shown, ranked, group.lead if i else same)

    # ------------------------------------------------------------------ CF-RAG
    def cfrag(self, cancel: CancelToken | None = None) -> Iterator[CFProgress | CFDone | Abstained]:
        """CF-RAG's steps and result, or the abstention when the library holds no answer (the first
        column's, when that answer abstained); it starts from the first column's answer when this flow
        wrote it (:meth:`standard`)."""
        svc = self.service
        c = self.comparison
        first = self.written.get(c.first_column) if c is not None else None
        # Not in your documents (before the answer, or after it by both checks): said once, in both columns;
        # beside it, CF-RAG's search answered a question about another subject from whatever it found.
        if first is not None and first.settles_cfrag:
            yield Abstained(dataclasses.replace(first, method="cfrag"))
            return
        standard = self.standard()
        for ev in self._guarded(lambda: svc.cfrag_or_abstain(self.question, cancel, standard), cancel):
            if isinstance(ev, Progress):
                yield CFProgress(ev)
            elif isinstance(ev, CFResult):
                yield CFDone(ev)
            elif isinstance(ev, Answer):
                yield Abstained(ev)

    def standard(self) -> Answer | None:
        """The answer CF-RAG starts from: the one this flow wrote for the comparison's first column
        (Comparison.first_column), None when it was not written, was stopped or abstained."""
        c = self.comparison
        done = self.written.get(c.first_column) if c is not None else None
        return done if done is not None and done.text.strip() else None

    def needs(self, column: str, answer: Answer, cancel: CancelToken | None = None
              ) -> Iterator[NeedsProgress | NeedsDone]:
        """Which of ``answer``'s cited sources it needs: asked on request, after the answer
        (``LibraryService.source_needs``: answered again without each, core.needs)."""
        svc = self.service
        for ev in self._guarded(lambda: svc.source_needs(self.question, answer, cancel), cancel):
            if isinstance(ev, Progress):
                yield NeedsProgress(column, ev)
            else:
                yield NeedsDone(column, ev)

    def _guarded(self, events: Callable[[], Iterator[E]], cancel: CancelToken | None) -> Iterator[E | Progress]:
        """A generation: the model made ready first; stopped at once when an earlier generation of
        the question failed, since the same cause would fail it too."""
        if self.generation_failed.is_set():
            raise Cancelled()
        try:
            if self.prepare:
                yield from self.service.prepare_generator(cancel)
            yield from events()
        except Cancelled:
            raise
        except Exception:
            self.generation_failed.set()
            raise

    # ------------------------------------------------------------------ all of it
    def events(self, *, answers: bool = True, cfrag: bool = True,
               cancel: CancelToken | None = None) -> Iterator[FlowEvent]:
        """Every step in the window's order; a failing step ends the flow with a Failed event
        (a cancel still raises Cancelled: the caller asked for it)."""
        shown: list[ColumnsReady] = []

        def rankings() -> Iterator[ColumnsReady]:
            shown.append(self.retrieve(translate=False, cancel=cancel))
            yield shown[-1]
            if self.translates_next(shown[-1], answers=answers):
                shown.append(self.retrieve(translate=True, cancel=cancel))
                yield shown[-1]

        if not (yield from _step("compare", (*RANKED_COLUMNS, "cfrag"), rankings())) or not answers:
            return
        for group in self.answer_groups(shown[-1].comparison):
            if not (yield from _step("answer", group.members, self.answer(group, cancel))):
                return
        if cfrag:
            yield from _step("cfrag", ("cfrag",), self.cfrag(cancel))


def _as_read(answer: Answer) -> tuple[object, ...]:
    """An answer's text and the passages it was written from, as the model read them (their scores,
    which depend on the column's other hits, aside)."""
    return answer.text, tuple((h.unit_id, h.page, h.text) for h in answer.sources), answer.locators


def _step(step: str, columns: tuple[str, ...], events: Iterator[FlowEvent]) -> Generator[FlowEvent, None, bool]:
    """``events``, or a Failed event when the step raises; returns whether it went through."""
    try:
        yield from events
    except Cancelled:
        raise
    except Exception as exc:
        yield Failed(step, columns, exc)
        return False
    return True
