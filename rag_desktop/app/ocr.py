"""OCR during ingest: which pages, progress per page with ETA, cancel and resume, boxes kept.

Recognised pages are cached in the library folder, ``ocr/<sha256 of the file>.json``, one
write per page (atomic replace), keyed by the engine's identity and the render dpi:

* resume — an ingest cancelled (or killed) in the middle of a 300-page scan starts again
  at the first page not in the cache;
* boxes — the viewer marks hits on scanned pages from the cached line boxes
  (:meth:`OcrCache.lines`), and the library panel marks documents that have a cache;
* a changed file has another hash, so it is recognised again; the old file's cache is
  dropped when the library replaces the document.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from rag_desktop.backends.readers import display_name
from rag_desktop.backends.scan_pages import pages_needing_ocr, recognise_pages
from rag_desktop.core.ocr_text import page_text
from rag_desktop.core.protocols import OcrEngine
from rag_desktop.core.types import CancelToken, OcrLine, OcrPage, Progress

OCR_FOLDER = "ocr"


class OcrCache:
    """Recognised pages per file content hash, in ``<library>/ocr/``."""

    def __init__(self, library_folder: Path) -> None:
        self.folder = library_folder / OCR_FOLDER

    def _file(self, sha256: str) -> Path:
        return self.folder / f"{sha256}.json"

    def has(self, sha256: str) -> bool:
        return self._file(sha256).is_file()

    def _read(self, sha256: str) -> dict[str, Any]:
        try:
            data = json.loads(self._file(sha256).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def pages(self, sha256: str, engine: str, dpi: int) -> dict[int, OcrPage]:
        """Cached pages made by ``engine`` at ``dpi`` (anything else is recognised again)."""
        data = self._read(sha256)
        if data.get("engine") != engine or data.get("dpi") != dpi:
            return {}
        out: dict[int, OcrPage] = {}
        for key, p in (data.get("pages") or {}).items():
            try:
                lines = tuple(OcrLine(str(t), (float(x0), float(y0), float(x1), float(y1)), float(s))
                              for t, x0, y0, x1, y1, s in p["lines"])
                out[int(key)] = OcrPage(int(key), float(p["w"]), float(p["h"]), lines)
            except (KeyError, TypeError, ValueError):
                continue  # a damaged entry: that page is recognised again
        return out

    def save_page(self, sha256: str, engine: str, dpi: int, page: OcrPage) -> None:
        data = self._read(sha256)
        if data.get("engine") != engine or data.get("dpi") != dpi:
            data = {"engine": engine, "dpi": dpi, "pages": {}}
        data["pages"][str(page.number)] = {
            "w": page.width, "h": page.height,
            "lines": [[ln.text, *(round(v, 2) for v in ln.box), round(ln.score, 4)] for ln in page.lines],
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self._file(sha256).with_suffix(".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self._file(sha256))

    def lines(self, sha256: str, page: int) -> tuple[OcrLine, ...]:
        """The recognised lines of ``page`` (whatever engine made them), for the viewer."""
        data = self._read(sha256)
        p = (data.get("pages") or {}).get(str(page))
        if not p:
            return ()
        return tuple(OcrLine(str(t), (float(x0), float(y0), float(x1), float(y1)), float(s))
                     for t, x0, y0, x1, y1, s in p.get("lines", []))

    def discard(self, sha256: str) -> None:
        with contextlib.suppress(OSError):
            self._file(sha256).unlink()


def ocr_document(
    path: Path,
    sha256: str,
    engine: OcrEngine,
    cache: OcrCache,
    dpi: int,
    cancel: CancelToken,
    key: str = "",
) -> Generator[Progress, None, dict[int, str] | None]:
    """Recognise the pages of ``path`` that need it; yields ``Progress("ocr", …)`` per page and
    returns page → text for :func:`rag_desktop.backends.readers.read_document` (None: no page
    needs OCR). ETA: the mean time per page recognised so far × the pages left."""
    plan = [n for n, _ in pages_needing_ocr(path)]
    if not plan:
        return None
    done = cache.pages(sha256, engine.identity, dpi)
    todo = [n for n in plan if n not in done]
    name = display_name(path)
    total = len(plan)
    finished = total - len(todo)
    if todo:
        yield Progress("ocr", finished, total, f"{name}: OCR page {todo[0]} of {total}", None, key)
    t0 = time.monotonic()
    for i, page in enumerate(recognise_pages(path, engine, todo, dpi, cancel), start=1):
        cache.save_page(sha256, engine.identity, dpi, page)
        done[page.number] = page
        left = len(todo) - i
        eta = (time.monotonic() - t0) / i * left
        nxt = f"OCR page {todo[i]} of {total}" if left else "OCR done"
        yield Progress("ocr", finished + i, total, f"{name}: {nxt}", eta, key)
    return {n: page_text(done[n].lines) for n in plan}
