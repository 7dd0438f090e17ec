"""Query latency of the vector index at 10^5 and 10^6 synthetic vectors (docs/architecture.md,
"Deploying a shared library"; docs/benchmarks.md §7).

Vectors: 384-d (multilingual-e5-small, the embedded encoder), drawn as a seeded mixture of
2,000 Gaussian clusters on the unit sphere (real embeddings are clustered; uniform random
vectors would make IVF look worse than it is) and L2-normalised. Queries: 200 held-out
points of the same mixture. For each n:

* flat — ``IndexFlatIP`` (what the app uses up to ``ingest.flat_index_max``), exact;
* ivf — ``IndexIVFFlat`` with the app's layout (``ivf_nlist(n)`` lists ≈ 4·√n, probing
  ``ivf_nprobe(nlist)``, and 4× that), trained on 40 points per list (at most 100,000) with
  10 k-means iterations (the app trains on up to 100 per list; fewer here so the 10^6 build
  fits the session) — recall@20 against flat is reported so the cost of approximation is visible.

One query at a time (as the app asks), k = 20, median and p95 over the queries, with
1 thread and with 2. ``--sizes`` changes n.

    PYTHONPATH=. .venv/bin/python scripts/bench_faiss_scale.py [--sizes 100000 1000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_desktop.backends.faiss_index import ivf_nlist, ivf_nprobe

DIM = 384
K = 20


def mixture(n: int, centers: np.ndarray, rng: np.random.Generator, spread: float = 0.6) -> np.ndarray:
    out = np.empty((n, centers.shape[1]), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        c = centers[rng.integers(0, len(centers), m)]
        x = c + rng.standard_normal((m, centers.shape[1]), dtype=np.float32) * (spread / np.sqrt(centers.shape[1]))
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def latency(index, queries: np.ndarray, faiss, threads: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    faiss.omp_set_num_threads(threads)
    index.search(queries[:5], K)  # warm-up
    times, cpu = [], []
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        index.search(q[None, :], K)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    ms = np.asarray(times) * 1000
    # CPU time: what the query costs the machine, independent of how busy the cores are
    # (wall time on a shared, overloaded machine mostly measures the waiting).
    return {"median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95)),
            "cpu_ms": float(np.median(np.asarray(cpu) * 1000))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import faiss

    rng = np.random.default_rng(0)
    centers = rng.standard_normal((2000, DIM), dtype=np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    queries = mixture(args.queries, centers, np.random.default_rng(1))
    print(f"cores {os.cpu_count()}, load at start {os.getloadavg()[0]:.1f}, faiss {faiss.__version__}")
    rows = []
    for n in args.sizes:
        x = mixture(n, centers, np.random.default_rng(2))
        flat = faiss.IndexFlatIP(DIM)
        flat.add(x)
        faiss.omp_set_num_threads(2)
        _, truth = flat.search(queries, K)
        for threads in (1, 2):
            rows.append({"n": n, "index": "flat", "threads": threads, "recall@20": 1.0,
                         "memory_mb": round(n * DIM * 4 / 2**20), **latency(flat, queries, faiss, threads)})
            print(rows[-1], flush=True)
        del flat
        nlist = ivf_nlist(n)
        nprobe = ivf_nprobe(nlist)
        quantizer = faiss.IndexFlatIP(DIM)
        ivf = faiss.IndexIVFFlat(quantizer, DIM, nlist, faiss.METRIC_INNER_PRODUCT)
        ivf.cp.niter = 10
        train = x[np.random.default_rng(3).choice(n, size=min(n, 40 * nlist, 100_000), replace=False)]
        faiss.omp_set_num_threads(2)
        t = time.perf_counter()
        ivf.train(train)
        ivf.add(x)
        build_s = time.perf_counter() - t
        for probe in (nprobe, min(nlist, 4 * nprobe)):
            ivf.nprobe = probe
            faiss.omp_set_num_threads(2)
            _, got = ivf.search(queries, K)
            recall = float(np.mean([len(set(a) & set(b)) / K for a, b in zip(truth, got, strict=True)]))
            for threads in (1, 2):
                rows.append({"n": n, "index": f"ivf nlist={nlist} nprobe={probe}", "threads": threads,
                             "recall@20": round(recall, 3), "build_s": round(build_s, 1),
                             "memory_mb": round(n * (DIM * 4 + 8) / 2**20),
                             **latency(ivf, queries, faiss, threads)})
                print(rows[-1], flush=True)
        del ivf, quantizer, x
    print(f"load at end {os.getloadavg()[0]:.1f}")
    print("| vectors | index | threads | median ms (wall) | p95 ms (wall) | CPU ms | recall@20 | vectors in RAM |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']:,} | {r['index']} | {r['threads']} | {r['median_ms']:.1f} | {r['p95_ms']:.1f} | "
              f"{r['cpu_ms']:.1f} | {r['recall@20']:.3f} | {r['memory_mb']:,} MB |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
