"""CF-RAG's wall time against standard RAG's, in process, on the demo library's own questions.

The cfrag_steps part of bench_llm.py (standard RAG, then CF-RAG batched as the app runs it, per
question, interleaved; CF-RAG writes its standard answer inside the timed run), with the demo
questions of tests/data/demo_qa by default. Prints the median ratio and the load average.

    .venv/bin/python scripts/bench_cfrag.py \\
        --model ~/.local/share/rag-desktop/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --json cfrag.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import bench_llm

DEMO_QA = Path(__file__).resolve().parents[1] / "tests" / "data" / "demo_qa" / "questions.jsonl"


def demo_questions(n: int) -> list[str]:
    """The first ``n`` demo questions of each language, alternating."""
    rows = [json.loads(line) for line in DEMO_QA.read_text(encoding="utf-8").splitlines() if line.strip()]
    zh = [r["question"] for r in rows if r.get("lang") == "zh"][:n]
    en = [r["question"] for r in rows if r.get("lang") != "zh"][:n]
    return [q for pair in zip(zh, en, strict=False) for q in pair]


def main() -> None:
    argv = sys.argv[1:]
    defaults = ["--parts", "cfrag_steps", "--threads", "2", "--n-ctx", "8192", "--cfrag-modes", "standard,after"]
    if "--cfrag-questions" not in argv:
        defaults += ["--cfrag-questions", "|".join(demo_questions(3))]
    sys.argv = [sys.argv[0], *defaults, *argv]
    bench_llm.main()


if __name__ == "__main__":
    main()
