"""The text a person can see in a window, and the English in it (no tests here).

``visible_texts`` walks a widget tree the way a person reads it: every shown widget (and every
page of a tab or stack, which one click shows), with its label, button, tooltip, title, tab,
header, placeholder, menu, status-bar, list, table and text-view texts. ``english_words`` finds
the runs of ASCII letters in a text that read as English words, once the things that are not
the UI's own words are taken out: the documents' text and titles, file names and paths, model
names, numbers and units, formula symbols and a short allow-list of technical terms.

A test of a new window or dialog calls ``english_in(widget, content)`` in the Chinese UI and
expects ``[]``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Iterator

from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSpinBox,
    QComboBox,
    QGroupBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QPlainTextEdit,
    QStackedWidget,
    QTabBar,
    QTextEdit,
    QWidget,
)

# Names a Chinese UI keeps as they are: methods, formats, units and the project's symbols.
ALLOWED = frozenset({
    "RAG", "CF-RAG", "BM25", "PDF", "GGUF", "OCR", "HTML", "JSON", "CSV", "TOML", "Markdown", "DOCX", "Word",
    "CPU", "GPU", "HTTP", "URL", "API", "ID", "MMR", "F1", "e5", "MiniLM", "llama.cpp", "llama-server",
    "OpenAI", "Hugging", "Face", "jieba", "Snowball", "FAISS", "top-k", "rag_desktop",
    # the formulas' function names (cos(E(q), E(q')), max s(q',e), Rel) and the keys of shortcuts
    "cos", "max", "min", "Rel", "Ctrl", "Esc", "Shift", "Enter", "MRR", "nDCG",
    # the language switch names each language in its own words
    "English",
})
_ALLOWED_RE = re.compile("|".join(re.escape(a) for a in sorted(ALLOWED, key=len, reverse=True)))
# s_sim, s_c, s(q,e), φ_causal, K_q, A(d), B(d), θ_sim, λ, τ ...: the symbols of docs/architecture.md
_SYMBOL = re.compile(r"\b\w+_\w+\b|\b[A-Za-z]\([a-z,' ]+\)|\b[A-Za-z]\b")
_PATH = re.compile(r"(?:[A-Za-z]:)?[\w.~-]*[/\\][^\s，。、；：）)]*"
                   r"|\b[\w-]+\.(?:pdf|docx|txt|md|html|toml|gguf|json|csv)\b", re.IGNORECASE)
# model names and versions: a word holding a digit (Qwen3, bge-reranker-v2-m3, e5, BM25)
_VERSIONED = re.compile(r"[\w.-]*\d[\w.-]*")
_UNIT = re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|px|KB|MB|GB|k|M|B)\b")
_HTML_TAG = re.compile(r"<[^>]+>")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")
_QUOTED = re.compile(r"“[^”]*”")  # the documents' own words, quoted (the Why sentence, chips' tooltips)


def english_words(text: str, content: Iterable[str] = ()) -> list[str]:
    """The English words of ``text`` once ``content`` (documents' text, titles, questions, model
    names) and the allowed names, paths, units and symbols are removed."""
    def plain(x: str) -> str:
        return html.unescape(_HTML_TAG.sub(" ", x))

    known = sorted({plain(c) for c in content if c}, key=len, reverse=True)
    t = plain(text)
    # A snippet is a cut of a document's text ("…" where it is cut): a piece found inside a
    # document is the document's; elsewhere the documents' strings are taken out where they occur.
    pieces = [p for p in re.split(r"…|\n", t) if not (p.strip() and any(p.strip() in c for c in known))]
    t = "\n".join(pieces)
    for c in known:  # as whole words: a model called "local" leaves "locally" alone
        t = re.sub(rf"(?<![A-Za-z]){re.escape(c)}(?![A-Za-z])", " ", t)
    t = _QUOTED.sub(" ", t)
    t = _PATH.sub(" ", t)
    t = _UNIT.sub(" ", t)
    t = _VERSIONED.sub(" ", t)
    t = _ALLOWED_RE.sub(" ", t)
    t = _SYMBOL.sub(" ", t)
    return _WORD.findall(t)


def _shown(w: QWidget, root: QWidget) -> bool:
    """Shown, or shown by one click (a page of a tab or stack); never a widget explicitly hidden."""
    cur: QWidget | None = w
    while cur is not None and cur is not root:
        parent = cur.parentWidget()
        if cur.isHidden() and not isinstance(parent, QStackedWidget):
            return False
        cur = parent
    return True


def _columns(model: QAbstractItemModel, parent: QModelIndex) -> int:
    try:
        return model.columnCount(parent)
    except TypeError:  # QAbstractListModel keeps columnCount private: one column
        return 1


def _model_texts(model: QAbstractItemModel | None, where: str) -> Iterator[tuple[str, str]]:
    if model is None:
        return
    roles = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole)
    for orient in (Qt.Orientation.Horizontal, Qt.Orientation.Vertical):
        n = _columns(model, QModelIndex()) if orient == Qt.Orientation.Horizontal else 0
        for s in range(n):
            for role in roles:
                v = model.headerData(s, orient, role)
                if isinstance(v, str):
                    yield f"{where} header {s}", v

    def rows(parent: QModelIndex) -> Iterator[tuple[str, str]]:
        for r in range(min(model.rowCount(parent), 200)):
            for c in range(_columns(model, parent)):
                ix = model.index(r, c, parent)
                for role in roles:
                    v = model.data(ix, role)
                    if isinstance(v, str):
                        yield f"{where} [{r},{c}]", v
                if c == 0 and parent == QModelIndex() and model.rowCount(ix) > 0:
                    yield from rows(ix)

    yield from rows(QModelIndex())


def _actions(actions: Iterable[QAction], where: str) -> Iterator[tuple[str, str]]:
    for a in actions:
        if not a.isVisible() or a.isSeparator():
            continue
        yield f"{where} action", a.text().replace("&", "")
        menu = a.menu()
        if isinstance(menu, QMenu):
            yield from _actions(menu.actions(), f"{where} › {a.text()}")


def visible_texts(root: QWidget) -> list[tuple[str, str]]:
    """(where, text) for every text a person can see in ``root`` and its children."""
    out: list[tuple[str, str]] = [(f"{type(root).__name__} title", root.windowTitle())]
    for w in [root, *root.findChildren(QWidget)]:
        if not _shown(w, root):
            continue
        where = f"{type(w).__name__}:{w.objectName() or '?'}"
        if w.toolTip():
            out.append((f"{where} tooltip", w.toolTip()))
        if isinstance(w, QLabel | QAbstractButton):
            out.append((where, w.text()))
        elif isinstance(w, QGroupBox):
            out.append((where, w.title()))
        elif isinstance(w, QTabBar):
            for i in range(w.count()):
                out += [(f"{where} tab {i}", w.tabText(i)), (f"{where} tab {i} tooltip", w.tabToolTip(i))]
        elif isinstance(w, QLineEdit):
            out.append((f"{where} placeholder", w.placeholderText()))
        elif isinstance(w, QComboBox):
            out += [(f"{where} item {i}", w.itemText(i)) for i in range(w.count())]
        elif isinstance(w, QAbstractSpinBox):
            out += [(f"{where} special", w.specialValueText()), (f"{where} text", w.text())]
        elif isinstance(w, QTextEdit | QPlainTextEdit):
            out.append((where, w.toPlainText()))
        if isinstance(w, QAbstractItemView) and not isinstance(w, QHeaderView):  # the view's model is walked
            out += list(_model_texts(w.model(), where))
        if isinstance(w, QMainWindow):
            out += list(_actions(w.menuBar().actions(), where))
            out.append((f"{where} status bar", w.statusBar().currentMessage()))
    return [(where, text) for where, text in out if text]


def english_in(root: QWidget, content: Iterable[str] = ()) -> list[tuple[str, str, list[str]]]:
    """(where, text, English words) for every visible text of ``root`` with English in it."""
    content = list(content)
    found = []
    for where, text in visible_texts(root):
        words = english_words(text, content)
        if words:
            found.append((where, text, words))
    return found
