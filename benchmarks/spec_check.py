#!/usr/bin/env python3
"""What the spec check costs, against baselines measured in the same run.

  python3 benchmarks/spec_check.py [-n 10] [--trials 100] [--check]

1. ``tao_jobs.py spec check`` of DINO's train template with 20 overrides, against
   ``python3 -c 'import yaml, jsonschema'`` (target: at most 1.3x).
2. A submit with the check, against the same submit with ``--no-spec-check``: ``tao_docker.py submit --dry-run``
   of a DINO job whose spec file is on a bind mount (it contacts nothing; target: at most 100 ms more), both
   reading byte code compiled by a first run (as an installed bank does, even where PYTHONDONTWRITEBYTECODE is set).
3. A sweep of ``--trials`` trials checked in one pass (every trial's overrides, the spec file read once).

Each row is the median of ``-n`` runs. ``--check`` (CI: tests/unit/test_benchmarks.py, at a small N) exits 1
unless the counts hold: the check of the template finds 0 problems and of a misspelt key 1; its process imports
neither jsonschema nor the job verbs' modules; the check and the submit read only the shared part and DINO's own
file of the generated spec data (``schemas/tao_specs/``); the dry run with the check refuses the misspelt key in one line
and creates nothing; the sweep's spec file is read once, and each bad trial is one line of one refusal.
Times are printed, never asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts")]

OVERRIDES = [f"train.num_epochs={i}" for i in range(1, 11)] + [f"train.optim.lr=0.00{i}" for i in range(1, 11)]
#: modules the check's own process must never load (the job verbs' and the JSON Schema validator's)
HEAVY = ("jsonschema", "taobank.core", "taobank.platforms", "taobank.campaign", "taobank.records")


def timed(argv: list[str], n: int, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    times, last = [], None
    for _ in range(n):
        start = time.perf_counter()
        last = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        times.append(time.perf_counter() - start)
    assert last is not None
    return statistics.median(times), last


def interleaved(a: list[str], b: list[str], n: int, env: dict) -> tuple[float, float, subprocess.CompletedProcess,
                                                                       subprocess.CompletedProcess]:
    """Medians of ``a`` and ``b`` run in turns (a loaded machine slows both alike)."""
    ta, tb = [], []
    for _ in range(n):
        sa, ra = timed(a, 1, env)
        sb, rb = timed(b, 1, env)
        ta.append(sa)
        tb.append(sb)
    return statistics.median(ta), statistics.median(tb), ra, rb


#: Run a helper in-process, then print the heavy modules it loaded and the generated spec files it read.
_PROBE = """
import functools, runpy, sys
sys.path.insert(0, {scripts!r})
from taobank import tao_spec_schema
READ, _file = [], tao_spec_schema._file
@functools.lru_cache(maxsize=None)
def _spy(name):
    READ.append(name)
    return _file(name)
tao_spec_schema._file = _spy
sys.argv = {argv!r}
try:
    runpy.run_path({path!r}, run_name="__main__")
except SystemExit:
    pass
print()
print(" ".join(m for m in sys.modules if m.startswith({heavy!r})))
print(" ".join(sorted(READ)))
"""


def loaded(argv: list[str], script: str = "tao_jobs.py", env: dict | None = None) -> tuple[list[str], list[str]]:
    """(the heavy modules, the generated spec files) a helper's command loads (run in-process under runpy)."""
    code = _PROBE.format(scripts=str(BANK / "scripts"), argv=[script, *argv], path=str(BANK / "scripts" / script),
                         heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env).stdout
    lines = out.split("\n")
    return (lines[-3].split(), lines[-2].split()) if len(lines) >= 3 else ([], [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=10, help="runs per row (the median is shown)")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--check", action="store_true", help="exit 1 unless the counts hold")
    args = parser.parse_args(argv)
    from taobank import tao_spec_gate, tao_spec_schema

    problems: list[str] = []
    jobs = [sys.executable, str(BANK / "scripts" / "tao_jobs.py")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "specs"
        folder.mkdir()
        spec = folder / "train.yaml"
        spec.write_text(tao_spec_schema.template("dino", "train"), encoding="utf-8")
        check = [*jobs, "spec", "check", str(spec), *OVERRIDES, "--network", "dino", "--action", "train"]

        base_s, _ = timed([sys.executable, "-c", "import yaml, jsonschema"], args.n)
        check_s, done = timed(check, args.n)
        if done.returncode != 0 or not done.stdout.startswith("ok: "):
            problems.append(f"spec check of the template with 20 overrides: {done.stdout.strip()}{done.stderr.strip()}")
        bad = subprocess.run([*check, "train.num_epoch=10"], capture_output=True, text=True, timeout=120)
        if bad.returncode != 1 or len(bad.stdout.strip().splitlines()) != 1:
            problems.append(f"spec check of a misspelt key: {bad.returncode} {bad.stdout.strip()!r}")
        heavy, read = loaded(check[2:])
        if heavy:
            problems.append(f"spec check imports {', '.join(heavy)}")
        if read != ["_common", "dino"]:  # the shared part and the network's own file, no other network's
            problems.append(f"spec check of a DINO spec reads the generated files {read}, not ['_common', 'dino']")
        print(f"spec check, DINO train + 20 overrides   {check_s * 1000:7.1f} ms")
        print(f"python3 -c 'import yaml, jsonschema'   {base_s * 1000:7.1f} ms")
        print(f"  ratio {check_s / base_s:.2f}x (target <= 1.3x)")

        env = {**os.environ, "TAO_STATE_DIR": str(Path(tmp) / "state"), "TAO_DOCKER_RESULTS_DIR": str(Path(tmp) / "r"),
               "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}  # compiled once, as an installed bank is
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        submit = [sys.executable, str(BANK / "scripts" / "tao_docker.py"), "submit", "--dry-run", "--image", "img:1",
                  "--gpus", "0", "--mount", f"{folder}:/specs", "--", "dino", "train", "-e", "/specs/train.yaml",
                  *OVERRIDES]
        unchecked = submit[:3] + ["--no-spec-check"] + submit[3:]
        for argv in (submit, unchecked):  # the first run of each writes the byte code both then read
            subprocess.run(argv, capture_output=True, env=env, timeout=120)
        with_s, without_s, done, plain = interleaved(submit, unchecked, args.n, env)
        if done.returncode != 0 or plain.returncode != 0:
            problems.append(f"submit --dry-run: {done.stderr.strip()} {plain.stderr.strip()}")
        refused = subprocess.run([*submit, "train.num_epoch=10"], capture_output=True, text=True, env=env, timeout=120)
        if refused.returncode != 1 or len(refused.stderr.strip().splitlines()) != 1 or \
                "train.num_epochs" not in refused.stderr or (Path(tmp) / "state").exists():
            problems.append(f"a misspelt key at submit: {refused.returncode} {refused.stderr.strip()!r}")
        _, read = loaded(submit[2:], "tao_docker.py", env)
        if read != ["_common", "dino"]:
            problems.append(f"a DINO submit reads the generated files {read}, not ['_common', 'dino']")
        print(f"submit --dry-run with the check        {with_s * 1000:7.1f} ms")
        print(f"submit --dry-run --no-spec-check       {without_s * 1000:7.1f} ms")
        print(f"  the check adds {(with_s - without_s) * 1000:.1f} ms, {with_s / without_s:.2f}x (target <= 100 ms)")

        reads: list[str] = []

        def read(job: dict, path: str) -> str:
            reads.append(path)
            return spec.read_text(encoding="utf-8")

        trials = [{"network_arch": "dino", "action": "train",
                   "command": ["dino", "train", "-e", "/specs/train.yaml", f"train.optim.lr={0.0001 * (i + 1):.4f}",
                               *(["train.num_epoch=3"] if i % 25 == 0 else [])]} for i in range(args.trials)]
        start = time.perf_counter()
        lines, _ = tao_spec_gate.check(trials, read)
        sweep_s = time.perf_counter() - start
        want = list(range(0, args.trials, 25))
        # one line for a problem the bad trials share, naming them ("trial 0,25: ..."); all of them: no prefix
        named = [int(t) for ln in lines if ln.startswith("trial ") for t in ln[6:].split(":", 1)[0].split(",")]
        if len(reads) != 1 or len(lines) != 1 or named != want or "did you mean train.num_epochs?" not in lines[0]:
            problems.append(f"a {args.trials}-trial sweep: {len(reads)} reads of its spec, {len(lines)} problem lines "
                            f"naming trials {named} (want 1 read, 1 line naming {want})")
        print(f"sweep of {args.trials} trials, one pass        {sweep_s * 1000:7.1f} ms "
              f"({len(reads)} read of its spec, {len(named)} bad trials named)")
    print(json.dumps({"check_ratio": round(check_s / base_s, 3), "submit_added_ms": round((with_s - without_s) * 1000, 1),
                      "submit_ratio": round(with_s / without_s, 3),
                      "sweep_ms": round(sweep_s * 1000, 1)}))
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
