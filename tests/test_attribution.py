"""core.attribution: uncited sentences get the source that holds their words, marked as matched."""

from __future__ import annotations

from rag_desktop.core.attribution import MIN_SHARE, attribute, best_source, content_tokens
from rag_desktop.core.citations import citation_spans
from rag_desktop.core.replies import parse_citations
from rag_desktop.core.types import Hit

SOURCES = [
    "第四章 住宿费和伙食补助 第八条 住宿费实行限额标准：一线城市每晚不超过600元，省会城市每晚不超过450元。",
    "第六条 审查结论的有效期为自出具之日起2年。",
    "Fewer than one in ten people turn the A and the 7, the two cards that could falsify the rule.",
]


def _reference_share(sentence: str, source: str, question: str) -> float:
    """share(s, P) written out (module doc): content tokens of s, minus the question's, held by P."""
    q = content_tokens(question)
    words = {t for t in content_tokens(sentence) if t not in q}
    return len(words & content_tokens(source)) / len(words) if words else 0.0


def test_each_uncited_sentence_gets_the_source_that_holds_it() -> None:
    q = "数据出境安全评估结论的有效期是多久？"
    text = "根据工作指引第六条，审查结论的有效期为2年。一线城市住宿每晚不超过600元。"
    att = attribute(text, SOURCES, q)
    assert att.text == "根据工作指引第六条，审查结论的有效期为2年[2]。一线城市住宿每晚不超过600元[1]。"
    # the recorded spans are exactly the added markers, and they parse as valid citations
    assert [(att.text[a - 1:b + 1], n) for a, b, n in att.added] == [("[2]", 2), ("[1]", 1)]
    assert [(a, b, n) for a, b, n in citation_spans(att.text)] == list(att.added)
    hits = [Hit(i, i, "chunk", f"t{i}", "p", 1, t, 0.5, i, "zh") for i, t in enumerate(SOURCES, start=1)]
    assert all(c.valid for c in parse_citations(att.text, hits))


def test_english_marker_goes_before_the_full_stop_and_the_models_citations_stay() -> None:
    q = "Which cards must be turned over in the Wason selection task?"
    text = "The A and the 7 could falsify the rule. Most people pick A and 4 [1]."
    att = attribute(text, SOURCES, q)
    assert att.text == "The A and the 7 could falsify the rule [3]. Most people pick A and 4 [1]."
    assert [n for _a, _b, n in att.added] == [3]  # the model's own [1] is kept as it stands, not re-judged


def test_clauses_of_one_sentence_get_one_marker_at_its_end() -> None:
    q = "数据出境安全评估结论的有效期是多久？"
    # a list of clauses held by one source: one marker, after the last of them
    text = "审查结论自出具之日起算；有效期为2年；到期应当重新申报。"
    att = attribute(text, SOURCES, q)
    assert att.text == "审查结论自出具之日起算；有效期为2年[2]；到期应当重新申报。"


def test_no_marker_without_enough_shared_words() -> None:
    q = "What does the CardLogic app do?"
    # nothing of this stands in any source: no citation is invented
    assert attribute("It is free for schools.", SOURCES, q).text == "It is free for schools."
    # words of the question do not count: every retrieved passage repeats them
    assert best_source("The cards rule.", SOURCES, frozenset(content_tokens("cards rule"))) is None
    assert attribute("", SOURCES, q).added == ()


def test_the_choice_agrees_with_the_reference_share() -> None:
    q = "出差住宿费的报销标准是多少？"
    for sentence in ("省会城市每晚不超过450元。", "有效期为自出具之日起2年。", "the two cards that could falsify it"):
        shares = [_reference_share(sentence, s, q) for s in SOURCES]
        best = max(range(3), key=lambda i: (shares[i], -i))
        expected = best + 1 if shares[best] >= MIN_SHARE else None
        assert best_source(sentence, SOURCES, frozenset(content_tokens(q))) == expected


def test_the_answer_pane_marks_matched_citations_apart(qtbot) -> None:  # type: ignore[no-untyped-def]
    import pytest

    pytest.importorskip("PySide6")
    from PySide6.QtGui import QTextCharFormat, QTextCursor

    from rag_desktop.core.types import Answer
    from rag_desktop.ui import i18n
    from rag_desktop.ui.answer_pane import AnswerPane

    hits = [Hit(i, i, "chunk", f"Doc {i}", "p.pdf", 3, t, 0.5, i, "zh") for i, t in enumerate(SOURCES, start=1)]
    att = attribute("The A and the 7 could falsify the rule. Most people pick A and 4 [1].", [h.text for h in hits],
                    "Which cards must be turned over?")
    answer = Answer(att.text, parse_citations(att.text, hits), tuple(hits), "baseline", matched=att.added)
    with i18n.using("en"):
        pane = AnswerPane("baseline", "col.baseline")
        qtbot.addWidget(pane)
        pane.set_answer(answer)
        assert pane.status.text().startswith("done · 2 citations (1 matched by words)")

        def fmt_at(pos: int) -> QTextCharFormat:
            cur = QTextCursor(pane.browser.document())
            cur.setPosition(pos + 1)
            return cur.charFormat()

        (a, _b, _n), = att.added
        own = att.text.index("[1]") + 1
        assert fmt_at(a).underlineStyle() == QTextCharFormat.UnderlineStyle.DotLine
        assert "the model did not cite" in fmt_at(a).toolTip()
        assert fmt_at(own).underlineStyle() != QTextCharFormat.UnderlineStyle.DotLine
        assert fmt_at(a).isAnchor() and fmt_at(own).isAnchor()  # both open the viewer
        # one source cited twice, both matched: counted as one citation, in the singular
        one = attribute("一线城市每晚不超过600元。省会城市每晚不超过450元。", [h.text for h in hits], "住宿费标准？")
        assert [n for _a, _b, n in one.added] == [1, 1]
        pane.set_answer(Answer(one.text, parse_citations(one.text, hits), tuple(hits), "baseline", matched=one.added))
        assert pane.status.text().startswith("done · 1 citation (matched by words)")


def test_an_answer_that_repeats_the_worked_example_is_caught() -> None:
    from rag_desktop.core.attribution import echoes_example
    from rag_desktop.core.prompting import load_template

    example = load_template("answer_zh").example_assistant
    cough = ["第四节 分证论治 内伤咳嗽 阴虚肺燥证 治法：滋阴润肺，化痰止咳。代表方：沙参麦冬汤加减。"]
    seen = "根据《第六章 咳嗽》第十二条，员工每年享有十五天带薪年假，非全日制员工八天 [2]。"  # the 1.5B, demo-05
    assert echoes_example(seen, example, cough)
    assert not echoes_example("中医治疗久咳的代表方是沙参麦冬汤加减 [1]。", example, cough)
    # words the example shares with the sources do not count against an answer
    assert not echoes_example("员工每年享有十五天带薪年假 [1]。", example, ["员工每年享有十五天带薪年假。"])


def test_the_pane_says_when_the_answer_copied_the_example(qtbot) -> None:  # type: ignore[no-untyped-def]
    from rag_desktop.core.types import Answer
    from rag_desktop.ui import i18n
    from rag_desktop.ui.answer_pane import AnswerPane

    with i18n.using("en"):
        pane = AnswerPane("baseline", "col.baseline")
        qtbot.addWidget(pane)
        pane.set_answer(Answer("员工每年享有十五天带薪年假 [1]。", (), (), "baseline", warnings=("copied_example",)))
        assert pane.status.text().startswith("⚠ not an answer: the model repeated the prompt's worked example")


def test_the_pane_warns_when_no_passage_holds_the_answer_in_both_languages(qtbot) -> None:  # type: ignore[no-untyped-def]
    from rag_desktop.core.types import Answer
    from rag_desktop.ui import i18n
    from rag_desktop.ui.answer_pane import AnswerPane
    from rag_desktop.ui.i18n import tr

    for lang in ("en", "zh"):
        with i18n.using(lang):
            pane = AnswerPane("baseline", "col.baseline")
            qtbot.addWidget(pane)
            pane.set_answer(Answer("The parliament house opened in 1957.", (), (), "baseline",
                                   warnings=("unsupported",)))
            assert pane.status.text().startswith(tr("answer.unsupported") + " · ")
            assert tr("answer.unsupported_tip") in pane.status.toolTip()
            assert pane.text() == "The parliament house opened in 1957."  # said, not hidden
            pane.add_note(lambda: "shared")  # a later note goes in front, and both survive a language switch
            other = "zh" if lang == "en" else "en"
            with i18n.using(other):
                pane.retranslate()
                assert pane.status.text().startswith(f"shared · {tr('answer.unsupported')} · ")


def test_a_marker_written_after_the_full_stop_belongs_to_its_sentence_and_is_not_matched_again() -> None:
    """Seen in the window: the model wrote "…合住一间。[1]"; the splitter gave "[1]" to the next piece, the
    sentence looked uncited and got a second marker ("一间[1]。 [1]")."""
    from rag_desktop.core.attribution import check_citations, markers_inside

    src = ["第八条 住宿费在一线城市每人每晚不超过600元，其他地区不超过350元。两名同性别员工同行的，原则上合住一间。"]
    q = "住宿费的报销标准是多少？"
    for typed in ("其他地区不超过350元[1]。两名同性别员工同行的，原则上合住一间。[1]",
                  "其他地区不超过350元。[1]两名同性别员工同行的，原则上合住一间。 [1]"):
        checked = check_citations(typed, src, q)
        final = attribute(checked.text, src, q)
        assert final.text == "其他地区不超过350元[1]。两名同性别员工同行的，原则上合住一间[1]。"
        assert final.added == () and [n for _a, _b, n in citation_spans(final.text)] == [1, 1]
    assert markers_inside("It is valid. [1] It ends in 2027.[2] [3]") == "It is valid [1]. It ends in 2027 [2] [3]."
    assert markers_inside("Pi is 3.14 [1]. 它在第3.5节[2]。") == "Pi is 3.14 [1]. 它在第3.5节[2]。"  # already inside


def test_a_place_named_in_parentheses_is_one_sentence_with_one_marker() -> None:
    # "7." and "p." inside the parenthesis end no sentence: split there, each piece got a marker
    source = ('Most people choose "drinking beer" and "16 years of age", the two cards that could break the '
              "drinking-age rule (Chapter 7. Reasoning with Conditionals, 7.3.1 Content effects).")
    text = ('Most people choose "drinking beer" and "16 years of age" (Chapter 7. Reasoning with Conditionals, '
            "§7.3.1 Content effects, p. 142) [1].")
    att = attribute(text, [source], "Which cards do most people choose in the drinking-age version?")
    assert att.text == text and att.added == ()
    uncited = text.removesuffix(" [1].") + "."
    assert attribute(uncited, [source], "").text == text  # one matched marker, at the sentence's end


def test_answer_sentences_keep_the_text_and_close_an_open_parenthesis_at_the_line_end() -> None:
    from rag_desktop.core.attribution import answer_sentences

    text = "See (Chapter 7. Reasoning, p. 142). Next one. An open (paren. goes\nTo the line end. Done."
    pieces = answer_sentences(text)
    assert "".join(pieces) == text
    assert pieces == ["See (Chapter 7. Reasoning, p. 142).", " Next one.", " An open (paren. goes\n",
                      "To the line end.", " Done."]
    assert answer_sentences("第八条（住宿费。标准）每晚600元。") == ["第八条（住宿费。标准）每晚600元。"]
