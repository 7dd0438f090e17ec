"""CF-RAG math (paper 002): each step against hand-computed values or a slow reference."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from rag_desktop.core import cfrag
from rag_desktop.core.cfrag import (
    CFTuning,
    agreement,
    answer_presence,
    citations_for,
    counterfactual_type_messages,
    dedup_by_embedding,
    evaluate_counterfactuals,
    fit_passages,
    gaussian_affinity,
    judge_answers,
    kmeans_pp,
    normalise_scores,
    normalized_laplacian,
    phi_causal,
    phi_coh,
    pool_union,
    psi,
    quality_score,
    resolve_score_scale,
    sample_subsets,
    select_evidence,
    spectral_clustering,
)
from rag_desktop.core.replies import (
    parse_counterfactual_line,
    parse_counterfactuals,
    parse_hypothesis,
    parse_numbered_answers,
)
from rag_desktop.core.settings import CFRagSettings, Settings, SettingsError
from rag_desktop.core.types import CancelToken, ChatMessage, GenEvent, Hit

# --------------------------------------------------------------------------- helpers


def _same_partition(a: Sequence[int], b: Sequence[int]) -> bool:
    """Equal up to a renaming of the cluster labels."""
    return len({(x, y) for x, y in zip(a, b, strict=True)}) == len(set(a)) == len(set(b))


def _blobs(rng: np.random.Generator, centres: np.ndarray, per: int,
           spread: float) -> tuple[np.ndarray, list[int]]:
    pts, truth = [], []
    for c, centre in enumerate(centres):
        for _ in range(per):
            v = centre + spread * rng.standard_normal(centre.shape)
            pts.append(v / np.linalg.norm(v))
            truth.append(c)
    return np.asarray(pts), truth


def _hit(uid: int, text: str = "t", level: str = "chunk") -> Hit:
    return Hit(unit_id=uid, doc_id=uid, level=level, title=f"d{uid}", path=f"/d{uid}.pdf",  # type: ignore[arg-type]
               page=1, text=text, s_sim=0.5, rank=1)


# --------------------------------------------------------------------------- step 4: spectral


def test_affinity_and_laplacian_match_loop_reference() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4))
    sigma = 0.7
    w = gaussian_affinity(x, sigma)
    ref_w = np.zeros((6, 6))
    for i in range(6):
        for j in range(6):
            if i != j:
                ref_w[i, j] = math.exp(-float(np.sum((x[i] - x[j]) ** 2)) / (2 * sigma**2))
    np.testing.assert_allclose(w, ref_w, rtol=1e-10, atol=1e-12)
    lap = normalized_laplacian(w)
    d = ref_w.sum(axis=1)
    ref_l = np.eye(6)
    for i in range(6):
        for j in range(6):
            ref_l[i, j] -= ref_w[i, j] / math.sqrt(d[i] * d[j])
    np.testing.assert_allclose(lap, ref_l, rtol=1e-10, atol=1e-12)
    # The normalised Laplacian is PSD with smallest eigenvalue 0 (eigenvector D^{1/2}·1).
    vals = np.linalg.eigvalsh(lap)
    assert vals[0] == pytest.approx(0.0, abs=1e-10)
    assert np.all(vals > -1e-10) and np.all(vals < 2 + 1e-10)


def test_laplacian_isolated_node_has_no_nan() -> None:
    w = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    lap = normalized_laplacian(w)
    assert np.all(np.isfinite(lap))
    assert lap[2, 2] == 1.0


def test_spectral_clustering_recovers_separated_blobs() -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(16)[:4] * 3.0  # four orthogonal directions
    x, truth = _blobs(rng, centres, per=5, spread=0.25)
    perm = rng.permutation(len(x))
    x, truth = x[perm], [truth[i] for i in perm]
    res = spectral_clustering(x, 4, 0.5, np.random.default_rng(1))
    assert res.k_used == 4
    assert _same_partition(res.labels.tolist(), truth)
    # Four separated groups: four small eigenvalues of L, then a large gap.
    assert len(res.eigenvalues) == 4 and res.eigenvalues[0] == pytest.approx(0.0, abs=1e-9)
    assert list(res.eigenvalues) == sorted(res.eigenvalues) and max(res.eigenvalues) < 0.2
    full = np.linalg.eigvalsh(normalized_laplacian(gaussian_affinity(x, 0.5)))
    assert full[4] > 0.9
    # Labels are canonical: first appearance order.
    first = [int(v) for v in dict.fromkeys(res.labels.tolist())]
    assert first == list(range(4))


def test_spectral_clustering_separates_rings_that_kmeans_on_raw_points_cannot() -> None:
    """Two concentric rings: k-means on raw coordinates cuts them in halves; the spectral
    embedding separates inner from outer ring. Guards against the authors' shortcut."""
    t = np.linspace(0, 2 * np.pi, 30, endpoint=False)
    inner = np.c_[np.cos(t), np.sin(t)]
    outer = 3 * np.c_[np.cos(t + 0.05), np.sin(t + 0.05)]
    x = np.vstack([inner, outer])
    truth = [0] * 30 + [1] * 30
    res = spectral_clustering(x, 2, 0.35, np.random.default_rng(0))
    assert _same_partition(res.labels.tolist(), truth)
    raw_labels, _ = kmeans_pp(x, 2, np.random.default_rng(0))
    assert not _same_partition(raw_labels.tolist(), truth)


def test_spectral_clustering_fewer_documents_than_k() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5))
    res = spectral_clustering(x, 4, 0.5, rng)
    assert res.k_used == 3
    assert sorted(res.labels.tolist()) == [0, 1, 2]
    one = spectral_clustering(x[:1], 4, 0.5, rng)
    assert one.k_used == 1 and one.labels.tolist() == [0]
    none = spectral_clustering(np.zeros((0, 5)), 4, 0.5, rng)
    assert none.k_used == 0 and none.labels.size == 0


def _inertia(x: np.ndarray, labels: Sequence[int], k: int) -> float:
    total = 0.0
    for c in range(k):
        pts = x[[i for i, lab in enumerate(labels) if lab == c]]
        if len(pts) == 0:
            return math.inf
        total += float(np.sum((pts - pts.mean(axis=0)) ** 2))
    return total


def test_kmeans_finds_the_exhaustive_optimum_on_small_data() -> None:
    rng = np.random.default_rng(7)
    x = np.vstack([rng.normal(0, 0.3, (3, 2)), rng.normal(3, 0.3, (2, 2)), rng.normal((0, 4), 0.3, (2, 2))])
    k = 3
    best = min(_inertia(x, lab, k) for lab in itertools.product(range(k), repeat=len(x)))
    labels, inertia = kmeans_pp(x, k, np.random.default_rng(0))
    assert inertia == pytest.approx(best, rel=1e-9)
    assert _inertia(x, labels.tolist(), k) == pytest.approx(inertia)


def test_kmeans_is_seeded_and_handles_duplicates() -> None:
    x = np.array([[0.0, 0.0]] * 4 + [[1.0, 1.0]])
    a, _ = kmeans_pp(x, 3, np.random.default_rng(5))
    b, _ = kmeans_pp(x, 3, np.random.default_rng(5))
    assert a.tolist() == b.tolist()
    assert sorted(set(a.tolist())) == [0, 1, 2]  # exactly k clusters even with coincident points
    with pytest.raises(ValueError, match="k-means"):
        kmeans_pp(x, 6, np.random.default_rng(0))


# --------------------------------------------------------------------------- step 6: arbitration


def test_phi_causal_uses_the_max_over_counterfactuals() -> None:
    s_q = [0.9, 0.5]
    s_cf = [[0.2, 0.6], [0.4, 0.7]]
    # max per passage: 0.4, 0.7 → [0.9 − 0.4, 0.5 − 0.7] = [0.5, −0.2] → mean 0.15.
    assert phi_causal(s_q, s_cf) == pytest.approx(0.15)
    # (The authors' mean over q' would give ((0.9 − 0.3) + (0.5 − 0.65)) / 2 = 0.225.)
    assert phi_causal(s_q, s_cf) != pytest.approx(0.225)


def test_phi_causal_matches_loop_reference() -> None:
    rng = np.random.default_rng(11)
    for _ in range(20):
        n_e, n_cf = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        s_q = rng.random(n_e)
        s_cf = rng.random((n_cf, n_e))
        ref = sum(s_q[e] - max(s_cf[i][e] for i in range(n_cf)) for e in range(n_e)) / n_e
        assert phi_causal(s_q, s_cf) == pytest.approx(ref)


def test_phi_causal_without_counterfactuals_is_zero() -> None:
    assert phi_causal([0.9, 0.1], np.zeros((0, 2))) == 0.0
    assert phi_causal([], np.zeros((2, 0))) == 0.0


def test_phi_coh_psi_hand_values() -> None:
    assert phi_coh(0.8, 0.5, 1.0) == pytest.approx(0.4 * 0.8 + 0.3 * 0.5 + 0.3 * 1.0)
    assert psi(0.5, 0.15, 0.4) == pytest.approx(0.6 * 0.5 + 0.4 * 0.15)
    assert psi(0.5, 0.15, 0.0) == pytest.approx(0.5)


def test_arbitration_prefers_discriminative_evidence_over_coherent_noise() -> None:
    """The Dark Knight pattern with hand numbers: Ledger's path is more coherent, Bale's
    discriminates. λ = 0.4 picks Bale; λ = 0 (no causal verification) picks Ledger."""
    # Ledger path: 4 reviews, each s(q,e)=0.7 but s(villain,e)=0.9.
    coh_ledger = phi_coh(0.9, 0.7, 1.0)
    causal_ledger = phi_causal([0.7] * 4, [[0.9] * 4, [0.3] * 4])
    # Bale path: the cast passage s(q,e)=0.8, the best counterfactual only 0.3.
    coh_bale = phi_coh(0.7, 0.55, 1.0)
    causal_bale = phi_causal([0.8, 0.3], [[0.3, 0.2], [0.2, 0.4]])
    assert coh_ledger > coh_bale
    assert causal_ledger == pytest.approx(-0.2)
    assert causal_bale == pytest.approx(((0.8 - 0.3) + (0.3 - 0.4)) / 2)
    assert psi(coh_bale, causal_bale, 0.4) > psi(coh_ledger, causal_ledger, 0.4)
    assert psi(coh_bale, causal_bale, 0.0) < psi(coh_ledger, causal_ledger, 0.0)


def test_tuning_weights_must_sum_to_one() -> None:
    # The φ_coh weights are settings (cfrag.coh_w_*), validated where the settings are.
    with pytest.raises(SettingsError, match="coh_w"):
        Settings().replace("cfrag", coh_w_embed=0.5, coh_w_query=0.5, coh_w_presence=0.5)
    with pytest.raises(SettingsError, match="coh_w"):
        cfrag.pipeline._check_settings(CFRagSettings(coh_w_embed=0.5, coh_w_query=0.5, coh_w_presence=0.5), 0)


def test_answer_presence() -> None:
    texts = ["Christian Bale stars as Bruce Wayne.", "Ledger plays the Joker."]
    assert answer_presence("Christian Bale", texts) == 1.0
    assert answer_presence("Heath Ledger", texts) == pytest.approx(0.5)  # token recall
    assert answer_presence("Gary Oldman", texts) == 0.0
    assert answer_presence("", texts) == 0.0
    assert answer_presence("贝尔", ["主演是克里斯蒂安·贝尔。"]) == 1.0


def test_agreement_mean_pairwise_f1() -> None:
    assert agreement(["Christian Bale", "christian bale.", "The Christian Bale"]) == pytest.approx(1.0)
    assert agreement(["Bale", "Bale", "Ledger"]) == pytest.approx(1 / 3)
    assert agreement(["Christian Bale", "Bale"]) == pytest.approx(2 / 3)
    assert agreement(["only one"]) == 1.0
    assert agreement([]) == 1.0


def test_score_normalisation() -> None:
    raw = np.array([[-2.0, 0.0, 3.0]])
    np.testing.assert_allclose(normalise_scores(raw, "sigmoid"), 1 / (1 + np.exp(-raw)))
    np.testing.assert_allclose(normalise_scores(raw, "identity"), raw)
    # No overflow warnings on huge logits.
    big = normalise_scores(np.array([1000.0, -1000.0]), "sigmoid")
    assert big.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="score_scale"):
        normalise_scores(raw, "minmax")

    class _S:
        identity = "x"
        is_substitute = True

    assert resolve_score_scale(_S()) == "identity"  # type: ignore[arg-type]
    _S.is_substitute = False
    assert resolve_score_scale(_S()) == "sigmoid"  # type: ignore[arg-type]
    assert resolve_score_scale(_S(), CFTuning(score_scale="identity")) == "identity"  # type: ignore[arg-type]


# --------------------------------------------------------------------------- step 2: pool, dedup, filter


def test_pool_union_keeps_first_hit_and_provenance() -> None:
    a, b, c = _hit(1), _hit(2), _hit(3)
    b_doc = _hit(2, level="doc")
    pool, by = pool_union([[a, b], [b, c], [a, b_doc]])
    assert [h.unit_id for h in pool] == [1, 2, 3, 2]
    assert pool[3].level == "doc"
    assert by == [(0, 2), (0, 1), (1,), (2,)]


def _dedup_reference(x: np.ndarray, s_q: Sequence[float], theta: float) -> list[int]:
    """Obvious O(n²) version: visit by decreasing s_q; duplicate of the most similar kept one."""
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    rep = [-1] * len(s_q)
    kept: list[int] = []
    for i in sorted(range(len(s_q)), key=lambda i: (-s_q[i], i)):
        best, best_cos = -1, -2.0
        for j in kept:
            c = float(xn[i] @ xn[j])
            if c > best_cos:
                best, best_cos = j, c
        if best >= 0 and best_cos > theta:
            rep[i] = best
        else:
            rep[i] = i
            kept.append(i)
    return rep


def test_dedup_hand_example() -> None:
    x = np.array([[1.0, 0.0], [0.999, 0.04], [0.0, 1.0], [0.7, 0.7]])
    s_q = [0.2, 0.9, 0.5, 0.1]
    rep = dedup_by_embedding(x, s_q, 0.95)
    # 1 and 0 are near-identical (cos 0.9992): 1 has the higher s(q,e), so it is the representative.
    assert rep.tolist() == [1, 1, 2, 3]


def test_dedup_matches_reference_and_invariants() -> None:
    rng = np.random.default_rng(4)
    base = rng.standard_normal((5, 8))
    x = np.vstack([base, base[[0, 0, 2]] + 0.01 * rng.standard_normal((3, 8))])
    s_q = rng.random(len(x)).tolist()
    rep = dedup_by_embedding(x, s_q, 0.95).tolist()
    assert rep == _dedup_reference(x, s_q, 0.95)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    kept = [i for i in range(len(x)) if rep[i] == i]
    for i, j in itertools.combinations(kept, 2):
        assert xn[i] @ xn[j] <= 0.95
    for i in range(len(x)):
        if rep[i] != i:
            assert xn[i] @ xn[rep[i]] > 0.95 and s_q[rep[i]] >= s_q[i]
    assert len(kept) == 5


def test_quality_score_hand_values() -> None:
    prose = "Christian Bale plays Bruce Wayne in The Dark Knight, directed by Christopher Nolan in 2008."
    c = sum(ch.isalnum() for ch in prose)
    t = sum(not ch.isspace() for ch in prose)
    expected = min(1.0, c / 100) * min(1.0, max(0.0, (c / t - 0.5) / 0.3)) * 1.0
    assert quality_score(prose) == pytest.approx(expected)
    assert 0.7 < quality_score(prose) <= 1.0
    assert quality_score("---- | ==== | ---- | ==== | 12 |") == 0.0  # mostly symbols
    assert quality_score("") == 0.0
    # Boilerplate repetition: 3 distinct trigrams out of many.
    rep = "page one header " * 20
    toks = rep.split()
    grams = list(zip(toks, toks[1:], toks[2:], strict=False))
    assert quality_score(rep) == pytest.approx(len(set(grams)) / len(grams))
    # Chinese prose counts CJK characters as letters and as tokens.
    zh = ("克里斯蒂安·贝尔在电影《黑暗骑士》中饰演布鲁斯·韦恩，也就是蝙蝠侠，是影片的主角。"
          "希斯·莱杰饰演反派小丑，他的表演获得了奥斯卡最佳男配角奖。"
          "该片由克里斯托弗·诺兰执导，于二〇〇八年上映，票房超过十亿美元。")
    assert quality_score(zh) > 0.7
    # ... and the same sentence pasted three times is penalised for repetition.
    assert quality_score(zh[:40] * 3) < 0.5


def test_select_evidence_order_of_filters() -> None:
    rep = [0, 0, 2, 3, 4, 5]
    quality = [0.9, 0.9, 0.1, 0.8, 0.8, 0.8]
    relevance = [0.5, 0.9, 0.9, 0.4, 0.7, 0.6]
    s_q = [0.5, 0.9, 0.9, 0.4, 0.2, 0.6]
    st = select_evidence(rep, quality, relevance, s_q, quality_min=0.2, keep=2)
    # 1 is a duplicate (even with the best relevance), 2 fails quality, then the top 2 by relevance.
    assert st == ["below_cut", "duplicate", "low_quality", "below_cut", "kept", "kept"]


# --------------------------------------------------------------------------- step 5: sampling


def test_sampling_is_reproducible_and_stratified() -> None:
    labels = [0, 0, 0, 1, 1, 2, 2, 2, 2, 3]
    a = sample_subsets(labels, n_subsets=3, size=6, temperature=1.0, rng=np.random.default_rng(9))
    b = sample_subsets(labels, n_subsets=3, size=6, temperature=1.0, rng=np.random.default_rng(9))
    assert a == b
    c = sample_subsets(labels, n_subsets=3, size=6, temperature=1.0, rng=np.random.default_rng(10))
    assert a != c
    for sub in a:
        assert len(sub.members) == 6 == len(set(sub.members))
        assert {labels[i] for i in sub.members} == {0, 1, 2, 3}  # every cluster covered
        assert len(sub.weights) == 4 and sum(sub.weights) == pytest.approx(1.0)
        assert list(sub.members) == sorted(sub.members)


def test_sampling_fewer_slots_than_clusters_uses_distinct_clusters() -> None:
    labels = [0, 1, 2, 3, 0, 1]
    for sub in sample_subsets(labels, n_subsets=20, size=2, temperature=1.0, rng=np.random.default_rng(0)):
        assert len({labels[i] for i in sub.members}) == 2


def test_sampling_size_larger_than_pool_takes_everything() -> None:
    subs = sample_subsets([0, 1, 1], n_subsets=2, size=10, temperature=1.0, rng=np.random.default_rng(0))
    assert all(s.members == (0, 1, 2) for s in subs)
    assert sample_subsets([], n_subsets=3, size=4, temperature=1.0, rng=np.random.default_rng(0)) == []


def test_sampling_temperature_controls_concentration() -> None:
    """Extra slots beyond one-per-cluster follow w_j: at low temperature they pile into one
    cluster, at high temperature they spread out."""
    labels = [c for c in range(3) for _ in range(6)]

    def spread(temp: float) -> float:
        subs = sample_subsets(labels, n_subsets=200, size=9, temperature=temp, rng=np.random.default_rng(1))
        maxes = []
        for s in subs:
            counts = np.bincount([labels[i] for i in s.members], minlength=3)
            maxes.append(counts.max())
        return float(np.mean(maxes))

    cold, hot = spread(0.05), spread(50.0)
    # All 6 extra slots in one cluster gives 7; an even split gives 3.
    assert cold > 5.5
    assert hot < 5.0
    assert cold - hot > 1.5

    def peak(temp: float) -> float:
        subs = sample_subsets(labels, n_subsets=200, size=9, temperature=temp, rng=np.random.default_rng(2))
        return float(np.mean([max(s.weights) for s in subs]))

    assert peak(0.05) > 0.8
    assert peak(50.0) < 0.4


def test_sampling_rejects_bad_labels() -> None:
    with pytest.raises(ValueError, match="no empty cluster"):
        sample_subsets([0, 2], n_subsets=1, size=1, temperature=1.0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="temperature"):
        sample_subsets([0], n_subsets=1, size=1, temperature=0.0, rng=np.random.default_rng(0))


# --------------------------------------------------------------------------- step 1: counterfactuals


def test_parse_counterfactuals_is_robust() -> None:
    text = """Here are 6 counterfactual questions:
1. [role] Who played the main villain in The Dark Knight?
2) **[time]** Who was the lead actor in the 1989 Batman?
- entity: Who is the lead actor in Batman Begins?
Q4: (category) Where was The Dark Knight filmed?
5. Who scored The Dark Knight
【范围】《黑暗骑士》三部曲的主演是谁？
Sure! Let me know if you need more.
"Who directed The Dark Knight?"
"""
    got = parse_counterfactuals(text)
    assert got == [
        ("role", "Who played the main villain in The Dark Knight?"),
        ("time", "Who was the lead actor in the 1989 Batman?"),
        ("entity", "Who is the lead actor in Batman Begins?"),
        ("category", "Where was The Dark Knight filmed?"),
        ("unknown", "Who scored The Dark Knight"),
        ("scope", "《黑暗骑士》三部曲的主演是谁？"),
        ("unknown", "Who directed The Dark Knight?"),
    ]


def test_parse_counterfactual_line() -> None:
    q = "Who plays the protagonist of the 2019 film The Glass Harbour?"
    cf = "Who plays the villain of the 2019 film The Glass Harbour?"
    assert parse_counterfactual_line(cf, q) == cf
    assert parse_counterfactual_line(f"Rewritten: {cf}\n\nThis changes the role.", q) == cf
    assert parse_counterfactual_line(f'**Rewritten question:** "{cf}"', q) == cf
    assert parse_counterfactual_line(f"1. [role] {cf}", q) == cf
    # The model echoes the original question first, then writes its rewrite.
    assert parse_counterfactual_line(f"Question: {q}\nRewritten: {cf}", q) == cf
    # Not question-like (an answer, chatter): nothing.
    assert parse_counterfactual_line("Tomas Rehn.", q) == ""
    assert parse_counterfactual_line("Rewritten:", q) == ""
    assert parse_counterfactual_line("", q) == ""
    # Only repeats: the first is returned, so validation rejects it visibly.
    assert parse_counterfactual_line(q, q) == q
    other = "Who directed The Glass Harbour?"
    assert parse_counterfactual_line(f"{cf}\n{other}", q, taken=[cf]) == other
    assert parse_counterfactual_line("改写：《澜川往事》的女主角由谁扮演？", "《澜川往事》的男主角由谁扮演？") == \
        "《澜川往事》的女主角由谁扮演？"
    assert parse_counterfactual_line("问题：临州博物馆是哪一年关闭的", "临州博物馆是哪一年开放的？") == \
        "临州博物馆是哪一年关闭的"


def test_counterfactual_type_prompt_asks_for_one_transformation_in_the_question_language() -> None:
    en = counterfactual_type_messages("Who directed The Glass Harbour?", "time")
    # system, the worked example as a previous exchange (user → assistant), the question last
    assert [m.role for m in en] == ["system", "user", "assistant", "user"]
    assert en[0].content == cfrag.SYSTEM_COUNTERFACTUAL
    assert en[1].content.rstrip().endswith(f"Question: {cfrag.TYPE_EXAMPLE_QUERIES['en']}\nRewritten:")
    assert en[2].content == cfrag.TYPE_EXAMPLES["en"]["time"]
    user = en[3].content
    assert cfrag.TYPE_INSTRUCTIONS["en"]["time"] in user
    assert user.rstrip().endswith("Question: Who directed The Glass Harbour?\nRewritten:")
    assert "World Cup" not in user  # the example is not in the question's own turn
    zh = counterfactual_type_messages("《澜川往事》的导演是谁？", "scope")
    assert zh[2].content == cfrag.TYPE_EXAMPLES["zh"]["scope"] and zh[3].content.rstrip().endswith("改写：")
    assert cfrag.TYPE_INSTRUCTIONS["zh"]["scope"] in zh[3].content
    for lang in ("en", "zh"):
        assert set(cfrag.TYPE_EXAMPLES[lang]) == set(cfrag.TYPE_INSTRUCTIONS[lang]) == set(cfrag.TRANSFORMATIONS)


def test_evaluate_rejects_copies_and_paraphrases_of_the_prompt_examples() -> None:
    s = CFRagSettings(n_counterfactuals=3, theta_sim=0.5)
    q = "Who plays the protagonist of the 2019 film The Glass Harbour?"
    cands = [
        ("time", "Which team won the 2002 World Cup?"),  # verbatim per-type example
        ("role", "Who played the main villain in The Dark Knight?"),  # verbatim batch example
        ("time", "Which side won the 2002 football World Cup?"),  # paraphrase: closer to the example
        ("role", "Who plays the villain of the 2019 film The Glass Harbour?"),  # valid
    ]
    kept, rejected = evaluate_counterfactuals(
        q, cands, sims=[0.6, 0.6, 0.6, 0.9], rel_dom=[0.5] * 4, answer_q="Tomas Rehn",
        answers_cf=["Brazil", "Heath Ledger", "Brazil", "Aldo Brenn"], settings=s,
        example_sims=[1.0, 1.0, 0.8, 0.3])
    assert [c.order for c in kept] == [3]
    by = {c.order: c.reason for c in rejected}
    assert "copied from the prompt's example" in by[0] and "copied from the prompt's example" in by[1]
    assert "closer to the prompt's example (cos 0.800) than to the question (0.600)" in by[2]
    # Without example_sims (q on the examples' own topic) only verbatim copies are rejected.
    kept2, _ = evaluate_counterfactuals(
        q, cands, sims=[0.6, 0.6, 0.6, 0.9], rel_dom=[0.5] * 4, answer_q="Tomas Rehn",
        answers_cf=["Brazil", "Heath Ledger", "Brazil", "Aldo Brenn"], settings=s)
    assert sorted(c.order for c in kept2) == [2, 3]
    # A question that IS the example's own keeps its counterfactuals.
    kept3, _ = evaluate_counterfactuals(
        "Which team won the 1998 World Cup?", cands[:1], sims=[0.8], rel_dom=[0.5], answer_q="France",
        answers_cf=["Brazil"], settings=s)
    assert [c.order for c in kept3] == [0]
    with pytest.raises(ValueError, match="example_sims"):
        evaluate_counterfactuals(q, cands, sims=[0.6] * 4, rel_dom=[0.5] * 4, answer_q="x",
                                 answers_cf=["a", "b", "c", "d"], settings=s, example_sims=[0.1])


def test_adds_content_tells_a_transformation_from_a_restatement() -> None:
    q = "In which city was the director of The Glass Harbour born?"
    assert not cfrag.adds_content(q, "In which city was The Glass Harbour's director born?")  # reworded
    assert not cfrag.adds_content(q, "Which city was the director of The Glass Harbour born in?")
    assert cfrag.adds_content(q, "In which city was the director of The Glass Harbour's first film shot?")
    assert cfrag.adds_content(q, "In which year was the director of The Glass Harbour born?")
    assert cfrag.adds_content(q, "Who is the director of The Glass Harbour?")  # a person, not a city
    assert cfrag.adds_content("获得第十届星河文学奖的作家出生在哪里？", "获得第十届星河文学奖的作家是谁？")
    zq = "《澜川往事》的导演出生在哪个城市？"
    assert not cfrag.adds_content(zq, "《澜川往事》的导演出生在哪里？")  # only question-shaping characters change
    assert not cfrag.adds_content("承建澜川大桥的公司，其创始人毕业于哪所学校？",
                                  "承建澜川大桥的公司创始人毕业于什么学校？")
    assert cfrag.adds_content(zq, "《澜川往事》的主演出生在哪个城市？")
    assert cfrag.adds_content("获得第十届星河文学奖的作家出生在哪里？", "获得第九届星河文学奖的作家出生在哪里？")


def test_evaluate_rejects_restatements() -> None:
    s = CFRagSettings(n_counterfactuals=3, theta_sim=0.5)
    q = "In which city was the director of The Glass Harbour born?"
    cands = [("scope", "In which city was The Glass Harbour's director born?"),
             ("entity", "In which city was the lead actor of The Glass Harbour born?")]
    kept, rejected = evaluate_counterfactuals(q, cands, sims=[0.99, 0.95], rel_dom=[0.5, 0.5], answer_q="Lyon",
                                              answers_cf=["Paris", "Rome"], settings=s)
    assert [c.order for c in kept] == [1]
    assert "restates the question: adds no content word" in rejected[0].reason and not rejected[0].valid


def test_parse_numbered_answers() -> None:
    assert parse_numbered_answers("1. Christian Bale\n2) Heath Ledger.\n3: \n", 3) == [
        "Christian Bale", "Heath Ledger", ""]
    assert parse_numbered_answers("Answers:\n2. Nolan\n1. Answer: Bale", 3) == ["Bale", "Nolan", ""]
    assert parse_numbered_answers("Bale\nLedger", 3) == ["Bale", "Ledger", ""]
    assert parse_numbered_answers("1、贝尔\n2：希斯·莱杰", 2) == ["贝尔", "希斯·莱杰"]


def test_judge_answers() -> None:
    assert judge_answers("Christian Bale", "Bale", 0.5) == ("same", pytest.approx(2 / 3))
    assert judge_answers("Christian Bale", "Heath Ledger", 0.5) == ("differ", 0.0)
    assert judge_answers("", "Heath Ledger", 0.5) == ("undetermined", 0.0)
    assert judge_answers("The", "x", 0.5)[0] == "undetermined"  # normalises to empty
    assert judge_answers("Frank Herbert", "Brian Herbert", 0.5) == ("differ", 0.5)  # strictly above


def test_evaluate_counterfactuals_hand_example() -> None:
    s = CFRagSettings(n_counterfactuals=2, theta_sim=0.5, alpha=0.4, beta=0.4, gamma=0.2)
    q = "Who is the lead actor in The Dark Knight?"
    cands = [
        ("role", "Who played the main villain in The Dark Knight?"),  # valid
        ("role", "Who directed The Dark Knight?"),  # valid
        ("entity", "Who is the lead actor in Batman Begins?"),  # same answer → invalid
        ("category", "What is the boiling point of water?"),  # off topic → invalid
        ("role", "who played the main villain in the dark knight"),  # duplicate of 0
        ("time", "Who was the lead actor in the 1989 Batman?"),  # valid, lowest Info
        ("role", "Who is the lead actor in The Dark Knight"),  # identical to q
    ]
    sims = [0.8, 0.7, 0.9, 0.1, 0.8, 0.75, 0.99]
    rel = [0.6, 0.5, 0.7, 0.0, 0.6, 0.5, 0.7]
    answers = ["Heath Ledger", "Christopher Nolan", "Christian Bale", "100 °C", "Heath Ledger", "", "Bale"]
    kept, rejected = evaluate_counterfactuals(q, cands, sims=sims, rel_dom=rel, answer_q="Christian Bale",
                                              answers_cf=answers, settings=s)
    # Info = 0.4·(1 − sim) + 0.4·Div_ans + 0.2·Rel_dom
    info0 = 0.4 * 0.2 + 0.4 * 1.0 + 0.2 * 0.6  # 0.60
    info1 = 0.4 * 0.3 + 0.4 * 1.0 + 0.2 * 0.5  # 0.62
    info5 = 0.4 * 0.25 + 0.4 * 0.5 + 0.2 * 0.5  # 0.40 (undetermined answer → Div_ans 0.5)
    assert [c.order for c in kept] == [1, 0]
    assert [c.info for c in kept] == [pytest.approx(info1), pytest.approx(info0)]
    assert all(c.kept and c.valid and c.reason == "" for c in kept)
    by = {c.order: c for c in rejected}
    assert set(by) == {2, 3, 4, 5, 6}
    assert "L(q) = L(q')" in by[2].reason and not by[2].valid
    assert "off topic" in by[3].reason
    assert "duplicate of candidate #0" in by[4].reason
    assert by[5].valid and not by[5].kept and "below the top N" in by[5].reason
    assert by[5].info == pytest.approx(info5) and by[5].answers == "undetermined"
    assert "identical to the original question" in by[6].reason
    assert by[3].sim_sem == 0.1 and by[3].div_sem == pytest.approx(0.9)


# --------------------------------------------------------------------------- hypotheses / prompts


@pytest.mark.parametrize(
    ("text", "answer", "rationale", "how"),
    [
        ('{"answer": "Christian Bale [1]", "rationale": "Passage [1] says so."}',
         "Christian Bale", "Passage [1] says so.", "json"),
        ('Sure.\n```json\n{"Answer": "Heath Ledger", "reason": "reviews [2]"}\n```',
         "Heath Ledger", "reviews [2]", "json"),
        ("Answer: Christian Bale.\nRationale: [1] names him as Bruce Wayne.",
         "Christian Bale", "[1] names him as Bruce Wayne.", "labels"),
        ("**Answer:**\nChristian Bale\n\n**Rationale:** the cast list.",
         "Christian Bale", "the cast list.", "labels"),
        ("答案：克里斯蒂安·贝尔\n理由：[1]说明他饰演布鲁斯·韦恩。",
         "克里斯蒂安·贝尔", "[1]说明他饰演布鲁斯·韦恩。", "labels"),
        ("Christian Bale\nHe plays Batman.", "Christian Bale", "He plays Batman.", "fallback"),
        ("   ", "", "", "empty"),
        # Fenced JSON that does not parse (cut off by the token limit): the "answer" field,
        # never the fence's language tag "json" (seen in demo runs).
        ('```json\n{"answer": "Kessby", "rationale": "Passage [2] says she was born there\n```',
         "Kessby", "Passage [2] says she was born there", "json"),
        ('```json\n{"answer": "Tomas \\"Tom\\" Rehn", "rationale": "[1]",}\n```', 'Tomas "Tom" Rehn', "[1]", "json"),
        ('{"答案": "临州", "理由": "[1]', "临州", "[1]", "json"),
        ("```\nKessby\n```", "Kessby", "", "fallback"),
        ("```json\n```", "", "", "empty"),
    ],
)
def test_parse_hypothesis(text: str, answer: str, rationale: str, how: str) -> None:
    assert parse_hypothesis(text) == (answer, rationale, how)


def test_synthesis_is_grounded() -> None:
    texts = ["The observatory first opened to the public in 1934.", "Kessby is a harbour town."]
    assert cfrag.synthesis_is_grounded("1934", ["1931", "1988"], texts)  # in the evidence
    assert cfrag.synthesis_is_grounded("the Merrin Clock Tower", ["Merrin Clock Tower"], [])  # a candidate
    assert not cfrag.synthesis_is_grounded("Marketing", ["1931", "1934"], texts)
    assert not cfrag.synthesis_is_grounded("Markov, p. 1", ["临州"], texts)


def test_citations_for() -> None:
    hits = [_hit(10), _hit(11)]
    cites = citations_for("Bale [2], see also [1, 2] and [5].", hits)
    assert [(c.n, c.valid, c.unit_id) for c in cites] == [(2, True, 11), (1, True, 10), (5, False, None)]


class _CountingGen:
    identity = "count"
    n_ctx = 1000

    def load(self) -> None: ...

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def stream(self, messages: Sequence[ChatMessage], *, max_tokens: int, temperature: float, seed: int,
               cancel: CancelToken | None = None, stop: Sequence[str] = ()) -> Iterator[GenEvent]:
        yield from ()

    def close(self) -> None: ...


def test_fit_passages_water_filling() -> None:
    gen = _CountingGen()
    short = "a b c"
    long1 = " ".join(f"w{i}" for i in range(100))
    long2 = " ".join(f"v{i}" for i in range(50))
    out = fit_passages(gen, [short, long1, long2], 40)
    assert out[0] == short  # kept whole: 3 tokens
    total = sum(gen.count_tokens(t) for t in out)
    assert total <= 40
    assert out[1].startswith("w0 w1") and out[1].endswith("…")
    # Both long passages share the rest about equally (18 and 19 tokens).
    assert abs(gen.count_tokens(out[1]) - gen.count_tokens(out[2])) <= 2
    assert fit_passages(gen, [short], 40) == [short]


def test_module_has_no_heavy_imports() -> None:
    import sys

    heavy = {"torch", "faiss", "llama_cpp", "FlagEmbedding", "PySide6", "jieba", "transformers"}
    with open(cfrag.__file__, encoding="utf-8") as fh:
        src = fh.read()
    for name in heavy:
        assert f"import {name}" not in src
    assert "sklearn" not in src
    assert cfrag.__name__ in sys.modules


def test_copies_of_the_prompt_example_are_rejected_for_other_questions() -> None:
    s = CFRagSettings()
    cands = [("role", "Who directed The Dark Knight?"), ("entity", "Who wrote the sequel to Dune?")]
    kw = dict(sims=[0.8, 0.8], rel_dom=[0.5, 0.5], answer_q="Frank Herbert",
              answers_cf=["Christopher Nolan", "Brian Herbert"], settings=s)
    kept, rejected = evaluate_counterfactuals("Who wrote the novel Dune?", cands, **kw)  # type: ignore[arg-type]
    assert [c.text for c in kept] == ["Who wrote the sequel to Dune?"]
    assert "copied from the prompt's example" in rejected[0].reason
    # For the example's own question the same line is a legitimate counterfactual.
    kept, _ = evaluate_counterfactuals("Who is the lead actor in The Dark Knight?", cands, **kw)  # type: ignore[arg-type]
    assert "Who directed The Dark Knight?" in [c.text for c in kept]


def test_constant_closed_book_answers_are_uninformative() -> None:
    assert cfrag.closed_book_is_degenerate("Batman", ["batman", "Batman."])
    assert not cfrag.closed_book_is_degenerate("Batman", ["Batman"])  # two answers could simply agree
    assert not cfrag.closed_book_is_degenerate("Batman", ["Batman", "Nolan"])
    assert not cfrag.closed_book_is_degenerate("", ["", "", ""])
    kept, rejected = evaluate_counterfactuals(
        "Who is the lead actor in The Dark Knight?",
        [("role", "Who played the villain in The Dark Knight?"), ("role", "Who composed its score?")],
        sims=[0.8, 0.7], rel_dom=[0.5, 0.5], answer_q="Batman", answers_cf=["Batman", "Batman"],
        settings=CFRagSettings())
    assert len(kept) == 2 and rejected == []
    assert all(c.answers == "undetermined" and c.div_ans == 0.5 for c in kept)


def test_median_sigma() -> None:
    x = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
    # pair distances 3, 4, 5 → median 4
    assert cfrag.median_sigma(x, 0.5) == pytest.approx(4.0)
    assert cfrag.median_sigma(x[:1], 0.5) == 0.5
    assert cfrag.median_sigma(np.zeros((3, 2)), 0.5) == 0.5
    # With σ from the median rule, the compressed e5-like cosine range still clusters.
    rng = np.random.default_rng(0)
    base = rng.standard_normal(32)
    a = base + 0.35 * rng.standard_normal(32)
    b = base + 0.35 * rng.standard_normal(32)
    x2 = np.vstack([a + 0.05 * rng.standard_normal(32) for _ in range(4)]
                   + [b + 0.05 * rng.standard_normal(32) for _ in range(4)])
    x2 /= np.linalg.norm(x2, axis=1, keepdims=True)
    assert np.min(x2 @ x2.T) > 0.8  # everything "similar", as with e5
    res = spectral_clustering(x2, 2, cfrag.median_sigma(x2, 0.5), np.random.default_rng(0))
    assert _same_partition(res.labels.tolist(), [0] * 4 + [1] * 4)


def test_hypothesis_prompt_fits_the_context_window() -> None:
    gen = _CountingGen()  # n_ctx = 1000, one token per word
    hits = [_hit(i, " ".join(f"w{i}_{j}" for j in range(900))) for i in range(3)]
    msgs, texts = cfrag.hypothesis_messages("Who is the lead actor?", hits, gen, 256, 64)
    used = sum(gen.count_tokens(m.content) for m in msgs)
    assert used <= gen.n_ctx - 256
    assert all(t.endswith("…") for t in texts)
    assert msgs[0].content.startswith(cfrag.SYSTEM_HYPOTHESIS) and "[3] (d2, p. 1)" in msgs[1].content


def test_echoed_candidate_line_is_reduced_to_its_answer() -> None:
    from rag_desktop.core.replies import parse_hypothesis

    ans, _, how = parse_hypothesis("(A) Tomas Rehn — Ψ = 0.539 — The passage states that he plays the lead.")
    assert (ans, how) == ("Tomas Rehn", "fallback")
    assert parse_hypothesis("Answer: Kessby")[0] == "Kessby"
