"""The Session: the one owner of the models and of the open library.

A person has one library open at a time and one set of models loaded. The Session holds
both: the Runtime (embedder, tokenizer, scorer, generator), built once, and the one
:class:`~rag_desktop.app.service_api.LibraryService` on the open library. Switching
libraries opens the new service on the same models and closes the old library; closing the
Session closes the library and then the models — the window never has to know which of its
objects own what.

Use it as a context manager::

    with Session.start(library_dir, settings) as session:
        comparison = session.service.compare("...")
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import TracebackType
from typing import Protocol

from rag_desktop.app.service_api import LibraryService
from rag_desktop.core.settings import Settings

log = logging.getLogger(__name__)


class _Closeable(Protocol):
    def close(self) -> None: ...


class Session:
    """Owns ``runtime`` (the models, may be None for a service that brings its own) and the
    open service. ``open`` may run on a worker thread; reading ``service`` is always safe."""

    def __init__(self, service: LibraryService, runtime: _Closeable | None = None) -> None:
        self._service = service
        self.runtime = runtime
        self._lock = threading.Lock()
        self.closed = False

    @classmethod
    def start(cls, library_dir: Path, settings: Settings) -> Session:
        """A session on ``library_dir`` with models built from ``settings`` (lazily, on first use)."""
        from rag_desktop.app.runtime import Runtime
        from rag_desktop.app.service import RagService

        runtime = Runtime(settings.validate())
        return cls(RagService(library_dir, settings, runtime=runtime), runtime)

    @property
    def service(self) -> LibraryService:
        return self._service

    def open(self, library_dir: Path, settings: Settings) -> LibraryService:
        """Open ``library_dir`` on the loaded models and close the library open before.

        Raises (and keeps the old library open) when the new one cannot be opened; a failure
        while closing the old library is logged and does not undo the switch.
        """
        with self._lock:
            new = self._service.with_library(library_dir, settings)
            old, self._service = self._service, new
        try:
            old.close()
        except Exception:
            log.exception("while closing the library %s", old.library.folder)
        return new

    def update_settings(self, settings: Settings) -> None:
        """The one place new settings reach the open service (and through it the models)."""
        self._service.update_settings(settings)

    def close(self) -> None:
        """Close the library, then the models; safe to call twice."""
        if self.closed:
            return
        self.closed = True
        try:
            self._service.close()
        finally:
            if self.runtime is not None:
                self.runtime.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
