from __future__ import annotations

from pathlib import Path

import pytest

from rag_desktop.app.config import load_settings, save_settings, settings_from_dict
from rag_desktop.core.settings import Settings, SettingsError


def test_defaults_are_the_papers() -> None:
    s = Settings().validate()
    assert (s.retrieval.k, s.retrieval.query_keywords, s.retrieval.doc_keywords) == (20, 10, 15)
    assert s.retrieval.tau_paper == 0.6 and s.retrieval.hybrid_weight == 0.5
    assert (s.cfrag.n_counterfactuals, s.cfrag.n_clusters, s.cfrag.n_hypotheses, s.cfrag.lam) == (3, 4, 3, 0.4)
    assert (s.ingest.chunk_size, s.ingest.chunk_overlap) == (4096, 512)


def test_round_trip(tmp_path: Path) -> None:
    s = Settings().replace("retrieval", k=7, tau=0.55).replace("ui", language="zh")
    p = save_settings(s, tmp_path / "s.toml")
    assert load_settings(p) == s


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "nope.toml") == Settings()


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"retrieval": {"k": 0}}, "retrieval.k"),
        ({"retrieval": {"k": "ten"}}, "retrieval.k"),
        ({"retrieval": {"tau": "sometimes"}}, "retrieval.tau"),
        ({"retrieval": {"hybrid_weight": 1.5}}, "retrieval.hybrid_weight"),
        ({"cfrag": {"lam": -0.1}}, "cfrag.lam"),
        ({"retrieval": {"nonsense": 1}}, "retrieval.nonsense"),
        ({"ingest": {"chunk_overlap": 5000}}, "ingest.chunk_overlap"),
    ],
)
def test_invalid_values_name_the_key(data: dict[str, dict[str, object]], key: str) -> None:
    with pytest.raises(SettingsError, match=key.replace(".", r"\.")):
        settings_from_dict(data)


def test_broken_toml_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "s.toml"
    p.write_text("[retrieval\nk=", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"s\.toml"):
        load_settings(p)


def test_a_settings_file_from_before_the_model_judged_gate_went_still_loads(tmp_path: Path) -> None:
    """Every save wrote every key, so settings files carry the switch of the removed model-judged
    calibration; it is read without complaint and not written back."""
    p = tmp_path / "s.toml"
    p.write_text('[retrieval]\nk = 9\nauto_calibrate = true\ndefault_method = "gated"\n', encoding="utf-8")
    s = load_settings(p)
    assert s.retrieval.k == 9 and s == Settings().replace("retrieval", k=9)
    save_settings(s, p)
    assert "auto_calibrate" not in p.read_text(encoding="utf-8")
