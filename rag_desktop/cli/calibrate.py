"""``calibrate``: the corpus-level gate of paper 000 §4.6 for one library, printed or as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from rag_desktop.app.calibration import run_calibrate
from rag_desktop.app.service import RagService
from rag_desktop.cli.common import service
from rag_desktop.core.gate import MIN_PROBES_FOR_RELIABILITY


def cmd_calibrate(args: argparse.Namespace) -> int:
    return calibrate_command(args, service(args))


def calibrate_command(args: argparse.Namespace, svc: RagService) -> int:
    """``calibrate`` on ``svc`` (closed at the end)."""
    probes_file = getattr(args, "probes_file", None)
    try:
        if not probes_file:
            print(
                "rag-desktop calibrate: give --probes-file FILE.jsonl with typed, labelled questions "
                "(the library's own check runs at the end of every ingest)",
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
            f"meaningful below {MIN_PROBES_FOR_RELIABILITY} (add questions to the probes file)",
            file=sys.stderr,
        )
    return 0

