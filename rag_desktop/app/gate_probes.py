"""The automatic gate's probes (app.auto_gate): which questions and documents a run asks about
(``make_plan``) and how a document's probe is phrased as people ask (``title_question``,
``topic_words``, ``keyword_topic``, ``write_topic_probe``, ``write_probe``). No body is ever shown to
the model: a question written from a passage is answered by that passage in its own words.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Iterator, Sequence

from rag_desktop.app.catalog import Catalog
from rag_desktop.app.question_log import question_log, user_labels
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.protocols import Generator
from rag_desktop.core.replies import clean_question
from rag_desktop.core.text import ZH_QUESTION_WORDS, opens_english_question
from rag_desktop.core.types import CancelToken, ChatMessage, GenEventKind, Keyword

_PROBE_PROMPT = {
    "en": "Here are the title and some headings of a document:\n\n{heads}\n\n"
    "Write one short question (at most 12 words) that a person would type into a search box to learn about "
    "this document's subject, using the words of the title. Ask about the subject itself (what, how or why), "
    "not about the document, its author or an event it announces. Reply with the question only.",
    "zh": "下面是一份文档的标题和部分小标题：\n\n{heads}\n\n"
    "写出一个人会在搜索框里输入的简短问题（不超过25个字），问这份文档的主题本身（是什么、怎么做、为什么），"
    "使用标题里的词语；不要问这份文档、它的作者或它通知的活动。只回复问题本身。",
}
# A subject's words only (topic_words), no title: the question cannot be about one document. It asks how,
# why or what was found, not "what is X" (docs/evaluation.md §1.2.6): a document named X answers "what is X"
# by its name alone — the baseline's own title match, right by construction — so such a probe cannot tell
# the regimes apart; a procedure, a mechanism or a finding is what an answering document holds and a
# document that only repeats X does not.
_TOPIC_PROMPT = {
    "en": "Write one short question (at most 12 words) that a person would type into a search box to learn "
    "about: {words}\n\nAsk how it works, how it is done, why, or what it found; do not ask what it is. "
    "Use these words. Reply with the question only.",
    "zh": "写出一个人想了解“{words}”时会在搜索框里输入的简短问题（不超过25个字）：问怎么做、如何起作用、为什么或"
    "有什么结论，不要问“是什么”；使用这些词语。只回复问题本身。",
}

def heading_lines(text: str, title: str, n: int) -> list[str]:
    """Short, heading-like lines from the start of a document (no sentence punctuation at the end)."""
    out: list[str] = []
    for line in text.splitlines():
        s = " ".join(line.split())
        if not (3 <= len(s) <= 60) or s == title or s[-1] in ".。!?！？;；:：,，":
            continue
        if s not in out:
            out.append(s)
        if len(out) >= n:
            break
    return out


def document_term_counts(catalog: Catalog) -> dict[int, dict[str, int]]:
    """Per document, its stored chunk term counts summed (no model, no encoder)."""
    counts: dict[int, dict[str, int]] = {}
    for _cid, did, c in catalog.iter_chunk_term_counts(by_doc=True):
        agg = counts.setdefault(did, {})
        for t, n in c.items():
            agg[t] = agg.get(t, 0) + n
    return counts


def document_frequency(counts: dict[int, dict[str, int]]) -> dict[str, int]:
    """How many documents hold each term."""
    df: dict[str, int] = {}
    for c in counts.values():
        for t in c:
            df[t] = df.get(t, 0) + 1
    return df


# Words that name a place in a document or a file, not what it is about: a title made of these and of numbers
# (an article number, "Untitled", a scan's file name) names no subject, and shown only such a title a small
# model has nothing to ask and reads the prompt back (docs/evaluation.md §1.2.6).
_PLACE_WORDS = frozenset({"article", "section", "chapter", "part", "page", "clause", "appendix", "annex", "untitled",
                          "document", "doc", "file", "scan", "image", "copy", "draft", "version", "new"})
_NUMERAL_CHARS = frozenset("0123456789第条款章节项编卷页零〇一二两三四五六七八九十百千万")


def is_subject_word(word: str) -> bool:
    """False for a number (in digits or Chinese numerals) or a place word (Article, page, scan): such a
    word names where a text stands, not what it is about."""
    w = word.casefold().strip()
    return bool(w) and w not in _PLACE_WORDS and not all(ch in _NUMERAL_CHARS for ch in w)


def topic_words(title: str, title_keywords: Sequence[Keyword], df: dict[str, int], surface: Callable[[str], str],
                n: int) -> list[str]:
    """The title's keywords that at least one *other* document holds (df ≥ 2), as the words people
    write (``surface``: a stem such as "seri" is a key, not a word), the first n in the title's order.

    These are the words a person names a shared subject by, and the words any document that
    competes for that subject repeats; the title's own words that no other document holds
    (a notice's date, a company's name) would only lead back to the one document. The title's
    order, not the keyword weight: a title names its subject first, and the rarer words after it
    (an event, an announcement) weigh more.
    """
    low = title.casefold()
    words = [(at if (at := low.find(w.casefold())) >= 0 else len(low), w)
             for w in _shared_subjects(title_keywords, df, surface)]
    return [w for _i, w in sorted(words)[:n]]


def _shared_subjects(keywords: Sequence[Keyword], df: dict[str, int], surface: Callable[[str], str]) -> Iterator[str]:
    """The weighted ``keywords`` that another document also holds (df ≥ 2) and that are subject words
    (an article number is shared by many articles and is no subject), as surface words, each once, in order."""
    seen: set[str] = set()
    for k in keywords:
        if k.weight <= 0 or df.get(k.term, 0) < 2:
            continue
        w = surface(k.term)
        if is_subject_word(w) and w not in seen:
            seen.add(w)
            yield w


def keyword_topic(doc_keywords: Sequence[Keyword], df: dict[str, int], surface: Callable[[str], str],
                  n: int) -> list[str]:
    """The subject of a document whose title names none, from its own keyword set K_d (stored at
    ingest, strongest first): the first n subject words that another document also holds (df ≥ 2),
    as the words people write.

    The same idea as ``topic_words`` — a subject several documents compete for, in words no one
    document wrote as a question — read off the body's keywords because the title has none (a
    number). Not a question written from the passage: the model is shown the words only.
    """
    return list(itertools.islice(_shared_subjects(doc_keywords, df, surface), n))


def stuffing_scores(catalog: Catalog, title_terms: Callable[[str], Sequence[Keyword]],
                    counts: dict[int, dict[str, int]] | None = None) -> dict[int, float]:
    """The stuffing signal per document: the share of its own text made of its title's words.

    s(D) = Σ_{t ∈ kw(title)} (n_t(D) − 1)⁺ / Σ_t n_t(D), n_t = the stored chunk term counts; the
    −1 discounts the title line itself (the chunk text starts with it). Keyword stuffing *is* a
    body that repeats the topic's words — a notice that names the topic again and again, an
    injected passage that restates the question — and such a document's title is what a person
    would ask; a document that answers spends its words on the answer. No model, no encoder.
    ``counts``: ``document_term_counts(catalog)`` when the caller has it already (a run needs it twice).
    """
    counts = document_term_counts(catalog) if counts is None else counts
    scores: dict[int, float] = {}
    for d in catalog.documents():
        c = counts.get(d.doc_id, {})
        total = sum(c.values())
        terms = {k.term for k in title_terms(d.title) if k.weight > 0}
        scores[d.doc_id] = sum(max(c.get(t, 0) - 1, 0) for t in terms) / total if total else 0.0
    return scores


def make_plan(catalog: Catalog, n: int, seed: int,
              title_terms: Callable[[str], Sequence[Keyword]] | None = None,
              counts: Callable[[], dict[int, dict[str, int]]] | None = None) -> list[int | str]:
    """The probes: the person's most recent questions (str, up to half), then documents (doc id)
    whose titles the model turns into questions, one per distinct title. When at least half the
    plan's questions carry the person's labels, the plan is those questions only.

    Half the documents (rounded up) are those with the strongest stuffing signal
    (``stuffing_scores``): people ask about a topic in its title's words, and where other
    documents repeat those words is where a re-ranker can help or hurt, so a probe must meet
    those places if the library has them. The other half is a seeded random sample of the rest,
    so a library without stuffing is represented as it is (and its high-signal documents are
    then ordinary ones: titles whose words other documents mention). Without ``title_terms``
    all are random. Stable: ties and the sample follow the content hash. ``counts``: where to get
    ``document_term_counts`` (the run shares one with its subject probes; read only if needed).
    """
    recent = question_log(catalog)[1]
    # Questions the person labelled (an answer cited, a document opened: log_label) first, up to all
    # n — they need no judge, the step that fails (docs/evaluation.md §1.2.1); then the most recent
    # unlabelled ones, judged, while the asked questions are fewer than half the plan.
    labelled = set(user_labels(catalog))
    with_labels = [q for q in recent if q in labelled][-n:] if n >= 1 else []
    room = max(n // 2 - len(with_labels), 0)
    without = [q for q in recent if q not in labelled][-room:] if room else []
    asked = with_labels + without
    if n >= 1 and len(with_labels) >= (n + 1) // 2:
        # Enough of the person's own labels: the plan is theirs alone. A judged title probe adds
        # the step that failed on every set measured (docs/evaluation.md §1.2.1) and model calls;
        # on the stuffed diagnostic set dropping them did not change the decision (§1.2.2), so
        # this is our choice for cost and clarity, not a measured gain. The bootstrap's
        # reliability reflects the smaller count.
        return list(with_labels)
    docs, seen = [], set()
    for d in sorted(catalog.documents(), key=lambda d: d.sha256):
        key = " ".join(d.title.split()).lower()
        if key not in seen:  # documents sharing a title would give the same probe
            seen.add(key)
            docs.append(d)
    k = min(n - len(asked), len(docs))
    picked: list[int] = []
    if title_terms is not None and k > 0:
        sc = stuffing_scores(catalog, title_terms, counts() if counts is not None else None)
        # Titles that ask a question first: it is the library's own record of a question people ask
        # (an FAQ entry, a stuffed notice headed by the question, a poisoned passage opening with its
        # target question), taken verbatim as the probe (title_question); then the strongest signal.
        asks = {d.doc_id for d in docs if title_question(d.title)}
        by_signal = sorted(docs, key=lambda d: (d.doc_id not in asks, -sc.get(d.doc_id, 0.0)))  # stable on ties
        picked = [d.doc_id for d in by_signal[: (k + 1) // 2] if d.doc_id in asks or sc.get(d.doc_id, 0.0) > 0]
    rest = [d for d in docs if d.doc_id not in picked]
    rng = random.Random(seed)
    picked += [d.doc_id for d in rng.sample(rest, k=k - len(picked))]
    return [*asked, *picked]


def complete(gen: Generator, prompt: str, max_tokens: int, seed: int, cancel: CancelToken | None) -> str:
    return "".join(
        e.text
        for e in gen.stream([ChatMessage("user", prompt)], max_tokens=max_tokens, temperature=0.0, seed=seed,
                            cancel=cancel)
        if e.kind == GenEventKind.TOKEN
    ).strip()


def write_probe(gen: Generator, title: str, heads: Sequence[str], seed: int,
                cancel: CancelToken | None = None) -> str:
    lang = "zh" if detect_lang(title + " " + " ".join(heads)) == "zh" else "en"
    lines = "\n".join([title, *heads])
    q = clean_question(complete(gen, _PROBE_PROMPT[lang].format(heads=lines), 32, seed, cancel))
    # A silent or degenerate reply (one word, "what?"): the title is what a person would type.
    return q if _substantial(q) and not _reads_prompt(q, _PROBE_PROMPT[lang]) else title


# The instruction's own words: a "question" holding them is the prompt read back (what a small model does
# when shown a title with nothing to ask about), not a question about the library.
_PROMPT_WORDS = ("search box", "搜索框")


def _reads_prompt(question: str, template: str) -> bool:
    """Whether ``question`` is the instruction read back: it names the search box, or it is a piece of
    the prompt's own wording (one of the question forms the prompt lists)."""
    low = question.casefold()
    core = question.strip().rstrip("?？").strip()
    return any(w in low for w in _PROMPT_WORDS) or (bool(core) and core.casefold() in template.casefold())


# A Chinese title asks when it holds one of core.text's ZH_QUESTION_WORDS (the strict list: a title is no
# question until it asks, and 谁 or 几 also stand in names and in 几个 "a few"); an English one when it
# opens like a question (core.text.opens_english_question).


def title_question(title: str) -> str:
    """The question a title asks, verbatim, or "".

    A title that is a question, or opens with one, is the question people type: an FAQ entry, a
    keyword-stuffed notice headed by the question, a poisoned passage that opens with the question
    it targets. Taken as it is, with no model call, it cannot be garbled (measured, docs/evaluation.md
    §1.2.5: rewritten from its shared words, a multi-hop question lost its second hop). A clause
    ending in a question mark counts; a whole title without one counts when it opens (en) or holds
    (zh) an interrogative. A heading's clause after a colon ("X: How Y Works") is not a question.
    """
    for clause in re.split(r"(?<=[?？])", title):
        c = clause.strip()
        if c.endswith(("?", "？")) and _substantial(c):
            return c
    c = title.strip()
    if not _substantial(c):
        return ""
    if detect_lang(c) == "zh":
        return c if any(w in c for w in ZH_QUESTION_WORDS) else ""
    return c if opens_english_question(c) else ""


def write_topic_probe(gen: Generator, words: Sequence[str], fallback: str, seed: int,
                      cancel: CancelToken | None = None) -> str:
    """The question a person would ask about the subject ``words`` name; ``fallback`` (the title)
    if the reply asks nothing."""
    shown = " ".join(words)
    lang = "zh" if detect_lang(shown) == "zh" else "en"
    q = clean_question(complete(gen, _TOPIC_PROMPT[lang].format(words=shown), 32, seed, cancel))
    return q if _substantial(q) and not _reads_prompt(q, _TOPIC_PROMPT[lang]) else fallback


def _substantial(question: str) -> bool:
    """At least two words, or four CJK characters: anything shorter asks nothing a ranking could answer."""
    cjk = sum(1 for ch in question if "\u4e00" <= ch <= "\u9fff")
    words = len([w for w in question.split() if any(c.isalnum() for c in w)])
    return cjk >= 4 or (cjk == 0 and words >= 2)
