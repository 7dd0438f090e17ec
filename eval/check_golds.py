"""Check a set's questions.jsonl against its docs/: every gold answer (and its evidence) must occur in its document.

    .venv/bin/python eval/check_golds.py eval/manuals_fresh      (run its fetch.sh first; needs pymupdf)

For each question:
* the document exists in docs/, and its prefix (zh_/en_) matches "lang";
* the first answer string (the main gold) occurs on the page cited in "where" ("(p. N)", the
  1-based PDF page) in pymupdf's text, as it is or with all whitespace removed (PDF line breaks),
  and in the evidence (case-insensitive);
* every further answer string (a variant: another spelling, the translation given in a footnote,
  the unit's abbreviation) occurs somewhere in the same document; the pages are printed;
* every answer string also occurs in the text of rag_desktop's own PDF reader
  (rag_desktop.backends.readers.read_document) after the scorer's normalisation
  (rag_desktop.core.text.normalize_answer, the one containment EM uses) — on the cited page for
  the main gold — so that an answer copying the document's text can match it;
* the evidence (the sentence stating the answer, as extracted) occurs on the cited page
  (whitespace removed).
It also reports (INFO, not an error) when an answer string occurs in another document of the
same language: the FACT must be stated in one document only, but a short string (a number, "cm")
may occur elsewhere with another meaning; those cases are listed in README.md.
The rag_desktop checks are skipped (with a note) when the package cannot be imported.
"""

import json
import re
import sys
from pathlib import Path


def squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def pymupdf_pages(path: Path) -> list[str]:
    import pymupdf

    with pymupdf.open(path) as doc:
        return [page.get_text() for page in doc]


def app_pages(path: Path) -> list[str] | None:
    try:
        from rag_desktop.backends.readers import read_document
    except ImportError:
        return None
    return [p.text for p in read_document(path).pages]


def normalizer():
    try:
        from rag_desktop.core.text import normalize_answer
    except ImportError:
        return None
    return normalize_answer


def cited_page(where: str) -> int:
    m = re.search(r"\(p\. (\d+)\)", where)
    if not m:
        raise ValueError(f"no '(p. N)' in where={where!r}")
    return int(m.group(1))


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit("usage: check_golds.py SET_FOLDER (holding questions.jsonl and docs/)")
    folder = Path(sys.argv[1]).resolve()
    docs = folder / "docs"
    lines = (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    norm = normalizer()
    if norm is None:
        print("NOTE rag_desktop not importable: reader and normalisation checks skipped")
    mu: dict[str, list[str]] = {}
    app: dict[str, list[str]] = {}
    bad = 0
    ids = [r["_id"] for r in rows]
    if len(set(ids)) != len(ids):
        print("BAD duplicate _id")
        bad += 1
    for r in rows:
        doc, qid = r["document"], r["_id"]
        path = docs / doc
        if not path.is_file():
            print(f"BAD {qid} {doc} missing in docs/ (run fetch.sh)")
            bad += 1
            continue
        if not doc.startswith(r["lang"] + "_"):
            print(f"BAD {qid} prefix of {doc} does not match lang={r['lang']}")
            bad += 1
        if doc not in mu:  # each document read once
            mu[doc] = pymupdf_pages(path)
        if norm is not None and doc not in app:
            app[doc] = app_pages(path)
        pages, n = mu[doc], cited_page(r["where"])
        if not 1 <= n <= len(pages):
            print(f"BAD {qid} page {n} outside 1..{len(pages)}")
            bad += 1
            continue
        page = pages[n - 1]
        ev = r.get("evidence", "")
        ev_ok = bool(ev) and squash(ev) in squash(page)
        print(f"{'OK ' if ev_ok else 'BAD'} {qid} evidence on p. {n}")
        bad += not ev_ok
        for k, a in enumerate(r["answers"]):
            found = [i + 1 for i, t in enumerate(pages) if a in t or squash(a) in squash(t)]
            if k == 0:
                in_ev = squash(a).casefold() in squash(ev).casefold()
                ok = n in found and in_ev
                what = f"main gold, on p. {n}={n in found}, in evidence={in_ev}"
            else:
                ok = bool(found)
                what = f"variant, on pp. {found[:8]}"
            app_pages_ = app.get(doc)
            if app_pages_ is not None:
                na = norm(a)
                scope = [app_pages_[n - 1]] if k == 0 else app_pages_
                norm_ok = bool(na) and any(na in norm(t) for t in scope)
                ok = ok and norm_ok
                what += f", normalised in app reader text={norm_ok}"
            print(f"{'OK ' if ok else 'BAD'} {qid} {a!r} in {doc} ({what})")
            bad += not ok
            for other in sorted(docs.glob(r["lang"] + "_*")):
                if other.name == doc:
                    continue
                if other.name not in mu:
                    mu[other.name] = pymupdf_pages(other)
                hits = [i + 1 for i, t in enumerate(mu[other.name]) if squash(a) in squash(t)]
                if hits:
                    print(f"INFO {qid} {a!r} also occurs in {other.name} p. {hits[:8]}")
    langs = {lang: sum(r["lang"] == lang for r in rows) for lang in ("zh", "en")}
    print(f"{len(rows)} questions {langs}; {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
