"""The one error family: each layer's errors are RagErrors of a kind, keep the builtin
base callers catch, and install hints name this interpreter and the project's own pins."""

from __future__ import annotations

import pickle
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from rag_desktop.app.catalog import CatalogError
from rag_desktop.app.evaluation import DataError
from rag_desktop.app.fetch import ChecksumError, FetchError
from rag_desktop.app.library import EmbedderMismatch
from rag_desktop.backends.errors import MissingDependency, ModelUnavailable
from rag_desktop.backends.http_client import EndpointError
from rag_desktop.backends.install import canonical, pin, pip_install
from rag_desktop.backends.readers import UnreadableDocument
from rag_desktop.core.errors import ErrorKind, RagError, UserInputError
from rag_desktop.core.prompting import PromptTooLong, TemplateError
from rag_desktop.core.settings import SettingsError

ROOT = Path(__file__).resolve().parent.parent

CASES: list[tuple[BaseException, ErrorKind, type[BaseException]]] = [
    (SettingsError("retrieval.k"), ErrorKind.SETTINGS, ValueError),
    (TemplateError("answer_en.txt: no [user] section"), ErrorKind.DATA, ValueError),
    (PromptTooLong("question of 9000 tokens"), ErrorKind.PROMPT_TOO_LONG, ValueError),
    (CatalogError("library busy"), ErrorKind.LIBRARY, RuntimeError),
    (EmbedderMismatch("built with bge-m3"), ErrorKind.EMBEDDER_MISMATCH, RuntimeError),
    (FetchError("offline"), ErrorKind.DOWNLOAD, RuntimeError),
    (ChecksumError("sha256 differs"), ErrorKind.DOWNLOAD, RuntimeError),
    (MissingDependency("faiss", "The vector index", "faiss-cpu"), ErrorKind.MISSING_DEPENDENCY, ImportError),
    (ModelUnavailable("/x/model.gguf is missing"), ErrorKind.MODEL, RuntimeError),
    (EndpointError("http://h:1 refused", "http://h:1"), ErrorKind.ENDPOINT, RuntimeError),
    (UnreadableDocument("a.pdf", "password-protected"), ErrorKind.DOCUMENT, Exception),
    (DataError("corpus.jsonl is missing"), ErrorKind.DATA, ValueError),
    (UserInputError("the question is empty"), ErrorKind.USER_INPUT, ValueError),
]


@pytest.mark.parametrize("exc,kind,builtin", CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_every_error_is_a_rag_error_of_its_kind_and_keeps_its_builtin_base(
    exc: BaseException, kind: ErrorKind, builtin: type[BaseException]
) -> None:
    assert isinstance(exc, RagError) and exc.kind is kind
    assert isinstance(exc, builtin)  # existing `except ValueError` / `except ImportError` still catch it


def test_unreadable_document_still_pickles() -> None:
    back = pickle.loads(pickle.dumps(UnreadableDocument("a.pdf", "password-protected")))
    assert isinstance(back, UnreadableDocument) and str(back) == "a.pdf: password-protected"


def test_kind_and_hint_can_be_given_per_instance() -> None:
    e = RagError("x", hint="do y", kind=ErrorKind.DATA)
    assert (e.kind, e.hint, str(e)) == (ErrorKind.DATA, "do y", "x")
    assert RagError("x").kind is ErrorKind.INTERNAL and RagError("x").hint == ""


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"])
    for items in project["optional-dependencies"].values():
        reqs += items
    out: dict[str, str] = {}
    for r in reqs:
        name = r.split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip()
        out.setdefault(canonical(name), r)
    return out


def test_pins_come_from_pyproject() -> None:
    declared = _pyproject_pins()
    assert pin("faiss-cpu") == declared["faiss-cpu"] == "faiss-cpu==1.15.1"
    assert pin("watchdog") == declared["watchdog"]
    assert pin("PySide6_Essentials") == declared["pyside6-essentials"]  # names compare normalised
    assert pin("pymupdf").replace(" ", "") in ("pymupdf>=1.26,<2", "pymupdf<2,>=1.26")
    assert pin("llama-cpp-python") == "llama-cpp-python==0.3.36"  # the main pin, not the test extra's [server]
    assert pin("torch") == "torch==2.13.0"  # installed by bootstrap.sh before the project
    assert pin("no-such-package-xyz") == "no-such-package-xyz"
    assert pin("x==1.0") == "x==1.0"


def test_install_hints_use_this_interpreter() -> None:
    cmd = pip_install("pymupdf", options="--no-deps")
    argv = shlex.split(cmd)
    assert argv[:5] == [sys.executable, "-m", "pip", "install", "--no-deps"]
    assert argv[5] == pin("pymupdf")
    e = MissingDependency("faiss", "The vector index", "faiss-cpu")
    assert e.hint == pip_install("faiss-cpu") and e.hint in str(e)
    assert ".venv/bin/pip" not in str(e)


def test_no_hand_written_pip_hints_are_left() -> None:
    """Every install hint goes through backends/install.py (one place for the command and the pins)."""
    offenders = []
    for path in (ROOT / "rag_desktop").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name != "install.py" and ("bin/pip install" in text or '"pip install' in text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
