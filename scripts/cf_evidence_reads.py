#!/usr/bin/env python3
"""What CF-RAG's hypotheses read of their evidence: chunks cut to the budget vs paragraphs.

For every question of a QA set (default: tests/data/demo_qa over resources/demo), runs the app's
own CF-RAG path (``RagService.cfrag``: retrieval, scoring, filter, clustering, sampling, the
hypothesis prompts with the evidence budget of a batched llama.cpp context) with each
``cfrag.read_passages`` value, and reports the tokens the M hypothesis prompts read and whether a
gold answer is in what each hypothesis reads. No text is generated: the generator is a
collaborator that counts with the real model's tokenizer (loaded vocabulary-only) and replies
with a fixed hypothesis, and step 1 is off (``use_counterfactuals = false``: the pool is R(q),
which the counterfactuals hardly change, docs/evaluation.md §2), so this runs in a minute where a
CF-RAG eval-qa run takes an hour here; prompt tokens are what CF-RAG's prefill grows with.

    .venv/bin/python scripts/cf_evidence_reads.py [--library DIR] [--read 0,1,2] [--json OUT]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from passage_prompt_sizes import demo_arguments, demo_library, generator_vocab, language_groups

from rag_desktop.app.evaluation import read_jsonl
from rag_desktop.core.cfrag import SYSTEM_HYPOTHESIS, cfrag_result
from rag_desktop.core.generation import GenRequest, GenResult, generate_sequentially
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.settings import Settings
from rag_desktop.core.text import normalize_answer
from rag_desktop.core.types import CancelToken, ChatMessage, GenEvent, GenEventKind

REPLY = '{"answer": "x", "rationale": "[1]"}'


class CountingGenerator:
    """Counts tokens with the real vocabulary, keeps the hypothesis prompts, writes nothing real."""

    identity = "cf-evidence-reads"
    n_ctx = 8192
    batch_shares_context = True  # the llama.cpp backend's: the M prompts share one context

    def __init__(self, vocab: Any) -> None:
        self.vocab = vocab
        self.hypothesis_prompts: list[str] = []

    def load(self) -> None: ...

    def close(self) -> None: ...

    def count_tokens(self, text: str) -> int:
        return len(self.vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        if messages[0].content.startswith(SYSTEM_HYPOTHESIS):
            self.hypothesis_prompts.append("\n".join(m.content for m in messages))
        yield GenEvent(GenEventKind.TOKEN, REPLY)
        yield GenEvent(GenEventKind.DONE, finish_reason="stop")

    def generate_many(self, requests: Sequence[GenRequest], *, cancel: CancelToken | None = None,
                      on_token: Any = None) -> list[GenResult]:
        return generate_sequentially(self, requests, cancel=cancel, on_token=on_token)


def main() -> int:
    ap = demo_arguments(__doc__, "/tmp/rag_desktop_cf_reads/lib")
    ap.add_argument("--read", default="0,1,2", help="cfrag.read_passages values to compare")
    ap.add_argument("--json", type=Path, default=None, dest="json_out")
    args = ap.parse_args()

    gen = CountingGenerator(generator_vocab(args.generator))
    settings = (Settings().replace("retrieval", level="chunk", cross_language=False)
                .replace("cfrag", use_counterfactuals=False))
    svc = demo_library(args.library, settings, args.docs)
    svc.runtime._generator = gen  # type: ignore[assignment]
    reads = [int(x) for x in args.read.split(",")]
    rows: list[dict[str, Any]] = []
    for q in read_jsonl(args.data / "questions.jsonl"):
        question = str(q["question"])
        golds = [normalize_answer(g) for g in q["answers"]]
        row: dict[str, Any] = {"id": q["_id"], "lang": detect_lang(question)}
        for r in reads:
            # Only the cfrag section changes: update_settings would rebuild the retriever each time.
            svc.settings = settings.replace("cfrag", read_passages=r)
            gen.hypothesis_prompts.clear()
            res = cfrag_result(svc.cfrag(question))
            prompts = list(gen.hypothesis_prompts)
            with_gold = [any(g and g in normalize_answer(p) for g in golds) for p in prompts]
            row[f"read{r}_tokens"] = sum(gen.count_tokens(p) for p in prompts)
            row[f"read{r}_hypotheses"] = len(prompts)
            row[f"read{r}_gold_share"] = sum(with_gold) / len(with_gold) if with_gold else 0.0
            row[f"read{r}_gold_any"] = any(with_gold)
            row[f"read{r}_budget"] = res.trace.evidence_budget
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    svc.close()
    for name, sel in language_groups(rows):
        parts = []
        for r in reads:
            tok = statistics.mean(float(x[f"read{r}_tokens"]) for x in sel)
            share = statistics.mean(float(x[f"read{r}_gold_share"]) for x in sel)
            anyg = sum(bool(x[f"read{r}_gold_any"]) for x in sel)
            parts.append(f"read_passages={r}: {tok:.0f} tokens in the hypotheses, gold in {share:.0%} of them, "
                         f"in any for {anyg}/{len(sel)}")
        print(f"{name:>4} (n={len(sel)}): " + "; ".join(parts))
    if args.json_out:
        args.json_out.write_text(json.dumps(rows, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
