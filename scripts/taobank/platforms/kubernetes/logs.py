"""logs on Kubernetes: every pod's output, the copy saved when the job ended, or the copy on its volume."""
from __future__ import annotations

import re
from typing import Callable

from ... import fsio, pins, records
from ...core import jobfiles
from ...errors import TaoError
from . import render
from .render import FINAL_STATUS_PREFIX
from . import status as smap
from .kubectl import KubeFacts, Kubectl
from . import JOB_LABEL, SPEC_FILE
from .objects import INDEX_LABEL, pod_selector
from ...records import Record



def pod_logs(kube: Kubectl, pod: dict, tail: int, gone: list[str] | None = None) -> str:
    """Every container's output of one pod. When one container cannot answer (the main container
    still waiting behind a failed fetch initContainer, say), each container is asked on its own, so
    the one that failed is still shown. A pod deleted meanwhile is added to ``gone``."""
    name = pod["metadata"]["name"]
    res = kube.run("logs", name, "--all-containers=true", f"--tail={tail}", check=False, what="kubectl logs")
    if res.ok:
        return res.stdout
    spec = pod.get("spec") or {}
    containers = [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
    chunks = []
    for cname in [c for c in containers if c]:
        one = kube.run("logs", name, "-c", cname, f"--tail={tail}", check=False, what="kubectl logs")
        if one.ok and one.stdout:
            chunks.append(f"# container {cname}:\n" + one.stdout + ("" if one.stdout.endswith("\n") else "\n"))
    if chunks:
        return "".join(chunks)
    why = (res.stderr or "").strip().splitlines()
    if gone is not None and why and "NotFound" in why[-1]:
        gone.append(name)  # deleted since it was listed (the Job's TTL): nothing of it can be read any more
    return f"# no logs from pod {name}: {why[-1] if why else 'kubectl logs failed'}\n"


def save_final_logs(kube: Kubectl, rec: Record, pods: list[dict]) -> str | None:
    """Write the pods' logs next to the record (they vanish with ttlSecondsAfterFinished); None when there were
    none to save."""
    text = final_logs(kube, pods) if pods else None
    return None if text is None else str(jobfiles.save_logs(rec, "logs.txt", text))


def final_logs(kube: Kubectl, pods: list[dict]) -> str | None:
    """The pods' logs as they are saved at the job's end (the pinned tail of each); None when every pod was
    deleted before it could be read (never saved as the job's logs: ``logs`` then reads the volume's copy)."""
    gone: list[str] = []
    text = format_logs(kube, pods, int(pins.resolve("kubernetes.logs_tail")), gone=gone)
    return None if pods and len(gone) == len(pods) else text


#: The most lines a pod prints as it ends (:data:`render.FINAL_STATUS_SH`: two status files, each its last lines
#: and the last epoch line before them).
FINAL_LINES_MAX = 2 * (render.FINAL_STATUS_LINES + 1)


def format_logs(kube: Kubectl, pods: list[dict], tail: int, *, as_written: bool = False,
                gone: list[str] | None = None) -> str:
    """Logs of every pod, rank by rank; multi-pod output prefixes each line with [rank N pod]. ``as_written``:
    each pod's last ``tail`` lines of what the job wrote, the bank's final status lines left out (a finished
    pod's last lines are those: ``logs --tail 5`` would show nothing)."""
    pods = smap.sort_pods(pods)
    chunks = []
    for pod in pods:
        name = pod["metadata"]["name"]
        text = pod_logs(kube, pod, tail + FINAL_LINES_MAX if as_written else tail, gone)
        if as_written:
            text = _last_lines(_without_final(text), tail)
        if len(pods) == 1:
            chunks.append(text)
            continue
        rank = smap.pod_rank(pod)
        prefix = f"[rank {rank} {name}] " if rank is not None else f"[{name}] "
        chunks.append("".join(prefix + line + "\n" for line in text.splitlines()))
    return "".join(chunks)


def _live_pods(kube: Kubectl, rec: Record) -> list[dict]:
    """The job's pods (only those owned by the recorded Job UID)."""
    uid = KubeFacts.of(rec).uid
    return [p for p in kube.items("pods", "-l", pod_selector(rec), what="kubectl get pods")
            if not uid or any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]


def read_logs(rec: Record, *, tail: int | None = None) -> tuple[str, str]:
    """(text, source): the pods' logs ("live") or, once the pods are gone, the copy saved at the end ("saved")."""
    kube = Kubectl.for_record(rec)
    tail = tail if tail is not None else int(pins.resolve("kubernetes.logs_tail"))
    pods = _live_pods(kube, rec)
    if pods:
        gone: list[str] = []
        text = format_logs(kube, pods, tail, as_written=True, gone=gone)
        if len(gone) < len(pods):  # else deleted since listed (the TTL): read on as if there were none
            return text, "live"
    saved = jobfiles.read_logs(rec.id, "logs.txt", None)  # whole (cut per pod when saved): its last lines are the final ones
    if saved is not None:
        return _last_lines(_without_final(saved), tail), "saved"
    kept = volume_logs(kube, rec, tail)
    if kept:
        return kept, "volume"
    raise TaoError(f"job {rec.id} has no pods (not started, or deleted by TTL), no saved logs and no output "
                   "copy on a results volume")


def saved_spec(rec: Record) -> dict | None:
    """The job spec as submitted (kept beside the record): where its volumes and results folder are; None
    for a record without one (made by an older helper)."""
    path = records.artifact_dir(rec) / SPEC_FILE
    if not path.is_file():
        return None
    spec = fsio.json_value(fsio.read_regular(path, "saved job spec", follow_links=False) or b"", f"saved job spec {path}")
    return spec if isinstance(spec, dict) else None


#: Prints the last N lines of every <pod>.log the job kept in its results folder.
_READ_LOGS = ('for f in "$1"/*.log; do [ -f "$f" ] || continue; echo "==> ${f##*/} <=="; tail -n "$2" "$f"; done')


def volume_logs(kube: Kubectl, rec: Record, tail: int) -> str | None:
    """The output copy the job appended to ``<results folder>/logs`` (read by a short helper Job), or None."""
    from . import volume_job

    spec = saved_spec(rec)
    if spec is None:
        return None
    if spec.get("storage_tier", "A") != "A" or not spec.get("log_copy", True):
        return None
    folder = render.results_plan(spec).for_job(rec.id).pod_folder
    if not folder:
        return None
    _, text = volume_job.run(kube, spec, ["/bin/sh", "-c", _READ_LOGS, "tao-logs", f"{folder}/{render.LOG_COPY_DIR}",
                                          str(tail)], purpose="reading the logs kept on the results volume")
    return text or None


def follow_logs(rec: Record, *, emit: Callable[[str, str], None], tail: int | None = None) -> int:
    """Hand every pod's output (rank-prefixed) to ``emit("pods", text)`` until the pods end; kubectl's exit code."""
    kube = Kubectl.for_record(rec)
    tail = tail if tail is not None else int(pins.resolve("kubernetes.logs_tail"))
    pods = _live_pods(kube, rec)
    if not pods or all(((p.get("status") or {}).get("phase")) in ("Succeeded", "Failed") for p in pods):
        text, _ = read_logs(rec, tail=tail)  # nothing more will come: what the job wrote, without the final lines
        emit("pods", text)
        return 0
    facts = KubeFacts.of(rec)
    nodes = len(pods) if facts.index is not None or facts.nodes is None else facts.nodes
    return kube.stream("logs", "-l", pod_selector(rec), "--follow", "--prefix", "--all-containers=true",
                       f"--tail={tail}", f"--max-log-requests={max(2 * nodes + 2, 5)}",
                       on_text=lambda text: emit("pods", text))


def trials_selector(sweep: str, pods_of: dict[str, list[dict]]) -> str:
    """The label selector of a sweep's trials' pods (``{trial id: its pods}``): one ``kubectl logs -l`` for all."""
    ranks = {smap.pod_rank(p) for ps in pods_of.values() for p in ps}
    indexes = sorted(r for r in ranks if r is not None)
    return f"{JOB_LABEL}={sweep},{INDEX_LABEL} in ({','.join(map(str, indexes))})"


def save_final_logs_many(kube: Kubectl, selector: str, pods_of: dict[str, list[dict]]) -> None:
    """Save the logs of many jobs' pods (``{job id: its pods}``, all matched by ``selector``) with ONE ``kubectl
    logs -l`` (every pod's lines prefixed with its name, split here); when that call fails, pod by pod."""
    for jid, text in final_logs_many(kube, selector, pods_of).items():
        jobfiles.save_logs(jid, "logs.txt", text)


def final_logs_many(kube: Kubectl, selector: str, pods_of: dict[str, list[dict]]) -> dict[str, str]:
    """:func:`save_final_logs_many`'s read: ``{job id: its pods' logs}`` (jobs without pods left out)."""
    out: dict[str, str] = {}
    pods = [p for ps in pods_of.values() for p in ps]
    if not pods:
        return out
    tail = int(pins.resolve("kubernetes.logs_tail"))
    res = kube.run("logs", "-l", selector, "--all-containers=true", "--prefix=true", f"--tail={tail}",
                   f"--max-log-requests={max(5, 2 * len(pods))}", "--ignore-errors=true", check=False,
                   what="kubectl logs (many pods)")
    if not res.ok:
        each = {jid: final_logs(kube, mine) for jid, mine in pods_of.items() if mine}
        return {jid: text for jid, text in each.items() if text is not None}
    lines: dict[str, list[str]] = {}
    for line in res.stdout.splitlines(keepends=True):
        if line.startswith("[pod/") and "] " in line:
            head, text = line.split("] ", 1)
            lines.setdefault(head[len("[pod/"):].split("/", 1)[0], []).append(text)
    for jid, mine in pods_of.items():
        if not mine:
            continue
        names = [p["metadata"]["name"] for p in smap.sort_pods(mine)]
        if len(names) == 1:
            out[jid] = "".join(lines.get(names[0], []))
        else:
            out[jid] = "".join(f"[{n}] {t}" for n in names for t in lines.get(n, []))
    return out


_FINAL = re.compile(r"(?:\[[^\]\n]*\] )?" + re.escape(FINAL_STATUS_PREFIX) + r"((?:[^/\s]+/)?status\.json) (.*)")


def final_status(job_id: str) -> dict[str, str] | None:
    """The last lines of TAO's status files the job's pod printed as it ended (:data:`render.FINAL_STATUS_SH`),
    from the log saved at its end: ``{path: text}``, in the file's order (its last epoch line first when per-step
    lines pushed it out of the last ones); None when no saved log carries them (a pod killed, say).
    A multi-node job's pods print the same folder: the first one's lines are kept."""
    return final_lines(jobfiles.read_logs(job_id, "logs.txt", None))  # whole: it was cut per pod when saved


def final_lines(text: str | None) -> dict[str, str] | None:
    """:func:`final_status` of a log's text (a saved log, or a pod's own output as it ended)."""
    files: dict[str, str] = {}
    first_pod = None
    for line in (text or "").splitlines():
        m = _FINAL.fullmatch(line)
        if not m:
            continue
        pod = line.split("] ", 1)[0] if line.startswith("[") else ""
        first_pod = pod if first_pod is None else first_pod
        if pod == first_pod:
            files[m[1]] = files.get(m[1], "") + m[2] + "\n"
    return files or None


def _without_final(text: str) -> str:
    """The log as the job wrote it: the bank's final status lines (:func:`final_status`) left out."""
    return "".join(ln for ln in text.splitlines(keepends=True) if not _FINAL.fullmatch(ln.rstrip("\n")))


def _last_lines(text: str, tail: int) -> str:
    return "".join(text.splitlines(keepends=True)[-tail:]) if tail > 0 else ""
