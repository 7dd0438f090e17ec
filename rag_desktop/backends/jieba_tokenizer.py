"""Tokenizer backend for kw(·): jieba for Chinese runs, a word regex (+ Snowball) for the rest.

Implements :class:`rag_desktop.core.protocols.Tokenizer`. Mixed text is split into
maximal runs of Han characters, which go to jieba, and everything else, which
goes to a Unicode word regex. So a Chinese chunk quoting "SPLADE" or "10g" and an
English chunk quoting 数据出境 are both tokenized the same way.

Variants (match ``settings.retrieval.keyword_variant``):

* ``"plain"`` — the paper: jieba segmentation, English words lower-cased.
* ``"improved"`` — additionally English words are stemmed with Snowball's English
  (Porter2) stemmer so request/requests and reason/reasoning meet; words in a
  chunk labelled ``lang="other"`` are only lower-cased (an English stemmer would
  mangle French or German). Stems are the matching key; :meth:`surface_form`
  gives back the most frequent original word for display and for embedding
  E(t) ("security" rather than "secur").

The jieba instance is private (``jieba.Tokenizer()``, not the module-level one),
so words taught with :meth:`add_words` do not leak into other users of jieba.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from rag_desktop.backends.errors import MissingDependency
from rag_desktop.core.text import HAN_CLASS
from rag_desktop.core.types import Lang

Variant = Literal["plain", "improved"]

_RUNS = re.compile(rf"([{HAN_CLASS}]+)")  # core.text's Han class, shared with the language detector
# Numbers keep their decimals, percent and unit letters together (10g, 3.5%, 1,000)
# so the improved keyword filter can drop them whole; words start with a letter and
# may contain digits (h100, qwen3). Hyphens and apostrophes split words, as the
# usual word tokenizers do (cross-border → cross, border).
_WORD = re.compile(r"\d+(?:[.,]\d+)*%?[^\W\d_]*|[^\W\d_][^\W_]*")


class JiebaTokenizer:
    """jieba + word-regex tokenizer. Cheap to construct; :meth:`load` is idempotent."""

    def __init__(self, variant: Variant = "improved", user_words: Sequence[str] = ()) -> None:
        if variant not in ("plain", "improved"):
            raise ValueError(f"JiebaTokenizer: variant must be 'plain' or 'improved', got {variant!r}")
        self.variant: Variant = variant
        self._pending: list[str] = [w for w in user_words if w.strip()]
        self._jieba: Any = None
        self._stemmer: Any = None
        self._idf: dict[str, float] | None = None
        self._surfaces: dict[str, Counter[str]] = {}
        # word → Snowball stem. Stemming is pure and ~70 µs a word in Python; a person's
        # questions and a library's text repeat their words, so each is stemmed once
        # (bounded by the vocabulary seen: ~100 bytes a word).
        self._stems: dict[str, str] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    def load(self) -> None:
        with self._lock:
            if self._jieba is not None:
                return
            try:
                import jieba
            except ImportError as exc:
                raise MissingDependency("jieba", "Chinese keyword extraction", "jieba") from exc
            if self.variant == "improved":
                try:
                    import snowballstemmer
                except ImportError as exc:
                    raise MissingDependency(
                        "snowballstemmer", "English stemming for keywords", "snowballstemmer"
                    ) from exc
                self._stemmer = snowballstemmer.stemmer("english")
            # jieba logs "Building prefix dict..." at INFO on its own logger.
            logging.getLogger("jieba").setLevel(logging.WARNING)
            tk = jieba.Tokenizer()
            tk.initialize()
            for w in self._pending:
                tk.add_word(w)
            self._pending.clear()
            self._jieba = tk

    # ------------------------------------------------------------------ Tokenizer protocol

    def tokenize(self, text: str, lang: Lang) -> list[str]:
        """Terms of ``text`` in order: jieba words for Han runs, normalised words elsewhere.

        Output tokens are NFKC-normalised and lower-cased (and stemmed, see the module
        docstring); punctuation and whitespace are dropped. Stopwords are *not*
        removed here: that is kw(·)'s job in core.
        """
        if self._jieba is None:
            self.load()
        text = unicodedata.normalize("NFKC", text)
        stem = self._stemmer is not None and lang != "other"
        out: list[str] = []
        for i, part in enumerate(_RUNS.split(text)):
            if not part:
                continue
            if i % 2 == 1:  # a Han run (split() puts captured groups at odd indices)
                out.extend(w for w in self._jieba.cut(part) if w.strip())
            else:
                for m in _WORD.finditer(part):
                    out.append(self._normalise_word(m.group(0), stem))
        return out

    def prior_idf(self, term: str) -> float | None:
        """jieba's shipped IDF for ``term`` (its analyse/idf.txt), or None if absent."""
        if self._idf is None:
            self._idf = _load_jieba_idf()
        return self._idf.get(term)

    def add_words(self, words: Sequence[str]) -> None:
        """Teach the segmenter domain words (e.g. from ``keywords.discover_cjk_terms``)."""
        clean = [w.strip() for w in words if w.strip()]
        with self._lock:
            if self._jieba is None:
                self._pending.extend(clean)
                return
            for w in clean:
                self._jieba.add_word(w)

    # ------------------------------------------------------------------ extras

    def segment(self, text: str) -> list[str]:
        """jieba's raw segmentation of a Han string (for ``discover_cjk_terms(segment=...)``)."""
        if self._jieba is None:
            self.load()
        return [w for w in self._jieba.cut(text) if w.strip()]

    def word_spans(self, text: str) -> list[tuple[int, int, str, str]]:
        """(start, end, word, key) for every word of ``text``, offsets into ``text`` itself.

        The same segmentation as :meth:`tokenize`: jieba words in Han runs, the word regex
        elsewhere. ``word`` is the case-folded word, ``key`` its term as the keywords store
        it (the Snowball stem in the improved variant; the word itself for Chinese). The UI
        highlights a keyword term on whole words whose word or key equals it, so "one" never
        lights inside "alone" and a stem such as "particip" lights all of "participants".
        Unlike :meth:`tokenize` this records no surface forms (it reads display text, not the
        library) and normalises each word on its own so offsets stay those of ``text``.
        """
        if self._jieba is None:
            self.load()
        out: list[tuple[int, int, str, str]] = []
        pos = 0
        for i, part in enumerate(_RUNS.split(text)):
            if part and i % 2 == 1:
                for w, s, e in self._jieba.tokenize(part):
                    if w.strip():
                        folded = unicodedata.normalize("NFKC", w)
                        out.append((pos + s, pos + e, folded, folded))
            elif part:
                for m in _WORD.finditer(part):
                    w = unicodedata.normalize("NFKC", m.group(0)).casefold()
                    key = w
                    if self._stemmer is not None and w.isalpha() and w.isascii():
                        key = self._stems.get(w) or str(self._stemmer.stemWord(w))
                    out.append((pos + m.start(), pos + m.end(), w, key))
            pos += len(part)
        return out

    def surface_form(self, term: str) -> str:
        """The most frequent original word seen for a stemmed ``term`` (ties: shortest, then
        alphabetical), or ``term`` itself if it was never produced by stemming.

        Meant for display and for embedding E(t): Snowball stems such as "secur" are keys,
        not words.
        """
        forms = self._surfaces.get(term)
        if not forms:
            return term
        return min(forms.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))[0]

    def _normalise_word(self, word: str, stem: bool) -> str:
        w = word.casefold()
        if not stem or not w.isalpha() or not w.isascii():
            return w
        s = self._stems.get(w)
        if s is None:
            s = self._stems[w] = str(self._stemmer.stemWord(w))
        if s != w:
            self._surfaces.setdefault(s, Counter())[w] += 1
        return s


def _jieba_dir() -> Path:
    spec = importlib.util.find_spec("jieba")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency("jieba", "Chinese keyword extraction", "jieba")
    return Path(next(iter(spec.submodule_search_locations)))


def _load_jieba_idf() -> dict[str, float]:
    """Parse jieba/analyse/idf.txt ("term idf" per line) without importing jieba.analyse
    (whose import builds its own default extractor and reads the same file again)."""
    path = _jieba_dir() / "analyse" / "idf.txt"
    table: dict[str, float] = {}
    try:
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 2:
                    raise ValueError(f"{path}:{n}: expected 'term idf', got {line.strip()!r}")
                value = float(parts[1])
                if math.isfinite(value):
                    table[parts[0]] = value
    except OSError as exc:
        raise MissingDependency("jieba", "the IDF prior of keyword extraction (analyse/idf.txt)") from exc
    return table
