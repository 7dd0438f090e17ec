"""The Models page (File ▸ Models…): which models are in use, which are recommended, and the way
to get and switch to them without a terminal.

The rows come from :func:`rag_desktop.app.models_catalog.catalog` (Qt-free); this widget only
renders them and turns clicks into three actions:

* **Download** — :func:`rag_desktop.app.model_download.download` on the page's own worker (a
  download never queues behind a question, nor a question behind a download); a progress bar
  with bytes and time left; **Cancel** stops mid-file and keeps the partial file; a failure is
  named in words (no network, interrupted, checksum mismatch) and the next Download resumes.
  Nothing is downloaded unless the person presses the button: the app stays offline otherwise.
* **Use** — the settings with that model (``models_catalog.use``), handed to the window through
  :attr:`ModelsPage.settings_chosen`. The window saves them and queues the service's settings
  update on its one service worker (``MainWindow.apply_settings``), so a question running at
  that moment finishes with the old generator and the next one loads the new model — no restart.
* **Use a GGUF file I already have…** — a file dialog, the file checked (``check_gguf``: the
  ``GGUF`` magic bytes and a readable header), then the same path as Use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.app import models_catalog
from rag_desktop.app.config import model_dir
from rag_desktop.app.model_download import DownloadDone, DownloadFailed, download
from rag_desktop.app.model_speed import Speed
from rag_desktop.app.models_catalog import ModelRow
from rag_desktop.core.errors import RagError
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Progress
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import format_eta
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError

COLUMNS = ("role", "name", "in_use", "on_disk", "size", "memory", "speed", "action")
PROGRESS_SCALE = 1000  # QProgressBar holds an int: per-mille of the bytes


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def speed_text(speed: Speed | None) -> str:
    if speed is None:
        return tr("models.speed_none")
    return tr("models.speed", prompt=f"{speed.prompt_tok_s:.0f}", answer=f"{speed.answer_tok_s:.1f}")


class ModelsPage(QDialog):
    """The table of models and the download/use actions; ``settings_chosen`` carries new Settings."""

    settings_chosen = Signal(object)

    def __init__(self, settings: Settings, parent: QWidget | None = None, *, endpoint: str | None = None,
                 download_options: dict[str, Any] | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("models_page")
        self.settings = settings
        self.endpoint = endpoint  # None: huggingface_hub's (HF_ENDPOINT or the Hub)
        self.download_options = download_options or {}  # max_attempts, retry_wait, cache_dir (tests)
        self.runner = TaskRunner(self, serial=True)
        self.rows: tuple[ModelRow, ...] = ()
        self.downloading: ModelRow | None = None
        self.last_error = ""
        self._build()
        self.retranslate()
        self.refresh()

    # ------------------------------------------------------------------ layout
    def _build(self) -> None:
        self.intro = QLabel()
        self.intro.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        self.table.verticalHeader().hide()
        # Every column as wide as its contents but the model's name, which takes what is left and is
        # elided (whole on hover): at 1280 px the Download / Use buttons stay in view without scrolling.
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COLUMNS.index("name"), QHeaderView.ResizeMode.Stretch)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setWordWrap(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, PROGRESS_SCALE)
        self.progress_label = QLabel()
        self.cancel_btn = QPushButton()
        self.cancel_btn.clicked.connect(self.cancel_download)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.cancel_btn)
        self.progress_box = QWidget()
        box = QVBoxLayout(self.progress_box)
        box.setContentsMargins(0, 0, 0, 0)
        box.addLayout(row)
        box.addWidget(self.progress_label)
        self.progress_box.hide()
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error = QLabel()
        self.error.setObjectName("models_error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b00020;")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.hide()
        self.own_btn = QPushButton()
        self.own_btn.clicked.connect(self.choose_gguf)
        self.close_btn = QPushButton()
        self.close_btn.clicked.connect(self.close)
        buttons = QHBoxLayout()
        buttons.addWidget(self.own_btn)
        buttons.addStretch(1)
        buttons.addWidget(self.close_btn)
        layout = QVBoxLayout(self)
        layout.addWidget(self.intro)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.progress_box)
        layout.addWidget(self.status)
        layout.addWidget(self.error)
        layout.addLayout(buttons)
        scr = self.screen()
        self.resize(min(1400, (scr.availableGeometry().width() if scr is not None else 1280) - 40), 440)

    def retranslate(self) -> None:
        self.setWindowTitle(tr("models.title"))
        self.intro.setText(tr("models.intro", folder=str(model_dir(self.settings))))
        self.table.setHorizontalHeaderLabels([tr(f"models.col.{c}") for c in COLUMNS])
        self.cancel_btn.setText(tr("models.cancel"))
        self.own_btn.setText(tr("models.own_gguf"))
        self.close_btn.setText(tr("models.close"))
        self.refresh()

    # ------------------------------------------------------------------ rows
    def set_settings(self, settings: Settings) -> None:
        """The window's settings changed (Settings dialog, another Use): show the rows for them."""
        self.settings = settings
        self.refresh()

    def refresh(self) -> None:
        self.rows = models_catalog.catalog(self.settings)
        self.table.setRowCount(len(self.rows))
        for i, r in enumerate(self.rows):
            cells = (tr(f"models.role.{r.role}"), self._name(r), tr("models.yes") if r.in_use else "",
                     tr("models.yes") if r.on_disk else tr("models.no"), self._size(r), self._memory(r),
                     "" if r.key == "reranker:none" else speed_text(r.speed))
            for j, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if j == 1:
                    item.setToolTip(f"{text}\n{r.path}" if r.path else text)
                self.table.setItem(i, j, item)
            self.table.setCellWidget(i, len(COLUMNS) - 1, self._action(r))

    @staticmethod
    def _name(r: ModelRow) -> str:
        if r.key == "reranker:none":
            return tr("models.substitute")
        return f"{r.name}  ({tr(f'models.kind.{r.kind}')})"

    @staticmethod
    def _size(r: ModelRow) -> str:
        if r.size_bytes is None:
            return ""
        text = human_bytes(r.size_bytes)
        return tr("models.size_download", size=text) if r.size_is_download else text

    @staticmethod
    def _memory(r: ModelRow) -> str:
        return "" if r.memory_bytes is None else tr("models.memory", size=human_bytes(r.memory_bytes))

    def _action(self, r: ModelRow) -> QWidget:
        btn = QPushButton()
        btn.setObjectName(f"action:{r.key}")
        if r.in_use:
            btn.setText(tr("models.in_use"))
            btn.setEnabled(False)
        elif r.on_disk:
            btn.setText(tr("models.use"))
            btn.clicked.connect(lambda _=False, row=r: self.use_row(row))
        elif r.source is not None:
            btn.setText(tr("models.download"))
            btn.setEnabled(self.downloading is None)
            btn.clicked.connect(lambda _=False, row=r: self.start_download(row))
        else:
            btn.setText(tr("models.missing"))
            btn.setEnabled(False)
        return btn

    def button(self, key: str) -> QPushButton:
        """The action button of the row ``key`` (tests and keyboard users find it by name)."""
        i = next(i for i, r in enumerate(self.rows) if r.key == key)
        btn = self.table.cellWidget(i, len(COLUMNS) - 1)  # not findChild: a replaced button lingers until deleted
        assert isinstance(btn, QPushButton), key
        return btn

    def row(self, key: str) -> ModelRow:
        return next(r for r in self.rows if r.key == key)

    # ------------------------------------------------------------------ use
    def _choose(self, new: Settings, name: str) -> None:
        self.settings = new
        self._clear_error()
        self.status.setText(tr("models.switched", name=name))
        self.settings_chosen.emit(new)
        self.refresh()

    def use_row(self, r: ModelRow) -> None:
        self._choose(models_catalog.use(self.settings, r), r.name if r.key != "reranker:none"
                     else tr("models.substitute"))

    def choose_gguf(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, tr("models.own_gguf_title"), str(Path.home()),
                                              tr("models.gguf_filter"))
        if path:
            self.use_file(Path(path))

    def use_file(self, path: Path) -> bool:
        """Use the GGUF at ``path`` as the generator; a file that is not one is named with the reason."""
        try:
            new = models_catalog.use_gguf(self.settings, path)
        except (RagError, OSError) as exc:
            self._show_error(tr("models.err.not_gguf", path=str(path), detail=str(exc)))
            return False
        self._choose(new, path.name)
        return True

    # ------------------------------------------------------------------ download
    def start_download(self, r: ModelRow) -> None:
        source = r.source
        if source is None or self.downloading is not None:
            return
        self.downloading = r
        self._clear_error()
        self.status.setText("")
        self.progress.setValue(0)
        self.progress_label.setText(tr("models.connecting", name=r.name))
        self.progress_box.show()
        dest = model_dir(self.settings)
        opts = dict(self.download_options)

        def job(ctx: TaskContext) -> Any:
            return download(source, dest, endpoint=self.endpoint, cancel=ctx.cancel, **opts)

        self.runner.submit(f"download.{r.role}", job, on_progress=self._on_progress, on_result=self._on_result,
                           on_error=self._on_error, on_cancelled=self._on_cancelled,
                           on_finished=self._on_finished)
        self.refresh()

    def _on_progress(self, p: Progress) -> None:
        if p.total > 0:
            self.progress.setValue(min(PROGRESS_SCALE, p.current * PROGRESS_SCALE // p.total))
        eta = format_eta(p.eta_s)
        key = "models.progress_eta" if eta else "models.progress"
        self.progress_label.setText(tr(key, name=p.message, done=human_bytes(p.current),
                                       total=human_bytes(p.total) if p.total else "?", eta=eta))

    def _on_result(self, out: object) -> None:
        if isinstance(out, DownloadDone):
            self.progress.setValue(PROGRESS_SCALE)
            key = "models.already_there" if out.reused else "models.downloaded"
            self.status.setText(tr(key, path=str(out.path)))
        elif isinstance(out, DownloadFailed):
            kept = tr("models.kept", size=human_bytes(out.kept_bytes)) if out.kept_bytes else ""
            self._show_error(tr(f"models.err.{out.reason}", detail=out.detail, kept=kept))

    def _on_error(self, err: UserError) -> None:
        self._show_error(err.text())

    def _on_cancelled(self) -> None:
        self.status.setText(tr("models.cancelled"))

    def _on_finished(self) -> None:
        self.downloading = None
        self.progress_box.hide()
        self.refresh()

    def cancel_download(self) -> None:
        # A read blocked on a silent server ends at its timeout (app/fetch.py): say it is under way.
        if self.runner.cancel("download."):
            self.progress_label.setText(tr("models.cancelling"))

    # ------------------------------------------------------------------ errors and lifetime
    def _show_error(self, text: str) -> None:
        self.last_error = text
        self.error.setText(text)
        self.error.show()

    def _clear_error(self) -> None:
        self.last_error = ""
        self.error.hide()

    def done(self, result: int) -> None:
        # Closing the page stops a download (its partial file stays for the next Download).
        self.runner.cancel_all()
        self.runner.wait(15000)
        super().done(result)
