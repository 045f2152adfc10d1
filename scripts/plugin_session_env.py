#!/usr/bin/env python3
"""Export TAO_SKILL_BANK_PATH for an agent session (the plugin's SessionStart hook).

  plugin_session_env.py            append the export to $CLAUDE_ENV_FILE (Claude Code)
  plugin_session_env.py --print    print the export line (eval it in any shell)

The bank root is this script's own parent folder, so a plugin install, a
clone and a copy all point at themselves. As a hook it never fails the
session: without $CLAUDE_ENV_FILE it does nothing and exits 0.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def export_line(root: Path = ROOT) -> str:
    return f"export TAO_SKILL_BANK_PATH={shlex.quote(str(root))}"


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


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv and argv[0] == "--print":
        print(export_line())
        return 0
    if argv:
        print(f"error: unknown argument {argv[0]!r}: use --print or no argument", file=sys.stderr)
        return 2
    target = os.environ.get("CLAUDE_ENV_FILE")
    if target:
        try:
            append_once(Path(target), export_line())
        except OSError as exc:  # a hook must not block the session; say why and go on
            print(f"warning: cannot write {target}: {exc.strerror}; export TAO_SKILL_BANK_PATH={ROOT} by hand", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
