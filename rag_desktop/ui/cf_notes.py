"""CF-RAG's reasons, warnings and question types in the UI language (Qt-free).

The core writes its notes in English from named templates (core.cfrag.notes); here each is
read back and said with the i18n key ``cfnote.<name>``. A text no template made (a model's
words) is shown as it is.
"""

from __future__ import annotations

from rag_desktop.core.cfrag import notes
from rag_desktop.ui.i18n import has_tr, tr


def cf_note(text: str) -> str:
    """One CF-RAG warning or reason in the UI language."""
    got = notes.read(text)
    if got is None:
        return text
    name, values = got
    return tr(f"cfnote.{name}", **values)


def cf_reasons(reason: str) -> str:
    """A rejected counterfactual's reasons (the core joins them with "; ")."""
    return tr("cfnote.sep").join(cf_note(p) for p in reason.split("; ")) if reason else ""


def cf_tag(transformation: str) -> str:
    """The kind of change a counterfactual question makes (role, time, entity, category, scope)."""
    key = f"cfnote.tag.{transformation}"
    return tr(key) if has_tr(key) else transformation
