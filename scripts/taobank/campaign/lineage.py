"""Jobs that build on other jobs, written once for every platform: ``continue`` and ``submit --parent``.

* ``continue ID [--from CHECKPOINT]`` starts a NEW job that carries on a failed, canceled or
  timed-out job from its latest checkpoint (or the one named), with the spec it was submitted with
  (:mod:`taobank.core.jobfiles`) plus TAO's resume override; its record names the job it continues.
* ``submit --parent ID`` is an evaluate/export/inference job that uses a train job's results:
  ``{parent.results_dir}`` and ``{parent.checkpoint}`` in the command, args, env or specs become the
  parent's folder and its latest checkpoint; the record names the parent.

The checkpoint is chosen by the one table (:mod:`taobank.checkpoints`) over the platform's one-command
results listing; a platform adds only what differs (:meth:`Platform.lineage_access`: making the
parent's folder reachable from the child). Every refusal is one line, before anything is created.
"""
from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any, Callable, Sequence

from ..states import State
from .. import checkpoints, records, registry, tao_command
from ..core import jobfiles
from ..tao_command import shell_words
from ..contract import ResultsListing, SubmitOptions
from ..errors import TaoError, UsageError
from ..paths import is_path, is_under, rel_path
from ..redact import shown
from ..core.platform import get, load_for
from ..core.record_selection import explained
from ..records import Record

#: What a child's spec may name (replaced by text; nothing else of the form ``{parent.X}`` is allowed).
PLACEHOLDERS = ("{parent.results_dir}", "{parent.checkpoint}")
#: The states a job can be continued from (a timed-out job ends ERROR).
#: PRUNED: a search trial its pruner stopped early; continued, it trains on with the study's values, outside it
CONTINUABLE = (State.ERROR, State.CANCELED, State.PRUNED)


# ------------------------------------------------------------------ helpers
def _listing(rec: Record, what: str, *, status: bool = False, spec: dict | None = None):
    """(location, listing) of a job's results: one cluster command; one line when they are gone. With
    ``spec`` (the new job's), results in object storage are listed only once that job can download them."""
    adapter = get(rec.platform)
    loc = adapter.results_location(rec)
    if loc.folder == records.NO_RESULTS_DIR:
        raise TaoError(f"{what} {rec.id} kept no results (--no-results): nothing to use")
    if spec is not None:
        _fetched(spec, rec, loc.folder, {})
    listing = adapter.list_results(rec, loc, status=status)
    if not listing.exists:
        raise TaoError(f"{what} {rec.id}'s results folder {loc.folder} is gone (pruned or deleted): "
                       "nothing to use")
    return loc, listing


def _checkpoint(rec: Record, listing: ResultsListing, folder: str, named: str | None) -> str:
    """The checkpoint's path as the job sees it: ``named`` (relative to, or absolute inside, the job's
    folder, and present there; a link names its target) or the latest by the table."""
    files = listing.files
    if named is not None:
        text = str(named).strip()
        if _remote(folder) and text.startswith(folder.rstrip("/") + "/"):  # the object's URI
            text = text[len(folder.rstrip("/")) + 1:]
        if text.startswith("/"):
            if not is_under(text, folder) or text.rstrip("/") == folder.rstrip("/"):
                raise TaoError(f"--from {shown(text)} is outside job {rec.id}'s results folder {folder}: name a "
                               "checkpoint inside it (relative paths are taken from that folder)")
            # relative to the folder, both normalised (``//abs/path``, ``/a/./b``): never cut by a raw length
            text = posixpath.relpath(posixpath.normpath("/" + text.lstrip("/")),
                                     posixpath.normpath("/" + folder.lstrip("/")))
        rel = rel_path(text, "--from")
        rel = listing.links.get(rel, rel)
        if not any(f.path == rel for f in files):
            have = sorted(f.path for f in files if f.checkpoint)[-3:]
            raise TaoError(f"--from {shown(rel)}: no such file in {folder} (latest checkpoints: {', '.join(have) or 'none'})")
        if not (checkpoints.epoch_of(rel) is not None or rel.lower().endswith(".pth")):
            raise TaoError(f"--from {shown(rel)} is not a TAO checkpoint (model_epoch_NNN_step_SSSSS.pth): name one")
        return posixpath.join(folder, rel)
    found = checkpoints.latest(files, rec.action, listing.links, rec.network_arch)
    if found is None:
        raise TaoError(f"job {rec.id} left no checkpoint in {folder} (TAO writes model_epoch_NNN_step_SSSSS.pth every "
                       f"{checkpoints.table()['interval_setting']} epochs): submit it again from the start")
    return posixpath.join(folder, found.path)


def _remote(folder: str) -> bool:
    """Results in object storage (an ``s3://`` prefix): a new job downloads what it uses, it cannot mount it."""
    return folder.startswith("s3://")


def _fetched(spec: dict, rec: Record, folder: str, paths: dict[str, str],
             replaces: Sequence[str] = ()) -> tuple[dict, dict[str, str]]:
    """(spec, paths as the new job sees them): ``paths`` (name -> path under ``folder``) unchanged on shared
    storage; downloaded before the job runs (the platform's :meth:`Platform.lineage_fetch`) from object storage."""
    if not _remote(folder):
        return spec, paths
    rel = {k: v[len(folder.rstrip("/")) + 1:] for k, v in paths.items()}
    adapter = get(rec.platform)
    typed, where = adapter.lineage_fetch(adapter.spec_type.given(spec), rec, folder, rel, replaces)
    return typed.to_dict(), where


def _argv(spec: dict) -> list[str]:
    """The spec's argv (``args``, else a list ``command``); [] for shell text."""
    for key in ("args", "command"):
        if isinstance(spec.get(key), list) and spec[key]:
            return [str(a) for a in spec[key]]
    return []


def _plain(path: str, job_id: str) -> str:
    """A checkpoint path that may stand in a command (argv or shell text): the path characters only."""
    if not is_path(path):
        raise TaoError(f"the checkpoint of job {job_id} has characters a path in a command may not ({path[:80]!r}): "
                       "rename it (letters, digits and . _ + @ / -) or name another with --from")
    return path


def _resumed_command(spec: dict, ckpt: str, job_id: str) -> dict:
    """``spec`` whose command resumes from ``ckpt``: an argv (``args``, else a list ``command``) with an earlier
    resume override replaced; shell text with the override appended as quoted words (as a sweep's are), unless
    it holds one already (a word inside shell text cannot be replaced safely)."""
    out = dict(spec)
    network = spec.get("network_arch")
    for key in ("args", "command"):
        value = out.get(key)
        if isinstance(value, list) and value:
            out[key] = checkpoints.with_resume([str(a) for a in value], ckpt, network)
            return out
    if isinstance(out.get("command"), str):
        if checkpoints.names_resume(shell_words(out["command"]), network):
            raise TaoError(f"job {job_id} ran shell text that names a checkpoint already: submit it again with "
                           f"that word changed to {checkpoints.override(ckpt, network)}")
        return tao_command.append_args(out, checkpoints.resume_args(ckpt, network))
    raise TaoError(f"job {job_id}'s saved spec has no command: submit it again by hand")


def _submit(rec_platform: str, spec: dict, options: dict, *, dry_run: bool = False, check: bool = False,
            note: Callable[[str], None] | None = None, **lineage: Any) -> Any:
    """The submit, or with ``dry_run`` its preview; ``note`` gets the dry run's first line (with ``check`` the
    submit's read-only checks ran first: :func:`taobank.core.pipeline.dry_run`; else what it did not check)."""
    from ..core import pipeline

    kept: dict[str, Any] = {k: tuple(v) if k == "secret_env" else v for k, v in options.items()
                            if k in jobfiles.KEPT_OPTIONS}
    opts = SubmitOptions(**kept, **lineage)
    adapter = get(rec_platform)
    if not dry_run:
        return adapter.submit(spec, opts)
    text, lines = pipeline.preview(adapter, spec, opts, check=check)
    line = "\n".join(lines)
    if note is not None:
        note(line)
    return text


# ------------------------------------------------------------------ continue
def _with_search_values(rec: Record, spec: dict) -> dict:
    """A search trial's spec with the values its study gave it (its record keeps none: the trial asked the study
    as it started): the continued job is a plain job with those overrides, outside the study."""
    from . import sweepfile
    from .. import tao_command
    from .search import is_search, journal

    if not is_search(rec.backend):
        return spec
    found = journal.of_trial(rec)
    trial = found.by_job().get(rec.id) if found is not None else None
    if trial is None or not trial.params:
        raise TaoError(f"job {rec.id} is a trial of search {rec.sweep} whose study holds no values for it (it never "
                       "asked): nothing to continue; submit it again")
    return tao_command.append_args(spec, sweepfile.args_of(trial.words()))


def _without_study_secret(rec: Record, spec: dict, options: dict) -> tuple[dict, dict]:
    """A trial of a database study got the study's URL as a secret (``--study-storage-env``: the spec's
    ``secrets`` or Kubernetes' ``secret_env``) for its runner alone; the continued job is a plain job outside the
    study, and TAO must never see the URL's password."""
    name = rec.backend.get("search_storage_env")
    if not isinstance(name, str) or not name:
        return spec, options
    spec = {**spec, "secrets": [s for s in spec.get("secrets") or [] if s != name]}
    if not spec["secrets"]:
        del spec["secrets"]
    options = {**options, "secret_env": [s for s in options.get("secret_env") or () if s != name]}
    return spec, options


def continue_job(platform: str | None, job_id: str, *, checkpoint: str | None = None,
                 description: str | None = None, dry_run: bool = False, time_minutes: float | None = None,
                 queue: str | None = None, check: bool = False, note: Callable[[str], None] | None = None,
                 spec_check: bool = True) -> Any:
    """A new job continuing ``job_id`` from its latest (or the named) checkpoint (its view; with
    ``dry_run`` the text submit would send, creating nothing); ``time_minutes``: its time limit, for a job
    that ran out of time (the platform's own limit: :meth:`Platform.with_time_limit`); ``queue``: another
    Kueue LocalQueue (Kubernetes; else the job's own queue, kept in its spec)."""
    if time_minutes is not None and not (time_minutes > 0 and time_minutes < 1e7):
        raise UsageError("--time-hours/--time-minutes must be a positive number")
    rec = load_for(job_id, platform, "continue")
    if rec.state == State.COMPLETE:
        keys = tao_command.resume_keys(rec.network_arch or "") if rec.action == "train" else []
        further = (f"; to train it further, submit a train job with --parent {job_id}, "
                   f"train.{keys[0]}={{parent.checkpoint}} and a larger train.num_epochs") if keys else ""
        raise TaoError(f"job {job_id} is COMPLETE: nothing to continue; to use its results submit with "
                       f"--parent {job_id}{further}")
    if rec.state not in CONTINUABLE:
        raise TaoError(f"job {job_id} is {rec.state}: cancel it first (or wait for it to end), then continue it")
    spec, options = jobfiles.load_spec(job_id)
    spec = _with_search_values(rec, spec)
    spec, options = _without_study_secret(rec, spec, options)
    if queue is not None:
        adapter = get(rec.platform)
        spec = adapter.with_queue(adapter.spec_type.given(spec), queue).to_dict()
    if time_minutes is not None:  # before any cluster call: a platform without a limit refuses here
        adapter = get(rec.platform)
        spec = adapter.with_time_limit(adapter.spec_type.given(spec), time_minutes).to_dict()
    for key in ("namespace", "context"):  # where the job ran, unless the submit named it (Kubernetes)
        if not options.get(key) and rec.backend.get(key):
            options[key] = rec.backend[key]
    if not checkpoints.resumes(rec.action):
        raise TaoError(f"job {job_id} is a {rec.action} job: only {', '.join(checkpoints.table()['resume_actions'])} "
                       "jobs continue from a checkpoint; submit it again")
    loc, listing = _listing(rec, "job")
    spec, where = _fetched(spec, rec, loc.folder, {"checkpoint": _checkpoint(rec, listing, loc.folder, checkpoint)},
                           replaces=checkpoints.resumed_from(_argv(spec), spec.get("network_arch")))
    ckpt = _plain(where["checkpoint"], job_id)
    new = _resumed_command(spec, ckpt, job_id)
    view = _submit(rec.platform, new, options, continues=job_id, dry_run=dry_run, check=check, note=note,
                   description=description or rec.description, spec_check=spec_check)
    if dry_run:
        return view
    view.extra["continues_from"] = ckpt
    return view


# ------------------------------------------------------------------ --parent
def _mentions(value: Any) -> set[str]:
    """The placeholders in the values :func:`_substitute` fills (strings, at any depth; not dict keys)."""
    if isinstance(value, str):
        return {p for p in PLACEHOLDERS if p in value}
    if isinstance(value, list):
        return set().union(*(_mentions(v) for v in value))
    if isinstance(value, dict):
        return set().union(*(_mentions(v) for v in value.values()))
    return set()


def _substitute(value: Any, table: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, text in table.items():
            value = value.replace(key, text)
        if "{parent." in value:
            raise TaoError(f"unknown placeholder in {value[:80]!r}: use {' or '.join(PLACEHOLDERS)}")
        return value
    if isinstance(value, list):
        return [_substitute(v, table) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, table) for k, v in value.items()}
    return value


def with_parent(platform: str, spec: dict, parent_id: str, *, allow_incomplete: bool = False,
                kpi: str | None = None, mode: str | None = None) -> dict:
    """``spec`` with the parent's placeholders filled and its folder reachable (refused in one line:
    no such job, another platform, not COMPLETE, results gone, no checkpoint where one is named).
    ``kpi``: ``{parent.checkpoint}`` is the checkpoint of the epoch where that KPI is best (``mode``; None: the
    direction of its name),
    as ``artifacts --kpi`` finds it, instead of the newest."""
    try:
        parent = records.get(parent_id)
    except records.UnknownJob as exc:
        known = explained(exc, platform, "submit --parent")
        if known is not exc:  # a sweep's id, or a job's BACKEND
            raise TaoError(f"--parent {known}; nothing was submitted") from None
        raise TaoError(f"--parent {parent_id}: there is no such job record (see tao_jobs.py list); nothing was "
                       "submitted") from None
    except TaoError:
        raise TaoError(f"--parent {parent_id}: there is no such job record (see tao_jobs.py list); nothing was "
                       "submitted") from None
    if parent.platform != registry.canonical(platform):
        raise TaoError(f"--parent {parent_id} is a {parent.platform} job: a child runs on the same platform "
                       "to reach its results; nothing was submitted")
    if parent.state != State.COMPLETE and not allow_incomplete:
        raise TaoError(f"--parent {parent_id} is {parent.state}, not COMPLETE: wait for it, or add "
                       "--allow-incomplete-parent to use what it left; nothing was submitted")
    loc, listing = _listing(parent, "--parent", status=kpi is not None, spec=spec)
    table = {"{parent.results_dir}": loc.folder}
    latest = checkpoints.latest(listing.files, parent.action, listing.links, parent.network_arch)
    if kpi is not None:
        from .results_verbs import find_best

        best = find_best(listing, kpi, mode, parent.action)
        if not best.checkpoints:
            raise TaoError(f"--parent {parent_id}: {best.line()}; nothing was submitted")
        latest = next(f for f in listing.files if f.path == best.checkpoints[0])
    named = _mentions(spec)
    if "{parent.checkpoint}" in named and latest is None:
        raise TaoError(f"--parent {parent_id} left no checkpoint in {loc.folder}: {{parent.checkpoint}} cannot be "
                       "filled; nothing was submitted")
    if _remote(loc.folder):
        if "{parent.results_dir}" in named:
            raise TaoError(f"--parent {parent_id} keeps its results in {loc.folder}, which no job can mount: "
                           "{parent.results_dir} has no folder to name; use {parent.checkpoint} (downloaded before "
                           "the job runs) or list the files you need as s3_inputs; nothing was submitted")
        wanted = {"{parent.checkpoint}": posixpath.join(loc.folder, latest.path)} \
            if latest is not None and "{parent.checkpoint}" in named else {}
        spec, table = _fetched(spec, parent, loc.folder, wanted)
    elif latest is not None:
        table["{parent.checkpoint}"] = posixpath.join(loc.folder, latest.path)
    table = {k: _plain(v, parent_id) for k, v in table.items()}
    child = _substitute(dict(spec), {**table, "{parent.checkpoint}": table.get("{parent.checkpoint}", "")})
    if _remote(loc.folder):
        return child
    adapter = get(parent.platform)
    reached: dict = adapter.lineage_access(adapter.spec_type.given(child), parent, loc.folder).to_dict()
    return reached


def submit_with_parent(platform: str, spec: dict, opts: SubmitOptions, *, allow_incomplete: bool = False,
                       kpi: str | None = None, mode: str | None = None,
                       preview: Callable[[dict, SubmitOptions], Any] | None = None) -> Any:
    """The core's submit of a child job (``preview``: the dry-run instead)."""
    assert opts.parent
    child = with_parent(platform, spec, opts.parent, allow_incomplete=allow_incomplete, kpi=kpi, mode=mode)
    if preview is not None:
        return preview(child, opts)
    return get(platform).submit(child, replace(opts, parent=opts.parent))


# ------------------------------------------------------------------ lineage of a record
def chain(job_id: str) -> list[dict]:
    """The job and its ancestors (by ``continues``, ``parent`` and ``retry_of``), oldest first."""
    out: list[dict] = []
    seen: set[str] = set()
    cur: str | None = job_id
    while cur and cur not in seen:
        seen.add(cur)
        try:
            rec = records.load(cur)
        except TaoError:
            out.append({"id": cur, "state": "MISSING"})
            break
        out.append(rec)  # as stored: what --json prints
        was = Record.of(rec)
        cur = was.continues or was.parent or was.retry_of
    return out[::-1]


__all__ = ["continue_job", "with_parent", "submit_with_parent", "chain", "PLACEHOLDERS", "CONTINUABLE"]
