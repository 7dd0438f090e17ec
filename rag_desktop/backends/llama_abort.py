"""llama.cpp's abort callback: a prefill stopped within a second when the person cancels or the model is
closed (backends/llama_cpp_generator.py's module doc, "Cancel", on why it is armed around prefill only).

llama.cpp rolls back the batch it was decoding when the callback says stop, and llama-cpp-python's
``Llama.eval`` counts ``n_tokens`` batch by batch and drops every cell past it before the next decode: what
was read before the stopped batch stays usable (``LlamaCppGenerator`` keeps the pieces read whole,
backends/llama_segments.py).
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from typing import Any

from rag_desktop.core.types import CancelToken

LLAMA_LOG = logging.getLogger("llama-cpp-python")  # llama-cpp-python routes llama.cpp's log here


class AbortHook:
    """The abort callback of a loaded model's contexts: armed with a cancel token around a prefill, it
    stops the decode when the token is set or ``closing()`` says the model is being freed."""

    def __init__(self) -> None:
        self._token: CancelToken | None = None
        self._cb: Any = None
        self._null: Any = None
        self._set: Any = None

    def install(self, llama_cpp: Any, closing: Callable[[], bool]) -> None:
        """Bind the callback for ``llama_cpp`` (the module); a library without it leaves the hook inert."""
        self._set = _bind_abort_setter(llama_cpp)
        if self._set is None:
            return

        def _abort(_data: Any) -> bool:
            tok = self._token
            stop = bool(closing() or (tok is not None and tok.is_set))
            if stop:
                # llama.cpp logs the rollback of an aborted decode as an error; it is expected here, so
                # llama-cpp-python's log is muted until the hook is disarmed
                LLAMA_LOG.setLevel(logging.CRITICAL)
            return stop

        self._cb = llama_cpp.llama_cpp.ggml_abort_callback(_abort)
        self._null = llama_cpp.llama_cpp.ggml_abort_callback()

    def arm(self, ctx: Any, token: CancelToken | None, on: bool) -> None:
        """Install (on) or remove the hook on the context ``ctx``; it fires on ``token`` or on closing."""
        if self._set is None:
            return
        self._token = token
        self._set(ctx, self._cb if on else self._null, None)
        if not on and LLAMA_LOG.level == logging.CRITICAL:
            LLAMA_LOG.setLevel(logging.ERROR)  # llama-cpp's level for verbose=False


def _bind_abort_setter(llama_cpp: Any) -> Any:
    """ctypes binding of llama.cpp's ``llama_set_abort_callback`` (not wrapped by
    llama-cpp-python 0.3.x); None when the library does not export it."""
    lib = getattr(getattr(llama_cpp, "llama_cpp", None), "_lib", None)
    fn = getattr(lib, "llama_set_abort_callback", None) if lib is not None else None
    cb_type = getattr(llama_cpp.llama_cpp, "ggml_abort_callback", None) if lib is not None else None
    if fn is None or cb_type is None:
        return None
    fn.argtypes = [ctypes.c_void_p, cb_type, ctypes.c_void_p]
    fn.restype = None
    return fn
