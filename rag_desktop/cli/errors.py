"""How the CLI reports an exception: one dispatch on the error family of ``core/errors.py``.

* a :class:`RagError` (any layer's error worded for a person) → its message, its hint if it adds
  something, exit 2; no traceback — the message already says what is wrong and what to do;
* ``KeyboardInterrupt`` → exit 130;
* anything else is a bug (even a ``ValueError`` from deep code: before this every
  ValueError was shown as if the person had typed something wrong) → "internal error", the
  exception's type and message, how to see the traceback, exit 1.

With ``-v`` the exception is raised again, so the traceback is printed (not for a settings error).
"""

from __future__ import annotations

import sys

from rag_desktop.core.errors import ErrorKind, RagError

EXIT_USER_ERROR = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130


def report(exc: BaseException, verbose: bool) -> int:
    """Print ``exc`` for the terminal on stderr and return the exit status (raise it with ``verbose``)."""
    from rag_desktop.cli.common import terminal_safe

    if isinstance(exc, KeyboardInterrupt):
        print("rag-desktop: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    # -v shows the traceback, except of a settings error: the settings file is the person's,
    # and where in the code it was read says nothing (as it once did).
    if verbose and not (isinstance(exc, RagError) and exc.kind is ErrorKind.SETTINGS):
        raise exc
    if isinstance(exc, RagError):
        message = str(exc)
        print(f"rag-desktop: {terminal_safe(message)}", file=sys.stderr)
        if exc.hint and exc.hint not in message:
            print(f"rag-desktop: {terminal_safe(exc.hint)}", file=sys.stderr)
        return EXIT_USER_ERROR
    text = str(exc).strip()
    detail = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    print(f"rag-desktop: internal error ({terminal_safe(detail)}); this is a bug, not something you did. "
          "Run the command again with -v to see the traceback, and report it.", file=sys.stderr)
    return EXIT_INTERNAL
