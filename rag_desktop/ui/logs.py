"""Where the desktop app writes its log (the detail behind every error message)."""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path


def log_file() -> Path:
    from rag_desktop.app.config import data_dir

    return data_dir() / "logs" / "rag-desktop.log"


def setup_logging(verbose: bool = False) -> Path:
    """A rotating file log (and stderr when ``verbose``); returns the log file's path."""
    path = log_file()
    root = logging.getLogger()
    if any(getattr(h, "_rag_desktop", False) for h in root.handlers):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000, backupCount=3,
                                                                        encoding="utf-8")
    except OSError:  # a read-only home must not stop the app; stderr still works
        handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler._rag_desktop = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    return path
