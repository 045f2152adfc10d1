"""logs on Docker: the container's stdout and stderr (``docker logs``), or followed until it ends.

When status first sees a job end, the last lines of each stream are saved beside its record
(:func:`save`), so the logs outlive a later ``docker rm``.
"""
from __future__ import annotations

from typing import Callable, Mapping

from ...core import jobfiles
from ...errors import TaoError
from ...run import Result
from . import engine as eng
from ...records import Record

#: Lines of each stream kept beside the record when the job ends.
SAVED_TAIL = 2000
SAVED = "container-logs.json"


def save(rec: Record, e: eng.Engine) -> None:
    """Keep the finished job's last lines (best effort: a container already gone has nothing to give)."""
    save_many([(rec, e)])


def save_many(ended: list[tuple[Record, eng.Engine]], read: Mapping[str, Result] | None = None) -> None:
    """:func:`save` of several finished jobs (``(record, its engine)``): every log read (``read``: the tails of
    :data:`SAVED_TAIL` lines already read this status, by job id: not read again), then every copy kept at once."""
    read = read or {}
    said = []
    for rec, e in ended:
        got = read.get(rec.id)
        if got is None or got.returncode != 0:  # not read yet, or that read failed: read now
            got = e.run(["logs", "--tail", str(SAVED_TAIL), eng.container_of(rec)], check=False, what=f"{e.name} logs")
        said.append(got)
    saved = jobfiles.save_logs_each([(rec, SAVED, {"stdout": res.stdout, "stderr": res.stderr})
                                     for (rec, _), res in zip(ended, said) if res.returncode == 0])
    for kept in saved:  # as saving them one by one: those before a refused folder are kept, then it raises
        if isinstance(kept, TaoError):
            raise kept


def read(rec: Record, tail: int) -> tuple[dict[str, str], str]:
    """(``{"stdout": ..., "stderr": ...}``, source): the last ``tail`` lines of each stream (stderr only when it has
    any), live from the container, or "saved" when the container is gone."""
    e = eng.Engine.of(rec)
    name = eng.container_of(rec)
    res = e.run(["logs", "--tail", str(tail), name], check=False, what=f"{e.name} logs")
    if not res.ok:
        if "no such container" in (res.stderr or "").lower():
            saved = jobfiles.read_log_streams(rec.id, SAVED, tail, ("stdout", "stderr"))
            if saved is not None:
                return {k: v for k, v in saved.items() if v or k == "stdout"}, "saved"
            raise TaoError(f"job {rec.id}: its container {name} is gone (removed outside the bank) and no copy of "
                           f"its logs was saved; its results folder {rec.results_dir} may hold its own output")
        raise TaoError(eng.explain(e.name, res.stderr, f"{e.name} logs", res.returncode))
    return {"stdout": res.stdout, **({"stderr": res.stderr} if res.stderr else {})}, "live"


def follow(rec: Record, tail: int | None, emit: Callable[[str, str], None]) -> int:
    """``docker logs --follow``: stdout through ``emit``, stderr straight to ours; returns when the container ends."""
    e = eng.Engine.of(rec)
    words = ["logs", "--follow"] + (["--tail", str(tail)] if tail else []) + [eng.container_of(rec)]
    rc = e.stream(words, lambda text: emit("stdout", text))
    if rc != 0:
        raise TaoError(f"{e.name} logs --follow {eng.container_of(rec)} ended with exit {rc}: is the container "
                       f"still there? (tao_docker.py status {rec.id})")
    return 0
