"""logs on Docker: the container's stdout and stderr (``docker logs``), or followed until it ends."""
from __future__ import annotations

from typing import Callable

from ..errors import TaoError
from . import engine as eng
from . import facts


def read(rec: dict, tail: int) -> dict[str, str]:
    """``{"stdout": ..., "stderr": ...}``: the last ``tail`` lines of each stream (stderr only when it has any)."""
    e = eng.Engine.of(rec)
    name = facts.container_of(rec)
    res = e.run(["logs", "--tail", str(tail), name], check=False, what=f"{e.name} logs")
    if not res.ok:
        if "no such container" in (res.stderr or "").lower():
            raise TaoError(f"job {rec['id']}: its container {name} is gone (removed outside the bank): its logs went "
                           f"with it; its results folder {rec.get('results_dir')} may hold the job's own output")
        raise TaoError(eng.explain(e.name, res.stderr, f"{e.name} logs", res.returncode))
    return {"stdout": res.stdout, **({"stderr": res.stderr} if res.stderr else {})}  # an empty stderr says nothing


def follow(rec: dict, tail: int | None, emit: Callable[[str, str], None]) -> int:
    """``docker logs --follow``: stdout through ``emit``, stderr straight to ours; returns when the container ends."""
    e = eng.Engine.of(rec)
    words = ["logs", "--follow"] + (["--tail", str(tail)] if tail else []) + [facts.container_of(rec)]
    rc = e.stream(words, lambda text: emit("stdout", text))
    if rc != 0:
        raise TaoError(f"{e.name} logs --follow {facts.container_of(rec)} ended with exit {rc}: is the container "
                       f"still there? (tao_docker.py status {rec['id']})")
    return 0
