"""The Qt-free parts of the calibration wizard: typed questions, scoring from the user's labels,
and the list of known libraries in the app config."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_desktop.app.calibration import (
    METHODS,
    CandidateDoc,
    Probe,
    ProbeCandidates,
    gated_settings,
    questions_from_text,
    score_labels,
)
from rag_desktop.app.config import LibraryList, load_libraries, new_library_dir, save_libraries
from rag_desktop.core.gate import calibrate
from rag_desktop.core.settings import Settings, SettingsError


def item(question: str, baseline: list[int], causal: list[int], hybrid: list[int],
         relevant: frozenset[int] = frozenset()) -> ProbeCandidates:
    rankings = (("baseline", tuple(baseline)), ("causal", tuple(causal)), ("hybrid", tuple(hybrid)))
    docs = sorted({*baseline, *causal, *hybrid})
    cands = tuple(CandidateDoc(d, f"doc {d}", f"/d{d}.txt", tuple((m, None) for m in METHODS)) for d in docs)
    return ProbeCandidates(Probe(question, relevant, "typed"), rankings, cands)


def test_typed_questions_one_per_line_without_blanks_or_repeats() -> None:
    text = "  Why do people fail?  \n\n出差住宿费标准是多少？\nWhy  do people fail?\n   \nlast one"
    assert questions_from_text(text) == ["Why do people fail?", "出差住宿费标准是多少？", "last one"]
    assert questions_from_text("\n \n") == []


def test_scores_from_labels_are_reciprocal_ranks_fed_to_the_gate() -> None:
    items = [
        item("q1", [1, 2, 3], [2, 1, 3], [1, 2, 3]),   # relevant 2: RR 1/2, 1, 1/2
        item("q2", [4, 5, 6], [6, 5, 4], [5, 6, 4]),   # relevant 6: RR 1/3, 1, 1/2
        item("q3", [7, 8], [7, 8], [8, 7]),            # relevant 7: RR 1, 1, 1/2
        item("q4", [9], [9], [9]),                     # nothing ticked: left out
    ]
    labels = [frozenset({2}), frozenset({6}), frozenset({7}), frozenset()]
    out = score_labels(items, labels)
    assert out.n_unlabelled == 1
    assert [s.question for s in out.scores] == ["q1", "q2", "q3"]
    want = [(0.5, 1.0, 0.5), (1 / 3, 1.0, 0.5), (1.0, 1.0, 0.5)]
    for s, w in zip(out.scores, want, strict=True):
        assert s.rr == pytest.approx(w)
    ref = calibrate([w[0] for w in want], [w[1] for w in want], [w[2] for w in want], metric="MRR@10", seed=0)
    assert out.decision == ref
    assert out.decision.decision == "causal" and out.decision.n_probes == 3
    assert out.decision.delta_causal == pytest.approx((0.5 + 2 / 3 + 0) / 3)


def test_a_relevant_document_below_rank_ten_scores_zero_and_default_labels_are_the_probes() -> None:
    deep = list(range(100, 120))  # relevant doc 111 sits at rank 12 in the baseline
    it = item("q", deep, [111, *[d for d in deep if d != 111]], deep, relevant=frozenset({111}))
    out = score_labels([it])
    assert out.scores[0].rr == pytest.approx((0.0, 1.0, 0.0))


def test_no_label_at_all_is_a_readable_error() -> None:
    with pytest.raises(ValueError, match="tick at least one document"):
        score_labels([item("q", [1], [1], [1])], [frozenset()])
    with pytest.raises(ValueError, match="2 probes but 1 label sets"):
        score_labels([item("a", [1], [1], [1]), item("b", [1], [1], [1])], [frozenset({1})])


def test_applying_sets_the_gated_method() -> None:
    assert gated_settings(Settings()).retrieval.default_method == "gated"


# ---------------------------------------------------------------------- the list of libraries

def test_library_list_round_trip_and_current(tmp_path: Path) -> None:
    f = tmp_path / "libraries.toml"
    assert load_libraries(f) == LibraryList()
    a, b = tmp_path / "a", tmp_path / "b"
    lst = LibraryList().with_library(a).with_library(b).with_library(a)
    assert lst.libraries == (str(a.resolve()), str(b.resolve())) and lst.current == str(a.resolve())
    save_libraries(lst, f)
    assert load_libraries(f) == lst
    kept = lst.without(b)
    assert kept.libraries == (str(a.resolve()),)
    with pytest.raises(ValueError, match="open library cannot be removed"):
        lst.without(a)
    assert not lst.with_library(tmp_path / "c", make_current=False).current.endswith("c")


@pytest.mark.parametrize(("text", "message"), [
    ('libraries = "not a list"\n', "libraries"),
    ('current = "/x"\nwhat = 1\n', "unknown key what"),
    ("libraries = [", "not valid TOML"),
])
def test_a_broken_library_list_names_the_key(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "libraries.toml"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(SettingsError, match=message):
        load_libraries(f)


def test_the_current_library_is_always_in_the_list(tmp_path: Path) -> None:
    f = tmp_path / "libraries.toml"
    f.write_text('current = "/tmp/only"\n', encoding="utf-8")
    assert load_libraries(f).libraries == (str(Path("/tmp/only").resolve()),)


def test_new_library_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DESKTOP_DATA_DIR", str(tmp_path))
    assert new_library_dir("  Work papers ") == tmp_path / "libraries" / "Work papers"
    assert new_library_dir("项目资料") == tmp_path / "libraries" / "项目资料"
    for bad in ("", "   ", "..", "a/b", "x:y", ".hidden"):
        with pytest.raises(ValueError, match="cannot be a library name"):
            new_library_dir(bad)
