"""Build two BEIR-format retrieval sets from the real manuals (eval/manuals), as held-out gate libraries.

    PYTHONPATH=. python scripts/make_manual_gate_sets.py --manuals /work/data/manuals --out DIR

The gate sets of scripts/make_gate_sets.py are short passages we wrote; these are pages of real,
published PDFs, to check a gate on data it was not designed on. Writes (deterministic, no model):

* ``DIR/manuals_pages/`` — one document per non-empty PDF page (the app's own PDF reader,
  ``readers.pdf.read_pdf``), id ``<file stem>-p<NNN>``, title ``<title in sources.json> p. N``;
  the 55 questions as queries. Relevant pages: those of the question's ``document`` whose text
  holds one of its ``answers`` (whitespace- and case-insensitively). Among several, the one nearest
  the page in ``where`` scores 2, the others 1; if none holds it, the ``where`` page scores 1 (with
  a warning). ``where`` counts PDF pages as pymupdf does; a page that does not hold the answer
  there is tried as a printed page label too.
* ``DIR/manuals_injected/`` — the same plus, per question, the answer-free passages of
  ``tests/data/qa_injected`` (make_gate_sets.injected_passages): two that restate the question and
  one copy of the best relevant page without its sentences that hold the answer; their ids in
  ``qrels/stuffing.tsv``.

The data stays out of the repository (the PDFs are not in it: eval/manuals/fetch.sh).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_gate_sets import injected_passages, squash, write_beir

from rag_desktop.backends.pdf_pages import page_labels
from rag_desktop.backends.readers.pdf import read_pdf

Corpus = dict[str, tuple[str, str]]


@dataclass
class Doc:
    stem: str
    title: str
    pages: dict[int, str]  # physical page (1-based) -> text, non-empty pages only
    n_pages: int  # all pages, empty ones included
    labels: dict[int, str]  # physical page -> printed label


def page_id(stem: str, number: int) -> str:
    return f"{stem}-p{number:03d}"


def read_docs(manuals: Path) -> dict[str, Doc]:
    sources = json.loads((manuals / "sources.json").read_text(encoding="utf-8"))
    titles = {str(s["file"]): str(s["title"]) for s in sources}
    docs = {}
    for path in sorted((manuals / "docs").glob("*.pdf")):
        parsed = read_pdf(path)
        pages = {p.number: p.text for p in parsed.pages if p.text.strip()}
        docs[path.name] = Doc(path.stem, titles.get(path.name, path.stem), pages, len(parsed.pages),
                              page_labels(path))
    return docs


def where_page(where: str) -> int:
    m = re.search(r"\(p\.\s*(\d+)\)", where)
    if not m:
        raise SystemExit(f"no '(p. N)' in where: {where!r}")
    return int(m.group(1))


def label_question(q: dict[str, Any], doc: Doc) -> tuple[dict[int, int], str, str]:
    """Physical page -> grade, the kind of label, and how ``where`` was read."""
    answers = [squash(str(a)) for a in q["answers"]]
    holding = [n for n, text in sorted(doc.pages.items()) if any(a in squash(text) for a in answers)]
    n = where_page(str(q["where"]))
    by_label = [p for p, lab in doc.labels.items() if lab == str(n)]
    if n in holding:
        anchor, how = n, "pdf page"
    elif any(p in holding for p in by_label):
        anchor, how = next(p for p in by_label if p in holding), "printed label"
    else:
        anchor, how = n, "pdf page (answer not on it)"
    if not holding:
        print(f"WARNING {q['_id']}: no page of {doc.stem} holds {q['answers']}; using p. {anchor}")
        return {anchor: 1}, "where page only (1)", how
    best = min(holding, key=lambda p: (abs(p - anchor), p))
    grades = {p: 1 for p in holding} | {best: 2}
    kind = "one page (2)" if len(holding) == 1 else f"nearest (2) + others (1), {len(holding)} pages"
    return grades, kind, how


def build(manuals: Path, out: Path) -> None:
    docs = read_docs(manuals)
    corpus: Corpus = {}
    for doc in docs.values():
        for n, text in doc.pages.items():
            corpus[page_id(doc.stem, n)] = (f"{doc.title} p. {n}", text)
    questions = [json.loads(x) for x in (manuals / "questions.jsonl").read_text(encoding="utf-8").splitlines()
                 if x.strip()]
    queries = {str(q["_id"]): str(q["question"]) for q in questions}
    qrels: dict[str, dict[str, int]] = {}
    kinds: Counter[str] = Counter()
    hows: Counter[str] = Counter()
    for q in questions:
        doc = docs[str(q["document"])]
        grades, kind, how = label_question(q, doc)
        qrels[str(q["_id"])] = {page_id(doc.stem, p): g for p, g in sorted(grades.items())}
        kinds["one page (2)" if kind == "one page (2)" else kind.split(",")[0]] += 1
        hows[how] += 1
        if kind.startswith("nearest"):
            print(f"  {q['_id']}: {kind}")
    missing = [d for rel in qrels.values() for d in rel if d not in corpus]
    if missing:
        raise SystemExit(f"relevant pages that are empty: {missing}")
    write_beir(out / "manuals_pages", corpus, queries, qrels, {})

    injected = dict(corpus)
    stuffing: dict[str, list[str]] = {}
    for q in questions:
        qid = str(q["_id"])
        best = max(qrels[qid], key=lambda d: (qrels[qid][d], d))
        adv = injected_passages(qid, str(q["question"]), [str(a) for a in q["answers"]], corpus[best])
        clash = [d for d in adv if d in corpus]
        if clash:
            raise SystemExit(f"injected ids clash with page ids: {clash}")
        injected.update(adv)
        stuffing[qid] = list(adv)
    write_beir(out / "manuals_injected", injected, queries, qrels, stuffing)

    n_inj = len(injected) - len(corpus)
    n_dup = sum(1 for ds in stuffing.values() for d in ds if d.startswith("dup-"))
    print(f"documents: {len(docs)} PDFs, {len(corpus)} non-empty pages "
          f"(of {sum(d.n_pages for d in docs.values())}; empty pages skipped)")
    print(f"queries: {len(queries)}; relevant pages: {sum(len(r) for r in qrels.values())}")
    print("label kinds:", dict(kinds))
    print("where read as:", dict(hows))
    print(f"injected: {n_inj} passages ({n_inj - n_dup} restating the question, {n_dup} answer-free page copies); "
          f"manuals_injected corpus: {len(injected)}")
    print("wrote", out / "manuals_pages", out / "manuals_injected")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manuals", type=Path, required=True, help="folder with docs/, questions.jsonl, sources.json")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    build(args.manuals, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
