"""``rag-desktop chat``: follow-up questions on the command line.

A REPL over one library's conversation: each line is a question; from the second one on it is
rewritten by the local model into a standalone question (printed as ``→ asked as: …``) before
retrieval, exactly as in the desktop app; the answer streams from the chosen column and the
turn is stored with the library. Commands: ``/new`` (a new conversation), ``/history``,
``/export FILE`` (Markdown), ``/quit`` (or end of input). ``answer`` stays one-shot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from rag_desktop.app.flow_events import AnswerDone, AnswerGroup, Token
from rag_desktop.app.question_flow import QuestionFlow
from rag_desktop.app.service import RagService
from rag_desktop.cli.common import abstained_line, service
from rag_desktop.core.conversation import Conversation, Turn
from rag_desktop.core.types import Answer

HELP = "Commands: /new  /history  /export FILE  /quit"


def run_chat(svc: RagService, method: str = "causal", stdin: TextIO | None = None,
             stdout: TextIO | None = None, prompt: bool | None = None) -> int:
    inp = stdin or sys.stdin
    out = stdout or sys.stdout
    show_prompt = inp.isatty() if prompt is None else prompt
    conv = svc.load_conversation()
    print(f"Chat with {svc.library.folder} ({len(conv.turns)} earlier turns). {HELP}", file=out)
    while True:
        if show_prompt:
            out.write("? ")
            out.flush()
        line = inp.readline()
        if not line:
            break
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            cmd, _, arg = text.partition(" ")
            if cmd in ("/quit", "/exit"):
                break
            if cmd == "/new":
                conv = Conversation()
                svc.save_conversation(conv)
                print("New conversation.", file=out)
            elif cmd == "/history":
                for i, t in enumerate(conv.turns, start=1):
                    asked = "" if t.standalone == t.question else f"  (asked as: {t.standalone})"
                    print(f"{i}. {t.question}{asked}", file=out)
            elif cmd == "/export" and arg.strip():
                path = Path(arg.strip()).expanduser()
                path.write_text(conv.to_markdown(f"Conversation — {svc.library.folder.name}"), encoding="utf-8")
                print(f"Exported {len(conv.turns)} turns to {path}", file=out)
            else:
                print(HELP, file=out)
            continue
        rw = svc.rewrite_followup(text, conv)
        if rw.rewritten:
            print(f"→ asked as: {rw.standalone}", file=out)
        elif rw.note:
            print(f"→ note: {rw.note}; asking in your words", file=out)
        question = rw.standalone
        # The window's flow (app.question_flow), one column; the column's own order, not its answer list.
        flow = QuestionFlow(svc, question, highlights=False, prepare=False)
        comp = flow.retrieve(translate=True).comparison
        ranked = comp.baseline if method == "baseline" else comp.causal
        answer: Answer | None = None
        for ev in flow.answer(AnswerGroup((method,), (ranked,))):
            if isinstance(ev, Token):
                out.write(ev.text)
                out.flush()
            elif isinstance(ev, AnswerDone):
                answer = ev.answer
        out.write("\n")
        if answer is not None and answer.abstained:
            print(abstained_line(answer), file=out)
        if answer is not None:
            for i, h in enumerate(answer.sources, start=1):
                loc = answer.locators[i - 1] if i - 1 < len(answer.locators) else None
                where = f" — {loc.heading}" if loc is not None and loc.heading else ""
                page = (loc.page_label if loc is not None else "") or str(h.page)
                if any(c.n == i for c in answer.citations):
                    print(f"  [{i}] {h.title}{where}, p. {page}", file=out)
        conv = conv.add(Turn(text, question, answer.text if answer else "", rw.note))
        svc.save_conversation(conv)
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    svc = service(args)
    try:
        return run_chat(svc, args.method)
    finally:
        svc.close()
