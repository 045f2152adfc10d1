"""A Kubernetes job's verdict once its Job is gone: the exit markers its pods left beside the log copy.

With nobody polling, ``ttlSecondsAfterFinished`` deletes a finished Job and its pods, and with them the
exit code. The output-copy wrapper (:data:`render.LOG_WRAPPER`) writes ``<results>/logs/<pod host>.exit``
(``<code> <UTC end time>``) when the command ends, on the results volume, which outlives the Job. When
status finds a record's Job gone, it reads the markers and the log copy's tail of every such job with
ONE short helper Job per namespace and volume set (:mod:`volume_job`), and maps them here: COMPLETE,
ERROR with the exit code and the last log lines, or UNKNOWN saying why nothing survived.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from ... import failures
from ...contract import Observation
from ...errors import TaoError
from ...run import last_line
from ...states import State
from . import render
from . import status as smap
from .kubectl import LOOKED, KubeFacts, Kubectl
from .logs import saved_spec
from ...records import Record

#: What status said of a vanished Job before markers existed; the start of every message here.
GONE = "the Job no longer exists (TTL cleanup or deleted outside the bank)"

#: $1 lines of each log copy's tail, then the jobs' logs folders. Per folder a ``#folder`` line, each marker
#: as ``#exit <file> <content>``, each log copy as ``#log <file>`` and its tail, every line prefixed ``|``.
READ_SH = r'''
n=$1; shift
for d do
  printf '#folder %s\n' "$d"
  for f in "$d"/*.exit; do [ -f "$f" ] || continue; printf '#exit %s %s\n' "${f##*/}" "$(head -c 200 -- "$f" | tr -d '\n')"; done
  for f in "$d"/*.log; do [ -f "$f" ] || continue; printf '#log %s\n' "${f##*/}"; tail -n "$n" -- "$f" | sed 's/^/|/'; done
done
exit 0
'''
#: How many lines of each log copy status keeps (saved beside the record, the last few in the message).
TAIL_LINES = 200


@dataclass(frozen=True)
class Marker:
    """One pod's exit marker: its host name, the command's exit code, when it ended (UTC, ISO; may be empty)."""

    host: str
    code: int
    ended: str = ""


@dataclass
class Kept:
    """What a gone job left in its results folder: its markers and its log copies' tails (file -> text)."""

    folder: str
    markers: list[Marker]
    logs: dict[str, str]

    def log_text(self) -> str:
        """The log copies as ``logs`` shows them: one file alone, several each under a ``==> file <==`` line."""
        if len(self.logs) == 1:
            return next(iter(self.logs.values()))
        return "".join(f"==> {name} <==\n{text}" for name, text in sorted(self.logs.items()))


def parse_marker(name: str, content: str) -> Marker | None:
    """``<host>.exit`` holding ``<code> [<end time>]``; None when it is not one (a half-written or foreign file)."""
    if not name.endswith(render.EXIT_MARKER_SUFFIX):
        return None
    words = content.split()
    if not words or not words[0].isdigit() or len(words) > 2:
        return None
    return Marker(name[: -len(render.EXIT_MARKER_SUFFIX)], int(words[0]), words[1] if len(words) > 1 else "")


def parse(text: str) -> dict[str, Kept]:
    """:data:`READ_SH`'s output -> {logs folder: what it holds}."""
    out: dict[str, Kept] = {}
    kept: Kept | None = None
    log: str | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith("#folder "):
            folder = line[len("#folder "):].rstrip("\n")
            kept, log = out.setdefault(folder, Kept(folder, [], {})), None
        elif kept is None:
            continue
        elif line.startswith("#exit "):
            name, _, content = line[len("#exit "):].rstrip("\n").partition(" ")
            marker = parse_marker(name, content)
            if marker is not None:
                kept.markers.append(marker)
            log = None
        elif line.startswith("#log "):
            log = line[len("#log "):].rstrip("\n")
            kept.logs[log] = ""
        elif line.startswith("|") and log is not None:
            kept.logs[log] += line[1:]
    return out


def verdict(kept: Kept | None, nodes: int, why_none: str = "") -> Observation:
    """The state a gone Job's markers say (a pure mapping). One pod: its last marker decides (a disrupted pod
    was replaced). Several ranks: any non-zero exit fails the job, all ranks at 0 complete it."""
    if kept is None or not kept.markers:
        kept_logs = " (its log copy is kept: logs ID shows it)" if kept is not None and kept.logs else ""
        why = why_none or (f"and left no exit marker in {kept.folder}" if kept is not None
                           else "and left no exit marker")
        return Observation(State.UNKNOWN, reason="NotFound", message=f"{GONE} {why}: how it ended is unknown{kept_logs}")
    tail = kept.log_text()
    ordered = sorted(kept.markers, key=lambda m: (m.ended, m.host))
    decisive = [ordered[-1]] if nodes <= 1 else ordered
    failed = [m for m in decisive if m.code != 0]
    where = "exit marker on the results volume"
    if failed:
        m = failed[0]
        when = f" at {m.ended}" if m.ended else ""
        pattern = failures.infra_log_match(tail) if tail else None
        err = "ERR_INFRA" if pattern else "ERR_PROGRAM"
        why = f"; log shows an infrastructure failure ({pattern})" if pattern else ""
        return Observation(State.ERROR, err_class=err, reason=pattern or "NonZeroExit", exit_code=m.code,
                           message=f"pod {m.host} exited with code {m.code}{when} ({where}; the Job is gone){why}"
                                   f"{smap.tail_text(tail)}")
    if len(decisive) < nodes:
        return Observation(State.UNKNOWN, reason="NotFound",
                           message=f"{GONE}: {len(decisive)} of {nodes} ranks left an exit marker (all 0) in "
                                   f"{kept.folder}: how it ended is unknown")
    m = decisive[-1]
    when = f" at {m.ended}" if m.ended else ""
    return Observation(State.COMPLETE, reason="Complete", exit_code=0,
                       message=f"exited with code 0{when} ({where}; the Job is gone)")


def logs_folder(rec: Record) -> tuple[dict | None, str | None, str]:
    """(saved spec, the job's logs folder on its volume, why there is none): markers are only where the log
    copy is (tier A, a results folder, log_copy on)."""
    spec = saved_spec(rec)
    if spec is None:
        return None, None, "and its spec was not kept beside the record (an older bank): no exit marker to read"
    if spec.get("storage_tier", "A") != "A":
        return spec, None, "and a tier C job keeps no exit marker on a volume"
    folder = render.results_plan(spec).for_job(rec.id).pod_folder
    if not folder:
        return spec, None, "and it kept no results folder (--no-results), so no exit marker"
    if not spec.get("log_copy", True):
        return spec, None, "and it kept no output copy (log_copy off), so no exit marker"
    return spec, f"{folder}/{render.LOG_COPY_DIR}", ""


def _volume_key(spec: dict) -> str:
    """Jobs whose helper Jobs would be the same (volumes and placement): one helper reads them all."""
    return json.dumps({k: spec.get(k) for k in ("mounts", "node_selector", "tolerations", "image_pull_secret")},
                      sort_keys=True)


def read_gone(kube: Kubectl, recs: list[Record]) -> dict[str, tuple[Observation, str]]:
    """The verdict of each record whose Job is gone, and the log text kept (saved by ``ended``): one helper
    Job per volume set of these jobs (all in ``kube``'s namespace). A helper that fails leaves them UNKNOWN,
    saying why."""
    out: dict[str, tuple[Observation, str]] = {}
    groups: dict[str, tuple[dict, list[tuple[Record, str]]]] = {}
    facts = {rec.id: KubeFacts.of(rec) for rec in recs}
    for rec in recs:
        looked = facts[rec.id].looked
        if looked:
            out[rec.id] = (verdict(None, 1, f"and left no exit marker (its results folder was read at {looked})"), "")
            continue
        spec, folder, why = logs_folder(rec)
        if spec is None or folder is None or not folder.startswith("/") or "\n" in folder:
            out[rec.id] = (verdict(None, 1, why or "and its results folder cannot be read"), "")
            continue
        groups.setdefault(_volume_key(spec), (spec, []))[1].append((rec, folder))
    for spec, members in groups.values():
        from . import volume_job

        folders = list(dict.fromkeys(f for _, f in members))
        try:
            rc, text = volume_job.run(kube, spec, ["/bin/sh", "-c", READ_SH, "tao-verdict", str(TAIL_LINES), *folders],
                                      purpose="reading the exit markers on the results volume")
            if rc != 0:
                raise TaoError(f"the helper exited {rc}: {last_line(text) or 'no output'}")
        except TaoError as exc:
            for rec, folder in members:
                out[rec.id] = (verdict(None, 1, f"and its exit marker in {folder} could not be read ({exc})"), "")
            continue
        found = parse(text)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for rec, folder in members:
            kept = found.get(folder) or Kept(folder, [], {})
            nodes = facts[rec.id].nodes
            obs = verdict(kept, 1 if nodes is None else nodes)
            if not kept.markers:  # read, and nothing there: remembered, so no later status starts a helper for it
                obs.backend[LOOKED] = now
            out[rec.id] = (obs, kept.log_text() if kept.logs else "")
    return out
