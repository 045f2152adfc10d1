"""The runtime package's import graph: no cycles, and no arrow from the core up into a platform.

Read from the source (every import statement, those inside functions too),
so a lazy import that only hides a cycle at start-up still fails here.
"""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "scripts" / "taobank"
PLATFORMS = ("taobank.kubernetes", "taobank.slurm", "taobank.docker")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [target] + [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            found |= {c for c in candidates if c in mods and c != name}
        edges[name] = found
    return edges


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
    edges = _edges(_modules())
    assert len(edges) > 40  # the walk found the package
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_core_never_imports_a_platform():
    """Platforms are reached through ``platform.get`` (a name routed to its adapter), never imported."""
    edges = _edges(_modules())
    core = [m for m in edges if not m.startswith(PLATFORMS)]
    up = {m: sorted(e for e in edges[m] if e.startswith(PLATFORMS)) for m in core}
    assert {m: e for m, e in up.items() if e} == {}


def test_a_platform_never_imports_another():
    edges = _edges(_modules())
    for mine in PLATFORMS:
        others = tuple(p for p in PLATFORMS if p != mine)
        crossing = {m: sorted(e for e in edges[m] if e.startswith(others)) for m in edges if m.startswith(mine)}
        assert {m: e for m, e in crossing.items() if e} == {}
