#!/usr/bin/env python3
"""Both answer columns as the window writes them: when does the second column's answer come?

Runs each question of a QA set (default: tests/data/demo_qa over resources/demo) through the
window's own flow (``app.question_flow.QuestionFlow``: the columns, then one answer per group of
columns, CF-RAG left out), with the app's default settings and the embedded generator, and times
from the question to each column's first token and to its answer. Each question is asked twice,
interleaved (the order alternates from one question to the next):

* ``kept`` — this build: a column whose answer reads the same passages as the answer written just
  before is shown that answer (``RagService.answer`` keeps the last prompt's answer), and one whose
  prompt starts with the same sources keeps them in the model's cache (backends/llama_segments.py);
* ``written`` — the previous build's behaviour: every group of columns is written by the model, from
  the cache cleared but for the fixed prefix's saved state.

It also checks what the shortcut claims: that the answer shown again is the text the model writes
for that prompt (with the fixed seed), by comparing the two runs' texts.

    .venv/bin/python scripts/bench_columns.py --json columns.json
"""

from __future__ import annotations

import bench_common as bc

bc.pin_threads(2)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402


def ask(svc: Any, question: str, keep: bool) -> dict[str, Any]:
    """One question through QuestionFlow: per column, seconds to its first token and to its answer."""
    from rag_desktop.app import flow_events as fe
    from rag_desktop.app.question_flow import QuestionFlow

    answer = type(svc).answer

    def written_again(*a: Any, **k: Any) -> Any:
        svc._written = []  # the previous build kept no answer
        svc.runtime.generator()._cache.forget()  # nor what the last prompt read (only the prefix's state)
        return answer(svc, *a, **k)

    if not keep:
        svc.answer = written_again
    svc._written = []  # nothing kept from the question before
    svc.runtime.generator()._cache.forget()
    t0 = time.perf_counter()
    first: dict[str, float] = {}
    done: dict[str, dict[str, Any]] = {}
    leads: list[str] = []  # one per group of columns the flow answers
    try:
        for ev in QuestionFlow(svc, question, highlights=False, prepare=False).events(cfrag=False):
            now = time.perf_counter() - t0
            if isinstance(ev, fe.AnswerProgress) and ev.group.lead not in leads:
                leads.append(ev.group.lead)
            elif isinstance(ev, fe.Token) and ev.text.strip():
                for m in ev.group.members:
                    first.setdefault(m, now)
            elif isinstance(ev, fe.AnswerDone):
                done[ev.column] = {"first_token_s": round(first.get(ev.column, now), 2), "done_s": round(now, 2),
                                   "group": len(leads) - 1,
                                   "shared_from": ev.shared_from, "text": ev.answer.text,
                                   "abstained": ev.answer.abstained}
    finally:
        if not keep:
            del svc.answer
    return done


def first_token(gen: Any, msgs: Any) -> float:
    """Seconds to the first token of ``msgs`` from a cache holding only the fixed prefix's saved state."""
    from rag_desktop.core.types import GenEventKind

    gen._cache.forget()
    t0 = time.perf_counter()
    for ev in gen.stream(msgs, max_tokens=4, temperature=0.0, seed=0):
        if ev.kind == GenEventKind.TOKEN and ev.text.strip():
            return time.perf_counter() - t0
    return time.perf_counter() - t0


def pieces(svc: Any, question: str, i: int) -> dict[str, Any]:
    """The first column's prompt read in pieces (this build) and in one (its breaks dropped), interleaved
    in the order given by the question's place: what reading in pieces costs the first token."""
    import dataclasses

    from rag_desktop.app.answer_prompt import answer_prompt
    from rag_desktop.backends.llama_segments import cuts
    from rag_desktop.core import prompting

    comp = svc.compare(question, translate=False)
    gen = svc.runtime.generator()
    p = answer_prompt(svc, gen, question, comp.answer_list(comp.first_column), prompting.ANSWER_SOURCES,
                      svc.settings.generation.passages, None)
    whole = (*p.messages[:-1], dataclasses.replace(p.messages[-1], breaks=()))

    def render(ms: Any) -> list[int]:
        return gen._prompt(gen._llm, ms)[0]

    n_pieces = len(cuts(render, p.messages, render(p.messages))) + 1  # the last one read by create_chat_completion
    order = [("in pieces s", p.messages), ("in one s", whole)]
    times = {k: round(first_token(gen, m), 2) for k, m in (order if i % 2 == 0 else order[::-1])}
    return {"question": question[:32], "prompt tokens": p.tokens(gen), "pieces": n_pieces, **times}


def needs(svc: Any, question: str, i: int) -> dict[str, Any] | None:
    """"Which sources does it need?" for the first column's answer, its re-answers keeping the sources
    they share with the prompt before (this build) or reading from the prefix state (before); each mode
    starts right after the answer was written, the order alternating. None when nothing is cited."""
    from rag_desktop.app.service import first_answer
    from rag_desktop.app.source_needs import source_needs
    from rag_desktop.core.needs import SourceNeed

    gen = svc.runtime.generator()
    stream = type(gen).stream
    times: dict[str, float] = {}
    verdicts: dict[str, tuple[bool, ...]] = {}
    for keep in ((True, False) if i % 2 == 0 else (False, True)):
        svc._written = []  # written again: its prompt is what the cache holds when the re-answers start
        answer = first_answer(svc, question)
        if answer is None or not answer.citations:
            return None

        def forgetting(*a: Any, **k: Any) -> Any:
            gen._cache.forget()
            return stream(gen, *a, **k)

        if not keep:
            gen.stream = forgetting
        try:
            t0 = time.perf_counter()
            out = [e for e in source_needs(gen, svc.settings.generation, question, answer)
                   if isinstance(e, tuple)][-1]
            times["kept" if keep else "from prefix"] = round(time.perf_counter() - t0, 2)
            verdicts["kept" if keep else "from prefix"] = tuple(n.needed for n in out if isinstance(n, SourceNeed))
        finally:
            if not keep:
                del gen.stream
    return {"question": question[:32], "cited": len(next(iter(verdicts.values()))), **{f"{k} s": v for k, v in
            times.items()}, "same verdicts": len(set(verdicts.values())) == 1}


def prefix_memory(svc: Any) -> dict[str, Any]:
    """What the answer prefixes' saved states hold in memory after the window's launch step
    (RagService.prepare_generator): their key/value cells as kept (llama_segments.SeqState), against
    Llama.save_state of the same prefixes (what was kept before), with the process's RSS growth."""
    from rag_desktop.backends.llama_segments import load_seq

    rss0 = bc.proc_status_kb("VmRSS") or 0
    list(svc.prepare_generator())
    gen = svc.runtime.generator()
    rss1 = bc.proc_status_kb("VmRSS") or 0
    states = list(gen._cache.states.values())
    full = []
    for st in states:  # the same prefixes kept the previous way
        load_seq(gen._llm, st)
        full.append(gen._llm.save_state())
    rss2 = bc.proc_status_kb("VmRSS") or 0
    return {"prefixes": len(states), "tokens": [len(st.tokens) for st in states],
            "kept MB": round(sum(len(st.data) for st in states) / 2**20, 1),
            "save_state MB": round(sum(f.llama_state_size + f.scores.nbytes for f in full) / 2**20, 1),
            "RSS growth, model and prefixes kept MB": round((rss1 - rss0) / 1024, 1),
            "RSS growth, the same as save_state MB": round((rss2 - rss1) / 1024, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bc.qa_arguments(ap)
    ap.add_argument("--pieces", action="store_true",
                    help="instead: the first column's first token with its prompt read in pieces and in one")
    ap.add_argument("--needs", action="store_true",
                    help="instead: 'which sources does it need?' keeping the shared sources or not")
    ap.add_argument("--prefix-memory", action="store_true",
                    help="instead: the memory the answer prefixes' saved states take after launch")
    args, machine, t_all, svc, questions = bc.start_qa(ap, lambda a: "bench_columns: the second answer column")
    rows: list[dict[str, Any]] = []
    try:
        if args.prefix_memory:
            res = prefix_memory(svc)
            print("   ", res)
            bc.finish(res, machine, t_all, ["llama_cpp_python"], args.json)
            return 0
        list(svc.prepare_generator())  # as the window does at launch
        if args.needs:
            found = [needs(svc, q, i) for i, q in enumerate(questions)]
            rows = [r for r in found if r is not None]
            print(bc.table(rows, ["question", "cited", "kept s", "from prefix s", "same verdicts"]))
            ratio = sum(r["kept s"] for r in rows) / sum(r["from prefix s"] for r in rows)
            print(f"\nall re-answers: kept / from the prefix state {ratio:.3f}")
            bc.finish({"rows": rows, "ratio": ratio}, machine, t_all, ["llama_cpp_python"], args.json)
            return 0
        if args.pieces:
            rows = [pieces(svc, q, i) for i, q in enumerate(questions)]
            for r in rows:
                print("   ", r, flush=True)
            ratio = statistics.median(r["in pieces s"] / r["in one s"] for r in rows)
            print(bc.table(rows, ["question", "prompt tokens", "pieces", "in pieces s", "in one s"]))
            print(f"\nfirst token, prompt read in pieces / in one: median {ratio:.3f}")
            bc.finish({"rows": rows, "ratio": ratio}, machine, t_all, ["llama_cpp_python"], args.json)
            return 0
        for i, q in enumerate(questions):
            runs: dict[str, dict[str, Any]] = {}
            for keep in ((True, False) if i % 2 == 0 else (False, True)):
                runs["kept" if keep else "written"] = ask(svc, q, keep)
            kept, written = runs["kept"], runs["written"]
            columns = [c for c in kept if c in written]
            groups = 1 + max((kept[c]["group"] for c in columns), default=0)
            t_first = max((kept[c]["done_s"] for c in columns if kept[c]["group"] == 0), default=0.0)
            # a later group's answer that came within a second of the first: shown again, not written
            again = [c for c in columns if kept[c]["group"] > 0 and kept[c]["done_s"] - t_first < 1.0]
            row = {"question": q[:32], "groups": groups, "shown again": ",".join(again) or "-",
                   "same text": all(kept[c]["text"] == written[c]["text"] for c in columns),
                   "all done, written s": max((written[c]["done_s"] for c in columns), default=0.0),
                   "all done, kept s": max((kept[c]["done_s"] for c in columns), default=0.0),
                   "first token s": min((kept[c]["first_token_s"] for c in columns), default=0.0),
                   "runs": runs}
            rows.append(row)
            print("   ", {k: v for k, v in row.items() if k != "runs"}, flush=True)
    finally:
        svc.close()
        svc.runtime.close()
    cols = ["question", "groups", "shown again", "same text", "first token s", "all done, written s",
            "all done, kept s"]
    print(bc.table(rows, cols))
    shared = [r for r in rows if r["shown again"] != "-"]
    if rows:
        w = statistics.median(r["all done, written s"] for r in rows)
        k = statistics.median(r["all done, kept s"] for r in rows)
        print(f"\nboth columns answered: median {w:.1f} s written, {k:.1f} s kept ({k / w:.2f}x); "
              f"a column shown again on {len(shared)} of {len(rows)} questions; "
              f"texts equal on {sum(r['same text'] for r in rows)} of {len(rows)}")
    bc.finish({"rows": rows}, machine, t_all, ["llama_cpp_python"], args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
