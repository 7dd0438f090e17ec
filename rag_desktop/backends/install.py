"""Install hints: ``<this python> -m pip install <pin>``, the pin read from one place.

Where the pins live, and why this reads them from there: ``pyproject.toml``'s
``[project].dependencies`` (and extras) is already what ``scripts/bootstrap.sh`` installs
(``pip install -c requirements/constraints.txt -e .``), so it is the one list a hint can agree
with. Run from a checkout, the pyproject.toml next to the package is read (tomllib); an installed
rag-desktop carries the same list as its distribution metadata (``Requires-Dist``, read with
importlib.metadata). No second table of versions is kept here — with one
exception pyproject cannot hold: torch, which bootstrap.sh installs first as the CPU build
(pyproject's comment says so). requirements/constraints.txt (every transitive version) is not
read: it is not shipped with the package and would give a second answer for the direct pins.

``sys.executable -m pip`` installs into the interpreter that is running the app, whatever the
venv is called or wherever it is (a hand-written ``.venv/bin/pip`` was wrong for any other).
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys
import tomllib
from functools import cache
from pathlib import Path

DISTRIBUTION = "rag-desktop"
# Installed by scripts/bootstrap.sh before the project (CPU wheel index), so not in pyproject.
OUTSIDE_PYPROJECT = {"torch": "torch==2.13.0"}

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name (``PySide6_Essentials`` == ``pyside6-essentials``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> list[str]:
    """The project's requirement strings: the checkout's pyproject.toml if this runs from one (it is
    the source; an editable install's metadata is only as new as its last install), else the
    installed distribution's metadata."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        project = {}
    if project.get("name") == DISTRIBUTION:
        reqs = list(project.get("dependencies", []))
        for extra, items in project.get("optional-dependencies", {}).items():
            reqs += [f'{r}; extra == "{extra}"' for r in items]
        return reqs
    try:
        return list(importlib.metadata.requires(DISTRIBUTION) or [])
    except importlib.metadata.PackageNotFoundError:
        return []


@cache
def _pins() -> dict[str, str]:
    """canonical name -> requirement (without marker); a main dependency wins over an extra's."""
    out: dict[str, str] = {}
    for req in sorted(_declared(), key=lambda r: "extra ==" in r):  # main dependencies first
        m = _NAME.match(req)
        if m is None:
            continue
        spec = req.split(";", 1)[0].strip()
        spec = re.sub(r"\[[^\]]*\]", "", spec).replace(" ", "")  # the pin, not the extras of the pin
        out.setdefault(canonical(m.group(1)), spec)
    for name, spec in OUTSIDE_PYPROJECT.items():
        out.setdefault(canonical(name), spec)
    return out


def pin(name: str) -> str:
    """The requirement to install ``name`` with, e.g. ``faiss-cpu==1.15.1``; the bare name if the
    project does not declare it. A ``name`` that already has a version (``x==1``) is returned as is."""
    m = _NAME.match(name)
    if m is None or m.end() != len(name):
        return name
    return _pins().get(canonical(name), name)


def pip_install(*names: str, options: str = "") -> str:
    """The shell command that installs ``names`` (pinned by :func:`pin`) into this interpreter."""
    parts = [shlex.quote(sys.executable), "-m", "pip", "install", *shlex.split(options),
             *(shlex.quote(pin(n)) for n in names)]
    return " ".join(parts)
