"""Which sources an answer needs, on request: a button on the answer and a line per cited source.

The counterfactual question asked of the person's own answer (core.needs): each cited source is left
out in turn and the same question answered again; a source whose absence changes the answer is
needed. The work runs as one worker task of the question (ui.question_view); this widget only offers
it, shows its progress and draws the result.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QLabel, QSizePolicy, QToolButton

from rag_desktop.core.needs import SourceNeed
from rag_desktop.core.types import Answer, Progress
from rag_desktop.ui.i18n import tr
from rag_desktop.ui.plaintext import plain_tooltip
from rag_desktop.ui.present import progress_text

WITHOUT_CHARS = 80  # of the answer written without a source, shown on its line (whole in the tooltip)


def needs_lines(needs: Sequence[SourceNeed]) -> list[str]:
    """One plain sentence per cited source, the last ending with what it cost."""
    if not needs:
        return [tr("needs.none")]
    out = []
    for s in needs:
        without = " ".join(s.answer_without.split())
        short = without if len(without) <= WITHOUT_CHARS else without[: WITHOUT_CHARS - 1] + "…"
        key = "needs.needed" if s.needed else "needs.not_needed"
        out.append(tr(key, n=s.n, title=s.title, without=short, f1=f"{s.agreement:.2f}"))
    # What it cost ends the last line: a line of its own was clipped under a short answer pane.
    out[-1] += " · " + tr("needs.took", s=f"{sum(s.seconds for s in needs):.0f}", k=len(needs))
    return out


class NeedsView(QObject):
    """The "Which sources does it need?" button of an answer pane, and the lines it fills."""

    requested = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.button = QToolButton()
        self.button.clicked.connect(lambda: self.requested.emit())
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.PlainText)  # answers and titles are text, not markup
        self.label.setWordWrap(True)
        # Lines name titles and answers: clipped to the pane, never widening it (whole in the tooltip).
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self._needs: tuple[SourceNeed, ...] | None = None
        self._progress: Progress | None = None
        self.clear()

    def clear(self) -> None:
        self._needs, self._progress = None, None
        self.button.setVisible(False)
        self.label.setVisible(False)

    def offer(self, answer: Answer) -> None:
        """Offered for an answer that cites a source it was given."""
        self.clear()
        cites = any(c.valid for c in answer.citations) and not answer.abstained
        self.button.setVisible(cites)
        self.button.setEnabled(cites)
        self.retranslate()

    def show_progress(self, p: Progress) -> None:
        self._progress = p
        self.button.setEnabled(False)
        self.label.setVisible(True)
        self.retranslate()

    def show_needs(self, needs: tuple[SourceNeed, ...]) -> None:
        self._needs, self._progress = needs, None
        self.button.setVisible(False)  # asked and answered: its lines take the pane's whole width
        self.label.setVisible(True)
        self.retranslate()

    def show_failed(self, message: str) -> None:
        self._needs, self._progress = None, None
        self.button.setEnabled(True)
        self.label.setVisible(True)
        self.label.setText(tr("needs.failed", msg=message))

    def retranslate(self) -> None:
        self.button.setText(tr("needs.button"))
        self.button.setToolTip(tr("needs.tip"))
        if self._needs is not None:
            lines = needs_lines(self._needs)
            self.label.setText("\n".join(lines))
            self.label.setToolTip(plain_tooltip("\n".join(
                [*lines, *(tr("needs.without_tip", n=s.n, without=s.answer_without) for s in self._needs)])))
        elif self._progress is not None:  # the sources left out so far, or the model being made ready
            self.label.setText(progress_text(self._progress))
