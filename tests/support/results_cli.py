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


def big_files(folder: Path, count: int = 4, mib: int = 128) -> None:
    """Checkpoint-sized random files ``big-N.pth`` in a results folder (several verified blocks each)."""
    for i in range(count):
        with open(folder / f"big-{i}.pth", "wb") as fh:
            for _ in range(mib):
                fh.write(os.urandom(1 << 20))


def fetch_killed_half_way(job_id: str, dest: Path, env: Mapping[str, str], timeout: float = 120) -> str:
    """``fetch JOB --to DEST`` stopped with SIGTERM as soon as its first file has its final name (the rest still
    on the way); its stderr. Fails when the fetch ended by itself first (nothing was interrupted)."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, str(TAO_JOBS), "fetch", job_id, "--to", str(dest)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(env))
    end = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < end:
            if dest.is_dir() and any(p.name.startswith("big-") for p in dest.iterdir()):
                proc.send_signal(signal.SIGTERM)
                break
            time.sleep(0.005)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if proc.returncode == 0:
        raise AssertionError("the fetch ended before it could be interrupted: use larger files")
    return err
