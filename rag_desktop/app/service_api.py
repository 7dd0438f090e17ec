"""The service the desktop UI talks to, as a typed Protocol.

The UI never sees :class:`rag_desktop.app.service.RagService` by name: it holds a
:class:`LibraryService`, so the tests' fake service (tests/test_gui_support.py) is checked
against the same contract by mypy (tests/test_quality.py) instead of drifting from it — the
drift that once broke every fake when ``compare`` grew a ``ranking`` argument.

The library is visible only through read-only views of what the library panel lists.
What crosses the seam is typed: ``compare`` returns app.service's frozen ``Comparison`` (named
here for annotations only, so this module loads no service), and the catalog's stored JSON is a
:data:`JsonValue` a caller narrows before use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias

from rag_desktop.app.catalog import FileState
from rag_desktop.app.library import IngestReport
from rag_desktop.core.cfrag.types import CFResult
from rag_desktop.core.conversation import Conversation, Rewrite
from rag_desktop.core.needs import SourceNeed
from rag_desktop.core.settings import Settings
from rag_desktop.core.types import (
    Answer,
    CancelToken,
    Document,
    FileProblem,
    GenEvent,
    OcrLine,
    Progress,
    RankedList,
)

if TYPE_CHECKING:  # annotations only: the service module is the heavy one
    from rag_desktop.app.service import Comparison

# What the catalog's meta table holds as JSON (json.loads of it).
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"


class CatalogView(Protocol):
    """What the UI reads of a library's catalog (rag_desktop.app.catalog.Catalog)."""

    def file_states(self) -> Mapping[str, FileState]: ...
    def documents(self) -> Sequence[Document]: ...
    def problems(self) -> Sequence[FileProblem]: ...
    def document_warnings(self) -> Mapping[int, tuple[str, ...]]: ...
    def staged_counts(self) -> Mapping[str, int]: ...
    def roots(self) -> Sequence[str]: ...
    def get_json(self, key: str) -> JsonValue: ...


class OcrCacheView(Protocol):
    def has(self, sha256: str) -> bool: ...


class LibraryView(Protocol):
    @property
    def folder(self) -> Path: ...
    @property
    def catalog(self) -> CatalogView: ...
    @property
    def ocr_cache(self) -> OcrCacheView: ...


class LibraryService(Protocol):
    """One open library and the operations on it; long ones are generators of events."""

    @property
    def library(self) -> LibraryView: ...

    def close(self) -> None:
        """Close the library (never the models: the Session owns those)."""

    def with_library(self, library_dir: Path, settings: Settings) -> LibraryService:
        """A service on another library sharing this one's models (app.session.Session.open)."""

    def update_settings(self, settings: Settings) -> None: ...
    def ingest(self, folders: Sequence[Path], cancel: CancelToken | None = None, *,
               calibrate_after: bool = False) -> Iterator[Progress | IngestReport]:
        """Progress, then the IngestReport; ``calibrate_after``: the library's calibration gate
        before the report (app.library_gate)."""

    def ocr_lines(self, doc_id: int, page: int) -> tuple[OcrLine, ...]: ...
    def word_spans(self, text: str) -> list[tuple[int, int, str, str]]: ...
    def surfaces(self, terms: Iterable[str]) -> dict[str, str]: ...
    def prepare_generator(self, cancel: CancelToken | None = None) -> Iterator[Progress]: ...

    def compare(self, query: str, level: str | None = None, k: int | None = None,
                ranking: str | None = None, *, translate: bool = True) -> Comparison:
        """Every ranking of the question side by side (no generator call when ``translate`` is False)."""

    def answer(self, query: str, ranked: RankedList, n_sources: int = 5,
               cancel: CancelToken | None = None) -> Iterator[GenEvent | Answer | Progress]: ...

    def read_ahead(self, query: str, ranked: RankedList, cancel: CancelToken | None = None) -> int:
        """The first answer's prompt for ``query`` read into the model's cache before it is asked, writing
        nothing (app.read_ahead); the prompt's tokens read, 0 when nothing was."""

    def cfrag_or_abstain(self, query: str, cancel: CancelToken | None = None, standard: Answer | None = None,
                         ) -> Iterator[Progress | CFResult | Answer]:
        """CF-RAG's events from ``standard`` (the first column's answer; None: CF-RAG writes it), ending
        with its CFResult, or with an abstained Answer (core.abstain)."""

    def source_needs(self, query: str, answer: Answer,
                     cancel: CancelToken | None = None) -> Iterator[Progress | tuple[SourceNeed, ...]]:
        """A Progress per cited source, then which of them ``answer`` needs (app.source_needs)."""

    def rewrite_followup(self, question: str, conversation: Conversation,
                         cancel: CancelToken | None = None, timeout_s: float | None = None) -> Rewrite: ...
    def load_conversation(self) -> Conversation: ...
    def save_conversation(self, conversation: Conversation) -> None: ...
