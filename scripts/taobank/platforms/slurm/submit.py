"""submit on SLURM: the hooks the core's submit runs, over one SSH connection.

plan decides everything without the cluster; check runs ONE remote command
(``test -e`` of every input and path the command names, and the squashfs
check of a cached image); launch stages the job folder (one command, secrets
in a mode-600 file via stdin), renders and lints the script, then
``sbatch --parsable --hold`` + log folder + release (one command). A lost
sbatch answer is reconciled by the exact job name before any resubmit.
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ... import pins, records, sources, states, tao_command
from ...core import platform
from ...contract import Batch, Gate, Launch, Plan, SubmitOptions
from ...envfile import check_secret_name
from ...render import line_break_at
from ...errors import SubmitUncertain, TaoError
from .spec import SlurmSpec
from ...jobspec import given
from ...run import last_line, output_lines
from . import chain, cmdpaths, facts, images, mounts, prefetch, remote, render, resources, spec as specmod, status as st, storage, uploads
from .ssh import Connection
from ...records import Record


@dataclass
class Decisions:
    """What a SLURM submit decided without the cluster (:func:`plan`): the validated spec and every value the
    script, the staging and the checks are made from."""

    spec: SlurmSpec
    resources: resources.Resources
    runtime: str
    image: str | None
    pyxis_image: str | None
    #: the cached squashfs image the job runs from (pyxis with use_sqsh), or None
    sqsh: str | None
    #: the inputs that must exist on the cluster, and the other cluster paths the command and spec files name
    required: list[str]
    named: list[str]
    overrides: dict[str, str]
    dataset_root: str | None
    #: the argv (a string command is ``bash -c`` and its text)
    command: list[str]
    base: str
    mounts: str
    spec_files: list[uploads.Upload]
    env: dict[str, str]
    nccl_env: dict[str, str]
    #: name -> value (empty values when planned for a preview)
    secrets: dict[str, str]
    #: the spec's master_port; None: the sbatch derives one from the job id (nodes may be shared)
    master_port: int | None
    chain: Any
    prefetch: list
    prefetch_secrets: dict[str, str]


def plan(spec: SlurmSpec | Mapping[str, Any], env: Mapping[str, str] | None = None, *,
         need_secrets: bool = True) -> Decisions:
    """Everything a submit decides without touching the cluster (fails early). A typed spec was checked where
    it was typed (:meth:`taobank.core.platform.Platform.typed_spec`); a mapping (a file, a preview) is checked here."""
    env = os.environ if env is None else env
    spec = spec if isinstance(spec, SlurmSpec) else specmod.typed(spec)
    # the script's text is made of the spec's values: the check names the field as the spec file spells it
    broken = line_break_at({k: v for k, v in spec.to_dict().items() if k not in ("specs", "spec_files")})
    if broken:  # the script would refuse it at launch, after the record opened: say which field, now
        raise TaoError(f"spec value {broken} holds a newline, CR or NUL (the value is not shown): an sbatch script "
                       "cannot carry it; put multi-line text in a spec file (spec_files) and name that; nothing "
                       "was submitted")
    res = resources.resolve(spec, env)
    spec = spec.with_gpu_args(res.gpus_per_node, res.nodes)  # TAO reads its GPUs from its argv
    runtime = specmod.runtime(spec, env)
    image = spec.image
    if runtime == "pyxis" and not image:
        raise TaoError("container runtime pyxis needs an image: set image in the spec or --image")
    pyxis = images.pyxis_image(image) if image else None
    required, overrides, root = storage.dataset_paths(spec)
    base = storage.base_dir(spec, env)
    spec.with_results_dir(storage.results_dir(base, records.ID_PLACEHOLDER))  # a command naming another folder: refused now
    argv = command_of(spec, overrides, None)  # the folder's path is the job id's (script_input); not an input
    spec_files = uploads.collect(spec.spec_files or {}, what="spec_files")
    _check_spec_results(spec, spec_files, storage.results_dir(base, records.ID_PLACEHOLDER))
    uploads.substitute(argv, "/", [u.name for u in spec_files])  # a {specs}/X naming no file fails here, early
    pre = sources.collect(spec)
    if not pre and any(prefetch.PLACEHOLDER in a for a in argv):
        raise TaoError(f"the command names {prefetch.PLACEHOLDER} but the job has no prefetch: add --prefetch SOURCE=DEST")
    pre_secrets = sources.secrets_for(pre, env, need_values=need_secrets)
    sources.plain_env(pre, env)  # a bad S3_ENDPOINT_URL fails here, early
    mount_list, site_mounts = "", []
    if runtime == "pyxis":
        extra = mounts.parse(spec.container_mounts or resources.defaults()["container_mounts"])
        site_mounts = mounts.site_roots(env, base, extra) + extra
    named = [n for n in named_paths(spec.command, argv, spec_files, [m.dst for m in site_mounts]) if n not in required]
    if runtime == "pyxis":
        mount_list = mounts.text(mounts.derive([("input", r) for r in required] +
                                               [("path the job names", n) for n in named], site_mounts,
                                               write=[("results base", base)]))
    env_vars, nccl_env = storage.check_env(spec.env, spec.nccl_env)
    names = spec.secrets or []
    secret_values = storage.collect_secrets(names, env) if need_secrets else {check_secret_name(n): "" for n in names}
    d = resources.defaults()
    sqsh = None
    if runtime == "pyxis" and pyxis and not images.is_sqsh(pyxis) and given(spec.use_sqsh, d["use_sqsh"]):
        cache = storage.any_cluster_path(spec.sqsh_cache_dir, "sqsh_cache_dir") if spec.sqsh_cache_dir \
            else posixpath.join(base, pins.resolve("slurm.sqsh_cache_subdir"))
        sqsh = images.sqsh_path(pyxis, cache)
    return Decisions(
        spec=spec, resources=res, runtime=runtime, image=image, pyxis_image=pyxis, sqsh=sqsh, required=required,
        named=named, overrides=overrides, dataset_root=root, command=argv, base=base, mounts=mount_list,
        spec_files=spec_files, env=env_vars, nccl_env=nccl_env, secrets=secret_values,
        master_port=int(spec.master_port) if spec.master_port else None, chain=chain.settings(spec, res),
        prefetch=pre, prefetch_secrets=pre_secrets)


def command_of(spec: SlurmSpec, overrides: Mapping[str, str], results: str | None) -> list[str]:
    """The argv the job runs: the command, TAO's ``results_dir`` override naming the job's folder ``results``
    (TAO writes under it, never under ``$RESULTS_DIR``; the same path in the container) and the dataset's keys."""
    argv = specmod.command_argv(spec.with_results_dir(results))
    if overrides:
        if not isinstance(spec.command, list):
            raise TaoError("dataset.spec_keys need an argv-list command (they are appended as key=value)")
        argv += [f"{k}={v}" for k, v in overrides.items()]
    return argv


def _check_spec_results(spec: SlurmSpec, spec_files: list[uploads.Upload], folder: str) -> None:
    """The TAO experiment spec the command names (``-e {specs}/NAME``) may not send TAO's results to another folder
    than the job's (:func:`taobank.tao_command.check_spec_results_dir`); a spec on the cluster is not read here."""
    word = tao_command.spec_file_word({"command": spec.command, "network_arch": spec.network_arch, "action": spec.action})
    prefix = uploads.PLACEHOLDER + "/"
    if not word or not word.startswith(prefix):
        return
    for u in spec_files:
        if u.name == word[len(prefix):]:
            tao_command.check_spec_results_dir(u.name, u.data.decode("utf-8", "replace"), folder)


def named_paths(command: str | list[str] | None, argv: list[str], spec_files: Iterable[uploads.Upload],
                mounted: Iterable[str]) -> list[str]:
    """Cluster paths the command and the uploaded spec files name (:mod:`taobank.platforms.slurm.cmdpaths`)."""
    found = tao_command.command_paths(command, argv)
    for u in spec_files:
        found += tao_command.spec_file_paths(u.name, u.data)
    return cmdpaths.cluster_paths(found, mounted)


def preflight_paths(conn: Connection, paths: Iterable[str], sqsh_files: Iterable[str] = (), *,
                    nodes: list[resources.NodeSize] | None = None, parts: list[str] | None = None) -> list[str]:
    """Paths (of ``paths``) missing on the login host, and ``sqsh_files`` missing or not squashfs
    (``PATH (empty or not a squashfs image)``): ONE remote command. ``nodes``: filled with the size of every
    node of every partition, and ``parts`` with every partition's name (sinfo, in that same command)."""
    paths, sqsh_files = list(paths), list(sqsh_files)
    sinfo = nodes is not None or parts is not None
    if not paths and not sqsh_files and not sinfo:
        return []
    args = ([remote.NODES_MARK] if sinfo else []) + paths + ([remote.SQSH_MARK] + sqsh_files if sqsh_files else [])
    res = conn.script(remote.MISSING, args, what="test -e", retry_on_drop=True)
    if nodes is not None:
        nodes += resources.node_sizes(res.stdout)
    if parts is not None:
        parts += resources.partitions(res.stdout)
    return [line for line in output_lines(res.stdout) if line and not line.startswith(("@@node ", "@@part "))]


def _staged_files(p: Decisions, job_id: str, job_dir: str, results: str, script: str,
                  meta: dict) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {f"specs/{u.name}": u.data for u in p.spec_files}
    files |= {
        storage.SPEC_FILE: storage.compact_json(p.spec.specs or {}),
        storage.ENV_FILE: storage.compact_json(p.env),
        storage.META_FILE: storage.compact_json(meta),
        f"sbatch/job_{job_id}.sbatch": script,
    }
    if p.secrets:
        files[storage.CREDS_FILE] = storage.credentials_text(p.secrets)
    return files


@dataclass
class SlurmPlan(Plan):
    """A SLURM submit's decisions (:func:`plan`), and what the login host told the checks."""

    spec: SlurmSpec
    decided: Decisions = field(kw_only=True)  # always given (plan_submit)
    env: Mapping[str, str] = field(default_factory=dict)
    conn: Connection | None = None
    #: set by :func:`check`: the image the job runs, and whether a conversion job makes its .sqsh first
    run_image: str | None = None
    convert: bool = False
    force: bool = False


def plan_submit(spec: SlurmSpec, env: Mapping[str, str], conn: Connection | None = None, *,
                need_secrets: bool = True) -> SlurmPlan:
    """:func:`plan` as the core's submit takes it: the typed spec in, the spec the job runs (its GPU count
    added to TAO's argv) typed in the plan (``need_secrets`` False: a dry run's, no credential read)."""
    p = plan(spec, env, need_secrets=need_secrets)
    s = p.spec
    return SlurmPlan(spec=s, image=p.image or facts.NO_IMAGE, network_arch=str(s.network_arch),
                     action=str(s.action),
                     storage_tier="A", results_dir=storage.results_dir(p.base, records.ID_PLACEHOLDER),
                     nodes=p.resources.nodes, decided=p, env=env, conn=conn,
                     backend={k: v for k, v in {"backend_type": "slurm", "partition": p.resources.partition,
                                                "cluster_name": s.cluster_name,
                                                "container_runtime": p.runtime,
                                                "memory": p.resources.mem}.items()
                              if v is not None})  # an unset cluster_name is absent, not "None"


def check_one(sp: SlurmPlan, gate: Gate) -> None:
    """ONE remote command on the login host: every input and every path the command names exists, a cached
    .sqsh is a squashfs image (a bad one is converted again), every partition the submit sbatches to exists
    (the job's, its image conversion's, its prefetch's) and a node of the job's partition is large enough."""
    p = sp.decided
    assert p is not None  # plan_submit made it
    conn = sp.conn = sp.conn or Connection(sp.env)
    conn.connect()
    given_sqsh = p.pyxis_image if p.runtime == "pyxis" and p.pyxis_image and images.is_sqsh(p.pyxis_image) else None
    sqsh_checks = ([given_sqsh] if given_sqsh else []) + ([p.sqsh] if p.sqsh else [])
    wanted = list(p.required) + list(p.named)
    nodes: list[resources.NodeSize] = []
    parts: list[str] = []
    missing = preflight_paths(conn, wanted, sqsh_checks, nodes=nodes, parts=parts)
    cache_bad = [m for m in missing if m.split(" ")[0] == p.sqsh]  # missing, empty or no squashfs: converted below
    sp.force = bool(given(p.spec.force_reconvert_latest, resources.defaults()["force_reconvert_latest"]))
    sp.convert = bool(p.sqsh and p.pyxis_image and images.needs_conversion(p.pyxis_image, not cache_bad, sp.force))
    # what sbatch would refuse after the job folder was staged: a partition that does not exist, a node too small
    refused = resources.unknown_partition(sbatched_partitions(sp), parts) or resources.too_big(p.resources, nodes)
    if refused:
        raise TaoError(refused)
    data_missing = [m for m in missing if m not in cache_bad]
    if data_missing:
        raise TaoError(f"missing on the cluster ({conn.connect().entry}): {', '.join(data_missing)}; put the data on the "
                       "shared filesystem or fix the paths (nothing was submitted)")
    sp.run_image = (p.sqsh or p.pyxis_image) if p.runtime == "pyxis" else p.pyxis_image
    line = resources.partition_line(p.resources, nodes)
    if line:
        gate.lines.append(line)
    elif not parts and gate.dry_run:
        gate.skipped.append(f"the partition (sinfo on {conn.connect().entry} listed none; sbatch judges it)")
    if wanted:
        gate.lines.append(f"{len(wanted)} path(s) found on {conn.connect().entry}")
    if sp.convert:
        gate.lines.append(f"{p.pyxis_image} is converted to {p.sqsh} first")


def sbatched_partitions(sp: SlurmPlan) -> list[tuple[str, str, str]]:
    """Every partition the submit of ``sp`` sbatches a job to, as :func:`resources.unknown_partition` takes them:
    the job's, its image conversion's (when it converts) and its prefetch job's."""
    p = sp.decided
    out = [("partition", p.resources.partition, "--partition or SLURM_PARTITION")]
    if sp.convert:
        conv = conversion_job(p, "check", force=sp.force, env=sp.env)
        out.append(("the image conversion's partition", conv.partition,
                    "conversion_partition or TAO_SLURM_CONVERSION_PARTITION"))
    pre = prefetch_job(p, "check", sp.env)
    if pre:
        out.append(("the prefetch job's partition", pre.partition,
                    "prefetch_partition or TAO_SLURM_PREFETCH_PARTITION"))
    return out


def check(plans: list[SlurmPlan], gate: Gate) -> None:
    """:func:`check_one` of the first job for all of one launch (a sweep's trials differ only in their
    overrides): the image each runs and whether it is converted first."""
    first = plans[0]
    check_one(first, gate)
    for sp in plans[1:]:
        sp.conn, sp.run_image, sp.convert, sp.force = first.conn, first.run_image, first.convert, first.force


def launch_one(sp: SlurmPlan, rec: Record, batch: Batch) -> Launch:
    """Stage, render, lint and sbatch; a refusal removes what it staged (the job folder with any credentials,
    the results folder while empty): a refused submit leaves its ERROR record and nothing on the cluster."""
    conn = sp.conn
    assert conn is not None
    try:
        return _stage_and_sbatch(conn, sp.decided, rec, sp.run_image, batch, convert=sp.convert, force=sp.force,
                                 env=sp.env)
    except SubmitUncertain:
        raise
    except TaoError as exc:  # refused, not submitted: take back the staged folder (credentials and all)
        cb = facts.SlurmFacts.of(records.get(rec.id))
        jdir = cb.folder
        if not jdir or cb.slurm_job_id:
            raise
        try:
            conn.script(remote.UNSTAGE, [jdir, cb.results_dir, rec.id], what="remove the staged job")
        except TaoError:
            raise TaoError(f"{exc}; also could not remove its staged folder {jdir} on the cluster (it may hold "
                           "credentials): delete it by hand") from None
        raise TaoError(f"{exc}; its staged folder was removed") from None


def submit(spec: Mapping[str, Any], *, conn: Connection | None = None, env: Mapping[str, str] | None = None,
           description: str | None = None, skip_nccl_probe: bool = False, probe: bool = False) -> dict:
    """The core's submit (:meth:`taobank.core.platform.Platform.submit`) with SLURM's options; the stored record."""
    opts = SubmitOptions(connection=conn, env=env, description=description, skip_nccl_probe=skip_nccl_probe,
                         probe=probe)
    return records.load(platform.get(facts.PLATFORM).submit(dict(spec), opts).id)


def script_input(p: Decisions, job_id: str, image: str | None) -> render.ScriptInput:
    results = storage.results_dir(p.base, job_id)
    shell = isinstance(p.spec.command, str)
    command = uploads.substitute(command_of(p.spec, p.overrides, results),
                                 posixpath.join(storage.job_dir(p.base, job_id), "specs"),
                                 [u.name for u in p.spec_files], shell=shell)
    if p.prefetch:
        command = prefetch.substitute(command, storage.job_dir(p.base, job_id), shell=shell)
    return render.ScriptInput(
        job_id=job_id, job_dir=storage.job_dir(p.base, job_id), results_parent=storage.results_parent(results, job_id),
        command=command,
        resources=p.resources, runtime=p.runtime, image=image,
        container_mounts=p.mounts,
        env=p.env, nccl_env=p.nccl_env, has_credentials=bool(p.secrets), secret_names=tuple(p.secrets),
        dataset_root=p.dataset_root, master_port=p.master_port,
        self_retries=facts.max_retries() if p.resources.requeue and given(p.spec.infra_retries, True) else 0,
        poller_retries=bool(given(p.spec.infra_retries, True)),
        chain=p.chain, action=str(p.spec.action or ""),
        network=str(p.spec.network_arch or ""))


def preview(spec: SlurmSpec | Mapping[str, Any], job_id: str, env: Mapping[str, str] | None = None) -> str:
    """The sbatch script a submit would write (no cluster contact, no secrets needed), refused as the submit
    would refuse it when it holds a credential: a preview never prints one."""
    p = plan(spec, env, need_secrets=False)
    image = p.sqsh or p.pyxis_image
    text = render.render(script_input(p, job_id, image))
    render.lint_secrets(text, f"job_{job_id}.sbatch")
    pre = prefetch_job(p, job_id, os.environ if env is None else env)
    if pre:  # the job it waits for is part of what submit applies
        extra = prefetch.render(pre)
        render.lint_secrets(extra, f"prefetch_{job_id}.sbatch")
        text += f"\n# ---- and the CPU-only prefetch job it waits for (afterok): sbatch/prefetch_{job_id}.sbatch ----\n" + extra
    return text


def prefetch_job(p: Decisions, job_id: str, env: Mapping[str, str]) -> prefetch.PrefetchJob | None:
    """The CPU-only prefetch job of a submit with ``prefetch`` (None without)."""
    if not p.prefetch:
        return None
    return prefetch.job(job_id, storage.job_dir(p.base, job_id), p.prefetch, p.spec, env,
                        gpu_partition=p.resources.partition, account=p.resources.account,
                        has_credentials=bool(p.prefetch_secrets))


def conversion_job(p: Decisions, job_id: str, *, force: bool, env: Mapping[str, str]) -> images.Conversion:
    """The conversion job of a submit whose ``.sqsh`` is missing (or forced)."""
    jdir = storage.job_dir(p.base, job_id)
    assert p.pyxis_image and p.sqsh, "a conversion is planned only for a pyxis image with a .sqsh cache"
    return images.conversion(f"{job_id}-sqsh", p.pyxis_image, p.sqsh,
                             posixpath.join(jdir, storage.LOG_DIR, "convert-%j.out"), p.spec, env,
                             gpu_partition=p.resources.partition, account=p.resources.account, force=force)


def _stage_and_sbatch(conn: Connection, p: Decisions, rec: Record, image: str | None, batch: Batch, *,
                      convert: bool = False, force: bool = False, env: Mapping[str, str] | None = None) -> Launch:
    job_id = rec.id
    results = storage.results_dir(p.base, job_id)
    jdir = storage.job_dir(p.base, job_id)
    inp = script_input(p, job_id, image)
    script = render.render(inp)
    script_rel = f"sbatch/job_{job_id}.sbatch"
    render.lint(script, f"job_{job_id}.sbatch")
    meta = {"job_id": job_id, "network_arch": rec.network_arch, "action": rec.action,
            "partition": p.resources.partition, "nodes": p.resources.nodes,
            "gpus_per_node": p.resources.gpus_per_node, "runtime": p.runtime, "image": image,
            "results_dir": results, "secrets": sorted(p.secrets)}
    files = _staged_files(p, job_id, jdir, results, script, meta)
    conv = conversion_job(p, job_id, force=force, env=os.environ if env is None else env) if convert else None
    if conv:
        conv_script = images.render_conversion(conv)
        files[f"sbatch/convert_{job_id}.sbatch"] = conv_script
        render.lint(conv_script, f"convert_{job_id}.sbatch")
    pre = prefetch_job(p, job_id, os.environ if env is None else env)
    if pre:
        pre_script = prefetch.render(pre)
        files[f"sbatch/prefetch_{job_id}.sbatch"] = pre_script
        render.lint(pre_script, f"prefetch_{job_id}.sbatch")
        if p.prefetch_secrets:
            files[prefetch.CREDS_FILE] = storage.credentials_text(p.prefetch_secrets)
    conn.script(remote.STAGE, [jdir, results] + uploads.checksums(p.spec_files), stdin=storage.bundle(files),
                what="stage job dir")
    # job_dir is runtime metadata: written with slurm_job_id once sbatch answered (never before).
    backend = {"staged_dir": jdir, "results_dir": results, "script": posixpath.join(jdir, script_rel),
               "login_host": conn.connect().entry, "job_name": job_id,
               "staged_secrets": bool(p.secrets), "self_retry": inp.self_retries > 0,
               **({"walltime_chain": True, "max_attempts": inp.chain.max_attempts} if inp.chain else {}),
               "infra_retries": bool(given(p.spec.infra_retries, True))}
    if pre:
        backend.update(prefetch_script=posixpath.join(jdir, f"sbatch/prefetch_{job_id}.sbatch"),
                       staged_prefetch_secrets=bool(p.prefetch_secrets))
    if p.spec_files:
        # name=sha256 of each uploaded spec file (a record's backend holds scalars), checked on the cluster at staging
        backend["spec_files"] = ",".join(f"{u.name}={u.sha256}" for u in p.spec_files)
    batch.checkpoint(job_id, "staged; submitting", backend)  # a resume finds the staged folder by it
    if conv:
        res = conn.script(remote.CONVERT, [posixpath.join(jdir, f"sbatch/convert_{job_id}.sbatch")], check=False,
                          what="sbatch (image conversion)")
        cid = res.stdout.strip().splitlines()[-1] if res.ok and res.stdout.strip() else ""
        if not cid.isdigit():
            raise TaoError("image conversion job: " + sbatch_error(res.stderr or res.stdout))
        batch.checkpoint(job_id, f"image conversion job {cid} submitted (held)", {
            "convert_job_id": cid, "convert_log": conv.log.replace("%j", cid)})
        try:
            return sbatch(conn, job_id)  # releases the conversion once the training job exists
        except SubmitUncertain:
            raise  # the training job may exist: resume adopts it and releases the conversion
        except TaoError as exc:  # refused: the held conversion would otherwise run for nobody
            conn.remote(["scancel", cid], check=False, what="scancel (image conversion)")
            raise TaoError(f"{exc} (image conversion job {cid} cancelled)") from None
    return sbatch(conn, job_id)


def find_by_name(conn: Connection, name: str) -> list[str]:
    """SLURM job ids whose name is exactly ``name`` (squeue + sacct)."""
    res = conn.script(remote.FIND, [name], what="find job by name", retry_on_drop=True)
    q, _, a = res.stdout.partition("@@sacct")
    ids = {j for j, v in st.parse_squeue(q).items() if v["name"] == name}
    ids |= {j for j, v in st.parse_sacct(a).items() if v["name"] == name}
    return sorted(ids, key=int)


def resumable(job_id: str) -> Record:
    """The record of a submit to finish: a SLURM record that was staged (checked before any connection)."""
    rec = platform.load_for(job_id, facts.PLATFORM, "resume")
    b = facts.SlurmFacts.of(rec)
    if b.slurm_job_id:
        return rec
    if rec.state in states.TERMINAL:
        raise TaoError(f"job {job_id} is {rec.state} and was never submitted to SLURM: nothing to resume; submit again")
    if not b.folder or not b.script:
        raise TaoError(f"job {job_id} was never staged (no job folder or script in its record): nothing to resume; "
                       "submit it again with tao_slurm.py submit")
    return rec


def relaunch(job_id: str, conn: Connection | None = None) -> Launch | None:
    """``resume``: sbatch the staged script of a record that has none yet (reconciled by name first, never
    twice); None when it was submitted already."""
    rec = resumable(job_id)  # refused before any connection when there is nothing to resume
    if facts.SlurmFacts.of(rec).slurm_job_id:
        return None
    return sbatch(conn or Connection(), job_id)


def sbatch(conn: Connection, job_id: str) -> Launch:
    """sbatch the staged script of a record, looking first for a job of its exact name.

    Safe to call again after a lost answer: a job already carrying the
    record's exact name is adopted instead of submitting a second one.
    """
    rec = resumable(job_id)
    b = facts.SlurmFacts.of(rec)
    name = b.job_name or job_id
    jdir = b.folder
    if not jdir:  # resumable() refuses an unstaged record before it was submitted
        raise TaoError(f"job {job_id} has no job folder in its record: nothing to submit; submit it again")
    log_root = posixpath.join(jdir, storage.LOG_DIR)
    found = find_by_name(conn, name)
    pre_arg = [b.prefetch_script] if b.prefetch_script else []
    pre_id = ""
    if found:
        jid = found[-1]
        res = conn.script(remote.ADOPT, [jid, log_root, name, b.convert_job_id] + (["prefetch"] if pre_arg else []),
                          what="adopt job")
        pre_id = _prefetch_id(res.stdout)
        how = f"adopted existing SLURM job {jid} (an earlier sbatch answer was lost)"
    else:
        try:
            res = conn.script(remote.SBATCH, [b.script, log_root, name, b.convert_job_id] + pre_arg,
                              check=False, what="sbatch")
            jid = res.stdout.strip().splitlines()[-1] if res.ok and res.stdout.strip() else ""
            pre_id = _prefetch_id(res.stdout)
        except TaoError as exc:  # the connection dropped while sbatch ran: the job may exist
            res, jid = None, ""
            dropped = str(exc)
        if not jid.isdigit():
            # Lost or garbled answer: the job may exist anyway. Look before anything else.
            try:
                found = find_by_name(conn, name)
            except TaoError as exc:
                raise SubmitUncertain(f"sbatch answer lost ({exc}): the job may exist; when the cluster answers, "
                                      f"run tao_slurm.py resume {job_id} (it never submits twice)",
                                      note="sbatch answer lost and the cluster is unreachable; "
                                           f"finish with: tao_slurm.py resume {job_id}") from None
            if not found:
                raise TaoError(sbatch_error(res.stderr or res.stdout) if res is not None else
                               f"sbatch did not complete: {dropped}; nothing was submitted")
            jid = found[-1]
            res = conn.script(remote.ADOPT, [jid, log_root, name, b.convert_job_id]
                              + (["prefetch"] if pre_arg else []), what="adopt job")
            pre_id = _prefetch_id(res.stdout)
            how = f"sbatch answer lost; reconciled to SLURM job {jid} by name"
        else:
            how = f"submitted as SLURM job {jid}"
    backend = {"slurm_job_id": jid, "job_dir": jdir, "log_dir": b.log_dir_for(name, jid),
               "login_host": conn.connect().entry}
    if pre_id:  # the CPU-only prefetch job it waits for
        backend.update(prefetch_job_id=pre_id, prefetch_log=posixpath.join(
            jdir, storage.LOG_DIR, f"prefetch-{pre_id}.out"))
        how += f", after prefetch job {pre_id} (CPU only)"
    return Launch(f"slurm:{jid}", backend, how, details={"job_dir": backend["job_dir"], "log_dir": backend["log_dir"]})


def _prefetch_id(stdout: str) -> str:
    """The prefetch job's id that SBATCH / ADOPT printed (``@@prefetch ID``), "" when none."""
    ids = [line.split()[1] for line in (stdout or "").splitlines()
           if line.startswith("@@prefetch ") and len(line.split()) == 2 and line.split()[1].isdigit()]
    return ids[-1] if ids else ""


def sbatch_error(text: str) -> str:
    line = last_line(text)
    if "Requested node configuration is not available" in text:
        return (f"sbatch refused the job: {line}. The request (GPUs/CPUs/memory per node or node count) exceeds what "
                "any node of the partition has: lower num_gpus/cpus_per_task/memory or use another partition")
    if "accounting/QOS policy" in text or "AssocMaxSubmitJobLimit" in text:
        return (f"sbatch refused the job: {line}. Your account may not submit this job (no account named, or a limit "
                "of it): set SLURM_ACCOUNT to an account you may use (sacctmgr show assoc user=$USER)")
    if "Invalid account" in text or "Invalid qos" in text:
        return f"sbatch refused the job: {line}. Set SLURM_ACCOUNT to an account you may use (sacctmgr show assoc user=$USER)"
    if "invalid partition" in text.lower():
        return f"sbatch refused the job: {line}. Check SLURM_PARTITION against sinfo -s"
    if "time limit" in text.lower():
        return f"sbatch refused the job: {line}. Lower time_hours or pick a partition with a longer limit"
    return f"sbatch failed: {line}"
