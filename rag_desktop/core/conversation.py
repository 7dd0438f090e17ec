"""Follow-up questions: a conversation per library, rewritten into standalone questions.

A follow-up ("那有效期呢？", "and in the drinking-age version?") cannot be retrieved on its own:
the local model rewrites it, from the conversation so far, into a standalone question, which
the user sees (and may edit) before all columns rank it. The first question of a conversation
is standalone by definition and is never rewritten. A rewrite that fails, times out or comes
back unusable falls back to the user's own words, with a note saying why.

Pure: the messages, the conversation record and its export. The model's reply is read by
rag_desktop.core.replies.parse_rewrite; running the model and storing the conversation are the app
layer's business.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_desktop.core.errors import UserInputError
from rag_desktop.core.keywords import load_stopwords
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.prompting import load_template
from rag_desktop.core.text import is_han
from rag_desktop.core.types import ChatMessage

HISTORY_TURNS = 3  # the last turns the rewrite sees (older ones rarely hold the referent)
ANSWER_CHARS = 300  # of each earlier answer: enough for what "it"/"那" points at


@dataclass(frozen=True)
class Turn:
    """One exchange: what the user typed, what was retrieved for, and the answer shown."""

    question: str
    standalone: str
    answer: str = ""
    note: str = ""  # why the standalone question is the user's own words, if it is


@dataclass(frozen=True)
class Conversation:
    turns: tuple[Turn, ...] = ()

    def add(self, turn: Turn) -> Conversation:
        return Conversation((*self.turns, turn))

    def with_answer(self, answer: str) -> Conversation:
        """The last turn with its answer filled in (answers arrive after the question)."""
        if not self.turns:
            return self
        return Conversation((*self.turns[:-1], dataclasses.replace(self.turns[-1], answer=answer)))

    def to_json(self) -> list[dict[str, str]]:
        return [dataclasses.asdict(t) for t in self.turns]

    @staticmethod
    def from_json(data: Any) -> Conversation:
        """A conversation from :meth:`to_json`; anything malformed is dropped, never fatal."""
        turns = []
        for row in data if isinstance(data, list) else []:
            if isinstance(row, dict) and isinstance(row.get("question"), str):
                turns.append(Turn(row["question"], str(row.get("standalone") or row["question"]),
                                  str(row.get("answer", "")), str(row.get("note", ""))))
        return Conversation(tuple(turns))

    def to_markdown(self, title: str = "Conversation") -> str:
        """The conversation as Markdown, for export."""
        out = [f"# {title}", ""]
        for i, t in enumerate(self.turns, start=1):
            out.append(f"## {i}. {t.question}")
            if t.standalone != t.question:
                out.append(f"*Asked as:* {t.standalone}")
            if t.note:
                out.append(f"*Note:* {t.note}")
            out += ["", t.answer or "(no answer)", ""]
        return "\n".join(out).rstrip() + "\n"


@dataclass(frozen=True)
class Rewrite:
    """The question to retrieve for; ``rewritten`` False means the user's words are used."""

    question: str
    standalone: str
    rewritten: bool
    note: str = ""
    seconds: float = 0.0
    raw: str = field(default="", compare=False)
    reason: str = ""  # "", "timeout", "failed", "empty", "not_a_question", "dropped_words": for the UI


# What makes a question lean on the conversation (docs/architecture.md, "The question's path"):
# a word that points back (它, 该条, this rule, they), an opening that continues the last turn
# (那…, 还有…, "and …", "what about …"), an elliptic "…呢？", or too few words of its own to
# name a subject. A complete question ("什么是RAG？", "报销标准是多少？") is asked as typed: a
# rewrite of it can only replace its subject with the last turn's (seen: "报销标准是多少？"
# became "…是哪些省市？"). Chosen where no source says: a pronoun that follows a named thing
# in the same question (an acronym, a capitalised word, ≥ 2 words of its own, ≥ 4 Han
# characters of its own) points inside the question ("What is RAG and how does it work?").
_ZH_POINTER = re.compile(
    r"它们?|(?<![极尤与])其(?![他它余实次中])|(?<![应活])该(?=[\u4e00-\u9fff])|上述|前者|后者|"
    r"(?<![因如从彼])此(?=[项条类种外时处])|[这那](?:个|些|种|项|条|份|里|样|本|篇|部|次|位|款|章|节)|"
    r"(?<![其吉])他们?|她们?")
_ZH_OPENING = re.compile(r"^(?:那么?|还有|另外|此外|然后|同样|那如果|那要是)")
# Question filler, not question words (core.text.ZH_QUESTION_WORDS, which tell whether a text asks):
# what names no subject, so a follow-up made only of it leans on the conversation. The words are the
# query_zh stopwords (什么, 如何, 请问, 哪些…), and these characters are function words left over.
_ZH_FILLER = set("的了吗呢吧啊呀么是有在和与及或都也还就要会能可")
_EN_POINTER = re.compile(r"\b(?:it|its|they|them|their|theirs|these|those|he|she|him|his|hers|former|latter)\b"
                         r"|\b(?:this|that)\s*\?|\b(?:this|that)\s+(?!is\b|was\b|are\b)[a-z]+\b"
                         r"|\b(?:is|does|do|did|was|about|of|in|for|to|with|from|on)\s+that\b"
                         r"|\bthe\s+(?:same|above|previous|last)\b",
                         re.IGNORECASE)
_EN_OPENING = re.compile(r"^(?:and|also|but|so|then|what about|how about|same for|and what about)\b", re.IGNORECASE)
_EN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'_-]*|\d[\w.-]*")


def _en_own_words(text: str) -> list[str]:
    """The words of ``text`` that name something: not stopwords, not question filler."""
    stop = load_stopwords("en") | load_stopwords("query_en")
    return [w for w in _EN_WORD.findall(text) if w.lower() not in stop]


def _named_before(text: str) -> bool:
    """Whether ``text`` (a question up to a pronoun) already names a thing the pronoun can point
    at: a Latin acronym or identifier, a capitalised word past the first, two words of its own,
    or four Han characters that are not question filler."""
    words = _EN_WORD.findall(text)
    if any((w.isupper() and len(w) > 1) or any(c.isdigit() for c in w) for w in words):
        return True
    if any(w[:1].isupper() for w in words[1:]) or any(any(c.isupper() for c in w[1:]) for w in words):
        return True
    han = _han_own(text)
    if words and any(is_han(c) for c in text):  # a Latin word in a Chinese question names something
        return True
    return len(_en_own_words(text)) >= 2 or len(han) >= 4


def _han_own(text: str) -> list[str]:
    """The Han characters of ``text`` outside question filler (什么, 如何, 的, 吗…)."""
    filler = "|".join(sorted(load_stopwords("query_zh"), key=len, reverse=True))
    return [c for c in re.sub(filler, "", text) if is_han(c) and c not in _ZH_FILLER]


def stands_alone(question: str) -> bool:
    """Whether ``question`` can be retrieved and answered without the conversation before it."""
    q = question.strip()
    if _ZH_OPENING.match(q) or _EN_OPENING.match(q):
        return False
    for m in (*_ZH_POINTER.finditer(q), *_EN_POINTER.finditer(q)):
        if not _named_before(q[: m.start()]):
            return False
    body = q.rstrip("?？!！。. ")
    han = _han_own(body)
    if body.endswith("呢") and len(han) <= 6:  # "期限呢？", "英文版呢？": the rest of the question is elided
        return False
    own = _en_own_words(body)
    return len(own) + len(han) // 2 >= 1


def needs_rewrite(conversation: Conversation, question: str = "") -> bool:
    """A question is rewritten only when there is a previous question and it cannot stand alone
    (:func:`stands_alone`). With no ``question``, whether a rewrite is possible at all."""
    if not conversation.turns:
        return False
    return not question.strip() or not stands_alone(question)


def build_rewrite_messages(conversation: Conversation, question: str) -> tuple[ChatMessage, ...]:
    """Messages asking the model for a standalone form of ``question`` (in its language)."""
    if not question.strip():
        raise UserInputError("the follow-up question is empty")
    zh = detect_lang(question) == "zh"
    tpl = load_template("rewrite_zh" if zh else "rewrite_en")
    q_label, a_label = ("问", "答") if zh else ("Q", "A")
    lines = []
    for t in conversation.turns[-HISTORY_TURNS:]:
        answer = " ".join(t.answer.split())
        if len(answer) > ANSWER_CHARS:
            answer = answer[:ANSWER_CHARS] + "…"
        lines.append(f"{q_label}: {t.standalone}")
        if answer:
            lines.append(f"{a_label}: {answer}")
    history = "\n".join(lines)
    return (*tpl.prefix(), ChatMessage("user", tpl.render("user", history=history, question=question.strip())))


# What the person is told when the standalone question is their own words: one line per reason
# that rag_desktop.core.replies.parse_rewrite gives (and the app's "timeout" and "failed").
NOTES = {
    "timeout": "the rewrite took too long",
    "failed": "the rewrite failed",
    "empty": "the model returned no rewrite",
    "not_a_question": "the model's rewrite was not a single question",
    "dropped_words": "the model's rewrite dropped the words of your question",
    "unchanged": "the rewrite added nothing from the conversation",
}


def history_for_export(turns: Sequence[Turn]) -> list[str]:
    """One line per turn for a compact history list ("Q → standalone")."""
    return [t.question if t.standalone == t.question else f"{t.question} → {t.standalone}" for t in turns]


__all__ = ["NOTES", "Conversation", "Rewrite", "Turn", "build_rewrite_messages", "history_for_export", "needs_rewrite",
           "stands_alone"]
