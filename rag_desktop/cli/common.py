"""What every command of the CLI shares: the service for ``--library``, JSON and terminal-safe text, a progress bar."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from rag_desktop.app.catalog import printable
from rag_desktop.app.config import default_library_dir, load_settings
from rag_desktop.app.service import RagService
from rag_desktop.core.prompting import LANG_NAMES
from rag_desktop.core.types import Answer, Progress


def print_json(obj: Any, out: TextIO | None = None) -> None:
    stream = out or sys.stdout
    json.dump(obj, stream, ensure_ascii=False, indent=2)
    stream.write("\n")


def service(args: argparse.Namespace) -> RagService:
    """The service for the command's ``--library`` (default: the user's default library)."""
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
    an output line. ``keep_newlines`` keeps line breaks for text that is
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


def ingest_progress_line(ev: Progress) -> None:
    """The one-line ingest counter of ``eval`` and ``eval-qa`` (only on a terminal)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\ringesting {ev.current}/{ev.total}   ")


# What the CLI prints when the answer abstained (core.abstain): the library holds no answer, by its
# words ("off_topic") or by the model's judgement of the passages it would read ("not_held").
ABSTAINED_LINE = ("Not in your documents: none of the question's words occur in this library and no "
                  "passage stands out from the rest. (generation.abstain = false answers anyway.)")
NOT_HELD_LINE = ("Not in your documents: the model read the passages below and judged that they do not hold "
                 "the answer (P(yes) {yes}). (generation.judge_passages = \"warn\" answers and marks it.)")

UNRELATED_LINE = ("Not in your documents: the passages below make the question no more expected than no passages do "
                  "({lift:+.2f} per token; they are about something else). (generation.check_relevance = false "
                  "answers anyway.)")


# Decided on the written answer (core.abstain.after_answer), which was printed as it streamed.
UNHELD_LINE = ("Not in your documents: the model judged that the passages below do not hold the answer (P(yes) "
               "{yes}), and none of them holds what it wrote above.")
SAID_NOT_FOUND_LINE = "Not in your documents: so says the answer above, written from the passages below."
OTHER_LANGUAGE_LINE = (" The library also holds documents in {lang}, which a question in another language reaches only "
                       "through its translation: ask it in {lang}, or set retrieval.cross_language = true.")


def abstained_line(answer: Answer) -> str:
    """The line that says why ``answer`` abstained."""
    a = answer.abstention
    where = OTHER_LANGUAGE_LINE.format(lang=LANG_NAMES["en"].get(a.other_language, a.other_language)) \
        if a is not None and a.other_language else ""
    if a is not None and a.written:
        line = UNHELD_LINE if a.reason == "unheld" else SAID_NOT_FOUND_LINE
        yes = "–" if a.judged_yes is None else f"{a.judged_yes:.0%}"
        return line.format(yes=yes) + where
    if a is not None and a.reason == "unrelated" and a.question_lift is not None:
        return UNRELATED_LINE.format(lift=a.question_lift) + where
    if a is not None and a.reason == "not_held" and a.judged_yes is not None:
        return NOT_HELD_LINE.format(yes=f"{a.judged_yes:.0%}")
    return ABSTAINED_LINE
