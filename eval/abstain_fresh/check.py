"""Check questions.jsonl against docs/: every answer string and its evidence must occur in the document's text.

    /path/to/python eval/abstain_fresh/check.py      (needs pymupdf for the PDFs; run fetch.sh first)

PDF text is pymupdf's get_text() of every page; the evidence is compared with all whitespace removed
(PDF line breaks fall anywhere), the answers as they are and then with whitespace removed.
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def doc_text(path: Path) -> str:
    if path.suffix == ".pdf":
        import pymupdf

        return "\n".join(page.get_text() for page in pymupdf.open(path))
    return path.read_text(encoding="utf-8")


def squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def main() -> int:
    texts: dict[str, str] = {}
    bad = 0
    lines = (HERE / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    for r in rows:
        if r["doc"] not in texts:  # each document read once (setdefault would read it for every question)
            texts[r["doc"]] = doc_text(HERE / "docs" / r["doc"])
        t = texts[r["doc"]]
        for a in r["answers"]:
            exact = a in t
            ok = exact or squash(a) in squash(t)
            in_ev = squash(a) in squash(r.get("evidence", a))
            how = "exact" if exact else "no-space"
            print(f"{'OK ' if ok and in_ev else 'BAD'} {r['_id']} {a!r} in {r['doc']} ({how}), "
                  f"count={t.count(a)}, in evidence={in_ev}")
            bad += not (ok and in_ev)
        ev_ok = squash(r.get("evidence", "")) in squash(t)
        print(f"{'OK ' if ev_ok else 'BAD'} {r['_id']} evidence {r.get('evidence')!r}")
        bad += not ev_ok
    langs = {lang: sum(r["lang"] == lang for r in rows) for lang in ("zh", "en")}
    print(f"{len(rows)} questions {langs}; {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
