"""``ingest``, ``compare`` and ``answer``: one library, one question, printed for a terminal or as JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rag_desktop.app.flow_events import Abstained, AnswerDone, CFDone, Token
from rag_desktop.app.library import IngestReport
from rag_desktop.app.question_flow import QuestionFlow
from rag_desktop.cli.common import ProgressBar, abstained_line, print_json, service, terminal_safe
from rag_desktop.core.cfrag import cfrag_result
from rag_desktop.core.cfrag.plain import plain_text
from rag_desktop.core.cfrag.types import to_jsonable
from rag_desktop.core.needs import SourceNeed
from rag_desktop.core.types import Answer, Progress, RankedList


def cmd_ingest(args: argparse.Namespace) -> int:
    svc = service(args)
    bar = ProgressBar()  # stderr only: also with --json
    report: IngestReport | None = None
    gate = ""  # what the calibration gate decided at the end, when it ran (app.library_gate)
    try:
        for ev in svc.ingest(args.folders, reembed=args.reembed, calibrate_after=not args.no_calibrate):
            if isinstance(ev, Progress):
                bar.update(ev)
                if ev.stage == "gate" and ev.current == ev.total:
                    gate = ev.message
            else:
                report = ev
    except KeyboardInterrupt:
        bar.done()
        print("rag-desktop: interrupted; files committed so far are kept, run ingest again to finish", file=sys.stderr)
        for path, n in svc.library.catalog.staged_counts().items():
            print(f"rag-desktop: {terminal_safe(path)}: {n:,} chunks embedded and kept (not searchable yet); "
                  "the next ingest embeds only the rest", file=sys.stderr)
        return 130
    finally:
        bar.done()
        svc.close()
    assert report is not None
    if args.json:
        print_json(report.to_json())
        return 0
    print(
        f"added {len(report.added)}, updated {len(report.updated)}, removed {len(report.removed)}, "
        f"unchanged {len(report.unchanged)}, skipped {len(report.skipped)} ({report.seconds:.1f}s)"
    )
    if gate:
        print(f"calibration gate: {gate}")
    for name in report.removed:
        print(f"  removed {terminal_safe(name)}")
    for p in report.skipped:
        print(f"  skipped {terminal_safe(p.path)}: {terminal_safe(p.reason)}")
    for p in report.warnings:
        print(f"  warning {terminal_safe(p.path)}: {terminal_safe(p.reason)}")
    return 0


def _ranking_lines(r: RankedList, width: int = 60) -> list[str]:
    lines = []
    for h in r.hits:
        title = terminal_safe(h.title or Path(h.path).name)[: width - 18]
        lines.append(f"{h.rank:>2}. {title:<{width - 18}} p{h.page:<4} {h.s_sim:6.3f}")
    return lines


def cmd_compare(args: argparse.Namespace) -> int:
    svc = service(args)
    try:
        flow = QuestionFlow(svc, args.question, level=args.level, k=args.k, ranking=args.ranking, highlights=False)
        cmp = flow.retrieve(translate=True).comparison
        if args.cfrag:
            cmp = type(cmp)(**{**cmp.__dict__, "cfrag": cfrag_result(svc.cfrag(args.question))})
    finally:
        svc.close()
    if args.json:
        print_json(cmp.to_json())
        return 0
    left = ["BASELINE", *_ranking_lines(cmp.baseline)]
    right = [cmp.causal.label.upper() or "CAUSAL"]
    base_rank = {h.unit_id: h.rank for h in cmp.baseline.hits}
    for h in cmp.causal.hits:
        # Across languages a fused causal list may hold a candidate just below the fused baseline's k.
        old = base_rank.get(h.unit_id)
        move = 0 if old is None else old - h.rank
        arrow = "new" if old is None else (f"▲{move}" if move > 0 else (f"▼{-move}" if move < 0 else " ="))
        right.append(f"{h.rank:>2}. {terminal_safe(h.title or Path(h.path).name)[:40]:<40} {arrow}")
    for a, b in zip(left, right, strict=False):
        print(f"{a:<62} | {b}")
    print(
        f"\nτ = {cmp.tau:.3f} ({cmp.tau_source}); A-share {cmp.diagnostics.a_share}; "
        f"empty B in {cmp.diagnostics.n_empty_b} of {cmp.diagnostics.window}"
    )
    print(f"causal column: {cmp.verdict.get('text', '')}")
    if cmp.cross_language is not None and cmp.cross_language.describe():
        print(f"across languages: {terminal_safe(cmp.cross_language.describe())}")
    for w in cmp.causal.warnings:
        print(f"warning: {terminal_safe(w)}")
    if cmp.cfrag is not None:
        print(f"\nCF-RAG: {terminal_safe(cmp.cfrag.answer.text, keep_newlines=True)}")
    return 0


def cmd_answer(args: argparse.Namespace) -> int:
    """One column's answer, or CF-RAG's, through the window's own flow (app.question_flow): the
    same steps, run one after the other, with no model preparation step and no highlights."""
    svc = service(args)
    flow = QuestionFlow(svc, args.question, highlights=False, prepare=False)
    try:
        if args.method == "cfrag":
            events = list(flow.cfrag())
            if events and isinstance(events[-1], Abstained):  # CF-RAG did not run
                return _print_answer(events[-1].answer, args.json)
            res = cfrag_result(e.result for e in events if isinstance(e, CFDone))
            if args.json:  # the run in plain words beside its numbers (core.cfrag.plain)
                print_json({**to_jsonable(res), "trace_plain": plain_text(res.trace)})
                return 0
            print(terminal_safe(res.answer.text, keep_newlines=True))
            _print_sources(res.answer)
            print("\nHow CF-RAG reached it:")
            for line in plain_text(res.trace):  # the model's questions and the titles: made safe
                print(f"  • {terminal_safe(line)}")
            print("\n" + summarize_trace(res))
            return 0
        comparison = flow.retrieve(translate=True).comparison
        group = flow.group_for(comparison, "baseline" if args.method == "baseline" else "causal")
        answer: Answer | None = None
        for ev in flow.answer(group):
            if isinstance(ev, Token) and not args.json:
                sys.stdout.write(terminal_safe(ev.text, keep_newlines=True))
                sys.stdout.flush()
            elif isinstance(ev, AnswerDone):
                answer = ev.answer
        assert answer is not None
        needs: tuple[SourceNeed, ...] | None = None
        if args.needs and not answer.abstained:
            needs = next(r for r in svc.source_needs(args.question, answer) if isinstance(r, tuple))
    finally:
        svc.close()
    return _print_answer(answer, args.json, needs)


def _print_answer(answer: Answer, as_json: bool, needs: tuple[SourceNeed, ...] | None = None) -> int:
    if as_json:
        out = to_jsonable(answer)
        if needs is not None:
            out["needs"] = to_jsonable(needs)
        out["abstained"] = answer.abstained
        out["abstain_reason"] = answer.abstention.reason if answer.abstention is not None else ""
        if answer.abstention is not None:  # with the derived coverage and lift, as core.abstain words them
            out["abstention"] = answer.abstention.as_json()
        print_json(out)
        return 0
    if answer.abstained:
        if answer.text:  # decided on the answer streamed above (core.abstain.after_answer)
            print()
        print(abstained_line(answer))
        if answer.sources:  # the passages the model judged
            _print_sources(answer)
        return 0
    print()
    _print_sources(answer)
    for need in needs or ():
        verdict = "needed: without it the answer changes" if need.needed else "not needed: the answer stays"
        print(f"  [{need.n}] {verdict} (agreement {need.agreement:.2f}, {need.seconds:.1f} s)")
    return 0


def _print_sources(answer: Answer) -> None:
    print("\nSources:")
    for i, h in enumerate(answer.sources, start=1):
        loc = answer.locators[i - 1] if i - 1 < len(answer.locators) else None
        where = f" — {terminal_safe(loc.heading)}" if loc is not None and loc.heading else ""
        page = (loc.page_label if loc is not None else "") or str(h.page)
        print(f"  [{i}] {terminal_safe(h.title or Path(h.path).name)}{where} — page {terminal_safe(page)} "
              f"({terminal_safe(h.path)})")
    bad = [c.n for c in answer.citations if not c.valid]
    if bad:
        print(f"  note: the answer cites {bad}, which were not among the sources given to the model")
    if "unsupported" in answer.warnings:
        print("  note: no passage the model read holds this answer; check it against the sources")
    if "doubted" in answer.warnings:
        print("  note: asked after writing it, the model judged that these passages may not hold the answer; check it")
    if answer.asked_as:  # app.asked_across
        print(f"  note: the passages in the question's language were about something else; answered from the "
              f"documents in the other language, asked as: {terminal_safe(answer.asked_as)}")


def summarize_trace(res: Any) -> str:
    """A readable summary of a CF-RAG trace for the terminal."""
    t = res.trace
    lines = ["CF-RAG trace:"]
    for cf in getattr(t, "counterfactuals", ()):
        status = "kept" if getattr(cf, "kept", False) else f"rejected ({getattr(cf, 'reason', '')})"
        lines.append(f"  q' {terminal_safe(status)}: {terminal_safe(str(getattr(cf, 'text', cf)))}")
    for h in getattr(t, "hypotheses", ()):
        answer = terminal_safe(repr(getattr(h, "answer", "")))
        lines.append(f"  hypothesis: {answer} Ψ={getattr(h, 'psi', float('nan')):.3f}")
    lines.append(f"  decision: {terminal_safe(str(getattr(t, 'decision', '')))}")
    return "\n".join(lines)
