"""The main window: it lays out its panels and routes what one says to another.

The panels own their widgets: the library sidebar (ui.library_controller, over
ui.library_panel), the question bar (ui.query_bar), the results' tabs (ui.results_panel), the
conversation dock (ui.conversation_dock). The question on screen is ui.question_view's: it runs
the steps of app.question_flow on the window's one worker (ui/worker.py) and draws their events
(docs/architecture.md, "The question's path"). Every service call goes through ``self.runner``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox, QSplitter, QVBoxLayout, QWidget

from rag_desktop.app.service_api import LibraryService
from rag_desktop.app.session import Session
from rag_desktop.core.causal_context import WordSpan
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Citation, Hit
from rag_desktop.ui import i18n
from rag_desktop.ui.conversation_dock import ConversationDock
from rag_desktop.ui.error_bar import ErrorBar
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.library_controller import LibraryController
from rag_desktop.ui.model_actions import prepare_in_background, show_models_page
from rag_desktop.ui.qt_translations import apply_qt_language
from rag_desktop.ui.query_bar import QueryBar
from rag_desktop.ui.query_state import QueryState
from rag_desktop.ui.question_view import QuestionView
from rag_desktop.ui.results_panel import ResultsPanel
from rag_desktop.ui.viewer import ViewerDialog
from rag_desktop.ui.worker import TaskRunner, UserError

log = logging.getLogger(__name__)

# Height a window manager's title bar and frame take outside the window's geometry (openbox,
# GNOME, KDE: 24–37 px): a first window of the screen's height minus this fits with its title bar.
FRAME_ALLOWANCE = 30


class MainWindow(QMainWindow):
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
        self.runner = TaskRunner(self, serial=True)
        self.render_runner = TaskRunner(self, serial=True)
        self._build()
        bar = self.query_bar
        bar.auto_answer.setChecked(auto_answer)
        bar.auto_answer.toggled.connect(self.results.size_stacks)
        bar.run_cf.setChecked(self.ui_state.run_cfrag)
        bar.run_cf.setEnabled(auto_answer)  # CF-RAG writes with the answer model
        bar.auto_answer.toggled.connect(bar.run_cf.setEnabled)
        bar.run_cf.toggled.connect(self._toggle_cfrag)
        self.retranslate()
        self._restore_geometry()
        problem = getattr(self, "_state_problem", None)
        if problem:
            self.show_error(UserError("ui_state", tr("startup.bad_state", detail=problem), "", problem))
        self.libraries.init_libraries(self.libraries_file)
        self.libraries.refresh_library()

    @property
    def service(self) -> LibraryService:
        """The open library's service (the Session's: a library switch replaces it)."""
        return self.session.service

    @property
    def state(self) -> QueryState | None:
        """The question on screen (ui.question_view), None before the first or after a switch."""
        return self.questions.state

    # ================================================================== layout
    def _build(self) -> None:
        status = self.statusBar().showMessage
        self.libraries = lib = LibraryController(self.session, lambda: self.settings, self.runner,
                                                 self.render_runner, self)
        lib.panel.cancel.connect(self.cancel)
        lib.status.connect(status)
        lib.error.connect(self.show_error)
        lib.results_reset.connect(self._reset_results)
        lib.title_changed.connect(self.retranslate_title)
        lib.open_requested.connect(lambda h: self.open_hit(h))
        lib.settings_wanted.connect(self.apply_settings)
        self.query_bar = QueryBar(self.ui_state.recent_questions, self.settings.retrieval.level)
        self.query_bar.ask_requested.connect(lambda: self.ask())
        self.query_bar.stop_requested.connect(self.cancel)
        self.error_bar = ErrorBar()
        self.results = ResultsPanel(lambda: self.settings)
        self.results.open_requested.connect(lambda h: self.open_hit(h))
        self.results.citation_clicked.connect(self.open_citation)
        center = QWidget()
        cl = QVBoxLayout(center)
        cl.setContentsMargins(4, 4, 4, 4)
        cl.addWidget(self.query_bar)
        cl.addWidget(self.error_bar)
        cl.addWidget(self.results, 1)
        # The left column: the library, and under it the conversation when it is open (docked there
        # it never covers the columns nor widens the window: ui.conversation_dock).
        self.side = QSplitter(Qt.Orientation.Vertical)
        self.side.setChildrenCollapsible(False)
        self.side.addWidget(lib.panel)
        self.outer = QSplitter(Qt.Orientation.Horizontal)
        self.outer.addWidget(self.side)
        self.outer.addWidget(center)
        self.outer.setStretchFactor(0, 0)
        self.outer.setStretchFactor(1, 1)
        self.setCentralWidget(self.outer)
        self.viewer = ViewerDialog(self._render_runner, self)
        self.viewer.words_fn = self._word_spans
        self.conversation_dock = dock = ConversationDock(lambda: self.service, self.runner, self.side)
        dock.ask.connect(lambda q, typed: self.ask(q, typed=typed))
        dock.status.connect(status)
        lib.switched.connect(dock.reload)
        self.viewer.ocr_lookup = lambda doc_id, page: self.service.ocr_lines(doc_id, page)
        self.questions = QuestionView(lambda: self.service, lambda: self.settings, self.runner, self.query_bar,
                                      self.results, dock, self)
        self.questions.status.connect(status)
        self.questions.error.connect(self.show_error)
        self.questions.asked.connect(self.remember_question)
        self._build_menus()
        self.runner.busy_changed.connect(self.query_bar.stop_btn.setEnabled)

    def _build_menus(self) -> None:
        """Menus and shortcuts (Ctrl+O add folder, Ctrl+L focus query, Esc cancel)."""
        act, lib = self._action, self.libraries
        self.act_add = act(lib.choose_folder, "Ctrl+O")
        self.act_rescan = act(lib.rescan)
        self.act_export = act(self.choose_export, "Ctrl+E")
        self.act_settings = act(self.open_settings, "Ctrl+,")
        self.act_models = act(self.open_models)
        self.act_quit = act(self.request_quit, "Ctrl+Q")
        self.act_focus = act(self.query_bar.focus, "Ctrl+L")
        self.act_cancel = act(self.cancel, QKeySequence(Qt.Key.Key_Escape))
        self.act_cancel.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.act_lang = act(self.toggle_language)
        self.act_new_library = act(lib.new_library)
        self.act_open_library = act(lib.choose_library)
        self.act_calibrate = act(lib.open_calibration)
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

    def _word_spans(self, text: str) -> list[WordSpan]:
        """The words of ``text`` as the keyword tokenizer sees them (worker threads only: it may
        load jieba); [] when it has none, and the marks fall back to word prefixes."""
        return list(self.service.word_spans(text))

    def _render_runner(self) -> TaskRunner:
        # PyMuPDF must not run on two threads at once: while an ingest (which reads PDFs)
        # is running, page renders queue behind it on the service thread.
        return self.runner if self.libraries.ingesting else self.render_runner

    def _reset_results(self) -> None:
        self.questions.reset()
        self.viewer.hide()

    def _action(self, slot: Callable[[], object], shortcut: str | QKeySequence | None = None) -> QAction:
        a = QAction(self) if shortcut is None else QAction(self, shortcut=QKeySequence(shortcut))
        a.triggered.connect(slot)
        return a

    # ================================================================== i18n
    def retranslate(self) -> None:
        apply_qt_language(i18n.language())  # Qt's own buttons (OK, Cancel, Yes, No) follow the UI
        self.retranslate_title()
        if getattr(self, "models_page", None) is not None:
            self.models_page.retranslate()
        self.conversation_dock.retranslate()
        self.query_bar.retranslate()
        self.file_menu.setTitle(tr("menu.file"))
        self.view_menu.setTitle(tr("menu.view"))
        self.library_menu.setTitle(tr("menu.library"))
        for a, key in ((self.act_new_library, "lib.new"), (self.act_open_library, "lib.open_folder"),
                       (self.act_calibrate, "menu.calibrate"), (self.act_add, "lib.add_folder"),
                       (self.act_rescan, "lib.rescan"), (self.act_export, "menu.export"),
                       (self.act_settings, "menu.settings"), (self.act_models, "menu.models"),
                       (self.act_quit, "menu.quit"), (self.act_focus, "menu.focus_query"),
                       (self.act_cancel, "menu.cancel"), (self.act_lang, "menu.language")):
            a.setText(tr(key))
        self.libraries.panel.retranslate()
        self.error_bar.retranslate()
        self.results.retranslate()
        self.viewer.retranslate()
        if self.state is not None and self.state.comparison is not None:
            self.query_bar.show_crosslang(self.state.comparison.cross_language)

    def retranslate_title(self) -> None:
        self.setWindowTitle(self.libraries.title())

    def toggle_language(self) -> None:
        lang = "zh" if i18n.language() == "en" else "en"
        self.apply_settings(self.settings.replace("ui", language=lang))

    # ================================================================== status and errors
    def show_error(self, err: UserError) -> None:
        self.error_bar.show_error(err)
        self.statusBar().showMessage(err.message, 10000)

    def cancel(self) -> None:
        """Esc: stop whatever is running or queued (ingest, retrieval, generation)."""
        n = self.runner.cancel_all()
        if n:
            self.statusBar().showMessage(tr("status.cancelling"), 5000)

    # ================================================================== asking
    def ask(self, question: str | None = None, *, typed: str | None = None) -> None:
        """Ask ``question`` (default: the question box); ``typed``: it is the standalone form of
        what the user typed (ui.question_view.QuestionView.ask)."""
        q = (question if question is not None else self.query_bar.text()).strip()
        if not q:
            self.statusBar().showMessage(tr("query.empty"), 5000)
            return
        if self.libraries.switching:
            self.statusBar().showMessage(tr("lib.busy_switching"), 5000)
            return
        self.questions.ask(q, typed)

    def remember_question(self, q: str) -> None:
        self.ui_state = self.ui_state.with_question(q)
        self._save_ui_state()
        self.query_bar.set_history(self.ui_state.recent_questions)

    def _toggle_cfrag(self, on: bool) -> None:
        """The CF-RAG switch: remembered, and applied to the question on screen."""
        self.ui_state = dataclasses.replace(self.ui_state, run_cfrag=on)
        self._save_ui_state()
        self.questions.toggle_cfrag(on)

    # ================================================================== opening documents
    def open_hit(self, hit: Hit, page: int | None = None) -> None:
        if hit.path and not Path(hit.path).exists():  # said in words; the viewer would only fail to read it
            self.statusBar().showMessage(tr("viewer.file_missing", name=Path(hit.path).name), 10000)
            return
        surfaces = self.state.surfaces if self.state is not None else {}
        self.viewer.show_hit(hit, self.results.terms_for_doc(hit.doc_id), surfaces, page)

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
        self.open_hit(hit, page=c.page)

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
        self.results.fit(w - side, max(self.height(), 600), self.query_bar.auto_answer.isChecked())

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
        self.query_bar.set_level(new.retrieval.level)
        # self.service is read when the task runs: a library switch queued before it has then happened
        self.runner.submit("settings", lambda ctx: self.service.update_settings(new), on_error=self.show_error)
        self.libraries._update_watcher()
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
        return bool(self.runner.busy or self.libraries.ingesting or self.libraries.switching)

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
        if self.libraries.watcher is not None:
            self.libraries.watcher.stop()
            self.libraries.watcher = None
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
