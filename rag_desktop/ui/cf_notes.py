"""The core's notes (CF-RAG's reasons, warnings and question types; the re-ranking's warnings) in the UI
language (Qt-free).

The core writes its notes in English from named templates (core.cfrag.notes); here each is
read back and said with the i18n key ``cfnote.<name>``. A text no template made (a model's
words) is shown as it is.
"""

from __future__ import annotations

from rag_desktop.core.causal import CAUSAL_NOTES
from rag_desktop.core.cfrag import notes
from rag_desktop.ui.i18n import has_tr, tr

BOOKS = (notes.NOTES, CAUSAL_NOTES)


def cf_note(text: str) -> str:
    """One warning or reason the core wrote (CF-RAG's, the re-ranking's) in the UI language."""
    for book in BOOKS:
        got = book.read(text)
        if got is not None:
            name, values = got
            return tr(f"{book.prefix}.{name}", **values)
    return text


def cf_reasons(reason: str) -> str:
    """A rejected counterfactual's reasons (the core joins them with "; ")."""
    return tr("cfnote.sep").join(cf_note(p) for p in reason.split("; ")) if reason else ""


def cf_tag(transformation: str) -> str:
    """The kind of change a counterfactual question makes (role, time, entity, category, scope)."""
    key = f"cfnote.tag.{transformation}"
    return tr(key) if has_tr(key) else transformation
