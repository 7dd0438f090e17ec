"""Errors raised by backends, worded for a person who has to fix them."""

from __future__ import annotations

from typing import Any


class MissingDependency(ImportError):
    """A heavy optional package is not installed; the message says how to install it."""

    def __init__(self, package: str, purpose: str, pip_name: str | None = None) -> None:
        hint = pip_name or package
        super().__init__(
            f"{purpose} needs the Python package '{package}', which is not installed. "
            f"Install it with: .venv/bin/pip install {hint}"
        )
        self.package = package


class ModelUnavailable(RuntimeError):
    """A configured model file/folder is missing or unusable; the message says which and why."""


def require(module: str, purpose: str, pip_name: str | None = None) -> Any:
    """Import ``module`` lazily, turning ImportError into MissingDependency with a hint."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised only without the package
        raise MissingDependency(module, purpose, pip_name) from exc
