"""Settings dialog: models, retrieval, CF-RAG, generation, interface language.

The widgets are generated from the settings schema (``core.settings``): a spin box takes its
range, step and decimals from the field's Spec, a combo box its choices from the field's
Literal type, labels and descriptions their i18n keys from the Spec. This module only decides
which settings appear on which tab and in what order (``LAYOUT``), so the dialog cannot
offer a value the validator refuses or refuse one it accepts. Every value is read back the
same way and validated by ``Settings.validate`` — an invalid value is reported inline,
naming the setting, and the dialog stays open. Saving is the window's job
(``app.config.save_settings``), so the dialog is testable without touching disk.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from rag_desktop.core.settings import SettingInfo, Settings, SettingsError, setting_info
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.worker import TaskContext, TaskRunner, UserError

# Which settings each tab shows, in order; everything else about a row comes from the schema.
LAYOUT: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("settings.tab.models", "models", (
        "generator", "generator_backend", "openai_base_url", "openai_model", "embedder", "reranker",
        "model_dir", "n_ctx", "threads")),
    ("settings.tab.retrieval", "retrieval", (
        "level", "k", "theta", "tau", "hybrid_weight", "default_method", "keyword_variant", "empty_b_rule",
        "score_variant", "query_keywords", "doc_keywords")),
    ("settings.tab.cfrag", "cfrag", (
        "n_counterfactuals", "n_candidates", "n_clusters", "n_hypotheses", "lam", "theta_sim", "theta_dedup",
        "agreement_threshold", "quality_min", "retrieve_k", "evidence_per_hypothesis", "read_passages",
        "use_counterfactuals", "use_division")),
    ("settings.tab.generation", "generation", (
        "temperature", "max_tokens", "thinking", "translate", "passages", "max_passages", "abstain",
        "check_relevance", "ask_other_language",
        "judge_passages", "read_ahead", "rewrite_timeout_s")),
    ("settings.tab.interface", "ui", ("language",)),
)

TABS: tuple[tuple[str, tuple[SettingInfo, ...]], ...] = tuple(
    (tab, tuple(setting_info(section, key) for key in keys)) for tab, section, keys in LAYOUT
)

LANGUAGE_NAMES = {"en": "English", "zh": "中文"}

# A bound the schema leaves open still needs a number for the spin box: the largest a QSpinBox
# holds, and for decimals one no setting reaches (a billion seconds, megabytes, …).
INT_LIMIT = 2**31 - 1
FLOAT_LIMIT = 1e9


def spin_range(info: SettingInfo) -> tuple[float, float]:
    """The lowest and highest value a spin box for ``info`` may show: the Spec's bounds, with an
    open bound moved inwards by one unit of the last shown digit ("> 0" with 2 decimals: 0.01)."""
    s = info.spec
    unit = 1.0 if info.kind == "int" else 10.0 ** -s.decimals
    limit = INT_LIMIT if info.kind == "int" else FLOAT_LIMIT
    lo = -limit if s.min is None else s.min + (unit if s.min_open else 0.0)
    hi = limit if s.max is None else s.max - (unit if s.max_open else 0.0)
    return lo, hi


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settings_dialog")
        self.setWindowTitle(tr("settings.title"))
        self.base = settings
        self.editors: dict[tuple[str, str], Any] = {}
        self.labels: dict[tuple[str, str], QLabel] = {}
        self.rows: dict[tuple[str, str], QWidget] = {}
        self.forms: dict[tuple[str, str], QFormLayout] = {}
        self.tabs = QTabWidget()
        for tab_key, fields in TABS:
            page = QWidget()
            form = QFormLayout(page)
            for f in fields:
                editor, holder = self._editor(f, getattr(getattr(settings, f.section), f.key))
                label = QLabel(tr(f.label_key))
                label.setToolTip(tr(f.help_key))
                holder.setToolTip(tr(f.help_key))
                # What the setting (and its symbol: τ, |K_q|, …) means, under it, not only on hover.
                cell = QWidget()
                cell_lay = QVBoxLayout(cell)
                cell_lay.setContentsMargins(0, 0, 0, 4)
                cell_lay.setSpacing(1)
                cell_lay.addWidget(holder)
                desc = QLabel(tr(f.help_key))
                desc.setTextFormat(Qt.TextFormat.PlainText)
                desc.setWordWrap(True)
                desc.setStyleSheet("color: #666; font-size: small;")
                cell_lay.addWidget(desc)
                form.addRow(label, cell)
                self.editors[(f.section, f.key)] = editor
                self.labels[(f.section, f.key)] = label
                self.rows[(f.section, f.key)] = cell
                self.forms[(f.section, f.key)] = form
            if tab_key == "settings.tab.models":
                self.doctor_btn = QPushButton(tr("settings.doctor"))
                self.doctor_btn.clicked.connect(self.run_doctor)
                self.doctor_out = QLabel()
                self.doctor_out.setTextFormat(Qt.TextFormat.PlainText)
                self.doctor_out.setWordWrap(True)
                form.addRow(self.doctor_btn, self.doctor_out)
            scroll = QScrollArea()  # a tab longer than the dialog scrolls instead of squeezing its rows
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setWidget(page)
            self.tabs.addTab(scroll, tr(tab_key))
        self.error = QLabel()
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #B3261E;")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel
                                        | QDialogButtonBox.StandardButton.RestoreDefaults)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        restore = self.buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.clicked.connect(self.restore_defaults)
        restore.setText(tr("settings.defaults"))
        lay = QVBoxLayout(self)
        note = QLabel(tr("settings.note"))
        note.setWordWrap(True)
        lay.addWidget(note)
        lay.addWidget(self.tabs, 1)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)
        self._runner = TaskRunner(self, serial=True)
        self._result: Settings | None = None
        backend = self.editors[("models", "generator_backend")]
        backend.currentIndexChanged.connect(lambda _i: self._show_backend_rows())
        self._show_backend_rows()
        self.resize(680, 620)

    def _show_backend_rows(self) -> None:
        """The server's address and model name only matter when the generator runs on a server."""
        server = self.editors[("models", "generator_backend")].currentData() == "openai"
        for key in ("openai_base_url", "openai_model"):
            self.forms[("models", key)].setRowVisible(self.rows[("models", key)], server)

    def row_visible(self, section: str, key: str) -> bool:
        return not self.rows[(section, key)].isHidden()

    # -------------------------------------------------------------- editors
    def _editor(self, f: SettingInfo, value: Any) -> tuple[Any, QWidget]:
        if f.kind == "int":
            w = QSpinBox()
            lo, hi = spin_range(f)
            w.setRange(int(lo), int(hi))
            w.setSingleStep(int(f.step))
            if f.spec.zero_label_key and lo == 0:
                w.setSpecialValueText(tr(f.spec.zero_label_key))  # threads: 0 reads "automatic", not "0"
            w.setValue(int(value))
            return w, w
        if f.kind == "float":
            d = self._double_spin(f)
            d.setValue(float(value))
            return d, d
        if f.kind == "bool":
            c = QCheckBox()
            c.setChecked(bool(value))
            return c, c
        if f.kind == "choice":
            box = QComboBox()
            for v in f.choices:
                box.addItem(LANGUAGE_NAMES.get(v, v) if f.key == "language" else tr(f"choice.{v}"), v)
            box.setCurrentIndex(max(0, box.findData(value)))
            return box, box
        if f.kind == "float_or_choice":
            # A number, or the one named choice (retrieval.tau: a cosine, or "auto" = calibrate).
            holder = QWidget()
            row = QHBoxLayout(holder)
            row.setContentsMargins(0, 0, 0, 0)
            (choice,) = f.choices
            auto = QCheckBox(tr(f"choice.{choice}"))
            num = self._double_spin(f)
            is_auto = value == choice
            auto.setChecked(is_auto)
            # While "auto" is ticked the number is the paper's τ, the one to start from when unticked.
            num.setValue(self.base.retrieval.tau_paper if is_auto else float(value))
            num.setEnabled(not is_auto)
            auto.toggled.connect(lambda on: num.setEnabled(not on))
            row.addWidget(auto)
            row.addWidget(num, 1)
            return (auto, num), holder
        line = QLineEdit(str(value))
        if f.kind in ("file", "dir"):
            holder = QWidget()
            row = QHBoxLayout(holder)
            row.setContentsMargins(0, 0, 0, 0)
            browse = QPushButton(tr("settings.browse"))
            browse.clicked.connect(lambda: self._browse(line, f.kind))
            row.addWidget(line, 1)
            row.addWidget(browse)
            if f.key in ("generator", "embedder"):
                embedded = QPushButton(tr("settings.embedded"))
                embedded.setToolTip(tr("settings.embedded_tip"))
                embedded.clicked.connect(lambda: line.setText("embedded"))
                row.addWidget(embedded)
                if f.key == "generator":  # the 0.5B model stays as the fast choice
                    fast = QPushButton(tr("settings.embedded_fast"))
                    fast.setToolTip(tr("settings.embedded_fast_tip"))
                    fast.clicked.connect(lambda: line.setText("embedded-fast"))
                    row.addWidget(fast)
            return line, holder
        return line, line

    @staticmethod
    def _double_spin(f: SettingInfo) -> QDoubleSpinBox:
        d = QDoubleSpinBox()
        d.setDecimals(f.spec.decimals)  # before the range: Qt rounds the bounds to the decimals
        d.setRange(*spin_range(f))
        d.setSingleStep(f.step)
        return d

    def _browse(self, line: QLineEdit, kind: str) -> None:
        if kind == "file":
            path, _ = QFileDialog.getOpenFileName(self, tr("settings.choose_file"), "", "GGUF (*.gguf);;* (*)")
        else:
            path = QFileDialog.getExistingDirectory(self, tr("settings.choose_folder"))
        if path:
            line.setText(path)

    def _value(self, f: SettingInfo) -> Any:
        e = self.editors[(f.section, f.key)]
        if f.kind == "float_or_choice":
            auto, num = e
            return f.choices[0] if auto.isChecked() else float(num.value())
        if f.kind == "int":
            return int(e.value())
        if f.kind == "float":
            return float(e.value())
        if f.kind == "bool":
            return bool(e.isChecked())
        if f.kind == "choice":
            return e.currentData()
        return e.text().strip()

    def _set_value(self, f: SettingInfo, value: Any) -> None:
        e = self.editors[(f.section, f.key)]
        if f.kind == "float_or_choice":
            auto, num = e
            auto.setChecked(value in f.choices)
            if value not in f.choices:
                num.setValue(float(value))
        elif f.kind in ("int", "float"):
            e.setValue(value)
        elif f.kind == "bool":
            e.setChecked(bool(value))
        elif f.kind == "choice":
            e.setCurrentIndex(max(0, e.findData(value)))
        else:
            e.setText(str(value))

    def set_field(self, section: str, key: str, value: Any) -> None:
        """Set one editor programmatically (tests, and "restore defaults")."""
        f = next(f for _t, fs in TABS for f in fs if (f.section, f.key) == (section, key))
        self._set_value(f, value)

    # -------------------------------------------------------------- result
    def build_settings(self) -> Settings:
        """The settings the form describes; raises SettingsError naming the bad key."""
        s = self.base
        for _tab, fields in TABS:
            for f in fields:
                section = getattr(s, f.section)
                s = dataclasses.replace(s, **{f.section: dataclasses.replace(section, **{f.key: self._value(f)})})
        if s.models.generator == "":
            raise SettingsError(tr("settings.need_generator"))
        return s.validate()

    def result_settings(self) -> Settings:
        return self._result if self._result is not None else self.build_settings()

    def accept(self) -> None:
        try:
            self._result = self.build_settings()
        except SettingsError as exc:
            self.error.setText(tr("settings.invalid", detail=str(exc)))
            return
        super().accept()

    def restore_defaults(self) -> None:
        d = Settings()
        for _tab, fields in TABS:
            for f in fields:
                if f.section == "ui":
                    continue  # the language is a preference, not a method parameter
                self._set_value(f, getattr(getattr(d, f.section), f.key))

    # -------------------------------------------------------------- doctor
    def run_doctor(self) -> None:
        try:
            s = self.build_settings()
        except SettingsError as exc:
            self.error.setText(tr("settings.invalid", detail=str(exc)))
            return
        self.doctor_btn.setEnabled(False)
        self.doctor_out.setText(tr("settings.doctor_running"))

        def job(ctx: TaskContext) -> Any:
            from rag_desktop.app.doctor import run_doctor

            return run_doctor(s)

        def show(report: dict[str, Any]) -> None:
            lines = []
            for c in report.get("checks", []):
                mark = "✔" if c.get("ready") else "✘"
                hint = f" — {c['hint']}" if c.get("hint") and not c.get("ready") else ""
                lines.append(f"{mark} {c.get('name')}: {c.get('detail')}{hint}")
            self.doctor_out.setText("\n".join(lines))

        def failed(err: UserError) -> None:
            self.doctor_out.setText(err.text())

        self._runner.submit("doctor", job, on_result=show, on_error=failed,
                            on_finished=lambda: self.doctor_btn.setEnabled(True))

    def done(self, r: int) -> None:
        self._runner.cancel_all()
        super().done(r)
