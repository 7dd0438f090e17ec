#!/usr/bin/env python3
"""Which CPU kernels llama.cpp runs, and what they buy: prefill and decode tok/s (docs/benchmarks.md §11).

    .venv/bin/python scripts/bench_cpu_build.py --json after.json            # the installed build
    PYTHONPATH=/path/to/other/site .venv/bin/python scripts/bench_cpu_build.py --json before.json

Prints ``llama_print_system_info()`` (after rag_desktop.backends.ggml_cpu loaded the variant a
GGML_BACKEND_DL build needs), then the embedded Qwen2.5-Coder-1.5B Q4_K_M on the same ~500-token
prompt, the same threads, n_ctx and n_batch: prefill tok/s (the prompt evaluated from an empty KV
cache) and decode tok/s (32 greedy tokens), the median of ``--repeats`` runs, with the load average
before and after. Run the two builds back to back on a quiet machine; their ratio is the result.

``--quantize q4_0 q8_0`` also measures the same model requantized from the shipped Q4_K_M
(``llama_model_quantize``, into a temporary folder) on the same prompt, alternating with the shipped
file: whether another quantization type reads a prompt faster on this build's kernels.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

PROMPT_SENTENCE = ("数据出境安全评估的结论自出具之日起2年内有效。The Wason selection task asks which cards must be "
                   "turned over to test a conditional rule. ")


# llama.cpp's file types (llama.h, enum llama_ftype) for --quantize
FTYPES = {"q4_0": 2, "q8_0": 7, "q4_k_m": 15}


def _requantize(llama_cpp: Any, src: Path, dst: Path, ftype: int) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = ftype, True, 2
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)) != 0:
        raise SystemExit(f"llama_model_quantize failed for {dst.name}")


def _measure(llama_cpp: Any, gguf: Path, threads: int, n_tokens: int, repeats: int) -> dict[str, Any]:
    """Prefill tok/s (the prompt from an empty KV cache) and decode tok/s (32 greedy tokens), per run."""
    llm: Any = llama_cpp.Llama(model_path=str(gguf), n_ctx=2048, n_batch=512, n_threads=threads,
                               n_threads_batch=threads, verbose=False)
    tokens = llm.tokenize(PROMPT_SENTENCE.encode() * 40, add_bos=False)[:n_tokens]
    prefill, decode = [], []
    for _ in range(repeats):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        prefill.append(len(tokens) / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        for _ in range(32):
            tok = int(llm.sample(temp=0.0))
            llm.eval([tok])
        decode.append(32 / (time.perf_counter() - t0))
    del llm
    return {"prompt_tokens": len(tokens), "prefill_tok_s": round(statistics.median(prefill), 1),
            "decode_tok_s": round(statistics.median(decode), 2), "runs_prefill": [round(x, 1) for x in prefill],
            "file_mib": round(gguf.stat().st_size / 2**20)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quantize", nargs="*", default=[], choices=sorted(FTYPES),
                    help="also measure the model requantized to these types")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from rag_desktop.app.model_files import QWEN_1_5B, prepare_joined
    from rag_desktop.backends import ggml_cpu

    load0 = os.getloadavg()
    variant = ggml_cpu.ensure_cpu_backend()
    info = ggml_cpu.system_info()
    import llama_cpp

    gguf = prepare_joined(QWEN_1_5B)
    out: dict[str, Any] = {"variant": variant or "built in (no GGML_BACKEND_DL)", "system_info": info,
                           "threads": args.threads, "llama_cpp": str(Path(llama_cpp.__file__).parent)}
    with tempfile.TemporaryDirectory(prefix="bench-quant-") as tmp:
        files = {"shipped": gguf}
        for q in args.quantize:
            files[q] = Path(tmp) / f"{q}.gguf"
            _requantize(llama_cpp, gguf, files[q], FTYPES[q])
        # shipped, each requantized file, shipped again: a drift in the machine's load shows as two
        # different shipped rows
        order = ["shipped", *args.quantize, *(["shipped"] if args.quantize else [])]
        runs = [{"model": name, **_measure(llama_cpp, files[name], args.threads, args.prompt_tokens, args.repeats),
                 "load": os.getloadavg()[0]} for name in order]
    out.update(runs[0])  # the shipped file's figures at the top level, as before
    out["models"] = runs
    out["load_before"], out["load_after"] = load0, os.getloadavg()
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
