"""How often the answer path says "not in your documents" (core.abstain; docs/evaluation.md).

    PYTHONPATH=. python scripts/abstain_eval.py --json /tmp/abstain.json \
        [--split tune|heldout|real|fresh|fresh2|same|same-heldout|all] \
        [--manuals eval/manuals] [--statutes eval/statutes] [--libraries DIR] [--answers N] [--judge N]

It calls ``RagService.abstention`` on the list the Baseline column's answer reads, exactly as
``RagService.answer`` does before it would load the model; a question about to abstain in a mixed-language
library is translated first (the one model call, timed in ``seconds``). Each row of :data:`RUNS` asks one set of
questions of one library; ``answerable`` says whether that library holds their answers (a set asked
of another set's library is about another subject). The held-out rows were frozen before the rule
was written and are reported once, separately; the "real" rows (the manuals' real PDFs, eval/manuals) were
frozen later, before the rule was changed again, and are likewise reported once; so are the "fresh" rows
(eval/statutes), frozen after the "real" rows were read and before the passage-support rule was written,
and the "fresh2" rows (eval/abstain_fresh), frozen before the judgement and the similarities were combined.

``--judge N`` then asks the model's judgement of the passages (core.abstain.JUDGE, app.abstention.judge) and
measures the question's lift (core.abstain.MIN_QUESTION_LIFT, app.abstention.relevance) for the first N
questions of each row that the library's words let through, as ``RagService.answer`` asks them before
writing; the judgement's cut (core.abstain.MIN_JUDGED) was chosen on answered rows of the tune, heldout and
real splits, with the "fresh" rows held out; the lift's cut is its sign, checked on the same rows, with the
"fresh" and "fresh2" rows held out. The "same" and "same-heldout" rows ask questions of a library of their
own subject that lacks the document holding the answer (:func:`_same_subject`).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_desktop.app.config import load_settings
from rag_desktop.app.evaluation import read_jsonl
from rag_desktop.app.service import RagService, judged_abstention
from rag_desktop.core.abstain import MIN_QUESTION_LIFT
from rag_desktop.core.cfrag.anchor import says_not_found
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.qa_metrics import containment_match
from rag_desktop.core.types import Answer

DATA = Path("tests/data")
# The real sets (--manuals, --statutes point elsewhere): published documents zh and en with their
# questions (eval/manuals/README.md; docs/ made by eval/manuals/fetch.sh), and three Chinese statutes,
# one article a document, with people's questions about them (docs/evaluation.md, "Data sets").
REAL = {"manuals": Path("eval/manuals"), "statutes": Path("eval/statutes"), "abstain_fresh": Path("eval/abstain_fresh")}


@dataclass(frozen=True)
class Run:
    library: str  # a key of LIBRARIES
    questions: str  # a key of QUESTIONS
    answerable: bool
    split: str  # "tune" or "heldout"


def _lines(path: Path) -> list[str]:
    return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]


QUESTIONS = {
    "demo_qa": lambda: [str(r["question"]) for r in read_jsonl(DATA / "demo_qa/questions.jsonl")],
    "demo_questions": lambda: [str(r["text"]) for r in read_jsonl(DATA / "demo_questions/queries.jsonl")],
    "qa_fixture": lambda: [str(r["question"]) for r in read_jsonl(DATA / "qa_fixture/questions.jsonl")],
    "diagnostic": lambda: [str(r["text"]) for r in read_jsonl(DATA / "diagnostic/queries.jsonl")],
    "crosslang": lambda: [str(r["question"]) for r in read_jsonl(DATA / "crosslang/questions.jsonl")],
    "crosslang_fixture": lambda: _lines(DATA / "abstain/crosslang_fixture.txt"),
    "crosslang_fixture_names": lambda: _lines(DATA / "abstain/crosslang_fixture_names.txt"),
    "complete": lambda: _lines(DATA / "standalone/complete.txt"),
    "manuals": lambda: [str(r["question"]) for r in read_jsonl(REAL["manuals"] / "questions.jsonl")],
    "statutes": lambda: [str(r["text"]) for r in read_jsonl(REAL["statutes"] / "queries.jsonl")],
    "abstain_fresh": lambda: [str(r["question"]) for r in read_jsonl(REAL["abstain_fresh"] / "questions.jsonl")],
}

RUNS = (
    Run("demo", "demo_qa", True, "tune"),
    Run("demo", "qa_fixture", False, "tune"),
    Run("qa_fixture", "qa_fixture", True, "tune"),
    Run("qa_fixture", "demo_qa", False, "tune"),
    Run("qa_fixture", "diagnostic", False, "tune"),
    Run("diagnostic", "diagnostic", True, "tune"),
    Run("demo", "demo_questions", True, "heldout"),
    Run("demo", "crosslang", True, "heldout"),
    Run("qa_fixture", "complete", False, "heldout"),
    Run("qa_fixture", "crosslang_fixture", True, "heldout"),
    Run("qa_fixture", "crosslang_fixture_names", True, "heldout"),
    # Frozen after the rows above had been read, before any rule was changed on them: real manuals,
    # their own 55 questions, and the other sets' questions asked of them (and theirs of the others).
    Run("manuals", "manuals", True, "real"),
    Run("manuals", "demo_qa", False, "real"),
    Run("manuals", "demo_questions", False, "real"),
    Run("manuals", "qa_fixture", False, "real"),
    Run("demo", "manuals", False, "real"),
    Run("qa_fixture", "manuals", False, "real"),
    # Frozen before the passage-support rule (core.abstain) was written on the rows above: a library of
    # statutes, its own questions, and the other sets asked of it (and its questions of the others).
    Run("statutes", "statutes", True, "fresh"),
    Run("statutes", "manuals", False, "fresh"),
    Run("statutes", "qa_fixture", False, "fresh"),
    Run("manuals", "statutes", False, "fresh"),
    Run("qa_fixture", "statutes", False, "fresh"),
    # Frozen before the model's judgement and the library's similarities were combined on the rows above
    # (eval/abstain_fresh: real documents none of the other sets use, written without looking at any result).
    Run("abstain_fresh", "abstain_fresh", True, "fresh2"),
    Run("abstain_fresh", "manuals", False, "fresh2"),
    Run("abstain_fresh", "statutes", False, "fresh2"),
    Run("abstain_fresh", "demo_qa", False, "fresh2"),
    Run("demo", "abstain_fresh", False, "fresh2"),
    Run("manuals", "abstain_fresh", False, "fresh2"),
    Run("statutes", "abstain_fresh", False, "fresh2"),
)
# The same subject, the answering document left out (docs/evaluation.md §5.4): the manuals' PDFs in two halves
# of the same subjects, each question asked of its own half and of the other; the statutes, each question
# asked of the library without its law and of one still holding it. "same" asks the tuning questions,
# "same-heldout" the held-out ones (eval/manuals/heldout, eval/statutes/heldout), frozen before the
# question's lift was read on any of these rows.
MANUALS_A = ("zh_texlive_guide_2020.pdf", "zh_fduthesis_fudan_thesis_template.pdf",
             "en_paper_preemptive_information_extraction.pdf", "en_irs_instructions_form_1040nr_2007.pdf")
LAWS = {"lc": "laborcontract", "cp": "consumer", "pi": "pipl"}  # question id prefix -> article id prefix


def _manuals_half(docs: Path, half: str, out: Path) -> Path:
    """The PDFs of ``docs`` (the manuals') in half "A" (MANUALS_A) or "B" (the rest), as links in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for f in docs.glob("*.pdf"):
        if (f.name in MANUALS_A) == (half == "A") and not (out / f.name).exists():
            (out / f.name).symlink_to(f.resolve())
    return out


def _same_subject() -> list[Run]:
    runs = []
    for split, label in (("tune", "same"), ("heldout", "same-heldout")):
        for half, other in (("A", "B"), ("B", "A")):
            key = f"manuals-{split}@{half}"
            QUESTIONS[key] = lambda split=split, half=half: [
                str(r["question"]) for r in read_jsonl(REAL["manuals"] / "questions.jsonl")
                if r["split"] == split and (r["document"] in MANUALS_A) == (half == "A")]
            runs += [Run(f"manuals@{half}", key, True, label), Run(f"manuals@{other}", key, False, label)]
        for law in LAWS:
            key = f"statutes-{split}@{law}"
            QUESTIONS[key] = lambda split=split, law=law: [
                str(r["question"]) for r in read_jsonl(REAL["statutes"] / split / "questions.jsonl")
                if str(r["_id"]).startswith(law)]
            holding = next(k for k in LAWS if k != law)  # a library without another law: it holds this one
            runs += [Run(f"statutes-without-{holding}", key, True, label),
                     Run(f"statutes-without-{law}", key, False, label)]
    return runs


RUNS += tuple(_same_subject())
SPLITS = ("tune", "heldout", "real", "fresh", "fresh2", "same", "same-heldout")


def _corpus_folder(name: str, tmp: Path) -> Path:
    """The library's documents: the demo's PDFs and Word files, the manuals' PDFs, or a corpus.jsonl
    as one .txt each."""
    if name == "demo":
        return Path("resources/demo")
    base, _, half = name.partition("@")  # "manuals@A": half of the manuals (_same_subject)
    if base in ("manuals", "abstain_fresh"):
        docs = REAL[base] / "docs"
        if not any(docs.glob("*.pdf")):
            also = " or pass --manuals" if base == "manuals" else ""
            raise SystemExit(f"{docs}: no PDFs; run {REAL[base]}/fetch.sh{also}")
        return _manuals_half(docs, half, tmp / f"docs-{name}") if half else docs
    out = tmp / f"docs-{name}"
    out.mkdir(parents=True, exist_ok=True)
    without = LAWS[name.removeprefix("statutes-without-")] if name.startswith("statutes-without-") else None
    corpus = REAL["statutes"] if without else REAL.get(name, DATA / name)
    for r in read_jsonl(corpus / "corpus.jsonl"):
        if without and str(r["_id"]).startswith(without):
            continue
        body = f"{r.get('title', '')}\n\n{r['text']}".strip()
        (out / f"{r['_id']}.txt").write_text(body + "\n", encoding="utf-8")
    return out


def _gold() -> dict[str, list[str]]:
    """The gold answers of the sets that have them, by question."""
    out: dict[str, list[str]] = {}
    for path in (DATA / "demo_qa/questions.jsonl", REAL["manuals"] / "questions.jsonl",
                 REAL["abstain_fresh"] / "questions.jsonl"):
        if path.is_file():
            out.update({str(r["question"]): [str(a) for a in r["answers"]] for r in read_jsonl(path)})
    return out


def _answer_rows(svc: RagService, rows: list[dict[str, Any]], n: int, gold: dict[str, list[str]]) -> None:
    """Answer the first ``n`` questions of ``rows`` the rule let through, as the window's first column does,
    and record what the person would see: the answer's passage check (``unsupported``: no passage it read
    holds it, core.cfrag.anchor), whether it says the sources lack the answer, and, where the set has gold
    answers, whether it holds one."""
    for row in [r for r in rows if not r["abstained"]][:n]:
        t0 = time.perf_counter()
        comp = svc.compare(row["q"], translate=False)
        answer = [e for e in svc.answer(row["q"], comp.answer_list(comp.first_column)) if isinstance(e, Answer)][-1]
        row["answer"] = {"text": answer.text, "unsupported": "unsupported" in answer.warnings,
                         "doubted": "doubted" in answer.warnings,
                         "odds": answer.abstention.judged if answer.abstention is not None else None,
                         "abstained": answer.abstention.reason if answer.abstention is not None else "",
                         "passages": [h.text for h in answer.sources],
                         "not_found": says_not_found(answer.text), "citations": len(answer.citations),
                         "right": (containment_match(answer.text, gold[row["q"]]) > 0) if row["q"] in gold else None,
                         "seconds": round(time.perf_counter() - t0, 1)}


def _judge_rows(svc: RagService, rows: list[dict[str, Any]], n: int) -> None:
    """The model's judgement (app.service.judged_abstention) of the first ``n`` questions of ``rows``
    that the library's words let through: its log-odds, whether it abstains, and its seconds."""
    for row in [r for r in rows if not r["abstained"]][:n]:
        ranked = svc.compare(row["q"], translate=False).answer_list("baseline")
        t0 = time.perf_counter()
        a = judged_abstention(svc, row["q"], ranked)
        row["judge"] = {"odds": a.judged, "lift": a.question_lift, "abstained": a.abstained,
                        "reason": a.reason, "seconds": round(time.perf_counter() - t0, 2)}


def _judge_summary(runs: list[dict[str, Any]]) -> None:
    for split in SPLITS:
        for answerable in (True, False):
            sel = [r for run in runs if run["split"] == split and run["answerable"] == answerable for r in run["rows"]]
            judged = [r["judge"] for r in sel if "judge" in r]
            if not judged:
                continue
            k = sum(j["abstained"] for j in judged)
            lifts = [j.get("lift") for j in judged if j.get("lift") is not None]
            low = sum(x < MIN_QUESTION_LIFT for x in lifts)
            asked = sum(j["odds"] is not None for j in judged)
            secs = sorted(j["seconds"] for j in judged if j["odds"] is not None)
            mid = secs[len(secs) // 2] if secs else 0.0
            print(f"{split}: judged {len(judged)} {'answerable' if answerable else 'other-subject'} questions the "
                  f"words let through ({asked} asked, the rest read no passage in their language): "
                  f"abstained {k} ({k / len(judged):.3f}; the question's lift below the cut: {low} of {len(lifts)}); "
                  f"median {mid:.1f} s")


def _answers_summary(runs: list[dict[str, Any]]) -> None:
    for answerable in (True, False):
        got = [r["answer"] for run in runs if run["answerable"] == answerable for r in run["rows"] if "answer" in r]
        if not got:
            continue
        marked = sum(a["unsupported"] for a in got)
        line = f"answered, {'answerable' if answerable else 'other subjects'}: {len(got)}, marked unsupported {marked}"
        right = [a for a in got if a["right"] is not None]
        if right:
            ok = [a for a in right if a["right"]]
            line += f"; right {len(ok)} (marked {sum(a['unsupported'] for a in ok)}), wrong {len(right) - len(ok)}"
        print(line + f"; say not found {sum(a['not_found'] for a in got)}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--split", default="all", choices=(*SPLITS, "all"))
    ap.add_argument("--manuals", type=Path, default=REAL["manuals"], help="the manuals set (its docs/ fetched)")
    ap.add_argument("--statutes", type=Path, default=REAL["statutes"], help="the statutes set")
    ap.add_argument("--answers", type=int, default=0, metavar="N",
                    help="also answer the first N questions of each row the rule lets through (the model runs)")
    ap.add_argument("--judge", type=int, default=0, metavar="N",
                    help="ask the model's judgement of the passages for the first N questions of each row the "
                         "library's words let through (generation.judge_passages)")
    ap.add_argument("--libraries", type=Path, default=None,
                    help="keep the ingested libraries here between runs (default: a temporary folder)")
    args = ap.parse_args()
    REAL.update(manuals=args.manuals, statutes=args.statutes)
    runs = [r for r in RUNS if args.split in ("all", r.split)]
    settings = load_settings().replace("retrieval", cross_language=False)
    out: dict[str, Any] = {"load": os.getloadavg()[0], "runs": []}
    gold = _gold()
    with tempfile.TemporaryDirectory(prefix="rag-abstain-") as tmp_s:
        tmp = Path(tmp_s) if args.libraries is None else args.libraries
        for lib in sorted({r.library for r in runs}):
            svc = RagService(tmp / f"lib-{lib}", settings)
            try:
                list(svc.ingest([_corpus_folder(lib, tmp)]))
                for run in (r for r in runs if r.library == lib):
                    t0 = time.perf_counter()
                    rows = []
                    for q in QUESTIONS[run.questions]():
                        ranked = svc.compare(q, translate=False).answer_list("baseline")
                        t1 = time.perf_counter()
                        a = svc.abstention(q, ranked)
                        rows.append({"q": q, "lang": detect_lang(q), **a.as_json(),
                                     "seconds": round(time.perf_counter() - t1, 3)})
                    n_abs = sum(1 for r in rows if r["abstained"])
                    summary = {"library": lib, "questions": run.questions, "answerable": run.answerable,
                               "split": run.split, "n": len(rows), "abstained": n_abs,
                               "rate": round(n_abs / max(1, len(rows)), 3),
                               "translated": sum(1 for r in rows if r["translated"]),
                               "mean_s": round((time.perf_counter() - t0) / max(1, len(rows)), 2),
                               "max_s": max((r["seconds"] for r in rows), default=0.0)}
                    _answer_rows(svc, rows, args.answers, gold)  # after the timing: it measures the rule
                    _judge_rows(svc, rows, args.judge)
                    print(json.dumps(summary, ensure_ascii=False), flush=True)
                    out["runs"].append({**summary, "rows": rows})
            finally:
                svc.close()
    for split in SPLITS:
        for answerable in (True, False):
            sel = [r for r in out["runs"] if r["split"] == split and r["answerable"] == answerable]
            if sel:
                n = sum(r["n"] for r in sel)
                k = sum(r["abstained"] for r in sel)
                what = "answers lost (abstained on answerable)" if answerable else "abstained on other subjects"
                print(f"{split}: {what}: {k}/{n} = {k / n:.3f}")
    _answers_summary(out["runs"])
    _judge_summary(out["runs"])
    args.json.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
