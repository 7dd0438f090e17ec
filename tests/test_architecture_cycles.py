"""No import cycles between modules of rag_desktop.

A cycle means two modules are one idea split in two (or one owns what the other should):
``app.evaluation`` <-> ``app.qa_eval`` and ``backends.readers`` <-> its readers were the two the
issue named. Function-level (lazy) imports count too: they hide a cycle, they do not remove it.
So do imports under ``TYPE_CHECKING``: never executed, but a reader still has to read both modules
to understand either (docs/architecture.md, "Limits"); the type both need goes into a module both
import, or the one side names what it uses as a Protocol.
grimp is the graph library import-linter is built on (installed with it).
"""

from __future__ import annotations

import grimp


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("rag_desktop", exclude_type_checking_imports=False)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if not child.startswith("rag_desktop"):
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles_in_rag_desktop() -> None:
    found = _cycles(_graph())
    assert found == [], f"import cycles (annotation-only imports included): {found}"


def test_type_checking_imports_are_in_the_graph() -> None:
    """The scan sees an import that only exists under ``TYPE_CHECKING`` (core.generation's Generator)."""
    graph = _graph()
    assert graph.direct_import_exists(importer="rag_desktop.core.generation", imported="rag_desktop.core.protocols")
    typed_only = grimp.build_graph("rag_desktop", exclude_type_checking_imports=True)
    assert not typed_only.direct_import_exists(
        importer="rag_desktop.core.generation", imported="rag_desktop.core.protocols")


def test_the_cycles_named_first_are_gone() -> None:
    graph = _graph()
    for a, b in [("rag_desktop.app.evaluation", "rag_desktop.app.qa_eval")]:
        assert not (graph.direct_import_exists(importer=a, imported=b)
                    and graph.direct_import_exists(importer=b, imported=a)), (a, b)
    readers = [m for m in graph.modules if m.startswith("rag_desktop.backends.readers.")]
    assert readers, "the readers package moved: update this test"
    for m in readers:  # a reader never imports the dispatch that imports it
        assert not graph.direct_import_exists(importer=m, imported="rag_desktop.backends.readers"), m
