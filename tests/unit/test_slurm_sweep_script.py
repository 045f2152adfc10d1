"""The SLURM sweep's one array script: the array range with its %K limit, each value quoted, lint-clean."""
from __future__ import annotations

import shlex

from taobank.platforms.slurm import render, resources, sweep


def test_array_script_runs_the_task_s_trial_and_passes_the_lint():
    res = resources.resolve({"num_gpus": 1, "cpus_per_task": 1, "time_hours": 1}, {"SLURM_PARTITION": "gpu"})
    inp = render.ScriptInput(job_id="t-0", job_dir="/b/jobs/t-0", results_parent="/b/results", command=["true"],
                             resources=res, runtime="none")
    names = [f"dino-train-{i:08x}" for i in range(3)]
    dirs = [f"/b/jobs/{n}" for n in names]
    scripts = [f"{d}/sbatch/job_{n}.sbatch" for d, n in zip(dirs, names)]
    text = sweep.array_script("dino-sweep-1234abcd", "/b/jobs/dino-sweep-1234abcd", inp, names, dirs, scripts, 2)
    assert "#SBATCH --array=0-2%2" in text and "#SBATCH --job-name=dino-sweep-1234abcd" in text
    assert "tao_scripts=(" + " ".join(shlex.quote(s) for s in scripts) + ")" in text
    assert 'TAO_SLURM_JOB_REF="$ref"' in text
    render.lint(text, "array.sbatch")  # bash -n, shellcheck, the secret lint


def test_the_sweep_and_batch_cancel_remote_scripts_are_shellcheck_clean(tmp_path):
    import subprocess

    from taobank.platforms.slurm import cancel

    for name, text in (("STAGE_MANY", sweep.STAGE_MANY), ("SBATCH_ARRAY", sweep.SBATCH_ARRAY),
                       ("CANCEL_MANY", cancel.CANCEL_MANY)):
        path = tmp_path / f"{name}.sh"
        path.write_text("#!/bin/sh\n" + text)
        res = subprocess.run(["shellcheck", "-s", "sh", str(path)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, f"{name}: {res.stdout}"


def test_batch_cancel_takes_only_checked_words_unquoted():
    from taobank.platforms.slurm import cancel

    assert all(cancel.JOB_ID.match(s) for s in ("123", "123_4"))
    assert not any(cancel.JOB_ID.match(s) for s in ("123 456", "1;rm", "-1", "12_", "1\n"))
    assert not any(cancel.NAME.match(s) for s in ("a b", "-x", "A", "a;b", "a\n"))
