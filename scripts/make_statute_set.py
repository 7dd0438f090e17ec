"""A labelled BEIR set of real Chinese statutes for the calibration gate (docs/evaluation.md, "The gate").

    PYTHONPATH=. python scripts/make_statute_set.py --raw RAW_DIR [--questions scripts/statute_questions.json] \
        [--out eval/statutes]

The raw files are whole laws as Markdown from github.com/LawRefBook/Laws (``eval/statutes/SOURCES.txt`` and
the questions file name each law's source path and commit); the set built from them is kept in
``eval/statutes/`` (laws are official documents, outside copyright under Art. 5 of the PRC Copyright Law).
One corpus document per article: ``_id`` like
``laborcontract-a019``, ``title`` "<law name> 第十九条", ``text`` the article without its "第十九条" label;
chapter and section headings are not documents. The questions are written by hand as a person would ask
them, each answered by one article (score 2; a second article that also answers, score 1).

A question must paraphrase: no run of more than 4 consecutive characters may be copied from a labelled
article, except the names of legal concepts listed in the questions file (a person would use them anyway).
Violations are printed and nothing is written, so the check cannot be skipped silently.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_gate_sets import write_beir

ROOT = Path(__file__).resolve().parent.parent
MAX_COPIED_RUN = 4

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_UNITS = {"十": 10, "百": 100, "千": 1000}
_ARTICLE = re.compile(r"^第([零〇一二两三四五六七八九十百千]+)条(?:\s+|$)(.*)$")


def chinese_number(s: str) -> int:
    """'十九' -> 19, '一百零五' -> 105 (numbers below 10,000, as article labels use them)."""
    total, digit = 0, 0
    for ch in s:
        if ch in _DIGITS:
            digit = _DIGITS[ch]
        elif ch in _UNITS:
            total += (digit or 1) * _UNITS[ch]
            digit = 0
        else:
            raise ValueError(f"not a Chinese number: {s!r}")
    return total + digit


@dataclass(frozen=True)
class Article:
    number: int
    label: str  # "第十九条"
    text: str


def parse_law(markdown: str) -> tuple[str, list[Article]]:
    """The law's name (its '# ' heading) and its articles in order; headings and the preamble are dropped."""
    name = ""
    articles: list[Article] = []
    current: tuple[int, str, list[str]] | None = None

    def flush() -> None:
        if current is not None:
            num, label, paras = current
            articles.append(Article(num, label, "\n".join(paras)))

    for raw in markdown.splitlines():
        line = raw.strip()
        if not line or line.startswith("<!--"):
            continue
        if line.startswith("#"):
            if line.startswith("# ") and not name:
                name = line[2:].strip()
            # A chapter or section heading ends the article before it.
            flush()
            current = None
            continue
        m = _ARTICLE.match(line)
        if m:
            flush()
            label = f"第{m.group(1)}条"
            current = (chinese_number(m.group(1)), label, [m.group(2).strip()] if m.group(2).strip() else [])
        elif current is not None:
            current[2].append(line)
    flush()
    if not name:
        raise ValueError("no '# ' heading names the law")
    numbers = [a.number for a in articles]
    if numbers != list(range(1, len(articles) + 1)):
        raise ValueError(f"{name}: article numbers are not 1..{len(articles)} in order")
    return name, articles


def copied_runs(question: str, article: str, concepts: list[str], limit: int = MAX_COPIED_RUN) -> list[str]:
    """Runs of more than ``limit`` consecutive characters of ``question`` that occur in ``article``.

    The concept names are masked out of the question first, so they neither count nor join two runs.
    """
    masked = question
    for c in sorted(concepts, key=len, reverse=True):
        masked = masked.replace(c, "\x00" * len(c))
    n = len(masked)
    hit = [False] * n  # hit[i]: masked[i:i+limit+1] occurs in the article
    for i in range(n - limit):
        piece = masked[i:i + limit + 1]
        hit[i] = "\x00" not in piece and piece in article
    runs: list[str] = []
    i = 0
    while i < n:
        if not hit[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and hit[j + 1]:
            j += 1
        runs.append(question[i:j + limit + 1])
        i = j + 1
    return runs


def build(raw: Path, spec: dict[str, Any]) -> tuple[dict[str, tuple[str, str]], dict[str, str],
                                                    dict[str, dict[str, int]], list[str]]:
    corpus: dict[str, tuple[str, str]] = {}
    for law in spec["laws"]:
        name, articles = parse_law((raw / law["file"]).read_text(encoding="utf-8"))
        for a in articles:
            corpus[f"{law['slug']}-a{a.number:03d}"] = (f"{name} {a.label}", a.text)
        print(f"{law['slug']}: {name}, {len(articles)} articles ({law['source']})")
    concepts = [str(c) for c in spec["concepts"]]
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    for q in spec["questions"]:
        qid, text, rel = str(q["id"]), str(q["text"]), {str(d): int(s) for d, s in q["qrels"].items()}
        if qid in queries:
            problems.append(f"{qid}: duplicate id")
        unknown = [d for d in rel if d not in corpus]
        if unknown:
            problems.append(f"{qid}: unknown articles {unknown}")
            continue
        if sorted(rel.values(), reverse=True) not in ([2], [2, 1]):
            problems.append(f"{qid}: want one article at score 2 and at most one at score 1, got {rel}")
        for d in rel:
            for run in copied_runs(text, corpus[d][1], concepts):
                problems.append(f"{qid}: copies {run!r} ({len(run)} characters) from {d}: {text}")
        queries[qid], qrels[qid] = text, dict(sorted(rel.items(), key=lambda x: -x[1]))  # the answer first
    return corpus, queries, qrels, problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", type=Path, required=True, help="the laws as Markdown (eval/statutes/SOURCES.txt)")
    ap.add_argument("--questions", type=Path, default=ROOT / "scripts" / "statute_questions.json")
    ap.add_argument("--out", type=Path, default=ROOT / "eval" / "statutes")
    args = ap.parse_args()
    spec = json.loads(args.questions.read_text(encoding="utf-8"))
    corpus, queries, qrels, problems = build(args.raw, spec)
    per_law: dict[str, int] = {}
    for rel in qrels.values():
        top = next(d for d, s in rel.items() if s == 2)
        per_law[top.split("-a")[0]] = per_law.get(top.split("-a")[0], 0) + 1
    print(f"{len(corpus)} articles, {len(queries)} questions {per_law}, "
          f"{sum(len(r) for r in qrels.values())} judgements ({sum(len(r) == 2 for r in qrels.values())} with a "
          "second article)")
    if problems:
        print(f"{len(problems)} problem(s); nothing written:")
        for p in problems:
            print("  " + p)
        return 1
    write_beir(args.out, corpus, queries, qrels, {})
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
