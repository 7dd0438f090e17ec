"""The one error family: every error worded for a person is a :class:`RagError`.

Each layer subclasses it where the problem arises (``SettingsError`` in core, ``MissingDependency``
and ``UnreadableDocument`` in backends, ``CatalogError`` in app, ...), and each subclass names its
:class:`ErrorKind`. The UI (``ui/worker.describe_error``) and the CLI (``cli.errors``) dispatch on
``isinstance(exc, RagError)`` and on ``exc.kind`` — never on class names — so a new error only
has to pick a kind to be shown properly.

Subclasses keep the builtin base their callers catch (``SettingsError`` is still a ``ValueError``,
``MissingDependency`` an ``ImportError``, ``CatalogError`` a ``RuntimeError``): existing
``except ValueError`` sites behave as before. Anything that is *not* a RagError is, to the CLI and
the UI, an internal error (a bug), even a bare ``ValueError`` from deep code.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """What kind of problem it is, which decides how it is shown and what the next step is."""

    USER_INPUT = "user_input"  # a value the person typed or passed (an empty question, a bad name)
    SETTINGS = "settings"  # a setting is not valid
    MISSING_DEPENDENCY = "missing_dependency"  # a Python package is not installed
    MODEL = "model"  # a configured model is missing or unusable
    PROMPT_TOO_LONG = "prompt_too_long"  # the question does not fit the model's context
    LIBRARY = "library"  # the library folder cannot be used (busy, corrupt, not writable)
    EMBEDDER_MISMATCH = "embedder_mismatch"  # the library was built with another embedder
    DOCUMENT = "document"  # one document cannot be read
    ENDPOINT = "endpoint"  # a model server could not be reached or answered badly
    DATA = "data"  # a data file (evaluation set, probes, a prompt template) is not in the expected format
    DOWNLOAD = "download"  # fetching a model failed (network, checksum)
    INTERNAL = "internal"  # a bug: not the person's to fix


class RagError(Exception):
    """An error whose message says what is wrong; ``hint`` (may be empty) says what to do next.

    ``kind`` is a class attribute that subclasses set; an instance may override it.
    """

    kind: ErrorKind = ErrorKind.INTERNAL
    hint: str = ""

    def __init__(self, *args: object, hint: str | None = None, kind: ErrorKind | None = None) -> None:
        super().__init__(*args)
        if hint is not None:
            self.hint = hint
        if kind is not None:
            self.kind = kind


class UserInputError(RagError, ValueError):
    """A value the person gave is not usable (an empty question, an unknown method name)."""

    kind = ErrorKind.USER_INPUT
