"""Frozen dataclasses that flow between the stages (docs/architecture.md, "Data flow").

Every stage takes and returns these; nothing here knows about models, files or Qt.
All are JSON-serialisable through :func:`rag_desktop.core.cfrag.types.to_jsonable`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from rag_desktop.core.abstain import Abstention

Lang = Literal["zh", "en", "other"]
Level = Literal["doc", "chunk"]  # in the order the Settings dialog offers them


class Cancelled(Exception):
    """Raised inside long work when the user asked to stop."""


class CancelToken:
    """A thread-safe cancel flag that long-running generators poll.

    Kept as a tiny class (not a bare ``threading.Event``) so that call sites read
    ``cancel.raise_if_set()`` at the points where stopping is safe.
    """

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def raise_if_set(self) -> None:
        if self._event.is_set():
            raise Cancelled()


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Page:
    """Text of one page (1-based ``number``); Word/text files have one logical page."""

    number: int
    text: str


@dataclass(frozen=True)
class ParsedDocument:
    """What a reader returns: raw page texts, before cleaning."""

    path: str
    title: str
    pages: tuple[Page, ...]
    kind: Literal["pdf", "docx", "txt", "md", "image"]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class OcrLine:
    """One recognised line of a scanned page: its text and where it is.

    ``box`` is (x0, y0, x1, y1) in PDF points (1/72 inch) from the page's top-left corner,
    the coordinate space PyMuPDF's ``Page.rect`` uses, so a viewer can mark it on the page.
    """

    text: str
    box: tuple[float, float, float, float]
    score: float


@dataclass(frozen=True)
class OcrPage:
    """What OCR found on one page (1-based ``number``), in reading order."""

    number: int
    width: float
    height: float
    lines: tuple[OcrLine, ...]


@dataclass(frozen=True)
class CleanedText:
    """Cleaned full text of a document plus where each page starts in it.

    ``page_offsets[i]`` is the character offset in ``text`` where page
    ``page_numbers[i]`` begins; chunks map their offsets back to pages with it.
    """

    text: str
    page_offsets: tuple[int, ...]
    page_numbers: tuple[int, ...]


@dataclass(frozen=True)
class ChunkSpan:
    """A chunk before it has a database id: offsets into ``CleanedText.text``."""

    ordinal: int
    text: str
    char_start: int
    char_end: int
    page_start: int
    page_end: int
    lang: Lang


# --------------------------------------------------------------------------- catalog


@dataclass(frozen=True)
class Document:
    doc_id: int
    path: str
    sha256: str
    title: str
    lang: Lang
    n_pages: int
    kind: str


@dataclass(frozen=True)
class Chunk:
    chunk_id: int
    doc_id: int
    ordinal: int
    text: str
    page_start: int
    page_end: int
    char_start: int
    char_end: int
    lang: Lang


@dataclass(frozen=True)
class Keyword:
    """One (term, weight) pair of kw(·) (paper 000 §3.1)."""

    term: str
    weight: float


# --------------------------------------------------------------------------- retrieval


@dataclass(frozen=True)
class Hit:
    """One retrieved unit (a chunk, or a whole document at ``level == "doc"``).

    ``unit_id`` is the chunk id at chunk level and the document id at doc level.
    ``rank`` is 1-based in the list the hit belongs to.
    """

    unit_id: int
    doc_id: int
    level: Level
    title: str
    path: str
    page: int
    text: str
    s_sim: float
    rank: int
    lang: Lang = "other"

    def with_rank(self, rank: int) -> Hit:
        """This hit at another position (``dataclasses.replace`` costs ~10× more, and
        re-ranking builds one per candidate on every question)."""
        return Hit(self.unit_id, self.doc_id, self.level, self.title, self.path, self.page, self.text,
                   self.s_sim, rank, self.lang)


@dataclass(frozen=True)
class AbsorbedTerm:
    """A document term in A(d): exact match (``cosine is None``) or semantically absorbed."""

    term: str
    weight: float
    absorbed_by: str
    cosine: float | None


@dataclass(frozen=True)
class KeywordSplit:
    """K_q, A(d) and B(d) of Eq. 3 for one candidate."""

    query_terms: tuple[Keyword, ...]
    a_terms: tuple[AbsorbedTerm, ...]
    b_terms: tuple[Keyword, ...]


@dataclass(frozen=True)
class Explanation:
    """Why one candidate sits where it does in a re-ranked list (shown as the "Why" card)."""

    unit_id: int
    baseline_rank: int
    new_rank: int
    s_sim: float
    s_c: float | None
    s_hybrid: float | None
    split: KeywordSplit | None
    fallback_used: bool
    size_a: int


@dataclass(frozen=True)
class RankedList:
    """One ranking. ``scores`` holds the method's own score per hit when it has one that
    ``Hit.s_sim`` does not carry (the cross-encoder's s(q, e)), aligned with ``hits``."""

    method: str
    hits: tuple[Hit, ...]
    explanations: tuple[Explanation, ...] = ()
    warnings: tuple[str, ...] = ()
    label: str = ""
    scores: tuple[float, ...] = ()


# --------------------------------------------------------------------------- generation


class GenEventKind(StrEnum):
    TOKEN = "token"
    DONE = "done"


@dataclass(frozen=True)
class GenEvent:
    """One streamed piece of generation; ``DONE`` carries the finish reason."""

    kind: GenEventKind
    text: str = ""
    finish_reason: str = ""
    logprob: float | None = None


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str
    # Offsets in ``content`` where a new piece of the prompt starts (an answer prompt's sources after
    # the first, its question): a local model reads the prompt in these pieces, so that the next
    # prompt that starts alike keeps them (backends/llama_segments.py). Not part of what is sent.
    breaks: tuple[int, ...] = ()


@dataclass(frozen=True)
class Citation:
    """A ``[n]`` in an answer; ``valid`` is False when n was not one of the given sources."""

    n: int
    valid: bool
    doc_id: int | None = None
    unit_id: int | None = None
    title: str = ""
    path: str = ""
    page: int | None = None


@dataclass(frozen=True)
class Locator:
    """Where an answer passage stands: its section heading or article, and the
    printed page label when the PDF defines one ("" otherwise)."""

    heading: str = ""
    page_label: str = ""


@dataclass(frozen=True)
class Answer:
    text: str
    citations: tuple[Citation, ...] = ()
    sources: tuple[Hit, ...] = ()
    method: str = ""
    # Answer passages: one Locator per source, and each source's text before it was
    # translated ("" where it was not), so the UI shows the original beside the translation.
    locators: tuple[Locator, ...] = ()
    original_texts: tuple[str, ...] = ()
    # Markers added after generation to sentences the model left uncited: the span of each number in
    # ``text`` and its n, as citation_spans gives them (core.attribution); shown as matched, not as the model's.
    matched: tuple[tuple[int, int, int], ...] = ()
    # What the UI must say about this answer: "copied_example" (it repeats the prompt's worked example),
    # "unsupported" (no passage it read holds what it adds to the question: core.cfrag.anchor.unsupported).
    warnings: tuple[str, ...] = ()
    # The model's citations taken out because their passage does not hold the sentence they ended:
    # (n, sentence) each (core.attribution.check_citations).
    dropped_citations: tuple[tuple[int, str], ...] = ()
    # Set when the library holds no answer and the model was not asked (core.abstain); text is "".
    # Also on a written answer whose passages the model judged not to hold it (warning "doubted",
    # generation.judge_passages = "warn"): not abstained, no reason, the judgement's odds in ``judged``.
    abstention: Abstention | None = None
    # The question as this answer asked it, translated into the library's other language, when the
    # passages in the question's own language were about something else ("": as typed; app.asked_across).
    asked_as: str = ""

    @property
    def abstained(self) -> bool:
        return self.abstention is not None and self.abstention.abstained

    @property
    def settles_cfrag(self) -> bool:
        """Abstained so that CF-RAG says the same and searches nothing: before a word was written, or
        after it by both checks ("unheld"). An answer that says itself the sources lack it leaves CF-RAG
        its search from other passages (core.cfrag: the standard answer says "not found")."""
        a = self.abstention
        return a is not None and a.abstained and a.reason != "said_not_found"


# --------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class Progress:
    """An event from long work: ingest, model preparation, generation set-up."""

    stage: str
    current: int
    total: int
    message: str = ""
    eta_s: float | None = None
    path: str = ""
    # The whole job's share done (0..1) when the job knows it (an ingest: app.ingest_meter); eta_s is
    # then the whole job's time left, and current/total stay the step's own counts.
    overall: float | None = None


@dataclass(frozen=True)
class FileProblem:
    """A file that was skipped, with a reason a person can act on."""

    path: str
    reason: str


@dataclass(frozen=True)
class Timings:
    values: dict[str, float] = field(default_factory=dict)
