"""kw(·): weighted keyword sets for the causal reranker (paper 000 §3.1, §4.4).

The paper instantiates kw(·) as "jieba segmentation + TF–IDF weights for Chinese
and a word tokenizer + TF–IDF for English (top-15 terms per document, top-10 per
query)". Segmentation arrives through the :class:`~rag_desktop.core.protocols.Tokenizer`
protocol; everything after it lives here and is pure.

Two variants (``settings.retrieval.keyword_variant``):

``"plain"``
    The paper: generic stopwords (``stopwords/zh.txt``, ``stopwords/en.txt``),
    TF–IDF, top-n. Kept so the paper's method can be compared with ours.
``"improved"``
    The fixes: question filler dropped from queries
    (``query_zh.txt``/``query_en.txt``), common verbs dropped everywhere
    (``verbs_zh.txt``/``verbs_en.txt``), pure numbers and number+unit tokens
    (``10g``, ``2024``, ``3.5%``, ``2024年``) dropped. Stemming and the corpus
    user dictionary are the tokenizer's side of the variant (see below).

Normalisation contract (what a Tokenizer must return, and what core adds)
-------------------------------------------------------------------------
* A tokenizer returns *terms*: the key under which two surface forms must match.
  Case folding and, in the improved variant, English stemming are the tokenizer's
  job (``request``/``requests`` → one term). Core never stems.
* Core applies :func:`normalise_term` to every token anyway (NFKC, strip,
  casefold). It is idempotent, so a tokenizer that already did it loses nothing
  and one that forgot to casefold still matches.
* Stopword lists are written as plain words. :func:`build_filter` passes every
  stopword through the same tokenizer once, so a stemming tokenizer filters
  ``using`` and ``used`` through their stem; a stopword that the tokenizer splits
  into several tokens is matched only as written (adding its pieces could remove
  unrelated content words).
* Tokens shorter than two characters are dropped in both variants (as
  ``jieba.analyse`` does). The improved variant repairs over-split CJK words
  (久咳 → 久/咳) with a user dictionary found by :func:`discover_cjk_terms` and
  handed to ``Tokenizer.add_words`` before ingest, rather than by keeping single
  characters, most of which are fragments.

IDF (:class:`IdfTable`) is learned from the library's own corpus and updated
incrementally as documents come and go. The "document" for IDF is whatever unit
keywords are extracted from (a chunk, at chunk level).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from rag_desktop.core.protocols import Tokenizer
from rag_desktop.core.text import han_runs
from rag_desktop.core.types import Keyword, Lang

KeywordVariant = Literal["improved", "plain"]  # the default first: the Settings dialog lists them so
VARIANTS: tuple[KeywordVariant, ...] = ("plain", "improved")

# Paper 000 §4.4: top-15 terms per document, top-10 per query.
DOC_TOP_N = 15
QUERY_TOP_N = 10

PriorIdf = Callable[[str], float | None]

# --------------------------------------------------------------------------- stopwords

_STOPWORD_FILES = ("zh", "en", "query_zh", "query_en", "verbs_zh", "verbs_en")


@cache
def load_stopwords(name: str) -> frozenset[str]:
    """The words of ``rag_desktop/core/stopwords/<name>.txt``, normalised.

    One word per line; blank lines and lines starting with ``#`` are ignored.
    """
    if name not in _STOPWORD_FILES:
        raise ValueError(f"unknown stopword list {name!r}; known: {', '.join(_STOPWORD_FILES)}")
    path = resources.files("rag_desktop.core").joinpath("stopwords", f"{name}.txt")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:  # a broken install (package data not shipped)
        raise FileNotFoundError(f"stopword list missing from the installation: stopwords/{name}.txt") from exc
    words = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words.add(normalise_term(line))
    return frozenset(words)


def normalise_term(token: str) -> str:
    """The core half of the normalisation contract: NFKC, trimmed, casefolded.

    NFKC folds full-width forms (``１０ｇ`` → ``10g``, ``ＡＰＩ`` → ``API``) that
    PDF text layers produce in Chinese documents.
    """
    return unicodedata.normalize("NFKC", token).strip().casefold()


@dataclass(frozen=True)
class KeywordFilter:
    """Which terms kw(·) may return, for one variant and one tokenizer.

    ``doc_stop`` applies to documents and queries, ``query_stop`` additionally
    to queries. Build it with :func:`build_filter`.
    """

    variant: KeywordVariant
    doc_stop: frozenset[str]
    query_stop: frozenset[str]
    drop_numbers: bool
    min_len: int = 2


def build_filter(variant: KeywordVariant, tokenizer: Tokenizer | None = None) -> KeywordFilter:
    """The stopword sets of ``variant``, passed through ``tokenizer`` if given.

    Each stopword is kept as written; if the tokenizer turns it into exactly one
    token (e.g. its stem), that token is added too (see the module docstring).
    """
    if variant not in VARIANTS:
        raise ValueError(f"keyword variant must be one of {VARIANTS}, got {variant!r}")
    doc_lists = ["zh", "en"]
    query_lists: list[str] = []
    if variant == "improved":
        doc_lists += ["verbs_zh", "verbs_en"]
        query_lists += ["query_zh", "query_en"]

    def expand(names: Sequence[str]) -> frozenset[str]:
        out: set[str] = set()
        for name in names:
            lang: Lang = "zh" if name.endswith("zh") else "en"
            for word in load_stopwords(name):
                out.add(word)
                if tokenizer is not None:
                    toks = [normalise_term(t) for t in tokenizer.tokenize(word, lang)]
                    toks = [t for t in toks if t]
                    if len(toks) == 1:
                        out.add(toks[0])
        return frozenset(out)

    return KeywordFilter(
        variant=variant,
        doc_stop=expand(doc_lists),
        query_stop=expand(query_lists),
        drop_numbers=variant == "improved",
    )


# A number, optionally with grouping/decimals, sign, percent or a short unit:
# 10g, 6g, 2024, 3.5%, 1,000, 50mg, 2024年, 3月, 10克, 5‰, 12.5kg. Letter-first tokens
# (h100, mp3, bge-m3's "m3") are names, not quantities, and are kept.
_NUMBER_UNIT = re.compile(
    r"^[+\-±~]?\d+(?:[.,:/]\d+)*"
    r"(?:%|‰|°c?|[a-zµμ]{1,3}|[年月日号时分秒克斤两升次个岁天周元万亿千百倍例名位份件年代]{1,2})?$"
)


def is_number_or_unit(term: str) -> bool:
    """True for pure numbers and number+unit tokens (the improved variant drops them)."""
    return bool(_NUMBER_UNIT.match(term))


def _has_word_char(term: str) -> bool:
    return any(ch.isalnum() for ch in term)


def filter_terms(tokens: Iterable[str], kfilter: KeywordFilter, *, query: bool) -> list[str]:
    """Normalised tokens that may be keywords, in order, duplicates kept (they are TF)."""
    out: list[str] = []
    for raw in tokens:
        t = normalise_term(raw)
        if len(t) < kfilter.min_len or not _has_word_char(t):
            continue
        if t in kfilter.doc_stop or (query and t in kfilter.query_stop):
            continue
        if kfilter.drop_numbers and is_number_or_unit(t):
            continue
        out.append(t)
    return out


def document_terms(tokens: Iterable[str], kfilter: KeywordFilter) -> frozenset[str]:
    """The term set of one document, as :meth:`IdfTable.add_document` wants it."""
    return frozenset(filter_terms(tokens, kfilter, query=False))


# --------------------------------------------------------------------------- IDF


@dataclass
class IdfTable:
    """Document frequencies learned from the library's own corpus.

    Mutable on purpose (unlike the rest of core): a library adds and removes
    documents one at a time, and copying a vocabulary-sized dict per document
    would make ingest quadratic. Persist it with :meth:`to_dict`.

    ``idf(t) = ln((N + 1) / (df(t) + 1)) + 1`` (the smoothed form, always ≥ 1).
    """

    n_docs: int = 0
    df: dict[str, int] = field(default_factory=dict)

    FORMAT_VERSION = 1

    def add_document(self, terms: Iterable[str]) -> None:
        """Count one document's terms (each term once, however often it occurs)."""
        for t in set(terms):
            self.df[t] = self.df.get(t, 0) + 1
        self.n_docs += 1

    def remove_document(self, terms: Iterable[str]) -> None:
        """Undo :meth:`add_document` for the same term set.

        Raises ValueError (and changes nothing) if the table never counted these
        terms, which means the caller's bookkeeping is out of step with it.
        """
        ts = set(terms)
        if self.n_docs <= 0:
            raise ValueError("IdfTable.remove_document: the table holds no documents")
        missing = sorted(t for t in ts if self.df.get(t, 0) <= 0)
        if missing:
            raise ValueError(f"IdfTable.remove_document: terms never counted: {missing[:5]}")
        for t in ts:
            left = self.df[t] - 1
            if left:
                self.df[t] = left
            else:
                del self.df[t]
        self.n_docs -= 1

    @property
    def max_idf(self) -> float:
        """The largest idf this table can give: that of a term in no document."""
        return math.log(self.n_docs + 1) + 1.0

    def idf(self, term: str, prior: PriorIdf | None = None) -> float:
        """Smoothed idf of a seen term; for an unseen one the prior, else :attr:`max_idf`.

        The prior (jieba's table) is on another corpus's scale (values up to ~14
        while a 1,000-document library tops out at ~7.9), so once the library
        has documents it is clipped to ``[1, max_idf]``: an unseen term may tie
        the rarest seen term but not outrank every term on scale alone. With an
        empty library the prior is all there is and is used as given.
        """
        df = self.df.get(term)
        if df:
            return math.log((self.n_docs + 1) / (df + 1)) + 1.0
        p = prior(term) if prior is not None else None
        if p is None or not math.isfinite(p):
            return self.max_idf
        if self.n_docs == 0:
            return float(p)
        return min(max(float(p), 1.0), self.max_idf)

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.FORMAT_VERSION, "n_docs": self.n_docs, "df": dict(self.df)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IdfTable:
        """Inverse of :meth:`to_dict`; bad input raises ValueError naming the key."""
        if not isinstance(data, Mapping):
            raise ValueError("IdfTable: expected a mapping")
        version = data.get("version")
        if version != cls.FORMAT_VERSION:
            raise ValueError(f"IdfTable key 'version': expected {cls.FORMAT_VERSION}, got {version!r}")
        n = data.get("n_docs")
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"IdfTable key 'n_docs': expected a non-negative int, got {n!r}")
        df = data.get("df")
        if not isinstance(df, Mapping):
            raise ValueError("IdfTable key 'df': expected a mapping term -> count")
        clean: dict[str, int] = {}
        for t, c in df.items():
            if not isinstance(t, str) or not isinstance(c, int) or isinstance(c, bool) or not 1 <= c <= n:
                raise ValueError(f"IdfTable key 'df': bad entry {t!r}: {c!r} (count must be in 1..n_docs)")
            clean[t] = c
        return cls(n_docs=n, df=clean)


# --------------------------------------------------------------------------- kw(·)


def _top(weights: Mapping[str, float], top_n: int | None) -> tuple[Keyword, ...]:
    # Highest weight first; ties broken by the term so the result is deterministic.
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    if top_n is not None:
        ranked = ranked[:top_n]
    return tuple(Keyword(t, w) for t, w in ranked)


def tfidf_keywords(
    terms: Sequence[str],
    idf: IdfTable,
    *,
    top_n: int | None,
    prior: PriorIdf | None = None,
) -> tuple[Keyword, ...]:
    """TF–IDF over already filtered terms: ``(count / len(terms)) · idf``.

    TF is normalised by the text's length (as ``jieba.analyse`` does) so a long
    chunk's weights stay comparable to a short one's. A term that occurs several
    times is one entry (paper §3.1: K sets are proper sets).
    """
    if top_n is not None and top_n < 1:
        raise ValueError(f"top_n must be >= 1 or None, got {top_n}")
    if not terms:
        return ()
    counts = Counter(terms)
    total = len(terms)
    weights = {t: (c / total) * idf.idf(t, prior) for t, c in counts.items()}
    return _top(weights, top_n)


def extract_keywords(
    tokens: Iterable[str],
    idf: IdfTable,
    kfilter: KeywordFilter,
    *,
    query: bool,
    top_n: int | None = None,
    prior: PriorIdf | None = None,
) -> tuple[Keyword, ...]:
    """kw(·) over a token stream: filter, TF–IDF, top-n (15 for documents, 10 for queries)."""
    n = top_n if top_n is not None else (QUERY_TOP_N if query else DOC_TOP_N)
    return tfidf_keywords(filter_terms(tokens, kfilter, query=query), idf, top_n=n, prior=prior)


def kw(
    text: str,
    lang: Lang,
    tokenizer: Tokenizer,
    idf: IdfTable,
    kfilter: KeywordFilter,
    *,
    query: bool,
    top_n: int | None = None,
) -> tuple[Keyword, ...]:
    """kw(text) of paper 000 §3.1 in one call: tokenize, filter, TF–IDF, top-n.

    The tokenizer's ``prior_idf`` supplies idf for terms the library has not seen.
    """
    return extract_keywords(
        tokenizer.tokenize(text, lang), idf, kfilter, query=query, top_n=top_n, prior=tokenizer.prior_idf
    )


def merge_keywords(sets: Iterable[Iterable[Keyword]], top_n: int | None = None) -> tuple[Keyword, ...]:
    """Collapse duplicate terms across keyword sets, summing weights (paper §3.1).

    Used to build a document's K_d from its chunks' sets at document level.
    """
    acc: dict[str, float] = {}
    for ks in sets:
        for k in ks:
            acc[k.term] = acc.get(k.term, 0.0) + k.weight
    return _top(acc, top_n)


# --------------------------------------------------------------------------- user dictionary



# Characters that are almost always function words on their own; a candidate that
# starts or ends with one is a phrase fragment ("咳的", "的治疗"), not a term.
_EDGE_FUNCTION_CHARS = frozenset(
    "的了着过是在和与及或等对为把被就都也而且之其这那个们吗呢吧啊从向于以将让给由所很更最不没有"
)


def cjk_runs(text: str) -> list[str]:
    """Maximal runs of Han characters in ``text`` (after NFKC)."""
    return han_runs(unicodedata.normalize("NFKC", text))


def _entropy(counter: Counter[str], boundary: int) -> float:
    # Each run boundary is counted as its own distinct neighbour, so a word that
    # often starts a sentence is not penalised for "always having the same left".
    total = sum(counter.values()) + boundary
    if total == 0:
        return 0.0
    h = -sum((c / total) * math.log(c / total) for c in counter.values())
    h += boundary * (-(1 / total) * math.log(1 / total))
    return h


def discover_cjk_terms(
    texts: Iterable[str],
    min_count: int = 5,
    max_len: int = 4,
    *,
    segment: Callable[[str], Sequence[str]] | None = None,
    min_cohesion: float = 20.0,
    min_entropy: float = 0.8,
) -> list[str]:
    """Frequent 2..max_len-character Han sequences that behave like words.

    The classic unsupervised new-word test (counts, internal cohesion, free
    neighbours on both sides), used to build the improved variant's user
    dictionary (jieba splits 久咳, 大模型, 预训练):

    * frequency: at least ``min_count`` occurrences;
    * cohesion: for every split ``w = a + b``,
      ``count(w) · T / (count(a) · count(b)) ≥ min_cohesion``, T = number of Han
      characters (how many times more often than chance the parts co-occur);
    * freedom: left and right neighbour entropy (nats) ≥ ``min_entropy``, which
      rejects fragments of longer words (预训 is always followed by 练);
    * no function character (的, 了, 在, ...) at either end.

    If ``segment`` is given (e.g. the tokenizer's CJK segmenter), terms it already
    keeps whole are dropped: only what the segmenter splits needs teaching.
    Returns terms by decreasing count, then text. Memory is O(distinct n-grams):
    feed a sample of the library, not gigabytes.
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if max_len < 2:
        raise ValueError(f"max_len must be >= 2, got {max_len}")
    runs = [r for t in texts for r in cjk_runs(t)]
    grams: Counter[str] = Counter()
    total_chars = 0
    for run in runs:
        total_chars += len(run)
        for n in range(1, max_len + 1):
            for i in range(len(run) - n + 1):
                grams[run[i : i + n]] += 1
    candidates = {
        w
        for w, c in grams.items()
        if len(w) >= 2
        and c >= min_count
        and w[0] not in _EDGE_FUNCTION_CHARS
        and w[-1] not in _EDGE_FUNCTION_CHARS
    }
    cohesive = set()
    for w in candidates:
        ratio = min(grams[w] * total_chars / (grams[w[:i]] * grams[w[i:]]) for i in range(1, len(w)))
        if ratio >= min_cohesion:
            cohesive.add(w)
    if not cohesive:
        return []
    left: dict[str, Counter[str]] = {w: Counter() for w in cohesive}
    right: dict[str, Counter[str]] = {w: Counter() for w in cohesive}
    left_edge: Counter[str] = Counter()
    right_edge: Counter[str] = Counter()
    for run in runs:
        for n in range(2, max_len + 1):
            for i in range(len(run) - n + 1):
                w = run[i : i + n]
                if w not in left:
                    continue
                if i > 0:
                    left[w][run[i - 1]] += 1
                else:
                    left_edge[w] += 1
                if i + n < len(run):
                    right[w][run[i + n]] += 1
                else:
                    right_edge[w] += 1
    out = []
    for w in cohesive:
        free = min(_entropy(left[w], left_edge[w]), _entropy(right[w], right_edge[w]))
        if free < min_entropy:
            continue
        if segment is not None and len([p for p in segment(w) if p.strip()]) <= 1:
            continue
        out.append(w)
    out.sort(key=lambda w: (-grams[w], w))
    return out
