"""The decision report for one question: the columns, keyword sets, explanations, CF-RAG trace
and answers, as JSON (everything) and as a self-contained HTML page (for people).

Document text and model output are untrusted, so every value that reaches the HTML goes
through :func:`html.escape`; the page carries a Content-Security-Policy that forbids
scripts and any remote or local resource, so a hostile string could not run or load
anything even if it slipped through. No Qt here: the report can be built and tested
without a display.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_desktop.core.cfrag.types import CFResult, CFTrace, to_jsonable
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Answer, Hit, RankedList
from rag_desktop.ui import i18n
from rag_desktop.ui.cf_notes import cf_reasons, cf_tag
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.present import (
    COLOR_A,
    COLOR_B,
    abstention_key,
    causal_off_text,
    ce_label_text,
    cfrag_rows,
    citation_spans,
    decision_line,
    explanation_for,
    fmt,
    paths_ran,
    rank_change,
    tau_source_text,
    variant_text,
    why_lines,
)

FORMAT = "rag_desktop.decision_report/1"


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass(frozen=True)
class DecisionReport:
    question: str
    comparison: Any  # rag_desktop.app.service.Comparison
    answers: Mapping[str, Answer]
    cfrag: CFResult | None
    surfaces: Mapping[str, str]
    language: str
    settings: Settings | None = None
    created: str = ""

    def _created(self) -> str:
        return self.created or _dt.datetime.now().astimezone().isoformat(timespec="seconds")

    def _lists(self) -> list[tuple[str, RankedList]]:
        c = self.comparison
        out = [("baseline", c.baseline), ("causal", c.causal)]
        if c.cross_encoder is not None:
            out.append(("cross_encoder", c.cross_encoder))
        return out

    def _cf_hits(self) -> list[Hit]:
        if self.cfrag is None:
            return []
        import dataclasses

        return [dataclasses.replace(r.evidence.hit, rank=r.rank) for r in cfrag_rows(self.cfrag.trace)]

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        c = self.comparison
        comp = c.to_json() if hasattr(c, "to_json") else to_jsonable(c)
        changes: dict[str, list[dict[str, Any]]] = {}
        columns = [*self._lists(), *([("cfrag", RankedList("cfrag", tuple(self._cf_hits())))] if self.cfrag else [])]
        for m, ranked in columns:
            rows = []
            for h in ranked.hits:
                ch = rank_change(c.baseline, h)
                rows.append({"rank": h.rank, "unit_id": h.unit_id, "doc_id": h.doc_id, "title": h.title,
                             "page": h.page, "change": ch.delta, "change_text": ch.text})
            changes[m] = rows
        why: dict[str, list[str]] = {}
        with i18n.using(self.language):
            for h in c.causal.hits:
                e = explanation_for(c.causal, h.unit_id)
                if e is not None:
                    why[str(h.unit_id)] = why_lines(e, h, None, self.surfaces)
        out: dict[str, Any] = {
            "format": FORMAT,
            "created": self._created(),
            "question": self.question,
            "language": self.language,
            "comparison": comp,
            "rank_changes": changes,
            "why": why,
            "surfaces": dict(self.surfaces),
            "answers": {m: to_jsonable(a) for m, a in self.answers.items()},
            "cfrag": to_jsonable(self.cfrag) if self.cfrag is not None else None,
        }
        if self.settings is not None:
            from rag_desktop.app.config import settings_to_dict

            out["settings"] = settings_to_dict(self.settings)
        return out

    # ------------------------------------------------------------------ HTML
    def to_html(self) -> str:
        with i18n.using(self.language):
            return self._html()

    def _table(self, m: str, hits: Sequence[Hit]) -> str:
        c = self.comparison
        rows = []
        for h in hits:
            ch = rank_change(c.baseline, h) if m != "baseline" else None
            cls = "" if ch is None or ch.delta is None else ("up" if ch.delta > 0 else "down" if ch.delta < 0 else "")
            score = fmt(h.s_sim)
            if m == "causal":
                e = explanation_for(c.causal, h.unit_id)
                if e is not None:
                    score = f"s_sim {fmt(e.s_sim)} · s_c {fmt(e.s_c)}" + (
                        f" · hybrid {fmt(e.s_hybrid)}" if e.s_hybrid is not None else "")
            rows.append(
                f"<tr><td>{h.rank}</td><td class='{cls}'>{esc(ch.text if ch else '')}</td>"
                f"<td title='{esc(h.path)}'>{esc(h.title)}</td><td>{h.page}</td><td>{esc(score)}</td>"
                f"<td class='snip'>{esc(' '.join(h.text.split())[:300])}</td></tr>")
        head = "".join(f"<th>{esc(tr(k))}</th>" for k in ("col.rank", "col.change", "col.title", "col.page",
                                                           "col.scores", "col.snippet"))
        return f"<table><tr>{head}</tr>{''.join(rows)}</table>"

    def _chips(self, terms: Sequence[tuple[str, str, str]]) -> str:
        return "".join(f"<span class='chip {k}' title='{esc(tip)}'>{esc(t)}</span>" for t, k, tip in terms)

    def _answer_html(self, a: Answer) -> str:
        """Escaped answer text with [n] marked valid/invalid (no links: a report opens no files); an answer
        that is "not in your documents" says so first, as the window does."""
        text = a.text
        verdict = f"<p class='meta'>{esc(tr(abstention_key(a.abstention)))}</p>" \
            if a.abstention is not None and a.abstained else ""
        valid = {ct.n: ct for ct in a.citations}
        out: list[str] = []
        pos = 0
        for s, e, n in citation_spans(text):
            out.append(esc(text[pos:s]))
            ct = valid.get(n)
            if ct is not None and ct.valid:
                out.append(f"<span class='cite' title='{esc(ct.title)} p. {esc(ct.page)}'>{esc(text[s:e])}</span>")
            else:
                out.append(f"<span class='cite bad' title='{esc(tr('answer.cite_invalid_tip', n=n))}'>"
                           f"{esc(text[s:e])}</span>")
            pos = e
        out.append(esc(text[pos:]))
        srcs = "".join(f"<li>[{i}] {esc(h.title)} — p. {h.page}</li>" for i, h in enumerate(a.sources, start=1))
        return f"{verdict}<p class='answer'>{''.join(out)}</p><ol class='src'>{srcs}</ol>"

    def _html(self) -> str:
        c = self.comparison
        d = self.surfaces
        parts: list[str] = []
        parts.append(f"<h1>{esc(tr('report.title'))}</h1>")
        parts.append(f"<p><b>{esc(tr('report.question'))}</b> {esc(self.question)}</p>")
        sub = tr("col.causal_sub", variant=variant_text(c.causal_variant), tau=fmt(c.tau, 3),
                 source=tau_source_text(c.tau_source,
                                        self.settings.retrieval.tau_percentile if self.settings else None),
                 a=fmt(c.diagnostics.a_share, 2), empty=c.diagnostics.n_empty_b)
        off = getattr(c, "causal_off", None)
        if off is not None:
            sub += " · " + causal_off_text(off)
        parts.append(f"<p class='meta'>{esc(tr('report.created', when=self._created()))} · {esc(sub)}</p>")
        parts.append(f"<p class='legend'><span class='chip A'>{esc(tr('legend.a'))}</span> "
                     f"<span class='chip B'>{esc(tr('legend.b'))}</span></p>")
        parts.append("<div class='cols'>")
        titles = {"baseline": "col.baseline", "causal": "col.causal", "cross_encoder": "col.cross_encoder"}
        for m, ranked in self._lists():
            # the services' labels are English: each list's line in the report's language
            meta = ce_label_text(ranked.label) if m == "cross_encoder" else \
                variant_text(c.causal_variant) if m == "causal" else tr("score.s_sim")
            parts.append(f"<div class='col'><h2>{esc(tr(titles[m]))}</h2>"
                         f"<p class='meta'>{esc(meta)}</p>{self._table(m, ranked.hits)}</div>")
        if self.cfrag is not None:
            parts.append(f"<div class='col'><h2>{esc(tr('col.cfrag'))}</h2>{self._table('cfrag', self._cf_hits())}"
                         "</div>")
        parts.append("</div>")

        parts.append(f"<h2>{esc(tr('report.why'))}</h2>")
        for h in c.causal.hits:
            e = explanation_for(c.causal, h.unit_id)
            if e is None:
                continue
            chips: list[tuple[str, str, str]] = []
            if e.split is not None:
                for a in e.split.a_terms:
                    how = tr("why.exact") if a.cosine is None else tr("why.cos", v=fmt(a.cosine, 3))
                    chips.append((d.get(a.term, a.term), "A", f"← {d.get(a.absorbed_by, a.absorbed_by)} ({how})"))
                for b in e.split.b_terms:
                    chips.append((d.get(b.term, b.term), "B", fmt(b.weight, 3)))
            lines = "".join(f"<li>{esc(x)}</li>" for x in why_lines(e, h, None, d, c.causal))
            parts.append(f"<div class='why'><h3>{h.rank}. {esc(h.title)}</h3><div>{self._chips(chips)}</div>"
                         f"<ul>{lines}</ul></div>")

        if self.answers:
            parts.append(f"<h2>{esc(tr('report.answers'))}</h2>")
            names = {"baseline": "answer.baseline", "causal": "answer.causal",
                     "cross_encoder": "answer.cross_encoder", "cfrag": "answer.cfrag"}
            for m, ans in self.answers.items():
                parts.append(f"<h3>{esc(tr(names[m]) if m in names else m)}</h3>{self._answer_html(ans)}")

        if self.cfrag is not None:
            parts.append(self._trace_html())
        body = "\n".join(parts)
        return (
            "<!DOCTYPE html>\n<html lang='" + esc(self.language) + "'><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>{esc(tr('report.title'))}: {esc(self.question)}</title><style>{_CSS}</style></head>"
            f"<body>{body}</body></html>\n"
        )

    def _trace_html(self) -> str:
        assert self.cfrag is not None
        t = self.cfrag.trace
        p: list[str] = [f"<h2>{esc(tr('trace.title'))}</h2>"]
        if not paths_ran(t):  # the standard answer stood: no tables of what did not run
            return "\n".join([*p, self._decision_html(t)])
        p.append(f"<h3>{esc(tr('trace.counterfactuals'))}</h3><table><tr><th></th><th>{esc(tr('trace.h.question'))}"
                 f"</th><th>{esc(tr('trace.h.kind'))}</th><th>{esc(tr('trace.h.sim'))}</th>"
                 f"<th>{esc(tr('trace.h.info'))}</th><th>{esc(tr('trace.h.reason'))}</th></tr>")
        for cf in (*t.counterfactuals, *t.rejected_counterfactuals):
            p.append(f"<tr><td>{'✔' if cf.kept else '✘'}</td><td>{esc(cf.text)}</td>"
                     f"<td>{esc(cf_tag(cf.transformation))}</td><td>{fmt(cf.sim_sem)}</td><td>{fmt(cf.info)}</td>"
                     f"<td>{esc(cf_reasons(cf.reason))}</td></tr>")
        p.append("</table>")
        p.append(f"<h3>{esc(tr('trace.evidence'))}</h3><table><tr><th>#</th><th>{esc(tr('trace.h.passage'))}</th>"
                 "<th>s(q,e)</th><th>max s(q',e)</th><th>Δ</th>"
                 f"<th>{esc(tr('trace.h.status'))}</th><th>{esc(tr('trace.h.cluster'))}</th></tr>")
        for e in t.evidence:
            margin = e.s_q - (e.max_s_cf if e.max_s_cf is not None else 0.0)
            p.append(f"<tr><td>{e.pool_id}</td><td>{esc(e.hit.title)} — p. {e.hit.page}</td>"
                     f"<td>{_bar(e.s_q, '#0072B2')}</td><td>{_bar(e.max_s_cf, '#CC79A7')}</td><td>{fmt(margin)}</td>"
                     f"<td>{esc(tr('trace.status.' + e.status))}</td>"
                     f"<td>{e.cluster if e.cluster >= 0 else '—'}</td></tr>")
        p.append("</table>")
        p.append(f"<h3>{esc(tr('trace.clusters'))}</h3><ul>")
        for cl in t.clusters:
            members = ", ".join(f"#{m}" for m in cl.members)
            p.append(f"<li>{esc(tr('trace.cluster', k=cl.cluster, n=len(cl.members), members=members))}</li>")
        p.append("</ul>")
        p.append(f"<h3>{esc(tr('trace.hypotheses'))}</h3><table><tr><th>#</th><th>{esc(tr('trace.h.answer'))}</th>"
                 "<th>φ_coh</th><th>φ_causal</th><th>Ψ</th></tr>")
        for h in sorted(t.hypotheses, key=lambda h: h.rank):
            p.append(f"<tr><td>{h.rank}</td><td>{esc(h.answer)}<div class='meta'>{esc(h.rationale)}</div></td>"
                     f"<td>{_bar(h.phi_coh, '#E69F00')}</td><td>{fmt(h.phi_causal)}</td>"
                     f"<td>{_bar(h.psi, '#E69F00')}</td></tr>")
        p.append("</table>")
        p.append(self._decision_html(t))
        return "\n".join(p)

    @staticmethod
    def _decision_html(t: CFTrace) -> str:
        return (f"<h3>{esc(tr('trace.decision'))}</h3><p>{esc(decision_line(t))}"
                f"<br>{esc(tr('trace.final', a=t.decision.final_answer))}</p>")

    # ------------------------------------------------------------------ files
    def write(self, path: Path) -> tuple[Path, Path]:
        """``path`` as .html and the same stem as .json, each written atomically."""
        html_path = path if path.suffix.lower() in (".html", ".htm") else path.with_suffix(".html")
        json_path = html_path.with_suffix(".json")
        html_path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(json_path, json.dumps(self.to_json(), ensure_ascii=False, indent=2, allow_nan=False))
        _atomic_write(html_path, self.to_html())
        return html_path, json_path


def _bar(value: float | None, color: str) -> str:
    if value is None:
        return "—"
    w = round(100 * min(max(value, 0.0), 1.0))
    return (f"<span class='bar'><span style='width:{w}%;background:{color}'></span></span> {fmt(value)}")


_CSS = f"""
body {{ font-family: system-ui, 'Noto Sans CJK SC', 'Microsoft YaHei', sans-serif; margin: 24px; color: #111; }}
table {{ border-collapse: collapse; font-size: 13px; width: 100%; }}
td, th {{ border: 1px solid #ddd; padding: 3px 6px; vertical-align: top; text-align: left; }}
.cols {{ display: flex; gap: 12px; align-items: flex-start; }}
.col {{ flex: 1; min-width: 0; }}
.snip {{ color: #444; font-size: 12px; }}
.up {{ color: #1B7F3B; font-weight: bold; }} .down {{ color: #B3261E; font-weight: bold; }}
.chip {{ border-radius: 8px; padding: 1px 7px; margin: 2px; display: inline-block; }}
.chip.A {{ background: {COLOR_A}; }} .chip.B {{ background: {COLOR_B}; }}
.meta {{ color: #555; font-size: 12px; }}
.cite {{ color: #1F5FBF; }} .cite.bad {{ color: #B3261E; text-decoration: line-through; }}
.bar {{ display: inline-block; width: 80px; height: 9px; background: #eee; }}
.bar span {{ display: block; height: 9px; }}
.why {{ border: 1px solid #eee; padding: 4px 10px; margin: 6px 0; }}
"""
