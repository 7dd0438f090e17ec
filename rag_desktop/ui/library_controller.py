"""The window's library work: adding folders, watching them, switching and removing libraries,
the calibration gate, and the library panel that shows them.

Each method runs on the GUI thread and sends slow work to the window's one worker (``runner``,
ui/worker.py); the library switch goes through the Session (app.session), which opens the new
library on the loaded models and closes the old one (docs/architecture.md, "Session and the
service the UI sees"). What the window must do in turn is said through signals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from rag_desktop.app.service_api import LibraryService
from rag_desktop.app.session import Session
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Hit
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.library_panel import LibraryPanel, Listing, build_listing
from rag_desktop.ui.present import fmt
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError

if TYPE_CHECKING:
    from rag_desktop.app.config import LibraryList
    from rag_desktop.ui.calibration_wizard import CalibrationWizard

log = logging.getLogger(__name__)


class LibraryController(QObject):
    folders_changed = Signal(object)  # frozenset[Path], emitted from the folder watcher's thread
    status = Signal(str, int)  # a status-bar message and how long it stays (ms; 0: until replaced)
    error = Signal(object)  # a UserError for the error bar
    results_reset = Signal()  # a switch began: the old library's results go
    switched = Signal()  # another library is open (its conversation is another one)
    title_changed = Signal()  # the window's title (``title()``) changed
    open_requested = Signal(object)  # a document of the library to open (a Hit)
    settings_wanted = Signal(object)  # Settings to adopt (the calibration's decision)

    def __init__(self, session: Session, settings: Callable[[], Settings], runner: TaskRunner,
                 render_runner: TaskRunner, window: QWidget) -> None:
        super().__init__(window)
        self.session = session
        self._settings = settings  # read at each use: the window's settings change
        self.runner = runner
        self.render_runner = render_runner
        self.window = window  # the parent of the dialogs
        self.panel = LibraryPanel()
        self.panel.add_folder.connect(self.choose_folder)
        self.panel.rescan.connect(self.rescan)
        self.panel.doc_activated.connect(self._open_doc_from_library)
        self.panel.library_new.connect(self.new_library)
        self.panel.library_open.connect(lambda p: self.switch_library(Path(p)))
        self.panel.library_remove.connect(lambda p: self.remove_library(Path(p)))
        self.listing: Listing | None = None
        self.last_ingest_report: Any = None
        self.ingesting = False
        self.switching = False
        self.known_libraries: LibraryList
        self.libraries_file: Path | None = None
        self.calibration_wizard: CalibrationWizard | None = None
        self.watcher: Any = None  # app.watcher.FolderWatcher while ingest.watch is on
        self._reread: set[str] = set()  # libraries read again for a newer text version this session
        self._reread_running = False  # the ingest in progress is that re-read
        self._watch_key: tuple[object, ...] = ()
        self._watch_pending: set[Path] = set()
        self._watch_auto = False
        self._watch_summary = ""
        self.folders_changed.connect(self._on_folders_changed)

    @property
    def service(self) -> LibraryService:
        """The open library's service (the Session's: a library switch replaces it)."""
        return self.session.service

    # ================================================================== library
    def refresh_library(self, then: Callable[[Listing], None] | None = None) -> None:
        def done(listing: Listing) -> None:
            self.listing = listing
            self.panel.set_listing(listing)
            self.title_changed.emit()
            self._update_watcher()
            self._reread_if_outdated(listing)
            if then is not None:
                then(listing)

        self.runner.submit("library.list", lambda ctx: build_listing(self.service), on_result=done,
                           on_error=self.error.emit)

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window, tr("lib.choose_folder"))
        if folder:
            self.start_ingest([Path(folder)])

    def rescan(self) -> None:
        roots = [Path(r) for r in (self.listing.roots if self.listing else ())]
        if not roots:
            self.status.emit(tr("lib.no_folders"), 8000)
            return
        self.start_ingest(roots)

    def start_ingest(self, folders: list[Path], why: str = "") -> None:
        """Ingest ``folders`` in the background; ``why`` stands above its progress while it runs."""
        if self.ingesting:
            self.status.emit(tr("lib.already_ingesting"), 5000)
            return
        if self.switching:
            self.status.emit(tr("lib.busy_switching"), 5000)
            return
        self.ingesting = True
        self.panel.set_busy(True, why)
        render_pool = self.render_runner

        def job(ctx: TaskContext) -> Iterator[object]:
            render_pool.wait()  # no page render may be using PyMuPDF while we read PDFs
            yield from self.service.ingest(folders, ctx.cancel, calibrate_after=True)

        def finished() -> None:
            self.ingesting = False
            self.panel.set_busy(False)
            self.refresh_library()
            if self._watch_pending:  # folders changed while this ingest ran
                pending, self._watch_pending = frozenset(self._watch_pending), set()
                QTimer.singleShot(0, lambda: self._on_folders_changed(pending))

        self.runner.submit("ingest", job, on_progress=self.panel.show_progress,
                           on_result=self._on_ingest_report, on_error=self.error.emit,
                           on_cancelled=lambda: self.status.emit(tr("lib.cancelled"), 8000),
                           on_finished=finished)

    def _reread_if_outdated(self, listing: Listing) -> None:
        """A library read by an older text version (Library.text_outdated) is read again in the
        background, once a session: an ingest that cannot reach every folder (one unplugged) leaves
        the version to the next re-scan instead of starting again."""
        if not listing.text_outdated or listing.library in self._reread or self.ingesting or self.switching:
            return
        roots = [Path(r) for r in listing.roots if Path(r).is_dir()]
        if roots:
            self._reread.add(listing.library)
            self._reread_running = True
            self.status.emit(tr("lib.reread"), 15000)
            self.start_ingest(roots, why=tr("lib.reread"))

    # ------------------------------------------------------------------ folder watching
    def _update_watcher(self) -> None:
        """Watch the open library's folders (app/watcher.py) unless ingest.watch is off."""
        from rag_desktop.app.watcher import FolderWatcher

        ing = self._settings().ingest
        roots = [Path(r) for r in (self.listing.roots if self.listing else ())]
        key = (ing.watch_debounce_s, ing.watch_poll_s, self.current_library())
        if self.watcher is not None and (not ing.watch or key != self._watch_key):
            self.watcher.stop()
            self.watcher = None
        if not ing.watch:
            self.panel.set_watch_status(False, 0)
            return
        if self.watcher is None:
            self.watcher = FolderWatcher(self.folders_changed.emit, debounce_s=ing.watch_debounce_s,
                                         poll_s=ing.watch_poll_s, ignore=[self.current_library()])
            self._watch_key = key
        self.watcher.start(roots)
        self._show_watch_status()

    def _show_watch_status(self) -> None:
        w = self.watcher
        if w is not None:
            self.panel.set_watch_status(True, len(w.roots), tuple(str(m) for m in w.missing),
                                                self._watch_summary)

    def _on_folders_changed(self, roots: frozenset[Path]) -> None:
        """Re-ingest changed folders in the background (the incremental path: unchanged files are skipped)."""
        known = {Path(r) for r in (self.listing.roots if self.listing else ())}
        roots = frozenset(r for r in roots if r in known)
        self._show_watch_status()
        if not roots:
            return
        if self.ingesting or self.switching:
            self._watch_pending |= roots
            return
        self._watch_auto = True
        self.start_ingest(sorted(roots))

    def _on_ingest_report(self, report: Any) -> None:
        if self._watch_auto:
            self._watch_auto = False
            self._watch_summary = tr("lib.watch_summary", added=len(report.added), updated=len(report.updated),
                                     removed=len(report.removed))
            self._show_watch_status()
        self.last_ingest_report = report
        msg = tr("lib.report", added=len(report.added), updated=len(report.updated), removed=len(report.removed),
                 unchanged=len(report.unchanged), skipped=len(report.skipped), s=fmt(report.seconds, 1))
        if report.cancelled:
            msg = tr("lib.cancelled") + " " + msg
        elif self._reread_running:
            msg = tr("lib.reread_done") + " " + msg
        self._reread_running = False
        self.status.emit(msg, 15000)

    def _open_doc_from_library(self, doc_id: int) -> None:
        if self.listing is None:
            return
        d = next((d for d in self.listing.documents if d.doc_id == doc_id), None)
        if d is not None:
            self.open_requested.emit(Hit(d.doc_id, d.doc_id, "doc", d.title, d.path, 1, "", 0.0, 0, "other"))

    # ================================================================== several libraries
    def current_library(self) -> Path:
        return Path(self.service.library.folder).expanduser().resolve()

    def init_libraries(self, libraries_file: Path | None) -> None:
        """Read the list of known libraries (``libraries_file``, where it is also saved)."""
        from rag_desktop.app.config import LibraryList, load_libraries

        self.libraries_file = libraries_file
        from rag_desktop.core.settings import SettingsError

        try:
            known = load_libraries(self.libraries_file)
        except (SettingsError, OSError) as exc:
            log.warning("the list of libraries is unreadable: %s", exc)
            self.error.emit(UserError("libraries", tr("lib.list_unreadable", detail=str(exc)), "", repr(exc)))
            known = LibraryList()
        self._set_known(known.with_library(self.current_library()))

    def _set_known(self, known: Any) -> None:
        """Adopt, show and persist the list of libraries (a write failure is reported, not fatal)."""
        from rag_desktop.app.config import save_libraries

        self.known_libraries = known
        self.panel.set_libraries(known.libraries, known.current)
        self._peek_libraries()
        try:
            save_libraries(known, self.libraries_file)
        except OSError as exc:
            from rag_desktop.ui.worker import describe_error

            msg, hint = describe_error(exc)
            self.error.emit(UserError("libraries", msg, hint, repr(exc)))

    def _peek_libraries(self) -> None:
        """Read what the other known libraries hold (worker: it opens their catalogs)."""
        others = [p for p in self.known_libraries.libraries if p != self.known_libraries.current]
        if not others:
            return

        def job(ctx: TaskContext) -> dict[str, Any]:
            from rag_desktop.app.service import RagService

            out: dict[str, Any] = {}
            for p in others:
                try:
                    out[p] = RagService.peek_library(Path(p))
                except Exception as exc:  # an unreadable library is shown as not found; the log has why
                    log.warning("cannot read the library %s: %s", p, exc)
                    out[p] = None
            return out

        self.runner.submit("library.peek", job, on_result=self.panel.set_summaries)

    def switch_library(self, folder: Path) -> bool:
        """Open the library in ``folder`` (created if new) instead of the open one.

        Refused, with the reason, while files are being added; queries and answers of the old
        library are stopped. The new library is opened on the worker and the old one closed
        there, so nothing slow runs on the GUI thread. Returns whether a switch was started.
        """
        target = folder.expanduser().resolve()
        name = target.name or str(target)
        if target == self.current_library():
            self.status.emit(tr("lib.already_open", name=name), 5000)
            return False
        if self.ingesting:
            self.error.emit(UserError("library.switch", tr("lib.switch_refused"), tr("lib.switch_refused_hint"), ""))
            return False
        if self.switching:
            self.status.emit(tr("lib.busy_switching"), 5000)
            return False
        self.switching = True
        self.runner.cancel_all()  # the old library's questions and answers stop; queued ones drain
        self.render_runner.cancel_all()
        self.results_reset.emit()
        self.listing = None
        self.panel.set_listing(None)
        self.status.emit(tr("lib.switching", name=name), 0)
        settings = self._settings()

        def job(ctx: TaskContext) -> Any:
            # Raises → the old library stays open; tasks queued after this one use the new library.
            return build_listing(self.session.open(target, settings))

        def opened(listing: Listing) -> None:
            self.listing = listing
            self.panel.set_listing(listing)
            self.switched.emit()  # each library has its own conversation
            self._set_known(self.known_libraries.with_library(target))
            self._update_watcher()
            self.title_changed.emit()
            self.status.emit(tr("lib.switched", name=name), 8000)
            self._reread_if_outdated(listing)

        def failed(err: UserError) -> None:
            self.error.emit(err)
            self.refresh_library()  # the old library is still open: show it again

        def finished() -> None:
            self.switching = False

        self.runner.submit("library.switch", job, on_result=opened, on_error=failed, on_finished=finished)
        return True

    def title(self) -> str:
        """The window's title: the app, and the open library once it is listed."""
        return tr("app.title") + (f" — {self.listing.library}" if self.listing else "")

    def new_library(self) -> None:
        from rag_desktop.app.config import data_dir

        name, ok = QInputDialog.getText(self.window, tr("lib.new_title"),
                                        tr("lib.new_prompt", path=str(data_dir() / "libraries")))
        if ok and name.strip():
            self.create_library(name)

    def create_library(self, name: str) -> bool:
        """"New library…": a library folder called ``name`` in the user data folder, then switch to it."""
        from rag_desktop.app.config import new_library_dir

        try:
            folder = new_library_dir(name)
        except ValueError as exc:
            self.error.emit(UserError("library.new", tr("err.value", detail=str(exc)), tr("err.hint.value"),
                                      repr(exc)))
            return False
        return self.switch_library(folder)

    def choose_library(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window, tr("lib.open_folder_title"))
        if folder:
            self.open_library_folder(Path(folder))

    def open_library_folder(self, folder: Path) -> bool:
        """"Open library…": a library folder anywhere (a copy from another machine, a USB
        disk), or an empty folder for a new one; a folder of documents is refused with a hint."""
        from rag_desktop.app.library import library_folder_problem

        problem = library_folder_problem(folder.expanduser())
        if problem is not None:
            kind, detail = problem
            self.error.emit(UserError("library.open",
                                      tr("lib.not_a_library", path=str(folder), reason=tr(f"lib.reason.{kind}")),
                                      tr("lib.not_a_library_hint"), detail))
            return False
        return self.switch_library(folder)

    def remove_library(self, folder: Path, confirm: bool = True) -> bool:
        """Remove a library from the list (never its files), after the user confirms."""
        target = folder.expanduser().resolve()
        name = target.name or str(target)
        if target == self.current_library():
            self.status.emit(tr("lib.remove_current"), 8000)
            return False
        if confirm:
            answer = QMessageBox.question(self.window, tr("lib.remove_title"),
                                          tr("lib.remove_confirm", name=name, path=str(target)))
            if answer != QMessageBox.StandardButton.Yes:
                return False
        self._set_known(self.known_libraries.without(target))
        self.status.emit(tr("lib.removed", name=name), 8000)
        return True

    # ================================================================== calibration
    def open_calibration(self) -> None:
        from rag_desktop.ui.calibration_wizard import CalibrationWizard

        if self.ingesting or self.switching:
            self.status.emit(tr("cal.busy") if self.ingesting else tr("lib.busy_switching"), 8000)
            return
        dlg = CalibrationWizard(self.service, self.runner, self._apply_gate, self.window)
        self.calibration_wizard = dlg
        dlg.open()

    def _apply_gate(self, _decision: Any) -> None:
        """The wizard stored a decision: let the causal column follow it (persisted)."""
        from rag_desktop.app.calibration import gated_settings

        self.settings_wanted.emit(gated_settings(self._settings()))
        self.status.emit(tr("cal.applied"), 10000)
