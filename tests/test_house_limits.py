"""The house's size limits (docs/architecture.md, "Limits"): a newcomer reads a module in one sitting.

No module over 800 lines (the UI string table aside), no class over 500, no function over 100. The
places still over a limit are listed in OVER with the size they have now: they may shrink, never grow,
and nothing new joins them. When one comes under its limit, its row goes (the test says so).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "rag_desktop"
MODULE_LINES, CLASS_LINES, FUNCTION_LINES = 800, 500, 100
EXEMPT = {"ui/i18n.py"}  # the string table: one entry a key, both languages

# (kind, "path[:name]") -> the most lines it may have until it is split
OVER: dict[tuple[str, str], int] = {
}


def sizes() -> dict[tuple[str, str], int]:
    """Every module, class and function of the package that is over its limit, with its lines."""
    out: dict[tuple[str, str], int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        if rel not in EXEMPT and text.count("\n") > MODULE_LINES:
            out[("module", rel)] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                kind, limit = ("class", CLASS_LINES) if isinstance(node, ast.ClassDef) else ("function", FUNCTION_LINES)
                if n > limit:
                    out[(kind, f"{rel}:{node.name}")] = n
    return out


def test_the_scan_sees_the_package() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) > 50


def test_nothing_new_is_over_a_limit_and_nothing_over_grows() -> None:
    now = sizes()
    new = {k: v for k, v in now.items() if k not in OVER}
    grown = {k: (OVER[k], v) for k, v in now.items() if k in OVER and v > OVER[k]}
    assert not new, f"over the house's limits (split it): {new}"
    assert not grown, f"grew although already over its limit (was, now): {grown}"


def test_a_place_that_came_under_its_limit_leaves_the_list() -> None:
    gone = sorted(k for k in OVER if k not in sizes())
    assert not gone, f"now within the limits, remove from OVER: {gone}"


def test_code_cites_the_design_in_the_repository_and_names_no_issue_numbers() -> None:
    """Code and prompts say why and cite docs/architecture.md; a ticket number is no reason
    (the tracker is not in the repository, and neither is a DESIGN.md)."""
    import re

    root = PACKAGE.parent
    found = []
    for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.txt"), *(root / "scripts").rglob("*.py"),
                 *(root / "tests").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"\b[Ii]ssue[ -]?#?\d+|DESIGN\.md", text):
            if path.name != "test_house_limits.py":
                found.append(f"{path.relative_to(root)}: {m.group(0)}")
    assert not found, found
