"""The ``rag-desktop`` argument parser: every subcommand and option, nothing that runs them."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """``rag-desktop``: the GUI by default, and the same service from a terminal.

Every subcommand goes through :class:`rag_desktop.app.service.RagService`, the one
facade the GUI uses too, so the terminal and the window can never disagree.
"""


def _add_library(p: argparse.ArgumentParser) -> None:
    p.add_argument("--library", type=Path, default=None, help="library folder (default: the user's default library)")


def _add_cross_language(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cross-language", choices=["on", "off"], default=None, dest="cross_language",
                   help="translate each question into the library's other language and fuse the rankings "
                        "(default: retrieval.cross_language)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag-desktop", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    sub = parser.add_subparsers(dest="command")

    g = sub.add_parser("gui", help="open the desktop app (the default)")
    _add_library(g)
    g.add_argument("--demo", action="store_true", help="open the bundled demo library (built on first launch)")

    p = sub.add_parser("ingest", help="add or refresh folders of PDF/Word/text files in a library")
    p.add_argument("folders", nargs="+", type=Path)
    _add_library(p)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--reembed", action="store_true", help="drop all vectors and embed again (new embedder)")
    p.add_argument("--no-calibrate", action="store_true",
                   help="do not run the library's calibration gate afterwards (no model; a few seconds): the "
                        "next question runs it")

    p = sub.add_parser("compare", help="baseline vs causal rerank (vs cross-encoder) for one question")
    p.add_argument("question")
    _add_library(p)
    p.add_argument("--level", choices=["chunk", "doc"], default=None)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--cfrag", action="store_true", help="also run CF-RAG (uses the generator)")
    p.add_argument("--ranking", choices=["baseline", "causal", "hybrid"], default=None,
                   help="what the causal column shows for this question (default: the setting or the gate)")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("answer", help="answer a question from a library, streaming, with sources")
    p.add_argument("question")
    _add_library(p)
    p.add_argument("--method", choices=["baseline", "causal", "cfrag"], default="causal")
    p.add_argument("--json", action="store_true")
    p.add_argument("--needs", action="store_true",
                   help="then answer again without each cited source and say which ones the answer needs "
                        "(one more answer per cited source)")

    p = sub.add_parser("chat", help="ask with follow-up questions (rewritten into standalone ones), a REPL")
    _add_library(p)
    p.add_argument("--method", choices=["baseline", "causal"], default="causal")

    p = sub.add_parser("eval", help="retrieval quality on BEIR-format data")
    p.add_argument("--data", type=Path, required=True)
    # None: the app's default (EvalOptions), so one place says what "all methods" means; the parser
    # imports nothing of the app (``rag-desktop gui`` starts without loading the service).
    p.add_argument("--methods", default=None,
                   help="comma-separated method names (default: app.evaluation.DEFAULT_METHODS)")
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--level", choices=["chunk", "doc"], default="doc")
    p.add_argument("--keywords", choices=["plain", "improved"], default=None)
    _add_cross_language(p)
    _add_library(p)
    p.add_argument("--json", type=Path, default=None, dest="json_out")

    p = sub.add_parser("eval-qa", help="answer quality (EM/F1) on a QA set, standard RAG vs CF-RAG")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--methods", default=None,
                   help="comma-separated method names (default: app.qa_eval.DEFAULT_QA_METHODS)")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--distractors", type=int, default=0, help="inject n high-similarity distractors")
    p.add_argument("--docs", type=Path, default=None,
                   help="ingest this folder of documents instead of DATA/corpus.jsonl (e.g. resources/demo)")
    p.add_argument("--generator", default=None,
                   help="models.generator for this run: embedded (1.5B), embedded-fast (0.5B) or a GGUF path")
    p.add_argument("--seed", type=int, default=None,
                   help="cfrag.seed and generation.seed for this run, to measure the spread over seeds "
                        "(default: the settings)")
    p.add_argument("--no-replay", action="store_false", dest="replay",
                   help="decode every CF-RAG ablation call again (by default an ablation replays the full "
                        "method's identical calls: paired with it, but its latency is then not its own)")
    p.add_argument("--replay-store", type=Path, default=None,
                   help="keep CF-RAG's generator calls in this file across runs (read first, rewritten after "
                        "every answer): a run that changes one step decodes only what that step changed")
    p.add_argument("--passages-as-standard", action="store_true",
                   help="ask the passages method for a few words from the top evidence_per_hypothesis hits, as "
                        "standard is (by default it is asked as the app asks: the question as typed, its top "
                        "answer sources)")
    _add_cross_language(p)
    p.add_argument("--json", type=Path, default=None, dest="json_out")

    p = sub.add_parser("calibrate", help="decide per library whether the causal reranker helps (§4.6)")
    _add_library(p)
    p.add_argument(
        "--probes-file",
        type=Path,
        default=None,
        help='typed probes: JSONL lines {"question": ..., "relevant": [file paths]}',
    )
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("models", help="prepare the embedded models (join, verify) and list them")
    p.add_argument("--json", action="store_true")
    p.add_argument("--join-only", action="store_true", help="join and verify the generator, skip the doctor report")

    p = sub.add_parser("doctor", help="report whether each model and backend is ready, or why not")
    p.add_argument("--json", action="store_true")
    return parser
