"""Small helpers shared by the CF-RAG stages: array types, script detection, cosines."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rag_desktop.core.text import has_cjk
from rag_desktop.core.types import Hit

FloatMatrix = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _example_lang(query: str) -> str:
    """The language of the worked examples a question gets: Chinese for CJK text, else English."""
    return "zh" if has_cjk(query) else "en"


def _hit_key(hit: Hit) -> tuple[str, int]:
    return (hit.level, hit.unit_id)


def cosine_rows(a: npt.ArrayLike, b: npt.ArrayLike) -> FloatMatrix:
    """Cosine similarity matrix between the rows of a and b (re-normalised for safety)."""
    x = np.atleast_2d(np.asarray(a, dtype=np.float64))
    y = np.atleast_2d(np.asarray(b, dtype=np.float64))
    xn = np.linalg.norm(x, axis=1, keepdims=True)
    yn = np.linalg.norm(y, axis=1, keepdims=True)
    x = np.divide(x, xn, out=np.zeros_like(x), where=xn > 0)
    y = np.divide(y, yn, out=np.zeros_like(y), where=yn > 0)
    return np.asarray(x @ y.T, dtype=np.float64)
