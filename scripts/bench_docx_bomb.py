"""Zip-bomb .docx: time and peak memory until read_document refuses it.

Each case runs in a fresh child process (``ru_maxrss`` is a per-process high-water mark):
the bomb is built there (tests/bad_inputs.zip_bomb_docx, the issue's 1 MB → 1 GiB shape),
python-docx is imported, then ``read_document`` is timed and the peak RSS read again.
``--pre DIR`` runs the same children against another checkout (e.g. the code before the
fix) for comparison; keep its bombs small — before the fix a 1 GiB bomb takes >2 GB.

    PYTHONPATH=. .venv/bin/python scripts/bench_docx_bomb.py [--pre /tmp/old-checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bad_inputs import zip_bomb_docx
from rag_desktop.backends.readers import UnreadableDocument, read_document
import docx  # noqa: F401  (loaded before the measurement, as during an ingest)
declared = int(sys.argv[4]) if sys.argv[4] != "-" else None
bomb = zip_bomb_docx(Path(sys.argv[2]), int(sys.argv[3]), declared_mib=declared)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
try:
    read_document(bomb)
    reason = "(read)"
except UnreadableDocument as exc:
    reason = exc.reason
s = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"file_bytes": bomb.stat().st_size, "seconds": round(s, 3),
                  "rss_before_mb": round(before / 1024), "rss_peak_mb": round(after / 1024), "reason": reason}))
"""

CASES = [  # (inflated MiB, declared MiB or None)
    (1024, None),  # the file: document.xml inflates to 1 GiB
    (60, None),  # under the size limit, caught by the ratio
    (1024, 1),  # headers that lie about the size
]


def run(checkout: Path, inflated: int, declared: int | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(ROOT / "tests"), tmp, str(inflated), str(declared or "-")],
            capture_output=True, text=True, env=env, timeout=600, check=True, cwd=tmp,
        ).stdout
    result: dict[str, object] = json.loads(out)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pre", type=Path, default=None, help="another checkout to compare (small bombs only)")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    for inflated, declared in CASES:
        print(json.dumps({"checkout": "this", "inflated_mib": inflated, "declared_mib": declared,
                          **run(ROOT, inflated, declared)}, ensure_ascii=False))
    if args.pre is not None:
        for inflated in (128,):
            print(json.dumps({"checkout": str(args.pre), "inflated_mib": inflated,
                              **run(args.pre, inflated, None)}, ensure_ascii=False))
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
