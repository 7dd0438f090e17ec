"""The main window's library work: adding folders, watching them, switching and removing
libraries, the calibration gate (a mixin of ui.main_window.MainWindow).

Each method runs on the GUI thread and sends slow work to the window's one worker
(``self.runner``); the library switch goes through the Session (app.session), which opens the
new library on the loaded models and closes the old one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox

from rag_desktop.core.types import Hit
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.library_panel import Listing, build_listing
from rag_desktop.ui.present import fmt
from rag_desktop.ui.window_part import WindowPart
from rag_desktop.ui.worker import TaskContext, UserError

if TYPE_CHECKING:
    from PySide6.QtCore import SignalInstance

    from rag_desktop.app.config import LibraryList
    from rag_desktop.core.settings import Settings
    from rag_desktop.ui.calibration_wizard import CalibrationWizard
    from rag_desktop.ui.conversation import ConversationPanel
    from rag_desktop.ui.library_panel import LibraryPanel
    from rag_desktop.ui.worker import TaskRunner

log = logging.getLogger(__name__)


class LibraryActions(WindowPart):
    # What this part uses of the window (ui.main_window.MainWindow builds and defines them).
    settings: Settings
    runner: TaskRunner
    render_runner: TaskRunner
    library_panel: LibraryPanel
    conversation_panel: ConversationPanel
    calibration_wizard: CalibrationWizard
    folders_changed: SignalInstance
    libraries_file: Path | None
    known_libraries: LibraryList
    listing: Listing | None
    last_ingest_report: Any
    ingesting: bool
    switching: bool
    watcher: Any  # app.watcher.FolderWatcher while ingest.watch is on
    _watch_key: tuple[object, ...]
    _watch_pending: set[Path]
    _watch_auto: bool
    _watch_summary: str
    show_error: Callable[[UserError], None]
    open_hit: Callable[..., None]
    apply_settings: Callable[[Settings], None]
    _reset_results: Callable[[], None]

    def poll_calibration(self) -> None:
        """Show the background calibration's progress; restart one a crash interrupted."""
        if self.switching:
            return
        try:
            info = self.service.calibration_progress()
        except Exception:  # a library being closed or switched: try again at the next tick
            return
        self.library_panel.show_calibration(info)
        if info["status"] == "interrupted" and not self.ingesting:
            self.service.start_auto_calibration()

    # ================================================================== library
    def refresh_library(self, then: Callable[[Listing], None] | None = None) -> None:
        def done(listing: Listing) -> None:
            self.listing = listing
            self.library_panel.set_listing(listing)
            self.retranslate_title()
            self._update_watcher()
            if then is not None:
                then(listing)

        self.runner.submit("library.list", lambda ctx: build_listing(self.service), on_result=done,
                           on_error=self.show_error)

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, tr("lib.choose_folder"))
        if folder:
            self.start_ingest([Path(folder)])

    def rescan(self) -> None:
        roots = [Path(r) for r in (self.listing.roots if self.listing else ())]
        if not roots:
            self.statusBar().showMessage(tr("lib.no_folders"), 8000)
            return
        self.start_ingest(roots)

    def start_ingest(self, folders: list[Path]) -> None:
        if self.ingesting:
            self.statusBar().showMessage(tr("lib.already_ingesting"), 5000)
            return
        if self.switching:
            self.statusBar().showMessage(tr("lib.busy_switching"), 5000)
            return
        self.ingesting = True
        self.library_panel.set_busy(True)
        render_pool = self.render_runner

        def job(ctx: TaskContext) -> Iterator[object]:
            render_pool.wait()  # no page render may be using PyMuPDF while we read PDFs
            yield from self.service.ingest(folders, ctx.cancel, calibrate_after=True)

        def finished() -> None:
            self.ingesting = False
            self.library_panel.set_busy(False)
            self.refresh_library()
            if self._watch_pending:  # folders changed while this ingest ran
                pending, self._watch_pending = frozenset(self._watch_pending), set()
                QTimer.singleShot(0, lambda: self._on_folders_changed(pending))

        self.runner.submit("ingest", job, on_progress=self.library_panel.show_progress,
                           on_result=self._on_ingest_report, on_error=self.show_error,
                           on_cancelled=lambda: self.statusBar().showMessage(tr("lib.cancelled"), 8000),
                           on_finished=finished)

    # ------------------------------------------------------------------ folder watching
    def _update_watcher(self) -> None:
        """Watch the open library's folders (app/watcher.py) unless ingest.watch is off."""
        from rag_desktop.app.watcher import FolderWatcher

        ing = self.settings.ingest
        roots = [Path(r) for r in (self.listing.roots if self.listing else ())]
        key = (ing.watch_debounce_s, ing.watch_poll_s, self.current_library())
        if self.watcher is not None and (not ing.watch or key != self._watch_key):
            self.watcher.stop()
            self.watcher = None
        if not ing.watch:
            self.library_panel.set_watch_status(False, 0)
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
            self.library_panel.set_watch_status(True, len(w.roots), tuple(str(m) for m in w.missing),
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
        self.statusBar().showMessage(msg, 15000)

    def _open_doc_from_library(self, doc_id: int) -> None:
        if self.listing is None:
            return
        d = next((d for d in self.listing.documents if d.doc_id == doc_id), None)
        if d is not None:
            self.open_hit(Hit(d.doc_id, d.doc_id, "doc", d.title, d.path, 1, "", 0.0, 0, "other"))

    # ================================================================== several libraries
    def current_library(self) -> Path:
        return Path(self.service.library.folder).expanduser().resolve()

    def _init_libraries(self) -> None:
        from rag_desktop.app.config import LibraryList, load_libraries
        from rag_desktop.core.settings import SettingsError

        try:
            known = load_libraries(self.libraries_file)
        except (SettingsError, OSError) as exc:
            log.warning("the list of libraries is unreadable: %s", exc)
            self.show_error(UserError("libraries", tr("lib.list_unreadable", detail=str(exc)), "", repr(exc)))
            known = LibraryList()
        self._set_known(known.with_library(self.current_library()))

    def _set_known(self, known: Any) -> None:
        """Adopt, show and persist the list of libraries (a write failure is reported, not fatal)."""
        from rag_desktop.app.config import save_libraries

        self.known_libraries = known
        self.library_panel.set_libraries(known.libraries, known.current)
        self._peek_libraries()
        try:
            save_libraries(known, self.libraries_file)
        except OSError as exc:
            from rag_desktop.ui.worker import describe_error

            msg, hint = describe_error(exc)
            self.show_error(UserError("libraries", msg, hint, repr(exc)))

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

        self.runner.submit("library.peek", job, on_result=self.library_panel.set_summaries)

    def switch_library(self, folder: Path) -> bool:
        """Open the library in ``folder`` (created if new) instead of the open one.

        Refused, with the reason, while files are being added; queries and answers of the old
        library are stopped. The new library is opened on the worker and the old one closed
        there, so nothing slow runs on the GUI thread. Returns whether a switch was started.
        """
        target = folder.expanduser().resolve()
        name = target.name or str(target)
        if target == self.current_library():
            self.statusBar().showMessage(tr("lib.already_open", name=name), 5000)
            return False
        if self.ingesting:
            self.show_error(UserError("library.switch", tr("lib.switch_refused"), tr("lib.switch_refused_hint"), ""))
            return False
        if self.switching:
            self.statusBar().showMessage(tr("lib.busy_switching"), 5000)
            return False
        self.switching = True
        self.runner.cancel_all()  # the old library's questions and answers stop; queued ones drain
        self.render_runner.cancel_all()
        self._reset_results()
        self.listing = None
        self.library_panel.set_listing(None)
        self.statusBar().showMessage(tr("lib.switching", name=name))
        settings = self.settings

        def job(ctx: TaskContext) -> Any:
            # Raises → the old library stays open; tasks queued after this one use the new library.
            return build_listing(self.session.open(target, settings))

        def opened(listing: Listing) -> None:
            self.listing = listing
            self.library_panel.set_listing(listing)
            # each library has its own conversation
            self.conversation_panel.clear_proposal()
            self.conversation_panel.set_conversation(self.service.load_conversation())
            self._set_known(self.known_libraries.with_library(target))
            self._update_watcher()
            self.retranslate_title()
            self.statusBar().showMessage(tr("lib.switched", name=name), 8000)

        def failed(err: UserError) -> None:
            self.show_error(err)
            self.refresh_library()  # the old library is still open: show it again

        def finished() -> None:
            self.switching = False

        self.runner.submit("library.switch", job, on_result=opened, on_error=failed, on_finished=finished)
        return True

    def retranslate_title(self) -> None:
        self.setWindowTitle(tr("app.title") + (f" — {self.listing.library}" if self.listing else ""))

    def new_library(self) -> None:
        from rag_desktop.app.config import data_dir

        name, ok = QInputDialog.getText(self, tr("lib.new_title"),
                                        tr("lib.new_prompt", path=str(data_dir() / "libraries")))
        if ok and name.strip():
            self.create_library(name)

    def create_library(self, name: str) -> bool:
        """"New library…": a library folder called ``name`` in the user data folder, then switch to it."""
        from rag_desktop.app.config import new_library_dir

        try:
            folder = new_library_dir(name)
        except ValueError as exc:
            self.show_error(UserError("library.new", tr("err.value", detail=str(exc)), tr("err.hint.value"),
                                      repr(exc)))
            return False
        return self.switch_library(folder)

    def choose_library(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, tr("lib.open_folder_title"))
        if folder:
            self.open_library_folder(Path(folder))

    def open_library_folder(self, folder: Path) -> bool:
        """"Open library…": a library folder anywhere (a copy from another machine, a USB
        disk), or an empty folder for a new one; a folder of documents is refused with a hint."""
        from rag_desktop.app.library import library_folder_problem

        problem = library_folder_problem(folder.expanduser())
        if problem is not None:
            kind, detail = problem
            self.show_error(UserError("library.open",
                                      tr("lib.not_a_library", path=str(folder), reason=tr(f"lib.reason.{kind}")),
                                      tr("lib.not_a_library_hint"), detail))
            return False
        return self.switch_library(folder)

    def remove_library(self, folder: Path, confirm: bool = True) -> bool:
        """Remove a library from the list (never its files), after the user confirms."""
        target = folder.expanduser().resolve()
        name = target.name or str(target)
        if target == self.current_library():
            self.statusBar().showMessage(tr("lib.remove_current"), 8000)
            return False
        if confirm:
            answer = QMessageBox.question(self, tr("lib.remove_title"),
                                          tr("lib.remove_confirm", name=name, path=str(target)))
            if answer != QMessageBox.StandardButton.Yes:
                return False
        self._set_known(self.known_libraries.without(target))
        self.statusBar().showMessage(tr("lib.removed", name=name), 8000)
        return True

    # ================================================================== calibration
    def open_calibration(self) -> None:
        from rag_desktop.ui.calibration_wizard import CalibrationWizard

        if self.ingesting or self.switching:
            self.statusBar().showMessage(tr("cal.busy") if self.ingesting else tr("lib.busy_switching"), 8000)
            return
        dlg = CalibrationWizard(self.service, self.runner, self._apply_gate, self)
        self.calibration_wizard = dlg
        dlg.open()

    def _apply_gate(self, _decision: Any) -> None:
        """The wizard stored a decision: let the causal column follow it (persisted)."""
        from rag_desktop.app.calibration import gated_settings

        self.apply_settings(gated_settings(self.settings))
        self.statusBar().showMessage(tr("cal.applied"), 10000)
