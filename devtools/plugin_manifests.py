"""Plugin packaging: every manifest a client reads, built as data from two sources.

- versions.yaml ``bank.name`` / ``bank.version``: the plugin's identity, stamped
  into every manifest (one version everywhere).
- ``plugin.json``: the vendor-neutral Agent Plugins 1.0.0 manifest (closed
  schema); its description, author, license and keywords feed the others.

Skills are not listed anywhere: every client discovers ``skills/<skill>/SKILL.md``
by convention. The components declared are Claude Code's SessionStart hook and
the MCP server (scripts/tao_mcp.py), in ``.claude-plugin/plugin.json`` (the
marketplace entry declares none, so Claude Code's default ``strict`` mode reads
the plugin's own manifest), and the same server in ``mcp.json``, Agent Plugins
1.0.0's MCP configuration at the root, which Codex reads.
``sync_plugin_manifests.py`` writes the files; the skill lint compares them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from taobank.plugin_identity import bank_identity

ROOT_MANIFEST = "plugin.json"
CLAUDE_PLUGIN = ".claude-plugin/plugin.json"
CLAUDE_MARKET = ".claude-plugin/marketplace.json"
CODEX_PLUGIN = ".codex-plugin/plugin.json"
CODEX_MARKET = ".agents/plugins/marketplace.json"
CHANGELOG = "CHANGELOG.md"
#: Agent Plugins 1.0.0's MCP configuration at the plugin root (Codex reads it; the manifest schema has no field for it).
AGENT_MCP = "mcp.json"
AGENT_MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
#: The bank's MCP server (scripts/tao_mcp.py): its name in every client's MCP list.
MCP_SERVER = "tao"
MCP_SCRIPT = "scripts/tao_mcp.py"

AGENT_PLUGINS_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
#: The closed set of top-level keys of an Agent Plugins 1.0.0 manifest, in the order we write them.
AGENT_PLUGINS_FIELDS = ("$schema", "name", "version", "description", "author", "homepage", "repository", "license", "keywords", "extensions")
#: Agent Plugins name rule (also kebab-case for Claude Code and Codex, which we keep).
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

#: Claude Code runs this at session start; it exports TAO_SKILL_BANK_PATH into $CLAUDE_ENV_FILE.
SESSION_HOOK = 'python3 "${CLAUDE_PLUGIN_ROOT}/scripts/plugin_session_env.py"'
#: What Codex shows in its plugin directory (interface.*).
CODEX_DISPLAY_NAME = "TAO skill bank"
CODEX_SHORT_DESCRIPTION = "Run NVIDIA TAO training jobs on Kubernetes and SLURM"
CODEX_CATEGORY = "Developer Tools"
SHORT_DESCRIPTION_MAX = 64


def skill_dirs(root: Path) -> list[str]:
    """``skills/<skill>`` for every SKILL.md a client discovers, sorted (relative to root)."""
    return sorted(p.parent.relative_to(root).as_posix() for p in root.glob("skills/*/SKILL.md"))


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def dump_json(obj: dict) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def expected(root: Path, source: dict | None = None, bank: dict[str, str] | None = None) -> dict[str, dict]:
    """Every manifest as it must be, from versions.yaml (``bank``) and plugin.json (``source``)."""
    src = dict(source if source is not None else load_json(root / ROOT_MANIFEST))
    bank = bank or bank_identity(root)
    filled = {**src, "$schema": AGENT_PLUGINS_SCHEMA, **bank}
    root_manifest = {k: filled[k] for k in AGENT_PLUGINS_FIELDS if k in filled}
    author = src.get("author") or {"name": ""}
    common = {k: root_manifest[k] for k in ("name", "version", "description", "author", "homepage", "repository", "license", "keywords") if k in root_manifest}
    claude_plugin = {
        **common,
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": SESSION_HOOK}]}]},
        "mcpServers": {MCP_SERVER: {"command": "python3", "args": [f"${{CLAUDE_PLUGIN_ROOT}}/{MCP_SCRIPT}"]}},
    }
    agent_mcp = {
        "$schema": AGENT_MCP_SCHEMA,
        "mcpServers": {MCP_SERVER: {"type": "stdio", "command": "python3", "args": [f"${{PLUGIN_ROOT}}/{MCP_SCRIPT}"]}},
    }
    claude_market = {
        "name": bank["name"],
        "owner": author,
        "metadata": {"description": src.get("description"), "version": bank["version"]},
        "plugins": [{**common, "source": "./"}],
    }
    codex_plugin = {
        **common,
        "skills": "./skills/",
        "interface": {
            "displayName": CODEX_DISPLAY_NAME,
            "shortDescription": CODEX_SHORT_DESCRIPTION,
            "developerName": author.get("name", ""),
            "category": CODEX_CATEGORY,
        },
    }
    codex_market = {
        "name": bank["name"],
        "interface": {"displayName": CODEX_DISPLAY_NAME},
        "plugins": [
            {
                "name": bank["name"],
                "source": {"source": "local", "path": "./"},
                "policy": {"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
                "category": CODEX_CATEGORY,
            }
        ],
    }
    return {
        ROOT_MANIFEST: root_manifest,
        CLAUDE_PLUGIN: claude_plugin,
        CLAUDE_MARKET: claude_market,
        CODEX_PLUGIN: codex_plugin,
        CODEX_MARKET: codex_market,
        AGENT_MCP: agent_mcp,
    }


def differences(root: Path) -> list[tuple[str, int, str]]:
    """(file, line, message) for every manifest that is missing or differs from :func:`expected`."""
    from taobank.errors import TaoError

    try:
        src = load_json(root / ROOT_MANIFEST)
    except FileNotFoundError:
        return [(ROOT_MANIFEST, 1, f"missing: create it ($schema {AGENT_PLUGINS_SCHEMA}, description, author, license)")]
    except json.JSONDecodeError as exc:
        return [(ROOT_MANIFEST, exc.lineno, "not valid JSON: fix it")]
    if not isinstance(src, dict):
        return [(ROOT_MANIFEST, 1, "must be a JSON object: fix it")]
    try:
        bank = bank_identity(root)
    except TaoError as exc:
        return [("versions.yaml", 1, str(exc))]
    out = [(ROOT_MANIFEST, _json_line(root / ROOT_MANIFEST, k), f"{k!r} is required (Claude Code and Codex copy it): add it") for k in ("description", "author", "license") if not src.get(k)]
    if not NAME_RE.match(bank["name"]) or len(bank["name"]) > 64:
        out.append(("versions.yaml", 1, f"bank.name {bank['name']!r} must be kebab-case, at most 64 characters"))
    for rel, obj in expected(root, src, bank).items():
        path = root / rel
        if not path.is_file():
            out.append((rel, 1, "missing: run scripts/sync_plugin_manifests.py"))
            continue
        try:
            have = load_json(path)
        except json.JSONDecodeError as exc:
            out.append((rel, exc.lineno, "not valid JSON: run scripts/sync_plugin_manifests.py"))
            continue
        for where, msg in _diff(have, obj, "", bank):
            out.append((rel, _json_line(path, where.rsplit(".", 1)[-1].split("[")[0]), f"{where} {msg}: run scripts/sync_plugin_manifests.py"))
    out += _changelog_problems(root, bank["version"])
    return out


def _changelog_problems(root: Path, version: str) -> list[tuple[str, int, str]]:
    """The newest CHANGELOG.md entry must be the current version (a bump is documented)."""
    path = root / CHANGELOG
    if not path.is_file():
        return [(CHANGELOG, 1, f"missing: add it with a '## {version}' entry")]
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = re.match(r"^## \[?(\d+\.\d+\.\d+)\]?", line)
        if m:
            if m.group(1) != version:
                return [(CHANGELOG, n, f"newest entry is {m.group(1)}, versions.yaml bank.version is {version}: add a '## {version}' entry above it")]
            return []
    return [(CHANGELOG, 1, f"no '## {version}' entry: add one for versions.yaml bank.version")]


def _diff(have: object, want: object, where: str, bank: dict[str, str]) -> list[tuple[str, str]]:
    """Where ``have`` differs from ``want``: (dotted path, what differs), down to the first leaf."""
    label = where or "manifest"
    if isinstance(have, dict) and isinstance(want, dict):
        out = []
        for key in list(want) + [k for k in have if k not in want]:
            sub = f"{where}.{key}" if where else str(key)
            if key not in have:
                out.append((sub, f"missing, expected {_short(want[key])}"))
            elif key not in want:
                out.append((sub, f"unexpected (value {_short(have[key])})"))
            else:
                out.extend(_diff(have[key], want[key], sub, bank))
        return out
    if isinstance(have, list) and isinstance(want, list):
        if all(isinstance(x, str) for x in have + want):
            return [] if have == want else [(label, f"is {_short(have)}, expected {_short(want)} (from plugin.json)")]
        if len(have) != len(want):
            return [(label, f"has {len(have)} entries, expected {len(want)}")]
        out = []
        for i, (h, w) in enumerate(zip(have, want)):
            out.extend(_diff(h, w, f"{label}[{i}]", bank))
        return out
    if have == want:
        return []
    leaf = label.rsplit(".", 1)[-1]
    origin = next((f"versions.yaml bank.{k}" for k in ("name", "version") if leaf == k and want == bank[k]), None)
    if leaf == "$schema":
        origin = "Agent Plugins 1.0.0"
    elif origin is None:
        origin = "plugin.json" if leaf in AGENT_PLUGINS_FIELDS or label.startswith(("owner", "metadata")) else "devtools/plugin_manifests.py"
    return [(label, f"is {_short(have)}, expected {_short(want)} (from {origin})")]


def write(root: Path) -> list[str]:
    """Write every manifest (plugin.json included: name and version stamped); return the changed files."""
    changed = []
    for rel, obj in expected(root).items():
        path = root / rel
        text = dump_json(obj)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(rel)
    return changed


def _json_line(path: Path, key: str) -> int:
    """First line of ``path`` naming ``"key"`` (1 when absent)."""
    try:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if f'"{key}"' in line:
                return n
    except OSError:
        pass
    return 1


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
