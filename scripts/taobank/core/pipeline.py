"""The one submit order, for one job and for N alike (a single job is a batch of one).

validate and plan every job (no cluster call) -> gates: the GPU-count warning, the NCCL verdict of a
multi-node job (every trial of a sweep alike), what opening the records would refuse (:func:`check_records`,
no cluster call), the adapter's read-only checks over the whole list -> open every record -> ONE adapter launch
of the list -> bind each record to what was made. A dry run (:func:`dry_run`) runs the same checks in the same
order up to the records, and opens none.

Everything that can be refused without a record is refused before any opens (a bad spec, or a credential in
the job's name, costs no cluster call; a failed gate leaves no record). A launch that fails marks every record it
did not bind ERROR (the adapter removes what it made); one whose outcome is unknown (:class:`SubmitUncertain`)
leaves it PENDING for a resume. The adapter never writes a record: what it learns before its launch
ends (a SLURM folder staged) it hands to ``Batch.checkpoint``, which this module writes.
"""
from __future__ import annotations

import os
from operator import attrgetter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import jobfiles, nccl_verdicts
from .. import checkpoints, names, records, tao_command
from ..contract import Batch, Gate, Launch, Plan, SubmitOptions
from ..errors import SubmitUncertain, TaoError, UsageError
from ..records import Record
from .record_selection import load_for
from ..states import State

if TYPE_CHECKING:  # the platform module imports this one
    from .platform import JobView, Platform


@dataclass
class Submitted:
    """What a submit made: the jobs' views in order, the gate report, and the sweep id (None: one job)."""

    views: list[JobView]
    gate: Gate
    sweep: str | None = None
    max_concurrent: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def check_concurrency(value: int | None, n: int) -> int:
    """How many of ``n`` jobs run at once (``--max-concurrent``; all of them when not given)."""
    if value is None:
        return n
    if value < 1:
        raise UsageError("--max-concurrent must be at least 1")
    if value > n:  # a typo (an extra digit) or the wrong sweep: said before anything is created
        raise UsageError(f"--max-concurrent {value} is more than the sweep's {n} trials: give at most {n} (or leave "
                         "it out: every trial at once)")
    return value


def submit(adapter: Platform[Any, Any], specs: list[dict[str, Any]], opts: SubmitOptions, *,
           trials: Sequence[Mapping[str, str]] | None = None, max_concurrent: int | None = None,
           search: Any = None) -> Submitted:
    """Submit ``specs`` on ``adapter`` in the one order; ``trials`` (the overrides of each spec) makes them a
    sweep, launched together with at most ``max_concurrent`` running at once; ``search`` (a sweep's study,
    :class:`taobank.campaign.search.bundle.Staging`) travels in the batch and its summary on every trial's record."""
    if not specs:
        raise UsageError("nothing to submit")
    gate = Gate()
    specs = check_specs(adapter, specs, opts, gate)  # before any plan, gate or record: a bad spec costs nothing
    sweep = trials is not None
    k = check_concurrency(max_concurrent, len(specs)) if sweep else len(specs)
    rec = None
    if opts.job_id:  # a record opened earlier: finish that one
        if sweep or len(specs) > 1:
            raise UsageError("--job-id names one job: a sweep mints one id per trial")
        rec = load_for(opts.job_id, adapter.name, "submit --job-id")
        if rec.terminal:
            raise TaoError(f"record {opts.job_id} is {rec.state} already: open a new record to run again")
    plans = adapter.plan_all(adapter.typed_specs(specs), opts, rec)
    unseen = tao_command.unseen_warning(specs[0])
    if unseen:
        gate.lines.append(unseen)
    if rec is not None:
        launch = adapter.adopt(plans[0], rec, gate)
        if launch is not None:
            return Submitted(_bind(adapter, [rec], [launch]), gate)
    verdict = _nccl_verdict(adapter, plans, opts)
    sweep_id = names.mint_job_id(plans[0].network_arch, "sweep") if sweep else None
    if search is not None and not sweep:
        raise UsageError("a search runs as a sweep: its trials are the sweep's")
    if search is not None and not getattr(adapter, "runs_searches", False):
        raise UsageError(f"--search does not run on {adapter.name} yet")
    batch = Batch(max_concurrent=k, sweep=sweep_id, checkpoint=_checkpoint, search=search)
    summary = search.summary() if search is not None else None
    # what the records would refuse, before the cluster is contacted (a dry run checks it there too)
    checked = check_records(adapter, plans, opts, gate, sweep_id, trials, k, summary) if rec is None else None
    adapter.check(plans, gate, batch)
    if search is not None and sweep_id is not None:  # a database study: reached and created now, before any record
        gate.lines += [line for line in (search.prepare(sweep_id),) if line]
    if verdict:
        gate.lines.append(nccl_line(verdict))
        gate.backend.update(verdict)
    recs = [rec] if rec is not None else _open(adapter, plans, opts, gate, sweep_id, trials, k, summary, checked)
    # what `continue` runs again (no secret: names only)
    jobfiles.save_specs(list(zip(recs, specs)), vars(opts), list(map(attrgetter("kept"), plans)))
    try:
        launches = adapter.launch(plans, recs, batch)
    except SubmitUncertain as exc:
        if exc.note:
            records.mark_many([records.Marking(r.id, State.PENDING, message=exc.note) for r in recs])
        raise
    except TaoError as exc:
        if sweep_id is None:
            _fail(recs, f"submit failed before launch: {exc}")
            raise
        _fail(recs, f"sweep submit failed before launch: {exc}")
        raise TaoError(f"sweep {sweep_id} failed to launch ({exc}); no trial runs and every record says ERROR") \
            from None
    return Submitted(_bind(adapter, recs, launches), gate, sweep_id, k)


# ------------------------------------------------------------------ the dry run: the same checks, nothing made
#: The credential a pull secret / registry login is made from (``--ngc-pull-secret``).
NGC_KEY = "NGC_KEY"


def pending_credentials(spec: Mapping[str, Any], opts: SubmitOptions) -> list[str]:
    """The credential names this submit takes (the spec's ``secrets``, ``--secret-env``, NGC_KEY for
    ``--ngc-pull-secret``) that this process's environment lacks. A word that is not a name is left to the
    platform, which refuses it unseen."""
    from ..envfile import check_secret_name

    listed = spec.get("secrets")
    names = [n for n in (listed if isinstance(listed, list) else []) if isinstance(n, str)]
    names += list(opts.secret_env) + ([NGC_KEY] if opts.ngc_pull_secret else [])
    out = []
    for name in dict.fromkeys(names):
        try:
            check_secret_name(name)
        except TaoError:
            continue
        if not os.environ.get(name):
            out.append(name)
    return out


def without_credentials(spec: Mapping[str, Any], opts: SubmitOptions,
                        names: Sequence[str]) -> tuple[dict[str, Any], SubmitOptions]:
    """``spec`` and ``opts`` without the credentials ``names`` (a dry run checks the rest without them)."""
    out = dict(spec)
    if isinstance(out.get("secrets"), list):
        kept = [n for n in out["secrets"] if n not in names]
        if kept:
            out["secrets"] = kept
        else:
            del out["secrets"]
    return out, replace(opts, secret_env=tuple(n for n in opts.secret_env if n not in names),
                        ngc_pull_secret=opts.ngc_pull_secret and NGC_KEY not in names)


#: A dry run's first line when it ran no check (``--dry-run`` alone contacts nothing).
UNCHECKED = ("dry run: nothing was contacted, so the submit's read-only checks did not run (the cluster or engine, "
             "GPUs, queue or quota, input paths such as -e FILE, the image): add --check to run them")


@dataclass
class DryRun:
    """What a dry run checked: the gate (its lines, and what it ``skipped``), the credentials not set here (left
    out of the checks and of the preview), and the specs and options the preview renders."""

    gate: Gate
    pending: list[str]
    specs: list[dict[str, Any]]
    opts: SubmitOptions
    #: the preview was rendered without the ``pending`` credentials (the platform needs their values for it)
    left_out: bool = False

    def first_line(self) -> str:
        """One line: the checks ran and passed (their report), then what was not checked and why."""
        from ..text import one_line

        skipped = list(self.gate.skipped)
        if self.pending:
            them = "them" if len(self.pending) > 1 else "it"
            skipped.append(f"{', '.join(self.pending)} not set here (the submit needs {them}"
                           + (f"; the preview leaves {them} out)" if self.left_out else ")"))
        ran = "; ".join(line for line in self.gate.lines if line and line not in self.gate.notes()) or "none needed"
        return one_line(f"dry run: the submit's read-only checks passed ({ran})"
                        + (f"; not checked: {'; '.join(skipped)}" if skipped else "; nothing was skipped"))


def dry_run(adapter: Platform[Any, Any], specs: list[dict[str, Any]], opts: SubmitOptions, *,
            trials: Sequence[Mapping[str, str]] | None = None, max_concurrent: int | None = None,
            search: Any = None, check: bool = True) -> DryRun:
    """The read-only checks a submit of ``specs`` runs before any record, in its order, with the credentials this
    process lacks left out and named; raises as that submit would. Opens no record, launches nothing. Every dry
    run checks what contacts nothing: the spec check, the plan, and what opening the records would refuse
    (:func:`check_records`: a credential in the name, the image or the results folder; a folder inside another
    job's). ``check`` (``--check``): then the NCCL verdict and the adapter's checks with ``Gate.dry_run`` (no
    pull, no login)."""
    if not specs:
        raise UsageError("nothing to submit")
    pending = list(dict.fromkeys(n for spec in specs for n in pending_credentials(spec, opts)))
    shaped = [without_credentials(spec, opts, pending) for spec in specs]
    specs, opts = [s for s, _ in shaped], shaped[0][1]
    gate = Gate(dry_run=True)
    typed = check_specs(adapter, specs, opts, gate)  # the spec check refuses first, as in a submit
    sweep = trials is not None
    k = check_concurrency(max_concurrent, len(typed)) if sweep else len(typed)
    # without --check no credential is needed: the plan reads none (its preview names them)
    plans = adapter.plan_all(adapter.typed_specs(typed), replace(opts, job_id=None, credential_values=check), None)
    unseen = tao_command.unseen_warning(typed[0])
    if unseen:
        gate.lines.append(unseen)
    verdict = _nccl_verdict(adapter, plans, opts) if check else {}
    sweep_id = names.mint_job_id(plans[0].network_arch, "sweep") if sweep else None
    check_records(adapter, plans, opts, gate, sweep_id, trials, k, search.summary() if search is not None else None)
    if not check:
        return DryRun(gate, pending, specs, opts)
    adapter.check(plans, gate, Batch(max_concurrent=k, sweep=sweep_id, search=search))
    if search is not None:  # a database study: reached from here, nothing written (its URL's variable set here)
        gate.lines += [line for line in (search.check_storage(pending),) if line]
    if verdict:
        gate.lines.append(nccl_line(verdict))
    return DryRun(gate, pending, specs, opts)


def preview(adapter: Platform[Any, Any], spec: dict[str, Any], opts: SubmitOptions, *,
            check: bool) -> tuple[str, list[str]]:
    """(what a submit of ``spec`` would send, the lines a dry run says of its checks). The checks that contact
    nothing run in every dry run (the spec check, what the record would refuse: :func:`dry_run` without
    ``check``), before anything is rendered: a preview never shows what the submit refuses as a credential.
    Without ``check`` the first line says which checks did not run (:data:`UNCHECKED`), with it the submit's
    read-only checks run first (:func:`dry_run`) and it says what passed and what was still not checked (a
    credential not set here, left out of the preview if the platform needs its value to render it)."""
    from ..text import one_line

    if not check:
        gate = dry_run(adapter, [spec], opts, check=False).gate  # what contacts nothing: the spec, the records
        text = adapter.preview(adapter.typed_spec(spec), opts)
        return text, [UNCHECKED, *(one_line(line) for line in gate.notes())]
    done = dry_run(adapter, [spec], opts)
    try:
        text = adapter.preview(adapter.typed_spec(spec), opts)
    except TaoError:
        if not done.pending:
            raise
        text, done.left_out = adapter.preview(adapter.typed_spec(done.specs[0]), done.opts), True
    return text, [done.first_line(), *(one_line(line) for line in done.gate.notes())]


def check_specs(adapter: Platform[Any, Any], specs: Sequence[Mapping[str, Any]], opts: SubmitOptions,
                gate: Gate) -> list[dict[str, Any]]:
    """The specs with the network and action their TAO command names (:func:`taobank.tao_command.identified`),
    every job's TAO spec and overrides checked in one pass (:mod:`taobank.tao_spec_gate`); any problem refuses the
    submit, one line each. A spec this machine cannot read, and a skipped check, are warnings of the gate; a
    command that is not TAO's entrypoint form is not judged, and when it carries ``key=value`` words it is a note
    of the gate (a dry run's gate lists it among what it skipped: its summary never says nothing was skipped)."""
    specs, runs_tao = tao_command.identified_each(specs)
    if not runs_tao:  # no job runs TAO's entrypoint: nothing to judge (tao_spec_gate judges only those) ...
        # ... but arguments TAO would read are said to be unchecked (not the resume override continue adds itself)
        if opts.spec_check and any(tao_command.carries_overrides(
                spec, checkpoints.resume_keys(spec.get("network_arch")) if opts.continues else ()) for spec in specs):
            if gate.dry_run:  # said so, not left silent (a dry run lists it among what it did not check)
                gate.skipped.append(tao_command.NOT_TAO_FORM_SKIPPED)
            else:
                gate.lines.append(f"note: {tao_command.NOT_TAO_FORM}")
        return specs
    if not opts.spec_check:
        if gate.dry_run:
            gate.skipped.append("the spec check (--no-spec-check)")
        else:
            gate.lines.append("warning: the spec check is skipped (--no-spec-check): TAO's own runner judges the "
                              "spec when the job starts")
        return specs
    from .. import tao_spec_gate  # only for a TAO command: a plain command never loads the check

    reader = getattr(adapter, "spec_text", None)  # a Platform has one (None: nothing readable here)
    # the hook reads the typed spec; typed as a spec file read back is (JobSpec.of: the schema's keys, nothing
    # refused), so the one schema check stays where the submit makes it (typed_specs, after this check)
    problems, notes = tao_spec_gate.check(
        specs, lambda spec, path: reader(adapter.spec_type.of(spec), path, opts) if reader else None)
    if problems:
        raise tao_spec_gate.SpecRefused(problems)
    gate.lines += [f"warning: {note}" for note in notes]
    return specs


def _nccl_verdict(adapter: Platform[Any, Any], plans: list[Plan], opts: SubmitOptions) -> dict[str, Any]:
    """The NCCL probe verdict a multi-node job needs (the probe itself needs none): one per cluster key."""
    if opts.probe:
        return {}
    verdict: dict[str, Any] = {}
    for key in dict.fromkeys(adapter.cluster_key(p) for p in plans if p.nodes > 1):
        verdict = nccl_verdicts.require_ok(adapter.name, key, helper=adapter.helper, skip=opts.skip_nccl_probe)
    return verdict


def nccl_line(verdict: Mapping[str, Any]) -> str:
    """The gate line of a multi-node submit: which probe vouches for the cluster (or that it was skipped)."""
    if verdict["nccl_probe"] == "skipped":
        return "NCCL probe skipped (--skip-nccl-probe)"
    return (f"NCCL probe ok (job {verdict.get('nccl_probe_job')}, {verdict.get('nccl_probe_at')}; "
            f"{nccl_verdicts.proves(verdict.get('nccl_probe_backend'))})")


def _openings(adapter: Platform[Any, Any], plans: list[Plan], opts: SubmitOptions, gate: Gate, sweep_id: str | None,
              trials: Sequence[Mapping[str, str]] | None, k: int,
              search: dict[str, Any] | None) -> tuple[list[records.Opening], list[tuple[str, str]]]:
    """The records ``plans`` open (:class:`taobank.records.Opening`), and each one's results folder with its id
    (a placeholder where none is minted yet) for :func:`taobank.records.refuse_nested`."""
    ids = [p.job_id or f"new-job-{i}" for i, p in enumerate(plans)]
    backend_extra: dict[str, Any] = {"max_concurrent": k} if sweep_id else {}
    if search is not None:
        backend_extra.update(search)
    lineage = {"parent": opts.parent, "continues": opts.continues}
    openings = [records.Opening(
        plan.image, plan.network_arch, plan.action, plan.storage_tier, plan.results_dir,
        backend={**plan.backend, **gate.backend, **backend_extra}, description=opts.description,
        job_id=plan.job_id, lineage=lineage,
        sweep=(sweep_id, i, dict(trials[i])) if sweep_id and trials is not None else None)
        for i, plan in enumerate(plans)]
    return openings, [(p.results_dir.replace(records.ID_PLACEHOLDER, j), j) for p, j in zip(plans, ids)]


def check_records(adapter: Platform[Any, Any], plans: list[Plan], opts: SubmitOptions, gate: Gate,
                  sweep_id: str | None, trials: Sequence[Mapping[str, str]] | None, k: int,
                  search: dict[str, Any] | None = None) -> records.Checked:
    """What opening the records of ``plans`` would refuse, refused now and nothing stored: a credential in the job's
    name (``--name``), image or results folder, a folder inside another job's, a bad lineage id
    (:func:`taobank.records.check_openings`). A submit runs it before the adapter's checks contact the cluster, and
    every dry run runs it (:func:`dry_run`), so neither sends nor shows what the record would refuse. Returns what
    was judged (the submit's :func:`_open` does not judge it again)."""
    openings, folders = _openings(adapter, plans, opts, gate, sweep_id, trials, k, search)
    records.refuse_nested(folders, adapter.name)
    return records.check_openings(adapter.name, openings, check_folder=False)


def _open(adapter: Platform[Any, Any], plans: list[Plan], opts: SubmitOptions, gate: Gate, sweep_id: str | None,
          trials: Sequence[Mapping[str, str]] | None, k: int, search: dict[str, Any] | None = None,
          checked: records.Checked | None = None) -> list[Record]:
    """Open every record (``checked``: what :func:`check_records` judged of them, their folders against the other
    records' included); on a failure, those opened say ERROR."""
    openings, _ = _openings(adapter, plans, opts, gate, sweep_id, trials, k, search)
    opened: list[dict[str, Any]] = []
    try:
        records.open_records(adapter.name, openings, check_folder=False, opened=opened, checked=checked)
    except TaoError as exc:
        if sweep_id is None:
            raise
        _fail(list(map(Record.of, opened)), f"sweep {sweep_id} not submitted: {exc}")
        raise TaoError(f"sweep not submitted ({exc}); nothing was launched") from None
    return list(map(Record.of, opened))


def _checkpoint(job_id: str, message: str, backend: Mapping[str, Any]) -> None:
    records.mark(job_id, State.PENDING, message=message, backend=dict(backend))


def _fail(recs: list[Record], message: str) -> None:
    """Every record the launch did not bind says ERROR with why (a bound one stays as the launch left it)."""
    marks: list[records.Marking] = []
    for cur in records.get_each([rec.id for rec in recs]):
        if isinstance(cur, TaoError):  # as reading them one by one: those before it are marked, then it raises
            records.mark_many(marks)
            raise cur
        if not cur.terminal and not cur.backend_ref:
            marks.append(records.Marking(cur.id, State.ERROR, message=message, err_class="ERR_PROGRAM"))
    records.mark_many(marks)


def _bind(adapter: Platform[Any, Any], recs: list[Record], launches: list[Launch]) -> list[JobView]:
    """Each record bound to what its launch made; a launch that made a job that cannot run as it is raises
    after binding (the record names the job, and the error says what to do)."""
    # state None: each keeps its state while active (a poll may have seen it run), else the first; read and
    # moved under the lock in one pass (one that cannot be read: those before it are bound, then it raises)
    bound = list(map(Record.of, records.mark_many([
        records.Marking(rec.id, None, backend_ref=launch.backend_ref, backend=launch.facts(), message=launch.message)
        for rec, launch in zip(recs, launches)])))
    views = list(map(adapter.view, bound))
    for view, launch in zip(views, launches):
        view.extra.update(launch.details)
    for launch in launches:
        if launch.error:
            raise TaoError(launch.error)
    return views


def relaunch(adapter: Platform[Any, Any], job_id: str) -> JobView:
    """Finish a launch an earlier submit began (:meth:`Platform.relaunch`) and bind the record to it."""
    try:
        launch = adapter.relaunch(job_id, {})
    except SubmitUncertain as exc:
        if exc.note:
            records.mark(job_id, State.PENDING, message=exc.note)
        raise
    if launch is None:
        view = adapter.view(records.get(job_id))
        view.message = "already submitted: nothing to resume"
        return view
    return adapter.view(bind_resumed(job_id, launch))


def bind_resumed(job_id: str, launch: Launch) -> Record:
    """A resumed launch (a record staged before, finished now): the record bound to it."""
    return Record.of(records.mark(job_id, State.PENDING, backend_ref=launch.backend_ref, backend=launch.facts(),
                                  message=launch.message))
