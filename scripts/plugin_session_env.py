#!/usr/bin/env python3
"""Make TAO_SKILL_BANK_PATH visible to an agent's shells.

  plugin_session_env.py            Claude Code SessionStart hook: append the export to $CLAUDE_ENV_FILE
  plugin_session_env.py --print    print the export line (eval it in any shell)
  plugin_session_env.py --codex    set it for every shell Codex runs: writes
                                   [shell_environment_policy.set] in $CODEX_HOME/config.toml
                                   (default ~/.codex), pointing at Codex's installed copy

The bank root is this script's own parent folder, so a plugin install, a
clone and a copy all point at themselves. As a hook it never fails the
session: without $CLAUDE_ENV_FILE it does nothing and exits 0.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VAR = "TAO_SKILL_BANK_PATH"
TABLE = "[shell_environment_policy.set]"


def export_line(root: Path = ROOT) -> str:
    return f"export {VAR}={shlex.quote(str(root))}"


def append_once(env_file: Path, line: str) -> bool:
    """Append ``line`` unless the file already holds it; True when written."""
    try:
        existing = env_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        existing = []
    if line in existing:
        return False
    with open(env_file, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    return True


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def bank_identity(root: Path = ROOT) -> tuple[str, str]:
    """(name, version) of this bank, from its versions.yaml."""
    sys.path.insert(0, str(root / "scripts"))
    from taobank.plugin_identity import bank_identity as identity

    ident = identity(root)
    return ident["name"], ident["version"]


def codex_install_dir(home: Path, root: Path = ROOT) -> Path:
    """Codex's copy of this bank: <CODEX_HOME>/plugins/cache/<marketplace>/<plugin>/<version>."""
    name, version = bank_identity(root)
    return home / "plugins" / "cache" / name / name / version


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's escapes are a subset TOML accepts)."""
    return json.dumps(value)


class ConfigError(Exception):
    """config.toml cannot be edited safely; the message says what to add by hand."""


def set_codex_env(config: Path, value: str) -> bool:
    """Put ``VAR = value`` under [shell_environment_policy.set] in ``config``; True when changed."""
    text = config.read_text(encoding="utf-8") if config.is_file() else ""
    line = f"{VAR} = {toml_string(value)}"
    lines = text.splitlines()
    header = next((i for i, ln in enumerate(lines) if ln.strip() == TABLE), None)
    if header is None:
        if _set_defined_inline(text):
            raise ConfigError(f"{config} defines shell_environment_policy.set inline: add {line} to it by hand")
        new = text + ("" if not text or text.endswith("\n") else "\n") + ("\n" if text else "") + f"{TABLE}\n{line}\n"
    else:
        end = next((i for i in range(header + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        mine = [i for i in range(header + 1, end) if re.match(rf"^\s*{VAR}\s*=", lines[i])]
        if mine and lines[mine[0]].strip() == line:
            return False
        if mine:
            lines[mine[0]] = line
        else:
            lines.insert(header + 1, line)
        new = "\n".join(lines) + "\n"
    _check_toml(config, new, value)
    config.parent.mkdir(parents=True, exist_ok=True)
    tmp = config.with_name(config.name + ".tao-tmp")
    tmp.write_text(new, encoding="utf-8")
    os.chmod(tmp, config.stat().st_mode & 0o777 if config.exists() else 0o600)
    os.replace(tmp, config)
    return True


def _set_defined_inline(text: str) -> bool:
    """shell_environment_policy.set given as dotted keys or an inline table, not as its own table."""
    if re.search(r"shell_environment_policy\s*(\.\s*set\b|=)", text):
        return True
    return "[shell_environment_policy]" in text and re.search(r"^\s*set\s*[.=]", text, re.M) is not None


def _check_toml(config: Path, text: str, value: str) -> None:
    """Refuse to write a config Codex could not read (Python 3.11+ can parse TOML)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: no TOML reader in the standard library
        return
    try:
        got = tomllib.loads(text).get("shell_environment_policy", {}).get("set", {}).get(VAR)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config} would not be valid TOML ({exc}): add {VAR} = {toml_string(value)} under {TABLE} by hand") from None
    if got != value:
        raise ConfigError(f"{config}: could not set {VAR} under {TABLE}: add {VAR} = {toml_string(value)} there by hand")


def codex(root: Path = ROOT) -> int:
    home = codex_home()
    target = codex_install_dir(home, root)
    if not (target / "versions.yaml").is_file():
        name, version = bank_identity(root)
        print(f"error: Codex has no installed copy of {name} {version} at {target}: run 'codex plugin add {name}@{name}' first", file=sys.stderr)
        return 1
    config = home / "config.toml"
    try:
        changed = set_codex_env(config, str(target))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{'set' if changed else 'already set'}: {VAR}={target} for Codex shells ({config})")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv and argv[0] == "--print":
        print(export_line())
        return 0
    if argv and argv[0] == "--codex":
        return codex()
    if argv:
        print(f"error: unknown argument {argv[0]!r}: use --print, --codex or no argument", file=sys.stderr)
        return 2
    target = os.environ.get("CLAUDE_ENV_FILE")
    if target:
        try:
            append_once(Path(target), export_line())
        except OSError as exc:  # a hook must not block the session; say why and go on
            print(f"warning: cannot write {target}: {exc.strerror}; export {VAR}={ROOT} by hand", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
