"""The library's calibration gate in the app (app.library_gate, docs/architecture.md "The calibration
gate"): run at the end of an ingest with no generator, stored with the library's fingerprint, left
alone while it holds (a person's labels included), run once by a question when it no longer holds,
and shown by ``compare --json``.

The library, the embedder and the re-rankings are the real ones (the embedded e5-small); no test
loads a generator: ``no_generator`` makes the runtime's generator factory fail the test.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_desktop.app import library_gate
from rag_desktop.app.calibration import store_decision
from rag_desktop.app.library import IngestReport
from rag_desktop.app.library_gate import by_person, fingerprint, holds, read_record
from rag_desktop.app.runtime import Runtime
from rag_desktop.app.self_gate import ECHO_METRIC, ECHO_SHARE, SELF_LABELS, GateRecord
from rag_desktop.app.service import RagService
from rag_desktop.cli import main
from rag_desktop.core.gate import calibrate
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import CancelToken, Progress

DOCS = {
    "brakes.txt": "Bicycle brakes\n\nRim brakes squeeze the wheel rim with two rubber pads pulled by a cable. "
                  "Disc brakes grip a steel rotor bolted to the hub and keep working in the rain. "
                  "Check the pads every month and replace them when the grooves are worn away.",
    "roses.txt": "Pruning roses\n\nCut each cane just above an outward-facing bud in late winter. "
                 "Remove dead, damaged and crossing stems first, then thin the centre for air. "
                 "Feed the plant with a balanced fertiliser once new shoots appear in spring.",
    "bread.txt": "Sourdough bread\n\nA starter of flour and water ferments for a week before the first bake. "
                 "Mix the dough, let it rest for an hour, then fold it every thirty minutes. "
                 "Bake the loaf in a covered pot so the steam lets the crust expand before it sets.",
    "tax_zh.txt": "个人所得税\n\n居民个人的综合所得以每一纳税年度的收入额减除费用六万元后的余额为应纳税所得额。"
                  "专项附加扣除包括子女教育、继续教育、大病医疗、住房贷款利息和住房租金等支出。"
                  "纳税人应当在取得所得的次年三月一日至六月三十日内办理汇算清缴。",
}
TEA = "Green tea\n\nSteep green tea leaves in water below boiling for two minutes, or the cup turns bitter. " \
      "Store the leaves in a sealed tin away from light and the smell of coffee or spices."


@pytest.fixture()
def no_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to construct or load the generator fails the test."""

    def refuse(self: Runtime, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the generator was asked for")

    monkeypatch.setattr(Runtime, "generator", refuse)
    monkeypatch.setattr(Runtime, "prepare_generator", refuse)


def _folder(root: Path, texts: dict[str, str]) -> Path:
    folder = root / "docs"
    folder.mkdir(exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _ingest(svc: RagService, folder: Path, **kw: Any) -> tuple[list[Progress], IngestReport]:
    events = list(svc.ingest([folder], **kw))
    assert isinstance(events[-1], IngestReport), events[-1]
    return [e for e in events if isinstance(e, Progress)], events[-1]


def _gate_steps(progress: list[Progress]) -> list[Progress]:
    return [p for p in progress if p.stage == "gate"]


@pytest.fixture()
def svc(tmp_path: Path, no_generator: None) -> Iterator[RagService]:
    s = RagService(tmp_path / "library", Settings())
    yield s
    s.close()


# ---------------------------------------------------------------------- when a record holds (no models)

def test_a_record_holds_while_the_fingerprint_matches_and_a_person_s_old_one_until_a_change() -> None:
    mine = {"decision": "hybrid", "labels": SELF_LABELS, "fingerprint": "abc"}
    assert holds(mine, "abc") and not holds(mine, "abd") and not holds(None, "abc")
    # a person's calibration stored before records carried a fingerprint: kept until an ingest changes the library
    old_person = {"decision": "causal", "n_probes": 9, "reliability": 1.0}
    assert by_person(old_person) and holds(old_person, "abc") and not holds(old_person, "abc", changed=True)
    # the removed model-judged gate stored a list of hashes: never holds, the library's own gate replaces it
    assert not holds({"decision": "neither", "labels": "the local model's answer", "fingerprint": ["a1", "b2"]}, "x")


def test_a_stored_record_reads_back_and_an_old_or_broken_one_is_told_apart() -> None:
    d = calibrate([0.5, 1.0, 0.25], [1.0, 1.0, 0.5], [1.0, 0.5, 0.5], metric="MRR@10")
    rec = GateRecord.from_decision(d, labels=SELF_LABELS, fingerprint="f" * 64, seconds=1.25)
    back = read_record(json.loads(json.dumps(rec.to_json())))
    assert back == rec
    legacy = read_record(d.to_dict())  # a GateDecision stored by an older wizard
    assert legacy is not None and legacy.decision == d.decision and legacy.fingerprint == "" and legacy.seconds == 0
    assert read_record({"decision": "maybe"}) is None and read_record(None) is None
    assert read_record({**d.to_dict(), "reliability": "high"}) is None


# ---------------------------------------------------------------------- after an ingest

def test_an_ingest_runs_the_gate_without_a_generator_and_stores_its_record(svc: RagService, tmp_path: Path) -> None:
    folder = _folder(tmp_path, DOCS)
    progress, report = _ingest(svc, folder, calibrate_after=True)
    assert len(report.added) == len(DOCS)
    steps = _gate_steps(progress)
    assert [(p.current, p.total) for p in steps] == [(0, 1), (1, 1)]
    assert steps[0].message == "checking whether re-ranking helps this library…"
    cat = svc.library.catalog
    rec = cat.get_json(library_gate.GATE_KEY)
    assert rec["labels"] == SELF_LABELS and rec["fingerprint"] == fingerprint(cat)
    assert rec["decision"] in ("hybrid", "neither") and rec["n_probes"] == len(DOCS) and rec["seconds"] >= 0
    assert isinstance(rec["echo_share"], float) and rec["echo_threshold"] == ECHO_SHARE
    assert svc.runtime._generator is None
    # nothing changed: the record holds and the gate does not run again
    progress, report = _ingest(svc, folder, calibrate_after=True)
    assert report.unchanged and not _gate_steps(progress) and cat.get_json(library_gate.GATE_KEY) == rec
    # a new document changes the fingerprint: a new record
    _folder(tmp_path, {"tea.txt": TEA})
    progress, report = _ingest(svc, folder, calibrate_after=True)
    assert report.added and len(_gate_steps(progress)) == 2
    assert cat.get_json(library_gate.GATE_KEY)["fingerprint"] == fingerprint(cat) != rec["fingerprint"]


def test_a_cancelled_or_unasked_ingest_runs_no_gate(svc: RagService, tmp_path: Path) -> None:
    folder = _folder(tmp_path, DOCS)
    progress, _ = _ingest(svc, folder)  # calibrate_after not asked (evaluation's libraries)
    assert not _gate_steps(progress) and svc.library.catalog.get_json(library_gate.GATE_KEY) is None
    _folder(tmp_path, {"tea.txt": TEA})
    stop = CancelToken()
    stop.set()
    progress, report = _ingest(svc, folder, cancel=stop, calibrate_after=True)
    assert report.cancelled and not _gate_steps(progress)
    assert svc.library.catalog.get_json(library_gate.GATE_KEY) is None


def test_a_failing_gate_never_fails_the_ingest(svc: RagService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("probe planning broke")

    monkeypatch.setattr(library_gate, "self_calibrate", broken)
    with caplog.at_level(logging.WARNING, logger="rag_desktop.app.library_gate"):
        progress, report = _ingest(svc, _folder(tmp_path, DOCS), calibrate_after=True)
    assert len(report.added) == len(DOCS) and len(_gate_steps(progress)) == 2
    assert svc.library.catalog.get_json(library_gate.GATE_KEY) is None
    assert "calibration gate failed" in caplog.text and "probe planning broke" in caplog.text


def test_a_person_s_calibration_stays_until_the_documents_change(svc: RagService, tmp_path: Path) -> None:
    folder = _folder(tmp_path, DOCS)
    _ingest(svc, folder, calibrate_after=True)
    cat = svc.library.catalog
    d = calibrate([0.5, 0.5, 1.0], [1.0, 1.0, 1.0], [1.0, 0.5, 1.0], metric="MRR@10")
    stored = store_decision(svc, d, "typed", 0.5)
    mine = cat.get_json(library_gate.GATE_KEY)
    assert mine == json.loads(json.dumps(stored.to_json())) and mine["labels"] == "typed"
    assert mine["fingerprint"] == fingerprint(cat) and mine["decision"] == "causal" and mine["n_probes"] == 3
    assert svc.verdict().to_json()["calibrated_by"] == "person"
    progress, _ = _ingest(svc, folder, calibrate_after=True)  # nothing changed: the person's record stays
    assert not _gate_steps(progress) and cat.get_json(library_gate.GATE_KEY) == mine
    _folder(tmp_path, {"tea.txt": TEA})
    _ingest(svc, folder, calibrate_after=True)  # the documents changed: the library's own gate decides
    assert cat.get_json(library_gate.GATE_KEY)["labels"] == SELF_LABELS


# ---------------------------------------------------------------------- a question when the record does not hold

def test_a_question_runs_the_gate_once_when_the_stored_record_no_longer_holds(
        svc: RagService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(tmp_path, DOCS)
    _ingest(svc, folder, calibrate_after=True)
    cat = svc.library.catalog
    rec = cat.get_json(library_gate.GATE_KEY)
    _folder(tmp_path, {"tea.txt": TEA})
    _ingest(svc, folder)  # like a --no-calibrate ingest: the stored record is for the old documents
    assert cat.get_json(library_gate.GATE_KEY) == rec and not holds(rec, fingerprint(cat))
    runs: list[str] = []
    real = library_gate.self_calibrate

    def counted(*args: Any, **kwargs: Any) -> GateRecord | None:
        runs.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(library_gate, "self_calibrate", counted)
    # the answers do not follow the gate: the stale record is no evidence, and nothing runs
    svc.update_settings(svc.settings.replace("retrieval", default_method="hybrid"))
    v = svc.compare("How do disc brakes work?").verdict
    assert v["reason"] == "setting" and v["calibrated_by"] is None and v["n_probes"] is None and runs == []
    svc.update_settings(svc.settings.replace("retrieval", default_method="gated"))
    v = svc.compare("How do disc brakes work?").verdict
    assert runs == [fingerprint(cat)] and v["reason"] == "gate" and v["fingerprint"] == fingerprint(cat)
    assert cat.get_json(library_gate.GATE_KEY)["fingerprint"] == fingerprint(cat)
    svc.compare("How should roses be pruned?")
    assert len(runs) == 1  # it holds now


def test_a_gate_without_a_record_is_not_calibrated_and_tries_once(
        svc: RagService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _ingest(svc, _folder(tmp_path, DOCS))
    runs: list[int] = []

    def none(*args: Any, **kwargs: Any) -> None:
        runs.append(1)

    monkeypatch.setattr(library_gate, "self_calibrate", none)
    for _ in range(2):
        v = svc.compare("How do disc brakes work?").verdict
        assert (v["reason"], v["decision"], v["answer"], v["calibrated_by"]) == ("not_calibrated", "hybrid", "hybrid",
                                                                                 None)
    assert runs == [1]


# ---------------------------------------------------------------------- the CLI: ingest, then compare --json

def test_cli_ingest_then_compare_shows_the_gate_decision_with_no_generator_loaded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_generator: None) -> None:
    lib, folder = str(tmp_path / "lib"), str(_folder(tmp_path, DOCS))
    assert main(["ingest", folder, "--library", lib]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"added {len(DOCS)},") and "\ncalibration gate: " in printed
    assert "documents echo" in printed
    assert main(["compare", "How do disc brakes work?", "--library", lib, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    v = out["verdict"]
    assert v["reason"] == "gate" and v["decision"] in ("causal", "hybrid", "neither")
    assert v["gate_decision"] == v["decision"] and v["calibrated_by"] == "library" and v["labels"] == SELF_LABELS
    assert v["answer"] == {"causal": "causal", "hybrid": "hybrid", "neither": "baseline"}[v["decision"]]
    assert isinstance(v["n_probes"], int) and v["n_probes"] > 0 and 0.0 <= v["reliability"] <= 1.0
    assert {"delta_causal", "delta_hybrid", "mean_baseline", "metric", "fingerprint", "seconds",
            "calibrated_at", "effect", "text"} <= set(v)
    assert len(v["fingerprint"]) == 64 and v["metric"] == ECHO_METRIC and v["effect"] in ("echoes", "no_echoes")
    assert isinstance(v["echo_share"], float) and isinstance(v["echoes"], list)
    assert out["answer_ranking"] == v["answer"]
    # --no-calibrate leaves no record; the next question calibrates (still no model)
    lib2 = str(tmp_path / "lib2")
    assert main(["ingest", folder, "--library", lib2, "--json", "--no-calibrate"]) == 0
    capsys.readouterr()
    assert main(["compare", "How do disc brakes work?", "--library", lib2, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"]["calibrated_by"] == "library"
