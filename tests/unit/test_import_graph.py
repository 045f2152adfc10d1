"""The runtime package's import graph: no cycles, and no arrow from the core up into a platform.

The graph is grimp's (import-linter's own, the one ``lint-imports`` checks against ``.importlinter``):
every import statement but those for the type checker alone (under TYPE_CHECKING), those inside functions
too, so a lazy import that only hides a cycle at
start-up still fails here. import-linter's ``acyclic_siblings`` contract sees cycles between siblings
only; this counts cycles between single modules.
"""
from __future__ import annotations

import sys
from pathlib import Path

import grimp

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
PLATFORMS = ("taobank.platforms.kubernetes", "taobank.platforms.slurm", "taobank.platforms.docker")


def _edges(package: str = "taobank") -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of it that it imports."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    return {m: set(graph.find_modules_directly_imported_by(m)) - {m} for m in sorted(graph.modules)}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_runtime_package_has_no_import_cycle():
    edges = _edges()
    assert len(edges) > 40  # the walk found the package
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_import_inside_a_function_closes_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "ringpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (pkg / "c.py").write_text("from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ringpkg", raising=False)
    assert _cycles(_edges("ringpkg")) == [["ringpkg.a", "ringpkg.b"]]


def test_the_core_never_imports_a_platform():
    """Platforms are reached through ``platform.get`` (a name routed to its adapter), never imported."""
    edges = _edges()
    core = [m for m in edges if not m.startswith(PLATFORMS)]
    up = {m: sorted(e for e in edges[m] if e.startswith(PLATFORMS)) for m in core}
    assert {m: e for m, e in up.items() if e} == {}


def test_a_platform_never_imports_another():
    edges = _edges()
    for mine in PLATFORMS:
        others = tuple(p for p in PLATFORMS if p != mine)
        crossing = {m: sorted(e for e in edges[m] if e.startswith(others)) for m in edges if m.startswith(mine)}
        assert {m: e for m, e in crossing.items() if e} == {}
