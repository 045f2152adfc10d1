"""What the results e2e tests share: run tao_jobs.py as a user does, and read a folder as {path: sha256}."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping

TAO_JOBS = Path(__file__).resolve().parents[2] / "scripts" / "tao_jobs.py"


def tao_jobs(*args: str, env: Mapping[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """``tao_jobs.py ARGS`` with stdin not a terminal (prune then needs --yes, as in a script)."""
    proc = subprocess.run([sys.executable, str(TAO_JOBS), *args], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, env=dict(env if env is not None else os.environ))
    if check and proc.returncode != 0:
        raise AssertionError(f"tao_jobs.py {' '.join(args)} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
    return proc


def tree(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every regular file under ``root``."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}
