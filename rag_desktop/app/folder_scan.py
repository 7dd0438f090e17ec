"""Finding a library's documents in its folders, and the content hash that tells a changed file.

Part of the ingest (app.ingest_run, docs/architecture.md "Storage and crash safety"): which files
under a folder are documents (``.ragignore``, symbolic links, image files only with OCR on), and
the sha256 of a file's bytes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path

from rag_desktop.app.catalog import printable
from rag_desktop.backends.readers import is_readable_name
from rag_desktop.backends.scan_pages import is_image
from rag_desktop.core.types import CancelToken, FileProblem

IGNORE_FILE = ".ragignore"


def sha256_file(path: Path, cancel: CancelToken | None = None) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
            if cancel is not None:
                cancel.raise_if_set()
    return h.hexdigest()



def _ignored(path: Path, rules: list[tuple[Path, str]]) -> bool:
    """True if a ``.ragignore`` pattern (fnmatch, relative to its folder) matches ``path``."""
    for folder, pattern in rules:
        try:
            rel = path.relative_to(folder).as_posix()
        except ValueError:
            continue
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
            return True
    return False


def scan_folder(root: Path, images: bool = False) -> tuple[list[Path], list[FileProblem]]:
    """Supported files under ``root`` (sorted), and the entries that cannot be visited.

    A ``.ragignore`` file in a folder lists fnmatch patterns (one per line, ``#`` comments)
    of files that are not documents (the demo folder uses it for its SOURCES and QUESTIONS
    notes). Symlinked directories are not followed (a symlink loop cannot trap us); a
    symlinked file is read through its link when the target exists. Image files are
    documents only with ``images`` (OCR on).
    """
    found: list[Path] = []
    problems: list[FileProblem] = []

    def onerror(err: OSError) -> None:
        problems.append(FileProblem(printable(err.filename or root), f"cannot open folder: {err.strerror}"))

    ignore: list[tuple[Path, str]] = []  # (folder of the .ragignore, pattern)
    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror, followlinks=False):
        dirnames.sort()
        here = Path(dirpath)
        if IGNORE_FILE in filenames:
            try:
                lines = (here / IGNORE_FILE).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(FileProblem(printable(here / IGNORE_FILE), f"cannot read: {exc}"))
                lines = []
            ignore.extend((here, ln.strip()) for ln in lines if ln.strip() and not ln.startswith("#"))
        for name in sorted(filenames):
            p = here / name
            if is_readable_name(p) and (images or not is_image(p)) and not _ignored(p, ignore):
                found.append(p)
        for name in dirnames:
            p = Path(dirpath) / name
            if p.is_symlink():
                problems.append(FileProblem(printable(p), "symbolic link to a folder — not followed"))
    return found, problems
