"""Markdown tables from ``rag-desktop eval-qa --json`` reports, split by language.

Per method: strict EM, containment EM, token F1, mean latency, for all questions and for
the ``en-`` / ``zh-`` ids separately; for CF-RAG methods also the counterfactuals per
question (parsed / valid / kept) and the decisions. Usage::

    .venv/bin/python scripts/cf_eval_tables.py /tmp/qa_full_a.json /tmp/qa_full_b.json

With ``--spread`` the reports are runs of the same methods under several ``--seed``s: one row per
setting (clean or ``--distractors n``), method and language, with the mean over the seeds and the
lowest–highest seed in brackets; a latency marked ‡ is a paired ablation's, which
replayed the calls it shares with the full method::

    .venv/bin/python scripts/cf_eval_tables.py --spread s0.json s1.json s2.json adv0.json

With ``--steps``, where CF-RAG's time went per step (the rows' ``cf_steps``) next to standard RAG's
mean latency from the same reports::

    .venv/bin/python scripts/cf_eval_tables.py --steps s0.json

With ``--oracle DATA``, per CF-RAG method, how often a hypothesis held a gold answer of DATA's
questions against how often the final answer did, which decision lost the difference, and (for runs
that record Ψ) how many a majority rule would have answered right::

    .venv/bin/python scripts/cf_eval_tables.py --oracle tests/data/qa_fixture s0.json adv0.json

With ``--paired``, CF-RAG against the standard answer it starts from (``passages``, else ``standard``) on
the same questions: each one's containment with a 95 % interval, and the paired difference with its
interval (2,000 seeded bootstrap resamples of the questions), the questions each wins, how the standard
answer's check came out, and the mean latency of each (CF-RAG's includes writing the standard answer)::

    .venv/bin/python scripts/cf_eval_tables.py --paired clean.json poisoned.json

With ``--majority DATA``, that majority rule against the ``reread`` synthesis (runs with both
``cfrag`` and ``cfrag_no_div``), and the synthesis seconds it would save::

    .venv/bin/python scripts/cf_eval_tables.py --majority tests/data/qa_fixture s0.json adv0.json
"""

from __future__ import annotations

import collections
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r[key]) for r in rows) / len(rows) if rows else float("nan")


def _lang(r: dict[str, Any]) -> str:
    """The row's language: eval-qa's ``lang`` field, else the ``en-``/``zh-`` id prefix."""
    return str(r.get("lang") or str(r["id"])[:2])


def _cited(rows: list[dict[str, Any]]) -> str:
    """Cited share and citation precision (over the answers that cite), as eval-qa's table."""
    cited = [r for r in rows if r.get("citation_precision") is not None]
    prec = f"{_mean(cited, 'citation_precision'):.3f}" if cited else "–"
    return f"{len(cited) / len(rows):.3f} | {prec}"


def _reports(paths: list[str]) -> Iterator[dict[str, Any]]:
    """Each eval-qa report, parsed, in the order given."""
    for p in paths:
        yield json.loads(Path(p).read_text(encoding="utf-8"))


def _by_lang(rows: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(language, its rows) for all the rows, then the en and the zh ones, leaving out an empty one."""
    for lang in ("all", "en", "zh"):
        sel = [r for r in rows if lang == "all" or _lang(r) == lang]
        if sel:
            yield lang, sel


def _head(*cells: str) -> None:
    """A Markdown table's header row and the separator under it."""
    print("| " + " | ".join(cells) + " |")
    print("|" + "---|" * len(cells))


def spread(paths: list[str]) -> int:
    """Mean and [min–max] over seeds of each (setting, method, language)'s per-run means."""
    runs: dict[tuple[str, str, str], dict[int, list[dict[str, Any]]]] = {}
    for data in _reports(paths):
        setting, seed = _run_label(data)
        for m, rows in data["per_question"].items():
            for lang, sel in _by_lang(rows):
                runs.setdefault((setting, m, lang), {})[seed] = sel
    _head("setting", "method", "lang", "seeds", "n / seed", "strict EM", "containment EM", "token F1", "mean latency")
    for (setting, m, lang), by_seed in sorted(runs.items()):
        def cell(key: str, fmt: str = "{:.3f}", per_seed: dict[int, list[dict[str, Any]]] = by_seed) -> str:
            vals = [_mean(rows, key) for rows in per_seed.values()]
            mean = sum(vals) / len(vals)
            if len(vals) == 1:
                return fmt.format(mean)
            return f"{fmt.format(mean)} [{fmt.format(min(vals))}–{fmt.format(max(vals))}]"
        ns = sorted({len(rows) for rows in by_seed.values()})
        # a paired ablation (eval-qa's replay) did not decode the calls it shares with the full method
        paired = any(r.get("replayed_calls") for rows in by_seed.values() for r in rows)
        print(f"| {setting} | {m} | {lang} | {','.join(map(str, sorted(by_seed)))} | {'/'.join(map(str, ns))} | "
              f"{cell('exact_match')} | {cell('containment')} | {cell('f1')} | {cell('latency_s', '{:.0f}')} s"
              f"{' ‡' if paired else ''} |")
    if any(r.get("replayed_calls") for by_seed in runs.values() for rows in by_seed.values() for r in rows):
        print("\n‡ paired with the full method (eval-qa's replay): its identical calls were replayed, not decoded, "
              "so the latency is only what the ablation changed.")
    return 0


def steps(paths: list[str]) -> int:
    """Where CF-RAG's time went (the rows' ``cf_steps``), per step, against standard RAG's latency."""
    std: list[float] = []
    per: dict[str, list[dict[str, Any]]] = {}
    totals: list[float] = []
    for data in _reports(paths):
        std += [float(r["latency_s"]) for r in data["per_question"].get("standard", [])]
        for r in data["per_question"].get("cfrag", []):
            if "cf_steps" not in r:
                continue
            totals.append(float(r["latency_s"]))
            for st in r["cf_steps"]:
                per.setdefault(st["step"], []).append(st)
    n = len(totals)
    if not n:
        print("no CF-RAG rows with cf_steps")
        return 1
    print(f"CF-RAG questions: {n}; mean latency {sum(totals) / n:.1f} s"
          + (f"; standard RAG mean {sum(std) / len(std):.1f} s over {len(std)} (ratio "
             f"{sum(totals) / n / (sum(std) / len(std)):.2f}x)" if std else ""))
    _head("step", "questions with it", "calls", "prompt tokens", "in the group's shared prefix (read once)", "written",
          "seconds", "share of latency")
    for step, rows in per.items():
        def m(key: str, rs: list[dict[str, Any]] = rows) -> float:
            return sum(float(r[key]) for r in rs) / len(rs)
        share = sum(float(r["seconds"]) for r in rows) / sum(totals)
        print(f"| {step} | {len(rows)}/{n} | {m('calls'):.1f} | {m('prompt_tokens'):.0f} | {m('cached_tokens'):.0f} | "
              f"{m('completion_tokens'):.0f} | {m('seconds'):.1f} | {share:.0%} |")
    return 0


def _golds(data_dir: str) -> dict[str, list[str]]:
    from rag_desktop.app.evaluation import read_jsonl

    return {str(q["_id"]): [str(a) for a in q["answers"]] for q in read_jsonl(Path(data_dir) / "questions.jsonl")}


def _run_label(data: dict[str, Any]) -> tuple[str, int]:
    """(setting, CF-RAG seed) of one report."""
    setting = f"distractors {data['distractors']}" if data.get("distractors") else "clean"
    return setting, int(data.get("seeds", {}).get("cfrag", 0))


def oracle(data_dir: str, paths: list[str]) -> int:
    """Where a CF-RAG method's gain is lost: per method and language, the
    questions where at least one hypothesis contains a gold answer (what arbitration could have
    picked), where the final answer does, and where a right hypothesis was there but the final
    answer is wrong — with the decision that lost it (select by Ψ, synthesis, fallback)."""
    from rag_desktop.core.qa_metrics import containment_match

    golds = _golds(data_dir)
    _head("setting", "seed", "method", "lang", "n", "a hypothesis holds gold", "final holds gold",
          "lost by the decision (decision: count)", "right under a majority rule (Ψ within the majority)")
    for data in _reports(paths):
        setting, seed = _run_label(data)
        for m, rows in data["per_question"].items():
            rows = [r for r in rows if "hypotheses" in r and r["id"] in golds]
            for lang, sel in _by_lang(rows):
                hyp = [r for r in sel if any(containment_match(h, golds[r["id"]]) for h in r["hypotheses"])]
                final = [r for r in sel if r["containment"]]
                lost = collections.Counter(str(r["decision"]) for r in hyp if not r["containment"])
                scored = [r for r in sel if len(r.get("psi", [])) == len(r["hypotheses"])]
                maj = (f"{sum(_majority_right(r, golds[r['id']]) for r in scored)} of {len(scored)}"
                       if scored else "(no Ψ in this run)")
                print(f"| {setting} | {seed} | {m} | {lang} | {len(sel)} | {len(hyp)} | {len(final)} | "
                      + (", ".join(f"{k}: {v}" for k, v in sorted(lost.items())) or "–") + f" | {maj} |")
    return 0


def _majority(row: dict[str, Any]) -> str | None:
    """The answer a majority rule would select, read off a run (no decoding): when more than half
    the hypotheses are one answer (token F1 ≥ 0.5 with the group's first), that group's highest-Ψ
    hypothesis; None when there is no majority."""
    from rag_desktop.core.qa_metrics import token_f1

    hyps, psi = list(row["hypotheses"]), list(row["psi"])
    groups: list[list[int]] = []
    for i, h in enumerate(hyps):
        for g in groups:
            if token_f1(h, hyps[g[0]]) >= 0.5:
                g.append(i)
                break
        else:
            groups.append([i])
    big = max(groups, key=len) if groups else []
    return hyps[max(big, key=lambda i: psi[i])] if 2 * len(big) > len(hyps) else None


def _majority_right(row: dict[str, Any], golds: list[str], fallback_right: bool | None = None) -> bool:
    """Whether the majority rule answers right; without a majority the fallback stands (by default
    the run's own final answer, its synthesis)."""
    from rag_desktop.core.qa_metrics import containment_match

    maj = _majority(row)
    if maj is not None:
        return bool(containment_match(maj, golds))
    return bool(row["containment"]) if fallback_right is None else fallback_right


def majority(data_dir: str, paths: list[str]) -> int:
    """The majority rule against the ``reread`` synthesis (would selecting a majority
    save the synthesis call without losing answers?). Per report with ``cfrag`` and
    ``cfrag_no_div`` rows: reread's answer is cfrag's where it selected and cfrag_no_div's where it
    synthesised (the same request); the rule selects a majority's highest Ψ, else rereads."""
    golds = _golds(data_dir)
    _head("setting", "seed", "n", "synthesised", "majority among them", "reread right", "majority rule right",
          "synthesis seconds saved")
    for data in _reports(paths):
        pq = data["per_question"]
        if not pq.get("cfrag") or not pq.get("cfrag_no_div"):
            continue
        setting, seed = _run_label(data)
        one_path = {r["id"]: r for r in pq["cfrag_no_div"]}
        rows = [r for r in pq["cfrag"] if r["id"] in golds and r["id"] in one_path]
        n_syn = n_maj = re_ok = maj_ok = 0
        saved = 0.0
        for r in rows:
            synth = str(r["decision"]).startswith("synth")
            reread_ok = bool(one_path[r["id"]]["containment"] if synth else r["containment"])
            if "psi" not in r:
                r = {**r, "psi": [0.0] * len(r["hypotheses"])}  # older reports: ties, first wins
            fires = synth and _majority(r) is not None
            n_syn += synth
            n_maj += fires
            re_ok += reread_ok
            maj_ok += _majority_right(r, golds[r["id"]], reread_ok) if synth else reread_ok
            if fires:
                saved += sum(float(s["seconds"]) for s in r.get("cf_steps", []) if s["step"] == "synthesis")
        print(f"| {setting} | {seed} | {len(rows)} | {n_syn} | {n_maj} | {re_ok} | {maj_ok} | {saved:.0f} s |")
    return 0


def _interval(values: list[float], draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """The mean of ``values`` and its 2.5–97.5 % bootstrap interval (seeded resamples)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(v), size=(draws, len(v)))
    means = v[idx].mean(axis=1)
    return float(v.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def paired(paths: list[str]) -> int:
    """CF-RAG against the standard answer it starts from, per report and language, with intervals."""
    _head("report", "lang", "n", "standard containment", "CF-RAG containment", "CF-RAG − standard",
          "CF-RAG wins / loses", "standard answer's check", "latency standard / CF-RAG")
    for path, data in zip(paths, _reports(paths), strict=True):
        per = data["per_question"]
        base = "passages" if per.get("passages") else "standard"
        std = {r["id"]: r for r in per.get(base, [])}
        cf = [r for r in per.get("cfrag", []) if r["id"] in std]
        for lang, sel in _by_lang(cf):
            a = [float(std[r["id"]]["containment"]) for r in sel]
            b = [float(r["containment"]) for r in sel]
            ia, ib = _interval(a), _interval(b)
            d = _interval([y - x for x, y in zip(a, b, strict=True)])
            wins = sum(1 for x, y in zip(a, b, strict=True) if y > x)
            loses = sum(1 for x, y in zip(a, b, strict=True) if y < x)
            out = collections.Counter(str(r.get("standard_outcome") or r.get("decision")) for r in sel)
            lat_a = _mean([std[r["id"]] for r in sel], "latency_s")
            lat_b = _mean(sel, "latency_s")
            print(f"| {Path(path).stem} | {lang} | {len(sel)} | {ia[0]:.3f} [{ia[1]:.3f}–{ia[2]:.3f}] | "
                  f"{ib[0]:.3f} [{ib[1]:.3f}–{ib[2]:.3f}] | {d[0]:+.3f} [{d[1]:+.3f}–{d[2]:+.3f}] | {wins} / {loses} | "
                  + ", ".join(f"{k} {v}" for k, v in sorted(out.items()))
                  + f" | {lat_a:.1f} / {lat_b:.1f} s ({lat_b / lat_a:.2f}×) |")
    return 0


def main(paths: list[str]) -> int:
    if not paths or paths[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if paths else 2
    if paths[0] == "--spread":
        return spread(paths[1:])
    if paths[0] == "--oracle" and len(paths) > 2:
        return oracle(paths[1], paths[2:])
    if paths[0] == "--majority" and len(paths) > 2:
        return majority(paths[1], paths[2:])
    if paths[0] == "--steps":
        return steps(paths[1:])
    if paths[0] == "--paired":
        return paired(paths[1:])
    per: dict[str, list[dict[str, Any]]] = {}
    for data in _reports(paths):
        note = "" if data.get("complete", True) else " (partial)"
        for m, rows in data["per_question"].items():
            if rows:
                per[f"{m}{note}"] = rows
    _head("method", "lang", "n", "strict EM", "containment EM", "token F1", "cited share", "citation precision",
          "mean latency", "TTFT")
    for m, rows in per.items():
        for lang, sel in _by_lang(rows):
            ttft = [r for r in sel if r.get("ttft_s") is not None]
            print(f"| {m} | {lang} | {len(sel)} | {_mean(sel, 'exact_match'):.3f} | "
                  f"{_mean(sel, 'containment'):.3f} | {_mean(sel, 'f1'):.3f} | {_cited(sel)} | "
                  f"{_mean(sel, 'latency_s'):.1f} s | " + (f"{_mean(ttft, 'ttft_s'):.1f} s |" if ttft else "– |"))
    print()
    _head("method", "lang", "parsed/q", "valid/q", "kept/q", "questions with ≥ 1 kept", "decisions")
    for m, rows in per.items():
        if "cf_parsed" not in rows[0]:
            continue
        for lang, sel in _by_lang(rows):
            dec = collections.Counter(str(r["decision"]) for r in sel)
            print(f"| {m} | {lang} | {_mean(sel, 'cf_parsed'):.2f} | {_mean(sel, 'cf_valid'):.2f} | "
                  f"{_mean(sel, 'cf_kept'):.2f} | {sum(1 for r in sel if r['cf_kept'])}/{len(sel)} | "
                  + ", ".join(f"{k} {v}" for k, v in sorted(dec.items())) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
