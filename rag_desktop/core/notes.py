"""Notes the core writes for a person to read: one English template per kind of note.

The core keeps the English sentence (the CLI and the JSON reports print it as it is); the desktop UI
reads the template's name and values back from it (ui.cf_notes) and says it in the UI language with
the i18n key ``<prefix>.<name>``. A note made through a :class:`NoteBook` is therefore always one the
UI can translate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_FIELD = re.compile(r"\{(\w+)\}")


def _pattern(template: str) -> re.Pattern[str]:
    parts = _FIELD.split(template)  # literal, field, literal, field, ...
    rx = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts))
    return re.compile(rf"^{rx}$", re.DOTALL)


@dataclass(frozen=True)
class NoteBook:
    """The templates of one part of the core; ``prefix`` names their i18n keys."""

    prefix: str
    templates: dict[str, str]
    patterns: dict[str, re.Pattern[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", {n: _pattern(t) for n, t in self.templates.items()})

    def say(self, name: str, **values: Any) -> str:
        """The English note ``name`` with ``values`` (already formatted as they should read)."""
        return self.templates[name].format(**{k: str(v) for k, v in values.items()})

    def read(self, text: str) -> tuple[str, dict[str, str]] | None:
        """(name, values) of a note this book made, or None for any other text."""
        for name, rx in self.patterns.items():
            m = rx.match(text)
            if m:
                return name, m.groupdict()
        return None
