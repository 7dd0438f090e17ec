"""The Settings dialog is generated from the settings schema ("one settings schema").

Before, the dialog kept its own ranges, a fourth copy of the checks that disagreed with the
validator (θ_dedup stopped at 0 while any cosine in [-1, 1] is valid; k stopped at 1000).
Now every spin box, combo box and label comes from the field's Spec, and what a widget can
reach is exactly what ``Settings.validate`` accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QSpinBox

from rag_desktop.core.settings import Settings, SettingsError, setting_info
from rag_desktop.ui import i18n
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.settings_dialog import FLOAT_LIMIT, INT_LIMIT, TABS, SettingsDialog

pytestmark = pytest.mark.gui

# Fields whose valid values depend on another one (n_candidates >= n_counterfactuals): probed with
# that one where it does not get in the way.
PARTNERS: dict[tuple[str, str], Callable[[float], dict[str, Any]]] = {
    ("cfrag", "n_candidates"): lambda v: {"n_counterfactuals": 1},
    ("cfrag", "n_counterfactuals"): lambda v: {"n_candidates": max(int(v), 1)},
}


def spins(dlg: Any) -> list[tuple[str, str, QSpinBox | QDoubleSpinBox]]:
    out = []
    for (section, key), e in dlg.editors.items():
        w = e[1] if isinstance(e, tuple) else e  # τ: (auto checkbox, number)
        if isinstance(w, QSpinBox | QDoubleSpinBox):
            out.append((section, key, w))
    return out


def accepted(section: str, key: str, value: float) -> bool:
    try:
        partner = PARTNERS.get((section, key), lambda v: {})(value)
        Settings().replace(section, **{**partner, key: value})
    except SettingsError:
        return False
    return True


def range_disagreements(dlg: Any) -> list[str]:
    """Where a spin box's reach differs from the validator: an end it shows that is refused,
    or a value one displayed step beyond an end that is accepted."""
    bad = []
    for section, key, w in spins(dlg):
        is_int = isinstance(w, QSpinBox)
        unit = 1 if is_int else 10.0 ** -w.decimals()
        lo, hi = w.minimum(), w.maximum()
        for end, beyond, limit in ((lo, lo - unit, -INT_LIMIT if is_int else -FLOAT_LIMIT),
                                   (hi, hi + unit, INT_LIMIT if is_int else FLOAT_LIMIT)):
            beyond = round(beyond, 6) if not is_int else beyond
            if not accepted(section, key, end):
                bad.append(f"{section}.{key}: the widget offers {end}, the validator refuses it")
            if end != limit and accepted(section, key, beyond):
                bad.append(f"{section}.{key}: the widget stops at {end}, the validator accepts {beyond}")
    return bad


def test_every_spin_box_reaches_exactly_what_the_validator_accepts(qtbot: Any) -> None:
    dlg = SettingsDialog(Settings())
    qtbot.addWidget(dlg)
    assert len(spins(dlg)) >= 20
    assert range_disagreements(dlg) == []
    lo = dlg.editors[("cfrag", "theta_dedup")].minimum()
    assert lo == -1.0  # was 0.0: a valid θ_dedup the dialog could not show


def test_every_widget_is_generated_from_its_spec(qtbot: Any) -> None:
    dlg = SettingsDialog(Settings())
    qtbot.addWidget(dlg)
    shown = [f for _tab, fields in TABS for f in fields]
    assert {(f.section, f.key) for f in shown} == set(dlg.editors)
    for f in shown:
        info = setting_info(f.section, f.key)
        s = info.spec
        e = dlg.editors[(f.section, f.key)]
        assert dlg.labels[(f.section, f.key)].text() == tr(info.label_key), info.name
        assert dlg.labels[(f.section, f.key)].toolTip() == tr(info.help_key), info.name
        if info.kind in ("int", "float", "float_or_choice"):
            w = e[1] if isinstance(e, tuple) else e
            is_int = info.kind == "int"
            unit = 1 if is_int else 10.0 ** -s.decimals
            limit = INT_LIMIT if is_int else FLOAT_LIMIT
            want_lo = -limit if s.min is None else s.min + (unit if s.min_open else 0)
            want_hi = limit if s.max is None else s.max - (unit if s.max_open else 0)
            assert (w.minimum(), w.maximum(), w.singleStep()) == pytest.approx((want_lo, want_hi, info.step)), info.name
            if not is_int:
                assert w.decimals() == s.decimals, info.name
        if info.kind == "choice":
            assert isinstance(e, QComboBox)
            assert [e.itemData(i) for i in range(e.count())] == list(info.choices), info.name
        if info.kind == "float_or_choice":
            auto, _num = e
            assert isinstance(auto, QCheckBox) and auto.text() == tr(f"choice.{info.choices[0]}")
        if info.kind == "bool":
            assert isinstance(e, QCheckBox)
    assert dlg.editors[("models", "threads")].specialValueText() == tr("settings.threads_auto")


def test_the_descriptions_explain_zero_and_the_symbols() -> None:
    for lang in ("en", "zh"):
        with i18n.using(lang):
            assert "0" in tr("set.models.threads.tip")  # what 0 threads means
            assert "τ" in tr("set.retrieval.tau.tip") and "|K_q|" in tr("set.retrieval.query_keywords.tip")
            assert "θ_dedup" in tr("set.cfrag.theta_dedup.tip")


def test_restore_defaults_and_read_back_give_the_schema_defaults(qtbot: Any) -> None:
    s = Settings().replace("cfrag", theta_dedup=-0.5).replace("retrieval", tau=0.3, level="chunk")
    dlg = SettingsDialog(s)
    qtbot.addWidget(dlg)
    assert dlg.build_settings() == s  # a negative θ_dedup survives the dialog now
    dlg.restore_defaults()
    assert dlg.build_settings() == Settings()
