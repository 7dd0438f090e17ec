"""``models`` (join and verify the embedded models) and ``doctor`` (is every model and backend ready)."""

from __future__ import annotations

import argparse
import sys

from rag_desktop.app.config import load_settings, model_dir
from rag_desktop.cli.common import ProgressBar, print_json, terminal_safe


def cmd_models(args: argparse.Namespace) -> int:
    from rag_desktop.app import model_files

    settings = load_settings()
    bar = ProgressBar()  # stderr only: also with --json
    spec = model_files.embedded_spec(settings.models.generator) or model_files.QWEN_1_5B
    tenth = -1
    for ev in model_files.ensure_joined(spec, model_dir(settings)):
        bar.update(ev)
        if bar.plain and ev.total > 0 and (step := 10 * ev.current // ev.total) != tenth:
            tenth = step  # not a terminal (bootstrap.sh's log): one line per 10 %
            eta = f", about {ev.eta_s:.0f} s left" if ev.eta_s else ""
            print(f"{ev.message}: {ev.current / 1e6:,.0f} of {ev.total / 1e6:,.0f} MB{eta}", file=sys.stderr)
    bar.done()
    if getattr(args, "join_only", False):
        return 0
    return cmd_doctor(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    from rag_desktop.app.doctor import run_doctor

    report = run_doctor(load_settings())
    if args.json:
        print_json(report)
    else:
        for item in report["checks"]:
            mark = "ok " if item["ready"] else "!! "
            print(f"{mark}{item['name']:<22} {terminal_safe(item['detail'])}")
            if not item["ready"] and item.get("hint"):
                print(f"   {'':<22} → {terminal_safe(item['hint'])}")
    return 0 if report["ready"] else 1
