"""The library's own gate (documents that echo another's key terms, no generator).

``echo_partners`` is checked against a slow all-pairs reference; the libraries are real ingests
(the embedded e5-small, jieba) of texts with and without echoes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from library_helpers import ingest_texts

from rag_desktop.app import self_gate
from rag_desktop.app.service import RagService
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Keyword

DOCS = {
    "brakes.txt": "Bicycle brakes\n\nRim brakes squeeze the wheel rim with two rubber pads pulled by a cable. "
                  "Disc brakes grip a steel rotor bolted to the hub and keep working in the rain. "
                  "Check the pads every month and replace them when the grooves are worn away.",
    "roses.txt": "Pruning roses\n\nCut each cane just above an outward-facing bud in late winter. "
                 "Remove dead, damaged and crossing stems first, then thin the centre for air. "
                 "Feed the plant with a balanced fertiliser once new shoots appear in spring.",
    "bread.txt": "Sourdough bread\n\nA starter of flour and water ferments for a week before the first bake. "
                 "Mix the dough, let it rest for an hour, then fold it every thirty minutes. "
                 "Bake the loaf in a covered pot so the steam lets the crust expand before it sets.",
    "tax_zh.txt": "个人所得税\n\n居民个人的综合所得以每一纳税年度的收入额减除费用六万元后的余额为应纳税所得额。"
                  "专项附加扣除包括子女教育、继续教育、大病医疗、住房贷款利息和住房租金等支出。"
                  "纳税人应当在取得所得的次年三月一日至六月三十日内办理汇算清缴。"
                  "扣缴义务人每月或者每次预扣代扣的税款，应当在次月十五日内缴入国库，并向税务机关报送扣缴个人所得税申报表。",
}


# Passages that restate a question about one of the documents and answer nothing: the regime the
# re-ranker exists for (docs/architecture.md, "The calibration gate").
ECHOES = {
    "echo_brakes.txt": "Bicycle brakes, asked again\n\nMany readers ask about rubber pads that grip the rim, the "
                       "rotor bolted to the hub, grooves worn away, checks every month, the cable pull and brakes "
                       "in the rain. It comes up often in discussions.",
    "echo_roses.txt": "Pruning roses, asked again\n\nMany readers ask about outward-facing buds, dead, damaged and "
                      "crossing stems, air in the centre, feeding the plant with fertiliser and new shoots. It comes "
                      "up often in discussions.",
    "echo_bread.txt": "Sourdough bread, asked again\n\nMany readers ask about flour and water, mixing the dough, "
                      "the hour of rest, folds every thirty minutes, steam and a crust that must expand. It comes "
                      "up often in discussions.",
}


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> RagService:
    return ingest_texts(tmp_path_factory.mktemp("selfgate"), DOCS)


def _slow_partners(kws: dict[int, list[Keyword]]) -> dict[int, tuple[int, float]]:
    """cov(e, d) over every ordered pair, straight from the module docstring's formula."""
    out: dict[int, tuple[int, float]] = {}
    terms = {k.term for ks in kws.values() for k in ks}
    named_by = {t: sum(t in {k.term for k in ks} for ks in kws.values()) for t in terms}
    for e in sorted(kws):
        total = sum(k.weight for k in kws[e])
        best: tuple[int, float] | None = None
        for d in sorted(kws):
            if d == e or total <= 0:
                continue
            names = {k.term for k in kws[d]}
            c = sum(k.weight / (named_by[k.term] - 1) for k in kws[e] if k.term in names) / total
            if c > 0 and (best is None or c > best[1] + 1e-12):
                best = (d, c)
        if best is not None:
            out[e] = best
    return out


def test_echo_partners_match_the_all_pairs_reference() -> None:
    rng = np.random.default_rng(7)
    vocab = [f"t{i}" for i in range(40)]
    for _ in range(20):
        kws = {doc: [Keyword(str(t), float(w)) for t, w in zip(rng.choice(vocab, size=int(rng.integers(0, 9)),
                                                                          replace=False),
                                                               rng.uniform(0.1, 2.0, size=9), strict=False)]
               for doc in range(int(rng.integers(1, 12)))}
        fast, slow = self_gate.echo_partners(kws), _slow_partners(kws)
        assert fast.keys() == slow.keys()
        for e, (d, c) in fast.items():
            assert d == slow[e][0] and c == pytest.approx(slow[e][1])


def test_the_decision_follows_the_echo_share_with_its_bootstrap() -> None:
    n = 40
    none = self_gate.decide(n, {i: (i + 1, 0.3) for i in range(n - 1)}, fingerprint="a", seconds=0.0)
    assert none is not None and none.decision == "neither" and none.echo_share == 0.0
    assert none.reliability == 1.0 and none.labels == self_gate.SELF_LABELS and none.n_probes == n
    many = self_gate.decide(n, {i: (i + 1, 0.9) for i in range(12)}, fingerprint="b", seconds=0.0)
    assert many is not None and many.decision == "hybrid" and many.echo_share == pytest.approx(0.3)
    assert many.reliability > 0.95 and many.echoes[0] == (0, 1, 0.9) and len(many.echoes) == self_gate.N_EXAMPLES
    # at the threshold a resample falls on either side about half the time
    edge = self_gate.decide(n, {i: (i + 1, 0.4) for i in range(4)}, fingerprint="c", seconds=0.0)
    assert edge is not None and edge.decision == "hybrid" and 0.3 < edge.reliability < 0.8
    assert self_gate.decide(0, {}, fingerprint="d", seconds=0.0) is None
    assert many.to_json()["echoes"][0] == [0, 1, 0.9] and many.to_json()["fingerprint"] == "b"


def test_a_library_without_echoes_keeps_the_baseline_with_no_generator(svc: RagService) -> None:
    rec = self_gate.self_calibrate(svc.retriever(), "fp")
    assert rec is not None and svc.runtime._generator is None  # nothing asked a model
    assert rec.decision == "neither" and rec.echo_share == 0.0 and rec.n_probes == len(DOCS)
    assert rec.fingerprint == "fp" and rec.metric == self_gate.ECHO_METRIC


def test_passages_that_restate_a_subject_turn_the_hybrid_on(tmp_path: Path) -> None:
    lib = ingest_texts(tmp_path, DOCS | ECHOES)
    try:
        rec = self_gate.self_calibrate(lib.retriever(), "fp")
        assert rec is not None and rec.decision == "hybrid"
        paths = {d.doc_id: Path(d.path).name for d in lib.library.catalog.documents()}
        pairs = {(paths[e], paths[d]) for e, d, _ in rec.echoes}
        assert {("echo_brakes.txt", "brakes.txt"), ("echo_roses.txt", "roses.txt"),
                ("echo_bread.txt", "bread.txt")} <= pairs | {(b, a) for a, b in pairs}
    finally:
        lib.close()


def test_an_empty_library_has_no_decision(tmp_path: Path) -> None:
    empty = RagService(tmp_path / "lib", Settings())
    try:
        assert self_gate.self_calibrate(empty.retriever(), "fp") is None
    finally:
        empty.close()
