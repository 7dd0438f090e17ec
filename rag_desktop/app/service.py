"""RagService: the facade the UI and the CLI call (DESIGN.md, layer ``app``).

One service per open library. It owns the Runtime (models) and the Library
(catalog + indexes), and exposes typed operations: ingest, compare, answer,
CF-RAG, calibrate. Long operations are generators of events that poll a
CancelToken, so the UI's one worker bridge can run any of them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_desktop.app.library import CATALOG_FILE, IngestReport, Library
from rag_desktop.app.passages import PassageFinder
from rag_desktop.app.retrieval import QueryContext, Retriever
from rag_desktop.app.runtime import Runtime
from rag_desktop.core import keywords as kw
from rag_desktop.core import prompting
from rag_desktop.core.causal import CausalDiagnostics
from rag_desktop.core.cfrag import CFTuning, run_cfrag
from rag_desktop.core.cfrag_types import CFResult, to_jsonable
from rag_desktop.core.conversation import (
    NOTES,
    Conversation,
    Rewrite,
    build_rewrite_messages,
    needs_rewrite,
    parse_rewrite,
)
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.settings import CFRagSettings, Settings
from rag_desktop.core.types import (
    Answer,
    Cancelled,
    CancelToken,
    GenEvent,
    GenEventKind,
    Hit,
    Lang,
    Locator,
    Progress,
    RankedList,
)

log = logging.getLogger(__name__)

CONVERSATION_FILE = "conversation.json"  # the library's follow-up thread (issue 12)


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
        self._passage_translations: dict[tuple[str, str, str], str] = {}

    def close(self) -> None:
        self.library.close()

    def with_library(self, library_dir: Path, settings: Settings | None = None) -> RagService:
        """A service on another library that shares this one's Runtime (the models stay loaded).

        Used by the desktop app to switch libraries; the caller closes this service afterwards
        (``close`` closes only the library, never the shared models).
        """
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

    # ------------------------------------------------------------------ library
    def ingest(
        self, folders: Sequence[Path], cancel: CancelToken | None = None, reembed: bool = False
    ) -> Iterator[Progress | IngestReport]:
        emb = self.runtime.embedder()
        tok = self.runtime.tokenizer()
        yield from self.library.ingest(folders, emb, tok, cancel=cancel, reembed=reembed)
        self._retriever = None
        self._passages = None

    def retriever(self) -> Retriever:
        if self._retriever is None:
            emb = self.runtime.embedder()
            self.library.check_embedder(emb)
            self._retriever = Retriever(self.library, emb, self.runtime.tokenizer(), self.settings)
        return self._retriever

    # ------------------------------------------------------------------ rankings
    def causal_variant(self) -> str:
        """Which re-ranking fills the causal column: the setting, or the gate's decision."""
        m = self.settings.retrieval.default_method
        if m == "gated":
            gate = self.library.catalog.get_json("gate")
            decision = (gate or {}).get("decision", "neither")
            return {"causal": "causal", "hybrid": "hybrid"}.get(decision, "baseline")
        return m

    def compare(self, query: str, level: str | None = None, k: int | None = None) -> Comparison:
        query = query.strip()
        if not query:
            raise ValueError("the question is empty")
        r = self.retriever()
        t0 = time.perf_counter()
        ctx = r.context(query, level, k)  # type: ignore[arg-type]
        t1 = time.perf_counter()
        variant = self.causal_variant()
        ranked, diag = r.rerank(ctx, "hybrid" if variant == "baseline" else variant)
        if variant == "baseline":  # the gate said the re-ranker hurts here: show the baseline order
            ranked = dataclasses.replace(
                ctx.baseline,
                method="gated_off",
                explanations=ranked.explanations,
                label="Causal rerank switched off by the calibration gate",
            )
        t2 = time.perf_counter()
        ce = r.cross_encode(ctx, self.runtime.scorer()) if self.runtime.has_cross_encoder() else None
        t3 = time.perf_counter()
        timings = dict(ctx.timings)
        timings.update({"baseline_total": t1 - t0, "rerank": t2 - t1, "cross_encoder": t3 - t2})
        return Comparison(
            query,
            ctx.level,
            ctx.baseline,
            ranked,
            ce,
            diag,
            ctx.tau,
            ctx.tau_source,
            variant,
            self.library.catalog.get_json("gate"),
            timings,
        )

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
        """Make the generator's model file ready (join + verify once), with progress."""
        yield from self.runtime.prepare_generator(cancel)

    def translate_sources(
        self, sources: Sequence[Hit], target: Lang, cancel: CancelToken | None = None, *, whole_chunks: bool = True
    ) -> tuple[Hit, ...]:
        """Sources in another language than the question, translated once and cached (issue 5).

        ``whole_chunks``: the hits are whole chunks (cached in the library by chunk id);
        otherwise they are answer passages (issue 12: only the passage is translated, cached
        in memory by its text).
        """
        if not self.settings.generation.translate or target == "other":
            return tuple(sources)
        gen = self.runtime.generator()
        out: list[Hit] = []
        for h in sources:
            lang = detect_lang(h.text)
            if lang in (target, "other"):
                out.append(h)
                continue
            chunk_id = None
            if whole_chunks:
                chunk_id = h.unit_id if h.level == "chunk" else self._best_chunk_id(h)
            key = (h.text, target, gen.identity)
            cached = self._passage_translations.get(key)
            if cached is None and chunk_id:
                cached = self.library.catalog.translation(chunk_id, target, gen.identity)
            if cached is None:
                msgs = prompting.build_translation_messages(h.text, lang, target)
                cached = _collect(
                    gen.stream(
                        msgs,
                        max_tokens=min(2048, gen.n_ctx // 2),
                        temperature=0.0,
                        seed=self.settings.generation.seed,
                        cancel=cancel,
                    )
                )
                if chunk_id:
                    with self.library.catalog.transaction():
                        self.library.catalog.put_translation(chunk_id, target, gen.identity, cached)
                else:
                    self._passage_translations[key] = cached
            out.append(dataclasses.replace(h, text=cached))
        return tuple(out)

    def _best_chunk_id(self, hit: Hit) -> int | None:
        for c in self.library.catalog.chunks_of(hit.doc_id):
            if c.text == hit.text:
                return c.chunk_id
        return None

    def passage_finder(self) -> PassageFinder:
        """The answer-passage finder of this library (issue 12), sharing the retriever's encoder."""
        g = self.settings.generation
        if self._passages is None or self._passages.max_passages != g.max_passages:
            r = self.retriever()
            filt = kw.build_filter(self.settings.retrieval.keyword_variant, r.tokenizer)
            self._passages = PassageFinder(self.library, r.embedder, r.tokenizer, r.idf("c"),
                                           filt.doc_stop | filt.query_stop, max_passages=g.max_passages)
        return self._passages

    def answer(
        self, query: str, ranked: RankedList, n_sources: int = 5, cancel: CancelToken | None = None,
        *, passages: bool | None = None,
    ) -> Iterator[GenEvent | Answer | Progress]:
        """Stream an answer from the top sources of ``ranked``; ends with the Answer and citations.

        With answer passages (``generation.passages``, issue 12) the model reads paragraph-sized
        windows of the top ``n_sources`` hits, each headed by what locates it, and ``[n]`` points
        at that paragraph; otherwise it reads the hits' whole chunks. Progress events say what
        the answer is doing (``passages``: windows scored; ``reading``: the prompt's tokens).
        """
        gen = self.runtime.generator()
        lang = detect_lang(query)
        g = self.settings.generation
        use_passages = g.passages if passages is None else passages
        hits: Sequence[Hit] = ranked.hits[:n_sources]
        locators: tuple[Locator, ...] | None = None
        if use_passages and hits:
            ps = self.passage_finder().find(query, hits)
            yield Progress("passages", len(ps.hits), ps.n_candidates, f"{ps.seconds:.2f}")
            if ps.hits:
                hits, locators = ps.hits, ps.locators
        sources = self.translate_sources(hits, lang, cancel, whole_chunks=locators is None)
        msgs, used = prompting.build_answer_messages(
            query, sources, lang, gen.count_tokens, gen.n_ctx, g.answer_reserve, locators
        )
        n_prompt = sum(gen.count_tokens(m.content) for m in msgs)
        yield Progress("reading", n_prompt, n_prompt, self.runtime.generator_name())
        parts: list[str] = []
        for ev in gen.stream(msgs, max_tokens=g.max_tokens, temperature=g.temperature, seed=g.seed, cancel=cancel):
            if ev.kind == GenEventKind.TOKEN:
                parts.append(ev.text)
            yield ev
        text = "".join(parts).strip()
        originals = tuple("" if s.text == h.text else h.text for s, h in zip(used, hits, strict=False))
        yield Answer(text, prompting.parse_citations(text, used), tuple(used), ranked.method,
                     locators=tuple(locators[: len(used)]) if locators is not None else (),
                     original_texts=originals)

    # ------------------------------------------------------------------ conversation (issue 12)
    def rewrite_followup(self, question: str, conversation: Conversation,
                         cancel: CancelToken | None = None, timeout_s: float | None = None) -> Rewrite:
        """The standalone form of a follow-up, by the local model; the user's words on failure.

        No previous question: the question is standalone and the model is not asked. A model
        error, a timeout (``generation.rewrite_timeout_s``) or an unusable reply gives back the
        user's question with a note. A user's cancel still raises Cancelled.
        """
        q = question.strip()
        if not q:
            raise ValueError("the question is empty")
        if not needs_rewrite(conversation):
            return Rewrite(q, q, False)
        limit = self.settings.generation.rewrite_timeout_s if timeout_s is None else timeout_s
        t0 = time.perf_counter()
        deadline = CancelToken()
        # The deadline also stops a model that is still reading the prompt (no token yet).
        timer = threading.Timer(limit, deadline.set)
        timer.daemon = True
        timer.start()
        parts: list[str] = []
        try:
            gen = self.runtime.generator()
            msgs = build_rewrite_messages(conversation, q)
            for ev in gen.stream(msgs, max_tokens=96, temperature=0.0, seed=self.settings.generation.seed,
                                 cancel=deadline):
                if cancel is not None:
                    cancel.raise_if_set()
                if ev.kind == GenEventKind.TOKEN:
                    parts.append(ev.text)
                    if "\n" in "".join(parts).strip():
                        break  # one line is all we asked for
        except Cancelled:
            if cancel is not None and cancel.is_set:
                raise
        except Exception as exc:  # no model, a server error: the user's words still work
            log.warning("follow-up rewrite failed: %s", exc)
            return Rewrite(q, q, False, f"{NOTES['failed']} ({exc})", time.perf_counter() - t0, reason="failed")
        finally:
            timer.cancel()
        took = time.perf_counter() - t0
        if deadline.is_set:
            return Rewrite(q, q, False, f"{NOTES['timeout']} (over {limit:g} s)", took, reason="timeout")
        raw = "".join(parts)
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

    def cfrag(
        self, query: str, cancel: CancelToken | None = None, on_event: Any = None, level: str | None = None
    ) -> CFResult:
        r = self.retriever()
        lvl = level or "chunk"  # CF-RAG reasons over passages, not whole files

        def retrieve(text: str, k: int) -> Sequence[Hit]:
            qv = r.embedder.embed_queries([text])[0]
            return r.baseline(qv, lvl, k, -1.0)  # type: ignore[arg-type]

        c = self.cfrag_settings()
        tuning = CFTuning(
            coh_w_embed=c.coh_w_embed,
            coh_w_query=c.coh_w_query,
            coh_w_presence=c.coh_w_presence,
            answer_same_f1=c.answer_same_f1,
            sigma_rule="median" if c.sigma_rule == "median" else "settings",
        )
        return run_cfrag(
            query,
            retrieve=retrieve,
            embedder=r.embedder,
            scorer=self.runtime.scorer(),
            generator=self.runtime.generator(),
            settings=c,
            seed=c.seed,
            cancel=cancel,
            on_event=on_event,
            tuning=tuning,
        )


def _collect(events: Iterator[GenEvent]) -> str:
    return "".join(e.text for e in events if e.kind == GenEventKind.TOKEN).strip()
