"""Running tao_docker.py / tao_jobs.py as a user would, against the local Docker engine (test support)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[3]
SCRIPTS = BANK / "scripts"


class Docker:
    """The helper, each call a new process (a new shell: nothing but the records carries over)."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.tmp = tmp
        self.call_log = tmp / "calls.jsonl"
        self.results = tmp / "results"
        self.results.mkdir()
        self.env = {**os.environ, **env, "TAO_STATE_DIR": str(tmp / "state"), "TAO_DOCKER_RESULTS_DIR": str(self.results),
                    "TAO_CALL_LOG": str(self.call_log)}
        self.image = env["TAO_LOCAL_DOCKER_IMAGE"]

    def run(self, script: str, *args: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = (),
            timeout: float = 180) -> subprocess.CompletedProcess:
        full = {k: v for k, v in {**self.env, **(env or {})}.items() if k not in drop}
        return subprocess.run([sys.executable, str(SCRIPTS / script), *args], env=full, capture_output=True,
                              text=True, timeout=timeout)

    def tao(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self.run("tao_docker.py", *args, **kw)

    def ok(self, *args: str, **kw) -> subprocess.CompletedProcess:
        res = self.tao(*args, **kw)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        return res

    def submit(self, *args: str, **kw) -> dict:
        return json.loads(self.ok("submit", "--json", "--image", self.image, "--gpus", "0", *args, **kw).stdout)

    def status(self, job_id: str, **kw) -> dict:
        (view,) = json.loads(self.ok("status", job_id, "--json", **kw).stdout)
        return view

    def wait(self, job_id: str, done, timeout: float = 60) -> dict:
        end = time.time() + timeout
        while True:
            view = self.status(job_id)
            if done(view):
                return view
            assert time.time() < end, f"{job_id} never got there: {view}"
            time.sleep(0.5)

    def records(self) -> list[str]:
        d = self.tmp / "state"
        return sorted(p.name for p in d.glob("*.json")) if d.is_dir() else []

    def docker(self, *words: str) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", *words], env=self.env, capture_output=True, text=True, timeout=120)


def terminal(view: dict) -> bool:
    return view["state"] in ("COMPLETE", "ERROR", "CANCELED")
