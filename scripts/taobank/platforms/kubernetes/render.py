"""Job spec -> Kubernetes manifests (a pure function: no I/O but the template).

The templates in ``templates/k8s/`` hold the fixed skeleton; this module
builds every variable part (containers, env, volumes) as Python data and
passes it through :func:`taobank.render.render_yaml_documents`, which emits
each value as JSON. Whatever a string holds, the parsed manifest carries
exactly that string; optional fields are omitted, never rendered empty. Where the job's results go is
decided here too (:func:`results_plan`: the one rule, which status, logs and results read back), and a
single-pod train job on a volume gets the resume prologue (:func:`resume_prologue`).
"""
from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ... import checkpoints, multinode as nodeguard, names, pins
from ...contract import RESULTS_VAR
from ...errors import TaoError
from .spec import KubernetesSpec
from ...jobspec import given
from ...paths import is_under
from ...records import ID_PLACEHOLDER, NO_RESULTS_DIR
from ...render import render_yaml_documents
from . import JOB_LABEL, MANAGED_BY

SINGLE_TEMPLATE = "k8s/single-pod-job.yaml.tmpl"
INDEXED_TEMPLATE = "k8s/indexed-job.yaml.tmpl"

#: The variables the TAO container reads to know where to write (the parent + the folder name).
RESULTS_ENV = "TAO_API_RESULTS_DIR"
JOB_ENV = "TAO_API_JOB_ID"
#: What the record keeps for a job that was told to keep no results (--no-results).
NO_RESULTS = NO_RESULTS_DIR
#: Under the tier C staging emptyDir, where the results are written before the upload.
STAGED_RESULTS = "results"
#: The rendezvous variables a multi-node job sets; a user env may not override them.
RENDEZVOUS_ENV = ("WORLD_SIZE", "NUM_GPU_PER_NODE", "NNODES", "NPROC_PER_NODE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")
#: Names the bank itself sets in every pod.
RESERVED_ENV = ("TAO_JOB_ID", "JOB_COMPLETION_INDEX", "TAO_STAGING_DIR", RESULTS_ENV, JOB_ENV,
                RESULTS_VAR)
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
CONFIG_SHA_ANNOTATION = "tao-skill-bank/config-sha256"
#: Longest Job name: the Job controller names pods <job>-<index>-<5 chars> and
#: sets hostname <job>-<index>; both must stay within 63 characters.
MAX_NAME_LEN = 52

# Tier C scripts. Values never enter the script text: URIs and paths arrive as
# positional parameters ("$1" "$2"), so no quoting of user data is needed.
_ENDPOINT = 'if [ -n "${S3_ENDPOINT_URL:-}" ]; then export AWS_ENDPOINT_URL="$S3_ENDPOINT_URL"; fi\n'
FETCH_SCRIPT = (
    "set -eu\n" + _ENDPOINT
    + 'while [ "$#" -ge 2 ]; do\n'
    + '  mkdir -p -- "$(dirname -- "$2")"\n'
    + '  case "$1" in */) aws s3 cp --recursive "$1" "$2" ;; *) aws s3 cp "$1" "$2" ;; esac\n'
    + "  shift 2\n"
    + "done\n"
)
# Tier A with a results folder: the command's output (stdout and stderr) is also appended to
# <results folder>/logs/<pod hostname>.log on the volume, so it survives the pod and its TTL with
# nobody polling. The copy is best effort, the exit code is not: the wrapper waits for the command
# itself (its code never passes through a file), a log that cannot be opened leaves the command
# writing to the pod log alone, a TERM (eviction, cancel) goes to the command while tee (TERM
# ignored) keeps draining, and a background child left holding the pipe cannot keep the pod alive:
# tee gets a short grace after the command ends, then the wrapper exits with the command's code.
# The fifo carries the shell's pid as well as the host: two wrappers sharing /dev/shm never take each other's.
# Beside the copy it leaves <pod hostname>.exit ("<code> <UTC end time>", written whole by a rename):
# the verdict survives the Job's TTL, and status reads it once the Job is gone (taobank.platforms.kubernetes.verdicts).
LOG_COPY_DIR = "logs"
#: Before the wrapper exits, the last lines of TAO's status files go to the pod's log, each as
#: "@@tao-final <path in the results folder> <line>": the log saved at the job's end then carries its final
#: epoch and KPIs, read with no pod left to exec in (:func:`taobank.platforms.kubernetes.logs.final_status`). A run that
#: writes a line per step can push its last epoch line out of those: when none of them carries an "epoch" key,
#: the file's last line that does is printed first (one grep of the file, only then), so the lines stay in
#: the file's order.
FINAL_STATUS_PREFIX = "@@tao-final "
FINAL_STATUS_LINES = 12
FINAL_STATUS_SH = (
    'r="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"\n'
    'for s in "$r/status.json" "$r"/*/status.json; do\n'
    '  [ -f "$s" ] || continue; p=${s#"$r"/}\n'
    f'  {{ tail -n {FINAL_STATUS_LINES} -- "$s" | grep -q \'"epoch"\' || grep \'"epoch"\' -- "$s" | tail -n 1\n'
    f'    tail -n {FINAL_STATUS_LINES} -- "$s"; }} 2>/dev/null | while IFS= read -r l || [ -n "$l" ]; do printf \'{FINAL_STATUS_PREFIX}%s %s\\n\' "$p" "$l"; done\n'
    'done\n'
)
EXIT_MARKER_SUFFIX = ".exit"
# Tier C (results staged, then uploaded): the main container runs the user's argv as "$@", prints the status
# files' last lines as the pod ends (as LOG_WRAPPER does: the final epoch and KPIs once the pod is gone),
# records the exit code for the uploader and exits with that same code (the user's status is preserved).
MAIN_WRAPPER = (
    'echo "$$" > "$TAO_STAGING_DIR/.tao-main-pid"\n'
    'if [ -n "${TAO_API_RESULTS_DIR:-}" ]; then mkdir -p -- "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"; fi\n'
    '"$@"\n'
    "rc=$?\n"
    + FINAL_STATUS_SH +
    'echo "$rc" > "$TAO_STAGING_DIR/.tao-exit"\n'
    'exit "$rc"\n'
)
LOG_WRAPPER = (
    'd="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID/logs"; h="${HOSTNAME:-pod}"; f="/dev/shm/.tao-log-$h.$$"\n'
    '{ mkdir -p -- "$d" && true >> "$d/$h.log" && rm -f -- "$f" && mkfifo -- "$f"; } 2>/dev/null || exec "$@"\n'
    '(trap "" TERM INT; exec tee -a -- "$d/$h.log" < "$f") &\n'
    'tpid=$!\n'
    '"$@" > "$f" 2>&1 &\n'
    'cpid=$!\n'
    "t=0\n"
    "trap 't=1; kill -TERM \"$cpid\" 2>/dev/null' TERM INT\n"
    'wait "$cpid"; rc=$?\n'
    'while [ "$t" = 1 ]; do t=0; wait "$cpid"; r=$?; if [ "$r" != 127 ]; then rc=$r; fi; done\n'
    "i=0\n"
    'while kill -0 "$tpid" 2>/dev/null && [ "$i" -lt 20 ]; do sleep 0.1 2>/dev/null || sleep 1; i=$((i + 1)); done\n'
    'kill -KILL "$tpid" 2>/dev/null; rm -f -- "$f"\n'
    '{ printf "%s %s\\n" "$rc" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$d/$h.exit.tmp" && mv -f -- "$d/$h.exit.tmp" "$d/$h.exit"; } 2>/dev/null\n'
    + FINAL_STATUS_SH +
    'exit "$rc"\n'
)
# The uploader waits for the exit marker, or for the main process to vanish
# without one (killed, e.g. OOM: the pod shares one process namespace), then
# uploads whatever exists. Its own exit code reports the upload only.
UPLOAD_SCRIPT = (
    "set -u\n" + _ENDPOINT
    + 'd="$TAO_STAGING_DIR"\n'
    + 'while [ ! -f "$d/.tao-exit" ]; do\n'
    + '  if [ -f "$d/.tao-main-pid" ] && ! kill -0 "$(cat -- "$d/.tao-main-pid")" 2>/dev/null; then break; fi\n'
    + "  sleep 5\n"
    + "done\n"
    + "status=0\n"
    + 'while [ "$#" -ge 2 ]; do\n'
    + '  if [ -d "$1" ]; then aws s3 cp --recursive "$1" "$2" || status=1\n'
    + '  elif [ -e "$1" ]; then aws s3 cp "$1" "$2" || status=1\n'
    + '  else echo "tao-upload: $1 does not exist" >&2; status=1; fi\n'
    + "  shift 2\n"
    + "done\n"
    + 'exit "$status"\n'
)


#: Where a sweep's trial table (one ConfigMap, its keys files) is mounted in every pod of the sweep's Job.
SWEEP_DIR = "/tao-sweep"
#: Exit code of a trial canceled before its pod started (its ``<index>.cancel`` key is set): a FailIndex exit.
CANCELED_EXIT = 143
# One index of a sweep's Indexed Job: its trial's record id, results folder name and argv come from the
# table (keys <index>.id, <index>.folder, <index>.argv: shell-quoted words, set as "$@" by eval of `set --`,
# so the words arrive exactly as submitted); a trial canceled before it started exits at once (FailIndex).
SWEEP_PROLOGUE = (
    f'd={SWEEP_DIR}; i="${{JOB_COMPLETION_INDEX:?}}"\n'
    'if [ -e "$d/$i.cancel" ]; then echo "tao: sweep trial $i was canceled" >&2; exit '
    f'{CANCELED_EXIT}; fi\n'
    'TAO_JOB_ID=$(cat -- "$d/$i.id") && a=$(cat -- "$d/$i.argv") || exit 2\n'
    'export TAO_JOB_ID\n'
    'if [ -e "$d/$i.folder" ]; then TAO_API_JOB_ID=$(cat -- "$d/$i.folder"); export TAO_API_JOB_ID; '
    f'{RESULTS_VAR}="$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID"; export {RESULTS_VAR}; fi\n'
    'eval "set -- $a"\n'
    'echo "tao: sweep trial $i ($TAO_JOB_ID)"\n'
)


def kube_expand(text: str, env: dict[str, str]) -> str:
    """``text`` as the kubelet expands a container's command and args: ``$(NAME)`` becomes NAME's value when
    ``env`` has it (else stays as written), ``$$`` becomes ``$``, any other ``$`` stays."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            if text[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            if text[i + 1] == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2:end]
                    out.append(env[name] if name in env else text[i:end + 1])
                    i = end + 1
                    continue
                out.append("$(")
                i += 2
                continue
            out.append(text[i:i + 2])
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def argv_of(spec: KubernetesSpec) -> list[str]:
    """The user's argv as the pod runs it (shell text through /bin/sh -c), before the bank's wrappers."""
    return ["/bin/sh", "-c", str(spec.command)] if spec.command is not None else list(spec.args or ())  # shell text


def kube_literal(script: str) -> str:
    """``script`` as it must stand in a container's command so the shell receives it unchanged.

    The kubelet expands ``$(VAR)`` in command/args and turns ``$$`` into ``$``; doubling every
    ``$`` of the bank's own scripts keeps ``$$``, ``$(...)`` and ``$((...))`` as written. The
    user's argv is left alone: its ``$(VAR)`` expansion is a documented feature."""
    return script.replace("$", "$$")


def job_name_for(job_id: str) -> str:
    """The Kubernetes object name for a record id (ids are already RFC 1035 labels)."""
    name = job_id if _is_label(job_id) else names.sanitize_label(job_id, MAX_NAME_LEN)
    if len(name) > MAX_NAME_LEN:
        name = names.sanitize_label(name, MAX_NAME_LEN)
    return name


def _is_label(s: object) -> bool:
    """An RFC 1035 label of at most 63 characters: :data:`taobank.names.DNS1035_LABEL`, the one pattern."""
    return isinstance(s, str) and bool(names.DNS1035_LABEL.match(s))


def cred_secret_name(job_id: str) -> str:
    return f"tao-creds-{job_name_for(job_id)}"[:63].rstrip("-")


def pull_secret_name(job_id: str) -> str:
    return f"tao-pull-{job_name_for(job_id)}"[:63].rstrip("-")


def config_map_name(job_id: str) -> str:
    return f"tao-config-{job_name_for(job_id)}"[:63].rstrip("-")


def labels_for(job_id: str) -> dict[str, str]:
    return {JOB_LABEL: job_id, **MANAGED_BY}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def failure_policy(multinode: bool = False) -> dict:
    """podFailurePolicy: a disruption (drain, preemption, eviction) counts towards backoffLimit and the pod
    is replaced; a non-zero exit of any container fails the Job at once (a bug does not run again).
    The disruption rule comes first: an evicted container's own exit code (137, 143) is not its fault.
    Multi-node: a replaced rank cannot rejoin ranks stuck in a collective (they would hang until the NCCL
    timeout and then fail anyway), so a disruption fails the Job at once and says so."""
    return {"rules": [
        {"action": "FailJob" if multinode else "Count",
         "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}},
    ]}


def staging_dir(spec: KubernetesSpec | Mapping[str, Any]) -> str | None:
    """The tier C shared emptyDir (None for tier A); a saved spec file's mapping is read as its typed spec."""
    typed = KubernetesSpec.of(spec)
    return _staging(typed, given(typed.storage_tier, "A"))


def _staging(spec: KubernetesSpec, tier: str) -> str | None:
    return (spec.staging_dir or "/tao-staging") if tier == "C" else None


#: Longest label/annotation/nodeSelector key Kubernetes accepts: a DNS subdomain prefix, "/", a name.
MAX_QUALIFIED_KEY_LEN = 253 + 1 + 63
#: The spec's maps whose keys become label/annotation keys, with the flag that fills each (if any).
_QUALIFIED_KEY_FIELDS = {"pod_labels": None, "pod_annotations": "--pod-annotation", "node_selector": "--node-selector"}


def _check_key_lengths(spec: KubernetesSpec) -> None:
    """Refuse a key no Kubernetes server accepts, naming the field (the API would refuse it later, less clearly)."""
    for field, flag in _QUALIFIED_KEY_FIELDS.items():
        for key in getattr(spec, field) or {}:
            if len(str(key)) > MAX_QUALIFIED_KEY_LEN:
                where = f"{field} ({flag})" if flag else field
                raise TaoError(f"a {where} key is {len(str(key))} characters long: Kubernetes allows at most "
                               f"{MAX_QUALIFIED_KEY_LEN} (a 253-character prefix, '/', a 63-character name): shorten it")


def _check_env(spec: KubernetesSpec, multinode: bool) -> None:
    if not spec.env and not spec.nccl_env:  # no name to check
        return
    from ...envfile import check_job_env

    check_job_env(spec.env, spec.nccl_env,
                  reserved=RESERVED_ENV + (RENDEZVOUS_ENV if multinode else ()))


def _env_list(spec: KubernetesSpec, job_id: str, name: str, service: str, multinode: bool, staging: str | None,
              results: Results, port: int) -> list[dict]:
    env: list[dict] = [{"name": "TAO_JOB_ID", "value": job_id}, *results.env()]
    if staging:
        env.append({"name": "TAO_STAGING_DIR", "value": staging})
    if multinode:
        nodes = int(given(spec.nodes, 1))
        gpus = int(given(spec.gpus, 1))
        index_ref = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}
        env += [
            {"name": "WORLD_SIZE", "value": str(nodes)},  # TAO reads WORLD_SIZE as the node count
            {"name": "NUM_GPU_PER_NODE", "value": str(gpus)},
            {"name": "NNODES", "value": str(nodes)},
            {"name": "NPROC_PER_NODE", "value": str(gpus)},
            {"name": "NODE_RANK", "valueFrom": index_ref},
            {"name": "MASTER_ADDR", "value": f"{name}-0.{service}"},
            {"name": "MASTER_PORT", "value": str(port)},
        ]
    for key, value in (spec.nccl_env or {}).items():
        env.append({"name": key, "value": str(value)})
    for key, value in (spec.env or {}).items():
        env.append({"name": key, "value": str(value)})
    return env


def volumes_and_mounts(spec: KubernetesSpec | Mapping[str, Any], shm_size: str) -> tuple[list[dict], list[dict]]:
    """The pod's volumes and the main container's mounts: /dev/shm, then one volume per distinct source."""
    return _volumes_and_mounts(KubernetesSpec.of(spec), shm_size)


def _volumes_and_mounts(spec: KubernetesSpec, shm_size: str) -> tuple[list[dict], list[dict]]:
    volumes: list[dict] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}}]
    mounts: list[dict] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    seen_paths = {"/dev/shm"}
    by_source: dict[tuple, str] = {}
    for m in spec.mounts or []:
        path = m["mount_path"]
        if path in seen_paths:
            raise TaoError(f"mount path {path} is used twice: give each mount its own path")
        seen_paths.add(path)
        if "pvc" in m:
            key: tuple = ("pvc", m["pvc"])
            source = {"persistentVolumeClaim": {"claimName": m["pvc"]}}
        else:
            key = ("nfs", m["nfs"]["server"], m["nfs"]["path"])
            source = {"nfs": {"server": m["nfs"]["server"], "path": m["nfs"]["path"]}}
        vol = by_source.get(key)
        if vol is None:  # one volume per distinct source; aliases share it
            vol = f"data-{len(by_source)}"
            by_source[key] = vol
            volumes.append({"name": vol, **source})
        vm: dict[str, Any] = {"name": vol, "mountPath": path}
        if m.get("sub_path"):
            vm["subPath"] = m["sub_path"]
        if m.get("read_only"):
            vm["readOnly"] = True
        mounts.append(vm)
    return volumes, mounts


def _resources(spec: KubernetesSpec, gpus: int) -> dict:
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    if gpus > 0:
        limits["nvidia.com/gpu"] = str(gpus)
    if spec.cpus:
        requests["cpu"] = spec.cpus
    if spec.memory:
        requests["memory"] = spec.memory
    if spec.memory_limit:
        limits["memory"] = spec.memory_limit
    out: dict[str, dict] = {}
    if limits:
        out["limits"] = limits
    if requests:
        out["requests"] = requests
    return out




def build_context(spec: KubernetesSpec | Mapping[str, Any], **kwargs: Any) -> dict:
    """Everything the templates need, as data (:func:`_context`)."""
    return _context(spec, **kwargs)[0]


def _context(
    spec: KubernetesSpec | Mapping[str, Any],
    *,
    job_id: str,
    namespace: str,
    name: str | None = None,
    cred_secret: str | None = None,
    pull_secrets: list[str] | tuple[str, ...] = (),
    config: dict | None = None,
    retry_disruptions: bool = True,
    sweep_table: str | None = None,
) -> tuple[dict, Results]:
    """Everything the templates need, as data, and the job's results plan (``{id}`` for the job id: computed
    once here, and handed to submit with the manifests by :func:`render_job`).

    ``retry_disruptions`` (a server with podFailurePolicy, see
    :func:`failure_policy`) lets a disrupted pod be replaced; without it a
    Job has ``backoffLimit: 0``.

    ``cred_secret``/``pull_secrets`` are Secret *names*; they are referenced
    only when given (a run without credentials has no envFrom and no
    imagePullSecrets). ``config`` = {"text", "mount_path", "key"?} for a
    config-mode request: the file goes into a ConfigMap mounted read-only.
    ``sweep_table``: the name of a sweep's trial table (ConfigMap, :mod:`taobank.platforms.kubernetes.sweep`): the pod
    is one index of an Indexed Job and reads its trial's id, folder and argv there (:data:`SWEEP_PROLOGUE`).
    A mapping ``spec`` (a spec file, as ``render_k8s_job.py`` reads it) is read as its typed spec first.
    """
    name = name or job_name_for(job_id)
    if not _is_label(name) or len(name) > MAX_NAME_LEN:
        raise TaoError(f"job name {name!r} is not an RFC 1035 label of at most {MAX_NAME_LEN} characters")
    if not names.is_dns1123_label(namespace):
        raise TaoError(f"namespace {namespace!r} is not a valid Kubernetes namespace name")
    spec = KubernetesSpec.of(spec)
    # the spec's defaults read once, here (every part below gets the values)
    nodes_given, gpus_given, tier, log_copy = (given(spec.nodes, 1), given(spec.gpus, 1), given(spec.storage_tier, "A"),
                                               given(spec.log_copy, True))
    nodes = int(nodes_given)
    multinode = nodes > 1
    _check_env(spec, multinode)
    _check_key_lengths(spec)
    if spec.command is not None and spec.args is not None:
        raise TaoError("give either command (shell text) or args (native argv), not both")
    if spec.command is None and not spec.args:
        raise TaoError("the job spec needs command (shell text) or args (native argv)")
    staging = _staging(spec, tier)
    planned = _results_plan(spec, staging, tier)
    results = planned.for_job(job_id)
    # TAO reads its GPUs from its argv, and writes under its results_dir, not under $RESULTS_DIR
    spec = spec.with_job_args(int(gpus_given), nodes, results.pod_folder)
    # the pinned defaults, read together
    shm = spec.shm_size or pins.resolve(
        "kubernetes.shm_size_multinode" if multinode else "kubernetes.shm_size_single"
    )
    master_port = int(spec.master_port or pins.resolve("kubernetes.master_port"))
    backoff_limit = int(pins.resolve("kubernetes.disruption_retries")) if retry_disruptions and nodes == 1 else 0
    ttl = int(spec.ttl_seconds_after_finished if spec.ttl_seconds_after_finished is not None
              else pins.resolve("kubernetes.ttl_seconds_after_finished"))
    labels = labels_for(job_id)
    pod_labels = {**(spec.pod_labels or {}), **labels}
    pod_annotations = dict(spec.pod_annotations or {})
    volumes, mounts = _volumes_and_mounts(spec, shm)
    env_from = [{"secretRef": {"name": cred_secret}}] if cred_secret else None

    user_argv = [] if sweep_table else argv_of(spec)
    if multinode and user_argv:  # each rank: its own spec copies, rank 0's name, no silent one-node fallback
        user_argv = nodeguard.guarded(user_argv, job_id, nodes, literal=kube_literal)
    init_containers: list[dict] = []
    extra_containers: list[dict] = []
    if tier == "C":
        assert staging is not None  # tier C has its staging folder (staging_dir)
        if staging in {m["mountPath"] for m in mounts}:
            raise TaoError(f"staging_dir {staging} collides with a mount path")
        for item in (spec.s3_inputs or []) + (spec.s3_outputs or []):
            if not is_under(item["path"], staging):
                raise TaoError(f"tier C path {item['path']} must be under staging_dir {staging} (the shared emptyDir)")
        if not cred_secret:
            raise TaoError("storage tier C needs S3 credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) in the per-job Secret")
        volumes.append({"name": "staging", "emptyDir": {}})
        stage_mount = {"name": "staging", "mountPath": staging}
        mounts.append(stage_mount)
        s3_image = pins.resolve("images.s3_client")
        staging_env = [{"name": "TAO_STAGING_DIR", "value": staging}]
        fetch_args = [x for i in spec.s3_inputs or [] for x in (i["uri"], i["path"])]
        init_containers.append({
            "name": "fetch",
            "image": s3_image,
            "command": ["/bin/sh", "-c", kube_literal(FETCH_SCRIPT), "tao-fetch", *fetch_args],
            "env": staging_env,
            "envFrom": env_from,
            "volumeMounts": [stage_mount],
        })
        upload_args = [x for o in spec.s3_outputs or [] for x in (o["path"], o["uri"])]
        if results.upload:
            upload_args += list(results.upload)
        extra_containers.append({
            "name": "upload",
            "image": s3_image,
            "command": ["/bin/sh", "-c", kube_literal(UPLOAD_SCRIPT), "tao-upload", *upload_args],
            "env": staging_env,
            "envFrom": env_from,
            "volumeMounts": [stage_mount],
        })
        command = ["/bin/sh", "-c", kube_literal(MAIN_WRAPPER), "tao-main", *user_argv]
    elif spec.s3_inputs or spec.s3_outputs:
        raise TaoError("s3_inputs/s3_outputs need storage_tier C")
    elif results.pod_folder and log_copy:
        command = ["/bin/sh", "-c", kube_literal(LOG_WRAPPER), "tao-main", *user_argv]
    else:
        command = user_argv
    if tier != "C" and resumes(spec, results.pod_folder):  # a replaced pod resumes (resume_prologue)
        rest = command[2] if command is not user_argv else kube_literal('exec "$@"\n')
        command = ["/bin/sh", "-c", kube_literal(resume_prologue(spec)) + rest, "tao-main", *user_argv]
    if sweep_table:  # the trial's id, folder and argv first: everything after reads them as a single job's
        if tier == "C":
            raise TaoError("a Kubernetes sweep keeps its results on a mounted volume (tier A): submit tier C trials "
                           "one by one")
        if SWEEP_DIR in {m["mountPath"] for m in mounts}:
            raise TaoError(f"mount path {SWEEP_DIR} is where a sweep's trial table is mounted: pick another path")
        rest = command[2] if command is not user_argv else kube_literal('exec "$@"\n')
        command = ["/bin/sh", "-c", kube_literal(SWEEP_PROLOGUE) + rest, "tao-main"]
        volumes.append({"name": "tao-sweep", "configMap": {"name": sweep_table}})
        mounts.append({"name": "tao-sweep", "mountPath": SWEEP_DIR, "readOnly": True})

    config_map: dict[str, Any] = {"config_map_name": None, "config_map_annotations": None, "config_map_data": None}
    if config is not None:
        cm_name = config_map_name(job_id)
        key = config.get("key") or "config"
        digest = sha256_text(config["text"])
        if config.get("sha256") and config["sha256"] != digest:
            raise TaoError("config file content does not match its sha256: re-materialise the config and pass the new hash")
        config_map = {
            "config_map_name": cm_name,
            "config_map_annotations": {CONFIG_SHA_ANNOTATION: digest},
            "config_map_data": {key: config["text"]},
        }
        if config["mount_path"] in {m["mountPath"] for m in mounts}:
            raise TaoError(f"config mount path {config['mount_path']} collides with another mount")
        volumes.append({"name": "tao-config", "configMap": {"name": cm_name}})
        mounts.append({"name": "tao-config", "mountPath": config["mount_path"], "subPath": key, "readOnly": True})
        pod_annotations[CONFIG_SHA_ANNOTATION] = digest

    main: dict[str, Any] = {"name": "main", "image": spec.image, "command": command}
    if spec.workdir:
        main["workingDir"] = spec.workdir
    main["env"] = _env_list(spec, job_id, name, name, multinode, staging, results, master_port)
    if env_from:
        main["envFrom"] = env_from
    resources = _resources(spec, int(gpus_given))
    if resources:
        main["resources"] = resources
    main["volumeMounts"] = mounts
    for c in init_containers + extra_containers:
        if c["envFrom"] is None:
            del c["envFrom"]

    pulls = [{"name": s} for s in [*pull_secrets, *([spec.image_pull_secret] if spec.image_pull_secret else [])]]
    policy = failure_policy(nodes > 1) if retry_disruptions else None
    return {
        "name": name,
        "service_name": name,
        "namespace": namespace,
        "labels": labels,
        "pod_labels": pod_labels,
        "pod_annotations": pod_annotations or None,
        "selector": {JOB_LABEL: job_id},
        "nodes": nodes,
        "master_port": master_port,
        "backoff_limit": backoff_limit,
        "pod_failure_policy": policy,
        "ttl_seconds_after_finished": ttl,
        "active_deadline_seconds": spec.active_deadline_seconds,
        "image_pull_secrets": pulls or None,
        "node_selector": spec.node_selector or None,
        "tolerations": spec.tolerations or None,
        # one pod per node (the NCCL probe): pods of this job repel each other on a node
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {JOB_LABEL: job_id}}, "topologyKey": "kubernetes.io/hostname"}]}}
        if spec.one_pod_per_node and nodes > 1 else None,
        "share_process_namespace": tier == "C",
        "init_containers": init_containers or None,
        "containers": [main, *extra_containers],
        "volumes": volumes,
        **config_map,
    }, planned


def render_manifests(spec: KubernetesSpec | Mapping[str, Any], **kwargs: Any) -> list[dict]:
    """Render the manifests for ``spec``: [ConfigMap?] [Service (multi-node)] Job."""
    return render_job(spec, **kwargs)[0]


def render_job(spec: KubernetesSpec | Mapping[str, Any], **kwargs: Any) -> tuple[list[dict], Results]:
    """The manifests for ``spec`` and its results plan (``{id}`` for the job id), each made once."""
    ctx, planned = _context(spec, **kwargs)
    template = INDEXED_TEMPLATE if ctx["nodes"] > 1 else SINGLE_TEMPLATE
    return render_yaml_documents(template, ctx), planned


# ------------------------------------------------------------ the per-job Secrets
# Their values come from the caller's environment (names given) or a mode-600 env-file
# (:func:`taobank.platforms.kubernetes.submit.collect_credentials`) and reach the cluster on stdin only; a dry run
# shows every value masked.
def secret_object(name: str, namespace: str, job_id: str, creds: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace, "labels": labels_for(job_id)},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in creds.items()},
    }


def pull_secret_object(name: str, namespace: str, job_id: str, key: str, registry: str = "nvcr.io") -> dict:
    user = "$oauthtoken"
    auth = base64.b64encode(f"{user}:{key}".encode()).decode()
    cfg = json.dumps({"auths": {registry: {"username": user, "password": key, "auth": auth}}})
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": name, "namespace": namespace, "labels": labels_for(job_id)},
        "data": {".dockerconfigjson": base64.b64encode(cfg.encode()).decode()},
    }


#: What a dry run shows in place of every Secret value: never the value, not even its base64.
MASKED = "<masked>"


def masked(obj: dict) -> dict:
    """A Secret object with every data value replaced by :data:`MASKED` (the keys stay)."""
    return {**obj, "data": {key: MASKED for key in obj.get("data") or {}}}


def find(objs: list[dict], kind: str) -> dict | None:
    """The first object of ``kind`` in a rendered list."""
    return next((o for o in objs if o.get("kind") == kind), None)


def without_disruption_retry(objs: list[dict]) -> list[dict]:
    """The manifests for a server without podFailurePolicy: the Job gets ``backoffLimit: 0`` and no policy
    (what rendering with ``retry_disruptions=False`` gives), so the one render serves either server."""
    out = []
    for obj in objs:
        if obj.get("kind") == "Job":
            spec = {k: v for k, v in obj["spec"].items() if k != "podFailurePolicy"}
            obj = {**obj, "spec": {**spec, "backoffLimit": 0}}
        out.append(obj)
    return out


# ------------------------------------------------------------ the resume prologue
# A replaced pod resumes: after an eviction, a preemption or a lost node (``DisruptionTarget``), the Job
# controller starts the same pod again (podFailurePolicy ``Count``, bounded by ``backoffLimit``); this
# prologue makes that pod carry on from the newest checkpoint on the job's volume, not epoch 0.
#
# The prologue looks in the job's results folder (``$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID`` and its action's
# sub-folder) with the one table (:mod:`taobank.checkpoints`) and appends TAO's resume override to the
# argv (replacing an earlier one); a first pod finds nothing and runs the argv as given. Only a
# single-pod train job with an argv command (``args``) and results on a volume (tier A) gets it: shell
# text cannot take an argument safely, a multi-node Job is failed on a disruption, and a tier C pod's
# folder is an emptyDir that dies with it.
_ACTION = re.compile(r"[A-Za-z0-9_.-]+\Z")


def resumes(spec: KubernetesSpec, pod_folder: str | None) -> bool:
    return (bool(pod_folder) and isinstance(spec.args, list) and int(given(spec.nodes, 1)) == 1
            and given(spec.storage_tier, "A") == "A" and checkpoints.resumes(spec.action))


def resume_prologue(spec: KubernetesSpec) -> str:
    """sh text that rewrites ``"$@"`` to resume from the newest checkpoint in the job's folder."""
    action = str(spec.action or "")
    action = action if _ACTION.match(action) and action not in (".", "..") else "-"
    network = spec.network_arch
    return (checkpoints.shell_finder(network)
            + f'tao_ckpt=$(tao_latest_checkpoint "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID" {action} || true)\n'
            + checkpoints.resume_set(network=network))


# ------------------------------------------------------------ where the results go
# Where a Kubernetes job's results go: the one rule, used by the renderer and by submit.
#
# A pod's own filesystem is deleted with the pod, so ``results_dir`` must be
# under a mounted volume (tier A) or an ``s3://`` prefix that the upload
# sidecar fills at the end (tier C, written under the staging emptyDir
# first). Anything else is refused in one line.
#
# One folder per job by default: ``results_dir`` is the parent and the job
# writes ``<results_dir>/<job id>``; with no ``results_dir`` the parent is the
# first writable mount. ``results_exact: true`` makes ``results_dir`` the
# folder itself. The container learns the place through ``RESULTS_DIR`` (the
# folder, the name every platform sets) and the variables TAO reads,
# ``TAO_API_RESULTS_DIR`` (the parent) and ``TAO_API_JOB_ID`` (the folder's
# name: the job id unless exact); the record keeps the folder.
@dataclass(frozen=True)
class Results:
    """Where one job's results go. ``folder`` is what the record keeps (``{id}`` = the job id)."""

    folder: str
    parent: str | None = None  # TAO_API_RESULTS_DIR in the pod (None: no results kept)
    name: str | None = None  # TAO_API_JOB_ID in the pod
    upload: tuple[str, str] | None = None  # tier C: (path in the pod, s3:// URI) the sidecar uploads

    @property
    def pod_folder(self) -> str | None:
        return posixpath.join(self.parent, self.name) if self.parent and self.name else None

    def env(self) -> list[dict]:
        if self.parent is None:
            return []
        return [{"name": RESULTS_ENV, "value": self.parent}, {"name": JOB_ENV, "value": self.name},
                {"name": RESULTS_VAR, "value": self.pod_folder}]

    def for_job(self, job_id: str) -> "Results":
        """The same plan with the job id in place of the placeholder."""
        def sub(v):
            return v.replace(ID_PLACEHOLDER, job_id) if isinstance(v, str) else v
        up = (sub(self.upload[0]), sub(self.upload[1])) if self.upload else None
        return Results(sub(self.folder), sub(self.parent), sub(self.name), up)


def _mounts(spec: KubernetesSpec) -> list[dict]:
    return list(spec.mounts or [])


def results_plan(spec: KubernetesSpec | Mapping[str, Any], *, staging: str | None = None) -> Results:
    """The results plan of ``spec`` (TaoError when they would be lost). ``{id}`` stands for the job id. A
    mapping (the spec file saved beside a record) is read as its typed spec."""
    typed = KubernetesSpec.of(spec)
    return _results_plan(typed, staging, given(typed.storage_tier, "A"))


def _results_plan(spec: KubernetesSpec, staging: str | None, tier: str) -> Results:
    if spec.no_results:
        if spec.results_dir:
            raise TaoError("give results_dir or no_results, not both")
        return Results(NO_RESULTS)
    exact = bool(spec.results_exact)
    wanted = spec.results_dir
    writable = [m for m in _mounts(spec) if not m.get("read_only")]
    if wanted is None:
        if exact:
            raise TaoError("results_exact needs results_dir: name the folder")
        if not writable:
            raise TaoError("results_dir: nothing mounted to keep results on (the pod's own disk is deleted with it): "
                           "mount a volume (--pvc-mount CLAIM:/results), give an s3:// results_dir (tier C), "
                           "or --no-results")
        wanted = writable[0]["mount_path"]
    wanted = str(wanted).rstrip("/") or "/"
    if wanted.startswith("s3://"):
        if tier != "C":
            raise TaoError(f"results_dir {wanted} is an S3 prefix: that needs storage_tier C (the upload sidecar), "
                           "or put results_dir under a mounted volume")
        if not staging:
            raise TaoError("tier C results need the staging folder")
        if len(wanted) <= len("s3://") or ".." in wanted.split("/"):
            raise TaoError(f"results_dir {wanted} names no bucket: give s3://bucket/prefix")
        base = posixpath.join(staging, STAGED_RESULTS)
        name = posixpath.basename(wanted) if exact else ID_PLACEHOLDER
        folder = wanted if exact else f"{wanted}/{ID_PLACEHOLDER}"
        return Results(folder, base, name, (posixpath.join(base, name), folder))
    if not wanted.startswith("/") or ".." in wanted.split("/"):
        raise TaoError(f"results_dir {wanted} must be an absolute path under a mounted volume or an s3:// prefix")
    under = [m for m in _mounts(spec) if is_under(wanted, m["mount_path"])]
    if not under:
        mounted = ", ".join(m["mount_path"] for m in _mounts(spec)) or "none"
        raise TaoError(f"results_dir {wanted} is on no mounted volume (mounted: {mounted}), so the results would be "
                       "deleted with the pod: mount one there (--pvc-mount CLAIM:PATH) or use an s3:// prefix (tier C)")
    deepest = max(under, key=lambda m: len(m["mount_path"]))
    if deepest.get("read_only"):
        raise TaoError(f"results_dir {wanted} is on {deepest['mount_path']}, which is mounted read-only: "
                       "pick a writable mount")
    if exact:
        if wanted == "/":
            raise TaoError("results_dir / cannot be a job's folder")
        return Results(wanted, posixpath.dirname(wanted), posixpath.basename(wanted))
    return Results(posixpath.join(wanted, ID_PLACEHOLDER), wanted, ID_PLACEHOLDER)
