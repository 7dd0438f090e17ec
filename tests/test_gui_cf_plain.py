"""The CF-RAG column says its run in plain words, one sentence per stage, with the numbers behind a
"Details" fold that starts closed and opens; the CF-RAG trace tab opens the same way. Both languages,
and the window still fits a 1280-pixel screen. The window, its panels and the sentences are real;
the service is the in-memory collaborator of test_gui_support (its canned CF-RAG trace).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_gui_support import FakeService
from window_helpers import shown_window, type_and_ask

from rag_desktop.core.cfrag.plain import plain_trace
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.cf_notes import plain_sentences
from rag_desktop.ui.main_window import MainWindow

pytestmark = pytest.mark.gui

QUESTION = "Why do people fail the Wason selection task?"


@pytest.fixture()
def win(qtbot: Any, tmp_path: Path) -> Iterator[MainWindow]:
    i18n.set_language("en")
    settings = Settings()
    with shown_window(qtbot, FakeService(tmp_path / "lib", settings), settings, tmp_path / "s.toml",
                      auto_answer=True, size=(1280, 800)) as w:
        yield w
    i18n.set_language("en")


def test_the_cfrag_column_says_its_run_in_words_with_the_numbers_folded(qtbot: Any, win: MainWindow) -> None:
    card = win.results.cf_card
    assert not card.isVisibleTo(win)  # nothing to say before CF-RAG has run
    type_and_ask(qtbot, win, QUESTION)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    assert win.state is not None and win.state.cfrag is not None
    trace = win.state.cfrag.trace
    assert card.isVisibleTo(win) and card.trace is trace
    shown = card.plain.sentences.text().splitlines()
    assert shown == ["• " + s for s in plain_sentences(trace, "en")]
    assert len(shown) == len(plain_trace(trace)) >= 5
    assert "so the passage stands" in card.plain.sentences.text()  # the canned trace's cited passage: Δ 0.3
    assert card.plain.title.text() == "How CF-RAG reached its answer"
    # the numbers behind the fold: closed at first, opened by its button
    fold = card.plain.fold
    assert fold.text() == "Details" and not fold.isChecked() and not card.numbers.isVisibleTo(win)
    assert "Ψ" not in card.plain.sentences.text() and "Ψ 0.532" in card.numbers.text()
    assert win.results.columns["cfrag"].subtitle.text() == ""  # the column's numbers moved into the fold
    fold.click()
    assert fold.isChecked() and card.numbers.isVisibleTo(win)
    assert "Δ spread 0.400, noise 0.030" in card.numbers.text() and "CF-RAG trace" in card.numbers.text()
    fold.click()
    assert not card.numbers.isVisibleTo(win)
    # the column's evidence rows, the card and the answer, one over the other
    stack = win.results.stacks["cfrag"]
    assert [stack.widget(i) for i in range(stack.count())] == [
        win.results.columns["cfrag"], card, win.results.answers["cfrag"]]
    assert min(stack.sizes()) > 0
    assert win.minimumSizeHint().width() <= 1280

    # the same in Chinese, said again from the recorded trace
    i18n.set_language("zh")
    win.retranslate()
    assert card.plain.sentences.text().splitlines() == ["• " + s for s in plain_sentences(trace, "zh")]
    assert "因此该段落站得住" in card.plain.sentences.text()
    assert card.plain.fold.text() == "详细信息" and card.plain.title.text() == "CF-RAG 如何得出回答"
    assert win.minimumSizeHint().width() <= 1280

    # a new question: the card goes while it is asked, and says the new run when it ends
    win.results.begin(answers_on=True, cf_on=True)
    assert not card.isVisibleTo(win) and card.trace is None
    type_and_ask(qtbot, win, "What is matching bias?")
    qtbot.waitUntil(lambda: win.state is not None and win.state.question == "What is matching bias?"
                    and win.state.cfrag is not None and not win.runner.busy, timeout=10000)
    assert win.state is not None and win.state.cfrag is not None
    assert card.trace is win.state.cfrag.trace and card.isVisibleTo(win)


def test_the_trace_tab_opens_with_the_sentences_and_folds_its_tables(qtbot: Any, win: MainWindow) -> None:
    tv = win.results.trace_view
    type_and_ask(qtbot, win, QUESTION)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    win.results.setCurrentWidget(tv)
    assert win.state is not None and win.state.cfrag is not None
    assert tv.plain.sentences.text() == "\n".join("• " + s for s in plain_sentences(win.state.cfrag.trace, "en"))
    assert tv.plain.isVisibleTo(win) and tv.plain.sentences.isVisibleTo(win)
    assert not tv.plain.fold.isChecked() and not tv.hy_table.isVisibleTo(win) and not tv.summary.isVisibleTo(win)
    tv.plain.fold.click()
    assert tv.hy_table.isVisibleTo(win) and tv.de_box.isVisibleTo(win)
    assert tv.hy_table.height() > tv.hy_table.horizontalHeader().height()  # rows fitted once shown
    tv.clear("trace.waiting")
    assert not tv.plain.isVisibleTo(win) and tv.empty.isVisibleTo(win)


def test_a_standard_answer_that_stands_fills_the_cfrag_column_with_its_passages(qtbot: Any, win: MainWindow) -> None:
    """cfrag.keep_standard: when the standard answer stood, no path ran and the trace has no evidence;
    the column shows the passages the standard answer read (not "nothing found") and its one sentence."""
    import dataclasses

    from rag_desktop.core.cfrag.types import CFResult, StandardCheck
    from rag_desktop.core.types import Answer

    type_and_ask(qtbot, win, QUESTION)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    st = win.state
    assert st is not None and st.cfrag is not None
    res = st.cfrag
    read = tuple(e.hit for e in res.trace.evidence[:2])
    check = StandardCheck("Matching bias [1].", 1.0, False, 0.5, "confident")
    d = dataclasses.replace(res.trace.decision, kind="standard", chosen=-1, read_ids=(), standard=check,
                            final_answer=check.answer)
    trace = dataclasses.replace(res.trace, evidence=(), hypotheses=(), counterfactuals=(),
                                rejected_counterfactuals=(), decision=d)
    st.cfrag = CFResult(Answer(check.answer, (), read, "cfrag"), trace)
    win.results.show_cfrag(st)
    col = win.results.columns["cfrag"]
    assert [r.hit.unit_id for r in col.model.rows] == [h.unit_id for h in read]
    assert all(r.note == "read by the standard answer, which stands" for r in col.model.rows)
    assert not col.is_collapsed() and win.results.cf_card.isVisibleTo(win)
    said = win.results.cf_card.plain.sentences.text()
    assert said.startswith("• The standard answer is held by a passage it read (100 %") and "\n" not in said
    tv = win.results.trace_view
    tv.set_trace(trace)  # its details hold no empty tables of paths that did not run
    assert all(b.isHidden() for b in (tv.cf_box, tv.ev_box, tv.cl_box, tv.hy_box)) and not tv.de_box.isHidden()
    said = tv.de_label.text().splitlines()
    assert said[0].startswith("Decision: the standard answer stands; the counterfactual paths did not run")
    assert len(said) == 2 and "Matching bias [1]." in said[1]  # no "synthesised from: —", no rationale asked for
    assert "0 counterfactual" not in tv.summary.text()  # no counts of steps that never ran


def test_an_abstained_cfrag_says_so_in_its_folded_column(qtbot: Any, win: MainWindow) -> None:
    """CF-RAG did not run (the library holds no answer, or the first column's passages were judged not
    to hold it): the column strip says so instead of still saying CF-RAG is to run."""
    from rag_desktop.core.abstain import Abstention, Support
    from rag_desktop.core.types import Answer
    from rag_desktop.ui.i18n import tr

    win.results.cf_queued()
    judged = Abstention(True, "not_held", Support(3, 2, 0.8, 0.75), judged=-0.4)
    win.results.show_abstained(Answer("", method="cfrag", abstention=judged))
    col = win.results.columns["cfrag"]
    assert col.placeholder.text() == tr("trace.abstained") and col.placeholder.isVisible()
    assert win.results.answers["cfrag"].text() == tr("answer.not_held_text")
