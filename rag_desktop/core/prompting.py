"""Answer and translation prompts, the context budget and thinking-text filtering.

Seed paper 000 §3.5 step 9 ("build the prompt from the selected documents with the
instruction template") and §4.3 (the local model also translates foreign-language chunks).
The paper gives no template text, so the templates here are our own; they live as
resources in ``rag_desktop/prompts/*.txt`` so they can be read and changed without
touching code.

Everything here is pure: token counting arrives as a ``count_tokens`` callable (the
generator's own tokenizer), so this module never imports a model library.
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Literal

from rag_desktop.core.errors import ErrorKind, RagError
from rag_desktop.core.types import ChatMessage, Hit, Lang, Locator

# --------------------------------------------------------------------------- templates

_SECTION_RE = re.compile(r"^\[(system|example_user|example_assistant|user|source)\]\s*$", re.MULTILINE)

# Placeholders each template kind must accept (checked when the file is loaded, so a
# broken template fails at start-up with the file name, not in the middle of an answer).
_ANSWER_FIELDS = {"user": ("sources", "question"), "source": ("n", "title", "page", "where", "text")}
_TRANSLATE_FIELDS = {"system": ("source_language",), "user": ("text", "source_language")}
_REWRITE_FIELDS: dict[str, tuple[str, ...]] = {"user": ("history", "question")}


class TemplateError(RagError, ValueError):
    """A prompt template file is missing a section or uses an unknown placeholder."""

    kind = ErrorKind.DATA


class PromptTooLong(RagError, ValueError):
    """The instruction and question alone do not fit in n_ctx minus the answer reserve."""

    kind = ErrorKind.PROMPT_TOO_LONG


@dataclass(frozen=True)
class PromptTemplate:
    """One template file, split into its sections (``source`` only for answer templates).

    ``example_user`` / ``example_assistant`` are an optional worked example sent verbatim
    as an earlier turn (few-shot); both or neither must be present.
    """

    name: str
    system: str
    user: str
    source: str = ""
    example_user: str = ""
    example_assistant: str = ""

    def prefix(self, **system_values: object) -> tuple[ChatMessage, ...]:
        """The messages before the real user turn: system, then the worked example if any."""
        system = self.render("system", **system_values) if system_values else self.system
        out = [ChatMessage("system", system)]
        if self.example_user:
            out += [ChatMessage("user", self.example_user), ChatMessage("assistant", self.example_assistant)]
        return tuple(out)

    def render(self, section: str, **values: object) -> str:
        return _substitute(self.name, section, getattr(self, section), values)


def parse_template(name: str, text: str) -> PromptTemplate:
    """Split a template file into its sections; text before the first section is a comment."""
    parts = _SECTION_RE.split(text)
    sections: dict[str, str] = {}
    # re.split with one group gives [preamble, name1, body1, name2, body2, ...].
    for i in range(1, len(parts) - 1, 2):
        key, body = parts[i], parts[i + 1]
        if key in sections:
            raise TemplateError(f"prompt template {name}: section [{key}] appears twice")
        # One trailing newline belongs to the file layout, not to the prompt.
        sections[key] = body.strip("\n")
    for key in ("system", "user"):
        if not sections.get(key, "").strip():
            raise TemplateError(f"prompt template {name}: missing or empty section [{key}]")
    if bool(sections.get("example_user", "").strip()) != bool(sections.get("example_assistant", "").strip()):
        raise TemplateError(f"prompt template {name}: [example_user] and [example_assistant] go together")
    return PromptTemplate(name, sections["system"], sections["user"], sections.get("source", ""),
                          sections.get("example_user", ""), sections.get("example_assistant", ""))


def _check_fields(tpl: PromptTemplate, fields: dict[str, tuple[str, ...]]) -> PromptTemplate:
    for section, names in fields.items():
        if not getattr(tpl, section):
            raise TemplateError(f"prompt template {tpl.name}: missing or empty section [{section}]")
        tpl.render(section, **{n: "x" for n in names})
    return tpl


@cache
def load_template(name: str) -> PromptTemplate:
    """Read ``rag_desktop/prompts/<name>.txt`` (cached: templates do not change at run time)."""
    resource = resources.files("rag_desktop").joinpath("prompts", f"{name}.txt")
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TemplateError(f"prompt template file rag_desktop/prompts/{name}.txt is missing") from exc
    tpl = parse_template(f"{name}.txt", text)
    fields = (_ANSWER_FIELDS if name.startswith("answer_")
              else _REWRITE_FIELDS if name.startswith("rewrite_") else _TRANSLATE_FIELDS)
    return _check_fields(tpl, fields)


# Files with free-form section names (the CF-RAG prompts, ``prompts/cfrag_*.txt``): a line
# that is exactly "[name]" starts a section; the worked examples and one-line pieces of a
# prompt are sections of their own, so the code holds no prompt text.
_ANY_SECTION_RE = re.compile(r"^\[([a-z_]+)\]\s*$", re.MULTILINE)


@cache
def load_sections(name: str, required: tuple[str, ...] = ()) -> Mapping[str, str]:
    """The sections of ``rag_desktop/prompts/<name>.txt`` by name (cached, read-only).

    As in :func:`parse_template`: text before the first section is a comment and one
    trailing newline of a section belongs to the file layout. ``required`` sections must be
    present and non-empty, so a broken file fails with its name when first used.
    """
    resource = resources.files("rag_desktop").joinpath("prompts", f"{name}.txt")
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TemplateError(f"prompt template file rag_desktop/prompts/{name}.txt is missing") from exc
    parts = _ANY_SECTION_RE.split(text)
    sections: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        if parts[i] in sections:
            raise TemplateError(f"prompt template {name}.txt: section [{parts[i]}] appears twice")
        sections[parts[i]] = parts[i + 1].strip("\n")
    for key in required:
        if not sections.get(key, "").strip():
            raise TemplateError(f"prompt template {name}.txt: missing or empty section [{key}]")
    return MappingProxyType(sections)


def render_section(name: str, section: str, **values: object) -> str:
    """Section ``section`` of ``prompts/<name>.txt`` with its ``$placeholders`` filled in."""
    return _substitute(f"{name}.txt", section, load_sections(name, (section,))[section], values)


def _substitute(name: str, section: str, text: str, values: Mapping[str, object]) -> str:
    """``text`` with its ``$placeholders`` filled in; a TemplateError names the template and section."""
    try:
        return string.Template(text).substitute({k: str(v) for k, v in values.items()})
    except (KeyError, ValueError) as exc:
        raise TemplateError(
            f"prompt template {name}: section [{section}] uses an unknown or malformed "
            f"placeholder ({exc}); allowed: {', '.join(sorted(values))}"
        ) from exc


def template_lang(lang: str) -> Literal["zh", "en"]:
    """Chinese queries get the Chinese template; English and anything else the English one."""
    return "zh" if lang == "zh" else "en"


def answer_template(lang: str) -> PromptTemplate:
    """The answer template for a question (or a library's documents) in ``lang``."""
    return load_template(f"answer_{template_lang(lang)}")


# --------------------------------------------------------------------------- answer prompt

# Chat-template tokens the counter does not see (role headers, end-of-turn markers, the
# generation prompt, Qwen3's "/no_think" switch). ChatML spends 5 per message and 3 for
# the generation prompt; 8 + 16 leaves a margin for other templates.
MESSAGE_OVERHEAD_TOKENS = 8
PROMPT_OVERHEAD_TOKENS = 16
SOURCE_SEPARATOR = "\n\n"
TRUNCATION_MARK = " …"

# Sentence ends: Chinese/full-width and ASCII terminators, semicolons and line breaks. The
# split is zero-width, so joining the pieces reproduces the text exactly and a prefix of
# pieces is a prefix of the text.
_SENTENCE_SPLIT = re.compile(r"(?<=[。！？；!?;\n])|(?<=[.．])(?=\s)")


def split_sentences(text: str) -> list[str]:
    """Pieces of ``text`` ending at sentence boundaries; ``"".join(result) == text``."""
    return [p for p in _SENTENCE_SPLIT.split(text) if p]


def _largest_fitting(n: int, fits: Callable[[int], bool]) -> int:
    """Largest k in [0, n] with fits(k), assuming fits is monotone (true then false)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def cut_to_budget(text: str, budget: int, count_tokens: Callable[[str], int],
                  render: Callable[[str], str] = lambda t: t) -> str | None:
    """The longest prefix of ``text`` cut at a sentence end whose rendering fits ``budget``.

    Falls back to a cut between whole characters (at a space when there is one) when
    even the first sentence is too long, e.g. a Chinese paragraph without punctuation.
    Python strings index code points, so a cut can never split a character. Returns
    None when nothing fits at all.
    """
    def cost(prefix: str) -> int:
        return count_tokens(render(prefix + TRUNCATION_MARK))

    pieces = split_sentences(text)
    k = _largest_fitting(len(pieces), lambda i: i == 0 or cost("".join(pieces[:i]).rstrip()) <= budget)
    if k > 0:
        return "".join(pieces[:k]).rstrip() + TRUNCATION_MARK
    first = pieces[0] if pieces else ""
    c = _largest_fitting(len(first), lambda i: i == 0 or cost(first[:i].rstrip()) <= budget)
    if c == 0:
        return None
    space = first.rfind(" ", 0, c)
    if space > c // 2:  # prefer a word boundary when it does not lose much
        c = space
    return first[:c].rstrip() + TRUNCATION_MARK


def _messages_cost(messages: Sequence[ChatMessage], count_tokens: Callable[[str], int]) -> int:
    return (sum(count_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)
            + PROMPT_OVERHEAD_TOKENS)


def source_where(hit: Hit, locator: Locator | None, lang: Lang) -> str:
    """What locates a source for the model: title, section heading or article, page (label).

    "Reasoning — 7.3 The selection task (page 141)" / "《差旅费管理办法》 第八条（第 1 页）": with
    the heading in the header the model can say *where* the answer is.
    """
    title = hit.title or hit.path
    heading = locator.heading if locator is not None else ""
    page = (locator.page_label if locator is not None else "") or str(hit.page)
    if lang == "zh":
        return f"《{title}》" + (f" {heading}" if heading else "") + f"（第 {page} 页）"
    return title + (f" — {heading}" if heading else "") + f" (page {page})"


def sources_as_read(hits: Sequence[Hit], locators: Sequence[Locator] | None, lang: Lang) -> list[str]:
    """Each source as the answer prompt shows it (its header, source_where, over its text): what a
    check of the answer against its sources reads (core.cfrag.anchor), so a title or article the answer
    names is held by the source that carries it. ``lang``: the question's."""
    tl = template_lang(lang)
    locs = tuple(locators or ())
    return [f"{source_where(h, locs[i] if i < len(locs) else None, tl)}\n{h.text}" for i, h in enumerate(hits)]


def answer_prefix(lang: Lang) -> tuple[ChatMessage, ...]:
    """What every answer prompt in ``lang`` starts with (system and worked example), with a
    placeholder last turn: the messages a generator evaluates ahead of the first question
    (``Generator.warm``), so that question's first token waits only for its own sources."""
    return (*answer_template(lang).prefix(), ChatMessage("user", "?"))


def warm_prompts(doc_languages: Mapping[str, int]) -> list[tuple[ChatMessage, ...]]:
    """The answer prefixes worth evaluating ahead of questions on a library with these documents
    per language: one per answer template the library's languages use, most documents first."""
    by_count = sorted(doc_languages, key=lambda k: -doc_languages[k])
    return [answer_prefix(tl) for tl in dict.fromkeys(template_lang(lang) for lang in by_count or ["en"])]


ANSWER_SOURCES = 5  # how many of a column's top hits an answer reads (their chunks, or passages inside them)
# The column's own first half of those, which the keyword leg's RRF does not displace: it fills only the
# places after them (RagService.answer_list). Dense similarity bridges "公司" and "用人单位", BM25 does not
# (docs/evaluation.md §1.4).
OWN_SOURCES = (ANSWER_SOURCES + 1) // 2


def answer_hits(hits: Sequence[Hit], n_sources: int = ANSWER_SOURCES) -> tuple[Hit, ...]:
    """The hits an answer reads: the ranking's top ``n_sources``, in its order."""
    return tuple(hits[:n_sources])


def answer_key(hits: Sequence[Hit], n_sources: int = ANSWER_SOURCES) -> tuple[tuple[int, int, str], ...]:
    """What determines an answer's prompt besides the question: which units it reads, in which
    order, with which text (passages are chosen inside them, numbered in this order).

    Two columns with the same key get the same prompt, and with the generator's fixed seed the
    same answer ("when two columns' passages are identical, generate once and say so"):
    a column the gate shows in baseline order reads exactly the baseline's sources.
    """
    return tuple((h.unit_id, h.doc_id, h.text) for h in answer_hits(hits, n_sources))


def build_answer_messages(
    query: str,
    sources: Sequence[Hit],
    lang: Lang,
    count_tokens: Callable[[str], int],
    n_ctx: int,
    answer_reserve: int,
    locators: Sequence[Locator] | None = None,
) -> tuple[tuple[ChatMessage, ...], tuple[Hit, ...]]:
    """The chat messages for answering ``query`` from ``sources`` within the context window.

    Sources are taken in the order given (the caller's ranking) and numbered [1]..[m].
    Budget: n_ctx − answer_reserve − (instruction + question + chat-template
    overhead) is what the sources may use. Sources are added whole while they fit; the
    first one that does not fit is cut at a sentence end (never inside a character) and
    the list stops there, so a lower-ranked source never displaces a higher-ranked one.

    The messages are: system, the template's worked example (a user/assistant pair), then
    the real user turn with the sources and the question.

    Returns the messages and the sources actually placed, as placed: a cut source comes
    back with ``text`` equal to the cut text the model saw (ids, title and page unchanged).
    ``locators`` (one per source: heading, printed page label) go into each source's header
    (:func:`source_where`); the placed sources are a prefix of ``sources``.
    Raises :class:`PromptTooLong` when not even the question fits.
    """
    if n_ctx <= 0 or answer_reserve < 0:
        raise ValueError(f"n_ctx must be > 0 and answer_reserve >= 0 (got {n_ctx}, {answer_reserve})")
    tl = template_lang(lang)
    tpl = answer_template(lang)
    prefix = tpl.prefix()

    def user_message(blocks: Sequence[str]) -> str:
        return tpl.render("user", sources=SOURCE_SEPARATOR.join(blocks), question=query)

    def block(n: int, hit: Hit, text: str) -> str:
        loc = locators[n - 1] if locators is not None and n - 1 < len(locators) else None
        return tpl.render("source", n=n, title=hit.title or hit.path, page=hit.page,
                          where=source_where(hit, loc, tl), text=text.strip())

    budget = n_ctx - answer_reserve
    fixed = _messages_cost((*prefix, ChatMessage("user", user_message([]))), count_tokens)
    if fixed > budget:
        raise PromptTooLong(
            f"the instruction and question need {fixed} tokens but only {budget} are available "
            f"(n_ctx {n_ctx} − answer reserve {answer_reserve}); shorten the question or raise n_ctx"
        )

    # Per-block costs are additive up to tokenizer merges at the seams; the exact check
    # after the loop corrects for that.
    remaining = budget - fixed
    blocks: list[str] = []
    used: list[Hit] = []
    for hit in sources:
        n = len(used) + 1
        whole = block(n, hit, hit.text)
        cost = count_tokens(SOURCE_SEPARATOR + whole)
        if cost <= remaining:
            blocks.append(whole)
            used.append(hit)
            remaining -= cost
            continue
        def render_cut(text: str, n: int = n, hit: Hit = hit) -> str:
            return SOURCE_SEPARATOR + block(n, hit, text)

        cut = cut_to_budget(hit.text.strip(), remaining, count_tokens, render_cut)
        if cut is not None:
            blocks.append(block(n, hit, cut))
            used.append(dataclasses.replace(hit, text=cut))
        break

    def total() -> int:
        return _messages_cost((*prefix, ChatMessage("user", user_message(blocks))), count_tokens)

    # Exact check on the assembled prompt; trim the last source until it fits.
    while blocks and total() > budget:
        last = used[-1]
        pieces = split_sentences(last.text.removesuffix(TRUNCATION_MARK))
        if len(pieces) <= 1:
            blocks.pop()
            used.pop()
            continue
        shorter = "".join(pieces[:-1]).rstrip() + TRUNCATION_MARK
        used[-1] = dataclasses.replace(last, text=shorter)
        blocks[-1] = block(len(used), last, shorter)

    content = user_message(blocks)
    return (*prefix, ChatMessage("user", content, source_breaks(content, blocks))), tuple(used)


def source_breaks(content: str, blocks: Sequence[str]) -> tuple[int, ...]:
    """Where in the user message ``content`` each source block after the first starts, and where the
    sources end (the question follows): the pieces a local model reads the prompt in, so that the
    next answer of the question that starts with the same sources keeps them (ChatMessage.breaks)."""
    joined = SOURCE_SEPARATOR.join(blocks)
    start = content.find(joined) if blocks else -1
    if start < 0:
        return ()
    out = []
    pos = start
    for b in blocks[:-1]:
        pos += len(b) + len(SOURCE_SEPARATOR)
        out.append(pos)
    return (*out, start + len(joined))


# --------------------------------------------------------------------------- translation

# Language names, by the language they are written in: the translation prompt's and the CLI's.
LANG_NAMES: dict[str, dict[str, str]] = {
    "en": {"zh": "Chinese", "en": "English", "other": "the original language"},
    "zh": {"zh": "中文", "en": "英文", "other": "原文语言"},
}


def build_translation_messages(text: str, source_lang: Lang, target_lang: Lang) -> tuple[ChatMessage, ...]:
    """Messages asking for a faithful translation with original key terms in parentheses.

    The instruction is written in the target language (small models follow an
    instruction in the language they must answer in more reliably).
    """
    if target_lang not in ("zh", "en"):
        raise ValueError(f"translation target must be 'zh' or 'en', got {target_lang!r}")
    if source_lang == target_lang:
        raise ValueError(f"text is already in {target_lang!r}; nothing to translate")
    if not text.strip():
        raise ValueError("nothing to translate: the text is empty")
    return _translation_messages(f"translate_{target_lang}", text, source_lang, target_lang)


def build_question_translation_messages(question: str, source_lang: Lang, target_lang: Lang) -> tuple[ChatMessage, ...]:
    """Messages asking for a question in the other language (``prompts/translate_question_<target>.txt``):
    a short instruction, no worked example, one line out (item 5: searched across languages)."""
    if target_lang not in ("zh", "en") or source_lang == target_lang:
        raise ValueError(f"cannot translate a {source_lang!r} question into {target_lang!r}")
    if not question.strip():
        raise ValueError("nothing to translate: the question is empty")
    return _translation_messages(f"translate_question_{target_lang}", question.strip(), source_lang, target_lang)


def _translation_messages(template: str, text: str, source_lang: Lang, target_lang: Lang) -> tuple[ChatMessage, ...]:
    """``template``'s fixed turns, then ``text`` as the user turn, the source language named in the target's."""
    tpl = load_template(template)
    name = LANG_NAMES[target_lang][source_lang]
    return (*tpl.prefix(source_language=name),
            ChatMessage("user", tpl.render("user", text=text, source_language=name)))


# --------------------------------------------------------------------------- thinking text


class ThinkFilter:
    """Removes ``<think>…</think>`` from a token stream, whatever way the tags are split.

    Qwen3 emits a (possibly empty) thinking block before its answer; the answer must
    never show it. Feed each streamed piece to :meth:`feed` and show what it
    returns; call :meth:`flush` at the end. A suffix that could be the start of a tag is
    held back until the next piece decides it. ``start_inside`` is for templates whose
    generation prompt already opens the block (the model then only emits ``</think>``).
    An unterminated block is dropped entirely. The removed text is kept in
    :attr:`thinking` for diagnostics.
    """

    OPEN = "<think>"
    CLOSE = "</think>"

    def __init__(self, start_inside: bool = False) -> None:
        self._inside = start_inside
        self._buf = ""
        self._skip_ws = False
        self.thinking: list[str] = []

    @staticmethod
    def _partial_suffix(text: str, tags: Sequence[str]) -> int:
        """Length of the longest suffix of text that is a proper prefix of one of the tags."""
        best = 0
        for tag in tags:
            for k in range(min(len(tag) - 1, len(text)), 0, -1):
                if text.endswith(tag[:k]):
                    best = max(best, k)
                    break
        return best

    def _emit(self, out: list[str], text: str) -> None:
        # Whitespace right after a thinking block ("</think>\n\n") is layout, not answer.
        if self._skip_ws:
            text = text.lstrip()
            if not text:
                return
            self._skip_ws = False
        out.append(text)

    def feed(self, piece: str) -> str:
        self._buf += piece
        out: list[str] = []
        while True:
            if self._inside:
                end = self._buf.find(self.CLOSE)
                if end < 0:
                    keep = self._partial_suffix(self._buf, (self.CLOSE,))
                    self.thinking.append(self._buf[: len(self._buf) - keep])
                    self._buf = self._buf[len(self._buf) - keep:]
                    break
                self.thinking.append(self._buf[:end])
                self._buf = self._buf[end + len(self.CLOSE):]
                self._inside = False
                self._skip_ws = True
                continue
            opens, closes = self._buf.find(self.OPEN), self._buf.find(self.CLOSE)
            hits = [i for i in (opens, closes) if i >= 0]
            if not hits:
                keep = self._partial_suffix(self._buf, (self.OPEN, self.CLOSE))
                self._emit(out, self._buf[: len(self._buf) - keep])
                self._buf = self._buf[len(self._buf) - keep:]
                break
            at = min(hits)
            self._emit(out, self._buf[:at])
            if at == opens:
                self._buf = self._buf[at + len(self.OPEN):]
                self._inside = True
            else:  # a stray closing tag: drop the tag itself
                self._buf = self._buf[at + len(self.CLOSE):]
                self._skip_ws = True
        return "".join(out)

    def flush(self) -> str:
        rest, self._buf = self._buf, ""
        if self._inside:
            self.thinking.append(rest)
            return ""
        out: list[str] = []
        self._emit(out, rest)
        return "".join(out)
