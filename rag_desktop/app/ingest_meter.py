"""How much of an ingest is done and how long the rest takes, for the one progress bar a person watches.

Each step of the ingest reports its own counts (files scanned, a file's OCR pages, a file's chunks
embedded); none of them is the whole job, so a bar driven by them restarted at 0 % for every file and
could read 100 % while files remained. The meter turns them into one figure:

* **weight** — a file's share of the work is its size in bytes, known from one ``stat`` before the
  first file is read; a file whose size and modification time match the library weighs nothing (it
  is skipped in milliseconds). Bytes are a proxy: pages and chunks grow with them, and they are known
  before the file is opened.
* **within a file** — parsing (and OCR) is the first PARSE_SHARE of its weight, embedding the rest,
  in proportion to the chunks embedded (the step that dominates on a CPU).
* **time left** — elapsed × (1 − done) / done: the throughput measured so far, extrapolated over what
  is left; none until MIN_SECONDS have passed and MIN_DONE of the work is done (an early guess from
  one small file is noise).
* never 1.0 before :meth:`IngestMeter.finish`: work remains until the last file is stored.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from rag_desktop.app.catalog import FileState, encode_path
from rag_desktop.core.types import Progress

PARSE_SHARE = 0.1
MIN_SECONDS = 2.0
MIN_DONE = 0.02
ALMOST = 0.999  # the most the bar shows while any work remains

T = TypeVar("T")


@dataclass
class IngestMeter:
    sizes: dict[str, int]  # file key → bytes, for the files that need reading
    t0: float = field(default_factory=time.monotonic)
    _done: float = 0.0  # bytes of the files finished
    _finished: set[str] = field(default_factory=set)
    # The sizes do not change once the ingest knows them: summed once, not on every event of every file.
    total: int = field(init=False)

    def __post_init__(self) -> None:
        self.total = sum(self.sizes.values())

    def share(self, key: str, within: float = 0.0) -> float:
        """The whole job's share done with ``key``'s file ``within`` (0..1) of the way through."""
        total = self.total
        if total <= 0:
            return ALMOST
        part = 0.0 if key in self._finished else self.sizes.get(key, 0) * min(max(within, 0.0), 1.0)
        return min(ALMOST, (self._done + part) / total)

    def eta(self, share: float, now: float | None = None) -> float | None:
        elapsed = (time.monotonic() if now is None else now) - self.t0
        if elapsed < MIN_SECONDS or share < MIN_DONE:
            return None
        return elapsed * (1.0 - share) / share

    def tag(self, ev: Progress, key: str, within: float) -> Progress:
        """``ev`` carrying the whole job's share and time left."""
        s = self.share(key, within)
        return dataclasses.replace(ev, overall=s, eta_s=self.eta(s))

    def file_done(self, key: str) -> None:
        """``key``'s file is stored, skipped or found unchanged: its whole weight is done."""
        if key not in self._finished:
            self._finished.add(key)
            self._done += self.sizes.get(key, 0)

    def follow(self, events: Generator[Progress, None, T], key: str, start: float,
               end: float) -> Generator[Progress, None, T]:
        """Re-yield a step's events with the job's share, the step spanning ``start``..``end`` of
        ``key``'s file in proportion to its own current/total; returns the step's result."""
        try:
            while True:
                try:
                    ev = next(events)
                except StopIteration as stop:
                    return stop.value
                frac = ev.current / ev.total if ev.total > 0 else 0.0
                yield self.tag(ev, key, start + (end - start) * frac)
        finally:
            events.close()  # a cancelled or closed ingest closes the step too, as yield from would

    def finish(self, ev: Progress) -> Progress:
        return dataclasses.replace(ev, overall=1.0, eta_s=0.0)


def work_sizes(files: Sequence[tuple[Path, Path]], states: Mapping[str, FileState]) -> dict[str, int]:
    """Bytes of each file the ingest will read (the meter's weights): a file whose size and
    modification time match the library is skipped in milliseconds and weighs nothing."""
    out: dict[str, int] = {}
    for _root, path in files:
        key = encode_path(path)
        try:
            st = path.stat()
        except OSError:
            continue
        old = states.get(key)
        if old is None or old.size != st.st_size or old.mtime_ns != st.st_mtime_ns:
            out[key] = max(1, st.st_size)
    return out
