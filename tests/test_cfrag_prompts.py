"""The CF-RAG prompts, byte for byte (the prompts moved from code to template files).

``tests/data/cfrag_prompts/golden.json`` was rendered by the code BEFORE the prompts moved
to ``rag_desktop/prompts/cfrag_*.txt``; every message that reaches the model must stay the
same. Regenerate only for a deliberate prompt change:
``python tests/test_cfrag_prompts.py --write``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rag_desktop.core import cfrag
from rag_desktop.core.types import ChatMessage, Hit

GOLDEN = Path(__file__).parent / "data" / "cfrag_prompts" / "golden.json"
QUERIES = {"en": "Who is the lead actor in The Dark Knight?", "zh": "《黑暗骑士》的主演是谁？"}


class _Gen:
    """Token counting of the scripted generators (4 characters a token); only n_ctx varies."""

    identity = "golden"

    def __init__(self, n_ctx: int) -> None:
        self.n_ctx = n_ctx

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1


def _hits(lang: str) -> list[Hit]:
    body = {"en": "Christian Bale stars as Bruce Wayne in The Dark Knight, directed by Christopher Nolan. ",
            "zh": "克里斯蒂安·贝尔在《黑暗骑士》中饰演布鲁斯·韦恩，导演是克里斯托弗·诺兰。"}[lang]
    return [Hit(unit_id=i, doc_id=i, level="chunk", title=("" if i == 2 else f"doc{i}"), path=f"/d{i}",
                page=i + 1, text=body * (1 + 6 * i), s_sim=0.5, rank=i + 1, lang=lang) for i in range(3)]


def _msgs(messages: Any) -> list[list[str]]:
    return [[m.role, m.content] for m in messages]


def render_all() -> dict[str, Any]:
    """Every CF-RAG prompt for a fixed English and Chinese question."""
    out: dict[str, Any] = {}
    for lang, q in QUERIES.items():
        out[f"{lang}.batch"] = _msgs(cfrag.counterfactual_messages(q, 6))
        for tau in cfrag.TRANSFORMATIONS:
            out[f"{lang}.type.{tau}"] = _msgs(cfrag.counterfactual_type_messages(q, tau))
        out[f"{lang}.closed_book"] = _msgs(cfrag.closed_book_messages([q, "Who directed it?", "When?"]))
        hits = _hits(lang)
        for n_ctx in (4096, 700):  # whole passages, and passages cut to fit
            gen = _Gen(n_ctx)
            msgs, texts = cfrag.hypothesis_messages(q, hits, gen, 384, 64)  # type: ignore[arg-type]
            out[f"{lang}.hypothesis.{n_ctx}"] = [_msgs(msgs), texts]
            msgs, texts = cfrag.hypothesis_messages(q, hits, gen, 384, 64, budget=120)  # type: ignore[arg-type]
            out[f"{lang}.hypothesis.{n_ctx}.budget"] = [_msgs(msgs), texts]
            out[f"{lang}.overhead.{n_ctx}"] = cfrag.hypothesis_overhead(q, 3, gen)  # type: ignore[arg-type]
            ranked = [
                cfrag.HypothesisTrace(index=j, subset=j, answer=a, rationale=r, parse="json", raw_text="",
                                      seed=0, sim_answer_evidence=0.5, query_relevance=0.5, presence=1.0,
                                      phi_coh=0.5, phi_causal=0.1, psi=0.6 - 0.1 * j, mean_logprob=None, rank=j + 1)
                for j, (a, r) in enumerate([("Christian Bale", "Passage [1] names him [2]."), ("", ""),
                                            ("Heath Ledger", "Reviews [3].")])
            ]
            for cfs in (["Who directed The Dark Knight?", "Who played the villain?"], []):
                msgs, texts = cfrag.synthesis_messages(q, ranked, hits, cfs, gen, 448, 64)  # type: ignore[arg-type]
                out[f"{lang}.synthesis.{n_ctx}.{len(cfs)}"] = [_msgs(msgs), texts]
    out["system"] = [cfrag.SYSTEM_COUNTERFACTUAL, cfrag.SYSTEM_CLOSED_BOOK, cfrag.SYSTEM_HYPOTHESIS,
                     cfrag.SYSTEM_SYNTHESIS]
    return out


def test_prompts_are_byte_identical_to_the_golden_rendering() -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = render_all()
    assert sorted(now) == sorted(golden)
    for key in golden:
        assert now[key] == golden[key], key


def test_chat_messages_are_chat_messages() -> None:
    assert all(isinstance(m, ChatMessage) for m in cfrag.counterfactual_type_messages(QUERIES["en"], "role"))


if __name__ == "__main__" and "--write" in sys.argv:
    GOLDEN.write_text(json.dumps(render_all(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
