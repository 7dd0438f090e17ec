"""OCR with RapidOCR (PP-OCRv4 detection + recognition, Chinese and English) on onnxruntime.

Why this engine (measured in docs/evaluation.md "OCR"): ``rapidocr-onnxruntime``
ships its three ONNX models inside the wheel (16 MB), so OCR works offline from a plain
``pip install``; it reads Chinese and English with one model. Debian's tesseract needs a
system package (not installable from pyproject, absent on Windows/macOS desktops).

Its English output needs two repairs, both in :mod:`rag_desktop.core.ocr_text`: NFKC for
full-width letters, and lost word spaces restored from geometry: :func:`blank_runs` finds
the blank columns of each line's pixels, RapidOCR's per-character boxes
(``return_word_box=True``) place the characters, and
:func:`~rag_desktop.core.ocr_text.join_chars` puts a space where a word-wide blank run lies
between two of them.

OpenCV and Qt: rapidocr requires ``opencv-python`` (not the headless build; pip cannot
substitute one for the other, and both own the same ``cv2`` folder, so installing both
breaks whichever is removed). On Linux that wheel's ``cv2/__init__`` points
``QT_QPA_PLATFORM_PLUGIN_PATH`` and ``QT_QPA_FONTDIR`` at its bundled Qt 5 plugins and
prepends to ``LD_LIBRARY_PATH`` — in a PySide6 (Qt 6) process, a window created afterwards
would fail to load its platform plugin. :meth:`RapidOcrEngine.load` restores those variables
after the import (tested in ``tests/test_ocr.py``).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_desktop.backends.errors import ModelUnavailable, require
from rag_desktop.backends.loading import LoadedOnce, environment_restored
from rag_desktop.core.checks import at_least
from rag_desktop.core.ocr_text import join_chars, normalise_ocr_text
from rag_desktop.core.types import OcrLine

# Environment variables opencv-python's import changes (see the module docstring).
_CV2_ENV = ("QT_QPA_PLATFORM_PLUGIN_PATH", "QT_QPA_FONTDIR", "LD_LIBRARY_PATH")


def _version() -> str:
    try:
        return importlib.metadata.version("rapidocr-onnxruntime")
    except importlib.metadata.PackageNotFoundError:
        return "not-installed"


class RapidOcrEngine(LoadedOnce):
    """:class:`~rag_desktop.core.protocols.OcrEngine` over ``rapidocr_onnxruntime.RapidOCR``."""

    def __init__(self, *, threads: int = 0, min_score: float = 0.5) -> None:
        at_least("RapidOcrEngine", threads=(threads, 0))
        super().__init__()
        self._threads = threads
        self._min_score = min_score

    @property
    def identity(self) -> str:
        return f"rapidocr-onnxruntime@{_version()}/PP-OCRv4"

    def _create(self) -> Any:
        """Import RapidOCR and create its three ONNX sessions (``load()`` does it once, ~1 s)."""
        with environment_restored(*_CV2_ENV):
            mod: Any = require("rapidocr_onnxruntime", "OCR of scanned pages and images",
                               "rapidocr-onnxruntime")
            kwargs: dict[str, Any] = {"text_score": self._min_score}
            if self._threads:
                kwargs["intra_op_num_threads"] = self._threads
            try:
                return mod.RapidOCR(**kwargs)
            except (OSError, RuntimeError, ValueError) as exc:
                raise ModelUnavailable(f"RapidOCR could not load its models: {exc}") from exc

    def recognise(self, image: npt.NDArray[np.uint8], scale: float) -> list[OcrLine]:
        """Lines of an RGB image; boxes in image pixels divided by ``scale``."""
        if image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"RapidOcrEngine.recognise: expected an H×W×3 RGB image, got shape {image.shape}")
        self.load()
        bgr = np.ascontiguousarray(image[:, :, ::-1])
        with self._lock:  # onnxruntime sessions are thread-safe, RapidOCR's mutable state is not
            result, _ = self._model(bgr, return_word_box=True)
        lines: list[OcrLine] = []
        gray = image.mean(axis=2)
        for item in result or ():
            # With return_word_box: [line box (4 points), text, score, character boxes (4 points
            # each), characters (Latin one by one, spaces included), character scores].
            points, text, score = item[0], str(item[1]), float(item[2])
            xs = [float(p[0]) for p in points]
            ys = [float(p[1]) for p in points]
            chars = [str(c) for c in item[4]] if len(item) > 4 and item[4] else []
            horizontal = (max(xs) - min(xs)) >= (max(ys) - min(ys))
            if chars and len(chars) == len(item[3]) and horizontal:
                centers = [sum(float(p[0]) for p in b) / len(b) for b in item[3]]
                gaps = blank_runs(gray, min(xs), min(ys), max(xs), max(ys))
                joined = join_chars(chars, centers, gaps, max(ys) - min(ys))
            else:  # vertical lines, or no character boxes: the text as recognised
                joined = normalise_ocr_text(text)
            if not joined:
                continue
            box = (min(xs) / scale, min(ys) / scale, max(xs) / scale, max(ys) / scale)
            lines.append(OcrLine(joined, box, score))
        return lines


def blank_runs(gray: npt.NDArray[Any], x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float]]:
    """Runs of ink-free columns (x0, x1 in image pixels) between the first and last inked
    column of a line box. The box's top and bottom 15% are left out (a detector box reaches
    into the descenders and ascenders of the lines around it); ink is darker than halfway
    between the crop's lightest and darkest pixel."""
    h = y1 - y0
    top, bottom = round(y0 + 0.15 * h), round(y1 - 0.15 * h)
    left, right = max(0, int(x0)), min(gray.shape[1], round(x1))
    crop = gray[max(0, top) : max(top + 1, bottom), left:right]
    if crop.size == 0 or float(crop.max()) - float(crop.min()) < 40:  # no contrast: no text to measure
        return []
    ink: npt.NDArray[np.bool_] = np.asarray((crop < (float(crop.max()) + float(crop.min())) / 2).any(axis=0))
    cols = np.flatnonzero(ink)
    if len(cols) < 2:
        return []
    runs: list[tuple[float, float]] = []
    start: int | None = None
    for c in range(int(cols[0]), int(cols[-1]) + 1):
        if not ink[c]:
            start = c if start is None else start
        elif start is not None:
            runs.append((float(left + start), float(left + c)))
            start = None
    return runs
