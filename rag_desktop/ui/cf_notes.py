"""The core's notes (CF-RAG's reasons, warnings, question types and its trace in plain words; the
re-ranking's warnings) in the UI language (Qt-free).

The core writes its notes in English from named templates (core.cfrag.notes); here each is
read back and said with the i18n key ``cfnote.<name>``. A text no template made (a model's
words) is shown as it is.
"""

from __future__ import annotations

from rag_desktop.core.causal import CAUSAL_NOTES
from rag_desktop.core.cfrag import notes
from rag_desktop.core.cfrag.plain import plain_trace
from rag_desktop.core.cfrag.types import CFTrace
from rag_desktop.ui import i18n
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


def cf_plain(trace: CFTrace) -> list[str]:
    """CF-RAG's run in plain words, one sentence per stage (core.cfrag.plain), in the UI language."""
    return [tr(line.key, **line.values) for line in plain_trace(trace)]


def plain_sentences(trace: CFTrace, lang: str) -> list[str]:
    """:func:`cf_plain` in ``lang`` ("en" or "zh"), whatever the UI language is."""
    with i18n.using(lang):
        return cf_plain(trace)
