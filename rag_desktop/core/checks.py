"""Argument checks the model wrappers share, so a mistake reads the same whichever model it reaches.

The embedders and cross-encoders (backends, and core's substitute scorer) take lists of strings
from callers that sometimes pass one string — which would otherwise be embedded or scored letter by
letter — and take counts that must not go below a floor. Pure: no model, no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence


def at_least(owner: str, **bounds: tuple[int, int]) -> None:
    """ValueError naming ``owner`` and the first argument, in the order given, that is below its
    floor (each keyword is ``name=(value, floor)``)."""
    for name, (value, floor) in bounds.items():
        if value < floor:
            raise ValueError(f"{owner}: {name} must be >= {floor}, got {value}")


def _strings(texts: Sequence[str], one_string: str, item: str) -> list[str]:
    if isinstance(texts, str):
        raise TypeError(one_string)
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{item} {i} is {type(t).__name__}, not str")
    return out


def text_list(texts: Sequence[str], what: str) -> list[str]:
    """``texts`` as a list; TypeError for one string or an item that is not a string."""
    return _strings(texts, f"{what}: expected a sequence of strings, got one string (wrap it in a list)",
                    f"{what}: item")


def score_inputs(what: str, query: str, passages: Sequence[str]) -> list[str]:
    """A cross-encoder's ``score`` arguments checked, the passages as a list (``what`` names the method)."""
    if not isinstance(query, str):
        raise TypeError(f"{what}: query must be str, got {type(query).__name__}")
    return _strings(passages, f"{what}: passages must be a sequence of strings, got one string", f"{what}: passage")
