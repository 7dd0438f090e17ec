"""Follow-up questions: rewriting, fallbacks, the stored thread, export, `chat`.

The generator is a scripted collaborator; the conversation logic, the prompt, the library and
the REPL are the real ones.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from library_helpers import ingest_texts

from rag_desktop.app.service import CONVERSATION_FILE, RagService
from rag_desktop.cli.chat import run_chat
from rag_desktop.core.conversation import (
    NOTES,
    Conversation,
    Turn,
    build_rewrite_messages,
    needs_rewrite,
    stands_alone,
)
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.replies import added_tokens, kept_share, parse_rewrite
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, ChatMessage, GenEvent, GenEventKind
from rag_desktop.ui.i18n import has_tr

FIRST = Turn("数据出境安全评估的申报需要准备哪些材料？", "数据出境安全评估的申报需要准备哪些材料？",
             "需要申报书和风险自评估报告 [1]。")


class RewritingGenerator:
    """Answers rewrite prompts with a fixed standalone question, others with a short answer."""

    identity = "rewriting-generator"
    n_ctx = 8192

    def __init__(self, rewrite: str = "数据出境安全评估结论的有效期是多久？", delay: float = 0.0,
                 fail: BaseException | None = None) -> None:
        self.rewrite, self.delay, self.fail = rewrite, delay, fail
        self.prompts: list[Sequence[ChatMessage]] = []
        self.lock = threading.Lock()

    def load(self) -> None: ...

    def close(self) -> None: ...

    def count_tokens(self, text: str) -> int:
        return len(text) // 3 + 1

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        with self.lock:
            self.prompts.append(messages)
        if self.fail is not None:
            raise self.fail
        rewriting = "standalone" in messages[0].content or "独立问题" in messages[0].content
        text = self.rewrite if rewriting else "有效期为2年 [1]。"
        for piece in text:
            if self.delay:
                time.sleep(self.delay)
            if cancel is not None and cancel.is_set:
                yield GenEvent(GenEventKind.DONE, finish_reason="cancelled")
                return
            yield GenEvent(GenEventKind.TOKEN, piece)
        yield GenEvent(GenEventKind.DONE, finish_reason="stop")


# --------------------------------------------------------------------------- core


def test_rewrite_prompt_holds_the_thread_and_the_follow_up() -> None:
    conv = Conversation().add(FIRST)
    msgs = build_rewrite_messages(conv, "那有效期呢？")
    assert msgs[0].role == "system" and "独立问题" in msgs[0].content  # the Chinese template
    assert "问: 数据出境安全评估的申报需要准备哪些材料？" in msgs[-1].content
    assert "答: 需要申报书" in msgs[-1].content and msgs[-1].content.endswith("追问：那有效期呢？")
    wason = "What did the Wason task show?"
    en = build_rewrite_messages(Conversation().add(Turn(wason, wason)), "and in the drinking-age version?")
    assert "standalone" in en[0].content and en[-1].content.endswith("Follow-up: and in the drinking-age version?")
    with pytest.raises(ValueError):
        build_rewrite_messages(conv, "  ")


def test_parse_rewrite_cleans_and_falls_back() -> None:
    assert parse_rewrite('Standalone question: "What did the drinking-age version show?"\nextra', "and?") == \
        ("What did the drinking-age version show?", "")
    assert parse_rewrite("改写后的问题：数据出境安全评估结论的有效期是多久？", "那有效期呢？") == \
        ("数据出境安全评估结论的有效期是多久？", "")
    assert parse_rewrite("   ", "那有效期呢？") == ("那有效期呢？", "empty")
    assert parse_rewrite("x" * 500, "那有效期呢？")[1] == "not_a_question"


def test_conversation_round_trip_and_markdown() -> None:
    follow = Turn("那有效期呢？", "数据出境安全评估结论的有效期是多久？")
    conv = Conversation().add(FIRST).add(follow).with_answer("2年 [1]")
    assert Conversation.from_json(conv.to_json()) == conv
    assert Conversation.from_json({"not": "a list"}) == Conversation()
    assert Conversation.from_json([{"question": "q"}, 7, {"x": 1}]).turns == (Turn("q", "q"),)
    md = conv.to_markdown("Demo")
    assert md.startswith("# Demo") and "## 2. 那有效期呢？" in md
    assert "*Asked as:* 数据出境安全评估结论的有效期是多久？" in md
    assert "2年 [1]" in md
    assert not needs_rewrite(Conversation()) and needs_rewrite(conv)
    assert needs_rewrite(conv, "那有效期呢？") and not needs_rewrite(conv, "报销标准是多少？")


def _lines(name: str) -> list[str]:
    path = Path(__file__).parent / "data" / "standalone" / name
    return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and ln[0] != "#"]


def _fixture_questions() -> list[str]:
    import json

    out: list[str] = []
    for path in sorted((Path(__file__).parent / "data").glob("*/*.jsonl")):
        if path.name in ("queries.jsonl", "questions.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                q = row.get("text") or row.get("question")
                if q and q not in out:
                    out.append(q)
    return out


def test_complete_questions_are_never_rewritten() -> None:
    complete = _lines("complete.txt") + _fixture_questions()
    assert len(complete) >= 50 and {"什么是RAG？", "报销标准是多少？"} <= set(complete)
    zh = [q for q in complete if detect_lang(q) == "zh"]
    assert len(zh) >= 20 and len(complete) - len(zh) >= 20  # both languages
    conv = Conversation().add(FIRST)
    assert [q for q in complete if not stands_alone(q) or needs_rewrite(conv, q)] == []


def test_follow_ups_are_rewritten() -> None:
    follow = _lines("followups.txt")
    assert len(follow) >= 20
    conv = Conversation().add(FIRST)
    assert [q for q in follow if stands_alone(q) or not needs_rewrite(conv, q)] == []
    # no previous question: nothing to lean on, so nothing is rewritten either
    assert not any(needs_rewrite(Conversation(), q) for q in follow)


def test_a_pronoun_after_a_named_thing_points_inside_the_question() -> None:
    assert stands_alone("What is RAG and how does it work?")
    assert stands_alone("数据出境安全评估是什么，它的有效期多久？")
    assert not stands_alone("How does it work?")
    assert not stands_alone("它的有效期多久？")


# --------------------------------------------------------------------------- service


DOCS = {
    "guide_zh.txt": "数据出境安全评估工作指引\n\n申报材料包括申报书、风险自评估报告、与境外接收方订立的法律文件。\n\n"
                    "审查结论的有效期为自出具之日起2年。有效期届满需要继续传输的，应当在届满60个工作日前重新申报。",
    "wason_en.txt": "The Wason selection task asks which cards must be turned to test a rule.\n\n"
                    "In the drinking-age version most people choose the beer drinker and the sixteen-year-old.",
}


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    return ingest_texts(tmp_path_factory.mktemp("conv"), DOCS, Settings().replace("retrieval", level="chunk"))


def test_first_question_is_standalone_and_asks_no_model(svc: RagService) -> None:
    gen = RewritingGenerator()
    svc.runtime._generator = gen
    rw = svc.rewrite_followup("那有效期呢？", Conversation())
    assert (rw.standalone, rw.rewritten, rw.note) == ("那有效期呢？", False, "")
    assert gen.prompts == []


def test_follow_up_is_rewritten(svc: RagService) -> None:
    svc.runtime._generator = RewritingGenerator()
    rw = svc.rewrite_followup("那有效期呢？", Conversation().add(FIRST))
    assert rw.rewritten and rw.standalone == "数据出境安全评估结论的有效期是多久？" and not rw.note


def test_a_slow_rewrite_falls_back_to_the_users_words_with_a_note(svc: RagService) -> None:
    svc.runtime._generator = RewritingGenerator(delay=0.05)
    rw = svc.rewrite_followup("那有效期呢？", Conversation().add(FIRST), timeout_s=0.2)
    assert (rw.standalone, rw.rewritten, rw.reason) == ("那有效期呢？", False, "timeout")
    assert "too long" in rw.note


def test_a_failing_rewrite_falls_back_with_a_note(svc: RagService) -> None:
    svc.runtime._generator = RewritingGenerator(fail=ConnectionError("server down"))
    rw = svc.rewrite_followup("那有效期呢？", Conversation().add(FIRST))
    assert (rw.standalone, rw.reason) == ("那有效期呢？", "failed") and "server down" in rw.note


def test_conversation_is_stored_with_the_library(svc: RagService) -> None:
    conv = Conversation().add(FIRST)
    svc.save_conversation(conv)
    assert (svc.library.folder / CONVERSATION_FILE).is_file()
    assert svc.load_conversation() == conv
    (svc.library.folder / CONVERSATION_FILE).write_text("{broken", encoding="utf-8")
    assert svc.load_conversation() == Conversation()  # unreadable: a new conversation, not a crash
    svc.save_conversation(Conversation())


# --------------------------------------------------------------------------- chat REPL


def test_chat_rewrites_follow_ups_keeps_history_and_exports(svc: RagService, tmp_path: Path) -> None:
    gen = RewritingGenerator()
    svc.runtime._generator = gen
    svc.save_conversation(Conversation())
    out = io.StringIO()
    export = tmp_path / "thread.md"
    lines = "\n".join(["数据出境安全评估的申报需要准备哪些材料？", "那有效期呢？", "/history",
                       f"/export {export}", "/new", "/history", "/quit"]) + "\n"
    assert run_chat(svc, stdin=io.StringIO(lines), stdout=out, prompt=False) == 0
    text = out.getvalue()
    assert text.count("→ asked as:") == 1  # the first question is standalone, the follow-up rewritten
    assert "→ asked as: 数据出境安全评估结论的有效期是多久？" in text
    assert "2. 那有效期呢？  (asked as: 数据出境安全评估结论的有效期是多久？)" in text
    assert "New conversation." in text
    md = export.read_text(encoding="utf-8")
    assert "## 1. 数据出境安全评估的申报需要准备哪些材料？" in md and "有效期为2年" in md
    assert svc.load_conversation() == Conversation()  # /new started a new thread
    rewrites = [p for p in gen.prompts if "独立问题" in p[0].content]
    assert len(rewrites) == 1 and "追问：那有效期呢？" in rewrites[0][-1].content


def test_a_rewrite_that_drops_the_follow_ups_words_falls_back_to_them() -> None:
    # seen with the 1.5B model: a new question came back as the previous one
    assert parse_rewrite("What did the Wason selection task show?", "ColBERT late interaction scoring") == \
        ("ColBERT late interaction scoring", "dropped_words")
    # real follow-ups keep their own words, in both languages, and a bare "and?" cannot be checked
    assert parse_rewrite("Why do people pass the drinking-age version of the Wason task?",
                         "and in the drinking-age version?")[1] == ""
    assert parse_rewrite("数据出境安全评估结论的有效期是多久？", "那有效期呢？")[1] == ""
    assert parse_rewrite("What did the drinking-age version show?", "and?")[1] == ""
    assert kept_share("ColBERT late interaction scoring", "ColBERT late interaction: how are passages scored?") >= 0.5


def test_a_rewrite_that_brings_nothing_from_the_thread_is_not_held_for_confirmation() -> None:
    # seen with the 1.5B on a new-topic question after a Wason turn: the words reordered only
    assert parse_rewrite("出差住宿费报销的标准是多少？", "出差住宿费的报销标准是多少？") == \
        ("出差住宿费的报销标准是多少？", "unchanged")
    assert parse_rewrite("How many people choose the cards?", "how many people choose the cards") == \
        ("how many people choose the cards", "unchanged")  # case and punctuation only
    assert added_tokens("how many choose them", "How many choose them, the people?") == {"people"}
    # a rewrite that resolves the follow-up from the thread is a real one, in both languages
    assert parse_rewrite("How many people choose the A and 7 cards in the Wason task?",
                         "how many people choose them?")[1] == ""
    assert parse_rewrite("数据出境安全评估结论的有效期是多久？", "那有效期呢？")[1] == ""
    for reason in NOTES:
        assert has_tr(f"conv.note.{reason}")
