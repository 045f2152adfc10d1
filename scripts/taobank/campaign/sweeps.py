"""Sweeps: many trials of one job, submitted, watched, cancelled and compared as one unit.

Written once for every platform. A sweep is N trial records sharing a sweep
id (``sweep``, ``trial``, ``overrides`` on each record); each trial is an
ordinary job (status, logs, cancel, artifacts work on it alone). A sweep is
submitted in the same order as one job (:func:`taobank.core.pipeline.submit`: plan
every trial, gate, open every record, ONE batched launch: a SLURM job array, a
Kubernetes Indexed Job, Docker containers). An adapter whose trials are created
held (``Platform.holds_trials``) gets them released here, as slots free, during
status and watch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .. import kpirank, names, records, tao_command
from . import sweepfile
from ..contract import SubmitOptions
from ..errors import TaoError, UsageError
from ..records import Record
from ..states import State



def trial_spec(spec: Mapping[str, Any], overrides: Mapping[str, str]) -> dict:
    """The job spec of one trial: its ``key=value`` arguments appended to the command (after ``-e spec.yaml``;
    the values are safe words already: :mod:`taobank.campaign.sweepfile`)."""
    return trial_specs(spec, [overrides])[0]


def trial_specs(spec: Mapping[str, Any], trials: Sequence[Mapping[str, str]]) -> list[dict]:
    """:func:`trial_spec` of every trial: the command checked once for the sweep, each trial's arguments, then
    each trial's spec."""
    if not any(isinstance(spec.get(k), (list, str)) for k in ("args", "command")):
        raise UsageError("a sweep needs a command (or args) to append the trials' key=value overrides to")
    words = [sweepfile.args_of(t) for t in trials]
    return [tao_command.append_args(spec, w) for w in words]


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
           max_concurrent: int | None = None, *, parent_kpi: str | None = None, parent_mode: str | None = None,
           allow_incomplete_parent: bool = False, search: Any = None) -> Submitted:
    """Every trial submitted in the one submit order (:func:`taobank.core.pipeline.submit`); nothing half-submitted.

    A bad trial or a failed gate leaves no record; a launch that fails marks every trial it did not create
    ERROR. ``opts.parent`` (``--parent``): the parent's placeholders are filled once
    (:func:`taobank.campaign.lineage.with_parent`, ``parent_kpi`` as ``--parent-kpi``) and every trial record names
    the parent. Each trial's spec is kept (``continue`` runs one trial again). ``search``
    (:class:`taobank.campaign.search.bundle.Staging`): the trials have no overrides; each asks the study as it starts."""
    from ..core import pipeline
    from ..core.platform import get

    spec, trials = _prepared(platform_name, spec, opts, trials, max_concurrent, parent_kpi=parent_kpi,
                             parent_mode=parent_mode, allow_incomplete_parent=allow_incomplete_parent,
                             search=search is not None)
    adapter = get(platform_name)
    spec, opts = with_study_secret(adapter, spec, opts, search)
    specs = [dict(spec) for _ in trials] if search is not None else trial_specs(spec, trials)
    unchecked = _check_space(adapter, spec, opts, search) if search is not None else []
    done = pipeline.submit(adapter, specs, opts, trials=trials, max_concurrent=max_concurrent, search=search)
    assert done.sweep is not None
    out = Submitted(done.sweep, done.views, done.max_concurrent, "; ".join(filter(None, [done.gate.text(), *unchecked])),
                    done.gate.notes() + unchecked)
    _supervised(adapter, done.sweep, done.views, first=done.views[0].id)  # the views of the records as opened
    return out


def with_study_secret(adapter: Any, spec: dict, opts: SubmitOptions, search: Any) -> tuple[dict, SubmitOptions]:
    """A database study's URL reaches every trial as a secret, by the NAME its variable has
    (``--study-storage-env``), on the platform's own secret channel (:meth:`taobank.core.platform.Platform.with_secret`)."""
    name = getattr(getattr(search, "settings", None), "storage_env", "") if search is not None else ""
    if not name:
        return spec, opts
    typed, opts = adapter.with_secret(adapter.spec_type.given(spec), opts, name)  # judged at submit
    return typed.to_dict(), opts


def _prepared(platform_name: str, spec: dict, opts: SubmitOptions, trials: list[dict[str, str]],
              max_concurrent: int | None, *, parent_kpi: str | None, parent_mode: str | None,
              allow_incomplete_parent: bool, search: bool = False) -> tuple[dict, list[dict[str, str]]]:
    """The checks every sweep submit (and its preview) makes before any platform code, and the spec with the
    parent's placeholders filled (``--parent``). A search's trials are alike until each asks its study."""
    if search:
        if not trials or any(trials) or len(trials) > sweepfile.MAX_TRIALS:
            raise UsageError(f"a search runs 1 to {sweepfile.MAX_TRIALS} trials with no overrides of their own")
        if not any(isinstance(spec.get(k), (list, str)) for k in ("args", "command")):
            raise UsageError("a search needs a command (or args) to append each trial's key=value overrides to")
    else:
        trials = sweepfile.check_trials(trials)
    from ..core.pipeline import check_concurrency  # (a sweep's status never imports the submit order)

    check_concurrency(max_concurrent, len(trials))
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
    return spec, trials


# ------------------------------------------------------------------ the dry run of a sweep
#: The names a preview renders with: submit mints real ids (one per trial, and the sweep's).
PREVIEW_SWEEP = "preview-sweep"


def preview_ids(n: int) -> list[str]:
    return [f"preview-trial-{i}" for i in range(n)]


@dataclass
class Preview:
    """A sweep's dry run: the trial table and what its submit would send (the adapter's rendering)."""

    sweep: str
    max_concurrent: int
    trials: list[dict]
    shared: list[tuple[str, str]]
    sent: list[list[tuple[str, str]]]
    #: the dry run's line: the submit's read-only checks that passed, and what was not checked
    checks: str = ""
    #: a search's preview: each trial's overrides are asked of the study as it starts
    searched: bool = False
    #: the lines a user must see even with --json (``warning: ...``: the spec check skipped or a spec unread)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"sweep": self.sweep, "max_concurrent": self.max_concurrent, "trials": self.trials, "checks": self.checks,
                "shared": [{"name": n, "text": t} for n, t in self.shared],
                "sent": [{"trial": i, "name": n, "text": t} for i, docs in enumerate(self.sent) for n, t in docs]}

    def text(self) -> str:
        """The table, then what is sent once, then trial 0's own documents in full and every other trial's as
        its difference from trial 0's (trials differ only in their overrides and names)."""
        import difflib

        from ..text import one_line

        asked = "(asked of the study as it starts)" if self.searched else ""
        rows = [("TRIAL", "ID", "OVERRIDES", "RESULTS")] + [
            (str(t["trial"]), t["id"], one_line(" ".join(sweepfile.args_of(t["overrides"]))) or asked, t["results_dir"])
            for t in self.trials]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        out = [f"{self.checks}\n"] if self.checks else []
        out += [f"sweep preview: {len(self.trials)} trials, at most {self.max_concurrent} at once; nothing was "
               f"created (ids and names are placeholders: submit mints them)\n"]
        out += ["  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] + "\n" for r in rows]
        for name, text in self.shared:
            out.append(f"# ---- sent once for the sweep: {name} ----\n{_ended(text)}")
        first = self.sent[0] if self.sent else []
        for i, docs in enumerate(self.sent):
            for j, (name, text) in enumerate(docs):
                base = first[j][1] if i and j < len(first) else None
                if base is None or "\n" not in text.strip():
                    out.append(f"# ---- trial {i}: {name} ----\n{_ended(text)}")
                    continue
                diff = difflib.unified_diff(base.splitlines(keepends=True), text.splitlines(keepends=True),
                                            "trial 0", f"trial {i}", n=0)
                out.append(f"# ---- trial {i}: {name}, as trial 0's but for ----\n"
                           + "".join(_ended(line) for line in diff if not line.startswith(("---", "+++"))))
        return "".join(out)


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _check_space(adapter: Any, spec: dict, opts: SubmitOptions, search: Any) -> list[str]:
    """A search's space through the spec check at its edges (each key's bounds, each choice): the trials' own
    specs carry no overrides until each asks the study, so this is where a bad key or range is refused. Returns
    the note a submit says when the command is not TAO's (its space cannot be judged)."""
    from ..core import pipeline
    from .. import tao_spec_gate
    from ..contract import Gate
    from .search import space

    if not opts.spec_check:
        return []
    if not tao_command.identified_each([spec])[1]:
        return [f"note: {tao_command.NOT_TAO_FORM_SPACE}"]
    pipeline.check_specs(adapter, [spec], opts, Gate())  # the command's own, said plainly
    problems: list[str] = []
    for edge in space.edges(search.settings.space):
        try:
            pipeline.check_specs(adapter, [trial_spec(spec, edge)], opts, Gate())
        except tao_spec_gate.SpecRefused as exc:
            problems += [f"--space {line}" for line in exc.lines if f"--space {line}" not in problems]
    if problems:
        raise tao_spec_gate.SpecRefused(problems)
    return []


def preview(platform_name: str, spec: dict, opts: SubmitOptions, trials: list[dict[str, str]],
            max_concurrent: int | None = None, *, parent_kpi: str | None = None, parent_mode: str | None = None,
            allow_incomplete_parent: bool = False, check: bool = False, search: Any = None) -> Preview:
    """What ``submit`` would do with these trials, contacting nothing that changes state and opening no record:
    the same checks, every trial's spec as submit builds it, the platform's rendering of what it sends
    (:meth:`Platform.preview_sweep`, the functions its launch uses) and the trial table. ``check``: the submit's
    read-only checks first (:func:`taobank.core.pipeline.dry_run`), else the preview says it did not run them."""
    from ..core.platform import get

    spec, trials = _prepared(platform_name, spec, opts, trials, max_concurrent, parent_kpi=parent_kpi,
                             parent_mode=parent_mode, allow_incomplete_parent=allow_incomplete_parent,
                             search=search is not None)
    from ..core import pipeline

    k = pipeline.check_concurrency(max_concurrent, len(trials))
    ids = preview_ids(len(trials))
    from ..contract import Batch

    adapter = get(platform_name)
    if search is not None and not getattr(adapter, "runs_searches", False):
        raise UsageError(f"--search does not run on {platform_name} yet")
    spec, opts = with_study_secret(adapter, spec, opts, search)
    specs = [dict(spec) for _ in trials] if search is not None else trial_specs(spec, trials)
    unchecked = _check_space(adapter, spec, opts, search) if search is not None else []
    batch = Batch(max_concurrent=k, sweep=PREVIEW_SWEEP, search=search)
    if not check:  # what contacts nothing (the specs, the records) is checked in every dry run
        gate = pipeline.dry_run(adapter, specs, opts, trials=trials, max_concurrent=max_concurrent, search=search,
                                check=False).gate
        shown = adapter.preview_sweep(adapter.typed_specs(specs), opts, ids, batch)
        table = [{"trial": i, "id": jid, "overrides": dict(t), "results_dir": folder}
                 for i, (jid, t, folder) in enumerate(zip(ids, trials, shown.results_dirs))]
        return Preview(PREVIEW_SWEEP, k, table, shown.shared, shown.trials, pipeline.UNCHECKED,
                       searched=search is not None, notes=gate.notes() + unchecked)
    done = pipeline.dry_run(adapter, specs, opts, trials=trials, max_concurrent=max_concurrent, search=search)
    try:
        shown = adapter.preview_sweep(adapter.typed_specs(specs), opts, ids, batch)
    except TaoError:
        if not done.pending:
            raise
        done.left_out = True  # a platform that needs the credentials' values to render them
        shown = adapter.preview_sweep(adapter.typed_specs(done.specs), done.opts, ids, batch)
    table = [{"trial": i, "id": jid, "overrides": dict(t), "results_dir": folder}
             for i, (jid, t, folder) in enumerate(zip(ids, trials, shown.results_dirs))]
    return Preview(PREVIEW_SWEEP, k, table, shown.shared, shown.trials, done.first_line(),
                   searched=search is not None, notes=done.gate.notes() + unchecked)


def _supervised(adapter: Any, sweep_id: str, trials: list[Any], *, first: str) -> None:
    """A platform whose held trials only the bank can start gets a detached supervisor while any is held
    (started here by submit, again by status if it died): the sweep runs with nobody calling status.
    ``trials``: the trials' records or views (state and backend), ``first``: the sweep's first trial's id."""
    if not getattr(adapter, "supervises_sweeps", False):
        return
    from ..core import sweepsupervisor

    if sweepsupervisor.wanted(trials):
        sweepsupervisor.start(sweep_id, first)


def supervise(sweep_id: str, **kwargs: Any) -> int:
    """Run the sweep's supervisor loop here (what the detached one runs): :func:`taobank.core.sweepsupervisor.supervise`."""
    from ..core import sweepsupervisor

    first = trial_records(sweep_id)[0].id
    return sweepsupervisor.supervise(sweep_id, first, lambda: status(sweep_id), **kwargs)


# ------------------------------------------------------------------ the trials of a sweep
def trial_records(sweep_id: str, platform: str | None = None) -> list[Record]:
    """The trials of ``sweep_id`` in trial order (retries of a trial follow it); one line when there are none."""
    if not names.is_dns1035_label(sweep_id or ""):
        raise UsageError(f"sweep id {str(sweep_id)[:60]!r} is not an id: see tao_jobs.py list")
    recs = records.find(platform=platform, sweep=sweep_id)
    if not recs:
        from ..core.record_selection import job_not_sweep

        raise TaoError(job_not_sweep(sweep_id) or f"no trials of sweep {sweep_id} in {records.state_dir()}: "
                       "see tao_jobs.py list")
    recs.sort(key=lambda r: (int(r.trial or 0), r.attempt or 1))
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
    #: with a ranking KPI (``status --sweep ID --kpi NAME``): the trial's entry of :func:`best`'s ranking
    best: dict | None = None
    #: a search's trial: its Optuna trial (number, state, value, epochs reported, whether it is the study's best)
    study: dict | None = None

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        for key in ("best", "study"):
            if out[key] is None:
                out.pop(key)
        return out

    def kpi_text(self) -> str:
        """The KPI cell: the ranking KPI's best value and its epoch when the table ranks, else the latest KPIs."""
        from ..progress.statusfile import format_number

        if self.best is not None:
            return best_text(self.best)
        return " ".join(f"{k}={format_number(v, 4) if isinstance(v, (int, float)) else v}"
                        for k, v in self.kpis.items()) or "-"


def best_text(entry: Mapping[str, Any]) -> str:
    """A ranked trial's value as people read it: ``val_loss 0.41 @ep3`` (TAO's epoch, as ``artifacts --kpi`` and
    the checkpoint's name ``model_epoch_003`` give it; ``@step120`` when TAO wrote steps only)."""
    from ..progress.statusfile import format_number

    value, at, key = entry.get("value"), entry.get("at"), entry.get("key") or "epoch"
    if not isinstance(value, (int, float)):
        return "-"
    where = "" if not isinstance(at, int) else f" @ep{at}" if key == "epoch" else f" @{key}{at}"
    return f"{entry.get('kpi')} {format_number(value, 4)}{where}"


def _kpis(progress: Mapping[str, Any] | None) -> dict:
    return dict((progress or {}).get("kpis") or {})


def _epoch(progress: Mapping[str, Any] | None) -> str:
    from ..progress.statusfile import epoch_text

    p = progress or {}
    if isinstance(p.get("epoch"), int) and isinstance(p.get("max_epoch"), int):
        return epoch_text(p["epoch"], p["max_epoch"])
    return str(p.get("line") or "")[:30]


def status(sweep_id: str, *, retry: bool = True, kpi: str | None = None, mode: str | None = None,
           recs: list[Record] | None = None) -> list[Row]:
    """Every trial's state, progress and latest KPIs: the platform's one batched query, plus at most one read
    of the status files of the trials it could not read in that query. With ``kpi``: each trial's best value
    of it and its epoch too, as :func:`best` ranks them (its one listing of every trial's folder). ``recs``: the
    trials as this command read them already (:func:`trial_records`): each record is read once per status."""
    from . import jobstatus
    from ..core import platform as core

    if kpi is not None:
        check_rank(kpi, mode)
    recs = recs or trial_records(sweep_id)
    active = {r.id for r in recs if not r.terminal}
    by_id = {r.id: r for r in recs}
    views = jobstatus.status(None, recs=recs, retry=retry, progress=False, every_trial=True)
    adapter = core.get(recs[0].platform)
    _supervised(adapter, sweep_id, views, first=recs[0].id)  # the trials as this status left them
    # running trials, and finished ones whose final progress is not known yet: one read (status's rule)
    now = jobstatus.ended_now(views, active, adapters={adapter.name: adapter})
    read = []
    for v in views:
        if v.id in by_id and v.state == State.RUNNING and not adapter.progress_in_sweep:
            read.append(v)
    for v in now["read"]:
        if v.id in by_id:
            read.append(v)
    jobstatus.keep_progress(views, read=read, read_already=now["read_already"], known=now["known"], held=by_id)
    rows = []
    for v in views:
        rec = by_id.get(v.id) or records.get(v.id)
        rows.append(Row(int(rec.trial or 0), v.id, dict(rec.overrides or {}), v.state,
                        _epoch(v.progress), _kpis(v.progress), bool(rec.backend.get("held"))))
    _with_study(sweep_id, recs, rows)
    if kpi is not None:
        win = best(sweep_id, kpi, mode)
        ranked = {e["id"]: e for e in win.ranked}
        for row in rows:
            entry = ranked.get(row.id) or {}
            row.best = {"kpi": kpi, "mode": win.mode, "mode_from": win.mode_from,
                        **{k: entry.get(k) for k in ("value", "key", "at")}}
    return rows


# ------------------------------------------------------------------ a search's study
def journal_text(sweep_id: str, recs: list[Record] | None = None) -> tuple[str, str] | None:
    """(the text of a search sweep's study journal, where it is): ONE read through the platform; None for a plain
    sweep or one not launched yet."""
    from .search import journal

    recs = recs or trial_records(sweep_id)
    return journal.fetch(recs[0])


def study(sweep_id: str, recs: list[Record] | None = None) -> Any:
    """The study of a search sweep as Optuna reads it (:class:`taobank.campaign.search.journal.Study`: ONE read of its
    journal, :func:`journal_text`), None for a plain sweep or one not launched yet."""
    from .search import journal

    recs = recs or trial_records(sweep_id)
    if journal.storage_env_of(recs[0]):  # a database study: read there, never through the platform
        return journal.read_database(journal.storage_env_of(recs[0]), sweep_id)
    got = journal_text(sweep_id, recs)
    if got is None:
        return None
    return journal.read(got[0], sweep_id, where=f"the study journal {got[1]}")


def study_view(sweep_id: str, recs: list[Record] | None = None) -> dict[str, Any]:
    """A search's study as data (``tao_jobs.py study ID --json``, the MCP tool ``study``): each Optuna trial's
    number, sweep trial, job id, state, epochs, value and parameters, and the best; one line for a sweep that
    is not a search."""
    recs = recs or trial_records(sweep_id)
    found = study(sweep_id, recs)
    if found is None:
        raise UsageError(f"sweep {sweep_id} is not a search (submit --search): it has no study")
    from .search import bundle

    trial_of = {r.id: r.trial for r in recs}
    summary = bundle.summary_of(recs[0].backend) or {}
    return {"sweep": sweep_id, "kpi": summary.get("kpi"), "mode": summary.get("mode"),
            "trials": [t.to_dict() | {"trial": trial_of.get(t.job_id)} for t in found.trials],
            "best": found.best.to_dict() if found.best else None}


def study_text(view: Mapping[str, Any]) -> str:
    """:func:`study_view` as the table ``tao_jobs.py study ID`` prints: NUMBER TRIAL ID STATE EPOCHS VALUE
    OVERRIDES, then the best."""
    from ..progress.statusfile import format_number
    from .search.journal import StudyTrial
    from ..text import one_line

    def words(t: Mapping[str, Any]) -> str:
        return " ".join(sweepfile.args_of(StudyTrial(0, "", dict(t.get("params") or {})).words()))

    def value(v: Any) -> str:
        return format_number(v, 6) if isinstance(v, (int, float)) else "-"

    rows = [("NUMBER", "TRIAL", "ID", "STATE", "EPOCHS", "VALUE", "OVERRIDES")]
    for t in view["trials"]:
        trial = t.get("trial")
        rows.append((str(t["number"]), "-" if trial is None else str(trial), one_line(t.get("job_id") or "-"),
                     one_line(str(t["state"])), str(t["epochs"]), value(t.get("value")), one_line(words(t))))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    out = ["  ".join(c.ljust(w) for c, w in zip(r[:6], widths)) + "  " + r[6] for r in rows]
    b = view.get("best")
    if b is not None:
        out.append(f"best: number {b['number']} {one_line(b.get('job_id') or '-')} value {value(b.get('value'))} "
                   f"({one_line(words(b))})")
    return "\n".join(out) + "\n"


def _with_study(sweep_id: str, recs: list[Record], rows: list[Row]) -> None:
    """A search's rows get their trial's parameters (the OVERRIDES column) and Optuna's view of the trial; a
    journal that cannot be read leaves the rows as the records say (status still answers)."""
    from .search import is_search

    if not recs or not is_search(recs[0].backend):  # a plain sweep: no study (nothing of the search imported)
        return
    try:
        found = study(sweep_id, recs)
    except TaoError:
        return
    if found is None:
        return
    by_job = found.by_job()
    for row in rows:
        t = by_job.get(row.id)
        if t is None:
            continue
        row.overrides = t.words()
        row.study = {"number": t.number, "state": t.state, "value": t.value, "epochs": t.epochs,
                     "best": found.best is not None and found.best.number == t.number}


def study_best_line(rows: list[Row]) -> str | None:
    """``best so far: trial 5 dino-train-1 (train.optim.lr=0.00091) val_loss 0.4``: the study's best trial."""
    from ..progress.statusfile import format_number

    for r in rows:
        if r.study and r.study.get("best") and isinstance(r.study.get("value"), (int, float)):
            return (f"best so far: trial {r.trial} {r.id} ({' '.join(sweepfile.args_of(r.overrides))}) "
                    f"value {format_number(r.study['value'], 6)}")
    return None


def kpi_header(rows: list[Row]) -> str:
    """The KPI column's header: which values it shows (the ranking KPI's best, or the latest of each)."""
    ranked = next((r.best for r in rows if r.best is not None), None)
    if not ranked:
        return "KPIS (latest)"
    return f"BEST {ranked['kpi']} ({kpirank.Direction(ranked['mode'], ranked.get('mode_from') == 'name').text()})"


def table(rows: list[Row], *, headers: bool = True) -> str:
    """The sweep table: TRIAL ID STATE PROGRESS OVERRIDES, then the KPI column (:func:`kpi_header`)."""
    from ..text import one_lines

    lines: list[tuple[str, ...]] = [("TRIAL", "ID", "STATE", "PROGRESS", "OVERRIDES", kpi_header(rows))] if headers else []
    words = [" ".join(sweepfile.args_of(r.overrides)) for r in rows]  # every row's OVERRIDES
    cells: list[object] = []
    for r, said in zip(rows, words):
        state = f"{r.state} (held)" if r.held and r.state == State.PENDING else r.state
        cells += [r.trial, r.id, state, r.progress or "-", said, r.kpi_text()]
    clean = one_lines(cells)  # every cell cleaned in one call
    lines += [tuple(clean[i:i + 6]) for i in range(0, len(clean), 6)]
    if not lines:
        return ""
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    return "".join("  ".join(c.ljust(w) for c, w in zip(line[:5], widths)) + "  " + line[5] + "\n" for line in lines)


def cancel(sweep_id: str) -> tuple[list[Any], list[str]]:
    """Cancel every trial of the sweep (held ones too) in one batch per platform (one scancel of every array
    task; one delete of the Kubernetes Indexed Job); (views, one-line errors)."""
    from ..core import platform as core

    recs = trial_records(sweep_id)
    return core.cancel(None, [r.id for r in recs], batch=True)


@dataclass
class Winner:
    """The best trial of a sweep by one KPI, and its best checkpoint."""

    sweep: str
    kpi: str
    mode: str
    #: where the direction came from: ``flag`` (--mode) or ``name`` (the KPI's name, :mod:`taobank.kpirank`)
    mode_from: str = "flag"
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
        from ..text import one_line
        from ..progress.statusfile import format_number

        if self.id is None:
            return one_line(f"sweep {self.sweep}: no trial has {self.kpi} yet ({self.note})")
        where = ", ".join(self.checkpoints) or "no checkpoint named for that epoch"
        way = kpirank.Direction(self.mode, self.mode_from == "name").text()
        return one_line(f"sweep {self.sweep}: best {self.kpi} ({way}) = {format_number(self.value, 6)}: trial "
                f"{self.trial} {self.id} ({' '.join(sweepfile.args_of(self.overrides))}) checkpoint {where} "
                f"in {self.folder}")


def check_rank(kpi: str | None, mode: str | kpirank.Direction | None) -> None:
    """A ranking KPI and mode :func:`best` can use, or a one-line usage error. A name that gives no direction with
    no ``mode`` is judged by :func:`best`, once a status file shows whether the name is misspelt."""
    if not isinstance(mode, kpirank.Direction):
        kpirank.check_mode(mode)
    if not kpi or not kpi.strip():
        raise UsageError("--kpi needs a KPI name (as in status.json, e.g. val_loss)")


#: The direction :func:`best` reads the trials with while the KPI's name gives none (only to see who has the KPI).
_PROBE = kpirank.Direction("min", False)


def best(sweep_id: str, kpi: str | None, mode: str | kpirank.Direction | None = None) -> Winner:
    """Rank the trials by their best ``kpi`` (each trial's status.json), and name the winner's checkpoint.

    Every trial's folder is listed in one batch (SLURM: one remote command for all); each trial's value comes
    from the same rule as ``artifacts --kpi`` (results_verbs.find_best)."""
    from ..core import platform as core
    from . import results_verbs

    recs = trial_records(sweep_id)
    from .search import bundle

    searched = bundle.summary_of(recs[0].backend)
    if searched is not None and not kpi:  # a search ranks by its study's KPI and direction unless told otherwise
        kpi = str(searched["kpi"])
        if mode is None:
            mode = kpirank.Direction(str(searched["mode"]), searched.get("mode_from") == "name")
    check_rank(kpi, mode)
    assert kpi is not None  # check_rank refuses a missing KPI
    # the direction when --mode or the KPI's name gives it; else judged after the trials show the name is theirs
    known = None if mode is None and kpirank.from_name(kpi) is None else kpirank.direction(kpi, mode)
    notes = []
    ranked: list[dict] = []
    misspelt: TaoError | None = None
    located = []
    for rec in recs:
        try:
            located.append((rec, core.get(rec.platform).results_location(rec)))
        except TaoError as exc:
            notes.append(f"trial {rec.trial}: {exc}")
    listings: list = []
    if located:
        adapter = core.get(located[0][0].platform)  # a sweep's trials share one platform
        listings = adapter.list_results_many([r for r, _ in located], [loc for _, loc in located], status=True)
    for (rec, loc), listing in zip(located, listings):
        try:
            if isinstance(listing, TaoError):
                raise listing
            # (no direction known yet: a stand-in one finds which trials have the KPI; nothing is ranked by it)
            b = results_verbs.find_best(listing, kpi, known or _PROBE, rec.action) if listing.exists else None
        except TaoError as exc:
            misspelt = misspelt or (exc if not isinstance(listing, TaoError) else None)
            notes.append(f"trial {rec.trial}: {exc}")
            continue
        ranked.append({"trial": rec.trial, "id": rec.id, "state": rec.state,
                       "overrides": rec.overrides or {}, "value": b.value if b else None,
                       "key": b.key if b else None, "at": b.at if b else None,
                       "checkpoints": b.checkpoints if b else [], "folder": listing.folder})
    if known is None and misspelt is not None and not any(e["value"] is not None for e in ranked):
        raise misspelt  # no trial has the KPI, and one names those it has: the name first, then the direction
    way = known or kpirank.direction(kpi, mode)
    win = Winner(sweep_id, kpi, way.mode, way.source)
    scored = [e for e in ranked if isinstance(e["value"], (int, float))]
    scored.sort(key=lambda e: e["value"], reverse=(way.mode == "max"))
    # a pruned trial stopped early: it ranks after every trial that ran its course (its value is of fewer epochs)
    scored = [e for e in scored if e["state"] != State.PRUNED] + [e for e in scored if e["state"] == State.PRUNED]
    win.ranked = scored + [e for e in ranked if e not in scored]
    if searched is not None:
        try:
            found = study(sweep_id, recs)
        except TaoError as exc:
            notes.append(str(exc))
            found = None
        by_job = found.by_job() if found is not None else {}
        for e in win.ranked:
            if e["id"] in by_job:
                e["overrides"] = by_job[e["id"]].words()
    if not scored:
        win.note = "; ".join(notes) or f"no trial's status.json holds {kpi}"
        return win
    top = scored[0]
    win.trial, win.id, win.overrides, win.value = top["trial"], top["id"], top["overrides"], top["value"]
    win.checkpoints, win.folder = top["checkpoints"], top["folder"]
    return win


__all__ = ["trial_spec", "trial_specs", "submit", "Submitted", "preview", "Preview", "trial_records", "status", "table", "cancel", "best",
           "Row", "Winner", "check_rank", "best_text", "kpi_header"]
