#!/usr/bin/env python3
"""Prompt size and citation-target size with whole chunks vs answer passages.

For every question of a QA set (default: tests/data/demo_qa over resources/demo), builds the
app's own answer prompt for the baseline column (``RagService.answer``'s path: top 4 chunks,
passages selected by ``PassageFinder``, ``build_answer_messages`` with the generator's own
tokenizer, loaded vocabulary-only) and reports the prompt tokens, whether a gold answer is in
what the model reads, and the passage-selection time. No text is generated, so this runs in
seconds where an eval-qa run takes an hour on a shared CPU; prompt tokens are what the time to
first token grows with.

    .venv/bin/python scripts/passage_prompt_sizes.py [--library DIR] [--generator embedded]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rag_desktop.app import model_files
from rag_desktop.app.service import RagService
from rag_desktop.core import prompting
from rag_desktop.core.lang import detect_lang
from rag_desktop.core.settings import Settings
from rag_desktop.core.text import normalize_answer

ROOT = Path(__file__).resolve().parent.parent


def language_groups(rows: list[dict[str, object]]) -> list[tuple[str, list[dict[str, object]]]]:
    """(name, rows) for the zh rows, the en rows and all of them, leaving out an empty group."""
    out = [(lang or "all", [r for r in rows if lang is None or r["lang"] == lang]) for lang in ("zh", "en", None)]
    return [(name, sel) for name, sel in out if sel]


def demo_arguments(description: str | None, library: str) -> argparse.ArgumentParser:
    """The options this script and cf_evidence_reads.py share: the QA set, its documents, the
    library built from them (under ``library`` by default) and the generator that counts tokens."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT / "tests/data/demo_qa")
    ap.add_argument("--docs", type=Path, default=ROOT / "resources/demo")
    ap.add_argument("--library", type=Path, default=Path(library))
    ap.add_argument("--generator", default="embedded")
    return ap


def generator_vocab(generator: str) -> Any:
    """The generator's tokenizer: its GGUF (an embedded model's name, or a path) loaded vocabulary-only."""
    import llama_cpp

    from rag_desktop.backends.ggml_cpu import ensure_cpu_backend

    ensure_cpu_backend()  # the CPU kernels of a GGML_BACKEND_DL build

    spec = model_files.embedded_spec(generator)
    gguf = model_files.prepare_joined(spec) if spec is not None else Path(generator)
    return llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)


def demo_library(library: Path, settings: Settings, docs: Path) -> RagService:
    """The library's service, ingesting ``docs`` first when the library holds no document yet."""
    svc = RagService(library, settings)
    if not svc.library.catalog.documents():
        for _ in svc.ingest([docs]):
            pass
    return svc


def main() -> int:
    ap = demo_arguments(__doc__, "/tmp/rag_desktop_prompt_sizes/lib")
    ap.add_argument("--n-sources", type=int, default=4)
    args = ap.parse_args()
    vocab = generator_vocab(args.generator)

    def count(text: str) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    svc = demo_library(args.library, Settings().replace("retrieval", level="chunk"), args.docs)
    rows = []
    for line in (args.data / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        question = str(q["question"])
        lang = detect_lang(question)
        golds = [normalize_answer(g) for g in q["answers"]]
        hits = svc.context(question, "chunk").baseline.hits[: args.n_sources]
        t0 = time.perf_counter()
        ps = svc.passage_finder().find(question, hits)
        t_sel = time.perf_counter() - t0
        row: dict[str, object] = {"id": q["_id"], "lang": lang}
        for mode, srcs, locs in (("chunks", hits, None), ("passages", ps.hits, ps.locators)):
            msgs, used = prompting.build_answer_messages(question, srcs, lang, count, 8192, 512, locs)
            row[f"{mode}_tokens"] = sum(count(m.content) for m in msgs)
            row[f"{mode}_gold_read"] = any(g and g in normalize_answer(h.text) for h in used for g in golds)
            row[f"{mode}_chars_per_source"] = statistics.mean(len(h.text) for h in used) if used else 0
        row["select_s"] = round(t_sel, 2)
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    svc.close()
    for name, sel in language_groups(rows):
        ct = statistics.mean(float(r["chunks_tokens"]) for r in sel)  # type: ignore[arg-type]
        pt = statistics.mean(float(r["passages_tokens"]) for r in sel)  # type: ignore[arg-type]
        cg = sum(bool(r["chunks_gold_read"]) for r in sel)
        pg = sum(bool(r["passages_gold_read"]) for r in sel)
        print(f"{name:>4}: n={len(sel)}  prompt tokens chunks {ct:.0f} → passages {pt:.0f} ({pt / ct:.2f}x); "
              f"gold answer in what the model reads: chunks {cg}/{len(sel)}, passages {pg}/{len(sel)}; "
              f"selection {statistics.mean(float(r['select_s']) for r in sel):.2f} s")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
