"""Collaborators for the GUI tests (no tests here): synthetic rankings and a CF-RAG trace,
a scripted generator, a runtime that hands it out, and a small in-memory service.

The units under test are the ui/ widgets and the real RagService; these are the
things they talk to.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_desktop.app.library import IngestReport
from rag_desktop.app.ocr import OcrCache
from rag_desktop.app.runtime import Runtime
from rag_desktop.app.service import Comparison
from rag_desktop.app.service_api import LibraryService
from rag_desktop.core.causal import CausalDiagnostics
from rag_desktop.core.cfrag import SYSTEM_CLOSED_BOOK, SYSTEM_COUNTERFACTUAL, SYSTEM_HYPOTHESIS, SYSTEM_SYNTHESIS
from rag_desktop.core.cfrag.notes import say
from rag_desktop.core.cfrag.types import (
    CFResult,
    CFTrace,
    ClusterTrace,
    CounterfactualCandidate,
    DecisionTrace,
    EvidenceTrace,
    HypothesisTrace,
    SpectralTrace,
    SubsetTrace,
)
from rag_desktop.core.conversation import Conversation, Rewrite
from rag_desktop.core.needs import SourceNeed
from rag_desktop.core.settings import CFRagSettings, Settings
from rag_desktop.core.types import (
    AbsorbedTerm,
    Answer,
    Cancelled,
    CancelToken,
    ChatMessage,
    Citation,
    Explanation,
    GenEvent,
    GenEventKind,
    Hit,
    Keyword,
    KeywordSplit,
    OcrLine,
    Progress,
    RankedList,
)

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "resources" / "demo"
PDF = DEMO / "en_textbook_reasoning_conditionals.pdf"
DOCX = DEMO / "en_seminar_announcement_wason.docx"


# --------------------------------------------------------------------------- synthetic rankings

def hit(doc: int, rank: int, s: float, title: str = "", path: Path = PDF, page: int = 1,
        text: str = "", level: str = "doc") -> Hit:
    return Hit(doc, doc, level, title or f"Doc {doc}", str(path), page,  # type: ignore[arg-type]
               text or f"Text of document {doc} about the selection task and security rules.", s, rank, "en")


QUERY_TERMS = (Keyword("wason", 0.5), Keyword("select", 0.4), Keyword("task", 0.3))


def split(a: Sequence[tuple[str, str, float | None]], b: Sequence[str]) -> KeywordSplit:
    return KeywordSplit(QUERY_TERMS, tuple(AbsorbedTerm(t, 0.1, q, c) for t, q, c in a),
                        tuple(Keyword(t, 0.05 + 0.01 * i) for i, t in enumerate(b)))


def make_lists() -> tuple[RankedList, RankedList]:
    """Baseline 1..5; causal order 3, 1, 5, 2, 4 (so ▲2, ▼1, ▲2, ▼2, ▼1)."""
    base_hits = [
        hit(1, 1, 0.90, "Seminar on the Wason task", DOCX,
            text="The seminar revisits the Wason selection task. Research discussion follows."),
        hit(2, 2, 0.88, "Reasoning with Conditionals", PDF, page=2,
            text="The selection task asks which cards to turn. Matching bias explains card choices."),
        hit(3, 3, 0.85, "Reasoning Lab Newsletter", PDF,
            text="The lab newsletter describes the CardLogic app for students and teachers."),
        hit(4, 4, 0.80, "Late-Interaction Retrieval", PDF, text="Token vectors and late interaction."),
        hit(5, 5, 0.78, "Facilities Report", DOCX, text="Heating and security of the buildings."),
    ]
    base = RankedList("baseline", tuple(base_hits), (), (), "Baseline (dense similarity)")
    order = [3, 1, 5, 2, 4]
    by_doc = {h.doc_id: h for h in base_hits}
    splits = {
        1: split([("wason", "wason", None), ("select", "select", None), ("research", "task", 0.903)],
                 ["seminar", "februari", "depart"]),
        2: split([("select", "select", None), ("content", "task", 0.889)], ["card", "rule", "vowel", "bias"]),
        3: split([("task", "task", None)], ["lab", "cardlog", "student", "teacher"]),
        4: split([("document", "task", 0.898)], ["token", "vector", "late"]),
        5: split([], ["heat", "secur", "build"]),
    }
    hits = []
    expls = []
    for new_rank, d in enumerate(order, start=1):
        h = by_doc[d]
        hits.append(Hit(h.unit_id, h.doc_id, h.level, h.title, h.path, h.page, h.text, h.s_sim, new_rank, h.lang))
        expls.append(Explanation(h.unit_id, h.rank, new_rank, h.s_sim, 0.8 - 0.01 * new_rank, 1.0 - 0.1 * new_rank,
                                 splits[d], False, len(splits[d].a_terms)))
    causal = RankedList("hybrid", tuple(hits), tuple(expls), (), "Causal rerank")
    return base, causal


SURFACES = {"select": "selection", "februari": "february", "depart": "department", "cardlog": "CardLogic",
            "secur": "security", "build": "buildings", "heat": "heating"}


def make_comparison(query: str = "Why do people fail the Wason selection task?") -> Comparison:
    base, causal = make_lists()
    diag = CausalDiagnostics(window=5, tau=0.88, absorption="semantic", empty_b_rule="demote", n_query_terms=3,
                             a_share=0.31, empty_b_fraction=0.0, n_empty_b=0, warnings=())
    return Comparison(query, "doc", base, causal, None, diag, 0.88, "calibrated at ingest", "hybrid", None,
                      {"embed_query": 0.01, "baseline_total": 0.02})


def make_cf_result(query: str = "Why do people fail the Wason selection task?") -> CFResult:
    base, _ = make_lists()
    ev_hits = [Hit(100 + h.doc_id, h.doc_id, "chunk", h.title, h.path, h.page, h.text, h.s_sim, h.rank, "en")
               for h in base.hits[:4]]
    # pool ids 0..3; 0 and 2 given to hypothesis 0 (the winner); margins: 0.3, 0.1, 0.2, -0.1
    ev = [
        EvidenceTrace(0, ev_hits[0], (0,), 0.8, 2.1, (0.5, 0.4), 0.5, 1, 0.8, 0.9, "kept", -1, 0),
        EvidenceTrace(1, ev_hits[1], (0, 1), 0.7, 1.5, (0.6, 0.3), 0.6, 1, 0.7, 0.9, "kept", -1, 1),
        EvidenceTrace(2, ev_hits[2], (1,), 0.6, 0.9, (0.3, 0.4), 0.4, 2, 0.6, 0.8, "kept", -1, 0),
        EvidenceTrace(3, ev_hits[3], (2,), 0.5, 0.2, (0.6, 0.2), 0.6, 1, 0.6, 0.8, "kept", -1, 1),
    ]
    dup = EvidenceTrace(4, ev_hits[0], (1,), 0.79, 2.0, (0.5, 0.4), 0.5, 1, 0.79, 0.9, "duplicate", 0, -1)
    cfs = (
        CounterfactualCandidate(0, "Why do people pass the drinking-age version?", "scope", 0.91, "matching bias",
                                "social contracts", 0.0, "differ", 0.09, 1.0, 0.8, 0.6, True, True, ""),
        CounterfactualCandidate(1, "Who invented the selection task?", "role", 0.88, "matching bias",
                                "Peter Wason", 0.0, "differ", 0.12, 1.0, 0.7, 0.55, True, True, ""),
    )
    rejected = (
        CounterfactualCandidate(2, "What is the boiling point of water?", "category", 0.41, "matching bias",
                                "100 °C", 0.0, "differ", 0.59, 1.0, 0.1, 0.0, False, False,
                                say("off_topic", sim="0.410", theta="0.50")),  # the core's own note
    )
    hyps = (
        HypothesisTrace(0, 0, "Matching bias <b>and</b> confirmation", "Passages [1] and [3] show it.", "json", "{}",
                        11, 0.8, 0.7, 1.0, 0.72, 0.25, 0.532, None, 1),
        HypothesisTrace(1, 1, "Poor logic", "Passage [2].", "json", "{}", 12, 0.6, 0.5, 1.0, 0.55, -0.2, 0.25,
                        None, 2),
    )
    trace = CFTrace(
        query=query, seed=0, settings=CFRagSettings(), lam=0.4, use_counterfactuals=True, use_division=True,
        generator="scripted", embedder="fake", scorer="cosine substitute", scorer_is_substitute=True,
        score_scale="identity", counterfactual_raw="...", counterfactuals=cfs, rejected_counterfactuals=rejected,
        queries=(query, cfs[0].text, cfs[1].text), evidence=(*ev, dup),
        spectral=SpectralTrace(4, 2, 0.5, (0.0, 0.3), 0.1, True),
        clusters=(ClusterTrace(0, (0, 2)), ClusterTrace(1, (1, 3))),
        subsets=(SubsetTrace(0, (0.6, 0.4), (0, 2)), SubsetTrace(1, (0.3, 0.7), (1, 3))),
        hypotheses=hyps,
        decision=DecisionTrace(0.4, "token F1", 0.6, "select", 0, (), (0, 2), "", "Matching bias and confirmation",
                               "Passages [1] and [3] show it."),
        timings=(),
    )
    used = (ev_hits[0], ev_hits[2])
    ans = Answer("Matching bias and confirmation [1]. Also [3].", (
        Citation(1, True, used[0].doc_id, used[0].unit_id, used[0].title, used[0].path, used[0].page),
        Citation(3, False)), used, "cfrag")
    return CFResult(ans, trace)


# --------------------------------------------------------------------------- generation

CLOSED_BOOK = ("matching bias", "Peter Wason", "in 1966", "abstract letters", "logic puzzles", "social contracts",
               "cheater detection")
ANSWER_TEXT = "People test the rule by confirming cases [1], and matching bias explains it [2]. See [9]."


class ScriptedGenerator:
    """Replies by prompt kind (the CF-RAG system prompts are stable markers).

    ``delay`` seconds between tokens make cancellation observable; ``fail`` raises the
    given exception on the first call.
    """

    identity = "scripted-generator"
    n_ctx = 8192

    def __init__(self, delay: float = 0.0, fail: BaseException | None = None) -> None:
        self.delay = delay
        self.fail = fail
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def load(self) -> None: ...

    def close(self) -> None: ...

    def count_tokens(self, text: str) -> int:
        return len(text) // 3 + 1

    def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
        system, user = messages[0].content, messages[-1].content
        if system == SYSTEM_COUNTERFACTUAL:
            return "counterfactual", (
                "1. [scope] Why do people pass the drinking-age version of the selection task?\n"
                "2. [role] Who first described the Wason selection task?\n"
                "3. [time] When was the Wason selection task first published?\n"
                "4. [entity] Why do people fail the four-card problem with abstract letters?\n"
                "5. [category] What does the CardLogic app teach?\n"
                "6. [scope] Why do people succeed on social contract rules?\n")
        if system == SYSTEM_CLOSED_BOOK:
            qs = re.findall(r"^(\d+)\. (.+)$", user, re.MULTILINE)
            # Distinct answers, so L(q) ≠ L(q') and on-topic counterfactuals pass V(q, q').
            return "closed_book", "\n".join(f"{n}. {CLOSED_BOOK[(int(n) - 1) % len(CLOSED_BOOK)]}" for n, _ in qs)
        if system.startswith(SYSTEM_HYPOTHESIS):
            return "hypothesis", '{"answer": "matching bias", "rationale": "Passage [1] shows matching bias."}'
        if system == SYSTEM_SYNTHESIS:
            return "synthesis", "Answer: matching bias\nRationale: candidate A is supported [1]."
        if "translator" in system or "翻译" in system:
            body = user.split("\n\n", 1)[-1]
            return "translation", "TRANSLATED: " + " ".join(body.split()[:40])
        return "answer", ANSWER_TEXT

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        if self.fail is not None:
            raise self.fail
        kind, text = self._reply(messages)
        with self.lock:
            self.calls.append(kind)
        for piece in re.findall(r"\S+\s*|\s+", text):
            if cancel is not None and cancel.is_set:
                yield GenEvent(GenEventKind.DONE, finish_reason="cancelled")
                return
            if self.delay:
                time.sleep(self.delay)
            yield GenEvent(GenEventKind.TOKEN, piece)
        yield GenEvent(GenEventKind.DONE, finish_reason="stop")


class ScriptedRuntime(Runtime):
    """The real Runtime (real embedder, tokenizer, scorer) with a scripted generator."""

    def __init__(self, settings: Settings, generator: ScriptedGenerator | None = None) -> None:
        super().__init__(settings)
        self.fake = generator or ScriptedGenerator()

    def prepare_generator(self, cancel: CancelToken | None = None) -> Iterator[Progress]:
        yield Progress("model_ready", 1, 1, "scripted generator")

    def generator(self, warm: Sequence[Sequence[ChatMessage]] = ()) -> Any:
        return self.fake


# --------------------------------------------------------------------------- an in-memory service

class FakeCatalog:
    def __init__(self) -> None:
        self.docs: list[Any] = []
        self.problem_list: list[Any] = []

    def file_states(self) -> dict[str, Any]:
        return {}

    def documents(self) -> list[Any]:
        return list(self.docs)

    def problems(self) -> list[Any]:
        return list(self.problem_list)

    def document_warnings(self) -> dict[int, tuple[str, ...]]:
        return {}

    def staged_counts(self) -> dict[str, int]:
        return {}

    def roots(self) -> list[str]:
        return [str(DEMO)]

    def get_json(self, key: str) -> Any:
        return None

    def surfaces(self, terms: Sequence[str]) -> dict[str, str]:
        return {t: SURFACES[t] for t in terms if t in SURFACES}


class FakeLibrary:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.catalog = FakeCatalog()
        self.ocr_cache = OcrCache(folder)  # the real cache: empty, so no document is marked OCR'd

    def text_outdated(self) -> bool:
        return False  # canned documents: read by the present reader


class FakeService:
    """Stands in for RagService in the fast widget tests: canned results, real event shapes.

    ``gate`` (a threading.Event) makes ``ingest`` wait between files so a test can
    cancel in the middle.
    """

    def __init__(self, folder: Path, settings: Settings, generator: ScriptedGenerator | None = None) -> None:
        self.settings = settings
        self.library = FakeLibrary(folder)
        self.runtime = ScriptedRuntimeLike(generator or ScriptedGenerator())
        self.updated: list[Settings] = []
        self.gate: threading.Event | None = None
        self.compare_error: BaseException | None = None
        # a CrossLanguage (app.crosslang) for the canned comparison: the question's other-language search
        self.cross_language: Any = None
        # the causal column in the baseline's order, as when the gate says re-ranking would hurt
        self.causal_as_baseline = False
        self.answer_calls: list[str] = []  # the method of each answer() call, in order
        self.read_aheads: list[tuple[str, str]] = []  # (question, list's method) of each read_ahead() call
        self.compared: list[str] = []  # the question of each compare() call, in order
        self.read_ahead_gate: threading.Event | None = None  # read_ahead waits on it until cancelled or set
        self.cfrag_standards: list[Answer | None] = []  # the standard answer each CF-RAG run was handed
        self.closed = False
        self.opened: list[FakeService] = []
        self.conversation = Conversation()

    def close(self) -> None:
        self.closed = True

    def with_library(self, library_dir: Path, settings: Settings) -> FakeService:
        """Another (empty) library sharing this one's runtime, like RagService.with_library."""
        other = FakeService(library_dir, settings)
        other.runtime = self.runtime
        self.opened.append(other)
        return other

    def update_settings(self, settings: Settings) -> None:
        self.settings = settings
        self.updated.append(settings)

    def word_spans(self, text: str) -> list[tuple[int, int, str, str]]:
        return []  # no tokenizer: the marks fall back to word prefixes

    def rewrite_followup(self, question: str, conversation: Conversation, cancel: CancelToken | None = None,
                         timeout_s: float | None = None) -> Rewrite:
        return Rewrite(question, question, False, "")  # the question is kept as it stands

    def load_conversation(self) -> Conversation:
        return self.conversation

    def save_conversation(self, conversation: Conversation) -> None:
        self.conversation = conversation

    def ingest(self, folders: Sequence[Path], cancel: CancelToken | None = None, *,
               calibrate_after: bool = False) -> Iterator[Progress | IngestReport]:
        from rag_desktop.core.types import Document, FileProblem

        rep = IngestReport()
        files = sorted(p for f in folders for p in Path(f).iterdir() if p.suffix in (".pdf", ".docx"))
        try:
            for i, p in enumerate(files, start=1):
                if cancel is not None:
                    cancel.raise_if_set()
                yield Progress("scan", i, len(files), p.name, 2.0 * (len(files) - i), str(p))
                if self.gate is not None:
                    self.gate.wait(5)
                    if cancel is not None:
                        cancel.raise_if_set()
                self.library.catalog.docs.append(Document(i, str(p), "x", p.stem, "en", 1, p.suffix[1:]))
                rep.added.append(str(p))
        except Cancelled:
            rep.cancelled = True
        self.library.catalog.problem_list = [FileProblem(str(folders[0]) + "/broken.doc",
                                                         "old Word .doc format — save it as .docx")]
        rep.skipped.extend(self.library.catalog.problem_list)
        yield rep

    def ocr_lines(self, doc_id: int, page: int) -> tuple[OcrLine, ...]:
        return ()  # the fake library holds no scanned documents

    def surfaces(self, terms: Any) -> dict[str, str]:
        return dict(self.library.catalog.surfaces(terms))

    def prepare_generator(self, cancel: CancelToken | None = None) -> Iterator[Progress]:
        yield from ()

    def compare(self, query: str, level: str | None = None, k: int | None = None,
                ranking: str | None = None, *, translate: bool = True) -> Comparison:
        self.last_ranking = ranking
        self.compared.append(query)
        if self.compare_error is not None:
            raise self.compare_error
        comp = make_comparison(query)
        if self.causal_as_baseline:
            # a person chose the baseline order for the question: both columns read the same sources
            comp = dataclasses.replace(comp, causal=dataclasses.replace(comp.baseline, method="baseline"),
                                       answer_ranking="baseline")
        return comp if self.cross_language is None else dataclasses.replace(comp, cross_language=self.cross_language)

    def answer(self, query: str, ranked: RankedList, n_sources: int = 5,
               cancel: CancelToken | None = None) -> Iterator[Any]:
        from rag_desktop.core import replies

        self.answer_calls.append(ranked.method)
        gen = self.runtime.generator()
        parts = []
        for ev in gen.stream([ChatMessage("system", "answer"), ChatMessage("user", query)], max_tokens=100,
                             temperature=0.0, seed=0, cancel=cancel):
            if ev.kind == GenEventKind.TOKEN:
                parts.append(ev.text)
            yield ev
        text = "".join(parts).strip()
        used = ranked.hits[:n_sources]
        yield Answer(text, replies.parse_citations(text, used), tuple(used), ranked.method)

    def read_ahead(self, query: str, ranked: RankedList, cancel: CancelToken | None = None) -> int:
        self.read_aheads.append((query, ranked.method))
        while self.read_ahead_gate is not None and not self.read_ahead_gate.wait(0.01):
            if cancel is not None and cancel.is_set:
                return 0
        return 100

    def source_needs(self, query: str, answer: Answer,
                     cancel: CancelToken | None = None) -> Iterator[Progress | tuple[SourceNeed, ...]]:
        """The real app.source_needs over the scripted generator (the collaborator)."""
        from rag_desktop.app.source_needs import source_needs

        gen: Any = self.runtime.generator()  # the scripted collaborator: stream is all source_needs uses
        yield from source_needs(gen, self.settings.generation, query, answer, cancel)

    def cfrag_or_abstain(self, query: str, cancel: CancelToken | None = None, standard: Answer | None = None,
                         ) -> Iterator[Progress | CFResult | Answer]:
        self.cfrag_standards.append(standard)
        for i, step in enumerate(("retrieve", "counterfactuals", "hypotheses", "decision"), start=1):
            if cancel is not None:
                cancel.raise_if_set()
            yield Progress(f"cfrag.{step}", i, 4, step)
        yield make_cf_result(query)


class ScriptedRuntimeLike:
    def __init__(self, gen: ScriptedGenerator) -> None:
        self.gen = gen

    def prepare_generator(self, cancel: CancelToken | None = None) -> Iterator[Progress]:
        yield Progress("model_ready", 1, 1, "scripted")

    def generator(self) -> ScriptedGenerator:
        return self.gen

    def close(self) -> None: ...


def conforms(svc: FakeService) -> LibraryService:
    """Never called: mypy (tests/test_quality.py) checks here that the fake keeps the UI's
    service contract (app.service_api.LibraryService), so it cannot drift from RagService."""
    return svc
