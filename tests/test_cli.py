"""The CLI end to end on the bundled data: ingest, compare, eval, doctor (real models)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from rag_desktop.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "resources" / "demo"
DIAG = ROOT / "tests" / "data" / "diagnostic"


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline by construction: any attempt to open a non-loopback socket fails the test."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> object:
        host = address[0] if isinstance(address, tuple) else str(address)
        if isinstance(host, str) and not (host.startswith("127.") or host in ("localhost", "::1")) and \
                self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"network access attempted: {address}")
        return real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError(f"network access attempted: {a}")))


def test_ingest_and_compare_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str], no_network: None) -> None:
    lib = tmp_path / "lib"
    assert main(["ingest", str(DEMO), "--library", str(lib), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["added"]) == 11 and report["skipped"] == []
    assert main(["ingest", str(DEMO), "--library", str(lib), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["added"] == [] and again["unchanged"] == 11

    assert main(["compare", "如何评估数据出境的安全？", "--library", str(lib), "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)
    assert len(cmp["baseline"]["hits"]) == len(cmp["causal"]["hits"]) == 11
    explained = cmp["causal"]["explanations"]
    assert all(e["split"] is not None for e in explained)
    assert any(e["split"]["a_terms"] for e in explained), "no candidate shares a keyword with the question"
    assert cmp["tau_source"].startswith("calibrated")

    assert main(["compare", "What did the Wason selection task show?", "--library", str(lib)]) == 0
    out = capsys.readouterr().out
    assert "BASELINE" in out and "τ =" in out


def test_ingest_reports_bad_files_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("The Wason selection task tests conditional reasoning.", encoding="utf-8")
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0" + b"\0" * 100)
    assert main(["ingest", str(folder), "--library", str(tmp_path / "lib"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["added"]] == ["good.txt"]
    reasons = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
    assert set(reasons) == {"empty.pdf", "old.doc"}
    assert ".docx" in reasons["old.doc"]


def test_unwritable_library_is_a_fatal_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file-not-folder"
    target.write_text("x", encoding="utf-8")
    assert main(["ingest", str(DEMO), "--library", str(target / "lib")]) != 0
    assert "rag-desktop:" in capsys.readouterr().err


def test_eval_on_the_diagnostic_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "eval.json"
    assert main(["eval", "--data", str(DIAG), "--methods", "baseline,causal_exact,causal,hybrid",
                 "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "baseline" in table and "hybrid" in table
    res = json.loads(out.read_text(encoding="utf-8"))
    methods = res["methods"]
    assert set(methods) == {"baseline", "causal_exact", "causal", "hybrid"}
    for row in methods.values():
        assert 0.0 <= row["nDCG@10"] <= 1.0 and row["mean_stuffing_rank"] >= 1.0
    # The mechanism the paper describes: the causal score pushes keyword-stuffed documents down.
    assert methods["causal"]["mean_stuffing_rank"] > methods["baseline"]["mean_stuffing_rank"]
    assert set(res["per_query"]["baseline"]) == {f"q{i}" for i in range(1, 9)}
    assert res["gate"]["n_probes"] == 8


def test_doctor_reports_embedded_models_ready(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["embedder"]["ready"], checks["embedder"]
    assert checks["generator"]["ready"], checks["generator"]
    assert code == 0 and report["ready"]
