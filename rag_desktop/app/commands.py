"""The CLI's subcommands: thin wrappers over RagService that print for a terminal or as JSON."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from rag_desktop.app.catalog import CatalogError, printable
from rag_desktop.app.config import default_library_dir, load_settings, model_dir
from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.core.cfrag import cfrag_result
from rag_desktop.core.cfrag.types import to_jsonable
from rag_desktop.core.types import Answer, GenEvent, GenEventKind, Progress, RankedList


class UserError(Exception):
    """A problem the user can fix; printed without a traceback."""


# Errors whose message already says what is wrong and what to do: the CLI prints them
# as one line (exit 2) instead of a traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, CatalogError, ModelUnavailable, ValueError)


def print_json(obj: Any, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    json.dump(obj, stream, ensure_ascii=False, indent=2)
    stream.write("\n")


def _service(args: argparse.Namespace) -> RagService:
    settings = load_settings()
    lib = getattr(args, "library", None) or default_library_dir()
    return RagService(Path(lib), settings)


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def terminal_safe(text: str, keep_newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\n``, ``\\u202e``).

    Titles, file names and passages come from documents: an ESC/OSC sequence in one recolours
    the terminal or sets its title, BEL rings, a C1 CSI (U+009B) is an ESC [ to some
    terminals, a bidi override reorders what is shown, and a newline in a file name forges
    an output line (issue 15, item 6). ``keep_newlines`` keeps line breaks for text that is
    meant to have lines (an answer). Undecodable file-name bytes become U+FFFD.
    """
    text = printable(text)

    def escape(m: re.Match[str]) -> str:
        c = m.group()
        if keep_newlines and c == "\n":
            return c
        if c in _NAMED:
            return _NAMED[c]
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"

    return _UNSAFE.sub(escape, text)


class ProgressBar:
    """Progress on stderr through tqdm, shown only when stderr is a terminal, so stdout stays
    clean for ``--json`` and logs of a redirected run get no bar. One bar, reset whenever the
    stage or its total changes (files scanned, then the chunks of one file being embedded):
    tqdm's rate and ETA then describe the work in progress, not the whole run."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.plain = enabled and not self.enabled  # stderr is a log, not a terminal: plain lines
        self._bar: Any = None
        self._key: tuple[str, int, str] | None = None

    def update(self, ev: Progress) -> None:
        if not self.enabled or ev.total <= 0:
            return
        from tqdm import tqdm

        key = (ev.stage, ev.total, ev.path)
        if self._bar is None:
            try:
                size = os.get_terminal_size(sys.stderr.fileno())
            except OSError:
                size = os.terminal_size((0, 0))
            # A terminal that reports a 0×0 size (a fresh pty, some CI consoles) makes tqdm hide the bar.
            sized = size.columns > 0 and size.lines > 0
            self._bar = tqdm(total=ev.total, desc=ev.stage, file=sys.stderr, leave=False, unit="", dynamic_ncols=sized,
                             ncols=None if sized else 100, nrows=None if sized else 24)
        if key != self._key:
            self._key = key
            self._bar.reset(total=ev.total)
            self._bar.set_description_str(ev.stage)
        self._bar.set_postfix_str(terminal_safe(ev.message)[:60], refresh=False)
        self._bar.update(max(0, min(ev.current, ev.total) - self._bar.n))

    def done(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def cmd_ingest(args: argparse.Namespace) -> int:
    svc = _service(args)
    bar = ProgressBar()  # stderr only: also with --json
    report: IngestReport | None = None
    try:
        for ev in svc.ingest(args.folders, reembed=args.reembed, calibrate_after=not args.no_calibrate):
            if isinstance(ev, Progress):
                bar.update(ev)
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
    svc = _service(args)
    try:
        cmp = svc.compare(args.question, level=args.level, k=args.k, ranking=args.ranking)
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
        move = base_rank[h.unit_id] - h.rank
        arrow = f"▲{move}" if move > 0 else (f"▼{-move}" if move < 0 else " =")
        right.append(f"{h.rank:>2}. {terminal_safe(h.title or Path(h.path).name)[:40]:<40} {arrow}")
    for a, b in zip(left, right, strict=False):
        print(f"{a:<62} | {b}")
    print(
        f"\nτ = {cmp.tau:.3f} ({cmp.tau_source}); A-share {cmp.diagnostics.a_share}; "
        f"empty B in {cmp.diagnostics.n_empty_b} of {cmp.diagnostics.window}"
    )
    print(f"causal column: {cmp.verdict.get('text', '')}")
    for w in cmp.causal.warnings:
        print(f"warning: {terminal_safe(w)}")
    if cmp.cfrag is not None:
        print(f"\nCF-RAG: {terminal_safe(cmp.cfrag.answer.text, keep_newlines=True)}")
    return 0


def cmd_answer(args: argparse.Namespace) -> int:
    svc = _service(args)
    try:
        if args.method == "cfrag":
            res = cfrag_result(svc.cfrag(args.question))
            if args.json:
                print_json(to_jsonable(res))
                return 0
            print(terminal_safe(res.answer.text, keep_newlines=True))
            _print_sources(res.answer)
            print("\n" + summarize_trace(res))
            return 0
        ctx = svc.compare(args.question)
        ranked = ctx.baseline if args.method == "baseline" else ctx.causal
        answer: Answer | None = None
        for ev in svc.answer(args.question, ranked):
            if isinstance(ev, GenEvent):
                if ev.kind == GenEventKind.TOKEN and not args.json:
                    sys.stdout.write(terminal_safe(ev.text, keep_newlines=True))
                    sys.stdout.flush()
            elif isinstance(ev, Answer):
                answer = ev
    finally:
        svc.close()
    assert answer is not None
    if args.json:
        print_json(to_jsonable(answer))
        return 0
    print()
    _print_sources(answer)
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


def cmd_chat(args: argparse.Namespace) -> int:
    from rag_desktop.app.chat import cmd_chat as run

    return run(args, _service(args))


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


def cmd_eval(args: argparse.Namespace) -> int:
    from rag_desktop.app.evaluation import run_eval

    return run_eval(args)


def cmd_eval_qa(args: argparse.Namespace) -> int:
    from rag_desktop.app.evaluation import run_eval_qa

    return run_eval_qa(args)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from rag_desktop.app.calibration import run_calibrate

    return run_calibrate(args, _service(args))
