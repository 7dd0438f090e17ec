"""The automatic calibration gate: probes, judging, resume, cancel, re-calibration, verdict.

The retrieval (e5, jieba, FAISS), the pooling and the gate math are real; only the local model is a
scripted collaborator (it writes the probe from the words it is shown and answers by a fixed rule).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from library_helpers import ingest_texts

from rag_desktop.app import auto_gate, gate_probes, question_log
from rag_desktop.app.calibration import TOP, score_labels
from rag_desktop.app.library import IngestReport
from rag_desktop.app.service import RagService
from rag_desktop.core import metrics, replies
from rag_desktop.core.attribution import content_tokens
from rag_desktop.core.gate import calibrate
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import Cancelled, CancelToken, ChatMessage, GenEvent, GenEventKind, Hit, Keyword, Progress

TEXTS = {
    "guide.txt": "Checking a bicycle brake\n\nSqueeze the lever: the pads must meet the rim before the lever "
    "touches the bar. Replace pads thinner than 1 mm and re-centre the caliper with the barrel adjuster.",
    "notice.txt": "Bicycle brake workshop: checking a bicycle brake\n\nOur bicycle brake workshop is about "
    "checking a bicycle brake. Bring your bicycle; bicycle brake questions welcome at the bicycle brake day.",
    "bread.txt": "Baking sourdough bread\n\nFeed the starter the night before, mix flour and water, rest an "
    "hour, add salt, fold four times, shape, proof overnight in the fridge and bake at 250 degrees.",
    "bread_club.txt": "Sourdough bread club news\n\nThe sourdough bread club meets monthly to talk about "
    "sourdough bread, baking sourdough bread and more sourdough bread.",
    "tea.txt": "Brewing green tea\n\nUse water at 75 to 80 degrees, two grams of leaves per cup, and steep "
    "for two minutes; hotter water makes the tea bitter.",
    "tide.txt": "Reading a tide table\n\nHigh and low water are listed with their heights; the rule of "
    "twelfths estimates the height between them.",
}
ANSWERS = {"guide.txt", "bread.txt", "tea.txt", "tide.txt"}  # what the scripted judge accepts


class ScriptedModel:
    """The local model as a collaborator: probe = the shown words as a question; answer: the body of the
    answering document (recognised by its first words) whose topic shares a word with the question."""

    identity = "scripted"
    n_ctx = 4096

    def __init__(self, fail_after: int | None = None, on_call: object = None) -> None:
        self.calls: list[str] = []
        self.fail_after = fail_after
        self.on_call = on_call

    def load(self) -> None:
        pass

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def close(self) -> None:
        pass

    def reply(self, prompt: str) -> str:
        if _is_answer(prompt) or _is_quote(prompt):
            # Answers (or quotes) from the answering document it is shown (ScriptedModel's rule), wherever it stands.
            q = prompt.split("Question: ", 1)[1].split("\n", 1)[0].lower()
            shown = re.findall(r"Document \d+: (.*)\n(.*)", prompt)
            for title, body in shown:
                if self._accepts(q, title):
                    return body
            return prompt.split("Question: ", 1)[1].split("\n", 1)[0]  # restates the question
        if "learn about: " in prompt:  # a topic probe: only the shared words are shown
            return f"Question: how does {prompt.split('learn about: ', 1)[1].split(chr(10), 1)[0]} work?"
        if "想了解“" in prompt:  # the Chinese topic probe
            return f"{_zh_topic(prompt)}怎么办？"
        heads = prompt.split("\n\n")[1].splitlines()
        return f"Question: how does {heads[0].lower()} work?"

    @staticmethod
    def _accepts(q: str, title: str) -> bool:
        answering = any(TEXTS[n].startswith(title) for n in ANSWERS)
        shared = set(re.findall(r"[a-z]+", q)) & set(re.findall(r"[a-z]+", title.lower())) - {"a", "the"}
        return answering and bool(shared)

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        self.calls.append(messages[-1].content)
        if self.fail_after is not None and len(self.calls) > self.fail_after:
            raise RuntimeError("the model process died")
        if callable(self.on_call):
            self.on_call(len(self.calls))
        yield GenEvent(GenEventKind.TOKEN, self.reply(messages[-1].content))
        yield GenEvent(GenEventKind.DONE, finish_reason="stop")


def _zh_topic(prompt: str) -> str:
    """The words a Chinese topic prompt shows."""
    return prompt.split("想了解“", 1)[1].split("”", 1)[0]


def _probe_calls(model: ScriptedModel) -> int:
    return sum(1 for c in model.calls if not (_is_answer(c) or _is_quote(c)))


def _is_answer(prompt: str) -> bool:
    return "Question: " in prompt and "Answer the question in one short sentence" in prompt


def _is_quote(prompt: str) -> bool:
    return "Question: " in prompt and "Copy the one sentence from the documents above" in prompt


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("autogate")
    svc = ingest_texts(root, TEXTS, Settings().replace("retrieval", default_method="gated"))
    svc.close()
    return root


@pytest.fixture()
def svc(built: Path, tmp_path: Path) -> Iterator[RagService]:
    shutil.copytree(built / "library", tmp_path / "library")
    s = RagService(tmp_path / "library", Settings().replace("retrieval", default_method="gated"))
    yield s
    s.close()


CFG = auto_gate.AutoGateConfig(n_probes=5, pool=3)
ANSWER = auto_gate.AutoGateConfig(n_probes=5, pool=1)


def _run(svc: RagService, model: ScriptedModel, cancel: CancelToken | None = None,
         config: auto_gate.AutoGateConfig = CFG) -> list[object]:
    return list(auto_gate.run_auto_gate(svc, generator=model, config=config, cancel=cancel))


# --------------------------------------------------------------------------- judging logic


def test_clean_question() -> None:
    assert replies.clean_question('\n"Question: How do I check a brake?"\nmore') == "How do I check a brake?"
    assert replies.clean_question("问题：如何评估？") == "如何评估？"
    assert replies.clean_question("1. 失眠怎么办？") == "失眠怎么办？"  # the 1.5B numbers one question
    assert replies.clean_question("2) How do brakes work?") == "How do brakes work?"
    assert replies.clean_question("5G是什么？") == "5G是什么？"



class Reply(ScriptedModel):
    """The local model as a collaborator that gives the same reply to every prompt."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def reply(self, prompt: str) -> str:
        return self.text


def test_a_degenerate_probe_is_replaced_by_the_title() -> None:
    title = "数据出境安全评估工作指引"
    assert gate_probes.write_probe(Reply("什么？"), title, [], 0) == title  # seen with the 1.5B
    assert gate_probes.write_probe(Reply(""), title, [], 0) == title
    assert gate_probes.write_probe(Reply("Why?"), "Checking a bicycle brake", [], 0) == "Checking a bicycle brake"
    assert gate_probes.write_probe(Reply("如何评估数据出境的安全？"), title, [], 0) == "如何评估数据出境的安全？"
    assert gate_probes.write_probe(Reply("How do brakes work?"), "Brakes", [], 0) == "How do brakes work?"


def test_heading_lines_keep_short_title_like_lines() -> None:
    text = "Report 2025\n\n## Scope\nThis sentence ends with a period.\nMethods and data\n" + "x" * 80
    assert gate_probes.heading_lines(text, "Report 2025", 3) == ["## Scope", "Methods and data"]


# --------------------------------------------------------------------------- a full run


def test_run_decides_from_pooled_judgements_and_stores_how(svc: RagService) -> None:
    model = ScriptedModel()
    events = _run(svc, model)
    decision = events[-1]
    assert isinstance(decision, auto_gate.GateDecision)
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None and st["status"] == "done" and len(st["probes"]) == 5
    # The judge saw exactly the pooled top-3 of the three rankings, never a document outside it.
    r = svc.retriever()
    for p in st["probes"]:
        ctx = r.context(p["question"], "doc")
        pool: list[int] = []
        for ranked in (ctx.baseline, r.rerank(ctx, "causal")[0], r.rerank(ctx, "hybrid")[0]):
            pool += [h.doc_id for h in ranked.hits[:3] if h.doc_id not in pool]
        if p["agreed"]:  # the three rankings share their top 3: delta 0 whatever the label, no judge call
            assert p["judged"] == [] and p["relevant"] == pool[:1]
            assert len({tuple(x[:3]) for x in p["rankings"].values()}) == 1
        else:
            assert p["judged"] == pool
        assert set(p["relevant"]) <= set(pool)
        assert p["rankings"]["baseline"] == [h.doc_id for h in ctx.baseline.hits[:TOP]]
    # The decision is the §4.6 gate on MRR@10 of the judged labels, recomputed here by hand.
    scored = [p for p in st["probes"] if p["relevant"]]
    per = {m: [metrics.reciprocal_rank_at_k(p["rankings"][m], {d: 1.0 for d in p["relevant"]}, 10) for p in scored]
           for m in ("baseline", "causal", "hybrid")}
    expect = calibrate(per["baseline"], per["causal"], per["hybrid"], metric="MRR@10", seed=0)
    assert decision == expect
    gate = svc.library.catalog.get_json("gate")
    assert gate["decision"] == expect.decision and gate["n_probes"] == len(scored)
    assert gate["labels"] == auto_gate.LABELS_ANSWER and gate["calibrated_at"]
    assert gate["fingerprint"] == auto_gate.fingerprint(svc.library.catalog)
    assert gate["n_unlabelled"] == 5 - len(scored)
    assert auto_gate.needs_calibration(svc.library.catalog) is None
    # The probes were written from titles and headings only, never from a document's body.
    for c in model.calls:
        if not (_is_answer(c) or _is_quote(c)):
            assert "Squeeze the lever" not in c and "Feed the starter" not in c


def test_score_labels_agrees_with_stored_state(svc: RagService) -> None:
    _run(svc, ScriptedModel())
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None
    d1 = auto_gate.decide_from_state(st)
    items = []
    from rag_desktop.app.calibration import Probe, ProbeCandidates

    for p in st["probes"]:
        rankings = tuple((m, tuple(p["rankings"][m])) for m in ("baseline", "causal", "hybrid"))
        items.append(ProbeCandidates(Probe(p["question"], frozenset(p["relevant"]), "generated"), rankings, ()))
    assert score_labels(items).decision == d1


# --------------------------------------------------------------------------- crash, cancel, resume


def test_crash_midway_resumes_where_it_stopped(svc: RagService, built: Path, tmp_path: Path) -> None:
    crashing = ScriptedModel(fail_after=9)
    with pytest.raises(RuntimeError, match="died"):
        _run(svc, crashing)
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None and st["status"] == "failed" and "died" in st["error"]
    done = len(st["probes"])
    assert 0 < done < 5
    assert svc.library.catalog.get_json("gate") is None  # no half decision
    resumed = ScriptedModel()
    decision = _run(svc, resumed)[-1]
    assert _probe_calls(resumed) == 5 - done  # the finished probes were not written again
    # Same decision as a run that never crashed.
    shutil.copytree(built / "library", tmp_path / "fresh")
    fresh = RagService(tmp_path / "fresh", Settings())
    try:
        assert _run(fresh, ScriptedModel())[-1] == decision
    finally:
        fresh.close()


def test_a_killed_run_shows_as_interrupted_and_is_restarted(svc: RagService, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = svc.library.catalog
    with pytest.raises(RuntimeError):
        _run(svc, ScriptedModel(fail_after=3))
    st = auto_gate.load_state(cat)
    assert st is not None
    st.update(status="running", pid=2**22 + 12345)  # a process that no longer exists (kill -9)
    auto_gate._save_state(cat, st)
    assert auto_gate.progress(cat)["status"] == "interrupted"
    started: list[list[str]] = []

    class FakePopen:  # the OS process launcher is the collaborator here
        def __init__(self, cmd: list[str], **kw: object) -> None:
            started.append(cmd)
            self.pid = 4242

    monkeypatch.setattr(auto_gate.subprocess, "Popen", FakePopen)
    monkeypatch.delenv(auto_gate.NO_BACKGROUND_ENV, raising=False)
    assert auto_gate.start_background(svc.library.folder, cat) == 4242
    assert started and started[0][-3:] == ["--auto", "--library", str(svc.library.folder)]


def test_cancel_by_token_and_through_the_catalog(svc: RagService) -> None:
    token = CancelToken()
    model = ScriptedModel(on_call=lambda n: token.set() if n == 4 else None)
    with pytest.raises(Cancelled):
        _run(svc, model, cancel=token)
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None and st["status"] == "cancelled"
    # Another process asks through the catalog (a second connection, as `calibrate --cancel` does).
    from rag_desktop.app.catalog import Catalog

    other = Catalog(svc.library.folder / "catalog.sqlite")

    def ask(n: int) -> None:
        if n == 2:
            st2 = auto_gate.load_state(other)
            assert st2 is not None and st2["status"] == "running"
            auto_gate.request_cancel(other)

    try:
        with pytest.raises(Cancelled):
            _run(svc, ScriptedModel(on_call=ask))
    finally:
        other.close()
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None and st["status"] == "cancelled"
    # And it resumes (the cancel flag is cleared by the next start).
    decision = _run(svc, ScriptedModel())[-1]
    assert isinstance(decision, auto_gate.GateDecision)


# --------------------------------------------------------------------------- when to re-calibrate


def test_recalibration_after_enough_change(svc: RagService, tmp_path: Path) -> None:
    cat = svc.library.catalog
    assert auto_gate.needs_calibration(cat) == "never calibrated"
    _run(svc, ScriptedModel())
    assert auto_gate.needs_calibration(cat) is None
    extra = tmp_path / "more"
    extra.mkdir()
    (extra / "a.txt").write_text("Knots for sailing\n\nThe bowline makes a fixed loop.", encoding="utf-8")
    list(svc.ingest([extra]))
    assert auto_gate.change_fraction(cat.get_json("gate")["fingerprint"], auto_gate.fingerprint(cat)) == 1 / 7
    assert auto_gate.needs_calibration(cat) is None  # one new document in seven: below a fifth
    (extra / "b.txt").write_text("Pruning roses\n\nCut above an outward bud in late winter.", encoding="utf-8")
    list(svc.ingest([extra]))
    assert auto_gate.needs_calibration(cat) == "25% of the documents changed since the last calibration"
    # A wizard decision (the user's own labels, no fingerprint) is never replaced automatically.
    cat.set_json("gate", {k: v for k, v in cat.get_json("gate").items() if k != "fingerprint"})
    assert auto_gate.needs_calibration(cat) is None
    # ...but one the removed passage-written calibration stored (no fingerprint either) is replaced.
    cat.set_json("gate", {**cat.get_json("gate"), "labels": auto_gate.PASSAGE_LABELS})
    assert auto_gate.needs_calibration(cat) == "decided by the removed passage-written calibration"


def test_ingest_hook_starts_background_only_when_asked(svc: RagService, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    monkeypatch.setattr(auto_gate, "start_background", lambda folder, cat, force=False: calls.append(force) or 7)
    extra = tmp_path / "more"
    extra.mkdir()
    (extra / "a.txt").write_text("Knots for sailing\n\nThe bowline makes a fixed loop.", encoding="utf-8")
    last = list(svc.ingest([extra]))[-1]
    assert isinstance(last, IngestReport) and calls == []
    (extra / "b.txt").write_text("Pruning roses\n\nCut above an outward bud in late winter.", encoding="utf-8")
    list(svc.ingest([extra], calibrate_after=True))
    assert calls == []  # the model-judged gate runs after an ingest only when asked for in the settings
    svc.update_settings(svc.settings.replace("retrieval", auto_calibrate=True))
    try:
        (extra / "c.txt").write_text("Tying a reef knot\n\nRight over left, left over right.", encoding="utf-8")
        list(svc.ingest([extra], calibrate_after=True))
        assert calls == [False]
    finally:
        svc.update_settings(svc.settings.replace("retrieval", auto_calibrate=False))


# --------------------------------------------------------------------------- the verdict


def test_verdict_until_and_after_calibration(svc: RagService) -> None:
    q = "how do I check a bicycle brake"
    c = svc.compare(q)
    assert c.verdict["shown"] == "hybrid" and c.verdict["reason"] == "not_calibrated"
    assert "not calibrated yet" in c.verdict["text"]
    assert c.causal_variant == "hybrid"
    cat = svc.library.catalog
    gate = calibrate([1.0] * 12, [0.5] * 12, [0.5] * 12, metric="MRR@10").to_dict()
    gate.update(labels=auto_gate.LABELS_ANSWER, calibrated_at="2026-12-01T15:00:00+00:00")
    cat.set_json("gate", gate)
    c = svc.compare(q)
    # the gate decides what the answers read; the column still shows its own re-ranked order
    assert c.verdict["shown"] == "hybrid" and c.verdict["answer"] == "baseline" and c.answer_ranking == "baseline"
    assert c.verdict["decision"] == "neither"
    assert c.verdict["n_probes"] == 12 and c.verdict["reliability"] == 1.0
    assert c.verdict["text"].startswith("Re-ranking would hurt on this library (12 probes, 100% reliable)")
    assert c.causal.method == "hybrid"
    assert [h.unit_id for h in c.causal.hits] == [h.unit_id for h in svc.retriever().rerank(
        svc.context(q), "hybrid")[0].hits]
    assert any(e.split is not None for e in c.causal.explanations)  # the chips stay inspectable
    # The person overrides it for one question.
    o = svc.compare(q, ranking="causal")
    assert o.verdict["shown"] == "causal" and o.verdict["reason"] == "override" and o.causal.method == "causal"
    with pytest.raises(ValueError, match="unknown ranking"):
        svc.compare(q, ranking="cfrag")
    js = c.to_json()
    assert js["verdict"]["shown"] == "hybrid" and js["answer_ranking"] == "baseline"


def test_progress_of_an_idle_library(svc: RagService) -> None:
    assert auto_gate.progress(svc.library.catalog) == {"status": "idle", "done": 0, "total": 0}
    assert isinstance(Progress("calibrate", 0, 1), Progress)
    assert np.isfinite(auto_gate.change_fraction([], []))


def test_cli_compare_json_says_what_the_column_shows(svc: RagService, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from rag_desktop.cli import main

    folder = str(svc.library.folder)
    gate = calibrate([0.5] * 12, [1.0] * 12, [0.8] * 12, metric="MRR@10").to_dict()
    gate.update(labels=auto_gate.LABELS_ANSWER, calibrated_at="2026-12-01T15:00:00+00:00")
    svc.library.catalog.set_json("gate", gate)
    svc.close()
    assert main(["compare", "how do I check a bicycle brake", "--library", folder, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["causal_variant"] == "causal" and out["causal"]["method"] == "causal"
    v = out["verdict"]
    assert v["shown"] == "causal" and v["reason"] == "gate" and v["decision"] == "causal"
    assert v["n_probes"] == 12 and v["reliability"] == 1.0 and v["labels"] == auto_gate.LABELS_ANSWER
    assert v["text"].startswith("Re-ranking helps on this library (12 probes, 100% reliable)")
    assert main(["compare", "how do I check a bicycle brake", "--library", folder, "--json",
                 "--ranking", "baseline"]) == 0
    out = json.loads(capsys.readouterr().out)
    # a per-question override is the person's choice, not the gate's: method "baseline" ("gated_off"
    # is kept for the gate's own decision, which the UI words differently)
    assert out["verdict"]["reason"] == "override" and out["causal"]["method"] == "baseline"
    assert out["causal_off"]["code"] == "chosen"


def test_the_persons_questions_become_probes_and_trigger_recalibration(svc: RagService) -> None:
    cat = svc.library.catalog
    asked = ["how do I check a bicycle brake", "what temperature for green tea", "how do I check a bicycle brake"]
    for q in asked:
        svc.compare(q)
    n, recent = question_log.question_log(cat)
    assert n == 3 and recent == ["what temperature for green tea", "how do I check a bicycle brake"]
    model = ScriptedModel()
    _run(svc, model)  # 5 probes: the 2 most recent questions (5 // 2) and 3 from titles
    st = auto_gate.load_state(cat)
    assert st is not None
    assert st["plan"][:2] == recent and all(isinstance(e, int) for e in st["plan"][2:])
    sources = [p["source"] for p in st["probes"]]
    assert sources[:2] == ["asked", "asked"] and set(sources[2:]) <= {"topic", "title"}
    assert [p["question"] for p in st["probes"][:2]] == recent
    assert _probe_calls(model) == 3  # the model writes only the document probes
    gate = cat.get_json("gate")
    assert gate["n_asked"] == 2 and gate["questions_logged"] == 3
    assert auto_gate.needs_calibration(cat) is None
    for i in range(auto_gate.RECALIBRATE_QUESTIONS - 1):
        question_log.log_question(cat, f"question {i}")
    assert auto_gate.needs_calibration(cat) is None
    question_log.log_question(cat, "one more question")
    assert auto_gate.needs_calibration(cat) == "20 new questions since the last calibration"


def _doc_id(svc: RagService, name: str) -> int:
    return next(d.doc_id for d in svc.library.catalog.documents() if Path(d.path).name == name)


def test_the_persons_cited_and_opened_documents_label_their_questions(svc: RagService) -> None:
    cat = svc.library.catalog
    brake, tea = "how do I check a bicycle brake", "what temperature for green tea"
    for q in (brake, tea, "what is the rule of twelfths"):
        svc.compare(q)
    guide, notice, tea_doc = _doc_id(svc, "guide.txt"), _doc_id(svc, "notice.txt"), _doc_id(svc, "tea.txt")
    svc.note_relevant(brake, [guide], "cited")
    svc.note_relevant(f"  {brake} ", [guide, notice], "opened")  # spacing as typed: the same question
    svc.note_relevant(tea, [tea_doc], "opened")
    svc.note_relevant("a question never asked here", [guide], "cited")  # not a probe of this library: ignored
    with pytest.raises(ValueError, match="unknown label kind"):
        question_log.log_label(cat, brake, [guide], "liked")
    assert question_log.user_labels(cat) == {brake: sorted([guide, notice]), tea: [tea_doc]}
    model = ScriptedModel()
    _run(svc, model, config=ANSWER)
    st = auto_gate.load_state(cat)
    assert st is not None
    # The labelled questions come first (in the order asked), then the unlabelled one fills the
    # asked half (5 // 2 = 2 is already reached, so none), then titles.
    assert st["plan"][:2] == [brake, tea] and all(isinstance(e, int) for e in st["plan"][2:])
    by_q = {p["question"]: p for p in st["probes"]}
    assert by_q[brake]["relevant"] == sorted([guide, notice]) and by_q[brake]["user_labelled"]
    assert by_q[tea]["relevant"] == [tea_doc] and not by_q[tea]["agreed"]
    # No model call judged the labelled questions: every answer prompt is about a title probe.
    assert not any(brake in c or tea in c for c in model.calls)
    gate = cat.get_json("gate")
    assert gate["n_user_labelled"] == 2 and gate["labels_logged"] == 3
    assert gate["labels"].startswith(auto_gate.LABELS_USER + " on 2 of 5 probes")
    # The gate scored the person's labels as given: MRR@10 of the labelled documents in each ranking.
    p = by_q[brake]
    rr = {m: metrics.reciprocal_rank_at_k(p["rankings"][m], dict.fromkeys(p["relevant"], 1.0), 10)
          for m in ("baseline", "causal", "hybrid")}
    assert rr["baseline"] > 0
    # Five more labelled answers (a new document each time) ask for a new decision.
    assert auto_gate.needs_calibration(cat) is None
    for i, name in enumerate(["bread.txt", "bread_club.txt", "tide.txt", "tea.txt", "guide.txt"][:4]):
        svc.note_relevant(brake, [_doc_id(svc, name)], "cited" if i % 2 else "opened")
    assert auto_gate.needs_calibration(cat) is None  # 4 < RECALIBRATE_LABELS
    svc.note_relevant(tea, [guide], "cited")
    assert auto_gate.needs_calibration(cat) == "5 new answers cited or documents opened since the last calibration"
    # Repeating a label is not news.
    n = cat.get_json(question_log.QUESTION_LOG_KEY)["n_labels"]
    svc.note_relevant(tea, [guide], "cited")
    assert cat.get_json(question_log.QUESTION_LOG_KEY)["n_labels"] == n


def test_labels_survive_the_questions_asked_after_them(svc: RagService) -> None:
    """A person asks, opens a result, asks the next question: the first one keeps its label (the
    walkthrough found each new question wiping every earlier label). A question that falls out of
    the recent log takes its labels with it."""
    cat = svc.library.catalog
    brake, tea = "how do I check a bicycle brake", "what temperature for green tea"
    guide, tea_doc = _doc_id(svc, "guide.txt"), _doc_id(svc, "tea.txt")
    svc.compare(brake)
    svc.note_relevant(brake, [guide], "opened")
    svc.compare(tea)
    svc.note_relevant(tea, [tea_doc], "cited")
    svc.compare(brake)  # asked again: still one question, still labelled
    assert question_log.user_labels(cat) == {brake: [guide], tea: [tea_doc]}
    assert cat.get_json(question_log.QUESTION_LOG_KEY)["n_labels"] == 2
    for i in range(question_log.QUESTION_LOG_MAX - 1):
        question_log.log_question(cat, f"question {i}")
    assert question_log.user_labels(cat) == {brake: [guide]}  # tea fell out of the recent log
    assert cat.get_json(question_log.QUESTION_LOG_KEY)["n_labels"] == 2  # the count of labels given stays


def test_enough_labelled_questions_make_the_whole_plan(svc: RagService) -> None:
    """With labels on at least half the plan's probes, no title probe is written or judged."""
    cat = svc.library.catalog
    qs = ["how do I check a bicycle brake", "what temperature for green tea", "how do I bake bread"]
    docs = [_doc_id(svc, "guide.txt"), _doc_id(svc, "tea.txt"), _doc_id(svc, "bread.txt")]
    for q, d in zip(qs, docs, strict=True):
        svc.compare(q)
        svc.note_relevant(q, [d], "cited")
    assert gate_probes.make_plan(cat, 5, seed=0) == qs  # 3 of 5 labelled: theirs alone
    assert gate_probes.make_plan(cat, 7, seed=0)[:3] == qs and len(gate_probes.make_plan(cat, 7, seed=0)) == 7
    model = ScriptedModel()
    _run(svc, model)
    st = auto_gate.load_state(cat)
    assert st is not None and [p["source"] for p in st["probes"]] == ["asked"] * 3
    assert _probe_calls(model) == 0 and not model.calls  # no probe written, none judged


def test_labels_of_a_removed_document_are_not_used(svc: RagService) -> None:
    cat = svc.library.catalog
    svc.compare("how do I check a bicycle brake")
    guide = _doc_id(svc, "guide.txt")
    svc.note_relevant("how do I check a bicycle brake", [guide, 999_999], "opened")
    assert question_log.user_labels(cat) == {"how do I check a bicycle brake": [guide]}


def test_only_user_labelled_probes_say_so() -> None:
    assert auto_gate._labels_text(auto_gate.LABELS_ANSWER, 0, 5) == auto_gate.LABELS_ANSWER
    assert auto_gate._labels_text(auto_gate.LABELS_ANSWER, 5, 5) == auto_gate.LABELS_USER


# --------------------------------------------------------------------------- probe sampling


def test_stuffing_signal_ranks_the_documents_that_repeat_their_title(svc: RagService) -> None:
    cat = svc.library.catalog
    r = svc.retriever()
    sc = gate_probes.stuffing_scores(cat, lambda t: r.query_keywords(t, "doc"))
    by_name = {Path(d.path).name: sc[d.doc_id] for d in cat.documents()}
    # The notice and the club news repeat their title's words; the guide and the recipe spend theirs on the answer.
    assert by_name["notice.txt"] > by_name["guide.txt"] and by_name["bread_club.txt"] > by_name["bread.txt"]
    assert max(by_name, key=by_name.__getitem__) in {"notice.txt", "bread_club.txt"}
    # A plan of 4 documents: the 2 strongest signals first, then a seeded random 2 of the rest.
    plan = gate_probes.make_plan(cat, 4, 0, lambda t: r.query_keywords(t, "doc"))
    names = [Path(d.path).name for e in plan for d in cat.documents() if d.doc_id == e]
    assert set(names[:2]) == {"notice.txt", "bread_club.txt"} and len(set(names)) == 4
    assert plan == gate_probes.make_plan(cat, 4, 0, lambda t: r.query_keywords(t, "doc"))  # stable
    # The run hands the plan the term counts it shares with its subject probes: the same plan, one sum.
    calls: list[int] = []

    def counts() -> dict[int, dict[str, int]]:
        calls.append(1)
        return gate_probes.document_term_counts(cat)

    assert gate_probes.make_plan(cat, 4, 0, lambda t: r.query_keywords(t, "doc"), counts) == plan and calls == [1]


# --------------------------------------------------------------------------- the answer judge


def _disputed_after_run(svc: RagService, model: ScriptedModel, config: auto_gate.AutoGateConfig) -> list[dict]:
    """Run the gate; the probes a judge labelled (the rankings disagreed, no label of the person's)."""
    _run(svc, model, config=config)
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None
    disputed = [p for p in st["probes"] if not p["agreed"] and not p["user_labelled"]]
    assert disputed
    return disputed


def _support_reference(answer: str, question: str, shown: Sequence[str]) -> list[float]:
    """support() written out plainly: the answer's content words minus the question's, and per
    document the fraction of them its text holds."""
    from rag_desktop.core.attribution import content_tokens

    q_words = content_tokens(question)
    own = [w for w in content_tokens(answer) if w not in q_words]
    out = []
    for text in shown:
        held = [w for w in own if w in content_tokens(text)]
        out.append(len(held) / len(own) if own else 0.0)
    return out


@pytest.mark.parametrize("answer, question, shown", [
    ("Tomas Rehn plays the protagonist.", "Who plays the protagonist of The Glass Harbour?",
     ["The Glass Harbour: Tomas Rehn plays Brandt, the protagonist.", "Many readers ask who plays the protagonist "
      "of The Glass Harbour. This question comes up often."]),
    ("个人信息保护影响评估的步骤包括梳理处理活动、识别风险源、形成报告。", "个人信息保护影响评估怎么做？",
     ["实施步骤：梳理处理活动，分析合法性基础，识别风险源，制定措施，形成报告和整改计划。",
      "某平台发布个人信息保护影响评估年度报告，强调个人信息保护影响评估的重要性。"]),
    ("How do brakes work?", "How do brakes work?", ["Brakes work by friction.", "Bicycle brake day"]),
    ("", "Why?", ["anything"]),
])
def test_support_agrees_with_the_plain_reference(answer: str, question: str, shown: list[str]) -> None:
    got = auto_gate.support(answer, question, shown)
    assert got == pytest.approx(_support_reference(answer, question, shown))


def test_support_ignores_the_question_words_a_stuffed_document_repeats() -> None:
    q = "Who plays the protagonist of The Glass Harbour?"
    answering = "The Glass Harbour is a 2019 film. Tomas Rehn plays Brandt, the film's protagonist."
    restating = "Many readers ask: Who plays the protagonist of the 2019 film The Glass Harbour? It comes up often."
    shares = auto_gate.support("Tomas Rehn plays the protagonist of The Glass Harbour.", q, [answering, restating])
    assert shares[0] == 1.0 and shares[1] == 0.0
    # an answer that only restates the question holds no word of its own: no document is preferred
    assert auto_gate.support(q, q, [answering, restating]) == [0.0, 0.0]


def test_answer_support_asks_in_every_rotation_and_sums() -> None:
    class Echo(ScriptedModel):
        """Answers with the first shown document's body: a pure position bias."""

        def reply(self, prompt: str) -> str:
            self.prompts = [*getattr(self, "prompts", []), prompt]
            return re.findall(r"Document \d+: .*\n(.*)", prompt)[0]

    bodies = [("Tea", "steep green tea two minutes"), ("Tide", "rule of twelfths for heights"),
              ("Bread", "feed the starter overnight")]
    hits = [Hit(i, i, "doc", t, f"{i}.txt", 1, b, 0.5, i) for i, (t, b) in enumerate(bodies, start=1)]
    model = Echo()
    shares, answers = auto_gate.answer_support(model, "What is this?", hits, 400, 60, 0)
    # each document stood first once and was copied once: the position bias cancels into a tie
    assert shares == [1.0, 1.0, 1.0] and answers == [b for _t, b in bodies]
    firsts = [[t for t, _b in bodies if f": {t}\n" in prompt] for prompt in model.prompts]
    assert all(len(f) == 3 for f in firsts)
    orders = [sorted(ts, key=prompt.index) for ts, prompt in zip(firsts, model.prompts, strict=True)]
    assert orders == [["Tea", "Tide", "Bread"], ["Tide", "Bread", "Tea"], ["Bread", "Tea", "Tide"]]


def test_best_scored_keeps_ties() -> None:
    assert auto_gate.best_scored({3: 1.0, 4: 0.95, 5: 0.2}, 0.1) == [3, 4]
    assert auto_gate.best_scored({3: 1.0, 4: 0.85}, 0.1) == [3]
    assert auto_gate.best_scored({}, 0.1) == []


def test_answers_that_say_nothing_are_followed_by_a_quote_in_every_rotation() -> None:
    """Seen with the 1.5B on the demo sources: asked "如何评估数据出口安全？" it restated the question from
    both documents; asked for the documents' sentence that answers, it quoted the guideline."""
    press = Hit(1, 1, "doc", "青岚市召开数据出境安全评估工作推进会", "p.txt", 1,
                "4月17日，青岚市数据出境安全评估工作推进会在市行政中心召开，部署下一阶段重点任务。", 0.9, 1)
    guide = Hit(2, 2, "doc", "数据出境安全评估工作指引", "g.txt", 1,
                "组织应当先开展自查，准备申报材料，提交主管部门审查，取得结论后持续履行义务。", 0.8, 2)
    q = "如何评估数据出口安全？"

    class RestatesThenQuotes(ScriptedModel):
        def reply(self, prompt: str) -> str:
            if "摘录一句" in prompt:
                return "组织应当先开展自查，准备申报材料，提交主管部门审查。"
            return q

    model = RestatesThenQuotes()
    shares, answers = auto_gate.answer_support(model, q, [press, guide], 400, 60, 0, quote=True)
    assert answers[:2] == [q, q] and len(answers) == 4 and len(model.calls) == 4
    assert shares[1] > shares[0] + ANSWER.answer_tie  # the quoted sentence is the guideline's
    # without the fallback, or when an answer already said something, no quote is asked
    assert auto_gate.answer_support(RestatesThenQuotes(), q, [press, guide], 400, 60, 0)[0] == [0.0, 0.0]
    said = Reply("先开展自查，再准备申报材料。")
    shares, answers = auto_gate.answer_support(said, q, [press, guide], 400, 60, 0, quote=True)
    assert len(answers) == 2 and shares[1] > shares[0]


def test_answer_judge_is_the_default_and_labels_the_documents_holding_the_answer(svc: RagService) -> None:
    model = ScriptedModel()
    disputed = _disputed_after_run(svc, model, ANSWER)
    for p in disputed:
        # one answer per rotation, and as many quotes after them when the answers said nothing
        assert len(p["answers"]) in (len(p["judged"]), 2 * len(p["judged"]))
        assert set(p["scores"]) == {str(d) for d in p["judged"]}
        best = max(p["scores"].values())
        assert p["relevant"] == [d for d in p["judged"] if p["scores"][str(d)] >= best - ANSWER.answer_tie]
        for d in p["relevant"]:  # a labelled document holds the answer's words, or nothing was preferred
            doc = svc.library.catalog.document(d)
            assert doc is not None
            assert p["undecided"] or any(doc.title in c for c in model.calls if _is_answer(c))
    # one answering call per pooled document (its rotations)
    assert sum(1 for c in model.calls if _is_answer(c)) == sum(len(p["judged"]) for p in disputed)
    gate = svc.library.catalog.get_json("gate")
    assert gate["labels"] == auto_gate.LABELS_ANSWER
    assert gate["model_calls"] == len(model.calls)


def test_answer_judge_whose_answers_only_restate_the_question_cannot_tell_and_says_so(svc: RagService) -> None:
    class Restating(ScriptedModel):
        def reply(self, prompt: str) -> str:
            if _is_answer(prompt) or _is_quote(prompt):  # no word of its own: no document holds more of it
                return prompt.split("Question: ", 1)[1].split("\n", 1)[0]
            return super().reply(prompt)

    decision = _run(svc, Restating(), config=ANSWER)[-1]
    assert isinstance(decision, auto_gate.GateDecision) and decision.decision == "neither"
    gate = svc.library.catalog.get_json("gate")
    assert gate["n_undecided"] == 5 - gate["n_agreed"] > 0 and "could not tell" in auto_gate.describe(gate)


# --------------------------------------------------------------------------- topic probes


def test_topic_words_keep_the_shared_title_words_in_the_titles_order() -> None:
    kws = [Keyword("启动", 3.0), Keyword("活动", 2.5), Keyword("评估", 2.0), Keyword("个人信息", 1.5),
           Keyword("保护", 1.0), Keyword("影响", 0.8), Keyword("宣传周", 0.5), Keyword("怎么", 0.0)]
    df = {"启动": 2, "活动": 3, "评估": 5, "个人信息": 4, "保护": 6, "影响": 2, "宣传周": 1, "怎么": 9}
    title = "个人信息保护影响评估怎么做？宣传周活动启动"
    words = gate_probes.topic_words(title, kws, df, lambda t: t, 4)
    # 宣传周 is this document's alone (df 1), 怎么 carries no weight; the rest in the title's order
    assert words == ["个人信息", "保护", "影响", "评估"]
    everything = gate_probes.topic_words(title, kws, df, lambda t: t, 10)
    assert everything == ["个人信息", "保护", "影响", "评估", "活动", "启动"]
    assert gate_probes.topic_words(title, kws, {}, lambda t: t, 4) == []


def test_topic_words_of_a_real_library_are_surface_words_other_documents_hold(svc: RagService) -> None:
    cat = svc.library.catalog
    r = svc.retriever()
    df = gate_probes.document_frequency(gate_probes.document_term_counts(cat))
    title = "Bicycle brake workshop: checking a bicycle brake"
    words = gate_probes.topic_words(title, r.query_keywords(title, "doc"), df, r.tokenizer.surface_form, 4)
    # the guide holds "checking a bicycle brake" too; "workshop" is the notice's alone; surface words, not
    # Snowball stems ("bicycl", "check")
    assert words == ["bicycle", "brake", "checking"]
    assert gate_probes.topic_words("Brewing green tea", r.query_keywords("Brewing green tea", "doc"), df,
                                 r.tokenizer.surface_form, 4) == []


def test_probes_are_written_from_shared_words_and_fall_back_to_the_title(svc: RagService) -> None:
    model = ScriptedModel()
    _run(svc, model, config=auto_gate.AutoGateConfig(n_probes=6, pool=1))
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None
    sources = {Path(d.path).name: p["source"] for p, e in zip(st["probes"], st["plan"], strict=True)
               for d in svc.library.catalog.documents() if d.doc_id == e}
    # the notice and the club news share their subject with the guide and the recipe; tea and tides share nothing
    assert sources["notice.txt"] == sources["bread_club.txt"] == "topic"
    assert sources["tea.txt"] == sources["tide.txt"] == "title"
    topic_prompts = [c for c in model.calls if "learn about: " in c]
    assert len(topic_prompts) == list(sources.values()).count("topic")
    # a topic probe never sees the title it came from: no word only that document holds
    assert not any("workshop" in c.lower() or "club" in c.lower() or "news" in c.lower() for c in topic_prompts)


def test_an_answer_that_lists_the_documents_supports_none_and_a_citation_label_is_dropped() -> None:
    listing = "文档 1: 个人信息保护影响评估实施步骤\n文档 2: 数据出境安全评估申报工作指南"
    assert auto_gate._answer_only(listing, "zh") == ""
    assert auto_gate._answer_only("Document 1 covers X. Document 2 covers Y.", "en") == ""
    cited = auto_gate._answer_only("According to Document 2, the pads must meet the rim.", "en")
    assert "Document" not in cited and "pads must meet the rim" in cited
    assert auto_gate._answer_only("文档 1 和文档 1 都说：十二分之一法则", "zh").count("文档") == 0


PRESS = ("青岚市召开数据出境安全评估工作推进会",
         "青岚市召开数据出境安全评估工作推进会\n\n# 青岚市召开数据出境安全评估工作推进会\n\n> 青岚市网络安全和信息化"
         "委员会办公室 2025年3月\n\n会议强调，数据出境安全评估工作要抓紧抓实。")
GUIDE = ("数据出境安全评估工作指引",
         "一、适用范围\n数据处理者向境外提供重要数据的，应当先开展自评估，再通过省级网信部门申报。")


def test_an_answer_that_copies_a_document_from_its_title_on_supports_none() -> None:
    # seen with the 1.5B on the real demo folder: the first shown document read back, title, heading and by-line
    echo = "文档 1: 青岚市召开数据出境安全评估工作推进会\n青岚市召开数据出境安全评估工作推进会\n\n# 青岚市召开数据出境"
    assert auto_gate.copies(echo, *PRESS)
    assert auto_gate._answer_only(echo, "zh", [GUIDE, PRESS]) == ""
    # a title named as the subject, then the answer's own words: not a copy
    assert not auto_gate.copies("青岚市召开数据出境安全评估工作推进会，强调评估要抓紧。", *PRESS)
    # a sentence quoted from the body is an extractive answer, not a copy
    quoted = "数据处理者向境外提供重要数据的，应当先开展自评估，再通过省级网信部门申报。"
    assert not auto_gate.copies(quoted, *GUIDE)
    assert auto_gate._answer_only(quoted, "zh", [GUIDE, PRESS]) == quoted
    assert not auto_gate.copies("Tea\nsteep it", "Tea", "steep it two minutes")  # too short a title to tell
    # the whole judge: the reply that copies whichever document stood first prefers none of them
    hits = [Hit(i, i, "doc", t, f"{i}.txt", 1, b, 0.5, i) for i, (t, b) in enumerate((PRESS, GUIDE), start=1)]

    class Copier(ScriptedModel):
        def reply(self, prompt: str) -> str:
            return prompt.split("文档 1: ", 1)[1][:80]

    shares, answers = auto_gate.answer_support(Copier(), "如何评估数据出境安全？", hits, 400, 60, 0)
    assert shares == [0.0, 0.0] and len(answers) == 2


def test_a_probe_asked_twice_in_a_run_counts_once(svc: RagService) -> None:
    class SameQuestion(ScriptedModel):
        """Writes the same question from every title: two subjects sharing words do this with the 1.5B."""

        def reply(self, prompt: str) -> str:
            if _is_answer(prompt) or _is_quote(prompt):
                return super().reply(prompt)
            return "How do I check a bicycle brake?"

    model = SameQuestion()
    out = _run(svc, model, config=auto_gate.AutoGateConfig(n_probes=4, pool=1))
    decision = out[-1]
    st = auto_gate.load_state(svc.library.catalog)
    assert st is not None and isinstance(decision, auto_gate.GateDecision)
    written = [p for p in st["probes"] if p["source"] != "title-question"]
    assert len(written) == 4 and [p.get("duplicate", False) for p in written] == [False, True, True, True]
    assert all(not p["rankings"] and not p["judged"] for p in written[1:])  # neither ranked nor judged
    assert decision.n_probes == 1  # the question weighs once in the gate
    stored = svc.library.catalog.get_json(auto_gate.GATE_KEY)
    assert stored["n_duplicate"] == 3 and stored["n_unlabelled"] == 0
    # only the first was answered by the model: 4 probe-writing calls, answering calls for one probe at most
    assert _probe_calls(model) == 4 and len(model.calls) - 4 <= 3


@pytest.mark.parametrize(("title", "asks"), [
    ("失眠怎么办？中医治疗失眠专科门诊开诊", "失眠怎么办？"),  # a stuffed notice headed by the question
    ("久咳应该怎么治疗、吃什么药？中医治疗久咳的几个误区", "久咳应该怎么治疗、吃什么药？"),
    ("临州博物馆何时首次对公众开放", "临州博物馆何时首次对公众开放"),  # no question mark, an interrogative
    ("Who plays the protagonist of the 2019 film The Glass Harbour",
     "Who plays the protagonist of the 2019 film The Glass Harbour"),  # a poisoned passage's title
    ("In which city was the director born?", "In which city was the director born?"),
    ("How to Keep a Sourdough Starter Alive", "How to Keep a Sourdough Starter Alive"),
    ("ColBERT Late Interaction: How Relevance Is Computed", ""),  # a heading, not a question
    ("某平台发布个人信息保护影响评估年度报告", ""),
    ("中医治疗久咳的几个误区", ""),  # 几 is not asked about
    ("The Glass Harbour (film)", ""),
    ("What?", ""),  # asks nothing a ranking could answer
])
def test_title_question_is_the_question_a_title_asks(title: str, asks: str) -> None:
    assert gate_probes.title_question(title) == asks


def test_numbers_and_place_words_name_no_subject() -> None:
    for word in ("946", "第一千", "九条", "第六章", "Article", "page", "scan", "Untitled"):
        assert not gate_probes.is_subject_word(word), word
    for word in ("民法典", "用人单位", "brake", "tidal", "2025年"):
        assert gate_probes.is_subject_word(word), word


def test_keyword_topic_takes_the_shared_subject_words_strongest_first() -> None:
    kd = [Keyword("出租人", 3.0), Keyword("第一千", 2.5), Keyword("维修", 2.0), Keyword("青岚", 1.8),
          Keyword("租赁物", 1.5), Keyword("义务", 1.0), Keyword("应当", 0.0)]
    df = {"出租人": 4, "第一千": 900, "维修": 2, "青岚": 1, "租赁物": 3, "义务": 7, "应当": 50}
    # 第一千 is a number, 青岚 this document's alone, 应当 carries no weight
    assert gate_probes.keyword_topic(kd, df, lambda t: t, 3) == ["出租人", "维修", "租赁物"]
    assert gate_probes.keyword_topic(kd, {}, lambda t: t, 3) == []


def test_a_probe_that_reads_the_prompt_back_is_not_a_question() -> None:
    # seen with the 1.5B shown the title "第946条" and nothing else
    assert gate_probes.write_probe(Reply("如何在搜索框里输入简短问题"), "第946条", [], 0) == "第946条"
    assert gate_probes.write_topic_probe(Reply("What would a person type into a search box?"), ["tidal", "barrier"],
                                       "Tidal barrier", 0) == "Tidal barrier"
    # a piece of the instruction itself (the zh topic prompt asks "怎么做、如何起作用、为什么")
    assert gate_probes.write_topic_probe(Reply("如何起作用？"), ["解除", "合同"], "第12条", 0) == "第12条"
    assert gate_probes.write_topic_probe(Reply("如何解除合同？"), ["解除", "合同"], "第12条", 0) == "如何解除合同？"


ARTICLES = {
    "a12.txt": "第12条\n用人单位解除劳动合同，应当向劳动者支付经济补偿。经济补偿按劳动者在本单位工作的年限支付。",
    "a13.txt": "第13条\n劳动者提前三十日以书面形式通知用人单位，可以解除劳动合同。用人单位不得扣押劳动者的证件。",
    "a14.txt": "第14条\n承租人应当按照约定的方法使用租赁物。承租人未经出租人同意转租的，出租人可以解除合同。",
    "a15.txt": "第15条\n出租人应当履行租赁物的维修义务。承租人在租赁物需要维修时可以要求出租人在合理期限内维修。",
}


def test_a_title_that_names_no_subject_is_asked_about_its_bodys_shared_keywords(tmp_path: Path) -> None:
    """Statute articles titled by their number: the probe is written from the words the article's
    keyword set shares with other articles, never from "第12条"."""
    s = ingest_texts(tmp_path, ARTICLES, Settings().replace("retrieval", default_method="gated"))
    try:
        assert sorted(d.title for d in s.library.catalog.documents()) == ["第12条", "第13条", "第14条", "第15条"]
        model = ScriptedModel()
        _run(s, model, config=auto_gate.AutoGateConfig(n_probes=4, pool=1))
        st = auto_gate.load_state(s.library.catalog)
        assert st is not None
        written = [p for p in st["probes"] if p["source"] != "title-question"]
        assert written and all(p["source"] == "keywords" for p in written)
        shown = [_zh_topic(c) for c in model.calls if "想了解“" in c]
        assert len(shown) == len(written)
        # the body's words that other articles hold (用人单位, 劳动者, 出租人, 承租人, 租赁物 …), no number
        assert all(not re.search(r"第|\d", w) for w in shown)
        assert any(w in " ".join(shown) for w in ("用人单位", "劳动者", "出租人", "承租人", "租赁物"))
    finally:
        s.close()


def test_a_question_title_is_its_own_probe_with_no_model_call(tmp_path: Path) -> None:
    texts = {**{k: TEXTS[k] for k in ("guide.txt", "notice.txt", "tea.txt")},
             "faq.txt": "How do I check a bicycle brake?\n\nMany riders ask how to check a bicycle brake."}
    s = ingest_texts(tmp_path, texts, Settings().replace("retrieval", default_method="gated"))
    try:
        r = s.retriever()
        plan = gate_probes.make_plan(s.library.catalog, 4, 0, lambda t: r.query_keywords(t, "doc"))
        first = s.library.catalog.document(int(plan[0]))
        # the library's own question leads the plan, ahead of the notice's stronger stuffing signal
        assert first is not None and Path(first.path).name == "faq.txt"
        model = ScriptedModel()
        _run(s, model, config=auto_gate.AutoGateConfig(n_probes=4, pool=1))
        st = auto_gate.load_state(s.library.catalog)
        assert st is not None
        asked = [p for p in st["probes"] if p["source"] == "title-question"]
        assert [p["question"] for p in asked] == ["How do I check a bicycle brake?"]
        written = [c for c in model.calls if not (_is_answer(c) or _is_quote(c))]
        assert len(written) == sum(1 for p in st["probes"] if p["source"] in ("topic", "title"))
        assert not any("How do I check" in c for c in written)
    finally:
        s.close()


def test_on_topic_is_the_share_of_the_question_words_a_document_holds() -> None:
    q = "What did the Wason selection task show?"
    shown = ["Seminar: Revisiting the Wason Selection Task", "A note on late-interaction retrieval",
             "The Wason selection task did show that few people turn the right cards"]
    got = auto_gate.on_topic(q, shown)
    words = content_tokens(q)
    assert got == [len(words & content_tokens(s)) / len(words) for s in shown]
    assert got[1] == 0.0 and got[2] == 1.0 and 0 < got[0] < 1
    assert auto_gate.on_topic("What is it?", shown) == [1.0, 1.0, 1.0]  # no content word: no weighing


def test_an_unrelated_document_the_model_borrows_words_from_is_not_labelled() -> None:
    """Seen on the real demo folder: shown a stuffed notice and an unrelated note, the 1.5B answered with
    the note's words. Neither answers, so neither may be preferred; the answering chapter still wins."""
    notice = Hit(1, 1, "doc", "Seminar: Revisiting the Wason Selection Task", "n.txt", 1,
                 "Our seminar revisits the Wason selection task; the Wason selection task seminar is Friday.", 0.9, 1)
    note = Hit(2, 2, "doc", "A note on late-interaction retrieval", "l.txt", 1,
               "Neural retrievers fall into two families: bi-encoders and cross-encoders.", 0.5, 2)
    chapter = Hit(3, 3, "doc", "Chapter 7. Reasoning with conditionals", "c.txt", 1,
                  "In the Wason selection task few people turn the 7 card: most look for confirmation.", 0.6, 3)

    q = "What did the Wason selection task show?"
    confabulated = Reply("The Wason selection task showed that neural retrievers fall into two families.")
    shares, _ = auto_gate.answer_support(confabulated, q, [notice, note], 400, 60, 0)
    assert auto_gate.support("The Wason selection task showed that neural retrievers fall into two families.", q,
                             [f"{note.title}\n{note.text}"])[0] > 0.8  # unweighted, the note would be labelled
    assert shares == [0.0, 0.0]
    answering = Reply("Few people turn the 7 card; most look for confirmation.")
    shares, _ = auto_gate.answer_support(answering, q, [notice, note, chapter], 400, 60, 0)
    assert shares[2] > 0 and shares[0] == shares[1] == 0.0
