"""Kubernetes' side of artifacts, fetch and prune: a reader pod on the job's volume (tier A), or S3 (tier C).

Tier A: the job's folder is ``<parent>/<job id>`` under a volume the agent's
machine cannot see. A short-lived reader pod (:func:`volume_job.reader`)
mounts the job's volumes at the job's own paths, on the job's nodes; the
scripts of :mod:`taobank.results_shell` run in it with ``kubectl exec`` (a
byte-exact stream for the tar), and the pod is deleted at the end. Prune's
pod mounts the volume writable; listing and fetching read-only.

Tier C: the folder is the ``s3://`` URI the record keeps, read and deleted
with this machine's AWS CLI (:mod:`taobank.s3results`).

Where the folder is comes from the spec saved beside the record at submit
(:func:`logs.saved_spec`), through the same rule that placed it
(:func:`render.results_plan`).
"""
from __future__ import annotations

import posixpath
from pathlib import Path

from . import render
from ... import results_shell, s3results
from ...contract import ResultFile, ResultsListing, ResultsLocation, Transfer
from ...errors import TaoError
from ...records import NO_RESULTS_DIR
from . import volume_job
from .kubectl import Kubectl
from .logs import saved_spec
from ...records import Record


def _spec(rec: Record) -> dict:
    spec = saved_spec(rec)
    if spec is None:
        raise TaoError(f"job {rec.id} has no saved job spec beside its record (submitted by an older helper), so "
                       "its volume is unknown: read the folder with kubectl yourself")
    return spec


def _is_s3(rec: Record) -> bool:
    return str(rec.results_dir or "").startswith("s3://")


def location(rec: Record) -> ResultsLocation:
    """The job's folder (in the pod, or the s3:// URI) and whether it is the job's own (named after its id)."""
    if rec.results_dir == NO_RESULTS_DIR:
        raise TaoError(f"job {rec.id} was submitted with --no-results: it kept no results")
    if _is_s3(rec):
        folder = rec.results_dir.rstrip("/")
        exact = bool((saved_spec(rec) or {}).get("results_exact"))
    else:
        spec = _spec(rec)
        exact = bool(spec.get("results_exact"))
        folder = render.results_plan(spec).for_job(rec.id).pod_folder or ""
        if not folder:
            raise TaoError(f"job {rec.id} kept no results folder on a volume")
    if exact:
        return ResultsLocation(folder, False, "it was given with results_exact, so it may hold more than this job")
    if posixpath.basename(folder) != rec.id:
        return ResultsLocation(folder, False, f"its name is not the job id {rec.id}")
    return ResultsLocation(folder, True)


def list_results(rec: Record, loc: ResultsLocation, *, status: bool) -> ResultsListing:
    if _is_s3(rec):
        return s3results.list_prefix(loc.folder, status=status)
    with volume_job.reader(Kubectl.for_record(rec), _spec(rec), purpose="listing the results",
                           for_job=rec.id) as pod:
        return results_shell.list_folder(pod, loc.folder, status=status)


def fetch_results(rec: Record, loc: ResultsLocation, paths: list[str], into: Path,
                  transfer: Transfer) -> list[ResultFile]:
    if _is_s3(rec):
        return s3results.fetch(loc.folder, paths, into, transfer)
    with volume_job.reader(Kubectl.for_record(rec), _spec(rec), purpose="fetching the results",
                           for_job=rec.id) as pod:
        return results_shell.fetch_files(pod, loc.folder, paths, into, transfer)


def remove_files(rec: Record, loc: ResultsLocation, delete: list[str], keep: dict[str, int]) -> list[ResultFile]:
    if _is_s3(rec):
        raise TaoError(f"job {rec.id}: its results are in {loc.folder}: delete single checkpoints there with aws s3 "
                       "rm (prune --keep reads volumes only)")
    with volume_job.reader(Kubectl.for_record(rec), _spec(rec), purpose="pruning checkpoints",
                           writable=True, for_job=rec.id) as pod:
        return results_shell.remove_files(pod, loc.folder, rec.id, delete, keep)


def remove_results(rec: Record, loc: ResultsLocation) -> str:
    if _is_s3(rec):
        return s3results.remove(loc.folder, rec.id)
    with volume_job.reader(Kubectl.for_record(rec), _spec(rec), purpose="pruning the results",
                           writable=True, for_job=rec.id) as pod:
        return results_shell.remove_folder(pod, loc.folder, rec.id)
