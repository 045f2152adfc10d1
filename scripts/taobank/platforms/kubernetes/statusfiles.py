"""TAO's status files of a Kubernetes job: read in its running pod (one ``kubectl exec``) or, once the pods are
gone, by a short helper Job on its results volume."""
from __future__ import annotations

from ...errors import TaoError
from ...progress import read_argv, split_files
from ...run import last_line
from . import render
from .kubectl import KubeFacts, Kubectl
from .logs import saved_spec
from ...records import Record


def read(rec: Record, *, live: bool) -> dict[str, str]:
    """``{path relative to the results folder: text}``; ``live`` asks the running pod only (one call)."""
    spec = saved_spec(rec)
    if spec is None:
        raise TaoError(f"job {rec.id} has no saved spec next to its record (submitted by an older bank?): its "
                       "results folder is unknown")
    folder = render.results_plan(spec, staging=render.staging_dir(spec)).for_job(rec.id).pod_folder
    if not folder:
        raise TaoError(f"job {rec.id} keeps no results (--no-results): there is no status file to read")
    kube = Kubectl.for_record(rec)
    name = KubeFacts.of(rec).name or render.job_name_for(rec.id)
    res = kube.run("exec", f"job/{name}", "-c", "main", "--", *read_argv(folder), check=False,
                   what="kubectl exec (read status.json)")
    if res.ok:
        return split_files(res.stdout)
    if live:
        raise TaoError(f"could not read {folder}/status.json in the job's pod: {last_line(res.stderr)}")
    if spec.get("storage_tier", "A") != "A":
        raise TaoError(f"job {rec.id}'s pods are gone and its results were uploaded to {rec.results_dir}: "
                       "read status.json there (tao_jobs.py fetch ID status.json --to DIR)")
    from . import volume_job

    rc, text = volume_job.run(kube, spec, read_argv(folder), purpose="reading TAO's status file on the results volume")
    if rc != 0:
        raise TaoError(f"reading {folder} on the results volume failed ({last_line(text)})")
    return split_files(text)
