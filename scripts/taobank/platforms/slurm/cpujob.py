"""The #SBATCH directives of the bank's small CPU-only helper jobs (image conversion, prefetch): one node, one
task, no GPU, never requeued."""
from __future__ import annotations


def directives(*, job_name: str, log: str, partition: str, account: str | None, cpus: int, mem: str,
               time_minutes: int) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = [
        ("--job-name", job_name), ("--output", log), ("--open-mode", "append"), ("--partition", partition)]
    if account:
        out.append(("--account", account))
    # no --gres / --gpus: a helper job never holds a GPU
    out += [("--nodes", "1"), ("--ntasks", "1"), ("--cpus-per-task", str(cpus)), ("--mem", mem),
            ("--time", str(time_minutes)), ("--no-requeue", None)]
    return out
