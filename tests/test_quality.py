"""ruff and mypy are part of the suite, so "the tests pass" includes "the code is clean"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    proc = _run(str(BIN / "ruff"), "check", "rag_desktop", "tests", "scripts")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = _run(str(BIN / "mypy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fake_service_keeps_the_ui_contract() -> None:
    """The GUI tests' fake service is checked against app.service_api.LibraryService
    (tests/test_gui_support.py ``conforms``): a service method the UI starts calling, or a
    changed signature, fails here instead of only in the fakes at run time."""
    proc = _run(str(BIN / "mypy"), "tests/test_gui_support.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_suite_collects_with_pytest_and_with_python_m_pytest() -> None:
    """Both ways of starting pytest collect every module: a test module that imports a helper as
    ``tests.x`` works only when the checkout is on sys.path (``python -m pytest``), so none may."""
    counts = []
    for cmd in ([str(BIN / "pytest")], [sys.executable, "-m", "pytest"]):
        proc = _run(*cmd, "--collect-only", "-q", "-p", "no:cacheprovider")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        counts.append(proc.stdout.strip().splitlines()[-1].split(" in ")[0])  # "1194 tests collected"
    assert counts[0] == counts[1] and "error" not in counts[0]
