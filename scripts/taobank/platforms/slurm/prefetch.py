"""Small prefetches (S3, Hugging Face, NGC: checkpoints and configs) before a SLURM training job.

The seed keeps training data on the shared filesystem and allows fetching only
small auxiliary inputs from S3 / Hugging Face / NGC. A fetch inside the
training job would hold its GPUs while it downloads, so each prefetch runs in
its own CPU-only job (no GPUs, small CPU/memory/time) that the training job
waits for (``afterok``); SLURM cancels the training job when it fails
(``--kill-on-invalid-dep``), and status then says ERROR with the prefetch log's
last lines.

* ``SOURCE=DEST`` (flag ``--prefetch``, spec ``prefetch: {DEST: SOURCE}``): the sources, their credentials
  and commands are :mod:`taobank.sources`'s. DEST is a path under ``<job_dir>/prefetch``; the command names
  it ``{prefetch}/DEST``.
* The total is capped (versions.yaml ``slurm.uploads.max_prefetch_bytes``, the
  spec's ``prefetch_max_bytes``): S3 sizes are asked before any byte moves;
  every download runs under ``ulimit -f`` (no file can pass the cap) and the
  folder's size is checked after each one. Over the cap the job fails loudly
  and removes what it fetched; the training job never starts.
* Credentials go into their own mode-600 file in the job folder, sourced by the
  prefetch job and removed by it when it ends; the training job never sees them.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Mapping

from ... import pins
from ...errors import TaoError
from .spec import SlurmSpec
from ...jobspec import given
from ...s3results import ENDPOINT_ENV
from ...sources import Prefetch, commands, plain_env, size_query

#: The folder under the job folder that prefetches land in; the command names it ``{prefetch}``.
SUBDIR = "prefetch"
PLACEHOLDER = "{prefetch}"
#: The prefetch job's own credentials file (relative to the job folder): removed by that job when it ends.
CREDS_FILE = "env/prefetch-credentials.sh"


def max_bytes(spec: SlurmSpec | Mapping[str, Any]) -> int:
    """The cap on everything one job prefetches: the spec's ``prefetch_max_bytes``, else versions.yaml."""
    from .resources import _num

    return _num(given(SlurmSpec.of(spec).prefetch_max_bytes, pins.resolve("slurm.uploads.max_prefetch_bytes")),
                "prefetch_max_bytes", int, 1)


@dataclass
class PrefetchJob:
    """The CPU-only job that fetches every prefetch of a training job."""

    job_name: str
    job_dir: str
    log: str
    partition: str
    account: str | None
    time_minutes: int
    cpus: int
    mem: str
    max_bytes: int
    items: list[Prefetch]
    env: dict[str, str]
    has_credentials: bool

    def directives(self) -> list[tuple[str, str | None]]:
        from .cpujob import directives

        return directives(job_name=self.job_name, log=self.log, partition=self.partition, account=self.account,
                          cpus=self.cpus, mem=self.mem, time_minutes=self.time_minutes)


def job(job_id: str, job_dir: str, items: list[Prefetch], spec: SlurmSpec | Mapping[str, Any], env: Mapping[str, str], *,
        gpu_partition: str, account: str | None, has_credentials: bool) -> PrefetchJob:
    """The prefetch job's settings: versions.yaml ``slurm.prefetch`` (spec ``prefetch_partition`` and
    ``TAO_SLURM_PREFETCH_PARTITION`` choose the partition; else the conversion's CPU partition, else the
    first GPU partition, still without GPUs)."""
    from .resources import _MEM, _num

    spec = SlurmSpec.of(spec)
    d = dict(pins.resolve("slurm.prefetch"))
    part = (spec.prefetch_partition or env.get("TAO_SLURM_PREFETCH_PARTITION") or d["partition"]
            or env.get("TAO_SLURM_CONVERSION_PARTITION") or pins.resolve("slurm.conversion.partition")
            or gpu_partition.split(",")[0])
    mem = str(d["mem"])
    if not _MEM.match(mem):
        raise TaoError(f"slurm.prefetch.mem {mem!r} is not a SLURM size like 4G")
    return PrefetchJob(job_name=f"{job_id}-prefetch", job_dir=job_dir,
                       log=posixpath.join(job_dir, "slurm-logs", "prefetch-%j.out"),
                       partition=str(part).split(",")[0], account=account,
                       time_minutes=_num(d["time_minutes"], "slurm.prefetch.time_minutes", int, 1),
                       cpus=_num(d["cpus"], "slurm.prefetch.cpus", int, 1), mem=mem, max_bytes=max_bytes(spec),
                       items=items, env=plain_env(items, env), has_credentials=has_credentials)


def render(j: PrefetchJob) -> str:
    """The prefetch job's sbatch script (templates/slurm/prefetch.sbatch.tmpl), every value shell-quoted."""
    from ...envfile import check_name
    from ...render import Raw, render_text
    from .render import check_directive_value

    dirs = j.directives()
    for opt, value in dirs:
        if value is not None:
            check_directive_value(opt, value)
    root = posixpath.join(j.job_dir, SUBDIR)
    steps = []
    for p in j.items:
        target = posixpath.join(root, p.dest)
        steps.append({"source": p.source, "dest": p.dest, "target": target, "scheme": p.scheme,
                      "size": size_query(p), "argvs": commands(p, target),
                      "s3_prefix": p.scheme == "s3" and p.parts[1].endswith("/")})
    return render_text("slurm/prefetch.sbatch.tmpl", {
        "directives": [(Raw(o), v) for o, v in dirs], "job_dir": j.job_dir, "root": root,
        "max_bytes": int(j.max_bytes), "max_blocks": (int(j.max_bytes) + 1023) // 1024,
        "creds_rel": CREDS_FILE if j.has_credentials else None,
        "env_items": [(Raw(check_name(k)), v) for k, v in sorted(j.env.items())],
        "endpoint": j.env.get(ENDPOINT_ENV, ""), "steps": steps}, "shell")


def substitute(argv: list[str], job_dir: str, *, shell: bool = False) -> list[str]:
    """``{prefetch}`` -> ``<job_dir>/prefetch`` in every argument (shell-quoted in a string command)."""
    import shlex

    folder = posixpath.join(job_dir, SUBDIR)
    return [a.replace(PLACEHOLDER, shlex.quote(folder) if shell else folder) if PLACEHOLDER in a else a
            for a in argv]
