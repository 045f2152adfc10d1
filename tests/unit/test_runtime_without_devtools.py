"""The runtime package the skills call (scripts/taobank) holds no dev/CI tooling and
never imports it: devtools/ may be left out of an install and every helper still runs."""
from __future__ import annotations

import ast
from pathlib import Path

BANK = Path(__file__).resolve().parents[2]
RUNTIME = BANK / "scripts" / "taobank"
DEV = BANK / "devtools"
#: The only helpers in scripts/ that are entry points of the dev tooling.
DEV_ENTRY_SCRIPTS = {"lint_skills.py", "skill_budget.py", "stamp_versions.py", "sync_plugin_manifests.py"}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``: statements anywhere (lazy ones
    inside functions included) and importlib.import_module / __import__ of a literal."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("import_module", "__import__"):
                out.append((node.lineno, node.args[0].value))
    return out


def dev_imports(files: list[Path]) -> list[str]:
    return [f"{f.relative_to(BANK)}:{n}: {mod}" for f in files for n, mod in imported_modules(f)
            if mod == "devtools" or mod.startswith("devtools.")]


def test_the_probe_sees_lazy_and_dynamic_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    import devtools.stamp\n    from devtools import skill_lint\n"
                 "    importlib.import_module('devtools.agent_clients')\n")
    assert [mod for _, mod in imported_modules(f)] == ["devtools.stamp", "devtools", "devtools.agent_clients"]


def test_the_runtime_package_never_imports_the_dev_package():
    assert dev_imports(sorted(RUNTIME.rglob("*.py"))) == []


def test_only_the_dev_entry_scripts_import_the_dev_package():
    helpers = sorted(p for p in (BANK / "scripts").glob("*.py") if p.name not in DEV_ENTRY_SCRIPTS)
    assert helpers and dev_imports(helpers) == []
    assert all(dev_imports([BANK / "scripts" / name]) for name in DEV_ENTRY_SCRIPTS)


def test_no_dev_module_lives_in_the_runtime_package():
    dev_modules = {p.name for p in DEV.glob("*.py") if p.name != "__init__.py"}
    assert {"skill_lint.py", "plugin_manifests.py", "stamp.py", "agent_clients.py"} <= dev_modules
    assert sorted(p.relative_to(BANK).as_posix() for p in RUNTIME.rglob("*.py") if p.name in dev_modules) == []
