"""RagService: the facade the UI and the CLI call (docs/architecture.md, layer ``app``).

One service per open library. It owns the Runtime (models) and the Library
(catalog + indexes), and exposes typed operations: ingest, compare, answer,
CF-RAG, calibrate. Long operations are generators of events that poll a
CancelToken, so the UI's one worker bridge can run any of them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import weakref
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.app.abstention import after, judge, pointed, relevance
from rag_desktop.app.abstention import check as check_abstention
from rag_desktop.app.answer_prompt import AnswerPrompt, answer_prompt
from rag_desktop.app.asked_across import across_list, answer_across
from rag_desktop.app.crosslang import CrossLanguage, CrossStatus, needs_translation, other_language, translate_question
from rag_desktop.app.library import CATALOG_FILE, IngestReport, Library
from rag_desktop.app.library_gate import LibraryGate
from rag_desktop.app.model_speed import Speed, SpeedMeter, record_speed
from rag_desktop.app.passages import PassageFinder
from rag_desktop.app.read_ahead import read_ahead
from rag_desktop.app.retrieval import QueryContext, Retriever, answer_list
from rag_desktop.app.runtime import Runtime
from rag_desktop.app.source_needs import source_needs
from rag_desktop.app.source_translation import SourceTranslator
from rag_desktop.app.verdict import OVERRIDES as OVERRIDES
from rag_desktop.app.verdict import CausalOff as CausalOff
from rag_desktop.app.verdict import CausalOffCode as CausalOffCode
from rag_desktop.app.verdict import Verdict as Verdict
from rag_desktop.app.verdict import answers_off, decide_verdict
from rag_desktop.app.verdict import causal_off_reason as causal_off_reason
from rag_desktop.core import keywords as kw
from rag_desktop.core import prompting
from rag_desktop.core.abstain import Abstention, judged, lifted
from rag_desktop.core.attribution import attribute, check_citations, echoes_example
from rag_desktop.core.causal import CausalDiagnostics
from rag_desktop.core.cfrag import iter_cfrag
from rag_desktop.core.cfrag.anchor import unsupported
from rag_desktop.core.cfrag.types import CFResult, to_jsonable
from rag_desktop.core.conversation import (
    NOTES,
    Conversation,
    Rewrite,
    build_rewrite_messages,
    needs_rewrite,
)
from rag_desktop.core.errors import UserInputError
from rag_desktop.core.fusion import fuse
from rag_desktop.core.generation import generate_line
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.needs import SourceNeed
from rag_desktop.core.replies import parse_citations, parse_rewrite
from rag_desktop.core.settings import CFRagSettings, GenerationSettings, Settings
from rag_desktop.core.types import (
    Answer,
    Cancelled,
    CancelToken,
    ChatMessage,
    GenEvent,
    GenEventKind,
    Hit,
    Lang,
    OcrLine,
    Progress,
    RankedList,
)

log = logging.getLogger(__name__)

CONVERSATION_FILE = "conversation.json"  # the library's follow-up thread


@dataclass(frozen=True)
class Comparison:
    """One question, every ranking side by side, with what is needed to explain them."""

    query: str
    level: str
    baseline: RankedList
    causal: RankedList
    cross_encoder: RankedList | None
    diagnostics: CausalDiagnostics
    tau: float
    tau_source: str
    causal_variant: str
    gate: dict[str, Any] | None
    timings: dict[str, float] = field(default_factory=dict)
    cfrag: CFResult | None = None
    verdict: dict[str, Any] = field(default_factory=dict)  # Verdict.to_json(): what the column shows, and why
    # Set when the answers read the baseline order: chosen, or the gate's decision (derived from
    # the verdict; the UI words it in its own language). The causal column shows its re-ranking.
    causal_off: CausalOff | None = None
    # Which ranking feeds the answer and CF-RAG by default: "baseline", "causal" or "hybrid" (the
    # gate's decision; docs/architecture.md, "The question's path").
    answer_ranking: str = "hybrid"
    # What each column's answer reads: the column's order fused (RRF) with the keyword leg's BM25
    # order over the same pool (RagService.answer_list); a column absent here reads its own order.
    answer_lists: dict[str, RankedList] = field(default_factory=dict)

    @property
    def first_column(self) -> str:
        """The column whose answer is written first and that CF-RAG starts from: the one
        ``answer_ranking`` feeds ("causal" for the causal and the hybrid rankings)."""
        return "baseline" if self.answer_ranking == "baseline" else "causal"

    def answer_list(self, column: str) -> RankedList:
        """The list ``column``'s answer reads (its own order when no keyword leg ran)."""
        own = {"baseline": self.baseline, "causal": self.causal}.get(column) or self.cross_encoder
        assert own is not None, column
        return self.answer_lists.get(column, own)
    # The question's other-language search: the translation, whether the
    # columns fuse two rankings, or why the question was ranked as typed only.
    cross_language: CrossLanguage | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = to_jsonable(dataclasses.replace(self, cfrag=None))
        out["cfrag"] = None if self.cfrag is None else to_jsonable(self.cfrag)
        return out


class RagService:
    def __init__(self, library_dir: Path, settings: Settings, runtime: Runtime | None = None) -> None:
        self.settings = settings.validate()
        self.runtime = runtime or Runtime(self.settings)
        self.library = Library(library_dir, self.settings)
        self._retriever: Retriever | None = None
        self._passages: PassageFinder | None = None
        self._source_translator = SourceTranslator(self.library.catalog, lambda: self.runtime.generator())
        self._lang_counts: dict[str, int] | None = None
        self._question_translations: dict[tuple[str, str, str], CrossLanguage] = {}
        # The last answers the model wrote in full, or the verdicts it reached before a word (answer()):
        # a few, as a question asked across languages reads two prompts per column.
        self._written: list[_Written] = []
        self.library_gate = LibraryGate(self.library.catalog, self.retriever, lambda: self.settings.retrieval)

    def close(self) -> None:
        self.library.close()

    def with_library(self, library_dir: Path, settings: Settings | None = None) -> RagService:
        """A service on another library that shares this one's Runtime (the models stay loaded).

        Used by the desktop app to switch libraries; the caller closes this service afterwards
        (``close`` closes only the library, never the shared models).
        """
        # The tokenizer learnt this library's user words (Library/Retriever add them); the
        # next library must not segment with them, so the shared runtime forgets its tokenizers.
        self.runtime.reset_tokenizers()
        return RagService(library_dir, settings or self.settings, runtime=self.runtime)

    @staticmethod
    def peek_library(library_dir: Path) -> tuple[tuple[str, ...], int] | None:
        """(folders, number of documents) of a library that is not open; None when there is no library.

        Reads the catalog without loading any model (the desktop app's library list shows it).
        """
        from rag_desktop.app.catalog import Catalog

        db = library_dir / CATALOG_FILE
        if not db.is_file():
            return None
        cat = Catalog(db)
        try:
            return tuple(cat.roots()), cat.count("documents")
        finally:
            cat.close()

    def update_settings(self, settings: Settings) -> None:
        self.settings = settings.validate()
        self.runtime.update(self.settings)
        self.library.settings = self.settings
        self._retriever = None
        self._passages = None
        self._lang_counts = None

    # ------------------------------------------------------------------ library
    def ingest(
        self,
        folders: Sequence[Path],
        cancel: CancelToken | None = None,
        reembed: bool = False,
        calibrate_after: bool = False,
    ) -> Iterator[Progress | IngestReport]:
        """Progress, then the IngestReport last. ``calibrate_after`` (the CLI's ingest, the app's Add
        folder, rescan and watcher): before the report, the library's own calibration gate when the
        stored record no longer holds (app.library_gate; no generator, a few seconds)."""
        emb = self.runtime.embedder()
        tok = self.runtime.tokenizer()
        ocr = self.runtime.ocr() if self.settings.ingest.ocr else None
        report: IngestReport | None = None
        for ev in self.library.ingest(folders, emb, tok, cancel=cancel, reembed=reembed, ocr=ocr):
            if isinstance(ev, IngestReport):
                report = ev
            else:
                yield ev
        self._retriever = None
        self._passages = None
        self._lang_counts = None
        if report is None:
            return
        if calibrate_after and not report.cancelled and not (cancel is not None and cancel.is_set):
            yield from self.library_gate.after_ingest(bool(report.added or report.updated or report.removed))
        yield report

    def ocr_lines(self, doc_id: int, page: int) -> tuple[OcrLine, ...]:
        """The recognised lines of an OCR'd page (empty for text pages): the viewer's marks."""
        doc = self.library.catalog.document(doc_id)
        return () if doc is None else self.library.ocr_cache.lines(doc.sha256, page)

    def retriever(self) -> Retriever:
        if self._retriever is None:
            emb = self.runtime.embedder()
            self.library.check_embedder(emb)
            self._retriever = Retriever(self.library, emb, self.runtime.tokenizer(), self.settings)
        return self._retriever

    # ------------------------------------------------------------------ rankings
    def causal_variant(self) -> str:
        """Which re-ranking fills the causal column: the setting, or the gate's decision."""
        return self.verdict().shown

    def verdict(self, override: str | None = None) -> Verdict:
        """Which ranking the causal column shows and why (the setting, the gate, or ``override``)."""
        return decide_verdict(self.library_gate.record(), self.settings.retrieval.default_method, override)

    def compare(
        self, query: str, level: str | None = None, k: int | None = None, ranking: str | None = None,
        *, translate: bool = True,
    ) -> Comparison:
        """``ranking`` (baseline, causal, hybrid) overrides the setting and the gate for this question.

        ``translate`` False ranks the question as typed, with no model call (the window draws its
        columns from that at once and asks again with the translation afterwards, when
        ``retrieval.cross_language`` is on; docs/architecture.md, "The question's path"). The
        Baseline column is always the typed question's plain similarity order: a fused ranking is
        no similarity order, so fusion reaches the other columns and the answers only."""
        query = query.strip()
        if not query:
            raise UserInputError("the question is empty")
        verdict = self.verdict(ranking)
        r = self.retriever()
        t0 = time.perf_counter()
        ctxs, cross = self.query_contexts(query, level, k, translate=translate)
        ctx = ctxs[0]
        t1 = time.perf_counter()
        variant = verdict.shown
        causal_lists: list[RankedList] = []
        diag: CausalDiagnostics | None = None
        for c in ctxs:
            ranked, d = r.rerank(c, "hybrid" if variant == "baseline" else variant)
            diag = diag or d  # the question as typed: its diagnostics head the column
            if variant == "baseline":  # a person chose the baseline order for this question
                ranked = dataclasses.replace(c.baseline, method="baseline", explanations=ranked.explanations,
                                             label=verdict.label())
            causal_lists.append(ranked)
        assert diag is not None
        t2 = time.perf_counter()
        ce_lists = ([r.cross_encode(c, self.runtime.scorer()) for c in ctxs]
                    if self.runtime.has_cross_encoder() else [])
        t3 = time.perf_counter()
        kk = k or self.settings.retrieval.k
        base_f = fuse([c.baseline for c in ctxs[:1]], kk)  # plain similarity order, never fused
        base_ranks = {h.unit_id: h.rank for h in base_f.ranked.hits}
        causal_f = fuse(causal_lists, kk, baseline_ranks=base_ranks)
        ce_f = fuse(ce_lists, kk) if ce_lists else None
        if cross.fused:
            found = {"baseline": base_f, "causal": causal_f, **({"cross_encoder": ce_f} if ce_f else {})}
            cross = dataclasses.replace(cross, translated_found={
                col: tuple(h.unit_id for h, i in zip(f.ranked.hits, f.found_by, strict=True) if i == 1)
                for col, f in found.items()})
        answer_lists = {col: answer_list(f.ranked, ctxs) for col, f in
                        (("baseline", base_f), ("causal", causal_f), ("cross_encoder", ce_f)) if f is not None}
        timings = dict(ctx.timings)
        timings.update({"baseline_total": t1 - t0, "rerank": t2 - t1, "cross_encoder": t3 - t2})
        if cross.status != CrossStatus.OFF:
            timings["translate_question"] = cross.seconds
        return Comparison(
            query,
            ctx.level,
            base_f.ranked,
            causal_f.ranked,
            ce_f.ranked if ce_f is not None else None,
            diag,
            ctx.tau,
            ctx.tau_source,
            variant,
            verdict.gate,
            timings,
            verdict=verdict.to_json(),
            causal_off=answers_off(verdict),
            cross_language=cross,
            answer_ranking=verdict.answer,
            answer_lists={c: a for c, a in answer_lists.items() if a is not None},
        )

    # ------------------------------------------------------------------ questions across languages
    def library_languages(self) -> dict[str, int]:
        """Documents per language, counted once per library state (reset by every ingest)."""
        if self._lang_counts is None:
            self._lang_counts = self.library.catalog.language_counts()
        return self._lang_counts

    def cross_language(self, query: str, cancel: CancelToken | None = None) -> CrossLanguage:
        """Whether ``query`` is also searched in the library's other language, and its translation.

        Only zh ↔ en, only when the library holds a document in the other language and
        ``retrieval.cross_language`` is on. The translation is cached per question text and
        model; a failure or a timeout is not cached (the next question tries again)."""
        lang = detect_lang(query)
        if not self.settings.retrieval.cross_language:
            return CrossLanguage(CrossStatus.OFF, lang)
        if other_language(lang) is None:
            return CrossLanguage(CrossStatus.OTHER, lang)
        target = needs_translation(lang, self.library_languages())
        if target is None:
            return CrossLanguage(CrossStatus.SINGLE, lang)
        if not self.runtime.generator_ready():
            return CrossLanguage(CrossStatus.NO_GENERATOR, lang, target,
                                 timeout_s=self.settings.retrieval.cross_language_timeout_s)
        return self.translate_question(query, lang, target, cancel)

    def translate_question(self, query: str, lang: Lang, target: Lang, cancel: CancelToken | None) -> CrossLanguage:
        """``query`` in ``target`` by the local model, cached per question text and model; a failure
        or a timeout is not cached (the next question tries again)."""
        key = (query, target, self.runtime.generator_name())
        cached = self._question_translations.get(key)
        if cached is not None:
            return cached
        out = translate_question(self.runtime.generator, query, lang, target,
                                 self.settings.retrieval.cross_language_timeout_s,
                                 seed=self.settings.generation.seed, cancel=cancel)
        if out.fused:
            self._question_translations[key] = out
        return out

    def query_contexts(self, query: str, level: str | None = None, k: int | None = None,
                       cancel: CancelToken | None = None, *, translate: bool = True,
                       ) -> tuple[list[QueryContext], CrossLanguage]:
        """The question's QueryContext, then its translation's when it is searched across languages
        (``translate`` False: the question as typed only, no model call)."""
        r = self.retriever()
        ctxs = [r.context(query, level, k)]  # type: ignore[arg-type]
        cross = (self.cross_language(query, cancel) if translate
                 else CrossLanguage(CrossStatus.OFF, detect_lang(query)))
        if cross.fused:
            ctxs.append(r.context(cross.translated, level, k))  # type: ignore[arg-type]
        return ctxs, cross

    def word_spans(self, text: str) -> list[tuple[int, int, str, str]]:
        """(start, end, word, key) of each word of ``text`` as the keywords segment and stem it
        (jieba for Chinese, Snowball stems for English): the UI highlights keyword terms on these
        whole words and never imports the tokenizer itself."""
        tok = self.runtime.tokenizer()
        spans = getattr(tok, "word_spans", None)
        return list(spans(text)) if spans is not None else []

    def context(self, query: str, level: str | None = None, k: int | None = None) -> QueryContext:
        return self.retriever().context(query, level, k)  # type: ignore[arg-type]

    def surfaces(self, terms: Iterable[str]) -> dict[str, str]:
        """Readable words for keyword terms (terms may be stems such as "secur")."""
        terms = list(terms)
        found = self.library.catalog.surfaces(terms)
        tok = self.runtime.tokenizer()
        return {t: found.get(t) or tok.surface_form(t) for t in terms}

    # ------------------------------------------------------------------ answers
    def prepare_generator(self, cancel: CancelToken | None = None) -> Iterator[Progress]:
        """The model file joined and verified (progress), the model loaded and the answer prompts'
        prefix evaluated for the library's languages (``prompting.warm_prompts``; benchmarks §9)."""
        yield from self.runtime.prepare_generator(cancel)
        if self.settings.models.generator_backend == "llama_cpp":  # a server is first asked by the first question
            self.runtime.generator(warm=prompting.warm_prompts(self.library_languages()))

    def translate_sources(
        self, sources: Sequence[Hit], target: Lang, cancel: CancelToken | None = None, *, whole_chunks: bool = True
    ) -> tuple[Hit, ...]:
        """Sources in another language than the question, translated (app.source_translation)."""
        if not self.settings.generation.translate:
            return tuple(sources)
        return self._source_translator.translate(sources, target, self.settings.generation.seed, cancel,
                                                 whole_chunks=whole_chunks)

    def source_needs(self, query: str, answer: Answer,
                     cancel: CancelToken | None = None) -> Iterator[Progress | tuple[SourceNeed, ...]]:
        """Which cited sources ``answer`` needs: answered again without each (app.source_needs)."""
        yield from source_needs(self.runtime.generator(), self.settings.generation, query, answer, cancel)

    def passage_finder(self) -> PassageFinder:
        """The answer-passage finder of this library, sharing the retriever's encoder."""
        g = self.settings.generation
        if self._passages is None or self._passages.max_passages != g.max_passages:
            r = self.retriever()
            filt = kw.build_filter(self.settings.retrieval.keyword_variant, r.tokenizer)
            self._passages = PassageFinder(self.library, r.embedder, r.tokenizer, r.idf("c"),
                                           filt.doc_stop | filt.query_stop, max_passages=g.max_passages,
                                           keyword=r.keyword_scores)
        return self._passages

    def answer(
        self, query: str, ranked: RankedList, n_sources: int = prompting.ANSWER_SOURCES,
        cancel: CancelToken | None = None,
        *, passages: bool | None = None, cross: bool = True,
    ) -> Iterator[GenEvent | Answer | Progress]:
        """Stream an answer from the top sources of ``ranked``; ends with the Answer and citations.

        With answer passages (``generation.passages``) the model reads paragraph windows of the top
        ``n_sources`` hits, each headed by what locates it, and ``[n]`` points at that paragraph; else
        the hits' whole chunks. Progress: ``passages`` (windows scored), ``reading`` (prompt tokens),
        ``asked_across`` (the question's translation, asked of the other language's documents where its
        own passages were about something else: app.asked_across; ``cross`` False: not again)."""
        g = self.settings.generation
        abstention = self.abstention(query, ranked, cancel) if g.abstain else None
        if abstention is not None and abstention.abstained:  # decided before the model is loaded
            yield Answer("", method=ranked.method, abstention=abstention)
            return
        gen = self.runtime.generator()
        p = answer_prompt(self, gen, query, ranked, n_sources, g.passages if passages is None else passages, cancel)
        if p.found is not None:
            yield Progress("passages", len(p.found.hits), p.found.n_candidates, f"{p.found.seconds:.2f}")
        lang, msgs, used, n_prompt = p.lang, p.messages, p.used, p.tokens(gen)
        yield Progress("reading", n_prompt, n_prompt, self.runtime.generator_name())
        # A column that hands the model the prompt the last answer read shows that answer: with the fixed
        # seed it would be the same text (docs/architecture.md, "The question's path").
        key = (weakref.ref(gen), gen.identity, msgs, g)  # a freed generator's id may be reused; its ref is dead
        kept = next((w for w in self._written if w.key == key), None)
        # The other language searched already (the setting, or this question crossed): a verdict names it not.
        searched_other = self.settings.retrieval.cross_language or not cross
        if abstention is not None and g.check_relevance and used:  # do the passages bear on the question?
            abstention = (lifted(abstention, kept.lift) if kept is not None and kept.lift is not None
                          else relevance(gen, msgs, query, used, lang, abstention, cancel,
                                         answer_reserve=g.answer_reserve))
            abstention = pointed(abstention, lang, used, ranked.hits, self.library_languages(), searched_other)
        # Asked first (do they hold it?) in "abstain" mode, and for a question asked across languages: its own
        # language's passages were about something else, so an answer must pass both checks (app.asked_across).
        first_judged = g.judge_passages == "abstain" or (not cross and g.judge_passages != "off")
        if abstention is not None and first_judged and used and not abstention.abstained:
            # just read by the lift: the judgement reads on from its cache (its ~25 tokens), not the prompt again
            lift_read = abstention.question_lift is not None and (kept is None or kept.lift is None)
            abstention = (judged(abstention, kept.odds) if kept is not None and kept.odds is not None
                          else judge(gen, msgs, used, lang, abstention, cancel, after=lift_read))
        if abstention is not None and abstention.abstained:  # the passages it read are listed
            # kept too: a column handing the model this prompt again gets the verdict without a second read
            self._written = kept_first(self._written, _Written(key, "", ABSTAINED, abstention.judged,
                                                               abstention.question_lift))
            crossed = (answer_across(self, query, abstention.other_language, n_sources, cancel, passages)
                       if cross and g.ask_other_language and abstention.other_language else None)
            if crossed is not None:  # asked again of the documents in the other language (app.asked_across)
                yield from crossed
                return
            yield Answer("", sources=used, method=ranked.method, abstention=abstention,
                         locators=tuple((p.locators or ())[: len(used)]))
            return
        if kept is not None and kept.finish == ABSTAINED:  # only its scores serve; the text is written now
            kept = None
        written_now = kept is None
        if kept is None:
            kept = yield from _write(gen, g, msgs, n_prompt, cancel, key, abstention)
        else:
            yield GenEvent(GenEventKind.TOKEN, kept.text)
            yield GenEvent(GenEventKind.DONE, finish_reason=kept.finish)
        cancelled = kept.finish == "cancelled" or bool(cancel and cancel.is_set)
        doubted = None  # "warn": judged after the answer, from its cache, so the first token waits for nothing
        if abstention is not None and g.judge_passages == "warn" and not first_judged and used and not cancelled:
            if written_now:  # its cache holds this prompt
                kept = dataclasses.replace(kept, odds=judge(gen, msgs, used, lang, abstention, cancel,
                                                            after=True).judged)
            judged_ = abstention if kept.odds is None else judged(abstention, kept.odds)
            doubted = dataclasses.replace(judged_, abstained=False, reason="") if judged_.abstained else None
        if not cancelled:
            self._written = kept_first(self._written, kept)
        yield checked_answer(self, query, kept.text, ranked, p, abstention, doubted, cancelled, searched_other)

    def read_ahead(self, query: str, ranked: RankedList, cancel: CancelToken | None = None) -> int:
        """The prompt :meth:`answer` reads first for ``query``, read before it is asked (app.read_ahead)."""
        return read_ahead(self, query, ranked, cancel)

    def abstention(self, query: str, ranked: RankedList | None, cancel: CancelToken | None = None) -> Abstention:
        """Whether the library holds an answer to ``query`` (app.abstention.check, core.abstain)."""
        return check_abstention(self.retriever(), query, ranked, self.library_languages(),
                                lambda q, lang, target: self.translate_question(q, lang, target, cancel))

    # ------------------------------------------------------------------ conversation
    def rewrite_followup(self, question: str, conversation: Conversation,
                         cancel: CancelToken | None = None, timeout_s: float | None = None) -> Rewrite:
        """The standalone form of a follow-up, by the local model; the user's words on failure.

        No previous question: the question is standalone and the model is not asked. A model
        error, a timeout (``generation.rewrite_timeout_s``) or an unusable reply gives back the
        user's question with a note. A user's cancel still raises Cancelled.
        """
        q = question.strip()
        if not q:
            raise UserInputError("the question is empty")
        if not needs_rewrite(conversation, q):
            return Rewrite(q, q, False)
        limit = self.settings.generation.rewrite_timeout_s if timeout_s is None else timeout_s
        t0 = time.perf_counter()
        try:
            line = generate_line(self.runtime.generator(), build_rewrite_messages(conversation, q), max_tokens=96,
                                 seed=self.settings.generation.seed, timeout_s=limit, cancel=cancel)
        except Exception as exc:  # no model, a server error: the user's words still work
            if isinstance(exc, Cancelled) and cancel is not None and cancel.is_set:
                raise  # the user's cancel
            log.warning("follow-up rewrite failed: %s", exc)
            return Rewrite(q, q, False, f"{NOTES['failed']} ({exc})", time.perf_counter() - t0, reason="failed")
        took = line.seconds
        if line.timed_out:
            return Rewrite(q, q, False, f"{NOTES['timeout']} (over {limit:g} s)", took, reason="timeout")
        raw = line.text
        standalone, reason = parse_rewrite(raw, q)
        return Rewrite(q, standalone, not reason and standalone != q, NOTES.get(reason, ""), took, raw, reason)

    def conversation_file(self) -> Path:
        return self.library.folder / CONVERSATION_FILE

    def load_conversation(self) -> Conversation:
        """This library's conversation (an unreadable file is logged and starts a new one)."""
        path = self.conversation_file()
        try:
            return Conversation.from_json(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return Conversation()
        except (OSError, ValueError) as exc:
            log.warning("the conversation in %s is unreadable (%s); starting a new one", path, exc)
            return Conversation()

    def save_conversation(self, conversation: Conversation) -> None:
        path = self.conversation_file()
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(conversation.to_json(), ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(path)

    def cfrag_settings(self) -> CFRagSettings:
        """The CF-RAG settings with θ_sim and θ_dedup rescaled to this library's cosine scale
        when ``rescale_cosines`` is on (cosines above the library's mean pair cosine b)."""
        c = self.settings.cfrag
        if c.rescale_cosines:
            b = self.library.cosine_baseline()
            c = dataclasses.replace(c, theta_sim=b + c.theta_sim * (1 - b), theta_dedup=b + c.theta_dedup * (1 - b))
        return c

    def cfrag_or_abstain(self, query: str, cancel: CancelToken | None = None, standard: Answer | None = None,
                         ) -> Iterator[Progress | CFResult | Answer]:
        """CF-RAG as the window and ``answer --method cfrag`` run it: first the abstention every answer
        path makes (core.abstain, ``generation.abstain``), then :meth:`cfrag` from ``standard`` (the
        answer the first column wrote, None: written here). Ends with the CFResult, or with an
        abstained Answer and no model call for CF-RAG."""
        if self.settings.generation.abstain:
            abstention = self.abstention(query, None, cancel)
            if abstention.abstained:
                yield Answer("", method="cfrag", abstention=abstention)
                return
            if standard is None and self.cfrag_settings().keep_standard:
                yield Progress("cfrag.standard", 0, 1, "writing the standard answer CF-RAG starts from")
                first = first_answer(self, query, cancel)
                if first is not None and first.settles_cfrag:  # said once, as the window does
                    yield dataclasses.replace(first, method="cfrag")
                    return
                standard = first if first is not None and first.text.strip() else None
        # A standard answer asked across languages (app.asked_across): CF-RAG argues its question.
        yield from self.cfrag(standard.asked_as if standard is not None and standard.asked_as else query, cancel,
                              standard=standard)

    def cfrag(
        self, query: str, cancel: CancelToken | None = None, level: str | None = None,
        standard: Answer | None = None,
    ) -> Iterator[Progress | CFResult]:
        """CF-RAG over this library: a Progress per step (stage ``cfrag.<step>``), then the CFResult.

        Like :meth:`ingest` and :meth:`answer`, a generator; the UI's worker forwards the
        Progress events and takes the CFResult as the result, the CLI runs it to its result
        with :func:`rag_desktop.core.cfrag.cfrag_result`. ``standard`` is the standard answer CF-RAG
        starts from (``cfrag.keep_standard``; None: :func:`standard_answer`).
        """
        c = self.cfrag_settings()
        if c.keep_standard and standard is None:
            yield Progress("cfrag.standard", 0, 1, "writing the standard answer CF-RAG starts from")
            standard = standard_answer(self, query, cancel)
        r = self.retriever()
        lvl = level or "chunk"  # CF-RAG reasons over passages, not whole files

        # The question's other-language phrasing (cached when compare ran first) also retrieves
        # CF-RAG's evidence for q, fused as the columns are; the counterfactuals q' are searched
        # as generated (translating each would cost a model call per q').
        cross = self.cross_language(query, cancel)

        def retrieve(text: str, k: int) -> Sequence[Hit]:
            qv = r.embedder.embed_queries([text])[0]
            hits = r.baseline(qv, lvl, k, -1.0)  # type: ignore[arg-type]
            if not cross.fused or text.strip() != query.strip():
                return hits
            qv2 = r.embedder.embed_queries([cross.translated])[0]
            other = r.baseline(qv2, lvl, k, -1.0)  # type: ignore[arg-type]
            return fuse([RankedList("baseline", tuple(hits)), RankedList("baseline", tuple(other))], k).ranked.hits

        def read(q: str, hits: Sequence[Hit]) -> Sequence[Hit]:
            return self.passage_finder().focus(q, hits, c.read_passages)

        def stored(hits: Sequence[Hit]) -> list[npt.NDArray[np.float32] | None]:
            # chunk vectors as ingest embedded them (r.embedder, checked against the library)
            vecs = self.library.catalog.vectors_of_chunks([h.unit_id for h in hits if h.level == "chunk"])
            return [vecs.get(h.unit_id) if h.level == "chunk" else None for h in hits]

        yield from iter_cfrag(
            query,
            retrieve=retrieve,
            embedder=r.embedder,
            scorer=self.runtime.scorer(),
            generator=self.runtime.generator(),
            settings=c,
            seed=c.seed,
            cancel=cancel,
            read=read if c.read_passages > 0 else None,
            stored=stored,
            standard=standard,
        )


def _record_speed(identity: str, speed: Speed | None) -> None:
    """Keep a measured speed for the Models page; never fails the answer that measured it."""
    if speed is None:
        return
    try:
        record_speed(identity, speed)
    except OSError as exc:
        log.warning("could not record the generator's speed: %s", exc)


KEPT_PROMPTS = 4  # answers and verdicts kept: two columns, each maybe asked across languages (app.asked_across)
ABSTAINED = "abstained"  # _Written.finish of a prompt whose answer was not written: its verdict is kept


def kept_first(kept: list[_Written], written: _Written) -> list[_Written]:
    """``written`` kept for the next column that hands the model its prompt, before the newest few."""
    return [written, *(w for w in kept if w.key != written.key)][:KEPT_PROMPTS]


@dataclass(frozen=True)
class _Written:
    """What the model wrote for one answer prompt: kept (RagService._written) so that the next column
    handing it the same prompt shows this answer instead of writing it again."""

    key: tuple[object, ...]  # (generator, messages, generation settings)
    text: str
    finish: str  # the stream's finish reason, or ABSTAINED (nothing written: the scores below decided)
    odds: float | None = None  # the passages' judgement, before or after it (core.abstain.judged); None: not judged
    lift: float | None = None  # the question's lift before it (core.abstain.lifted); None: not measured


def _write(gen: Any, g: GenerationSettings, msgs: Sequence[ChatMessage], n_prompt: int, cancel: CancelToken | None,
           key: tuple[object, ...], so_far: Abstention | None) -> Generator[GenEvent, None, _Written]:
    """Stream the model's answer to ``msgs``; returns it as kept under ``key``, with the judgement's odds
    and the question's lift ``so_far``."""
    parts: list[str] = []
    finish = "stop"
    meter = SpeedMeter(n_prompt)  # the Models page's measured speed (app/model_speed.py)
    for ev in gen.stream(msgs, max_tokens=g.max_tokens, temperature=g.temperature, seed=g.seed, cancel=cancel):
        if ev.kind == GenEventKind.TOKEN:
            meter.token()
            parts.append(ev.text)
        elif ev.kind == GenEventKind.DONE:
            finish = ev.finish_reason or finish
        yield ev
    text = "".join(parts).strip()
    _record_speed(gen.identity, meter.result(gen.count_tokens(text) if text else 0))
    return _Written(key, text, finish, so_far.judged if so_far else None, so_far.question_lift if so_far else None)


def checked_answer(svc: RagService, query: str, text: str, ranked: RankedList, p: AnswerPrompt,
                   abstention: Abstention | None, doubted: Abstention | None, cancelled: bool,
                   searched_other: bool) -> Answer:
    """The Answer to ``query`` from the model's ``text`` to prompt ``p``: its citations checked, what no
    passage holds said, and the verdict on it (:meth:`RagService.answer`); ``searched_other``: the library's
    other language was searched already, so a verdict does not name it (app.abstention.pointed)."""
    g = svc.settings.generation
    used, locators = p.used, p.locators
    # The model's own markers first: one whose passage does not hold its sentence goes, and so
    # does a repeat; then sentences left uncited get the source that holds their words, marked
    # as matched (generation.check_citations / match_citations = false keep the model's text).
    dropped: tuple[tuple[int, str], ...] = ()
    if g.check_citations and used:
        checked = check_citations(text, [h.text for h in used], query)
        text, dropped = checked.text, checked.dropped
    matched: tuple[tuple[int, int, int], ...] = ()
    if g.match_citations and used:
        att = attribute(text, [h.text for h in used], query)
        text, matched = att.text, att.added
    # A small model sometimes repeats the worked example of the prompt (its answer with a real
    # title pasted in): said, not shown as an answer from the documents.
    example = next((m.content for m in p.messages if m.role == "assistant"), "")
    read = [h.text for h in used]
    # And what it adds to the question held by no passage it read: said beside it (core.cfrag.anchor).
    warnings = tuple(w for w, on in (("copied_example", echoes_example(text, example, read)),
                                     ("unsupported", unsupported(text, query,
                                                                 prompting.sources_as_read(used, locators, p.lang))),
                                     ("doubted", doubted is not None)) if on)
    verdict = after(abstention, doubted, text, warnings, p.lang, used, ranked.hits,  # its text kept
                    svc.library_languages(), searched_other) \
        if abstention and text and not cancelled else doubted
    originals = tuple("" if s.text == h.text else h.text for s, h in zip(used, p.hits, strict=False))
    return Answer(text, parse_citations(text, used), tuple(used), ranked.method,
                  locators=tuple(locators[: len(used)]) if locators is not None else (),
                  original_texts=originals, matched=matched, warnings=warnings, dropped_citations=dropped,
                  abstention=verdict)


def judged_abstention(svc: RagService, query: str, ranked: RankedList, cancel: CancelToken | None = None,
                      *, cross: bool = True) -> Abstention:
    """What :meth:`RagService.answer` decides before it writes a word (``generation.abstain``,
    ``check_relevance`` and ``judge_passages`` as set), with every check it would make measured: the
    library's words, then the model's judgement of the passages (app.abstention.judge, asked whenever it
    is not "off") and the question's lift (app.abstention.relevance), then, where the lift points to the
    library's other language, the same for the question's translation there (app.asked_across; its
    ``translated`` says so). For measuring the decision without writing answers."""
    g = svc.settings.generation
    first = svc.abstention(query, ranked, cancel)
    if first.abstained or (g.judge_passages == "off" and not g.check_relevance):
        return first
    gen = svc.runtime.generator()
    p = answer_prompt(svc, gen, query, ranked, prompting.ANSWER_SOURCES, g.passages, cancel)
    if not p.used:
        return first
    a = judge(gen, p.messages, p.used, p.lang, first, cancel) if g.judge_passages != "off" else first
    if not g.check_relevance:
        return a
    a = relevance(gen, p.messages, query, p.used, p.lang, a, cancel, answer_reserve=g.answer_reserve)
    if not cross:
        return a
    a = pointed(a, p.lang, p.used, ranked.hits, svc.library_languages(), svc.settings.retrieval.cross_language)
    across = (across_list(svc, query, a.other_language, cancel)
              if a.abstained and a.reason == "unrelated" and a.other_language and g.ask_other_language else None)
    return a if across is None else dataclasses.replace(
        judged_abstention(svc, across[0], across[1], cancel, cross=False), translated=across[0])


def first_answer(svc: RagService, query: str, cancel: CancelToken | None = None) -> Answer | None:
    """The answer the window writes first for ``query`` (Comparison.first_column's), abstained or not."""
    comp = svc.compare(query, translate=False)
    return next((ev for ev in svc.answer(query, comp.answer_list(comp.first_column), cancel=cancel)
                 if isinstance(ev, Answer)), None)


def standard_answer(svc: RagService, query: str, cancel: CancelToken | None = None) -> Answer | None:
    """:func:`first_answer` for a CF-RAG run that was not handed it (the CLI, the benchmarks); None
    when it abstains."""
    done = first_answer(svc, query, cancel)
    return done if done is not None and done.text.strip() else None
