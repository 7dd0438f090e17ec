"""``eval`` (retrieval, BEIR format) and ``eval-qa`` (answers, EM/F1): the tables the app's reports print as."""

from __future__ import annotations

import argparse
import json
import sys

from rag_desktop.cli.common import ingest_progress_line


def _methods(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if text is None:  # --methods not given: the app's default
        return default
    return tuple(m.strip() for m in text.split(",") if m.strip())


def print_table(table: dict[str, dict[str, float]]) -> None:
    cols = ["nDCG@10", "P@5", "MRR@10", "mean_first_relevant_rank", "mean_target_rank", "mean_stuffing_rank"]
    cols = [c for c in cols if any(c in row for row in table.values())]
    heads = ["method", "nDCG@10", "P@5", "MRR@10", "1st rel", "target", "stuffing"][: len(cols) + 1]
    print("  ".join(f"{h:>14}" for h in heads))
    for m, row in table.items():
        print("  ".join([f"{m:>14}"] + [f"{row.get(c, float('nan')):>14.3f}" for c in cols]))


def cmd_eval(args: argparse.Namespace) -> int:
    from rag_desktop.app.evaluation import DEFAULT_METHODS, EvalOptions, run_eval

    opts = EvalOptions(data=args.data, methods=_methods(args.methods, DEFAULT_METHODS), k=args.k, level=args.level,
                       keywords=args.keywords, library=args.library,
                       cross_language=None if args.cross_language is None else args.cross_language == "on")
    report = run_eval(opts, on_progress=ingest_progress_line)
    print_table(report.table)
    gate = report.gate
    if gate is not None:
        print(
            f"gate (§4.6, these queries as labelled probes, MRR@10): {gate.decision} — reliability "
            f"{gate.reliability:.0%} over {gate.n_draws} bootstrap draws; Δ causal {gate.delta_causal:+.3f}, "
            f"Δ hybrid {gate.delta_hybrid:+.3f}"
        )
    for n in report.notes:
        print(f"note: {n}")
    if report.translations:
        secs = [t["seconds"] for t in report.translations.values() if t["status"] == "fused"]
        statuses = sorted({t["status"] for t in report.translations.values()})
        print(f"across languages: {len(secs)} of {len(report.translations)} questions translated and fused "
              f"({', '.join(statuses)})" + (f"; {sum(secs) / len(secs):.1f} s per translation" if secs else ""))
    if args.json_out:
        args.json_out.write_text(json.dumps(report.to_json(), ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


def cmd_eval_qa(args: argparse.Namespace) -> int:
    from rag_desktop.app.qa_eval import DEFAULT_QA_METHODS, AnswerTimed, QAEvalOptions, run_qa_eval

    def answered(a: AnswerTimed) -> None:
        print(f"{a.method}: {a.done}/{a.total} ({a.seconds:.1f}s)", file=sys.stderr, flush=True)

    opts = QAEvalOptions(data=args.data, methods=_methods(args.methods, DEFAULT_QA_METHODS), limit=args.limit,
                         distractors=args.distractors, docs=args.docs, generator=args.generator,
                         json_out=args.json_out, seed=args.seed, replay=args.replay, replay_store=args.replay_store,
                         passages_as_standard=args.passages_as_standard,
                         cross_language=None if args.cross_language is None else args.cross_language == "on")
    table = run_qa_eval(opts, on_progress=ingest_progress_line, on_answer=answered).table
    keys = list(dict.fromkeys(k for row in table.values() for k in row))
    print(f"{'method':>16} " + " ".join(f"{k:>18}" for k in keys))
    for m, row in table.items():
        print(f"{m:>16} " + " ".join(f"{row.get(k, float('nan')):>18.3f}" for k in keys))
    return 0
