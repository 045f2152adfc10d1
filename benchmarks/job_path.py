#!/usr/bin/env python3
"""How many of the bank's rooms a job's path walks through: files entered, functions called and switches from one
file to the next, for three commands on the local clusters (a Kubernetes single-job submit; a Docker 4-trial sweep
submit and its ``status --sweep``), each run in a fresh process under a profiler.

Counting rule (the same as the issue that set the targets): only calls of functions in the repository's own files
(tests/ excluded) count; module bodies and comprehensions (names starting with ``<``) do not, a class body does;
a switch is a counted call in another file than the counted call before it. Calls into the standard library,
Jinja or PyYAML are free. Jinja-compiled templates count as files.

``--check`` exits 1 when a figure passes its ceiling (:data:`CEILINGS`: what main measures, with a little room
for runs that differ): a change that sends a job through more rooms fails the test that runs this.

Needs the local clusters: ``scripts/local_cluster.py up kubernetes`` and ``up docker``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts"), str(BANK)]

#: (files, switches) no run may pass; the issue's targets beside them.
CEILINGS = {"k8s-submit": (30, 150), "docker-sweep-submit": (38, 235), "docker-status-sweep": (38, 175)}
TARGETS = {"k8s-submit": (30, 144), "docker-sweep-submit": (None, 282), "docker-status-sweep": (None, 146)}


def trace(argv: list[str], out: str) -> int:
    """Run the helper ``argv`` (a script path and its words) in this process under the profiler; the figures
    go to ``out`` as JSON."""
    import runpy

    root = str(BANK) + "/"
    files: dict[str, int] = {}
    funcs: set[tuple[str, str]] = set()
    last = [""]
    switches = [0]

    def prof(frame, event, arg):  # noqa: ANN001 - the profiler's signature
        if event != "call":
            return
        name = frame.f_code.co_filename
        if not name.startswith(root) or name[len(root):].startswith("tests/"):
            return
        qual = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
        if qual.startswith("<"):
            return
        rel = name[len(root):]
        funcs.add((rel, qual))
        files[rel] = files.get(rel, 0) + 1
        if rel != last[0]:
            switches[0] += 1 if last[0] else 0
            last[0] = rel

    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    code = 0
    sys.setprofile(prof)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.setprofile(None)
    sys.stdout.flush()
    Path(out).write_text(json.dumps({"files": len(files), "functions": len(funcs), "switches": switches[0],
                                     "exit": code, "by_file": files}))
    return code


def measured(words: list[str], env: dict[str, str]) -> tuple[dict, str]:
    """The figures of one helper run (a fresh process) and its stdout."""
    with tempfile.NamedTemporaryFile(suffix=".json") as fh:
        proc = subprocess.run([sys.executable, __file__, "--trace", fh.name, "--", *words], capture_output=True,
                              text=True, env=env, cwd=BANK, timeout=600)
        figures = json.loads(Path(fh.name).read_text() or "{}")
    if proc.returncode != 0 or figures.get("exit"):
        raise SystemExit(f"error: {' '.join(words[:2])} failed: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return figures, proc.stdout


def k8s_submit(state: str) -> dict[str, dict]:
    import testclusters.kubernetes as lk

    cluster = lk.env()
    key = Path(cluster[lk.NGC_KEY_FILE_ENV]).read_text().strip()
    env = {**os.environ, **cluster, "TAO_STATE_DIR": state, "NGC_KEY": key}
    figures, out = measured(["scripts/tao_k8s.py", "submit", "--node-selector",
                             f"{lk.REAL_NODE_LABEL}=true", "--image", "docker.io/library/busybox:1.37.0", "--gpus", "1",
                             "--command", "uname -a", "--network-arch", "deformable_detr", "--action", "train",
                             "--results-dir", "/results", "--pvc-mount", f"{lk.PVC_NAME}:/results",
                             "--ngc-pull-secret"], env)
    for job in sorted(set(re.findall(r"\b[a-z][a-z0-9-]*-[0-9a-f]{8}\b", out))):  # the job it made
        subprocess.run([sys.executable, "scripts/tao_jobs.py", "cancel", job], cwd=BANK, env=env,
                       capture_output=True, timeout=300)
    return {"k8s-submit": figures}


def _settled(sweep: str, env: dict[str, str], timeout: float = 120) -> None:
    """Wait (unmeasured) until the sweep's first trials run and the others are held: the status measured then
    always meets the same states (a status of trials still being created or started walks other rooms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = subprocess.run([sys.executable, "scripts/tao_docker.py", "status", "--sweep", sweep, "--json"],
                             cwd=BANK, env=env, capture_output=True, text=True, timeout=300)
        states = [row.get("state") for row in json.loads(res.stdout or "[]")] if res.returncode == 0 else []
        if states.count("RUNNING") == 2 and states.count("PENDING") == len(states) - 2:
            return
        time.sleep(1)
    raise SystemExit(f"sweep {sweep}: its first 2 trials did not run within {timeout:.0f} s")


def docker_sweep(state: str) -> dict[str, dict]:
    import testclusters.docker as ld

    with tempfile.TemporaryDirectory() as results:
        env = {**os.environ, **ld.env(), "TAO_STATE_DIR": state}
        sub, out = measured(["scripts/tao_docker.py", "submit", "--json", "--image", ld.IMAGE, "--gpus", "0",
                             "--results-dir", results, "--sweep", "train.optim.lr=0.1,0.2,0.3,0.4",
                             "--max-concurrent", "2", "--", "sh", "-c", "sleep 30", "trial"], env)
        sweep = json.loads(out)["sweep"]
        try:
            _settled(sweep, env)
            status, _ = measured(["scripts/tao_docker.py", "status", "--sweep", sweep], env)
        finally:
            subprocess.run([sys.executable, "scripts/tao_docker.py", "cancel", "--sweep", sweep], cwd=BANK, env=env,
                           capture_output=True, timeout=300)
    return {"docker-sweep-submit": sub, "docker-status-sweep": status}


def main() -> int:
    if "--trace" in sys.argv[1:2]:
        return trace(sys.argv[sys.argv.index("--") + 1:], sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default="k8s,docker", help="which paths to measure: k8s, docker (comma-separated)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a figure passes its ceiling")
    parser.add_argument("--top", type=int, default=0, help="also print the N files each path calls most")
    args = parser.parse_args()
    wanted = set(args.paths.split(","))
    got: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as state:
        if "k8s" in wanted:
            got.update(k8s_submit(f"{state}/k8s"))
        if "docker" in wanted:
            got.update(docker_sweep(f"{state}/docker"))
    print(f"{'path':<22} {'files':>6} {'functions':>10} {'switches':>9} {'ceiling':>13} {'target':>11}")
    bad = []
    for name, f in got.items():
        (cf, cs), (tf, ts) = CEILINGS[name], TARGETS[name]
        ceiling, target = f"{cf}/{cs}", f"{tf or '-'}/{ts}"
        print(f"{name:<22} {f['files']:>6} {f['functions']:>10} {f['switches']:>9} {ceiling:>13} {target:>11}")
        for path, n in sorted(f["by_file"].items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"    {n:>7} {path}")
        if f["files"] > cf or f["switches"] > cs:
            bad.append(f"{name}: {f['files']} files / {f['switches']} switches (ceiling {cf} / {cs})")
    if args.check and bad:
        print("error: a job's path walks through more rooms than main's: " + "; ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
