"""Plugin packaging: the root plugin.json is the source of truth.

``.claude-plugin/plugin.json``, ``.claude-plugin/marketplace.json`` and
``.codex-plugin/plugin.json`` are derived from it (name, version,
description, license) plus the list of skill folders found on disk.
``expected(root)`` builds all four as data; ``sync_plugin_manifests.py``
writes them and the skill lint compares them.
"""
from __future__ import annotations

import json
from pathlib import Path

#: Fields every manifest must copy from plugin.json.
SHARED = ("name", "version", "description")
ROOT_MANIFEST = "plugin.json"
CLAUDE_PLUGIN = ".claude-plugin/plugin.json"
CLAUDE_MARKET = ".claude-plugin/marketplace.json"
CODEX_PLUGIN = ".codex-plugin/plugin.json"
#: Claude Code runs this at session start; it exports TAO_SKILL_BANK_PATH into $CLAUDE_ENV_FILE.
SESSION_HOOK = 'python3 "${CLAUDE_PLUGIN_ROOT}/scripts/plugin_session_env.py"'


def skill_dirs(root: Path) -> list[str]:
    """``skills/<group>/<skill>`` for every SKILL.md, sorted (paths relative to root)."""
    return sorted(p.parent.relative_to(root).as_posix() for p in root.glob("skills/*/*/SKILL.md"))


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def dump_json(obj: dict) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def expected(root: Path, source: dict | None = None) -> dict[str, dict]:
    """Every manifest as it must be, from plugin.json (``source``) and the skills on disk."""
    src = dict(source if source is not None else load_json(root / ROOT_MANIFEST))
    skills = skill_dirs(root)
    meta = {k: src.get(k) for k in SHARED}
    author = src.get("author") or {"name": "TAO skill bank contributors"}
    common = {**meta, "author": author, "license": src.get("license"), "keywords": src.get("keywords", [])}
    if src.get("homepage"):
        common["homepage"] = src["homepage"]
    dotted = [f"./{s}" for s in skills]
    root_manifest = {**src, "skills": skills}
    # Claude Code: metadata only here; the marketplace entry (strict: false) declares the
    # components, because nested skills/<group>/<skill> folders need explicit paths.
    claude_plugin = dict(common)
    claude_market = {
        "name": meta["name"],
        "owner": author,
        "metadata": {"description": meta["description"], "version": meta["version"]},
        "plugins": [
            {
                **common,
                "source": "./",
                "strict": False,
                "skills": dotted,
                "hooks": {
                    "SessionStart": [
                        {"hooks": [{"type": "command", "command": SESSION_HOOK}]}
                    ]
                },
            }
        ],
    }
    codex_plugin = {
        **common,
        "skills": "./skills/",
        "interface": {
            "displayName": "TAO skill bank",
            "shortDescription": meta["description"],
            "developerName": author.get("name", ""),
            "category": "Developer Tools",
        },
    }
    return {
        ROOT_MANIFEST: root_manifest,
        CLAUDE_PLUGIN: claude_plugin,
        CLAUDE_MARKET: claude_market,
        CODEX_PLUGIN: codex_plugin,
    }


def differences(root: Path) -> list[tuple[str, str]]:
    """(file, message) for every manifest that is missing or differs from :func:`expected`."""
    try:
        want = expected(root)
    except FileNotFoundError:
        return [(ROOT_MANIFEST, "missing: create it (name, version, description, license, skills)")]
    except json.JSONDecodeError as exc:
        return [(ROOT_MANIFEST, f"not valid JSON (line {exc.lineno}): fix it")]
    out = []
    for rel, obj in want.items():
        path = root / rel
        if not path.is_file():
            out.append((rel, "missing: run scripts/sync_plugin_manifests.py"))
            continue
        try:
            have = load_json(path)
        except json.JSONDecodeError as exc:
            out.append((rel, f"not valid JSON (line {exc.lineno}): run scripts/sync_plugin_manifests.py"))
            continue
        for where, msg in _diff(have, obj, ""):
            out.append((rel, f"{where} {msg}: run scripts/sync_plugin_manifests.py"))
    return out


def _diff(have: object, want: object, where: str) -> list[tuple[str, str]]:
    """Where ``have`` differs from ``want``: (dotted path, what differs), down to the first leaf."""
    label = where or "manifest"
    if isinstance(have, dict) and isinstance(want, dict):
        out = []
        for key in sorted(set(have) | set(want)):
            sub = f"{where}.{key}" if where else str(key)
            if key not in have:
                out.append((sub, f"missing, expected {_short(want[key])}"))
            elif key not in want:
                out.append((sub, f"unexpected (value {_short(have[key])})"))
            else:
                out.extend(_diff(have[key], want[key], sub))
        return out
    if isinstance(have, list) and isinstance(want, list):
        if all(isinstance(x, str) for x in have + want):
            missing = [x for x in want if x not in have]
            extra = [x for x in have if x not in want]
            if missing or extra:
                parts = ([f"lacks {', '.join(missing)}"] if missing else []) + ([f"lists absent {', '.join(extra)}"] if extra else [])
                return [(label, "; ".join(parts))]
            return [] if have == want else [(label, "order differs")]
        if len(have) != len(want):
            return [(label, f"has {len(have)} entries, expected {len(want)}")]
        out = []
        for i, (h, w) in enumerate(zip(have, want)):
            out.extend(_diff(h, w, f"{label}[{i}]"))
        return out
    return [] if have == want else [(label, f"is {_short(have)}, expected {_short(want)} (from plugin.json)")]


def write(root: Path) -> list[str]:
    """Write every derived manifest; return the files that changed."""
    changed = []
    for rel, obj in expected(root).items():
        path = root / rel
        text = dump_json(obj)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(rel)
    return changed


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
