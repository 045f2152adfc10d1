"""Which records a verb works on: the ids given (each checked to be of the verb's platform), ``--last``, or
every active one; a record of another platform is refused in one line that names the helper to use."""
from __future__ import annotations

from .. import records, registry
from ..errors import TaoError
from ..records import Record


def load_for(job_id: str, platform: str | None, verb: str) -> Record:
    """The record of ``job_id``; refused in one line when it belongs to another platform, or when there is none
    (saying what the word is when the records know it: :func:`explained`)."""
    try:
        rec = records.get(job_id)
    except records.UnknownJob as exc:
        raise explained(exc, platform, verb) from None
    return owned(rec, platform, verb)


def explained(exc: records.UnknownJob, platform: str | None, verb: str) -> TaoError:
    """The line of a word no record has as its id (``exc``, from the store) when the records know the word as
    something else: a sweep's id (the sweep form of ``verb``), or a platform's id of a job, as the BACKEND column
    of ``tao_jobs.py list`` shows it (``slurm:267``, a bare SLURM job id, ``<namespace>/<job>``, a container id);
    ``exc`` itself otherwise. Only this error path reads every record."""
    word = exc.word
    recs = records.find()
    trials = [r for r in recs if r.sweep == word] if isinstance(exc, records.NoRecord) else []
    if trials:
        return TaoError(f"{word} is a sweep ({len(trials)} trials), not a job: {_sweep_hint(word, trials, platform, verb)}",
                        exc.exit_code)
    backend = [r for r in recs if _is_backend_id(r, word)]
    if backend:
        return TaoError(_backend_line(word, backend, platform, verb), exc.exit_code)
    arrays = {r.sweep for r in recs if r.sweep and r.platform == "slurm" and str(r.backend.get("array_job_id")) == word}
    if len(arrays) == 1:
        sweep = arrays.pop()
        return TaoError(f"{word} is the SLURM array of sweep {sweep}, not a job: "
                        f"{_sweep_hint(str(sweep), [r for r in recs if r.sweep == sweep], platform, verb)}",
                        exc.exit_code)
    return exc


def job_not_sweep(word: str) -> str | None:
    """The line of a word given as a sweep's id that no trial has, when it is a job's or trial's id (the other way
    round from :func:`explained`); None otherwise. Only this error path reads the record."""
    try:
        rec = records.get(word)
    except TaoError:
        return None
    if rec.sweep:
        return f"{word} is trial {rec.trial} of sweep {rec.sweep}, not a sweep: use the sweep's id {rec.sweep}"
    return f"{word} is a job, not a sweep: tao_jobs.py status {word} shows it"


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


def _helper(platform: str | None, recs: list[Record]) -> str:
    """The helper a hint names: the one the user ran when the jobs are of its platform, else tao_jobs.py."""
    if platform is not None and all(r.platform == platform for r in recs):
        return registry.info(platform).helper
    return "tao_jobs.py"


def _sweep_hint(sweep: str, trials: list[Record], platform: str | None, verb: str) -> str:
    """What to run instead of ``verb SWEEP``: the verb's sweep form, or how to find the trial it needs."""
    helper = _helper(platform, trials)
    listed = f"tao_jobs.py list --sweep {sweep} shows its trials' ids"
    if verb in ("status", "cancel"):
        return f"run {helper} {verb} --sweep {sweep}"
    if verb in ("artifacts", "fetch", "submit --parent"):
        return (f"tao_jobs.py sweep best {sweep} --kpi NAME names the best trial and its checkpoint; {verb} takes "
                f"one trial's id ({listed})")
    if verb == "prune":
        return f"prune takes its trials' ids ({listed}; with --keep best --kpi NAME the best trial keeps its best)"
    return f"{verb} takes one trial's id ({listed}; {helper} status --sweep {sweep} shows the sweep)"


def _is_backend_id(rec: Record, word: str) -> bool:
    """``word`` names the job the way its platform does: its BACKEND (``slurm:267``, ``ns/job``, a container id),
    a SLURM job id without ``slurm:``, or a whole container id."""
    if not word:
        return False
    if rec.backend_ref == word or (rec.platform == "slurm" and rec.backend_ref == f"slurm:{word}"):
        return True
    return rec.platform == "docker" and rec.backend.get("container_id") == word


def _backend_line(word: str, jobs: list[Record], platform: str | None, verb: str) -> str:
    """``word`` is the BACKEND of ``jobs`` (one, or several on different clusters)."""
    where = "the BACKEND column of tao_jobs.py list"
    if len(jobs) == 1:
        job = jobs[0]
        if verb.startswith("submit "):  # submit --parent ID, submit --job-id ID
            instead = f"{verb.split()[1]} {job.id}"
        else:
            instead = f"{_helper(platform, jobs)} {verb} {job.id}" + (" --to DIR" if verb == "fetch" else "")
        return f"{word} is job {job.id} (its {_KIND.get(job.platform, job.platform)} id, {where}): use that id: {instead}"
    ids = ", ".join(r.id for r in jobs[:5]) + (" ..." if len(jobs) > 5 else "")
    return f"{word} is the platform's id of {len(jobs)} jobs ({ids}; {where}): give {verb} the id of the one you mean"


#: How a hint names a platform's own ids.
_KIND = {"slurm": "SLURM", "kubernetes": "Kubernetes", "docker": "Docker"}
