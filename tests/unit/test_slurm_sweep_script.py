"""The SLURM sweep's one array script: the array range with its %K limit, each value quoted, lint-clean."""
from __future__ import annotations

import shlex

from taobank.slurm import render, resources, sweep


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
