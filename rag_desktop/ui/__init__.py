"""The desktop UI (PySide6). Importing it applies one work-around, below."""

from __future__ import annotations

import ctypes
import sys


def _pin_none() -> None:
    """Keep ``None`` alive for the life of the process on CPython < 3.12.

    PySide6-Essentials 6.12.0 (the pinned version) drops one reference to ``None`` on every
    call of a C++ method that returns void (``setText``, ``setFont``, ``setPosition`` …) under
    CPython 3.11, where ``None`` is an ordinary reference-counted object (3.12 made it
    immortal, PEP 683). ``None`` starts with a few thousand references, so after a few
    thousand such calls — a minute of painting the result rows, or one answer streaming in —
    the interpreter aborts with "Fatal Python error: none_dealloc". Adding 2**40 references
    (the count is a 64-bit Py_ssize_t, the first field of every object) makes ``None``
    effectively immortal, as it is on 3.12. tests/test_gui_none_refcount.py shows the abort
    without it.
    """
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    ctypes.c_ssize_t.from_address(id(None)).value += 1 << 40


_pin_none()
