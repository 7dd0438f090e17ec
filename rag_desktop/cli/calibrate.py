"""``calibrate``: the corpus-level gate of paper 000 §4.6 for one library, printed or as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from rag_desktop.app.auto_gate import cancel_auto, describe, run_auto
from rag_desktop.app.calibration import run_calibrate
from rag_desktop.app.service import RagService
from rag_desktop.cli.common import service, stage_progress_line
from rag_desktop.core.gate import MIN_PROBES_FOR_RELIABILITY
from rag_desktop.core.types import Cancelled, Progress


def cmd_calibrate(args: argparse.Namespace) -> int:
    return calibrate_command(args, service(args))


def _quiet(_: Progress) -> None:
    pass


def calibrate_command(args: argparse.Namespace, svc: RagService) -> int:
    """``calibrate`` on ``svc`` (closed at the end)."""
    if getattr(args, "auto", False) or getattr(args, "cancel", False):
        return _auto(args, svc)
    probes_file = getattr(args, "probes_file", None)
    try:
        if not probes_file:
            print(
                "rag-desktop calibrate: give --probes-file FILE.jsonl with typed, labelled questions, "
                "or --auto (the local model writes and labels probes)",
                file=sys.stderr,
            )
            return 2
        report = run_calibrate(svc, probes_file)
    finally:
        svc.close()
    decision = report.decision
    if decision is None:
        print("rag-desktop calibrate: no usable probes", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        print(
            f"decision: {decision.decision} (reliability {decision.reliability:.1%} over "
            f"{decision.n_draws} bootstrap draws, {decision.n_probes} probes)"
        )
        print(
            f"MRR@10 baseline {decision.mean_baseline:.3f}, causal {decision.mean_causal:.3f} "
            f"(Δ {decision.delta_causal:+.3f}), hybrid {decision.mean_hybrid:.3f} (Δ {decision.delta_hybrid:+.3f})"
        )
    if decision.n_probes < MIN_PROBES_FOR_RELIABILITY:
        print(
            f"rag-desktop calibrate: only {decision.n_probes} probes were scored; the reliability is not "
            f"meaningful below {MIN_PROBES_FOR_RELIABILITY} (use --probes N or add questions)",
            file=sys.stderr,
        )
    return 0


def _auto(args: argparse.Namespace, svc: RagService) -> int:
    """``calibrate --auto`` (also the background process after an ingest) and ``--cancel``."""
    try:
        if args.cancel:
            print(f"cancel requested: {cancel_auto(svc)}")
            return 0
        try:
            report = run_auto(svc, args.probes, on_progress=_quiet if args.json else stage_progress_line)
        except Cancelled:
            print("rag-desktop calibrate: cancelled; run it again to resume", file=sys.stderr)
            return 130
    finally:
        svc.close()
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        print(f"decision: {describe(report.gate)} in {report.seconds} s")
    return 0
