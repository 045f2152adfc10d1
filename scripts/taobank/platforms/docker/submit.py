"""submit on one Docker host: plan (no engine call), read-only checks, then ``docker run --detach``.

The core owns the order (:meth:`taobank.core.platform.Platform.submit`). Everything that can be refused is
refused in :func:`check`, before the record opens: no engine, no socket permission, GPUs the host does
not have, a bind-mount path that does not exist, a secret not set, an image that cannot be had.
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from ... import names, records
from ...contract import Batch, Gate, Launch, Plan, SubmitOptions
from ...envfile import check_job_env
from ...errors import SubmitUncertain, TaoError
from .spec import DockerSpec
from ...paths import abs_path, is_under
from . import engine as eng
from . import registry, render, spec as specmod, userns
from ...records import Record

#: The key ``--ngc-pull-secret`` logs the engine in with (as Kubernetes makes its pull Secret from it).
NGC_KEY = "NGC_KEY"
_SIZE = re.compile(r"([1-9][0-9]*)([bkmgBKMG]?)\Z")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}


#: The label every trial container of a sweep carries (its sweep id): ``docker ps --filter label=...`` finds it.
LABEL_SWEEP = "org.tao-skill-bank.sweep"

@dataclass
class DockerPlan(Plan):
    spec: DockerSpec
    run: render.RunSpec | None = None
    engine: str = "docker"
    host: str | None = None
    gpu_request: Any = 0
    pull: str = "missing"
    #: host paths that must exist before the run (data mounts)
    must_exist: list[str] = field(default_factory=list)
    #: finishing a record opened earlier (submit --job-id): its own empty results folder may exist already
    finishing: bool = False
    #: --ngc-pull-secret: the registry the engine logs in to (the image's, as $oauthtoken with NGC_KEY) before
    #: it pulls
    login_registry: str | None = None


def size_bytes(text: str) -> int:
    m = _SIZE.match(str(text))
    if not m:
        raise TaoError(f"size {text!r}: give a number with an optional unit b, k, m or g (16g)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def host_ram() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def shm_size(spec: DockerSpec, ram: int, pins: Mapping[str, Any] | None = None) -> str | None:
    """The spec's size, or the pinned default capped at half the host's RAM (a tmpfs size caps, never reserves)."""
    if spec.ipc_host:
        return None
    if spec.shm_size:
        return str(spec.shm_size)
    pinned = str(eng.default("shm_size", pins))
    if ram and size_bytes(pinned) > ram // 2:
        return f"{ram // 2 // 1024 ** 2}m"
    return pinned


def caller() -> str:
    """``UID:GID`` of the submitting user: the container writes the results as them, never as root."""
    return f"{os.getuid()}:{os.getgid()}"


@dataclass(frozen=True)
class _Shared:
    """What the plan of a job takes from everything but its command: the same for every trial of a sweep (the
    trials differ only in their overrides), so a sweep decides it once (:func:`plan_all`)."""

    name: str
    host: str | None
    cres: str
    base: str
    mounts: tuple[tuple[str, str, bool], ...]
    request: Any
    env: tuple[tuple[str, str], ...]
    user: str
    shm: str | None
    grace: int


def _shared(spec: DockerSpec, *, engine: str | None, env: Mapping[str, str], ram: int | None,
            engine_host: str | None) -> _Shared:
    """The part of :func:`plan_submit` that does not read the job's command or id: the engine module first (the
    engine, its address, the pinned defaults read once), then the folders, the GPUs, the environment."""
    name = eng.engine_name(engine)
    pinned = eng.defaults()
    cres = eng.container_results_dir(pinned)
    host = eng.host_now(name) or engine_host
    base = specmod.results_base(spec, env, pinned)
    mounts = []
    for m in spec.mounts or []:
        source = abs_path(m["host"], "mounts.host")
        target = abs_path(m["container"], "mounts.container")
        mounts.append((source, target, bool(m.get("read_only", True))))
    request = specmod.gpu_request(spec, pinned)
    plain, nccl = check_job_env(spec.env, spec.nccl_env, reserved=render.RESERVED_ENV)
    grace = eng.default("stop_grace_seconds", pinned) if spec.stop_grace_seconds is None else spec.stop_grace_seconds
    return _Shared(name, host, cres, base, tuple(mounts), request, tuple(sorted({**nccl, **plain}.items())), caller(),
                   shm_size(spec, host_ram() if ram is None else ram, pinned), int(grace))


def plan_submit(spec: DockerSpec, opts: SubmitOptions, *, engine: str | None = None, job_id: str | None = None,
                env: Mapping[str, str] | None = None, ram: int | None = None,
                engine_host: str | None = None, shared: _Shared | None = None) -> DockerPlan:
    """Everything decided without an engine call: the id, the folders, the argv (``engine_host``: the engine's address
    when it is not this shell's, e.g. the one a continued job ran on). ``spec`` is checked (:func:`specmod.typed`).
    ``shared``: what another job of the same launch decided that this one shares (:func:`plan_all`)."""
    env = os.environ if env is None else env
    if shared is None:
        shared = _shared(spec, engine=engine, env=env, ram=ram, engine_host=engine_host)
    return _plans([spec], opts, [job_id], shared)[0]


def _plans(specs: list[DockerSpec], opts: SubmitOptions, job_ids: list[str | None],
           shared: _Shared) -> list[DockerPlan]:
    """The plans of jobs that share ``shared`` (:func:`plan_submit` of each), each step taken for all of them in
    one pass: their ids, their folders, their TAO commands told their GPUs and folder, their argv (linted in one
    call, before the preview and the run: a value pasted into env is refused)."""
    jids = [job_id or opts.job_id or names.mint_job_id(str(spec.network_arch), str(spec.action))
            for spec, job_id in zip(specs, job_ids)]
    for jid in jids:
        job_dir = f"{shared.cres}/{jid}"
        for _, target, _ in shared.mounts:  # another job's folder beside it (a --parent's) is fine; its own, or above, not
            if is_under(target, job_dir) or is_under(job_dir, target):
                raise TaoError(f"mount target {target} covers or shadows {job_dir}, where the job's results folder "
                               "is mounted: choose another container path")
    request = shared.request
    if request != "all":  # TAO reads its GPUs from its argv; "all" is counted when check reads the host's GPUs
        specs = with_gpus_each(specs, len(request) if isinstance(request, list) else int(request))
    # TAO writes under its results_dir, not under $RESULTS_DIR
    specs = [spec.with_results_dir(f"{shared.cres}/{jid}") for spec, jid in zip(specs, jids)]
    commands = specmod.command_argvs(specs)
    workdirs = [abs_path(spec.workdir, "workdir") if spec.workdir else None for spec in specs]
    runs = [render.RunSpec(
        engine=shared.name, job_id=jid, image=str(spec.image), command=command,
        host_results=f"{shared.base.rstrip('/')}/{jid}", container_results=shared.cres, user=shared.user,
        gpus=request, cpus=None if spec.cpus is None else float(spec.cpus), memory=spec.memory, shm_size=shared.shm,
        ipc_host=bool(spec.ipc_host), mounts=shared.mounts, env=shared.env, secrets=tuple(spec.secrets or ()),
        network=spec.network, workdir=workdir) for spec, jid, command, workdir in zip(specs, jids, commands, workdirs)]
    render.lint_argv(*[render.run_argv(rs) for rs in runs])  # every job's argv in one lint
    login = [registry.image_registry(str(spec.image)) if opts.ngc_pull_secret else None for spec in specs]
    plans = []
    for spec, jid, rs, registry_host in zip(specs, jids, runs, login):
        backend: dict[str, Any] = {"engine": shared.name, "container": jid, "results_dir": rs.host_results,
                                   "stop_grace_seconds": shared.grace,
                                   "gpus": ",".join(request) if isinstance(request, list) else str(request)}
        if shared.host:
            backend["engine_host"] = shared.host
        if spec.memory:
            backend["memory"] = str(spec.memory)
        plans.append(DockerPlan(spec=spec, image=str(spec.image), network_arch=str(spec.network_arch),
                                action=str(spec.action), storage_tier="A", results_dir=rs.host_results,
                                backend=backend, job_id=jid, run=rs, engine=shared.name, host=shared.host,
                                gpu_request=request, pull=spec.pull or "missing",
                                must_exist=[m[0] for m in shared.mounts], finishing=bool(opts.job_id),
                                login_registry=registry_host))
    return plans


def plan_all(specs: list[DockerSpec], opts: SubmitOptions, *, engine: str | None = None,
             env: Mapping[str, str] | None = None, ram: int | None = None,
             job_ids: list[str] | None = None) -> list[DockerPlan]:
    """The plans of one launch's jobs (a sweep's trials): what they share (:class:`_Shared`) decided once for
    the jobs whose specs differ from the first one's in their command alone (planned together, :func:`_plans`),
    the rest planned on their own. ``job_ids``: the ids to plan them under (a preview's placeholders), else minted."""
    env = os.environ if env is None else env
    first = dict(specs[0].__dict__, command=None, args=None) if specs else {}
    shared = _shared(specs[0], engine=engine, env=env, ram=ram, engine_host=None) if specs else None
    ids: list[str | None] = list(job_ids) if job_ids is not None else [None] * len(specs)
    if shared is not None and all(dict(spec.__dict__, command=None, args=None) == first for spec in specs):
        return _plans(specs, opts, ids, shared)  # a sweep's trials: the usual case
    return [plan_submit(spec, opts, engine=engine, env=env, ram=ram, job_id=jid,
                        shared=shared if dict(spec.__dict__, command=None, args=None) == first else None)
            for spec, jid in zip(specs, ids)]


def with_gpus(spec: DockerSpec, count: int) -> DockerSpec:
    """``spec`` whose TAO command uses ``count`` GPUs (:func:`taobank.tao_command.with_gpu_args`)."""
    return with_gpus_each([spec], count)[0]


def with_gpus_each(specs: list[DockerSpec], count: int) -> list[DockerSpec]:
    """:func:`with_gpus` of each spec (a sweep's trials), one call."""
    return [spec.with_gpu_args(count, 1) for spec in specs]


def preview(spec: DockerSpec, opts: SubmitOptions, engine: str | None = None) -> str:
    """The command submit would run, shell-quoted, contacting nothing."""
    import shlex

    plan = plan_submit(spec, opts, engine=engine, job_id=opts.job_id or "preview-job")
    assert plan.run is not None
    return shlex.join([plan.engine, *render.run_argv(plan.run)]) + "\n"


def check(plans: list[DockerPlan], gate: Gate) -> None:
    """The read-only checks, cheapest first; the image pull (when needed) is last. The jobs of one launch
    (a sweep's trials) differ only in their overrides and GPUs: the first one is checked for all."""
    plan = plans[0]
    e = eng.Engine(plan.engine, plan.host)
    info = userns.read_info(e)
    is_rootless = userns.rootless(info)
    assert plan.run is not None
    user, ns = userns.user_flags(plan.engine, is_rootless, plan.run.user or caller())
    for each in plans:  # every container runs as the caller, mapped as the engine needs
        assert each.run is not None
        each.run = dataclasses.replace(each.run, user=user, userns=ns)
    gate.lines.append(f"{plan.engine} engine {userns.version(info)}; the container {userns.note(plan.engine, is_rootless)}")
    check_limits(plan.run, info)
    from . import gpus  # (its host reading is the checks': a status never imports it)

    got = gpus.check_request(plan.run.gpus, gpus.host_gpus() if plan.gpu_request not in (0, []) else [])
    count_all(plan, len(got))
    if got:
        mine = [g.index for g in got]
        plan.backend["gpu_indices"] = ",".join(mine)
        gate.lines.append(f"GPUs {', '.join(mine)} of this host")
        note = None if "slot" in plan.backend else gpus.sharing(mine, plan.host, plan.job_id)  # trials: the sweep's
        if note:
            gate.lines.append(note)
    for path in plan.must_exist:
        if not os.path.exists(path):
            raise TaoError(f"bind-mount path {path} does not exist on this host: create it or fix mounts; nothing was done")
    gate.lines += risky_mounts(plan.run.mounts)
    base = os.path.dirname(plan.results_dir)
    probe = base
    while not os.path.exists(probe):  # the base may be made at launch; its nearest existing parent must be writable
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        raise TaoError(f"results folder {base} cannot be written by you ({probe} is not a writable folder): "
                       "set results_dir or TAO_DOCKER_RESULTS_DIR to a folder of yours; nothing was done")
    if os.path.exists(plan.results_dir) and not _own_empty_folder(plan):
        raise TaoError(f"{plan.results_dir} exists already: a job's results folder is its own; nothing was done")
    missing = [n for n in plan.run.secrets if not os.environ.get(n)]
    if missing:
        raise TaoError(f"secret variable {', '.join(missing)} is not set in this shell: export it (the value goes "
                       "to the container by name, never on a command line); nothing was done")
    login = None
    if plan.login_registry:  # --ngc-pull-secret: the key read now (one line if unset), sent on stdin before a pull
        key = registry.read_key(NGC_KEY)
        login = lambda: registry.login(e, plan.login_registry or "", key)  # noqa: E731
    gate.lines.append(registry.ensure_image(e, plan.image, plan.pull, progress=_progress, login=login,
                                            skipped=gate.skipped if gate.dry_run else None))


#: Host paths a container should not see: the whole host, the engines' sockets (root on the host), keys, the kernel.
_RISKY = (("/", "the whole host"), ("/var/run/docker.sock", "the engine's socket (root on this host)"),
          ("/run/docker.sock", "the engine's socket (root on this host)"), ("/run/podman", "the engine's socket"),
          ("/proc", "the host's processes and kernel settings"), ("/sys", "the host's kernel settings"),
          ("/etc", "the host's configuration"), ("/root", "root's home"))


def risky_mounts(mounts: tuple[tuple[str, str, bool], ...] | list) -> list[str]:
    """``warning:`` gate lines (seen even under --quiet/--json) for bind mounts that hand the job the host:
    ``/``, an engine socket, a ``.ssh`` folder, ``/proc``. Allowed (a workstation is yours), never silent."""
    out = []
    for host, _, read_only in mounts:
        norm = os.path.normpath(host)
        # a home (root's or yours) is risky whole; a folder inside it (data, the bank's results) is not
        why = next((w for p, w in _RISKY if norm == p or (p not in ("/", "/root") and norm.startswith(p + "/"))),
                   None)
        if why is None and (".ssh" in norm.split("/") or norm.endswith(".sock")):
            why = "keys or a socket"
        if why is None and norm == os.path.normpath(os.path.expanduser("~")):
            why = "your whole home folder (keys and credentials)"
        if why:
            mode = "read-only" if read_only else "WRITABLE"
            out.append(f"warning: mount {host} ({mode}) gives the job {why}: mount only the data folder it needs")
    return out


#: The least memory an engine lets a container have (Docker and Podman refuse less at run time).
MIN_MEMORY = 6 * 1024 ** 2


def check_limits(run: render.RunSpec, info: Mapping[str, Any]) -> None:
    """CPUs and memory the engine would refuse at run time, refused before any record from its ``info`` (no call):
    more CPUs than it has, less memory than its minimum or more than its host has."""
    ncpu = info.get("NCPU") if isinstance(info.get("NCPU"), int) else (info.get("host") or {}).get("cpus")
    if run.cpus is not None and isinstance(ncpu, int) and ncpu > 0 and float(run.cpus) > ncpu:
        raise TaoError(f"cpus {run.cpus:g} is more than the engine's host has ({ncpu}): set cpus to {ncpu} or fewer; "
                       "nothing was done")
    if run.memory:
        asked = size_bytes(run.memory)
        total = info.get("MemTotal") if isinstance(info.get("MemTotal"), int) else (info.get("host") or {}).get("memTotal")
        if asked < MIN_MEMORY:
            raise TaoError(f"memory {run.memory} is under the engine's minimum of 6m: set memory to 6m or more; "
                           "nothing was done")
        if isinstance(total, int) and total > 0 and asked > total:
            raise TaoError(f"memory {run.memory} is more than the engine's host has ({total // 1024 ** 2}m): lower "
                           "memory; nothing was done")


def count_all(plan: DockerPlan, count: int) -> None:
    """``gpus: all`` counted (the host's GPUs, read by the checks): TAO's command is told how many it has."""
    if plan.gpu_request == "all" and plan.run is not None:
        plan.spec = with_gpus(plan.spec, count)
        plan.run = dataclasses.replace(plan.run, command=specmod.command_argv(plan.spec))


def _own_empty_folder(plan: DockerPlan) -> bool:
    """A record being finished whose launch made its folder before the run's answer was lost: that folder, empty,
    is the job's own (any other folder, or one with files, is never taken over)."""
    if not plan.finishing or plan.job_id is None or not os.path.isdir(plan.results_dir) or os.path.islink(plan.results_dir):
        return False
    try:
        rec = records.get(plan.job_id)
    except TaoError:
        return False
    return rec.results_dir == plan.results_dir and not os.listdir(plan.results_dir)


def _progress(text: str) -> None:
    """The pull's own progress, on stderr so --json output stays clean."""
    sys.stderr.write(text)
    sys.stderr.flush()


def launch(plans: list[DockerPlan], recs: list[Record], batch: Batch) -> list[Launch]:
    """Make each job's results folder (as the caller) and its container, then start them: one job with ONE
    ``run --detach``; a sweep's containers made with ``create`` (one a call: the CLI makes one container a
    call), then ONE ``start`` of the first ``max_concurrent`` (the others are held until the core releases
    them). A failure removes every container made (one ``rm --force``) and the empty folders."""
    first = plans[0]
    e = eng.Engine(first.engine, first.host)
    alone = batch.sweep is None and len(plans) == 1
    argvs = launch_argvs(plans, batch)  # linted right before they run: a plan changed after planning (GPUs) too
    made: list[str] = []
    folders: list[str] = []
    ids: dict[str, str] = {}
    searched = ""
    if batch.search is not None and batch.sweep:  # its folder first: every trial's container mounts it
        from . import search

        searched = search.stage_search(plans, batch.sweep, batch.search)
    own = [_own_empty_folder(plan) for plan in plans]  # each job's folder is its own: none changes another's
    try:
        for plan, rec, argv, taken in zip(plans, recs, argvs, own):
            try:
                if not taken:
                    os.makedirs(plan.results_dir, mode=0o755)
                    folders.append(plan.results_dir)
            except OSError as exc:
                raise TaoError(f"cannot create the results folder {plan.results_dir}: {exc.strerror}") from None
            made.append(rec.id)  # a call that did not answer may have made it: removed on failure too
            verb = "run" if alone else "create"
            try:
                res = e.run(argv, check=False, timeout=300, what=f"{e.name} {verb}")
            except TaoError as exc:
                if alone and "did not answer" in str(exc):
                    raise SubmitUncertain(f"{exc}: the container may exist; see {e.name} ps -a --filter "
                                          f"name={rec.id}") from None
                raise
            if not res.ok:
                raise TaoError(eng.explain(e.name, res.stderr or res.stdout, f"{e.name} {verb}", res.returncode))
            ids[rec.id] = (res.stdout.strip().splitlines() or [rec.id])[-1][:64]
        if not alone:
            start = [r.id for r in recs[:batch.max_concurrent]]
            res = e.run(["start", *start], check=False, timeout=300, what=f"{e.name} start")
            if not res.ok:
                raise TaoError(eng.explain(e.name, res.stderr or res.stdout, f"{e.name} start", res.returncode))
    except SubmitUncertain:
        raise
    except TaoError as exc:
        _undo(e, made, folders)
        if searched:
            from . import search

            search.unstage_search(searched)
        raise TaoError(f"{exc}; " + ("nothing was left running" if alone else "every trial's container was removed")) \
            from None
    out = []
    for i, (plan, rec) in enumerate(zip(plans, recs)):
        cid = ids[rec.id]
        held = i >= batch.max_concurrent
        if alone:
            message = f"container {rec.id} started ({e.name} run --detach)"
        else:
            message = f"container {rec.id} " + ("created, held (waits for a sweep slot)" if held
                                                   else f"started ({e.name} start)")
        out.append(Launch(backend_ref=cid[:12], backend={"container_id": cid, **({} if alone else {"held": held})},
                          message=message, details={"container": rec.id, "results": plan.results_dir}))
    return out


def launch_argvs(plans: list[DockerPlan], batch: Batch) -> list[list[str]]:
    """The engine argv of each job, linted: one job's ``run --detach``; a sweep's trials each ``create``d with the
    sweep's label (then started by ONE ``start``, see :func:`launch`; the dry run of a sweep shows these)."""
    alone = batch.sweep is None and len(plans) == 1
    argvs = []
    for plan in plans:
        assert plan.run is not None
        run = plan.run if alone else dataclasses.replace(
            plan.run, labels={**plan.run.labels, LABEL_SWEEP: batch.sweep or ""})
        argvs.append(render.run_argv(run) if alone else render.create_argv(run))
    render.lint_argv(*argvs)  # every job's argv in one lint
    return argvs


def preview_sweep(specs: list[DockerSpec], ids: list[str], batch: Batch, opts: SubmitOptions,
                  engine: str | None = None) -> tuple[list[str], str, list[str], bool]:
    """(each trial's ``create`` command, the ``start`` of the first ``max_concurrent``, each trial's results
    folder, whether the trials ask for GPUs) as the launch runs them, shell-quoted, contacting nothing. The GPUs of each trial are the spec's:
    submit gives each running trial GPUs of its own after reading the host's (:func:`taobank.platforms.docker.sweep.check`)."""
    import shlex

    plans = plan_all(specs, opts, engine=engine, job_ids=ids)
    if batch.search is not None and batch.sweep:  # as the launch makes them (the checks contact the engine: not here)
        from . import search

        search.wrap_trials(plans, batch.sweep, batch.search)
    name = plans[0].engine
    creates = [shlex.join([name, *argv]) + "\n" for argv in launch_argvs(plans, batch)]
    start = shlex.join([name, "start", *ids[:batch.max_concurrent]]) + "\n"
    return creates, start, [p.results_dir for p in plans], plans[0].gpu_request not in (0, [])


def _undo(e: eng.Engine, names: list[str], folders: list[str]) -> None:
    """Remove the containers made so far (one call) and the folders made for them, when empty (best effort)."""
    if names:
        e.run(["rm", "--force", *names], check=False, timeout=300, what=f"{e.name} rm")
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            pass


def adopt(plan: DockerPlan, rec: Record, gate: Gate) -> Launch | None:
    """A record being finished whose container exists already (an earlier submit lost its answer)."""
    e = eng.Engine(plan.engine, plan.host)
    res = e.run(["container", "inspect", "--format", "{{.Id}}", rec.id], check=False, what=f"{plan.engine} inspect")
    if not res.ok:
        return None
    cid = res.stdout.strip()
    gate.lines.append(f"container {rec.id} exists already: adopted, not started twice")
    return Launch(backend_ref=cid[:12], backend={"container_id": cid}, message=f"adopted container {rec.id}")
