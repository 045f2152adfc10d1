"""Sweeps: many trials of one job, submitted, watched, cancelled and compared as one unit.

Written once for every platform. A sweep is N trial records sharing a sweep
id (``sweep``, ``trial``, ``overrides`` on each record); each trial is an
ordinary job (status, logs, cancel, artifacts work on it alone). A sweep is
submitted in the same order as one job (:func:`taobank.pipeline.submit`: plan
every trial, gate, open every record, ONE batched launch: a SLURM job array, a
Kubernetes Indexed Job, Docker containers). An adapter whose trials are created
held (``Platform.holds_trials``) gets them released here, as slots free, during
status and watch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from . import names, records, sweepfile, taoargs
from .contract import SubmitOptions
from .pipeline import check_concurrency
from .errors import TaoError, UsageError
from .states import State



def trial_spec(spec: Mapping[str, Any], overrides: Mapping[str, str]) -> dict:
    """The job spec of one trial: its ``key=value`` arguments appended to the command (after ``-e spec.yaml``;
    the values are safe words already: :mod:`taobank.sweepfile`)."""
    if not any(isinstance(spec.get(k), (list, str)) for k in ("args", "command")):
        raise UsageError("a sweep needs a command (or args) to append the trials' key=value overrides to")
    return taoargs.append_args(spec, sweepfile.args_of(overrides))


@dataclass
class Submitted:
    """A sweep as submitted: its id and the trials' views (in trial order)."""

    sweep: str
    views: list[Any]
    max_concurrent: int
    gate: str = ""
    #: the gate's queued:/warning: lines (:meth:`Gate.notes`)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"sweep": self.sweep, "trials": len(self.views), "max_concurrent": self.max_concurrent,
                "gate": self.gate, "jobs": [v.to_dict() for v in self.views]}


def submit(platform_name: str, spec: dict, opts: SubmitOptions, trials: list[dict[str, str]],
           max_concurrent: int | None = None, *, parent_kpi: str | None = None, parent_mode: str = "min",
           allow_incomplete_parent: bool = False) -> Submitted:
    """Every trial submitted in the one submit order (:func:`taobank.pipeline.submit`); nothing half-submitted.

    A bad trial or a failed gate leaves no record; a launch that fails marks every trial it did not create
    ERROR. ``opts.parent`` (``--parent``): the parent's placeholders are filled once
    (:func:`taobank.lineage.with_parent`, ``parent_kpi`` as ``--parent-kpi``) and every trial record names
    the parent. Each trial's spec is kept (``continue`` runs one trial again)."""
    from . import pipeline
    from .platform import get

    trials = sweepfile.check_trials(trials)
    pipeline.check_concurrency(max_concurrent, len(trials))
    if opts.job_id:
        raise UsageError("--job-id names one job: a sweep mints one id per trial")
    if opts.continues:
        raise UsageError("continue carries on one job: continue a trial by its id")
    if opts.parent:
        from . import lineage

        spec = lineage.with_parent(platform_name, spec, opts.parent, allow_incomplete=allow_incomplete_parent,
                                   kpi=parent_kpi, mode=parent_mode)
    elif parent_kpi is not None or allow_incomplete_parent:
        raise UsageError("--parent-kpi and --allow-incomplete-parent choose from a parent: give --parent ID too")
    adapter = get(platform_name)
    done = pipeline.submit(adapter, [trial_spec(spec, t) for t in trials], opts, trials=trials,
                           max_concurrent=max_concurrent)
    assert done.sweep is not None
    out = Submitted(done.sweep, done.views, done.max_concurrent, done.gate.text(), done.gate.notes())
    _supervised(adapter, done.sweep, [records.load(v.id) for v in done.views])
    return out


def _supervised(adapter: Any, sweep_id: str, recs: list[dict]) -> None:
    """A platform whose held trials only the bank can start gets a detached supervisor while any is held
    (started here by submit, again by status if it died): the sweep runs with nobody calling status."""
    if not getattr(adapter, "supervises_sweeps", False):
        return
    from . import sweepsupervisor

    if sweepsupervisor.wanted(recs):
        sweepsupervisor.start(sweep_id, recs[0]["id"])


def supervise(sweep_id: str, **kwargs: Any) -> int:
    """Run the sweep's supervisor loop here (what the detached one runs): :func:`taobank.sweepsupervisor.supervise`."""
    from . import sweepsupervisor

    first = trial_records(sweep_id)[0]["id"]
    return sweepsupervisor.supervise(sweep_id, first, lambda: status(sweep_id), **kwargs)


# ------------------------------------------------------------------ the trials of a sweep
def trial_records(sweep_id: str, platform: str | None = None) -> list[dict]:
    """The trials of ``sweep_id`` in trial order (retries of a trial follow it); one line when there are none."""
    if not names.is_dns1035_label(sweep_id or ""):
        raise UsageError(f"sweep id {str(sweep_id)[:60]!r} is not an id: see tao_jobs.py list")
    recs = [r for r in records.list_records(platform=platform) if r.get("sweep") == sweep_id]
    if not recs:
        raise TaoError(f"no trials of sweep {sweep_id} in {records.state_dir()}: see tao_jobs.py list")
    recs.sort(key=lambda r: (int(r.get("trial") or 0), r.get("attempt") or 1))
    return recs


@dataclass
class Row:
    """One trial in the sweep table."""

    trial: int
    id: str
    overrides: dict
    state: str
    progress: str = ""
    kpis: dict = field(default_factory=dict)
    held: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _kpis(progress: Mapping[str, Any] | None) -> dict:
    return dict((progress or {}).get("kpis") or {})


def _epoch(progress: Mapping[str, Any] | None) -> str:
    from .progress.statusfile import epoch_text

    p = progress or {}
    if isinstance(p.get("epoch"), int) and isinstance(p.get("max_epoch"), int):
        return epoch_text(p["epoch"], p["max_epoch"])
    return str(p.get("line") or "")[:30]


def status(sweep_id: str, *, retry: bool = True) -> list[Row]:
    """Every trial's state, progress and latest KPIs: the platform's one batched query, plus at most one read
    of the status files of the trials it could not read in that query."""
    from . import jobstatus, platform as core, training

    recs = trial_records(sweep_id)
    views = jobstatus.status(None, [r["id"] for r in recs], retry=retry, progress=False)
    adapter = core.get(recs[0]["platform"])
    _supervised(adapter, sweep_id, trial_records(sweep_id))
    by_id = {r["id"]: r for r in recs}
    want = [by_id[v.id] for v in views if v.id in by_id and not v.progress and v.state == State.RUNNING]
    if want and not adapter.progress_in_sweep:
        try:
            files = adapter.read_status_many(want)
        except TaoError:
            files = {}
        for v in views:
            if v.id in files:
                v.progress = training.progress_of(files[v.id], v.action or None)
    rows = []
    for v in views:
        v.progress = _remembered(v.id, v.progress)
        rec = by_id.get(v.id) or records.load(v.id)
        rows.append(Row(int(rec.get("trial") or 0), v.id, dict(rec.get("overrides") or {}), v.state,
                        _epoch(v.progress), _kpis(v.progress), bool((rec.get("backend") or {}).get("held"))))
    return rows


#: The last progress a sweep status saw of a trial (next to its record): a finished trial keeps its final KPIs
#: in the table without another cluster call. A cache only: the record never holds progress.
PROGRESS_FILE = "sweep-progress.json"


def _remembered(job_id: str, seen: dict | None) -> dict | None:
    import json

    from . import fsio

    path = records.artifact_dir(job_id) / PROGRESS_FILE
    if seen:
        try:
            fsio.write_private(path, json.dumps(seen, sort_keys=True) + "\n")
        except OSError:
            pass
        return seen
    try:
        data = json.loads(fsio.read_regular(path, "sweep progress", follow_links=False, missing_ok=True) or "null")
    except (TaoError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def table(rows: list[Row], *, headers: bool = True) -> str:
    """The sweep table: TRIAL ID STATE PROGRESS OVERRIDES KPIS."""
    from .text import one_line
    from .progress.statusfile import format_number

    lines = [("TRIAL", "ID", "STATE", "PROGRESS", "OVERRIDES", "KPIS")] if headers else []
    for r in rows:
        state = f"{r.state} (held)" if r.held and r.state == State.PENDING else r.state
        kpis = " ".join(f"{k}={format_number(v, 4) if isinstance(v, (int, float)) else v}" for k, v in r.kpis.items())
        lines.append(tuple(one_line(c) for c in (r.trial, r.id, state, r.progress or "-",
                                                 " ".join(sweepfile.args_of(r.overrides)), kpis or "-")))
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    return "".join("  ".join(c.ljust(w) for c, w in zip(line[:5], widths)) + "  " + line[5] + "\n" for line in lines)


def cancel(sweep_id: str) -> tuple[list[Any], list[str]]:
    """Cancel every trial of the sweep (held ones too) in one batch per platform (one scancel of every array
    task; one delete of the Kubernetes Indexed Job); (views, one-line errors)."""
    from . import platform as core

    recs = trial_records(sweep_id)
    return core.cancel(None, [r["id"] for r in recs], batch=True)


@dataclass
class Winner:
    """The best trial of a sweep by one KPI, and its best checkpoint."""

    sweep: str
    kpi: str
    mode: str
    trial: int | None = None
    id: str | None = None
    overrides: dict = field(default_factory=dict)
    value: Any = None
    checkpoints: list[str] = field(default_factory=list)
    folder: str | None = None
    ranked: list[dict] = field(default_factory=list)
    note: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def line(self) -> str:
        from .text import one_line
        from .progress.statusfile import format_number

        if self.id is None:
            return one_line(f"sweep {self.sweep}: no trial has {self.kpi} yet ({self.note})")
        where = ", ".join(self.checkpoints) or "no checkpoint named for that epoch"
        return one_line(f"sweep {self.sweep}: best {self.kpi} ({self.mode}) = {format_number(self.value, 6)}: trial "
                f"{self.trial} {self.id} ({' '.join(sweepfile.args_of(self.overrides))}) checkpoint {where} "
                f"in {self.folder}")


def best(sweep_id: str, kpi: str, mode: str = "min") -> Winner:
    """Rank the trials by their best ``kpi`` (each trial's status.json), and name the winner's checkpoint.

    Every trial's folder is listed in one batch (SLURM: one remote command for all); each trial's value comes
    from the same rule as ``artifacts --kpi`` (results_verbs.find_best)."""
    from . import platform as core, results_verbs

    if mode not in ("min", "max"):
        raise UsageError(f"--mode {mode!r} is unknown: use min or max")
    if not kpi or not kpi.strip():
        raise UsageError("--kpi needs a KPI name (as in status.json, e.g. val_loss)")
    recs = trial_records(sweep_id)
    win = Winner(sweep_id, kpi, mode)
    notes = []
    located = []
    for rec in recs:
        try:
            located.append((rec, core.get(rec["platform"]).results_location(rec)))
        except TaoError as exc:
            notes.append(f"trial {rec.get('trial')}: {exc}")
    listings: list = []
    if located:
        adapter = core.get(located[0][0]["platform"])  # a sweep's trials share one platform
        listings = adapter.list_results_many([r for r, _ in located], [loc for _, loc in located], status=True)
    for (rec, loc), listing in zip(located, listings):
        try:
            if isinstance(listing, TaoError):
                raise listing
            b = results_verbs.find_best(listing, kpi, mode, rec.get("action")) if listing.exists else None
        except TaoError as exc:
            notes.append(f"trial {rec.get('trial')}: {exc}")
            continue
        win.ranked.append({"trial": rec.get("trial"), "id": rec["id"], "state": rec["state"],
                           "overrides": rec.get("overrides") or {}, "value": b.value if b else None,
                           "checkpoints": b.checkpoints if b else [], "folder": listing.folder})
    scored = [e for e in win.ranked if isinstance(e["value"], (int, float))]
    scored.sort(key=lambda e: e["value"], reverse=(mode == "max"))
    win.ranked = scored + [e for e in win.ranked if e not in scored]
    if not scored:
        win.note = "; ".join(notes) or f"no trial's status.json holds {kpi}"
        return win
    top = scored[0]
    win.trial, win.id, win.overrides, win.value = top["trial"], top["id"], top["overrides"], top["value"]
    win.checkpoints, win.folder = top["checkpoints"], top["folder"]
    return win


__all__ = ["trial_spec", "submit", "Submitted", "trial_records", "status", "table", "cancel", "best",
           "Row", "Winner", "check_concurrency"]
