"""App.session.Session: the one owner of the models and the open library."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rag_desktop.app.catalog import CatalogError
from rag_desktop.app.runtime import Runtime
from rag_desktop.app.service import RagService
from rag_desktop.app.session import Session
from rag_desktop.core.settings import Settings

WORD = "量子纠缠态"
TEXT = f"我们讨论{WORD}的性质"


def _closed(svc: object) -> bool:
    """Whether the library's SQLite connection is closed (a closed one refuses every statement)."""
    assert isinstance(svc, RagService)
    try:
        svc.library.catalog.db.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def _words(svc: RagService) -> list[str]:
    return [w for _s, _e, w, _k in svc.word_spans(TEXT)]


def test_switching_keeps_the_models_and_closes_the_old_library(tmp_path: Path) -> None:
    with Session.start(tmp_path / "a", Settings()) as session:
        first = session.service
        assert isinstance(first, RagService)
        runtime = first.runtime
        second = session.open(tmp_path / "b", Settings())
        assert session.service is second and second is not first
        assert isinstance(second, RagService) and second.runtime is runtime  # nothing reloaded
        assert _closed(first) and not _closed(second)
    assert _closed(second)  # leaving the block closed the library …
    assert runtime._embedder is None and runtime._generator is None  # … and the models


def test_a_library_that_cannot_be_opened_leaves_the_old_one_open(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the library folder should be")
    session = Session.start(tmp_path / "a", Settings())
    first = session.service
    with pytest.raises(CatalogError):
        session.open(blocker, Settings())
    assert session.service is first
    assert not _closed(first)
    session.close()
    session.close()  # twice is harmless


def test_user_words_of_one_library_do_not_follow_into_the_next(tmp_path: Path) -> None:
    with Session.start(tmp_path / "a", Settings()) as session:
        first = session.service
        assert isinstance(first, RagService)
        plain = _words(first)
        assert WORD not in plain  # jieba splits it without the library's word list
        first.runtime.tokenizer().add_words([WORD])  # what Library/Retriever do with user_words
        assert WORD in _words(first)
        second = session.open(tmp_path / "b", Settings())
        assert isinstance(second, RagService)
        assert _words(second) == plain  # before the fix the word stayed taught across the switch


def test_a_session_without_models_closes_only_the_service(tmp_path: Path) -> None:
    runtime = Runtime(Settings())
    svc = RagService(tmp_path / "a", Settings(), runtime=runtime)
    Session(svc).close()  # the caller keeps the runtime (the GUI tests' services bring their own)
    assert _closed(svc)
