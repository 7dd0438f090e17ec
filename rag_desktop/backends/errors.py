"""Errors raised by backends, worded for a person who has to fix them (the RagError family)."""

from __future__ import annotations

from typing import Any

from rag_desktop.backends.install import pip_install
from rag_desktop.core.errors import ErrorKind, RagError


class MissingDependency(RagError, ImportError):
    """A heavy optional package is not installed; the message says how to install it.

    ``pip_name`` is the distribution to install (default: ``package``); its pin comes from the
    project's declared dependencies (backends/install.py), so a hint never names another version.
    """

    kind = ErrorKind.MISSING_DEPENDENCY

    def __init__(self, package: str, purpose: str, pip_name: str | None = None) -> None:
        command = pip_install(pip_name or package)
        super().__init__(
            f"{purpose} needs the Python package '{package}', which is not installed. "
            f"Install it with: {command}",
            hint=command,
        )
        self.package = package


class ModelUnavailable(RagError, RuntimeError):
    """A configured model file/folder is missing or unusable; the message says which and why."""

    kind = ErrorKind.MODEL


def require(module: str, purpose: str, pip_name: str | None = None) -> Any:
    """Import ``module`` lazily, turning ImportError into MissingDependency with a hint."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised only without the package
        raise MissingDependency(module, purpose, pip_name) from exc
