"""Library sidebar: the known libraries, and the open one's folders, documents with status,
skipped files with reasons.

The list of libraries comes from the window (``app.config.LibraryList``); choosing, creating
and removing a library are signals the window acts on. The listing is computed on the
worker (it reads the catalog and stats every file to tell
"changed" from "indexed"), then shown here; the panel itself never touches the disk.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal, SignalInstance
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.types import Progress
from rag_desktop.ui.i18n import has_tr, tr
from rag_desktop.ui.plaintext import plain_tooltip
from rag_desktop.ui.present import format_eta

PROGRESS_STEPS = 1000  # the bar's resolution for a share of the whole job (0.1 %)

REASON_ROLE = Qt.ItemDataRole.UserRole + 1  # a skipped file's whole reason, on its wrapped row


@dataclass(frozen=True)
class DocRow:
    doc_id: int
    title: str
    path: str
    kind: str
    lang: str
    n_pages: int
    status: str  # indexed | changed | missing
    warnings: tuple[str, ...] = ()  # stored at ingest, e.g. "the PDF is damaged and was repaired ..."
    ocr: bool = False  # some pages (or the whole image) were read by OCR


@dataclass(frozen=True)
class Listing:
    library: str
    roots: tuple[str, ...]
    documents: tuple[DocRow, ...]
    skipped: tuple[tuple[str, str], ...]  # (path, reason)
    text_outdated: bool = False  # read by an older text version: the window reads the folders again


def build_listing(service: Any) -> Listing:
    """Read the catalog and stat the files (worker thread)."""
    cat = service.library.catalog
    states = cat.file_states()
    warnings = cat.document_warnings()
    rows: list[DocRow] = []
    for d in cat.documents():
        st = states.get(d.path)
        try:
            s = os.stat(d.path)
            status = "indexed" if st is None or (s.st_size == st.size and s.st_mtime_ns == st.mtime_ns) \
                else "changed"
        except OSError:
            status = "missing"
        rows.append(DocRow(d.doc_id, d.title, d.path, d.kind, d.lang, d.n_pages, status,
                           warnings.get(d.doc_id, ()), service.library.ocr_cache.has(d.sha256)))
    skipped = tuple((p.path, p.reason) for p in cat.problems())
    # A large file whose ingest was interrupted: its embedded chunks are kept, not searchable yet.
    skipped += tuple((path, tr("lib.partial", n=n)) for path, n in cat.staged_counts().items())
    return Listing(str(service.library.folder), tuple(cat.roots()), tuple(rows), skipped,
                   service.library.text_outdated())


STATUS_COLORS = {"indexed": "#1B7F3B", "changed": "#B26B00", "missing": "#B3261E", "skipped": "#B3261E"}


class LibraryPanel(QWidget):
    add_folder = Signal()
    rescan = Signal()
    cancel = Signal()
    doc_activated = Signal(int)  # doc_id
    library_new = Signal()
    library_open = Signal(str)  # folder
    library_remove = Signal(str)  # folder

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("library_panel")
        self.setMinimumWidth(250)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        self.libs_label = QLabel()
        self.lib_list = QListWidget()
        self.lib_list.setObjectName("library_list")
        self.lib_list.setMaximumHeight(110)
        self.lib_list.itemDoubleClicked.connect(self._on_lib_double)
        lib_btns = QHBoxLayout()
        self.new_lib_btn = QPushButton()
        self.open_lib_btn = QPushButton()
        self.remove_lib_btn = QPushButton()
        for b in (self.new_lib_btn, self.open_lib_btn, self.remove_lib_btn):
            lib_btns.addWidget(b)
        self.new_lib_btn.clicked.connect(self.library_new)
        self.open_lib_btn.clicked.connect(lambda: self._emit_selected(self.library_open))
        self.remove_lib_btn.clicked.connect(lambda: self._emit_selected(self.library_remove))
        self.lib_list.currentItemChanged.connect(lambda *_: self._update_lib_buttons())
        lay.addWidget(self.libs_label)
        lay.addWidget(self.lib_list)
        lay.addLayout(lib_btns)
        self.libraries: tuple[str, ...] = ()
        self.current_library = ""
        # (folders, number of documents) of the libraries that are not open; None: no library there
        self.summaries: dict[str, tuple[tuple[str, ...], int] | None] = {}
        self.lib_label = QLabel()
        self.lib_label.setTextFormat(Qt.TextFormat.PlainText)
        self.lib_label.setWordWrap(True)
        btns = QHBoxLayout()
        self.add_btn = QPushButton()
        self.rescan_btn = QPushButton()
        btns.addWidget(self.add_btn)
        btns.addWidget(self.rescan_btn)
        self.tree = QTreeWidget()
        self.tree.setColumnCount(2)
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(False)
        self.tree.setWordWrap(True)  # a skipped file's reason wraps instead of ending in "…"
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress_label = QLabel()
        self._busy_why = ""  # set_busy: why the ingest in progress runs
        self.progress_label.setTextFormat(Qt.TextFormat.PlainText)  # shows file names
        self.progress_label.setWordWrap(True)
        self.cancel_btn = QPushButton()
        prog = QHBoxLayout()
        prog.addWidget(self.progress, 1)
        prog.addWidget(self.cancel_btn)
        lay.addWidget(self.lib_label)
        # Folder watching (app/watcher.py): "watching 2 folders", a missing folder, the last update.
        self.watch_label = QLabel()
        self.watch_label.setObjectName("watch_label")
        self.watch_label.setWordWrap(True)
        self._watch: tuple[bool, int, tuple[str, ...], str] = (False, 0, (), "")
        lay.addWidget(self.watch_label)
        lay.addLayout(btns)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.progress_label)
        lay.addLayout(prog)
        self.add_btn.clicked.connect(self.add_folder)
        self.rescan_btn.clicked.connect(self.rescan)
        self.cancel_btn.clicked.connect(self.cancel)
        self.tree.itemDoubleClicked.connect(self._on_double)
        vp = self.tree.viewport()
        if vp is not None:
            vp.installEventFilter(self)  # re-wrap the skipped files' reasons when the panel's width changes
        self.listing: Listing | None = None
        self.set_busy(False)
        self.retranslate()

    # -------------------------------------------------------------- libraries
    def set_libraries(self, libraries: Sequence[str], current: str) -> None:
        """Show the known libraries; ``current`` (the open one) is bold and marked with ●."""
        # keep the user's selection, unless another library was just opened: then select that one
        selected = self.selected_library() if current == self.current_library else current
        self.libraries = tuple(libraries)
        self.current_library = current
        self.lib_list.blockSignals(True)
        self.lib_list.clear()
        for path in self.libraries:
            it = QListWidgetItem()
            it.setData(Qt.ItemDataRole.UserRole, path)
            self.lib_list.addItem(it)
            if path == (selected if selected in self.libraries else current):
                self.lib_list.setCurrentItem(it)
        self.lib_list.blockSignals(False)
        self._label_libraries()
        self._update_lib_buttons()

    def set_summaries(self, summaries: dict[str, tuple[tuple[str, ...], int] | None]) -> None:
        """What the other libraries hold (read on the worker): shown beside their names."""
        self.summaries = dict(summaries)
        self._label_libraries()

    def _summary(self, path: str) -> tuple[tuple[str, ...], int] | str | None:
        """(folders, documents), None (no library there) or "unknown" (not read yet)."""
        if path == self.current_library:
            lst = self.listing
            return (lst.roots, len(lst.documents)) if lst is not None else "unknown"
        return self.summaries.get(path, "unknown")

    def _label_libraries(self) -> None:
        for it in self.library_items():
            path = str(it.data(Qt.ItemDataRole.UserRole))
            is_open = path == self.current_library
            summary = self._summary(path)
            text = ("● " if is_open else "   ") + (Path(path).name or path)
            tip = tr("lib.current_tip" if is_open else "lib.other_tip", path=path)
            if summary is None:
                text += "  ·  " + tr("lib.lib_missing")
                tip = tr("lib.lib_missing_tip", path=path)
            elif isinstance(summary, tuple):
                roots, n = summary
                text += "  ·  " + tr("lib.n_docs", n=n)
                if roots:
                    tip += "\n" + tr("lib.folders_tip") + "\n" + "\n".join(roots)
            it.setText(text)
            it.setToolTip(plain_tooltip(tip))
            f = QFont(it.font())
            f.setBold(is_open)
            it.setFont(f)

    def library_items(self) -> list[QListWidgetItem]:
        return [it for it in (self.lib_list.item(i) for i in range(self.lib_list.count())) if it is not None]

    def select_library(self, path: str) -> None:
        for it in self.library_items():
            if it.data(Qt.ItemDataRole.UserRole) == path:
                self.lib_list.setCurrentItem(it)

    def selected_library(self) -> str | None:
        it = self.lib_list.currentItem()
        return None if it is None else str(it.data(Qt.ItemDataRole.UserRole))

    def _emit_selected(self, signal: SignalInstance) -> None:
        path = self.selected_library()
        if path is not None:
            signal.emit(path)

    def _on_lib_double(self, item: QListWidgetItem) -> None:
        self.library_open.emit(str(item.data(Qt.ItemDataRole.UserRole)))

    def _update_lib_buttons(self) -> None:
        sel = self.selected_library()
        self.open_lib_btn.setEnabled(sel is not None and sel != self.current_library)
        self.remove_lib_btn.setEnabled(sel is not None and sel != self.current_library)

    # -------------------------------------------------------------- ingest progress
    def set_busy(self, busy: bool, why: str = "") -> None:
        """Show or hide the ingest's progress; ``why``: a line above it saying why the ingest runs
        (the library read again for a newer reader), kept until it ends."""
        self._busy_why = why if busy else ""
        self.progress.setVisible(busy)
        self.cancel_btn.setVisible(busy)
        self.progress_label.setVisible(busy)
        self.add_btn.setEnabled(not busy)
        self.rescan_btn.setEnabled(not busy)
        if busy:
            self.progress.setRange(0, 0)
            self._set_progress_text(tr("lib.starting"))

    def _set_progress_text(self, text: str) -> None:
        self.progress_label.setText(f"{self._busy_why}\n{text}" if self._busy_why else text)

    def show_progress(self, p: Progress) -> None:
        """The whole ingest's share on the bar when the event carries it (app.ingest_meter), the step's
        own counts in the words; a step's counts on the bar otherwise."""
        if p.overall is not None:
            self.progress.setRange(0, PROGRESS_STEPS)
            self.progress.setValue(int(p.overall * PROGRESS_STEPS))
        elif p.total > 0:
            self.progress.setRange(0, p.total)
            self.progress.setValue(min(p.current, p.total))
        else:
            self.progress.setRange(0, 0)
        eta = format_eta(p.eta_s)
        stage = tr(f"stage.{p.stage}") if has_tr(f"stage.{p.stage}") else p.stage
        text = tr("lib.progress", stage=stage, cur=p.current, total=p.total, msg=p.message)
        if p.overall is not None:
            text = tr("lib.progress_share", pct=int(p.overall * 100)) + " · " + text
        if eta:
            text += " · " + tr("lib.eta", eta=eta)
        self._set_progress_text(text)

    # -------------------------------------------------------------- listing
    def set_listing(self, listing: Listing | None) -> None:
        """Show ``listing``; None empties the tree (a library is being opened)."""
        self.listing = listing
        self._fill()
        self._label_libraries()
        if listing is None:
            self.lib_label.setText(tr("lib.none"))

    def _fill(self) -> None:
        self.tree.clear()
        lst = self.listing
        if lst is None:
            return
        self.lib_label.setText(tr("lib.library", path=lst.library))
        folders = QTreeWidgetItem([tr("lib.folders", n=len(lst.roots)), ""])
        for r in lst.roots:
            it = QTreeWidgetItem([Path(r).name or r, ""])
            it.setToolTip(0, plain_tooltip(r))
            folders.addChild(it)
        docs = QTreeWidgetItem([tr("lib.documents", n=len(lst.documents)), ""])
        for d in lst.documents:
            status = tr(f"lib.status.{d.status}") + (" ⚠" if d.warnings else "")
            it = QTreeWidgetItem([d.title + (f"  [{tr('lib.ocr_mark')}]" if d.ocr else ""), status])
            tip = f"{d.title}\n{d.path}\n{d.kind} · {d.lang} · " + tr("lib.pages", n=d.n_pages)
            tip += f"\n{tr('lib.ocr_tip')}" if d.ocr else ""
            warned = "\n".join("⚠ " + w for w in d.warnings)
            it.setToolTip(0, plain_tooltip(tip + ("\n" + warned if warned else "")))
            if warned:
                it.setToolTip(1, plain_tooltip(warned))
            it.setForeground(1, QBrush(QColor(STATUS_COLORS.get(d.status, "#333"))))
            it.setData(0, Qt.ItemDataRole.UserRole, d.doc_id)
            docs.addChild(it)
        skipped = QTreeWidgetItem([tr("lib.skipped", n=len(lst.skipped)), ""])
        for path, reason in lst.skipped:
            it = QTreeWidgetItem([Path(path).name, reason])
            it.setToolTip(0, plain_tooltip(path))
            it.setToolTip(1, plain_tooltip(reason))
            it.setForeground(1, QBrush(QColor(STATUS_COLORS["skipped"])))
            skipped.addChild(it)
            # The whole reason, wrapped across the panel under the file (the cell above is elided).
            why = QTreeWidgetItem([reason, ""])
            why.setToolTip(0, plain_tooltip(reason))
            why.setData(0, REASON_ROLE, reason)  # the raw reason, re-wrapped on resize
            why.setForeground(0, QBrush(QColor(STATUS_COLORS["skipped"])))
            it.addChild(why)
        for top in (folders, docs, skipped):
            self.tree.addTopLevelItem(top)
            top.setExpanded(top is not folders or len(lst.roots) < 6)
        for i in range(skipped.childCount()):
            child = skipped.child(i)
            why_item = child.child(0) if child is not None else None
            if child is not None and why_item is not None:  # in the tree now: show each reason whole
                child.setExpanded(True)
                why_item.setFirstColumnSpanned(True)
        self._wrap_reasons()
        hh = self.tree.header()
        hh.setStretchLastSection(False)
        hh.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        hh.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        hh.resizeSection(1, 96)  # a long skip reason is elided here and whole in its tooltip

    def eventFilter(self, obj: Any, event: Any) -> bool:
        from PySide6.QtCore import QEvent

        if event.type() == QEvent.Type.Resize and obj is self.tree.viewport():
            self._wrap_reasons()
        return False

    def _wrap_reasons(self) -> None:
        for child in self.skipped_items():
            why_item = child.child(0)
            if why_item is not None:
                text = self._wrapped(str(why_item.data(0, REASON_ROLE) or ""), 2)
                if why_item.text(0) != text:
                    why_item.setText(0, text)

    def _wrapped(self, text: str, depth: int) -> str:
        """``text`` broken into lines that fit the tree's width at ``depth`` (a spanned tree row
        is not wrapped by Qt)."""
        fm = self.tree.fontMetrics()
        vp = self.tree.viewport()
        width = max(160, (vp.width() if vp is not None else 240) - self.tree.indentation() * (depth + 1) - 8)
        lines: list[str] = []
        line = ""
        for word in text.split(" "):
            trial = f"{line} {word}" if line else word
            if line and fm.horizontalAdvance(trial) > width:
                lines.append(line)
                line = word
            else:
                line = trial
            while fm.horizontalAdvance(line) > width and len(line) > 1:  # a run without spaces (Chinese)
                cut = len(line) - 1
                while cut > 1 and fm.horizontalAdvance(line[:cut]) > width:
                    cut -= 1
                lines.append(line[:cut])
                line = line[cut:]
        if line:
            lines.append(line)
        return "\n".join(lines)

    def document_items(self) -> list[QTreeWidgetItem]:
        return self._children(1)

    def skipped_items(self) -> list[QTreeWidgetItem]:
        return self._children(2)

    def _children(self, top: int) -> list[QTreeWidgetItem]:
        item = self.tree.topLevelItem(top)
        if item is None:
            return []
        return [c for c in (item.child(i) for i in range(item.childCount())) if c is not None]

    def _on_double(self, item: QTreeWidgetItem, _col: int) -> None:
        doc_id = item.data(0, Qt.ItemDataRole.UserRole)
        if isinstance(doc_id, int):
            self.doc_activated.emit(doc_id)

    def set_watch_status(self, on: bool, n_watching: int, missing: tuple[str, ...] = (), updated: str = "") -> None:
        """What the folder watcher is doing; ``updated``: the last automatic update's summary."""
        self._watch = (on, n_watching, missing, updated)
        self._label_watch()

    def _label_watch(self) -> None:
        on, n, missing, updated = self._watch
        parts = [(tr("lib.watching_one") if n == 1 else tr("lib.watching", n=n)) if on else tr("lib.watch_off")]
        if on and missing:
            parts.append(tr("lib.watch_missing", names=", ".join(Path(m).name or m for m in missing)))
        if on and updated:
            parts.append(tr("lib.watch_updated", summary=updated))
        self.watch_label.setText(" · ".join(parts))
        self.watch_label.setToolTip(tr("lib.watch_tip"))

    def retranslate(self) -> None:
        self.libs_label.setText(tr("lib.libraries"))
        self._label_watch()
        self.new_lib_btn.setText(tr("lib.new"))
        self.new_lib_btn.setToolTip(tr("lib.new_tip"))
        self.open_lib_btn.setText(tr("lib.open"))
        self.open_lib_btn.setToolTip(tr("lib.open_tip"))
        self.remove_lib_btn.setText(tr("lib.remove"))
        self.remove_lib_btn.setToolTip(tr("lib.remove_tip"))
        self._label_libraries()
        self.add_btn.setText(tr("lib.add_folder"))
        self.add_btn.setToolTip(tr("lib.add_folder_tip"))
        self.rescan_btn.setText(tr("lib.rescan"))
        self.rescan_btn.setToolTip(tr("lib.rescan_tip"))
        self.cancel_btn.setText(tr("lib.cancel"))
        self.cancel_btn.setToolTip(tr("lib.cancel_tip"))
        self.tree.setHeaderLabels([tr("lib.h.name"), tr("lib.h.status")])
        if self.listing is None:
            self.lib_label.setText(tr("lib.none"))
        else:
            self._fill()

