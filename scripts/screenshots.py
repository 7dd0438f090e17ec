#!/usr/bin/env python
"""Render PNG screenshots of the main views offscreen, for the README.

    .venv/bin/python scripts/screenshots.py --out docs/screenshots
    .venv/bin/python scripts/screenshots.py --library ~/my-demo-lib --no-answers

Uses the demo library (built from resources/demo on first use, which takes a few
minutes on a laptop CPU) and the configured models. Views, at each --sizes (default
1280×800 and 1600×1000) and in English and Chinese: the comparison workspace with the
A/B chips and the "Why" card of a candidate that kept its rank, then (unless
--no-answers) the answers and the CF-RAG trace of one real run (also caught while it
runs); once: the settings dialog per language, the document viewer, the rank-movement
chart, and with --calibration the calibration wizard.

Chinese text needs a CJK font: the script refuses to write screenshots with tofu boxes
unless --allow-missing-cjk is given. Install one (Debian/Ubuntu: fonts-noto-cjk) or put an
openly licensed .ttf/.otf/.ttc in resources/fonts/.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

EN_Q = "Why do people fail the Wason selection task?"
ZH_Q = "数据出境安全评估需要准备哪些材料？"


class _RunUnpickler(pickle.Unpickler):
    """Reads a run cache written before CF-RAG became the package core/cfrag/: its
    types moved from core.cfrag_types to core.cfrag.types, unchanged."""

    def find_class(self, module: str, name: str) -> object:
        if module == "rag_desktop.core.cfrag_types":
            module = "rag_desktop.core.cfrag.types"
        return super().find_class(module, name)


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    from PySide6.QtWidgets import QApplication

    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise SystemExit(f"screenshots: timed out after {timeout:.0f} s waiting for {what}")
        QApplication.processEvents()
        time.sleep(0.03)
    for _ in range(5):  # let layouts settle before grabbing
        QApplication.processEvents()


def cjk_families() -> list[str]:
    from PySide6.QtGui import QFontDatabase

    fonts_dir = ROOT / "resources" / "fonts"
    if fonts_dir.is_dir():
        for f in sorted(fonts_dir.iterdir()):
            if f.suffix.lower() in (".ttf", ".otf", ".ttc"):
                QFontDatabase.addApplicationFont(str(f))
    return list(QFontDatabase.families(QFontDatabase.WritingSystem.SimplifiedChinese))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--library", type=Path, default=None, help="library folder (default: the demo library)")
    ap.add_argument("--no-answers", action="store_true", help="rankings only (no generator, much faster)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for each step")
    ap.add_argument("--allow-missing-cjk", action="store_true")
    ap.add_argument("--sizes", default="1280x800,1600x1000",
                    help="window sizes, comma-separated WIDTHxHEIGHT (default: %(default)s)")
    ap.add_argument("--calibration", action="store_true", help="also the calibration wizard (ranks 3 probes)")
    ap.add_argument("--run-cache", type=Path, default=None,
                    help="keep the one real answers+CF-RAG run in this file and, when it exists, show it "
                         "again instead of running the model (to redo the screenshots after a UI change)")
    args = ap.parse_args(argv)

    from PySide6.QtGui import QFont
    from PySide6.QtWidgets import QApplication

    from rag_desktop.app.config import demo_library_dir, load_settings
    from rag_desktop.app.service import RagService
    from rag_desktop.ui import i18n
    from rag_desktop.ui.logs import setup_logging
    from rag_desktop.ui.main import demo_source_folder
    from rag_desktop.ui.main_window import MainWindow

    setup_logging()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    families = cjk_families()
    if not families:
        msg = ("screenshots: no CJK font is installed, Chinese would render as boxes. Install one "
               "(Debian/Ubuntu: apt-get install fonts-noto-cjk) or add a font to resources/fonts/.")
        if not args.allow_missing_cjk:
            print(msg, file=sys.stderr)
            return 2
        print("warning: " + msg, file=sys.stderr)
    else:
        preferred = next((f for f in families if "Noto Sans CJK SC" in f or "Noto Sans SC" in f), families[0])
        base = QFont(app.font())
        base.setFamilies([base.family(), preferred])  # Latin from the default, Han from the CJK font
        app.setFont(base)
        print(f"CJK font: {preferred}")

    settings = load_settings()
    lib = args.library or demo_library_dir()
    service = RagService(lib, settings)
    i18n.set_language("en")
    scratch = Path(tempfile.mkdtemp(prefix="rag-shots-"))  # the window's state file: never the user's
    win = MainWindow(service, settings.replace("ui", language="en"), settings_file=scratch / "settings.toml",
                     auto_answer=False)
    win._save_settings = lambda: None  # type: ignore[method-assign]  # screenshots never touch the user's settings
    sizes = [tuple(int(v) for v in s.lower().split("x")) for s in args.sizes.split(",")]

    def size(w: int, h: int) -> str:
        win.resize(w, h)
        win._fit_panels()  # the proportions a first start at this screen size gets
        wait_until(lambda: win.width() == w, 10, "the resize")
        return f"{w}x{h}"

    size(*sizes[0])
    win.show()
    args.out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []

    def shot(widget: object, name: str) -> None:
        for _ in range(5):
            QApplication.processEvents()
        path = args.out / name
        widget.grab().save(str(path))  # type: ignore[attr-defined]
        shots.append(path)
        print(f"wrote {path}")

    lib_ctl, results = win.libraries, win.results  # the library sidebar; the Compare/Trace/Chart tabs
    wait_until(lambda: lib_ctl.listing is not None and not win.runner.busy, 120, "the library listing")
    assert lib_ctl.listing is not None
    if not lib_ctl.listing.documents:
        print(f"building the demo library in {lib} (first run; this takes a few minutes)…")
        lib_ctl.start_ingest([demo_source_folder()])
        wait_until(lambda: win.runner.busy, 30, "the ingest to start")
        wait_until(lambda: lib_ctl.panel.progress.value() > 1, args.timeout, "ingest progress")
        shot(win, "ingest.png")
        wait_until(lambda: lib_ctl.last_ingest_report is not None and not win.runner.busy, args.timeout, "the ingest")

    def ask(q: str, answers: bool = False, on_progress: Callable[[], None] | None = None) -> None:
        win.query_bar.auto_answer.setChecked(answers)
        win.ask(q)
        if not answers:
            wait_until(lambda: win.state is not None and win.state.comparison is not None and not win.runner.busy,
                       args.timeout, f"the ranking of {q!r}")
            return

        def cf_over() -> bool:  # CF-RAG's result, its abstention (both its answer) or a failure
            st = win.state
            return st is not None and ("cfrag" in st.answers or bool(st.errors))

        if on_progress is not None:  # CF-RAG under way: the live trace tab
            wait_until(lambda: results.trace_view._empty_key == "trace.running"  # a CF-RAG step, not model prep
                       or cf_over(), args.timeout, "CF-RAG to start")
            on_progress()
        wait_until(lambda: cf_over() and not win.runner.busy, args.timeout, f"the answers to {q!r}")

    def select_first_kept() -> None:
        """Select a causal row that kept its baseline rank, to show the Why card's "held" line."""
        st = win.state
        assert st is not None and st.comparison is not None
        expl = st.comparison.causal.explanations
        row = next((i for i, h in enumerate(st.comparison.causal.hits)
                    if any(e.unit_id == h.unit_id and e.new_rank == e.baseline_rank for e in expl)), 0)
        results.columns["causal"].select_row(row)

    # The workspace after a question (answers off: the CF-RAG column folded to its strip), at every
    # size, in both languages.
    for lang, q in (("en", EN_Q), ("zh", ZH_Q)):
        if i18n.language() != lang:
            win.apply_settings(win.settings.replace("ui", language=lang))
        results.setCurrentIndex(0)
        ask(q)
        for w, h in sizes:
            tag = size(w, h)
            select_first_kept()
            shot(win, f"compare_{lang}_{tag}.png")
        win.open_settings()
        wait_until(lambda: win.settings_dialog.isVisible(), 10, "the settings dialog")
        win.settings_dialog.tabs.setCurrentIndex(1)
        shot(win.settings_dialog, f"settings_{lang}.png")
        win.settings_dialog.reject()

    if i18n.language() != "en":
        win.apply_settings(win.settings.replace("ui", language="en"))
    size(*sizes[-1])
    results.setCurrentIndex(0)
    ask(EN_Q)
    hits = results.columns["causal"].hits()
    pdf = next((h for h in hits if h.path.endswith(".pdf")), None)
    if pdf is not None:  # whole-word marks on the page
        win.open_hit(pdf)
        wait_until(lambda: win.viewer.pending == 0, 120, "the viewer")
        shot(win.viewer, "viewer_en.png")
        win.viewer.hide()
    results.setCurrentWidget(results.chart)
    shot(win, "rank_chart_en.png")
    results.setCurrentIndex(0)

    if not args.no_answers:
        # One real run of the answers and CF-RAG (slow on a laptop CPU); every later view reuses it.
        def live() -> None:
            results.setCurrentWidget(results.trace_view)
            shot(win, "cfrag_trace_running_en.png")
            results.setCurrentIndex(0)

        cached = args.run_cache is not None and args.run_cache.is_file()
        if cached:
            # the answers and CF-RAG result of an earlier real run of this script, shown again
            with args.run_cache.open("rb") as fh:
                run = _RunUnpickler(fh).load()  # a file this script wrote itself
            ask(run["question"])
            st = win.state
            assert st is not None and st.comparison is not None
            assert st.flow is not None
            # drawn as the question view draws a live run's events: each answer over the passages
            # its column reads (one answer shown in every column of its group), then CF-RAG
            results.set_cf_collapsed(False)
            for group in st.flow.answer_groups(st.comparison):
                for i, (m, ranked) in enumerate(zip(group.members, group.lists, strict=True)):
                    answer = run["answers"].get(m)
                    if answer is not None:
                        st.answers[m] = answer
                        results.show_answer(m, answer, ranked.hits, group.lead if i else "")
            st.cfrag = run["cfrag"]
            st.answers["cfrag"] = st.cfrag.answer
            results.show_cfrag(st)
            # the bar and the answer panes' height as after a live run (ticking the box runs nothing)
            win.query_bar.auto_answer.setChecked(True)
        else:
            ask(EN_Q, answers=True, on_progress=live)
            st = win.state
            if args.run_cache is not None and st is not None and st.cfrag is not None:
                with args.run_cache.open("wb") as fh:
                    pickle.dump({"question": st.question, "answers": dict(st.answers), "cfrag": st.cfrag}, fh)
        for lang in ("en", "zh"):
            if i18n.language() != lang:
                win.apply_settings(win.settings.replace("ui", language=lang))
            for w, h in sizes:
                tag = size(w, h)
                results.setCurrentIndex(0)
                select_first_kept()
                shot(win, f"compare_answers_{lang}_{tag}.png")
                if (w, h) == sizes[0]:  # the answer's Sources table open (n, document, what was given)
                    pane = results.answers["causal"]
                    pane.sources_btn.setChecked(True)
                    shot(win, f"sources_{lang}_{tag}.png")
                    pane.sources_btn.setChecked(False)
                results.setCurrentWidget(results.trace_view)
                shot(win, f"cfrag_trace_{lang}_{tag}.png")
        results.setCurrentIndex(0)
        if i18n.language() != "en":
            win.apply_settings(win.settings.replace("ui", language="en"))

    if args.calibration:
        # Calibration wizard: three demo questions typed, each labelled with the document that
        # answers it (resources/demo/QUESTIONS.md), then the result page.
        from rag_desktop.ui.calibration_wizard import PAGE_LABELS, PAGE_RESULT

        probes = {EN_Q: "en_textbook_reasoning_conditionals.pdf",
                  "如何评估数据出境的安全？": "zh_guideline_cross_border_assessment.pdf",
                  ZH_Q: "zh_guideline_cross_border_assessment.pdf"}
        lib_ctl.open_calibration()
        wiz = lib_ctl.calibration_wizard
        assert wiz is not None
        wait_until(wiz.isVisible, 10, "the calibration wizard")
        wiz.type_radio.setChecked(True)
        wiz.text.setPlainText("\n".join(probes))
        wiz.next()
        wait_until(lambda: wiz.page() == PAGE_LABELS and not win.runner.busy, args.timeout, "the probe candidates")
        for row, name in enumerate(probes.values()):
            wiz.probe_list.setCurrentRow(row)
            for box in wiz.checks:
                if Path(box.toolTip()).name == name and not box.isChecked():
                    box.click()
        wiz.probe_list.setCurrentRow(0)
        shot(wiz, "calibration_labels_en.png")
        wiz.next()
        wait_until(lambda: wiz.page() == PAGE_RESULT or not win.runner.busy, args.timeout, "the calibration result")
        if wiz.page() == PAGE_RESULT:
            shot(wiz, "calibration_result_en.png")
        wiz.reject()  # never applied: screenshots leave the library's decision alone

    win.runner.cancel_all()
    win.runner.wait(30000)
    service.close()
    service.runtime.close()
    print(f"{len(shots)} screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
