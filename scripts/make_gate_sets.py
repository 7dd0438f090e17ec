"""Build the BEIR-format sets used to choose the s_c variant and to test the automatic gate.

    PYTHONPATH=. python scripts/make_gate_sets.py

Writes (deterministic, no model):

* ``tests/data/demo_questions/`` — the demo library (resources/demo_src, the sources of the PDFs
  and Word files in resources/demo) with the 12 one-answer questions of resources/demo/QUESTIONS.md;
  the two stuffed distractors of questions 1 and 2 in ``qrels/stuffing.tsv``.
* ``tests/data/qa_clean/`` — the bilingual QA fixture (tests/data/qa_fixture) as a retrieval set:
  each question's supporting passages are relevant. Factoid questions that share their answer's
  words: the regime where re-ranking is expected to hurt.
* ``tests/data/qa_injected/`` — the same plus, per question, injected near-duplicate answer-free
  passages: two that restate the question (eval-qa's ``--distractors`` frames) and one copy of the
  supporting passage with every sentence holding the answer removed. Tracked as stuffing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rag_desktop.app.qa_eval import distractor_passages

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

DEMO_QUESTIONS = [
    ("q01", "如何评估数据出境的安全？",
     {"zh_guideline_cross_border_assessment": 2, "zh_report_data_compliance_2025": 1},
     ["zh_press_release_data_export_meeting", "zh_commentary_automotive_data"]),
    ("q02", "What did the Wason selection task show?", {"en_textbook_reasoning_conditionals": 2},
     ["en_seminar_announcement_wason", "en_newsletter_reasoning_app"]),
    ("q03", "数据出境安全评估的申报需要准备哪些材料？", {"zh_guideline_cross_border_assessment": 2}, []),
    ("q04", "数据出境安全评估结论的有效期是多久？", {"zh_guideline_cross_border_assessment": 2}, []),
    ("q05", "中医如何治疗久咳？吃什么药？", {"zh_textbook_tcm_cough": 2}, []),
    ("q06", "出差住宿费的报销标准是多少？", {"zh_regulation_travel_expenses": 2}, []),
    ("q07", "德国子公司调阅设备运行日志涉及多少名用户？", {"zh_report_data_compliance_2025": 2}, []),
    ("q08", "Which cards must be turned over in the Wason selection task, and how many people choose them?",
     {"en_textbook_reasoning_conditionals": 2}, []),
    ("q09", "Why do people do better on the drinking-age version of the card problem?",
     {"en_textbook_reasoning_conditionals": 2}, []),
    ("q10", "How does ColBERT's late interaction score a passage?", {"en_note_late_interaction": 2}, []),
    ("q11", "What caused the longest IT outage in Q3 2025?", {"en_report_facilities_q3": 2}, []),
    ("q12", "What does the CardLogic app do?", {"en_newsletter_reasoning_app": 2}, []),
]


def write_beir(folder: Path, corpus: dict[str, tuple[str, str]], queries: dict[str, str],
               qrels: dict[str, dict[str, int]], stuffing: dict[str, list[str]]) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for _id, (title, text) in corpus.items():
            f.write(json.dumps({"_id": _id, "title": title, "text": text}, ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as f:
        for _id, text in queries.items():
            f.write(json.dumps({"_id": _id, "text": text}, ensure_ascii=False) + "\n")
    with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, rel in qrels.items():
            for d, s in rel.items():
                f.write(f"{q}\t{d}\t{s}\n")
    if stuffing:
        with (folder / "qrels" / "stuffing.tsv").open("w", encoding="utf-8") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for q, ds in stuffing.items():
                for d in ds:
                    f.write(f"{q}\t{d}\t1\n")


def _markdown_doc(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    title = path.stem
    if text.startswith("---"):
        head, _, text = text[3:].partition("\n---")
        m = re.search(r"^title:\s*(.+)$", head, flags=re.M)
        if m:
            title = m.group(1).strip()
    return title, text.strip()


def demo_set() -> None:
    corpus = {p.stem: _markdown_doc(p) for p in sorted((ROOT / "resources" / "demo_src").glob("*.md"))}
    queries = {q: text for q, text, _, _ in DEMO_QUESTIONS}
    qrels = {q: rel for q, _, rel, _ in DEMO_QUESTIONS}
    stuffing = {q: s for q, _, _, s in DEMO_QUESTIONS if s}
    write_beir(DATA / "demo_questions", corpus, queries, qrels, stuffing)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?。！？])\s*", text) if s.strip()]


def squash(text: str) -> str:
    """Lower-cased, without whitespace: answers are found in PDF text whose lines break anywhere."""
    return "".join(text.split()).lower()


def without_answer(text: str, answers: list[str]) -> str | None:
    """``text`` without every sentence that holds (part of) an answer; None if no sentence holds one
    or nothing is left. An answer is found case- and whitespace-insensitively, also where it spans
    a sentence split (``tug.org``): every sentence it overlaps is dropped."""
    sentences = _sentences(text)
    squashed = [squash(s) for s in sentences]
    whole = "".join(squashed)
    hit = [False] * len(whole)
    for a in {squash(a) for a in answers if squash(a)}:
        i = whole.find(a)
        while i >= 0:
            hit[i:i + len(a)] = [True] * len(a)
            i = whole.find(a, i + 1)
    kept, start = [], 0
    for s, q in zip(sentences, squashed, strict=True):
        if not any(hit[start:start + len(q)]):
            kept.append(s)
        start += len(q)
    return " ".join(kept) if kept and len(kept) < len(sentences) else None


def injected_passages(qid: str, question: str, answers: list[str],
                      support: tuple[str, str]) -> dict[str, tuple[str, str]]:
    """The answer-free passages injected for one question: two that restate it (eval-qa's
    ``--distractors`` frames) and ``dup-<qid>``, a near-duplicate of the supporting passage
    ``support`` (title, text) with every sentence that holds an answer removed (left out when
    no sentence holds one)."""
    out = distractor_passages(qid, question, 2)
    title, text = support
    kept = without_answer(text, answers)
    if kept is not None:
        out[f"dup-{qid}"] = (title, kept)
    return out


def qa_sets() -> None:
    src = DATA / "qa_fixture"
    corpus = {}
    for line in (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            corpus[str(d["_id"])] = (str(d.get("title", "")), str(d["text"]))
    qs = [json.loads(x) for x in (src / "questions.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    queries = {str(q["_id"]): str(q["question"]) for q in qs}
    qrels = {str(q["_id"]): {str(d): 2 for d in q["supporting_ids"]} for q in qs}
    write_beir(DATA / "qa_clean", corpus, queries, qrels, {})

    injected = dict(corpus)
    stuffing: dict[str, list[str]] = {}
    for q in qs:
        qid = str(q["_id"])
        # The near-duplicate copies the (last) supporting passage.
        adv = injected_passages(qid, str(q["question"]), [str(a) for a in q["answers"]],
                                corpus[str(q["supporting_ids"][-1])])
        injected.update(adv)
        stuffing[qid] = list(adv)
    write_beir(DATA / "qa_injected", injected, queries, qrels, stuffing)


if __name__ == "__main__":
    demo_set()
    qa_sets()
    print("wrote", *(str(DATA / n) for n in ("demo_questions", "qa_clean", "qa_injected")))
