"""The core owns a record after launch (issue 31, item 2): no adapter module calls a record writer.

Adapters may read records (``records.load``, ``artifact_dir``, ``state_dir`` ...); every mark, every opened
record, is the core's (:mod:`taobank.core.track`, :meth:`taobank.core.platform.Platform.submit`).
"""
from __future__ import annotations

import ast
from pathlib import Path

import taobank

PACKAGE = Path(taobank.__file__).parent
ADAPTERS = ("platforms/kubernetes", "platforms/slurm", "platforms/docker")
#: what an adapter may call on the record store: it reads, never writes
READERS = {"load", "get", "find", "list_records", "artifact_dir", "state_dir", "record_path", "folder_of", "within",
           "records_inside", "check_results_dir", "refuse_nested"}


def writer_calls(path: Path) -> list[str]:
    """``line: call`` of every record-store call in ``path`` that is not a reader."""
    tree = ast.parse(path.read_text(), str(path))
    aliases: set[str] = set()  # names bound to the records module
    direct: dict[str, str] = {}  # names imported from it -> their name there
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module == "taobank" if node.level == 0 else node.module is None):
            aliases |= {a.asname or a.name for a in node.names if a.name == "records"}
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("records"):
            direct.update({a.asname or a.name: a.name for a in node.names})
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name.endswith(".records") and a.asname}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in aliases:
            name = f.attr
        elif isinstance(f, ast.Name) and f.id in direct:
            name = direct[f.id]
        else:
            continue
        if name not in READERS:
            found.append(f"{node.lineno}: records.{name}")
    return found


def adapter_files() -> list[Path]:
    return sorted(p for pkg in ADAPTERS for p in (PACKAGE / pkg).rglob("*.py"))


def test_no_adapter_module_writes_a_record():
    bad = {}
    for path in adapter_files():
        rel = path.relative_to(PACKAGE).as_posix()
        calls = writer_calls(path)
        if calls:
            bad[rel] = calls
    assert not bad, f"adapter modules write records (the core's job, taobank.core.track): {bad}"


def test_the_walk_finds_a_writer(tmp_path):
    """The checker itself: each way of reaching a writer is caught, a reader is not."""
    sample = tmp_path / "x.py"
    sample.write_text("from ... import records\nfrom ...records import mark as m, load\nimport taobank.records as r\n"
                      "records.mark('a', 'RUNNING')\nm('a', 'ERROR')\nr.open_record()\nrecords.load('a')\nload('a')\n")
    assert sorted(writer_calls(sample)) == ["4: records.mark", "5: records.mark", "6: records.open_record"]
    for prefix in ("from taobank import records", "from .. import records"):  # each depth of a platform's package
        sample.write_text(f"{prefix}\nrecords.mark_many([])\n")
        assert writer_calls(sample) == ["2: records.mark_many"], prefix
