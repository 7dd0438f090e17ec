"""Every text a person can see in the Chinese UI is Chinese (gui_text_walk): the main window
after a question (columns, Why card and its fold, answers, CF-RAG in plain words and its folds, the
CF-RAG trace, the chart, the conversation), the viewer, the Settings dialog and the calibration
wizard. The documents' own text and titles, file names, model names, numbers and symbols are not
the UI's and stay as they are. The service is the in-memory collaborator of test_gui_support (canned rankings, a
scripted generator); the window, its widgets and the translation table are real.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gui_text_walk import english_in, english_words
from test_gui_support import FakeService, ScriptedGenerator
from window_helpers import shown_window

from rag_desktop.core.cfrag.types import CFTrace
from rag_desktop.core.settings import Settings
from rag_desktop.ui import i18n
from rag_desktop.ui.main_window import MainWindow

pytestmark = pytest.mark.gui
QUESTION = "Why do people fail the Wason selection task?"


@pytest.fixture()
def zh_window(qtbot: Any, tmp_path: Path) -> Iterator[tuple[MainWindow, FakeService]]:
    settings = Settings().replace("ui", language="zh")
    i18n.set_language("zh")
    svc = FakeService(tmp_path / "lib", settings, ScriptedGenerator())
    with shown_window(qtbot, svc, settings, tmp_path / "settings.toml", auto_answer=True, size=(1280, 770)) as win:
        yield win, svc
    i18n.set_language("en")


def _strings(obj: Any) -> Iterator[str]:
    """Every string inside a result (dataclasses, tuples, dicts): the documents' and the models' words."""
    if isinstance(obj, str):
        yield obj
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _strings(getattr(obj, f.name))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _strings(v)


def content_of(win: MainWindow) -> list[str]:
    """What is not the UI's own words: the question, the documents (text, titles, paths, terms
    and their readable forms), the models' answers and CF-RAG texts, and the model names."""
    st = win.state
    assert st is not None and st.comparison is not None
    out = [QUESTION, *win.ui_state.recent_questions, Path(win.service.library.folder).name]
    for r in (st.comparison.baseline, st.comparison.causal):
        for h in r.hits:
            out += [h.title, h.text, " ".join(h.text.split()), h.path, Path(h.path).name]
        for e in r.explanations:
            if e.split is not None:
                out += [k.term for k in (*e.split.query_terms, *e.split.b_terms)]
                out += [t for a in e.split.a_terms for t in (a.term, a.absorbed_by)]
    out += list(st.surfaces.values())
    for a in st.answers.values():
        out += [a.text, *(s.title for s in a.sources)]
    if st.cfrag is not None:
        trace: CFTrace = st.cfrag.trace
        # the models' words only (the core's reasons and warnings are the UI's to translate)
        cands = (*trace.counterfactuals, *trace.rejected_counterfactuals)
        out += [trace.query, trace.counterfactual_raw, *trace.queries, trace.generator, trace.embedder,
                trace.scorer, *(t for c in cands for t in (c.text, c.answer_q, c.answer_cf)),
                *(t for h in trace.hypotheses for t in (h.answer, h.rationale, h.raw_text)),
                trace.decision.synthesis_raw, trace.decision.final_answer, trace.decision.final_rationale,
                *(t for e in trace.evidence for t in (e.hit.title, e.hit.text)), st.cfrag.answer.text]
    out += [v for v in _strings(win.settings.models) if isinstance(v, str)]
    out += ["scripted-generator", "scripted generator"]
    return out


def report(found: list[tuple[str, str, list[str]]]) -> str:
    return "\n".join(f"{where}: {words} in {text[:160]!r}" for where, text, words in found)


def test_the_word_finder_catches_english_and_passes_what_is_not_the_uis() -> None:
    assert english_words("(not translated)") == ["not", "translated"]
    assert english_words("未翻译") == []
    assert english_words("请打开 en_textbook.pdf（/home/a/b c.docx）") == []
    assert english_words("s_sim 0.812，τ = 0.88，CF-RAG 与 BM25，12 ms") == []
    assert english_words("Passages [1] and [3] show it.", ["Passages [1] and [3] show it."]) == []
    assert english_words("…selection task asks…", ["The selection task asks which cards"]) == []
    assert english_words("移动了：“selection”、“task”") == []
    assert english_words("<p>File missing</p>") == ["File", "missing"]


def test_every_visible_string_of_the_chinese_ui_is_chinese(qtbot: Any, zh_window: Any, tmp_path: Path) -> None:
    win, _svc = zh_window
    win.ask(QUESTION)
    qtbot.waitUntil(lambda: win.state is not None and win.state.cfrag is not None and not win.runner.busy,
                    timeout=10000)
    win.results.columns["causal"].select_row(0)
    win.results.why.fold.setChecked(True)  # the scores and the formula, behind the fold
    win.results.cf_card.plain.fold.setChecked(True)  # CF-RAG's numbers, behind its plain sentences
    win.results.trace_view.plain.fold.setChecked(True)  # the trace's tables, likewise
    win.conversation_dock.show_in_side()
    for pane in win.results.answers.values():
        pane.sources_btn.setChecked(True)  # the passages each answer read, and their originals
    content = content_of(win)
    found = english_in(win, content)
    assert found == [], report(found)

    # the viewer on a document, then a file gone from disk (said in the status bar)
    hit = win.state.comparison.causal.hits[0]
    win.open_hit(hit)
    qtbot.waitUntil(lambda: not win.render_runner.busy and not win.runner.busy, timeout=10000)
    found = english_in(win.viewer, content)
    assert found == [], report(found)
    win.viewer.hide()
    gone = dataclasses.replace(hit, path=str(tmp_path / "moved away.pdf"))
    win.open_hit(gone)
    found = english_in(win, [*content, gone.path, Path(gone.path).name])
    assert found == [], report(found)

    win.open_settings()
    found = english_in(win.settings_dialog, content)
    win.settings_dialog.reject()
    assert found == [], report(found)

    win.libraries.open_calibration()
    found = english_in(win.libraries.calibration_wizard, content)
    win.libraries.calibration_wizard.reject()
    assert found == [], report(found)


def test_every_core_note_is_read_back_and_said_in_chinese() -> None:
    """CF-RAG's and the re-ranking's warnings (core.notes books): each template read back, said in zh."""
    import string

    from rag_desktop.core.cfrag import notes
    from rag_desktop.ui.cf_notes import BOOKS, cf_note, cf_reasons

    for book in BOOKS:
        for name, template in book.templates.items():
            fields = {f: "0.42" for _, f, _, _ in string.Formatter().parse(template) if f}
            text = book.say(name, **fields)
            assert book.read(text) == (name, fields)
            with i18n.using("zh"):
                assert english_words(cf_note(text)) == [], (name, cf_note(text))
    joined = "; ".join([notes.say("duplicate", n=2), notes.say("off_topic", sim="0.310", theta="0.50")])
    with i18n.using("zh"):
        assert cf_reasons(joined) == "与第 2 个候选重复；sim_sem 0.310 ≤ θ_sim 0.50：偏离主题"
    assert cf_note("a model's own words") == "a model's own words"
