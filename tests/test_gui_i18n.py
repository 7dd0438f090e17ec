"""The translation table: complete in both languages, and every key the UI uses exists."""

from __future__ import annotations

import dataclasses
import re
import string
import typing
from pathlib import Path

import pytest

import rag_desktop.ui as ui_pkg
from rag_desktop.core.cfrag import types as cfrag_types
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.i18n import TABLE, tr

UI_DIR = Path(ui_pkg.__file__).parent
NAMESPACES = {k.split(".")[0] for k in TABLE}
# Keys allowed to read the same in both languages (symbols, names, empty cells).
SAME_OK = {"col.rank", "col.change", "col.cfrag", "score.s_sim", "score.s_c", "answer.idle", "trace.h.kept",
           "trace.h.id", "trace.margin_tip", "settings.tab.cfrag", "query.run_cfrag"}
_HAN = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # Han or full-width punctuation


def placeholders(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_both_languages_have_the_same_placeholders_and_real_translations() -> None:
    for key, (en, zh) in TABLE.items():
        assert placeholders(en) == placeholders(zh), key
        if key in SAME_OK or not en:
            continue
        assert en != zh, f"{key}: the Chinese entry is a copy of the English one"
        assert _HAN.search(zh) or key.startswith(("choice.", "menu.language")), f"{key}: no Chinese text"


def literal_keys() -> set[str]:
    """Every string literal in ui/ that looks like a key of one of the table's namespaces."""
    keys: set[str] = set()
    for path in UI_DIR.glob("*.py"):
        for m in re.finditer(r"[\"']([a-z_]+(?:\.[a-z_0-9]+)+)[\"']", path.read_text(encoding="utf-8")):
            k = m.group(1)
            if k.split(".")[0] in NAMESPACES and not k.endswith("."):
                keys.add(k)
    return keys


def test_every_literal_key_used_by_the_ui_exists() -> None:
    keys = literal_keys()
    assert len(keys) > 150  # the scan finds the keys (it would pass vacuously otherwise)
    missing = sorted(k for k in keys if k not in TABLE and k + "_tip" not in TABLE)
    # Module names such as "rag_desktop.ui" are not in a UI namespace, so anything left is a real gap.
    assert missing == []


def test_keys_built_at_run_time_exist() -> None:
    from rag_desktop.ui.columns import HEADER_KEYS
    from rag_desktop.ui.results_panel import TITLE_KEYS
    from rag_desktop.ui.settings_dialog import TABS

    dynamic = set()
    dynamic |= {f"trace.status.{s}" for s in typing.get_args(cfrag_types.EvidenceStatus)}
    dynamic |= {f"trace.decision.{d}" for d in typing.get_args(cfrag_types.DecisionKind)}
    dynamic |= {k for h in HEADER_KEYS for k in (h, h + "_tip")}
    dynamic |= set(TITLE_KEYS.values()) | {f"answer.{m}" for m in TITLE_KEYS}
    dynamic |= {f"lib.status.{s}" for s in ("indexed", "changed", "missing")}
    dynamic |= {f"level.{lvl}" for lvl in ("doc", "chunk")}
    for tab, fields in TABS:
        dynamic.add(tab)
        for f in fields:
            dynamic |= {f"set.{f.section}.{f.key}", f"set.{f.section}.{f.key}.tip", f.label_key, f.help_key}
            if f.spec.zero_label_key:  # what a spin box shows instead of 0 (threads: "automatic")
                dynamic.add(f.spec.zero_label_key)
            if f.kind in ("choice", "float_or_choice") and f.key != "language":
                dynamic |= {f"choice.{c}" for c in f.choices}
    from rag_desktop.app.calibration import METHODS
    from rag_desktop.core.gate import DECISIONS

    dynamic |= {f"cal.decision.{d}" for d in DECISIONS} | {f"cal.d.{d}" for d in DECISIONS}
    dynamic |= {f"cal.m.{m}" for m in METHODS}
    dynamic |= {f"cal.level.{lvl}" for lvl in ("high", "medium", "low")}
    dynamic |= {"stage.probes", "stage.rank_probes"}  # the calibration's progress stages
    from rag_desktop.core.cfrag.pipeline import _STEPS

    dynamic |= {f"stage.cfrag.{s}" for s in _STEPS}
    from rag_desktop.core.cfrag.plain import PREFIX, TEMPLATES

    dynamic |= {f"{PREFIX}.{name}" for name in TEMPLATES}  # CF-RAG's trace in plain words
    assert sorted(k for k in dynamic if k not in TABLE) == []


def test_the_settings_dialog_offers_every_method_parameter() -> None:
    from rag_desktop.ui.settings_dialog import TABS

    shown = {(f.section, f.key) for _t, fs in TABS for f in fs}
    # The list: models, retrieval k/θ/τ/hybrid/level, CF-RAG N/K/M/λ/thresholds, generation, language.
    wanted = {("retrieval", "k"), ("retrieval", "theta"), ("retrieval", "tau"), ("retrieval", "hybrid_weight"),
              ("retrieval", "level"), ("cfrag", "n_counterfactuals"), ("cfrag", "n_clusters"),
              ("cfrag", "n_hypotheses"), ("cfrag", "lam"), ("cfrag", "theta_sim"), ("cfrag", "agreement_threshold"),
              ("generation", "temperature"), ("generation", "max_tokens"), ("generation", "thinking"),
              ("ui", "language"), ("models", "generator"), ("models", "embedder"), ("models", "reranker")}
    assert wanted <= shown
    for section, key in shown:  # and each is a real setting
        assert key in {f.name for f in dataclasses.fields(getattr(Settings(), section))}


def test_tr_formats_switches_and_survives_bad_input() -> None:
    i18n.set_language("en")
    assert tr("lib.pages", n=3) == "3 pages"
    with i18n.using("zh"):
        assert tr("lib.pages", n=3) == "3 页"
    assert tr("lib.pages", n=3) == "3 pages"
    assert tr("no.such.key") == "no.such.key"
    assert tr("lib.pages") == "{n} pages"  # a missing value leaves the template, never crashes
    with pytest.raises(ValueError, match=r"ui\.language"):
        i18n.set_language("fr")


def test_qt_own_buttons_follow_the_ui_language(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The Settings dialog's OK / Cancel said "OK" and "Cancel" in the Chinese UI."""
    from PySide6.QtWidgets import QDialogButtonBox

    from rag_desktop.ui.qt_translations import apply_qt_language

    try:
        assert apply_qt_language("zh")
        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        qtbot.addWidget(box)
        ok = box.button(QDialogButtonBox.StandardButton.Ok).text()
        cancel = box.button(QDialogButtonBox.StandardButton.Cancel).text()
        assert "确定" in ok
        assert "取消" in cancel
    finally:
        assert not apply_qt_language("en")
    box2 = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
    qtbot.addWidget(box2)
    assert "Cancel" in box2.button(QDialogButtonBox.StandardButton.Cancel).text()
