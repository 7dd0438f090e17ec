"""Scripts/cf_eval_tables.py's majority rule, read off stored eval-qa reports.

The rule decides whether CF-RAG could skip its synthesis call, so the reading of a report is
checked against hand-made rows whose right answer is obvious.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from script_helpers import load_script as load_script_file


def load_script() -> ModuleType:
    return load_script_file("cf_eval_tables")


def row(qid: str, hyps: list[str], psi: list[float], decision: str, containment: float,
        synth_s: float = 0.0) -> dict[str, Any]:
    return {"id": qid, "hypotheses": hyps, "psi": psi, "decision": decision, "containment": containment,
            "cf_steps": [{"step": "synthesis", "seconds": synth_s}] if synth_s else []}


def test_majority_selects_the_highest_psi_of_the_majority_group() -> None:
    m = load_script()
    # "Tomas Rehn" twice (Ψ 0.50 / 0.55) against one "Jonas Ek" with the highest Ψ of all
    r = row("q", ["Tomas Rehn", "Actor Tomas Rehn", "Jonas Ek"], [0.50, 0.55, 0.60], "synthesize", 0.0)
    assert m._majority(r) == "Actor Tomas Rehn"
    assert m._majority(row("q", ["a", "b", "c"], [0.1, 0.2, 0.3], "synthesize", 0.0)) is None
    assert m._majority_right(r, ["Tomas Rehn"]) is True
    # no majority: the fallback stands, by default the run's own answer
    none = row("q", ["a", "b", "c"], [0.1, 0.2, 0.3], "synthesize", 1.0)
    assert m._majority_right(none, ["x"]) is True
    assert m._majority_right(none, ["x"], fallback_right=False) is False


def test_majority_table_compares_against_the_reread_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = load_script()
    data = tmp_path / "data"
    data.mkdir()
    (data / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in (
        {"_id": "q1", "question": "?", "answers": ["Kessby"]},
        {"_id": "q2", "question": "?", "answers": ["1958"]},
        {"_id": "q3", "question": "?", "answers": ["Maresford"]},
    )) + "\n", encoding="utf-8")
    report = {"distractors": 4, "seeds": {"cfrag": 2}, "per_question": {
        "cfrag": [
            # a wrong majority: the rule loses what the reread (no_div's answer) had right
            row("q1", ["Veldhaven", "Veldhaven", "Kessby"], [0.5, 0.4, 0.3], "synthesize", 0.0, synth_s=30.0),
            # selected by agreement: reread and the rule both keep cfrag's own answer
            row("q2", ["1958", "1958", "1958"], [0.5, 0.5, 0.5], "select", 1.0),
            # no majority: the rule rereads too
            row("q3", ["A", "B", "C"], [0.1, 0.2, 0.3], "synthesize", 0.0, synth_s=25.0),
        ],
        "cfrag_no_div": [
            {"id": "q1", "containment": 1.0}, {"id": "q2", "containment": 0.0}, {"id": "q3", "containment": 1.0},
        ],
    }}
    path = tmp_path / "adv2.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    assert m.main(["--majority", str(data), str(path)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    # setting, seed, n, synthesised, majority among them, reread right, rule right, seconds saved
    assert last == "| distractors 4 | 2 | 3 | 2 | 1 | 3 | 2 | 30 s |"


def test_paired_table_counts_wins_and_the_difference_on_the_same_questions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = load_script()
    std = [{"id": f"q{i}", "lang": "en", "containment": c, "latency_s": 10.0} for i, c in enumerate((1, 1, 0, 0))]
    cf = [{"id": f"q{i}", "lang": "en", "containment": c, "latency_s": 15.0, "standard_outcome": o}
          for i, (c, o) in enumerate(((1, "confident"), (0, "replaced"), (1, "replaced"), (0, "unsupported")))]
    path = tmp_path / "clean.json"
    path.write_text(json.dumps({"per_question": {"passages": std, "cfrag": cf}}), encoding="utf-8")
    assert m.main(["--paired", str(path)]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| clean |")]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[:3] == ["clean", "all", "4"]
    assert cells[3].startswith("0.500 [") and cells[4].startswith("0.500 [") and cells[5].startswith("+0.000 [")
    assert cells[6] == "1 / 1" and cells[7] == "confident 1, replaced 2, unsupported 1"
    assert cells[8] == "10.0 / 15.0 s (1.50×)"
