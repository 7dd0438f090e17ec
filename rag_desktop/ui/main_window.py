"""The main window: library sidebar, query bar, the side-by-side columns, answers, trace, chart.

Every service call goes through ``self.runner`` (one worker thread, see ui/worker.py);
this class only arranges widgets and routes results. Results of an older question that
arrive after a newer one was asked are dropped (each question has an id).

Libraries: the window keeps the list of known libraries (``app.config.LibraryList``, saved
beside the settings). Switching opens the new library on the worker through the Session
(app.session, which keeps the loaded models), then closes the old one there; it is refused,
with the reason, while files are being added. That work is in ui/library_actions.py and the
follow-up thread in ui/conversation_actions.py, mixins of this class.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.app.service_api import LibraryService
from rag_desktop.app.session import Session
from rag_desktop.core import prompting
from rag_desktop.core.cfrag import margin_summary
from rag_desktop.core.cfrag.types import CFResult
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, Cancelled, Citation, Explanation, Hit, Progress, RankedList
from rag_desktop.ui import i18n
from rag_desktop.ui.answer_pane import AnswerPane, progress_text
from rag_desktop.ui.cf_notes import cf_note
from rag_desktop.ui.chips import ChipsPanel
from rag_desktop.ui.columns import ResultColumn, Row, flat_text, make_row
from rag_desktop.ui.conversation_actions import ConversationActions
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.library_actions import LibraryActions
from rag_desktop.ui.library_panel import LibraryPanel, Listing
from rag_desktop.ui.model_actions import prepare_in_background, show_models_page
from rag_desktop.ui.plaintext import plain_tooltip
from rag_desktop.ui.present import (
    SpanKind,
    WordSpan,
    causal_off_text,
    ce_label_text,
    cfrag_row_note,
    cfrag_rows,
    crosslang_text,
    decision_key,
    explanation_for,
    fmt,
    found_by_translation,
    rank_change,
    scorer_text,
    split_terms,
    tau_source_text,
    variant_text,
)
from rag_desktop.ui.qt_translations import apply_qt_language
from rag_desktop.ui.rank_chart import RankChart
from rag_desktop.ui.trace_view import TraceView
from rag_desktop.ui.viewer import ViewerDialog
from rag_desktop.ui.why_card import WhyCard
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError

log = logging.getLogger(__name__)

CF_COLLAPSED_WIDTH = 170  # the empty CF-RAG column folds to a strip this wide (heading and status)
METHODS = ("baseline", "causal", "cross_encoder", "cfrag")
TITLE_KEYS = {"baseline": "col.baseline", "causal": "col.causal", "cross_encoder": "col.cross_encoder",
              "cfrag": "col.cfrag"}


# Height a window manager's title bar and frame take outside the window's geometry (openbox,
# GNOME, KDE: 24–37 px): a first window of the screen's height minus this fits with its title bar.
FRAME_ALLOWANCE = 30

def shared_note(column: str) -> str:
    """The note of a pane whose answer was written once for ``column`` (same sources)."""
    return tr("answer.shared_done", column=tr(TITLE_KEYS[column]))


@dataclass(frozen=True)
class CompareResult:
    """What the compare task returns: the service's Comparison plus readable forms of terms."""

    comparison: Any  # rag_desktop.app.service.Comparison
    surfaces: dict[str, str]
    # The words of each hit's passage (flat_text), from RagService.word_spans, for whole-word highlights.
    words: dict[str, tuple[WordSpan, ...]] = field(default_factory=dict)


@dataclass
class QueryState:
    qid: int
    question: str
    started: float = field(default_factory=time.monotonic)
    typed: str = ""  # what the user typed, when ``question`` is its standalone rewrite
    comparison: Any = None
    surfaces: dict[str, str] = field(default_factory=dict)
    words: dict[str, tuple[WordSpan, ...]] = field(default_factory=dict)
    answers: dict[str, Answer] = field(default_factory=dict)
    cfrag: CFResult | None = None
    errors: dict[str, str] = field(default_factory=dict)
    # Set on the worker thread by the first failing generation, read by the next queued one:
    # the same cause (no model, server down) would fail them all, so they stop instead.
    generation_failed: threading.Event = field(default_factory=threading.Event)


def comparison_terms(comparison: Any) -> set[str]:
    terms: set[str] = set()
    for e in comparison.causal.explanations:
        if e.split is not None:
            terms.update(k.term for k in e.split.query_terms)
            terms.update(a.term for a in e.split.a_terms)
            terms.update(a.absorbed_by for a in e.split.a_terms)
            terms.update(b.term for b in e.split.b_terms)
    return terms


def expand_terms(terms: list[tuple[str, SpanKind]], surfaces: Mapping[str, str]) -> list[tuple[str, SpanKind]]:
    """Each term plus its readable surface form (stems such as "secur" highlight "security")."""
    out: list[tuple[str, SpanKind]] = []
    for t, k in terms:
        out.append((t, k))
        s = surfaces.get(t)
        if s and s != t:
            out.append((s, k))
    return out


class ErrorBar(QFrame):
    """A non-modal strip at the top of the window: the error, what to do, and Details on click."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("error_bar")
        self.setStyleSheet("#error_bar { background: #FDECEA; border: 1px solid #F5C2C0; }")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setWordWrap(True)
        self.details_btn = QPushButton()
        self.close_btn = QPushButton("✕")
        self.close_btn.setFlat(True)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.details_btn)
        lay.addWidget(self.close_btn)
        self.details_btn.clicked.connect(self._details)
        self.close_btn.clicked.connect(self.dismiss)
        self.error: UserError | None = None
        self.shown: list[UserError] = []
        self.hide()
        self.retranslate()

    def show_error(self, err: UserError) -> None:
        # "Errors reach the user once": the same message from several tasks is shown once
        # (until the user dismisses it).
        if self.error is not None and self.error.message == err.message:
            return
        self.error = err
        self.shown.append(err)
        self.label.setText(err.text())
        self.show()

    def dismiss(self) -> None:
        self.error = None
        self.hide()

    def _details(self) -> None:
        if self.error is None:
            return
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Information)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setWindowTitle(tr("error.details_title"))
        box.setText(self.error.text())
        box.setDetailedText(self.error.detail)
        box.open()

    def retranslate(self) -> None:
        self.details_btn.setText(tr("error.details"))


class MainWindow(LibraryActions, ConversationActions, QMainWindow):
    folders_changed = Signal(object)  # frozenset[Path], emitted from the folder watcher's thread

    def __init__(self, session: Session | LibraryService, settings: Settings, *, settings_file: Path | None = None,
                 auto_answer: bool = True, libraries_file: Path | None = None,
                 ui_state_file: Path | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("main_window")
        # The Session owns the models and the open library (app.session); a bare service (the
        # widget tests' fakes) gets a Session that owns no models.
        self.session = session if isinstance(session, Session) else Session(session)
        self.settings = settings
        self.settings_file = settings_file
        # The list of libraries lives beside the settings file (app.config.libraries_path by default).
        self.libraries_file = libraries_file or (settings_file.with_name("libraries.toml") if settings_file
                                                 else None)
        # The question history and the window geometry: ui_state.toml beside the settings, never
        # the settings file (asking a question must not overwrite a hand edit of settings.toml).
        self.ui_state_file = ui_state_file or (settings_file.with_name("ui_state.toml") if settings_file
                                               else None)
        self.ui_state = self._load_ui_state()
        self.switching = False
        self.runner = TaskRunner(self, serial=True)
        self.render_runner = TaskRunner(self, serial=True)
        self.state: QueryState | None = None
        self._qid = 0
        self.listing: Listing | None = None
        self.last_ingest_report: Any = None
        self.ingesting = False
        self.selected_doc: int | None = None
        self._build()
        self.auto_answer.setChecked(auto_answer)
        self.auto_answer.toggled.connect(lambda _on: self._size_stacks())
        self.run_cf.setChecked(self.ui_state.run_cfrag)
        self.run_cf.setEnabled(auto_answer)  # CF-RAG writes with the answer model
        self.auto_answer.toggled.connect(self.run_cf.setEnabled)
        self.run_cf.toggled.connect(self._toggle_cfrag)
        self.retranslate()
        self._restore_geometry()
        problem = getattr(self, "_state_problem", None)
        if problem:
            self.show_error(UserError("ui_state", tr("startup.bad_state", detail=problem), "", problem))
        self.watcher: Any = None  # app.watcher.FolderWatcher while ingest.watch is on
        self._watch_key: tuple[object, ...] = ()
        self._watch_pending: set[Path] = set()
        self._watch_auto = False
        self._watch_summary = ""
        self.folders_changed.connect(self._on_folders_changed)
        self._init_libraries()
        self.refresh_library()
        # The causal column's background calibration (app.auto_gate): progress in the library panel.
        self._calib_timer = QTimer(self)
        self._calib_timer.timeout.connect(self.poll_calibration)
        self._calib_timer.start(3000)
        self.poll_calibration()

    # ================================================================== layout
    def _build(self) -> None:
        self.library_panel = LibraryPanel()
        self.library_panel.add_folder.connect(self.choose_folder)
        self.library_panel.rescan.connect(self.rescan)
        self.library_panel.cancel.connect(self.cancel)
        self.library_panel.doc_activated.connect(self._open_doc_from_library)
        self.library_panel.library_new.connect(self.new_library)
        self.library_panel.library_open.connect(lambda p: self.switch_library(Path(p)))
        self.library_panel.library_remove.connect(lambda p: self.remove_library(Path(p)))

        # query bar
        self.query = QComboBox()
        self.query.setObjectName("query")
        self.query.setEditable(True)
        self.query.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        # Its width comes from the window, not from the longest question in the history (which
        # pushed the window past a 1280 px screen once the bar also held the level and rerank boxes).
        self.query.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.query.setMinimumContentsLength(24)
        self.query.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.query.addItems(list(self.ui_state.recent_questions))
        self.query.setCurrentIndex(-1)
        line = self.query.lineEdit()
        assert line is not None
        line.returnPressed.connect(self._ask_from_box)
        self.ask_btn = QPushButton()
        self.ask_btn.clicked.connect(lambda: self.ask())
        self.level_box = QComboBox()
        # Follows its items when the language changes ("whole documents" must not stay "whole dc…").
        self.level_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.level_box.addItem("", "doc")
        self.level_box.addItem("", "chunk")
        self.level_box.setCurrentIndex(0 if self.settings.retrieval.level == "doc" else 1)
        # Per question: what the causal column shows (None: the setting / the calibration gate).
        self.override_box = QComboBox()
        self.override_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        for box in (self.level_box, self.override_box):  # their whole text; the question field gives way
            box.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        for data in (None, "baseline", "causal", "hybrid"):
            self.override_box.addItem("", data)
        self.auto_answer = QCheckBox()
        self.run_cf = QCheckBox()
        self.stop_btn = QPushButton()
        self.stop_btn.clicked.connect(self.cancel)
        self.stop_btn.setEnabled(False)
        qbar = QHBoxLayout()
        self.query_label = QLabel()
        qbar.addWidget(self.query_label)
        qbar.addWidget(self.query, 1)
        qbar.addWidget(self.level_box)
        qbar.addWidget(self.override_box)
        qbar.addWidget(self.auto_answer)
        qbar.addWidget(self.run_cf)
        qbar.addWidget(self.ask_btn)
        qbar.addWidget(self.stop_btn)

        self.error_bar = ErrorBar()
        # "also searched as: …": the question's translation the columns fused,
        # or why the question was ranked as typed only.
        self.crosslang_line = QLabel()
        self.crosslang_line.setObjectName("crosslang_line")
        self.crosslang_line.setWordWrap(True)
        self.crosslang_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.crosslang_line.hide()

        # Columns, each over its answer pane; under them, across the full width, the selected
        # document's keyword chips and its "Why" card (wide enough to show what they hold).
        self.columns: dict[str, ResultColumn] = {}
        self.answers: dict[str, AnswerPane] = {}
        self.stacks: dict[str, QSplitter] = {}
        self.columns_split = QSplitter(Qt.Orientation.Horizontal)
        self.columns_split.setChildrenCollapsible(False)
        for m in METHODS:
            col = ResultColumn(m, TITLE_KEYS[m], show_change=(m != "baseline"), collapsible=(m == "cfrag"))
            pane = AnswerPane(m, "answer." + m)
            stack = QSplitter(Qt.Orientation.Vertical)
            stack.setChildrenCollapsible(False)
            stack.addWidget(col)
            stack.addWidget(pane)
            stack.setStretchFactor(0, 3)
            stack.setStretchFactor(1, 2)
            col.doc_selected.connect(self.select_hit)
            col.doc_hovered.connect(self._hover_doc)
            col.open_requested.connect(lambda h: self.open_result(h))
            pane.citation_clicked.connect(self.open_citation)
            self.columns[m], self.answers[m], self.stacks[m] = col, pane, stack
            self.columns_split.addWidget(stack)
        for col in self.columns.values():
            col.peers = tuple(self.columns.values())
        self.stacks["cross_encoder"].setVisible(False)
        self.columns["cfrag"].collapsed_changed.connect(self._set_cf_collapsed)
        self.chips = ChipsPanel()
        self.why = WhyCard()
        self.details = QSplitter(Qt.Orientation.Horizontal)
        self.details.setObjectName("details")
        self.details.setChildrenCollapsible(False)
        self.details.addWidget(self.chips)
        self.details.addWidget(self.why)
        self.details.setStretchFactor(0, 1)
        self.details.setStretchFactor(1, 1)
        self.compare_split = QSplitter(Qt.Orientation.Vertical)
        self.compare_split.setChildrenCollapsible(False)
        self.compare_split.addWidget(self.columns_split)
        self.compare_split.addWidget(self.details)
        self.compare_split.setStretchFactor(0, 3)
        self.compare_split.setStretchFactor(1, 1)
        self._set_cf_collapsed(True)

        self.trace_view = TraceView()
        self.chart = RankChart()
        self.chart.doc_clicked.connect(self._select_doc_id)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.compare_split, "")
        self.tabs.addTab(self.trace_view, "")
        self.tabs.addTab(self.chart, "")

        center = QWidget()
        cl = QVBoxLayout(center)
        cl.setContentsMargins(4, 4, 4, 4)
        cl.addLayout(qbar)
        cl.addWidget(self.crosslang_line)
        cl.addWidget(self.error_bar)
        cl.addWidget(self.tabs, 1)
        # The left column: the library, and under it the conversation when it is open (docked there
        # it never covers the columns nor widens the window: ui.conversation_actions).
        self.side = QSplitter(Qt.Orientation.Vertical)
        self.side.setChildrenCollapsible(False)
        self.side.addWidget(self.library_panel)
        outer = QSplitter(Qt.Orientation.Horizontal)
        outer.addWidget(self.side)
        outer.addWidget(center)
        outer.setStretchFactor(0, 0)
        outer.setStretchFactor(1, 1)
        self.outer = outer
        self.setCentralWidget(outer)
        self.viewer = ViewerDialog(self._render_runner, self)
        self.viewer.words_fn = self._word_spans
        self._build_conversation()
        self.viewer.ocr_lookup = lambda doc_id, page: self.service.ocr_lines(doc_id, page)

        # menus and shortcuts (Ctrl+O add folder, Ctrl+L focus query, Esc cancel)
        act = self._action
        self.act_add = act(self.choose_folder, "Ctrl+O")
        self.act_rescan = act(self.rescan)
        self.act_export = act(self.choose_export, "Ctrl+E")
        self.act_settings = act(self.open_settings, "Ctrl+,")
        self.act_models = act(self.open_models)
        self.act_quit = act(self.request_quit, "Ctrl+Q")
        self.act_focus = act(self.focus_query, "Ctrl+L")
        self.act_cancel = act(self.cancel, QKeySequence(Qt.Key.Key_Escape))
        self.act_cancel.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.act_lang = act(self.toggle_language)
        self.act_new_library = act(self.new_library)
        self.act_open_library = act(self.choose_library)
        self.act_calibrate = act(self.open_calibration)
        for a in (self.act_focus, self.act_cancel):
            self.addAction(a)
        self.file_menu = self.menuBar().addMenu("")
        for a in (self.act_add, self.act_rescan, self.act_export, self.act_settings, self.act_models):
            self.file_menu.addAction(a)
        # Quit apart from the rest, so it is not hit by a slip of the mouse off Settings…
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.act_quit)
        self.library_menu = self.menuBar().addMenu("")
        for a in (self.act_new_library, self.act_open_library, self.act_calibrate):
            self.library_menu.addAction(a)
        self.view_menu = self.menuBar().addMenu("")
        self.view_menu.addAction(self.act_focus)
        self.view_menu.addAction(self.act_lang)
        self.view_menu.addAction(self.conversation_dock.toggleViewAction())
        self.runner.busy_changed.connect(self._on_busy)

    def _word_spans(self, text: str) -> list[WordSpan]:
        """The words of ``text`` as the keyword tokenizer sees them (worker threads only: it may
        load jieba); [] when it has none, and the marks fall back to word prefixes."""
        return list(self.service.word_spans(text))

    def _render_runner(self) -> TaskRunner:
        # PyMuPDF must not run on two threads at once: while an ingest (which reads PDFs)
        # is running, page renders queue behind it on the service thread.
        return self.runner if self.ingesting else self.render_runner

    # ================================================================== i18n
    def _reset_results(self) -> None:
        self.state = None
        self.selected_doc = None
        for m in METHODS:
            self.columns[m].clear()
            self.answers[m].reset()
        self.stacks["cross_encoder"].setVisible(False)
        self.trace_view.clear()
        self.chart.clear()
        self.chips.set_split(None)
        self.why.set_explanation(None, None)
        self.viewer.hide()

    def _action(self, slot: Callable[[], object], shortcut: str | QKeySequence | None = None) -> QAction:
        a = QAction(self) if shortcut is None else QAction(self, shortcut=QKeySequence(shortcut))
        a.triggered.connect(slot)
        return a

    def retranslate(self) -> None:
        apply_qt_language(i18n.language())  # Qt's own buttons (OK, Cancel, Yes, No) follow the UI
        self.retranslate_title()
        if getattr(self, "models_page", None) is not None:
            self.models_page.retranslate()
        self.conversation_panel.retranslate()
        self.conversation_dock.setWindowTitle(tr("conv.title"))
        self.query_label.setText(tr("query.label"))
        line = self.query.lineEdit()
        if line is not None:
            line.setPlaceholderText(tr("query.placeholder"))
        self.query.setToolTip(tr("query.tip"))
        self.ask_btn.setText(tr("query.ask"))
        self.stop_btn.setText(tr("query.stop"))
        self.stop_btn.setToolTip(tr("query.stop_tip"))
        self.level_box.setItemText(0, tr("level.doc"))
        self.level_box.setItemText(1, tr("level.chunk"))
        self.level_box.setToolTip(tr("level.tip"))
        for i, key in enumerate(("auto", "baseline", "causal", "hybrid")):
            self.override_box.setItemText(i, tr(f"override.{key}"))
        self.override_box.setToolTip(tr("override.tip"))
        self.auto_answer.setText(tr("query.auto_answer"))
        self.auto_answer.setToolTip(tr("query.auto_answer_tip"))
        self.run_cf.setText(tr("query.run_cfrag"))
        self.run_cf.setToolTip(tr("query.run_cfrag_tip"))
        self.tabs.setTabText(0, tr("tab.compare"))
        self.tabs.setTabText(1, tr("tab.trace"))
        self.tabs.setTabText(2, tr("tab.chart"))
        self.file_menu.setTitle(tr("menu.file"))
        self.view_menu.setTitle(tr("menu.view"))
        self.library_menu.setTitle(tr("menu.library"))
        self.act_new_library.setText(tr("lib.new"))
        self.act_open_library.setText(tr("lib.open_folder"))
        self.act_calibrate.setText(tr("menu.calibrate"))
        self.act_add.setText(tr("lib.add_folder"))
        self.act_rescan.setText(tr("lib.rescan"))
        self.act_export.setText(tr("menu.export"))
        self.act_settings.setText(tr("menu.settings"))
        self.act_models.setText(tr("menu.models"))
        self.act_quit.setText(tr("menu.quit"))
        self.act_focus.setText(tr("menu.focus_query"))
        self.act_cancel.setText(tr("menu.cancel"))
        self.act_lang.setText(tr("menu.language"))
        self.library_panel.retranslate()
        self.error_bar.retranslate()
        for c in self.columns.values():
            c.retranslate()
        for p in self.answers.values():
            p.retranslate()
        self.chips.retranslate()
        self.why.retranslate()
        self.trace_view.retranslate()
        self.viewer.retranslate()
        self.chart.update()
        if self.state is not None and self.state.comparison is not None:
            self._fill_columns(self.state)
            self._show_crosslang(getattr(self.state.comparison, "cross_language", None))

    def toggle_language(self) -> None:
        lang = "zh" if i18n.language() == "en" else "en"
        self.apply_settings(self.settings.replace("ui", language=lang))

    # ================================================================== status and errors
    def show_error(self, err: UserError) -> None:
        self.error_bar.show_error(err)
        self.statusBar().showMessage(err.message, 10000)

    def _on_busy(self, busy: bool) -> None:
        self.stop_btn.setEnabled(busy)

    def cancel(self) -> None:
        """Esc: stop whatever is running or queued (ingest, retrieval, generation)."""
        n = self.runner.cancel_all()
        if n:
            self.statusBar().showMessage(tr("status.cancelling"), 5000)

    def focus_query(self) -> None:
        self.query.setFocus(Qt.FocusReason.ShortcutFocusReason)
        line = self.query.lineEdit()
        if line is not None:
            line.selectAll()

    # ================================================================== asking
    def remember_question(self, q: str) -> None:
        self.ui_state = self.ui_state.with_question(q)
        self._save_ui_state()
        self.query.blockSignals(True)
        self.query.clear()
        self.query.addItems(list(self.ui_state.recent_questions))
        self.query.setCurrentIndex(0)
        self.query.blockSignals(False)

    def _ask_from_box(self) -> None:
        """Return in the question box. An editable QComboBox's line edit emits returnPressed
        twice for one key press; the second, for the same text at once, is the same question
        (before, it silently restarted the search; with follow-ups it would read the
        question as a follow-up of itself)."""
        # Both emissions come from one key event: ignore any until the event loop turns again
        # (a time window instead also dropped a quick, deliberate re-ask of the same words).
        if getattr(self, "_return_handled", False):
            return
        self._return_handled = True
        QTimer.singleShot(0, self._return_done)
        self.ask()

    def _return_done(self) -> None:
        self._return_handled = False

    def ask(self, question: str | None = None, *, typed: str | None = None) -> None:
        """Ask ``question`` (default: the question box). A follow-up in a conversation is first
        rewritten into a standalone question for the user to check; ``typed`` marks a question
        that already is that standalone form of what the user typed."""
        q = (question if question is not None else self.query.currentText()).strip()
        if not q:
            self.statusBar().showMessage(tr("query.empty"), 5000)
            return
        if self.switching:
            self.statusBar().showMessage(tr("lib.busy_switching"), 5000)
            return
        if self._preparing(q):
            # Ask again while the same question's columns are still being prepared: the work under
            # way answers it, so the press is ignored (a changed question restarts, as before).
            self.statusBar().showMessage(tr("query.preparing"), 5000)
            return
        if typed is None and self._propose_rewrite(q):
            return
        self.runner.cancel("query.")  # a new question supersedes the old one's remaining work
        self._qid += 1
        st = QueryState(self._qid, q, typed=typed or q)
        self._record_turn(st)
        self.state = st
        self.remember_question(q)
        for m in METHODS:
            self.columns[m].clear("col.running" if m != "cfrag" else "col.cf_waiting")
            self.answers[m].reset("answer.waiting" if self.auto_answer.isChecked() else "answer.off")
        self.trace_view.clear("trace.waiting" if self.auto_answer.isChecked() else "trace.off")
        if self.auto_answer.isChecked() and not self.run_cf.isChecked():
            self._show_cf_disabled()
        self.chart.clear()
        self.chips.set_split(None)
        self.why.set_explanation(None, None)
        self._show_crosslang(None)
        level = self.level_box.currentData()
        ranking = self.override_box.currentData()
        self.statusBar().showMessage(tr("status.retrieving"))
        self._submit_compare(st, level, ranking, translate=False)

    def _submit_compare(self, st: QueryState, level: str | None, ranking: str | None, *, translate: bool) -> None:
        """Rank ``st``'s question. First as typed, with no model call, so the columns show at once;
        then, when ``retrieval.cross_language`` is on, again with its translation, which re-ranks the
        re-ranked columns and feeds the answers (docs/architecture.md, "The question's path")."""
        svc, q = self.service, st.question

        def job(ctx: TaskContext) -> CompareResult:
            comp = svc.compare(q, level=level, ranking=ranking, translate=translate)
            ctx.cancel.raise_if_set()
            # readable words for stemmed terms
            surfaces = {t: s for t, s in svc.surfaces(sorted(comparison_terms(comp))).items() if s}
            words: dict[str, tuple[WordSpan, ...]] = {}
            for ranked in (comp.baseline, comp.causal, comp.cross_encoder):
                for h in (ranked.hits if ranked is not None else ()):
                    flat = flat_text(h.text)
                    if flat not in words:
                        words[flat] = tuple(svc.word_spans(flat))
            return CompareResult(comp, surfaces, words)

        self.runner.submit(f"query.{st.qid}.compare" + (".translated" if translate else ""), job,
                           on_result=partial(self._on_comparison, st.qid, level, ranking, translate),
                           on_error=partial(self._on_compare_error, st.qid))

    def _preparing(self, q: str) -> bool:
        """Whether ``q`` is the question on screen and its rankings are still being prepared."""
        st = self.state
        if st is None or st.question != q or st.comparison is not None:
            return False
        prefix = f"query.{st.qid}.compare"
        return any(t.name.startswith(prefix) for t in self.runner.tasks())

    def _current(self, qid: int) -> QueryState | None:
        return self.state if self.state is not None and self.state.qid == qid else None

    def _on_compare_error(self, qid: int, err: UserError) -> None:
        st = self._current(qid)
        if st is None:
            return
        for m in METHODS:
            self.columns[m].clear("col.failed")
            self.answers[m].reset("answer.not_run")
        self.trace_view.clear("trace.not_run")
        self.show_error(err)

    def _on_comparison(self, qid: int, level: str | None, ranking: str | None, translated: bool,
                       res: CompareResult) -> None:
        st = self._current(qid)
        if st is None:
            return
        # the columns now; the translated question's rankings (a model call) join before the answers
        wait = not translated and self.settings.retrieval.cross_language and self.auto_answer.isChecked()
        if wait:
            self._submit_compare(st, level, ranking, translate=True)
        st.comparison = res.comparison
        st.surfaces = res.surfaces
        st.words = res.words
        self._fill_columns(st)
        c = res.comparison
        cross = getattr(c, "cross_language", None)
        self._show_crosslang(cross)
        status = tr("status.compared", n=len(c.baseline.hits), ms=int(1000 * sum(c.timings.values())))
        line = crosslang_text(cross)
        self.statusBar().showMessage(f"{status} · {line}" if line else status, 8000)
        if c.causal.hits:
            self.columns["causal"].select_row(0)
        if wait:
            return  # the answers wait for the translated rankings
        if self.auto_answer.isChecked():
            self._queue_generation(st)
        else:
            self.columns["cfrag"].clear("col.cf_off")

    def _show_crosslang(self, cross: Any) -> None:
        text = crosslang_text(cross)
        self.crosslang_line.setText(text)
        self.crosslang_line.setVisible(bool(text))
        # A fallback's reason ("the reply answered the question instead of translating it") is the
        # backend's English detail: on hover, so the line itself stays in the UI's language.
        note = str(getattr(cross, "note", "") or "") if getattr(cross, "fallback", False) else ""
        self.crosslang_line.setToolTip(plain_tooltip(note) if note else "")

    def _fill_columns(self, st: QueryState) -> None:
        c = st.comparison
        base: RankedList = c.baseline
        words = st.words

        def row_words(h: Hit) -> tuple[WordSpan, ...] | None:
            # no words (a service without a tokenizer): None, and the marks fall back to prefixes
            return words.get(flat_text(h.text)) or None

        cross = getattr(c, "cross_language", None)

        missing = {h.path for r in (base, c.causal, c.cross_encoder) if r is not None for h in r.hits
                   if h.path and not Path(h.path).exists()}  # deleted or moved since it was indexed

        def found_note(column: str, h: Hit, note: str = "") -> str:
            mark = tr("crosslang.found_by") if found_by_translation(cross, column, h.unit_id) else ""
            gone = tr("col.file_missing") if h.path in missing else ""
            return " · ".join(p for p in (note, mark, gone) if p)

        self.columns["baseline"].set_rows(
            [make_row(h, None, [(tr("score.s_sim"), h.s_sim)], note=found_note("baseline", h)) for h in base.hits],
            tr("col.baseline_sub", level=tr("level." + c.level), k=len(base.hits),
               ms=int(1000 * c.timings.get("baseline_total", 0.0))))
        rows: list[Row] = []
        for h in c.causal.hits:
            e = explanation_for(c.causal, h.unit_id)
            scores: list[tuple[str, float | None]] = [(tr("score.s_sim"), h.s_sim)]
            if e is not None:
                scores.append((tr("score.s_c"), e.s_c))
                if e.s_hybrid is not None:
                    scores.append((tr("score.hybrid"), e.s_hybrid))
            terms = expand_terms(split_terms(e.split if e else None), st.surfaces)
            note = found_note("causal", h, tr("why.fallback_used") if e is not None and e.fallback_used else "")
            rows.append(make_row(h, rank_change(base, h), scores, terms, note, row_words(h)))
        d = c.diagnostics
        sub = [tr("col.causal_sub", variant=variant_text(c.causal_variant), tau=fmt(c.tau, 3),
                  source=tau_source_text(c.tau_source, self.settings.retrieval.tau_percentile),
                  a=fmt(d.a_share, 2), empty=d.n_empty_b)]
        why_off = causal_off_text(c.causal_off) if getattr(c, "causal_off", None) is not None else ""
        if why_off and not c.verdict:  # with a verdict the heading says it; its numbers are the tooltip
            sub.append(why_off)
        sub += ["⚠ " + cf_note(w) for w in (*d.warnings, *c.causal.warnings)]
        self.columns["causal"].set_rows(rows, "\n".join(sub))
        self.columns["causal"].set_verdict(c.verdict)
        self.columns["causal"].header.setToolTip(why_off if c.verdict else "")
        self.chart.set_data(base, c.causal, tr("chart.causal"))
        ce = c.cross_encoder
        self.stacks["cross_encoder"].setVisible(ce is not None)
        if ce is not None:
            ce_scores: tuple[float | None, ...] = ce.scores or (None,) * len(ce.hits)
            self.columns["cross_encoder"].set_rows(
                [make_row(h, rank_change(base, h), [(tr("score.s_qe"), v), (tr("score.s_sim"), h.s_sim)],
                          note=found_note("cross_encoder", h))
                 for h, v in zip(ce.hits, ce_scores, strict=True)], ce_label_text(ce.label))
        if st.cfrag is not None:
            self._fill_cfrag(st)
        if self.selected_doc is not None:
            self._select_doc_id(self.selected_doc)

    # ================================================================== generation
    def _queue_generation(self, st: QueryState) -> None:
        c = st.comparison
        columns = ["baseline", "causal"] + (["cross_encoder"] if c.cross_encoder is not None else [])
        # what each column's answer reads: its order fused with the keyword leg (Comparison.answer_list)
        lists: list[tuple[str, RankedList]] = [(m, c.answer_list(m)) for m in columns]
        svc = self.service
        q = st.question
        guarded = partial(self._guarded, st)

        # Columns that read the same sources in the same order get the same prompt and, with the
        # fixed seed, the same answer: generate it once. A column the gate shows in
        # baseline order is the usual case; the answer would otherwise be written twice.
        groups: dict[tuple[object, ...], list[str]] = {}
        ranked_of = dict(lists)
        # The ranking the gate feeds the answers with is answered first: a person's first answer
        # token does not wait for the other column's whole answer.
        first = "baseline" if getattr(c, "answer_ranking", "hybrid") == "baseline" else "causal"
        for m, ranked in sorted(lists, key=lambda mr: mr[0] != first):
            groups.setdefault(prompting.answer_key(ranked.hits), []).append(m)
        for members in groups.values():
            m, ranked = members[0], ranked_of[members[0]]
            panes = [self.answers[x] for x in members]
            for x in members[1:]:
                self.answers[x].set_progress(tr("answer.shared_wait", column=tr(TITLE_KEYS[m])))

            def job(ctx: TaskContext, ranked: RankedList = ranked) -> Iterator[object]:
                yield from guarded(ctx, lambda: svc.answer(q, ranked, cancel=ctx.cancel))

            self.runner.submit(
                f"query.{st.qid}.answer.{m}", job,
                on_progress=partial(self._gen_progress, st.qid, panes[0]),
                on_token=partial(self._gen_token, st.qid, panes),
                on_result=partial(self._on_answer, st.qid, members, ranked_of),
                on_error=partial(self._on_gen_errors, st.qid, members),
                on_cancelled=partial(self._gen_stopped, st.qid, panes),
            )

        if self.run_cf.isChecked():
            self._queue_cfrag(st)
        else:
            self._show_cf_disabled()

    def _guarded(self, st: QueryState, ctx: TaskContext, events: Callable[[], Iterator[object]]) -> Iterator[object]:
        """A generation job of ``st``: the model made ready first (with visible progress); stopped
        at once when an earlier job of the question failed, since the same cause would fail it too."""
        if st.generation_failed.is_set():
            raise Cancelled()
        try:
            # join/verify the embedded model with visible progress
            yield from self.service.prepare_generator(ctx.cancel)
            yield from events()
        except Cancelled:
            raise
        except Exception:
            st.generation_failed.set()
            raise

    def _queue_cfrag(self, st: QueryState) -> None:
        """CF-RAG for ``st``'s question, after whatever is queued (the answers)."""
        svc = self.service
        q = st.question

        def cf_job(ctx: TaskContext) -> Iterator[object]:
            yield from self._guarded(st, ctx, lambda: svc.cfrag_or_abstain(q, ctx.cancel))

        self.answers["cfrag"].reset("answer.waiting")
        self.trace_view.clear("trace.waiting")
        self.runner.submit(
            f"query.{st.qid}.cfrag", cf_job,
            on_progress=partial(self._cf_progress, st.qid),
            on_result=partial(self._on_cfrag, st.qid),
            on_error=partial(self._on_gen_error, st.qid, "cfrag"),
            on_cancelled=partial(self._cf_stopped, st.qid),
        )

    def _show_cf_disabled(self) -> None:
        self.columns["cfrag"].clear("col.cf_disabled")
        self.answers["cfrag"].reset("answer.cf_disabled")
        self.trace_view.clear("trace.cf_disabled")

    def _toggle_cfrag(self, on: bool) -> None:
        """The CF-RAG switch: remembered; off stops a running CF-RAG (its minutes of CPU), on runs
        it for the question on screen if it has not run yet."""
        self.ui_state = dataclasses.replace(self.ui_state, run_cfrag=on)
        self._save_ui_state()
        st = self.state
        if st is None or st.comparison is None or not self.auto_answer.isChecked():
            return
        if not on:
            if st.cfrag is None:
                self.runner.cancel(f"query.{st.qid}.cfrag")
                self._show_cf_disabled()
        elif st.cfrag is None:
            self._queue_cfrag(st)

    def _gen_stopped(self, qid: int, panes: Sequence[AnswerPane]) -> None:
        if self._current(qid) is not None:
            for pane in panes:
                pane.set_stopped()  # a partial answer stays readable, marked as stopped

    def _cf_stopped(self, qid: int) -> None:
        if self._current(qid) is None:
            return
        if not self.run_cf.isChecked():  # stopped by the switch: say it is off, not "stopped"
            self._show_cf_disabled()
            return
        self.answers["cfrag"].set_stopped()
        if self.state is not None and self.state.cfrag is None:
            self.columns["cfrag"].clear("col.cf_stopped")
            self.trace_view.clear("trace.stopped")

    def _gen_progress(self, qid: int, pane: AnswerPane, p: Progress) -> None:
        if self._current(qid):
            pane.set_progress(progress_text(p))

    def _gen_token(self, qid: int, panes: Sequence[AnswerPane], text: str) -> None:
        if not self._current(qid):
            return
        for pane in panes:  # a column sharing the sources watches the same answer being written
            pane.append_token(text)

    def _on_answer(self, qid: int, members: Sequence[str], ranked_of: Mapping[str, RankedList],
                   answer: Answer) -> None:
        """The answer of ``members[0]``, shown in every column of ``members`` (same sources)."""
        st = self._current(qid)
        if st is None:
            return
        for i, m in enumerate(members):
            shown = answer if i == 0 else dataclasses.replace(answer, method=ranked_of[m].method)
            st.answers[m] = shown
            self.answers[m].set_answer(shown, ranked_of[m].hits)
            if i > 0:
                self.answers[m].add_note(partial(shared_note, members[0]))
            self._record_answer(st, m, shown)

    def _on_gen_errors(self, qid: int, members: Sequence[str], err: UserError) -> None:
        for m in members:
            self._on_gen_error(qid, m, err)

    def _on_gen_error(self, qid: int, m: str, err: UserError) -> None:
        st = self._current(qid)
        if st is None:
            return
        st.errors[m] = err.message
        self.answers[m].set_failed(err.message)
        if m == "cfrag":
            self.columns["cfrag"].clear("col.failed")
            self.trace_view.clear("trace.not_run")
        self.show_error(err)
        # The same cause (no model, server down) would fail every remaining generation: stop them.
        self.runner.cancel(f"query.{qid}.answer")
        self.runner.cancel(f"query.{qid}.cfrag")

    def _cf_progress(self, qid: int, p: Progress) -> None:
        if not self._current(qid):
            return
        key = f"stage.{p.stage}"
        stage = tr(key) if i18n.has_tr(key) else p.stage
        if not p.stage.startswith("cfrag."):
            # the model being made ready first (its counts are bytes, not CF-RAG's steps)
            self.columns["cfrag"].set_placeholder("col.cf_preparing", stage=stage)
            self.answers["cfrag"].set_progress(stage)
            self.trace_view.clear("trace.preparing", stage=stage)
            return
        self.columns["cfrag"].set_placeholder("col.cf_running", stage=stage, cur=p.current, total=p.total)
        self.answers["cfrag"].set_progress(tr("answer.cf_step", stage=stage, cur=p.current, total=p.total))
        # the trace tab follows the run live instead of saying "queued" until the end
        self.trace_view.clear("trace.running", stage=stage, cur=p.current, total=p.total)

    def _on_cfrag(self, qid: int, res: CFResult | Answer) -> None:
        st = self._current(qid)
        if st is None:
            return
        if isinstance(res, Answer):  # the library holds no answer: CF-RAG did not run (core.abstain)
            st.answers["cfrag"] = res
            self.answers["cfrag"].set_answer(res)
            self.trace_view.clear("trace.abstained")
            return
        st.cfrag = res
        st.answers["cfrag"] = res.answer
        self._fill_cfrag(st)
        self.answers["cfrag"].set_answer(res.answer, [e.hit for e in res.trace.evidence])
        self.trace_view.set_trace(res.trace)
        self.statusBar().showMessage(tr("status.done", s=fmt(time.monotonic() - st.started, 1)), 10000)

    def _fill_cfrag(self, st: QueryState) -> None:
        assert st.cfrag is not None
        t = st.cfrag.trace
        base = st.comparison.baseline if st.comparison is not None else RankedList("baseline", ())
        rows = []
        for r in cfrag_rows(t):
            h = dataclasses.replace(r.evidence.hit, rank=r.rank)
            key, args = cfrag_row_note(t, r)
            note = tr(key, **args) if key else ""
            rows.append(make_row(h, rank_change(base, h), [
                ("s(q,e)", r.evidence.s_q), ("max s(q',e)", r.evidence.max_s_cf), ("Δ", r.margin)], note=note))
        sub = tr("col.cf_sub", kind=tr(decision_key(t.decision)), n=len(t.counterfactuals),
                 scorer=scorer_text(t.scorer, t.scorer_is_substitute))
        m = margin_summary(t)  # Δ is an annotation with its noise level, not the order
        if t.counterfactuals:
            sub += " · " + tr("col.cf_margin_ok" if m.separates else "col.cf_margin_noise",
                              spread=fmt(m.spread, 3), noise=fmt(m.noise, 3))
        self.columns["cfrag"].set_rows(rows, sub)

    # ================================================================== selection and viewer
    def _causal_for_doc(self, doc_id: int) -> tuple[Hit | None, Explanation | None]:
        st = self.state
        if st is None or st.comparison is None:
            return None, None
        causal: RankedList = st.comparison.causal
        h = next((h for h in causal.hits if h.doc_id == doc_id), None)
        return h, (explanation_for(causal, h.unit_id) if h is not None else None)

    def select_hit(self, hit: Hit) -> None:
        self._select_doc_id(hit.doc_id)

    def _select_doc_id(self, doc_id: int) -> None:
        self.selected_doc = doc_id
        for col in self.columns.values():
            col.highlight_doc(doc_id)
        self.chart.set_selected(doc_id)
        h, e = self._causal_for_doc(doc_id)
        surfaces = self.state.surfaces if self.state is not None else {}
        self.chips.set_split(e.split if e else None, h.title if h else "", surfaces)
        w = self.settings.retrieval.hybrid_weight
        causal = self.state.comparison.causal if self.state is not None and self.state.comparison else None
        self.why.set_explanation(e, h, w if e is not None and e.s_hybrid is not None else None, surfaces, causal)

    def _hover_doc(self, doc_id: int | None) -> None:
        for col in self.columns.values():
            col.hover_doc(doc_id)

    def terms_for_doc(self, doc_id: int) -> list[tuple[str, SpanKind]]:
        _h, e = self._causal_for_doc(doc_id)
        return split_terms(e.split) if e is not None else []

    def open_hit(self, hit: Hit, page: int | None = None) -> None:
        if hit.path and not Path(hit.path).exists():  # said in words; the viewer would only fail to read it
            self.statusBar().showMessage(tr("viewer.file_missing", name=Path(hit.path).name), 10000)
            return
        surfaces = self.state.surfaces if self.state is not None else {}
        self.viewer.show_hit(hit, self.terms_for_doc(hit.doc_id), surfaces, page)

    def open_result(self, hit: Hit, page: int | None = None) -> None:
        """Open a document from the results of the question on screen: the person's relevance
        signal, kept as a label of that question for the automatic gate."""
        st = self.state
        if st is not None and st.comparison is not None and hit.doc_id:
            self.service.note_relevant(st.comparison.query, [hit.doc_id], "opened")
        self.open_hit(hit, page)

    def open_citation(self, c: Citation) -> None:
        if not c.valid or c.path == "":
            return
        hit: Hit | None = None
        st = self.state
        if st is not None:
            for a in st.answers.values():
                # The cited passage itself: the viewer opens on its page and marks it.
                if 0 < c.n <= len(a.sources) and (a.sources[c.n - 1].unit_id, a.sources[c.n - 1].page) == (
                        c.unit_id, c.page):
                    hit = a.sources[c.n - 1]
                    break
            for a in st.answers.values() if hit is None else ():
                hit = next((h for h in a.sources if h.unit_id == c.unit_id and h.doc_id == c.doc_id), None)
                if hit is not None:
                    break
        if hit is None:
            hit = Hit(c.unit_id or 0, c.doc_id or 0, "chunk", c.title, c.path, c.page or 1, "", 0.0, 0, "other")
        self.open_result(hit, page=c.page)

    # ================================================================== window state
    def _load_ui_state(self) -> Any:
        from rag_desktop.app.config import UIState, load_ui_state
        from rag_desktop.core.settings import SettingsError

        try:
            return load_ui_state(self.ui_state_file, self.settings_file)
        except (SettingsError, OSError) as exc:
            # Said once the window is built; the file is left as it is (never overwritten) so a
            # hand-broken history is not lost — only not remembered until it is fixed or deleted.
            log.warning("the window state is unreadable: %s", exc)
            self._state_problem = str(exc)
            return UIState()

    def _save_ui_state(self) -> None:
        from rag_desktop.app.config import save_ui_state

        if getattr(self, "_state_problem", None):
            return

        try:
            save_ui_state(self.ui_state, self.ui_state_file)
        except OSError as exc:
            log.warning("cannot save the window state: %s", exc)

    def _restore_geometry(self) -> None:
        """The size and place of the last run; the first time, a size that fits the screen."""
        from PySide6.QtCore import QByteArray

        g = self.ui_state.window_geometry
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        restored = bool(g) and self.restoreGeometry(QByteArray.fromBase64(g.encode()))
        if screen is not None:
            # The title bar and the frame are outside geometry(): leave room for them, or the status
            # bar ends below a 1280×800 screen (a geometry saved on a larger screen is clamped too).
            w = min(self.width() if restored else 1500, screen.width())
            h = min(self.height() if restored else 950, screen.height() - FRAME_ALLOWANCE)
            self.resize(max(w, 640), max(h, 480))
            if restored and not screen.contains(self.frameGeometry()):
                self.move(screen.topLeft())
        elif not restored:
            self.resize(1500, 950)
        self._fit_panels()

    def _fit_panels(self) -> None:
        # The library sidebar takes a fifth of the window (200–320 px): the columns need the rest.
        w = max(self.width(), 800)
        side = min(320, max(200, w // 5))
        self.outer.setSizes([side, w - side])
        h = max(self.height(), 600)
        self.compare_split.setSizes([int(h * 0.62), int(h * 0.25)])
        cw = w - side
        self.details.setSizes([int(cw * 0.42), int(cw * 0.58)])  # the Why card's sentences need the width
        self._size_stacks()

    def _size_stacks(self) -> None:
        """Rankings over answers: answers get a third while on, a strip when off."""
        on = self.auto_answer.isChecked()
        for m in METHODS:
            stack = self.stacks[m]
            total = sum(stack.sizes()) or stack.height()
            pane = self.answers[m].minimumSizeHint().height()
            answer = int(total * 0.35) if on else min(pane + 10, total // 3)
            stack.setSizes([total - answer, answer])

    def _set_cf_collapsed(self, collapsed: bool) -> None:
        """The CF-RAG column folds to a narrow strip (heading and status) until it has rows."""
        self.answers["cfrag"].setVisible(not collapsed)
        # on the column, not the stack: a QSplitter resets the maximum of its own children when shown
        if collapsed:
            self.columns["cfrag"].setMaximumWidth(CF_COLLAPSED_WIDTH)
        else:
            self.columns["cfrag"].setMaximumWidth(16777215)
            n = sum(1 for m in METHODS if self.stacks[m].isVisibleTo(self.columns_split)) or 1
            total = sum(self.columns_split.sizes())
            self.columns_split.setSizes([total // n if self.stacks[m].isVisibleTo(self.columns_split) else 0
                                         for m in METHODS])

    # ================================================================== settings and report
    def _save_settings(self) -> None:
        from rag_desktop.app.config import save_settings

        try:
            save_settings(self.settings, self.settings_file)
        except OSError as exc:
            from rag_desktop.ui.worker import describe_error

            msg, hint = describe_error(exc)
            self.show_error(UserError("settings", msg, hint, repr(exc)))

    def open_settings(self) -> None:
        from rag_desktop.ui.settings_dialog import SettingsDialog

        dlg = SettingsDialog(self.settings, self)
        dlg.accepted.connect(lambda: self.apply_settings(dlg.result_settings()))
        dlg.open()
        self.settings_dialog = dlg

    def open_models(self) -> None:
        self.models_page = show_models_page(self, getattr(self, "models_page", None), self.settings,
                                            self.apply_settings)

    def apply_settings(self, new: Settings) -> None:
        """Adopt, persist and hand the settings to the service (on the worker: it may close models)."""
        lang_changed = new.ui.language != i18n.language()
        self.settings = new.validate()
        self._save_settings()
        self.level_box.setCurrentIndex(0 if new.retrieval.level == "doc" else 1)
        # self.service is read when the task runs: a library switch queued before it has then happened
        self.runner.submit("settings", lambda ctx: self.service.update_settings(new), on_error=self.show_error)
        self._update_watcher()
        if lang_changed:
            i18n.set_language(new.ui.language)
            self.retranslate()
        self.statusBar().showMessage(tr("status.settings_saved"), 5000)

    def choose_export(self) -> None:
        if self.state is None or self.state.comparison is None:
            self.statusBar().showMessage(tr("report.nothing"), 6000)
            return
        path, _ = QFileDialog.getSaveFileName(self, tr("report.save_title"), "decision-report.html",
                                              "HTML (*.html)")
        if path:
            self.export_report(Path(path))

    def export_report(self, path: Path) -> tuple[Path, Path]:
        """Write ``path`` (.html) and the same name with .json; returns both paths."""
        from rag_desktop.ui.report import DecisionReport

        st = self.state
        if st is None or st.comparison is None:
            raise ValueError(tr("report.nothing"))
        rep = DecisionReport(st.question, st.comparison, dict(st.answers), st.cfrag, st.surfaces,
                             i18n.language(), self.settings)
        html_path, json_path = rep.write(path)
        self.statusBar().showMessage(tr("report.saved", path=str(html_path)), 10000)
        return html_path, json_path

    # ================================================================== lifetime
    def work_running(self) -> bool:
        """Adding files, ranking or writing answers: what quitting would stop."""
        return bool(self.runner.busy or self.ingesting or self.switching)

    def confirm_quit(self) -> bool:
        """Ask before quitting while work is running (returns whether to quit)."""
        if not self.work_running():
            return True
        box = QMessageBox(QMessageBox.Icon.Question, tr("quit.title"), tr("quit.busy"),
                          QMessageBox.StandardButton.NoButton, self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        quit_btn = box.addButton(tr("quit.stop_and_quit"), QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(tr("quit.keep_working"), QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(QMessageBox.StandardButton.NoButton)
        self.quit_box = box
        box.exec()
        return box.clickedButton() is quit_btn

    def request_quit(self) -> bool:
        """File → Quit (Ctrl+Q): asks first while work is running; returns whether it closed."""
        if not self.confirm_quit():
            return False
        self._quit_confirmed = True
        return bool(self.close())

    def prepare_model_in_background(self) -> None:
        self.model_runner = prepare_in_background(self, self.service.prepare_generator, self.statusBar(),
                                                  self.show_error)

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        # The window's close button asks like Quit does; a close() from code (tests, --demo) does not.
        if event.spontaneous() and not getattr(self, "_quit_confirmed", False) and not self.confirm_quit():
            event.ignore()
            return
        self.ui_state = dataclasses.replace(self.ui_state,
                                            window_geometry=bytes(self.saveGeometry().toBase64().data()).decode())
        self._save_ui_state()
        self.runner.cancel_all()
        self.render_runner.cancel_all()
        if getattr(self, "models_page", None) is not None:  # stops a download; its partial file stays
            self.models_page.done(0)
        model_runner = getattr(self, "model_runner", None)
        if model_runner is not None:  # a cancelled join removes its temporary file
            model_runner.cancel_all()
            model_runner.wait(15000)
        # Give running work a moment to notice the cancel; models are closed by the caller.
        self.runner.wait(15000)
        self.render_runner.wait(5000)
        event.accept()

    def when_idle(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the service worker has no task (used by --demo and tests)."""
        if not self.runner.busy:
            fn()
            return

        def check(busy: bool) -> None:
            if not busy:
                self.runner.busy_changed.disconnect(check)
                QTimer.singleShot(0, fn)

        self.runner.busy_changed.connect(check)
