"""RagService: the facade the UI and the CLI call (DESIGN.md, layer ``app``).

One service per open library. It owns the Runtime (models) and the Library
(catalog + indexes), and exposes typed operations: ingest, compare, answer,
CF-RAG, calibrate. Long operations are generators of events that poll a
CancelToken, so the UI's one worker bridge can run any of them.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_desktop.app.library import CATALOG_FILE, IngestReport, Library
from rag_desktop.app.retrieval import QueryContext, Retriever
from rag_desktop.app.runtime import Runtime
from rag_desktop.core import prompting
from rag_desktop.core.causal import CausalDiagnostics
from rag_desktop.core.cfrag import CFTuning, run_cfrag
from rag_desktop.core.cfrag_types import CFResult, to_jsonable
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.settings import CFRagSettings, Settings
from rag_desktop.core.types import (
    Answer,
    CancelToken,
    GenEvent,
    GenEventKind,
    Hit,
    Lang,
    OcrLine,
    Progress,
    RankedList,
)

log = logging.getLogger(__name__)


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

    # ------------------------------------------------------------------ library
    def ingest(
        self, folders: Sequence[Path], cancel: CancelToken | None = None, reembed: bool = False
    ) -> Iterator[Progress | IngestReport]:
        emb = self.runtime.embedder()
        tok = self.runtime.tokenizer()
        ocr = self.runtime.ocr() if self.settings.ingest.ocr else None
        yield from self.library.ingest(folders, emb, tok, cancel=cancel, reembed=reembed, ocr=ocr)
        self._retriever = None

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
        self, sources: Sequence[Hit], target: Lang, cancel: CancelToken | None = None
    ) -> tuple[Hit, ...]:
        """Chunks in another language than the question, translated once and cached (issue 5)."""
        if not self.settings.generation.translate or target == "other":
            return tuple(sources)
        gen = self.runtime.generator()
        out: list[Hit] = []
        for h in sources:
            lang = detect_lang(h.text)
            if lang in (target, "other"):
                out.append(h)
                continue
            chunk_id = h.unit_id if h.level == "chunk" else self._best_chunk_id(h)
            cached = self.library.catalog.translation(chunk_id, target, gen.identity) if chunk_id else None
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
            out.append(dataclasses.replace(h, text=cached))
        return tuple(out)

    def _best_chunk_id(self, hit: Hit) -> int | None:
        for c in self.library.catalog.chunks_of(hit.doc_id):
            if c.text == hit.text:
                return c.chunk_id
        return None

    def answer(
        self, query: str, ranked: RankedList, n_sources: int = 5, cancel: CancelToken | None = None
    ) -> Iterator[GenEvent | Answer]:
        """Stream an answer from the top sources of ``ranked``; ends with the Answer and citations."""
        gen = self.runtime.generator()
        lang = detect_lang(query)
        sources = self.translate_sources(ranked.hits[:n_sources], lang, cancel)
        g = self.settings.generation
        msgs, used = prompting.build_answer_messages(
            query, sources, lang, gen.count_tokens, gen.n_ctx, g.answer_reserve
        )
        parts: list[str] = []
        for ev in gen.stream(msgs, max_tokens=g.max_tokens, temperature=g.temperature, seed=g.seed, cancel=cancel):
            if ev.kind == GenEventKind.TOKEN:
                parts.append(ev.text)
            yield ev
        text = "".join(parts).strip()
        yield Answer(text, prompting.parse_citations(text, used), tuple(used), ranked.method)

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
