"""Which records a verb works on: the ids given (each checked to be of the verb's platform), ``--last``, or
every active one; a record of another platform is refused in one line that names the helper to use."""
from __future__ import annotations

from .. import records, registry
from ..errors import TaoError
from ..records import Record


def load_for(job_id: str, platform: str | None, verb: str) -> Record:
    """The record of ``job_id``; refused in one line when it belongs to another platform."""
    return owned(records.get(job_id), platform, verb)


def owned(rec: Record, platform: str | None, verb: str) -> Record:
    """``rec`` (read already) when it is of ``platform`` (None: any); refused in one line when it is another's."""
    job_id = rec.id
    if platform is not None and rec.platform != platform:
        other = rec.platform or "unknown"
        owner = registry.info(other) if registry.known(other) else None
        helper = owner.helper if owner else "tao_jobs.py"
        if verb in ("status", "logs", "cancel", "artifacts", "fetch", "prune"):
            hint = f"run {helper} {verb} {job_id} (or tao_jobs.py {verb} {job_id})"
        elif verb == "sweep":
            hint = f"its sweep belongs to {helper} (or tao_jobs.py status --sweep / cancel --sweep)"
        else:  # submit --job-id / resume exist on one platform each: say what finishes it there
            hint = f"finish it with {helper} {owner.finish_verb} {job_id}" if owner else "see tao_jobs.py list"
        raise TaoError(f"job {job_id} is a {other} job, not {platform}: {hint}; nothing was done")
    return rec


def select(platform: str | None, ids: list[str] | None, verb: str, *, all_active: bool = True,
           problems: list[str] | None = None) -> list[Record]:
    """Records for a verb: the ids given (each checked), else every active record of ``platform`` (a damaged one
    skipped and, with ``problems``, described there in one line: one record never stops a verb for all)."""
    if ids:
        return [load_for(i, platform, verb) for i in dict.fromkeys(ids)]
    if not all_active:
        return []
    return records.find(platform=platform, active=True, problems=problems)


def last_id(platform: str | None) -> str:
    """The id of the most recently created record (of ``platform``): what ``--last`` stands for."""
    recs = records.find(platform=platform)
    if not recs:
        where = f"{platform} " if platform else ""
        raise TaoError(f"--last: there is no {where}job record in {records.state_dir()}: submit a job first, "
                       "or give its id")
    return recs[-1].id


def by_platform(recs: list[Record]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = {}
    for rec in recs:
        groups.setdefault(rec.platform or "", []).append(rec)
    return groups
