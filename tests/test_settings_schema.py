"""The settings schema ("one settings schema"): each setting declared once, one validator.

The defaults and the settings.toml format are pinned to what they were before the schema
(``DEFAULTS`` was printed from the old ``settings_to_dict(Settings())``), so declaring the
fields through ``field_spec`` cannot have changed a default or a key.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from rag_desktop.app.config import load_settings, save_settings, settings_from_dict, settings_to_dict
from rag_desktop.core.settings import (
    CFRagSettings,
    IngestSettings,
    Settings,
    SettingsError,
    check_setting,
    setting_info,
    settings_schema,
    validate_section,
)

DEFAULTS: dict[str, dict[str, Any]] = {'models': {'generator': 'embedded',
            'embedder': 'embedded',
            'reranker': '',
            'model_dir': '',
            'generator_backend': 'llama_cpp',
            'openai_base_url': 'http://127.0.0.1:8080/v1',
            'openai_model': 'local',
            'openai_timeout_s': 120.0,
            'embedder_backend': 'local',
            'embed_base_url': 'http://127.0.0.1:8081/v1',
            'embed_model': 'local',
            'embed_timeout_s': 60.0,
            'embed_retries': 3,
            'embed_query_prefix': '',
            'embed_passage_prefix': '',
            'reranker_url': '',
            'reranker_timeout_s': 60.0,
            'n_ctx': 8192,
            'n_gpu_layers': 0,
            'threads': 0},
 'ingest': {'chunk_size': 4096,
            'chunk_overlap': 512,
            'keywords_per_chunk': 15,
            'embed_batch_size': 16,
            'flat_index_max': 200000,
            'ocr': True,
            'ocr_dpi': 150,
            'watch': True,
            'watch_debounce_s': 2.0,
            'watch_poll_s': 0.0,
            'max_file_mb': 100.0},
 'retrieval': {'level': 'doc',
               'k': 20,
               'theta': 0.0,
               'keyword_k': 10,
               'query_keywords': 10,
               'doc_keywords': 15,
               'tau': 'auto',
               'tau_paper': 0.6,
               'tau_percentile': 97.0,
               'hybrid_weight': 0.5,
               'keyword_variant': 'improved',
               'empty_b_rule': 'demote',
               'score_variant': 'paper',
               'default_method': 'gated',
               'cross_language': False,
               'cross_language_timeout_s': 30.0},
 'cfrag': {'n_counterfactuals': 3,
           'n_candidates': 6,
           'n_clusters': 4,
           'n_hypotheses': 3,
           'lam': 0.4,
           'theta_sim': 0.5,
           'theta_dedup': 0.95,
           'rescale_cosines': True,
           'sigma': 0.5,
           'sigma_rule': 'median',
           'coh_w_embed': 0.4,
           'coh_w_query': 0.3,
           'coh_w_presence': 0.3,
           'answer_same_f1': 0.5,
           'temperature': 1.0,
           'alpha': 0.4,
           'beta': 0.4,
           'gamma': 0.2,
           'agreement_threshold': 0.6,
           'retrieve_k': 8,
           'evidence_per_hypothesis': 4,
           'read_passages': 1,
           'quality_min': 0.2,
           'seed': 0,
           'use_counterfactuals': True,
           'use_division': False,
           'synthesis_prompt': 'reread',
           'keep_standard': True},
 'generation': {'temperature': 0.2,
                'max_tokens': 512,
                'answer_reserve': 512,
                'thinking': False,
                'seed': 42,
                'translate': False,
                'passages': True,
                'max_passages': 8,
                'match_citations': True,
                'check_citations': True,
                'abstain': True,
                'check_relevance': True,
                'ask_other_language': True,
                'judge_passages': 'warn',
                'read_ahead': True,
                'rewrite_timeout_s': 30.0},
 'ui': {'language': 'en'}}


def test_defaults_and_file_format_are_unchanged(tmp_path: Path) -> None:
    # Compared as TOML text so 1 and 1.0 differ (a float default must stay a float in the file).
    assert tomli_w.dumps(settings_to_dict(Settings())) == tomli_w.dumps(DEFAULTS)
    assert {i.name: i.default for i in settings_schema()} == {
        f"{s}.{k}": v for s, section in DEFAULTS.items() for k, v in section.items()}
    p = save_settings(Settings(), tmp_path / "settings.toml")
    assert p.read_text(encoding="utf-8") == tomli_w.dumps(DEFAULTS)
    assert load_settings(p) == Settings()


def test_every_field_round_trips(tmp_path: Path) -> None:
    """A value other than the default in every field survives save → load."""
    s = Settings()
    changed: dict[str, dict[str, Any]] = {}
    for i in settings_schema():
        v = i.default
        if i.kind == "bool":
            new: Any = not v
        elif i.kind in ("choice", "float_or_choice"):
            new = 0.5 if i.kind == "float_or_choice" else next(c for c in i.choices if c != v)
        elif i.kind == "int":
            new = v + 1 if i.spec.max is None or v + 1 <= i.spec.max else v - 1
        elif i.kind == "float":
            new = v + 0.01 if i.spec.max is None or v + 0.01 <= i.spec.max else v - 0.01
        else:
            new = f"{v}x"
        changed.setdefault(i.section, {})[i.key] = new
    changed["cfrag"].update(coh_w_embed=0.5, coh_w_query=0.25, coh_w_presence=0.25, n_candidates=7)
    for section, values in changed.items():
        s = s.replace(section, **values)
    p = save_settings(s, tmp_path / "s.toml")
    back = load_settings(p)
    assert back == s
    assert all(getattr(getattr(back, i.section), i.key) != i.default for i in settings_schema())


def test_whole_numbers_in_the_file_load_as_floats() -> None:
    s = settings_from_dict({"generation": {"temperature": 1}, "retrieval": {"tau": 1}})
    assert isinstance(s.generation.temperature, float) and isinstance(s.retrieval.tau, float)
    with pytest.raises(SettingsError, match=r"generation\.max_tokens: expected a whole number"):
        settings_from_dict({"generation": {"max_tokens": 1.5}})
    with pytest.raises(SettingsError, match=r"generation\.thinking: expected true or false"):
        settings_from_dict({"generation": {"thinking": 1}})
    with pytest.raises(SettingsError, match=r"models\.generator: expected text"):
        settings_from_dict({"models": {"generator": 3}})


def _beyond(i: Any) -> list[Any]:
    """Values just outside the field's declared bounds."""
    out: list[Any] = []
    eps = 1 if i.kind == "int" else 1e-6
    if i.spec.min is not None:
        out.append(i.spec.min if i.spec.min_open else i.spec.min - eps)
    if i.spec.max is not None:
        out.append(i.spec.max if i.spec.max_open else i.spec.max + eps)
    if i.kind in ("choice", "float_or_choice"):
        out.append("no-such-choice")
    return [int(v) if i.kind == "int" else v for v in out]


@pytest.mark.parametrize("info", [i for i in settings_schema() if _beyond(i)], ids=lambda i: i.name)
def test_the_validator_follows_each_spec(info: Any) -> None:
    for bad in _beyond(info):
        with pytest.raises(SettingsError, match=rf"invalid setting {info.section}\.{info.key}: "):
            Settings().replace(info.section, **{info.key: bad})
    # and the bounds themselves, where closed, are accepted (alone: not where another field takes part)
    involved = bool(info.related or info.spec.sums_to_one) or any(
        info.key in j.related for j in settings_schema() if j.section == info.section)
    for bound, is_open in ((info.spec.min, info.spec.min_open), (info.spec.max, info.spec.max_open)):
        if bound is not None and not is_open and not involved:
            Settings().replace(info.section, **{info.key: int(bound) if info.kind == "int" else float(bound)})


def test_messages_say_what_is_accepted() -> None:
    cases = [
        (("ingest", {"chunk_size": 10}), "invalid setting ingest.chunk_size: must be >= 64 characters, got 10"),
        (("ingest", {"chunk_overlap": 5000}), "ingest.chunk_overlap: must be >= 0 and < chunk_size"),
        (("ingest", {"ocr_dpi": 700}), "ingest.ocr_dpi: must be in 72..600 dpi, got 700"),
        (("ingest", {"max_file_mb": -1.0}), "ingest.max_file_mb: must be >= 0 MB (0: no limit), got -1.0"),
        (("retrieval", {"theta": 2.0}), "retrieval.theta: must be a cosine in [-1, 1], got 2.0"),
        (("retrieval", {"tau": "sometimes"}), "retrieval.tau: must be 'auto' or a cosine in [-1, 1]"),
        (("retrieval", {"tau_percentile": 100.0}), "retrieval.tau_percentile: must be in (0, 100)"),
        (("retrieval", {"level": "page"}), "retrieval.level: must be 'doc' or 'chunk', got 'page'"),
        (("retrieval", {"score_variant": "x"}), "retrieval.score_variant: must be one of paper, centred"),
        (("cfrag", {"n_candidates": 2}), "cfrag.n_candidates: must be >= 1 and >= n_counterfactuals"),
        (("cfrag", {"theta_dedup": -1.5}), "cfrag.theta_dedup: must be a cosine in [-1, 1]"),
        (("cfrag", {"answer_same_f1": 1.0}), "cfrag.answer_same_f1: must be in [0, 1), got 1.0"),
        (("cfrag", {"coh_w_embed": 0.5}), "cfrag.coh_w_embed: the φ_coh weights coh_w_embed, coh_w_query, "
                                          "coh_w_presence must sum to 1, got 1.1"),
        (("models", {"threads": -1}), "models.threads: must be >= 0 (0: automatic), got -1"),
        (("generation", {"rewrite_timeout_s": 0.0}), "generation.rewrite_timeout_s: must be > 0 s, got 0.0"),
    ]
    for (section, values), message in cases:
        with pytest.raises(SettingsError) as err:
            Settings().replace(section, **values)
        assert message in str(err.value)


def test_one_section_and_one_value_can_be_checked_alone() -> None:
    validate_section(CFRagSettings())
    with pytest.raises(SettingsError, match=r"cfrag\.n_candidates"):
        validate_section(CFRagSettings(n_candidates=1))
    with pytest.raises(SettingsError, match=r"ingest\.chunk_overlap"):
        validate_section(IngestSettings(chunk_size=100, chunk_overlap=100))
    with pytest.raises(TypeError, match="not a settings section"):
        validate_section(Settings())
    check_setting("cfrag", "seed", 0)
    with pytest.raises(SettingsError, match=r"invalid setting cfrag\.seed: must be >= 0, got -1"):
        check_setting("cfrag", "seed", -1)
    with pytest.raises(SettingsError, match=r"unknown setting cfrag\.nonsense"):
        setting_info("cfrag", "nonsense")


def test_schema_covers_every_field_with_keys_and_choices_from_the_type() -> None:
    names = {i.name for i in settings_schema()}
    assert names == {f"{s.name}.{f.name}" for s in dataclasses.fields(Settings)
                     for f in dataclasses.fields(getattr(Settings(), s.name))}
    tau = setting_info("retrieval", "tau")
    assert (tau.kind, tau.choices, tau.label_key, tau.help_key) == (
        "float_or_choice", ("auto",), "set.retrieval.tau", "set.retrieval.tau.tip")
    assert setting_info("retrieval", "level").choices == ("doc", "chunk")  # the dialog's order
    assert setting_info("models", "generator").kind == "file"
    assert setting_info("models", "threads").spec.zero_label_key == "settings.threads_auto"
