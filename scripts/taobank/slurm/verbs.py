"""submit / status / watch / logs / cancel for SLURM, over one SSH connection.

submit: checks -> preflight on the login host (``test -e`` every input, one
command) -> open the record -> stage (one command, secrets in a mode-600 file
via stdin) -> render + lint -> ``sbatch --parsable --hold`` + log folder +
release (one command) -> record ``slurm_job_id``/``job_dir``/``login_host``.
A lost sbatch answer is reconciled by the exact job name before any resubmit.
status: one ``squeue`` + one ``sacct`` (one remote command) for all records.
"""
from __future__ import annotations

import os
import posixpath
import secrets as _secrets
import time
from typing import Any, Callable, Iterable, Mapping

from dataclasses import dataclass, field

from .. import pins, platform, records, recvalues, states
from ..contract import Gate, Launch, Plan, SubmitOptions
from ..envfile import check_secret_name
from ..errors import SubmitUncertain, TaoError
from ..run import last_line
from . import cmdpaths, images, mounts, remote, render, resources, spec as specmod, status as st, storage, uploads
from .ssh import Connection

PLATFORM = "slurm"
#: What a record says for a job that runs on the host (container runtime none, no image given).
NO_IMAGE = "host (container runtime none)"


def max_retries() -> int:
    return int(pins.resolve("slurm.defaults.max_job_retries"))


# --------------------------------------------------------------------------- submit
def plan(spec: Mapping[str, Any], env: Mapping[str, str] | None = None, *, need_secrets: bool = True) -> dict[str, Any]:
    """Everything a submit decides without touching the cluster (fails early)."""
    env = os.environ if env is None else env
    spec = specmod.validate(spec)
    res = resources.resolve(spec, env)
    runtime = specmod.runtime(spec, env)
    image = spec.get("image")
    if runtime == "pyxis" and not image:
        raise TaoError("container runtime pyxis needs an image: set image in the spec or --image")
    pyxis = images.pyxis_image(image) if image else None
    required, overrides, root = storage.dataset_paths(spec)
    argv = specmod.command_argv(spec)
    if overrides:
        if not isinstance(spec["command"], list):
            raise TaoError("dataset.spec_keys need an argv-list command (they are appended as key=value)")
        argv += [f"{k}={v}" for k, v in overrides.items()]
    base = storage.base_dir(spec, env)
    spec_files = uploads.collect(spec.get("spec_files") or {}, what="spec_files")
    uploads.substitute(argv, "/", [u.name for u in spec_files])  # a {specs}/X naming no file fails here, early
    mount_list, given = "", []
    if runtime == "pyxis":
        extra = mounts.parse(spec.get("container_mounts") or resources.defaults()["container_mounts"])
        given = mounts.site_roots(env, base, extra) + extra
    named = [n for n in named_paths(spec["command"], argv, spec_files, [m.dst for m in given]) if n not in required]
    if runtime == "pyxis":
        mount_list = mounts.text(mounts.derive([("input", r) for r in required] +
                                               [("path the job names", n) for n in named], given,
                                               write=[("results base", base)]))
    env_vars, nccl_env = storage.check_env(spec.get("env"), spec.get("nccl_env"))
    names = spec.get("secrets") or []
    secret_values = storage.collect_secrets(names, env) if need_secrets else {check_secret_name(n): "" for n in names}
    d = resources.defaults()
    sqsh = None
    if runtime == "pyxis" and pyxis and not images.is_sqsh(pyxis) and spec.get("use_sqsh", d["use_sqsh"]):
        cache = storage.any_cluster_path(spec["sqsh_cache_dir"], "sqsh_cache_dir") if spec.get("sqsh_cache_dir") \
            else posixpath.join(base, pins.resolve("slurm.sqsh_cache_subdir"))
        sqsh = images.sqsh_path(pyxis, cache)
    return {
        "spec": spec, "resources": res, "runtime": runtime, "image": image, "pyxis_image": pyxis, "sqsh": sqsh,
        "required": required, "named": named, "overrides": overrides, "dataset_root": root, "command": argv,
        "base": base,
        "mounts": mount_list, "spec_files": spec_files,
        "env": env_vars, "nccl_env": nccl_env,
        "secrets": secret_values, "master_port": int(spec.get("master_port") or d["master_port"]),
    }


def named_paths(command: str | list[str], argv: list[str], spec_files: Iterable[uploads.Upload],
                mounted: Iterable[str]) -> list[str]:
    """Cluster paths the command and the uploaded spec files name (:mod:`taobank.slurm.cmdpaths`)."""
    found = cmdpaths.command_paths(command, argv)
    for u in spec_files:
        found += cmdpaths.spec_file_paths(u.name, u.data)
    return cmdpaths.cluster_paths(found, mounted)


def preflight_paths(conn: Connection, paths: Iterable[str], sqsh_files: Iterable[str] = ()) -> list[str]:
    """Paths (of ``paths``) missing on the login host, and ``sqsh_files`` missing or not squashfs
    (``PATH (empty or not a squashfs image)``): ONE remote command."""
    paths, sqsh_files = list(paths), list(sqsh_files)
    if not paths and not sqsh_files:
        return []
    args = paths + ([remote.SQSH_MARK] + sqsh_files if sqsh_files else [])
    res = conn.script(remote.MISSING, args, what="test -e", retry_on_drop=True)
    return [line for line in res.stdout.splitlines() if line]


def _staged_files(p: Mapping[str, Any], job_id: str, job_dir: str, results: str, script: str,
                  meta: dict) -> dict[str, str | bytes]:
    files: dict[str, str | bytes] = {f"specs/{u.name}": u.data for u in p["spec_files"]}
    files |= {
        storage.SPEC_FILE: storage.compact_json(p["spec"].get("specs") or {}),
        storage.ENV_FILE: storage.compact_json(p["env"]),
        storage.META_FILE: storage.compact_json(meta),
        f"sbatch/job_{job_id}.sbatch": script,
    }
    if p["secrets"]:
        files[storage.CREDS_FILE] = storage.credentials_text(p["secrets"])
    return files


@dataclass
class SlurmPlan(Plan):
    """A SLURM submit's decisions (:func:`plan`), and what the login host told the checks."""

    decided: dict = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    conn: Connection | None = None
    #: set by :func:`check`: the image the job runs, and whether a conversion job makes its .sqsh first
    run_image: str | None = None
    convert: bool = False
    force: bool = False


def plan_submit(spec: Mapping[str, Any], env: Mapping[str, str], conn: Connection | None = None) -> SlurmPlan:
    """:func:`plan` as the core's submit takes it."""
    p = plan(spec, env)
    s = p["spec"]
    return SlurmPlan(spec=s, image=p["image"] or NO_IMAGE, network_arch=s["network_arch"], action=s["action"],
                     storage_tier="A", results_dir=storage.results_dir(p["base"], records.ID_PLACEHOLDER),
                     nodes=p["resources"].nodes, decided=p, env=env, conn=conn,
                     backend={k: v for k, v in {"backend_type": "slurm", "partition": p["resources"].partition,
                                                "cluster_name": s.get("cluster_name"),
                                                "container_runtime": p["runtime"]}.items()
                              if v is not None})  # an unset cluster_name is absent, not "None"


def check(sp: SlurmPlan, gate: Gate) -> None:
    """ONE remote command on the login host: every input and every path the command names exists, and a
    cached .sqsh is a squashfs image (a bad one is converted again)."""
    p = sp.decided
    conn = sp.conn = sp.conn or Connection(sp.env)
    conn.connect()
    given_sqsh = p["pyxis_image"] if p["runtime"] == "pyxis" and p["pyxis_image"] and images.is_sqsh(p["pyxis_image"]) else None
    sqsh_checks = ([given_sqsh] if given_sqsh else []) + ([p["sqsh"]] if p["sqsh"] else [])
    wanted = list(p["required"]) + list(p["named"])
    missing = preflight_paths(conn, wanted, sqsh_checks)
    cache_bad = [m for m in missing if m.split(" ")[0] == p["sqsh"]]  # missing, empty or no squashfs: converted below
    data_missing = [m for m in missing if m not in cache_bad]
    if data_missing:
        raise TaoError(f"missing on the cluster ({conn.host.entry}): {', '.join(data_missing)}; put the data on the "
                       "shared filesystem or fix the paths (nothing was submitted)")
    sp.force = bool(p["spec"].get("force_reconvert_latest", resources.defaults()["force_reconvert_latest"]))
    sp.convert = bool(p["sqsh"]) and images.needs_conversion(p["pyxis_image"], not cache_bad, sp.force)
    sp.run_image = (p["sqsh"] or p["pyxis_image"]) if p["runtime"] == "pyxis" else p["pyxis_image"]
    if wanted:
        gate.lines.append(f"{len(wanted)} path(s) found on {conn.host.entry}")
    if sp.convert:
        gate.lines.append(f"{p['pyxis_image']} is converted to {p['sqsh']} first")


def launch(sp: SlurmPlan, rec: dict) -> Launch:
    """Stage, render, lint and sbatch; a refusal removes the credentials it staged (no job will source them)."""
    conn = sp.conn
    assert conn is not None
    try:
        return _stage_and_sbatch(conn, sp.decided, rec, sp.run_image, convert=sp.convert, force=sp.force, env=sp.env)
    except SubmitUncertain:
        raise
    except TaoError as exc:
        cb = records.load(rec["id"]).get("backend") or {}
        if cb.get("staged_secrets") and _job_dir(cb) and not cb.get("slurm_job_id"):
            creds = posixpath.join(_job_dir(cb), storage.CREDS_FILE)
            try:
                conn.script(remote.REMOVE, [creds], what="remove credentials")
            except TaoError:
                raise TaoError(f"{exc}; also could not remove {creds} on the cluster: delete it by hand") from None
        raise


def submit(spec: Mapping[str, Any], *, conn: Connection | None = None, env: Mapping[str, str] | None = None,
           description: str | None = None, skip_nccl_probe: bool = False, probe: bool = False) -> dict:
    """The core's submit (:meth:`taobank.platform.Platform.submit`) with SLURM's options; the stored record."""
    opts = SubmitOptions(connection=conn, env=env, description=description, skip_nccl_probe=skip_nccl_probe,
                         probe=probe)
    return records.load(platform.get(PLATFORM).submit(dict(spec), opts).id)


def script_input(p: Mapping[str, Any], job_id: str, image: str | None) -> render.ScriptInput:
    results = storage.results_dir(p["base"], job_id)
    return render.ScriptInput(
        job_id=job_id, job_dir=storage.job_dir(p["base"], job_id), results_parent=storage.results_parent(results, job_id),
        command=uploads.substitute(p["command"], posixpath.join(storage.job_dir(p["base"], job_id), "specs"),
                                   [u.name for u in p["spec_files"]], shell=isinstance(p["spec"]["command"], str)),
        resources=p["resources"], runtime=p["runtime"], image=image,
        container_mounts=p["mounts"],
        env=p["env"], nccl_env=p["nccl_env"], has_credentials=bool(p["secrets"]), secret_names=tuple(p["secrets"]),
        dataset_root=p["dataset_root"], master_port=p["master_port"],
        self_retries=max_retries() if p["resources"].requeue and p["spec"].get("infra_retries", True) else 0,
        poller_retries=bool(p["spec"].get("infra_retries", True)))


def preview(spec: Mapping[str, Any], job_id: str, env: Mapping[str, str] | None = None) -> str:
    """The sbatch script a submit would write (no cluster contact, no secrets needed), refused as the submit
    would refuse it when it holds a credential: a preview never prints one."""
    p = plan(spec, env, need_secrets=False)
    image = p["sqsh"] or p["pyxis_image"]
    text = render.render(script_input(p, job_id, image))
    render.lint_secrets(text, f"job_{job_id}.sbatch")
    return text


def conversion_job(p: Mapping[str, Any], job_id: str, *, force: bool, env: Mapping[str, str]) -> images.Conversion:
    """The conversion job of a submit whose ``.sqsh`` is missing (or forced)."""
    jdir = storage.job_dir(p["base"], job_id)
    return images.conversion(f"{job_id}-sqsh", p["pyxis_image"], p["sqsh"],
                             posixpath.join(jdir, storage.LOG_DIR, "convert-%j.out"), p["spec"], env,
                             gpu_partition=p["resources"].partition, account=p["resources"].account, force=force)


def _stage_and_sbatch(conn: Connection, p: Mapping[str, Any], rec: dict, image: str | None, *, convert: bool = False,
                      force: bool = False, env: Mapping[str, str] | None = None) -> Launch:
    job_id = rec["id"]
    results = storage.results_dir(p["base"], job_id)
    jdir = storage.job_dir(p["base"], job_id)
    inp = script_input(p, job_id, image)
    script = render.render(inp)
    script_rel = f"sbatch/job_{job_id}.sbatch"
    render.lint(script, f"job_{job_id}.sbatch")
    meta = {"job_id": job_id, "network_arch": rec["network_arch"], "action": rec["action"],
            "partition": p["resources"].partition, "nodes": p["resources"].nodes,
            "gpus_per_node": p["resources"].gpus_per_node, "runtime": p["runtime"], "image": image,
            "results_dir": results, "secrets": sorted(p["secrets"])}
    files = _staged_files(p, job_id, jdir, results, script, meta)
    conv = conversion_job(p, job_id, force=force, env=os.environ if env is None else env) if convert else None
    if conv:
        files[f"sbatch/convert_{job_id}.sbatch"] = images.render_conversion(conv)
        render.lint(files[f"sbatch/convert_{job_id}.sbatch"], f"convert_{job_id}.sbatch")
    conn.script(remote.STAGE, [jdir, results] + uploads.checksums(p["spec_files"]), stdin=storage.bundle(files),
                what="stage job dir")
    # job_dir is runtime metadata: written with slurm_job_id once sbatch answered (never before).
    backend = {"staged_dir": jdir, "results_dir": results, "script": posixpath.join(jdir, script_rel),
               "login_host": conn.host.entry, "job_name": job_id,
               "staged_secrets": bool(p["secrets"]), "self_retry": inp.self_retries > 0,
               "infra_retries": bool(p["spec"].get("infra_retries", True))}
    if p["spec_files"]:
        # name=sha256 of each uploaded spec file (a record's backend holds scalars), checked on the cluster at staging
        backend["spec_files"] = ",".join(f"{u.name}={u.sha256}" for u in p["spec_files"])
    records.mark(job_id, "PENDING", message="staged; submitting", backend=backend)
    if conv:
        res = conn.script(remote.CONVERT, [posixpath.join(jdir, f"sbatch/convert_{job_id}.sbatch")], check=False,
                          what="sbatch (image conversion)")
        cid = res.stdout.strip().splitlines()[-1] if res.ok and res.stdout.strip() else ""
        if not cid.isdigit():
            raise TaoError("image conversion job: " + _sbatch_error(res.stderr or res.stdout))
        records.mark(job_id, "PENDING", message=f"image conversion job {cid} submitted (held)", backend={
            "convert_job_id": cid, "convert_log": conv.log.replace("%j", cid)})
        try:
            return sbatch(conn, job_id)  # releases the conversion once the training job exists
        except SubmitUncertain:
            raise  # the training job may exist: resume adopts it and releases the conversion
        except TaoError as exc:  # refused: the held conversion would otherwise run for nobody
            conn.remote(["scancel", cid], check=False, what="scancel (image conversion)")
            raise TaoError(f"{exc} (image conversion job {cid} cancelled)") from None
    return sbatch(conn, job_id)


TAO_STATUS_FILE = "status.json"

#: The kind of every SLURM backend value that reaches a remote command line.
BACKEND_KINDS = {"slurm_job_id": "number", "convert_job_id": "number", "convert_log": "abspath", "job_dir": "abspath", "staged_dir": "abspath", "log_dir": "abspath",
                 "script": "abspath", "results_dir": "abspath", "job_name": "dns1123"}


def backend_of(rec: Mapping[str, Any]) -> dict:
    """The record's backend, every value checked for its kind (see :mod:`taobank.recvalues`)."""
    return recvalues.checked(rec, BACKEND_KINDS)


def _job_dir(backend: Mapping[str, Any]) -> str | None:
    """The job folder: ``job_dir`` once sbatch answered, ``staged_dir`` before."""
    return backend.get("job_dir") or backend.get("staged_dir")


def _log_dir(backend: Mapping[str, Any], name: str, jid: str) -> str:
    return posixpath.join(_job_dir(backend), storage.LOG_DIR, f"{name}-{jid}")


def find_by_name(conn: Connection, name: str) -> list[str]:
    """SLURM job ids whose name is exactly ``name`` (squeue + sacct)."""
    res = conn.script(remote.FIND, [name], what="find job by name", retry_on_drop=True)
    q, _, a = res.stdout.partition("@@sacct")
    ids = {j for j, v in st.parse_squeue(q).items() if v["name"] == name}
    ids |= {j for j, v in st.parse_sacct(a).items() if v["name"] == name}
    return sorted(ids, key=int)


def resumable(job_id: str) -> dict:
    """The record of a submit to finish: a SLURM record that was staged (checked before any connection)."""
    rec = platform.load_for(job_id, PLATFORM, "resume")
    b = backend_of(rec)
    if b.get("slurm_job_id"):
        return rec
    if rec["state"] in states.TERMINAL:
        raise TaoError(f"job {job_id} is {rec['state']} and was never submitted to SLURM: nothing to resume; submit again")
    if not _job_dir(b) or not b.get("script"):
        raise TaoError(f"job {job_id} was never staged (no job folder or script in its record): nothing to resume; "
                       "submit it again with tao_slurm.py submit")
    return rec


def sbatch_record(conn: Connection, job_id: str) -> dict:
    """``resume``: sbatch the staged script of a record that has none yet (reconciled first); the record."""
    rec = resumable(job_id)
    if (rec.get("backend") or {}).get("slurm_job_id"):
        return rec
    done = sbatch(conn, job_id)
    return records.mark(job_id, "PENDING", backend_ref=done.backend_ref, backend=done.backend, message=done.message)


def sbatch(conn: Connection, job_id: str) -> Launch:
    """sbatch the staged script of a record, looking first for a job of its exact name.

    Safe to call again after a lost answer: a job already carrying the
    record's exact name is adopted instead of submitting a second one.
    """
    rec = resumable(job_id)
    b = dict(rec.get("backend") or {})
    name = b.get("job_name") or job_id
    log_root = posixpath.join(_job_dir(b), storage.LOG_DIR)
    found = find_by_name(conn, name)
    if found:
        jid = found[-1]
        conn.script(remote.ADOPT, [jid, log_root, name, b.get("convert_job_id") or ""], what="adopt job")
        how = f"adopted existing SLURM job {jid} (an earlier sbatch answer was lost)"
    else:
        try:
            res = conn.script(remote.SBATCH, [b["script"], log_root, name, b.get("convert_job_id") or ""],
                              check=False, what="sbatch")
            jid = res.stdout.strip().splitlines()[-1] if res.ok and res.stdout.strip() else ""
        except TaoError as exc:  # the connection dropped while sbatch ran: the job may exist
            res, jid = None, ""
            dropped = str(exc)
        if not jid.isdigit():
            # Lost or garbled answer: the job may exist anyway. Look before anything else.
            try:
                found = find_by_name(conn, name)
            except TaoError as exc:
                records.mark(job_id, "PENDING", message="sbatch answer lost and the cluster is unreachable; "
                             f"finish with: tao_slurm.py resume {job_id}")
                raise SubmitUncertain(f"sbatch answer lost ({exc}): the job may exist; when the cluster answers, "
                                      f"run tao_slurm.py resume {job_id} (it never submits twice)") from None
            if not found:
                raise TaoError(_sbatch_error(res.stderr or res.stdout) if res is not None else
                               f"sbatch did not complete: {dropped}; nothing was submitted")
            jid = found[-1]
            conn.script(remote.ADOPT, [jid, log_root, name, b.get("convert_job_id") or ""], what="adopt job")
            how = f"sbatch answer lost; reconciled to SLURM job {jid} by name"
        else:
            how = f"submitted as SLURM job {jid}"
    backend = {"slurm_job_id": jid, "job_dir": _job_dir(b), "log_dir": _log_dir(b, name, jid),
               "login_host": conn.host.entry}
    return Launch(f"slurm:{jid}", backend, how, details={"job_dir": backend["job_dir"], "log_dir": backend["log_dir"]})


def _sbatch_error(text: str) -> str:
    line = last_line(text)
    if "Requested node configuration is not available" in text:
        return (f"sbatch refused the job: {line}. The request (GPUs/CPUs/memory per node or node count) exceeds what "
                "any node of the partition has: lower num_gpus/cpus_per_task/mem or use another partition")
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


# --------------------------------------------------------------------------- status
def _marker_path(b: Mapping[str, Any]) -> str | None:
    """The job's exit marker; None for a record that names no job folder (hand-made or damaged)."""
    d = _job_dir(b)
    return posixpath.join(d, storage.MARKER_FILE) if d else None


def _retries_path(b: Mapping[str, Any]) -> str | None:
    """What a job that resubmits itself appends to (``meta/retries.jsonl``): which SLURM job carries on."""
    d = _job_dir(b)
    return posixpath.join(d, storage.RETRIES_FILE) if d and b.get("self_retry") else None


def _tao_status_path(b: Mapping[str, Any]) -> str | None:
    """``status.json`` that TAO writes in the job's results folder (its own terminal status)."""
    return posixpath.join(b["results_dir"], TAO_STATUS_FILE) if b.get("results_dir") else None


def _sections(text: str, prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    key = None
    for line in text.splitlines(keepends=True):
        if line.startswith(prefix):
            key = line[len(prefix):].strip()
            out[key] = ""
        elif key is not None:
            out[key] += line
    return out


def parse_sweep(text: str) -> tuple[dict, dict, dict[str, str], bool]:
    """Split the SWEEP output: squeue rows, sacct rows, marker texts, accounting ok."""
    sq_part, _, rest = text.partition("@@sacct\n")
    sq_body = sq_part.replace("@@squeue\n", "")
    sq_body, _, _ = sq_body.rpartition("@@rc ")
    ac_body, _, rest2 = rest.partition("@@rc ")
    ac_rc, _, marker_text = rest2.partition("\n")
    accounting = ac_rc.strip() == "0" and "error" not in ac_body.lower()[:200]
    squeue = st.parse_squeue(sq_body)
    sacct = st.parse_sacct(ac_body) if accounting else {}
    return squeue, sacct, _sections(marker_text, "@@marker "), accounting


def sweep(conn: Connection, recs: list[dict]) -> dict[str, st.Verdict]:
    """Verdict for every record: one remote command (one squeue + one sacct)."""
    live = []
    for r in recs:
        if not (r.get("backend") or {}).get("slurm_job_id"):
            continue
        try:
            live.append({**r, "backend": backend_of(r)})
        except TaoError:
            if len(recs) == 1:
                raise
            continue  # a damaged record is left as it is; it never hides the others (status of it alone says why)
    if not live:
        return {}
    ids = ",".join(sorted({j for r in live for j in (r["backend"]["slurm_job_id"], r["backend"].get("convert_job_id"))
                           if j}, key=int))
    files = [m for r in live for m in (_marker_path(r["backend"]), _tao_status_path(r["backend"]),
                                       _retries_path(r["backend"])) if m]
    res = conn.script(remote.SWEEP, [ids] + files, what="squeue/sacct", retry_on_drop=True)
    squeue, sacct, marks, accounting = parse_sweep(res.stdout)

    def verdict(r: dict, log: str | None = None) -> st.Verdict:
        b = r["backend"]
        jid = b["slurm_job_id"]
        moved = st.follow_retries(marks.get(_retries_path(b) or ""), jid)
        if moved:  # the job resubmitted itself after an infrastructure failure: follow it
            return st.Verdict("PENDING", f"infrastructure failure on {moved['failed_on'] or '?'}: the job resubmitted "
                              f"itself as SLURM job {moved['next']} (retry {moved['attempt']} of {max_retries()}, "
                              f"excluding {moved['excluded'] or 'no node'})", extra={"moved": moved})
        marker = st.parse_marker(marks.get(_marker_path(b) or ""))
        if marker and str(marker.get("slurm_job_id")) != str(jid):
            marker = None  # an earlier attempt's marker in a shared job dir
        v = st.classify(squeue.get(jid), sacct.get(jid), marker, accounting=accounting, log_tail=log,
                        tao=st.parse_tao_status(marks.get(_tao_status_path(b) or "")))
        cid = b.get("convert_job_id")
        if cid:
            v = st.with_conversion(v, squeue.get(cid) or sacct.get(cid), cid,
                                   log_tail=log)
        return v

    def log_files(r: dict, v: st.Verdict) -> list[str]:
        b = r["backend"]
        if v.extra.get("convert_log"):
            return [b["convert_log"]] if b.get("convert_log") else []
        return [posixpath.join(b["log_dir"], "main.err"), posixpath.join(b["log_dir"], "main.out")] \
            if b.get("log_dir") else []

    out: dict[str, st.Verdict] = {r["id"]: verdict(r) for r in live}
    need_logs = [r for r in live if out[r["id"]].needs_log and log_files(r, out[r["id"]])]
    if need_logs:  # only failed jobs: one more command for all of them
        wanted = {r["id"]: log_files(r, out[r["id"]]) for r in need_logs}
        files = [f for fs in wanted.values() for f in fs]
        tails = _sections(conn.script(remote.TAIL_FILES, ["65536"] + files, what="log tails").stdout, "@@file ")
        for r in need_logs:
            out[r["id"]] = verdict(r, "".join(tails.get(f, "") for f in wanted[r["id"]]))
    return out


def _chain_attempt(rec: Mapping[str, Any]) -> int:
    return int(rec.get("attempt") or 1)


def status(ids: list[str] | None = None, *, conn: Connection | None = None, retry: bool = True,
           env: Mapping[str, str] | None = None) -> list[dict]:
    """Refresh records (given ids, or every active SLURM record) and mark them.

    Infrastructure failures are resubmitted (new linked record) up to
    MAX_JOB_RETRIES; credentials of chains that really ended are removed.
    """
    recs = platform.select(PLATFORM, ids, "status")
    return refresh(recs, conn=conn, retry=retry, env=env)


def refresh(recs: list[dict], *, conn: Connection | None = None, retry: bool = True,
            env: Mapping[str, str] | None = None) -> list[dict]:
    """Observe ``recs`` (SLURM records) with one sweep and mark them; retries are appended."""
    active = [r for r in recs if r["state"] not in states.TERMINAL]
    if not any((r.get("backend") or {}).get("slurm_job_id") for r in active):
        return recs  # nothing SLURM could tell: no connection needed
    conn = conn or Connection(env)
    verdicts = sweep(conn, active)
    out: dict[str, dict] = {r["id"]: r for r in recs}
    cleanup: list[str] = []
    for r in active:
        v = verdicts.get(r["id"])
        if v is None:
            continue  # never submitted (no slurm_job_id): leave it
        new_state = v.state
        if r["state"] == "UNKNOWN" and new_state == "PENDING":
            new_state = "UNKNOWN"  # the table forbids UNKNOWN -> PENDING; it moves once the job runs or ends
        meta = {"slurm_state": v.slurm_state, "exit_code": v.exit_code}
        moved = v.extra.get("moved")
        if moved:
            jid, name = moved["next"], r["backend"].get("job_name") or r["id"]
            # backend_ref stays the first SLURM job (a record's ref is bound once); slurm_job_id is the live one
            # from UNKNOWN the table allows no PENDING: the job ran (it failed and resubmitted itself)
            hop_state = "UNKNOWN" if r["state"] == "UNKNOWN" else "PENDING"
            out[r["id"]] = records.mark(r["id"], hop_state, source="poller", message=v.message,
                                        backend={"slurm_job_id": jid, "log_dir": _log_dir(backend_of(r), name, jid),
                                                 "self_retries": moved["attempt"], "excluded_nodes": moved["excluded"],
                                                 "slurm_state": "REQUEUED"})
            continue
        message, retry_now, chain_continues = v.message, False, False
        # NODE_FAIL/BOOT_FAIL: the job's own footer never ran, so only this verb can resubmit it
        if new_state == "ERROR" and v.retry and r["backend"].get("self_retry") and v.slurm_state == "DEADLINE":
            message += "; stopped at its deadline (its own retry check never ran): not resubmitted"
        elif new_state == "ERROR" and v.retry and r["backend"].get("self_retry") and v.slurm_state not in st.INFRA_STATES:
            message += "; the job did not resubmit itself (retry limit reached, or sbatch refused on the node: see main.out)"
        elif new_state == "ERROR" and v.retry and retry and r["backend"].get("infra_retries", True):
            if _chain_attempt(r) > max_retries():
                message += f"; retry limit {max_retries()} reached"
            else:
                chain_continues = True  # keep the credentials: the retry sources them
                if _claim_retry(r["id"]):  # one poller resubmits, never two
                    message += f"; resubmitting (attempt {_chain_attempt(r) + 1})"
                    retry_now = True
        out[r["id"]] = records.mark(r["id"], new_state, source="poller", message=message,
                                    err_class=v.err_class if new_state == "ERROR" else None,
                                    backend={k: x for k, x in meta.items() if x is not None})
        if retry_now:
            nxt = resubmit(conn, out[r["id"]])
            out[nxt["id"]] = nxt
            if nxt["state"] != "ERROR":  # the resubmit failed: the chain ends here
                continue
            chain_continues = False
        folder = _job_dir(backend_of(r))
        if new_state in states.TERMINAL and r["backend"].get("staged_secrets") and not chain_continues and folder:
            cleanup.append(posixpath.join(folder, storage.CREDS_FILE))
    if cleanup:
        conn.script(remote.REMOVE, cleanup, what="remove credentials")
    return list(out.values())


def _claim_retry(job_id: str) -> bool:
    """Only one poller may resubmit a failed record: the one that creates this file."""
    try:
        fd = os.open(records.artifact_dir(job_id) / "slurm-retry.claim", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def resubmit(conn: Connection, failed: dict) -> dict:
    """A new record linked by retry_of that sbatches the same staged script."""
    b = failed["backend"]
    rec = records.open_record(PLATFORM, failed["image"], failed["network_arch"], failed["action"],
                              failed.get("storage_tier") or "A", failed["results_dir"], retry_of=failed["id"],
                              description=failed.get("description"),
                              backend={k: b[k] for k in ("backend_type", "partition", "cluster_name", "container_runtime")
                                       if b.get(k) is not None})
    # the same staged script, so the same footer: self_retry decides whether retries.jsonl is read and
    # whether cancel stops every job of the name; infra_retries whether this verb may resubmit again
    backend = {k: b[k] for k in ("results_dir", "script", "staged_secrets", "self_retry", "infra_retries") if k in b}
    backend["staged_dir"] = _job_dir(b)  # the same staged folder; job_dir comes with the new sbatch answer
    backend.update({"job_name": rec["id"], "login_host": conn.host.entry if conn.host else b.get("login_host")})
    records.mark(rec["id"], "PENDING", message=f"infrastructure retry of {failed['id']}", backend=backend)
    try:
        return sbatch_record(conn, rec["id"])
    except TaoError as exc:  # the retry could not be submitted: say so on its record
        return records.mark(rec["id"], "ERROR", message=f"resubmit failed: {exc}", err_class="ERR_INFRA")


# --------------------------------------------------------------------------- logs
def _require_submitted(rec: Mapping[str, Any]) -> dict:
    b = backend_of(rec)
    if not b.get("slurm_job_id") or not b.get("log_dir"):
        if rec["state"] not in states.TERMINAL and _job_dir(b):
            raise TaoError(f"record {rec['id']} was staged but its sbatch answer was not recorded: "
                           f"run tao_slurm.py resume {rec['id']} (it never submits twice)")
        raise TaoError(f"record {rec['id']} has no SLURM job yet (state {rec['state']}): submit it first")
    return b


def logs(job_id: str, *, lines: int = 200, conn: Connection | None = None) -> dict[str, str]:
    """Last ``lines`` of main.out and main.err (tracebacks are on stderr)."""
    rec = platform.load_for(job_id, PLATFORM, "logs")
    b = _require_submitted(rec)
    conn = conn or Connection()
    out_f, err_f = posixpath.join(b["log_dir"], "main.out"), posixpath.join(b["log_dir"], "main.err")
    res = conn.script(remote.LOGS, [str(int(lines)), out_f, err_f], what="tail logs", retry_on_drop=True)
    body = res.stdout.split("@@out\n", 1)[-1]
    out_text, _, err_text = body.partition("@@err\n")
    out = {"main.out": out_text, "main.err": err_text, "log_dir": b["log_dir"]}
    if b.get("convert_log"):
        tails = _sections(conn.script(remote.TAIL_FILES, [str(int(lines) * 200), b["convert_log"]],
                                      what="conversion log").stdout, "@@file ")
        text = tails.get(b["convert_log"], "")
        out.update(convert_log=b["convert_log"], convert="".join(text.splitlines(keepends=True)[-int(lines):]))
    return out


def follow(job_id: str, *, on_chunk: Callable[[str, str], None], conn: Connection | None = None,
           interval: float = 3.0, sleep: Callable[[float], None] = time.sleep, tail: int | None = None) -> dict:
    """Stream main.out/main.err until the job is terminal: from the start, or from the last ``tail`` lines."""
    rec = platform.load_for(job_id, PLATFORM, "logs")
    b = _require_submitted(rec)
    conn = conn or Connection()
    out_f, err_f = posixpath.join(b["log_dir"], "main.out"), posixpath.join(b["log_dir"], "main.err")
    offs = [0, 0]
    first = [f"t{int(tail)}"] * 2 if tail else None
    polls = 0
    while True:
        done = rec["state"] in states.TERMINAL
        boundary = "@@tao-" + _secrets.token_hex(8)
        at = first or [str(o) for o in offs]
        first = None
        res = conn.script(remote.FOLLOW, [boundary, out_f, at[0], err_f, at[1]], what="follow logs",
                          retry_on_drop=True)
        head, _, rest = res.stdout.partition("\n")
        sizes = [int(x) for x in head.split()] if head.strip() else offs
        parts = rest.split(boundary + "\n")
        new_out = parts[1] if len(parts) > 1 else ""
        new_err = parts[2] if len(parts) > 2 else ""
        if new_out.endswith("\n" + boundary + "\n"):
            new_out = new_out[: -len(boundary) - 1]
        if new_out:
            on_chunk("main.out", new_out)
        if new_err:
            on_chunk("main.err", new_err)
        offs = [max(offs[0], sizes[0]), max(offs[1], sizes[1])]
        if done:
            return rec
        polls += 1
        if polls % 3 == 0 or polls == 1:
            rec = status([job_id], conn=conn)[0]
            if rec["state"] in states.TERMINAL:
                continue  # one last read
        sleep(interval)


# --------------------------------------------------------------------------- cancel
def cancel(job_id: str, *, conn: Connection | None = None) -> dict:
    """scancel; a job that is gone or already ended counts as cancelled."""
    rec = platform.load_for(job_id, PLATFORM, "cancel")
    if rec["state"] in states.TERMINAL:
        return rec
    b = backend_of(rec)
    conn = conn or Connection()
    jid = b.get("slurm_job_id")
    if not jid and _job_dir(b):  # submitted but the answer was lost?
        found = find_by_name(conn, b.get("job_name") or job_id)
        jid = found[-1] if found else None
    msg = "cancelled before it reached SLURM"
    if b.get("convert_job_id"):  # the image conversion it waits for: a finished one answers "already completed"
        conn.remote(["scancel", b["convert_job_id"]], check=False, what="scancel (image conversion)")
    if jid:
        res = conn.remote(["scancel", jid], check=False, what="scancel")
        if res.ok:
            msg = f"scancel {jid}"
        elif "Invalid job id" in res.stderr or "already completing or completed" in res.stderr:
            msg = f"SLURM job {jid} was already gone: counted as cancelled"
        else:
            raise TaoError(f"scancel {jid} failed: {last_line(res.stderr)}")
    if jid and b.get("self_retry"):
        # a job that resubmitted itself runs under another id with the same name: stop every one of them
        conn.script(remote.CANCEL_NAME, [b.get("job_name") or job_id], check=False, what="scancel --name")
    # the job is stopped: the record says so first (the backend state must not stay RUNNING either)
    rec = records.mark(job_id, "CANCELED", message=msg, backend={"slurm_state": "CANCELLED"} if jid else None)
    if b.get("staged_secrets") and _job_dir(b):
        creds = posixpath.join(_job_dir(b), storage.CREDS_FILE)
        try:
            conn.script(remote.REMOVE, [creds], what="remove credentials")
        except TaoError as exc:
            rec = {**rec, "message": f"{msg}; the staged credentials {creds} could not be removed ({exc}): "
                                     "delete that file on the cluster by hand"}
    return rec


# --------------------------------------------------------------------------- stage (small inputs)
def stage_inputs(paths: list[str], dest: str, *, force: bool = False, conn: Connection | None = None) -> dict:
    """Copy small local files into a cluster folder (``lustre:///abs/dir``) over one SSH command."""
    if "://" not in str(dest):
        raise TaoError("--dest must be a cluster URI like lustre:///lustre/fsw/me/inputs")
    raw = str(dest).split("://", 1)[1]
    if ".." in raw.split("/"):
        raise TaoError("--dest must not contain '..': give the folder's absolute path")
    folder = storage.cluster_path(dest, "--dest")
    if folder == "/":
        raise TaoError("--dest / is not a folder to stage into: give your folder on the shared filesystem")
    if not paths:
        raise TaoError("stage needs at least one local file")
    files = uploads.collect([(os.path.basename(os.path.normpath(p)), p) for p in paths], what="stage")
    conn = conn or Connection()
    res = conn.script(remote.STAGE_IN, [folder, "force" if force else "keep"] + uploads.checksums(files),
                      stdin=storage.bundle({u.name: u.data for u in files}), check=False, what="stage inputs")
    if not res.ok:
        raise TaoError(f"staging into {folder} failed on {conn.host.entry}: {last_line(res.stderr or res.stdout)}")
    return {"dest": folder, "login_host": conn.host.entry,
            "files": [{"name": u.name, "path": posixpath.join(folder, u.name), "bytes": len(u.data), "sha256": u.sha256}
                      for u in files]}
