"""The question bar: the question box with its history, the per-question choices (level, what
the causal column shows), the answer and CF-RAG switches, Ask and Stop.

It owns its widgets and says what the person asked for through signals; the main window runs the
question (docs/architecture.md, "The question's path").
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.app.crosslang import CrossLanguage
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_tooltip
from rag_desktop.ui.present import crosslang_text

OVERRIDES = ("auto", "baseline", "causal", "hybrid")  # the override box's items (auto: the setting / the gate)
# A pause in typing this long says the words so far are worth reading ahead (app.read_ahead): longer than the
# gap between a typist's keys (~0.1–0.3 s), short enough to fall between words.
PAUSE_MS = 400


class QueryBar(QWidget):
    ask_requested = Signal()  # Ask, or Return in the question box (once per key press)
    stop_requested = Signal()
    paused = Signal(str)  # the question box's text, after PAUSE_MS with no edit by the person

    def __init__(self, recent: Sequence[str], level: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.query = QComboBox()
        self.query.setObjectName("query")
        self.query.setEditable(True)
        self.query.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        # Its width comes from the window, not from the longest question in the history (which
        # pushed the window past a 1280 px screen once the bar also held the level and rerank boxes).
        self.query.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.query.setMinimumContentsLength(24)
        self.query.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.query.addItems(list(recent))
        self.query.setCurrentIndex(-1)
        line = self.query.lineEdit()
        assert line is not None
        line.returnPressed.connect(self._ask_from_box)
        self._return_handled = False
        self._pause = QTimer(self)
        self._pause.setSingleShot(True)
        self._pause.setInterval(PAUSE_MS)
        self._pause.timeout.connect(lambda: self.paused.emit(self.text()))
        line.textEdited.connect(lambda _text: self._pause.start())  # a person's edits, not set_history's
        self.query.activated.connect(lambda _index: self._pause.start())  # a recent question picked
        self.ask_btn = QPushButton()
        self.ask_btn.clicked.connect(lambda: self.ask_requested.emit())
        self.level_box = QComboBox()
        # Follows its items when the language changes ("whole documents" must not stay "whole dc…").
        self.level_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.level_box.addItem("", "doc")
        self.level_box.addItem("", "chunk")
        self.set_level(level)
        # Per question: what the causal column shows (None: the setting / the calibration gate).
        self.override_box = QComboBox()
        self.override_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        for box in (self.level_box, self.override_box):  # their whole text; the question field gives way
            box.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        for key in OVERRIDES:
            self.override_box.addItem("", None if key == "auto" else key)
        self.auto_answer = QCheckBox()
        self.run_cf = QCheckBox()
        self.stop_btn = QPushButton()
        self.stop_btn.clicked.connect(lambda: self.stop_requested.emit())
        self.stop_btn.setEnabled(False)
        self.query_label = QLabel()
        row = QHBoxLayout()
        for w, stretch in ((self.query_label, 0), (self.query, 1), (self.level_box, 0), (self.override_box, 0),
                           (self.auto_answer, 0), (self.run_cf, 0), (self.ask_btn, 0), (self.stop_btn, 0)):
            row.addWidget(w, stretch)
        # "also searched as: …": the question's translation the columns fused,
        # or why the question was ranked as typed only.
        self.crosslang_line = QLabel()
        self.crosslang_line.setObjectName("crosslang_line")
        self.crosslang_line.setWordWrap(True)
        self.crosslang_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.crosslang_line.hide()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.crosslang_line)

    def text(self) -> str:
        return self.query.currentText()

    def level(self) -> str | None:
        level: str | None = self.level_box.currentData()
        return level

    def ranking(self) -> str | None:
        ranking: str | None = self.override_box.currentData()
        return ranking

    def set_level(self, level: str) -> None:
        self.level_box.setCurrentIndex(0 if level == "doc" else 1)

    def set_history(self, recent: Sequence[str]) -> None:
        """The question box's history, newest first; the newest shown (it was just asked)."""
        self.query.blockSignals(True)
        self.query.clear()
        self.query.addItems(list(recent))
        self.query.setCurrentIndex(0)
        self.query.blockSignals(False)

    def show_crosslang(self, cross: CrossLanguage | None) -> None:
        text = crosslang_text(cross)
        self.crosslang_line.setText(text)
        self.crosslang_line.setVisible(bool(text))
        # A fallback's reason ("the reply answered the question instead of translating it") is the
        # backend's English detail: on hover, so the line itself stays in the UI's language.
        note = cross.note if cross is not None and cross.fallback else ""
        self.crosslang_line.setToolTip(plain_tooltip(note) if note else "")

    def focus(self) -> None:
        self.query.setFocus(Qt.FocusReason.ShortcutFocusReason)
        line = self.query.lineEdit()
        if line is not None:
            line.selectAll()

    def _ask_from_box(self) -> None:
        """Return in the question box. An editable QComboBox's line edit emits returnPressed
        twice for one key press; the second, for the same text at once, is the same question
        (before, it silently restarted the search; with follow-ups it would read the
        question as a follow-up of itself)."""
        # Both emissions come from one key event: ignore any until the event loop turns again
        # (a time window instead also dropped a quick, deliberate re-ask of the same words).
        if self._return_handled:
            return
        self._return_handled = True
        self._pause.stop()  # asked: nothing more to read ahead
        QTimer.singleShot(0, self._return_done)
        self.ask_requested.emit()

    def _return_done(self) -> None:
        self._return_handled = False

    def retranslate(self) -> None:
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
        for i, key in enumerate(OVERRIDES):
            self.override_box.setItemText(i, tr(f"override.{key}"))
        self.override_box.setToolTip(tr("override.tip"))
        self.auto_answer.setText(tr("query.auto_answer"))
        self.auto_answer.setToolTip(tr("query.auto_answer_tip"))
        self.run_cf.setText(tr("query.run_cfrag"))
        self.run_cf.setToolTip(tr("query.run_cfrag_tip"))
