"""Shared fixtures. Tests never download: models come from installed PyPI packages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings and libraries of a test never touch the real user folders.

    The model folder is shared across tests (joining the embedded GGUF once costs seconds).
    """
    base = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("RAG_DESKTOP_CONFIG_DIR", str(base / "config"))
    monkeypatch.setenv("RAG_DESKTOP_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("RAG_DESKTOP_MODEL_DIR", os.environ.get("RAG_DESKTOP_TEST_MODEL_DIR",
                                                               str(ROOT / ".test-models")))
