"""No import cycles among the bank's modules (issue 31): import-linter's ``acyclic_siblings`` contract sees
cycles between siblings only, so this counts cycles between single modules, imports inside functions too."""
from __future__ import annotations

import sys
from pathlib import Path

import grimp

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def cycles(package: str) -> list[list[str]]:
    """The groups of modules of ``package`` that import each other in a ring (Tarjan's strongly connected
    components, iterative), and any module that imports itself."""
    graph = grimp.build_graph(package, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1 or node in graph.find_modules_directly_imported_by(node):
                        found.append(sorted(group))
    return found


def test_the_package_has_no_import_cycle(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    assert cycles("taobank") == []


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path, monkeypatch):
    pkg = tmp_path / "ringpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (pkg / "c.py").write_text("from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert cycles("ringpkg") == [["ringpkg.a", "ringpkg.b"]]
    finally:
        sys.modules.pop("ringpkg", None)
