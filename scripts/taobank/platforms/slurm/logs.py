"""logs on SLURM: the tails of main.out/main.err (and of the image conversion), or a follow by offsets."""
from __future__ import annotations

import dataclasses
import posixpath
import secrets as _secrets
import time
from typing import Callable

from ...core import platform
from ... import states
from ...errors import TaoError
from . import facts, observe, remote
from .ssh import Connection
from ...records import Record


def logs(job_id: str, *, lines: int = 200, conn: Connection | None = None) -> dict[str, str]:
    """Last ``lines`` of main.out and main.err (tracebacks are on stderr)."""
    rec = platform.load_for(job_id, facts.PLATFORM, "logs")
    b = facts.require_submitted(rec)
    conn = conn or Connection()
    out_f, err_f = posixpath.join(b.log_dir, "main.out"), posixpath.join(b.log_dir, "main.err")
    res = conn.script(remote.LOGS, [str(int(lines)), out_f, err_f], what="tail logs", retry_on_drop=True)
    body = res.stdout.split("@@out\n", 1)[-1]
    out_text, _, err_text = body.partition("@@err\n")
    out = {"main.out": out_text, "main.err": err_text, "log_dir": b.log_dir}
    for kind, what, log in (("convert", "conversion log", b.convert_log),
                            ("prefetch", "prefetch log", b.prefetch_log)):  # the helper jobs it waited for
        if log:
            tails = observe.sections(conn.script(remote.TAIL_FILES, [str(int(lines) * 200), log], what=what).stdout,
                                     "@@file ")
            out.update({f"{kind}_log": log, kind: "".join(tails.get(log, "").splitlines(keepends=True)[-int(lines):])})
    return out


def follow(job_id: str, *, on_chunk: Callable[[str, str], None], conn: Connection | None = None,
           interval: float = 3.0, sleep: Callable[[float], None] = time.sleep, tail: int | None = None) -> Record:
    """Stream main.out/main.err until the job is terminal: from the start, or from the last ``tail`` lines; the
    record as last seen (its state the one the backend said last)."""
    rec = platform.load_for(job_id, facts.PLATFORM, "logs")
    b = facts.require_submitted(rec)
    conn = conn or Connection()
    out_f, err_f = posixpath.join(b.log_dir, "main.out"), posixpath.join(b.log_dir, "main.err")
    offs = [0, 0]
    first = [f"t{int(tail)}"] * 2 if tail else None
    polls = 0
    while True:
        done = rec.state in states.TERMINAL
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
        if polls % 3 == 0 or polls == 1:  # only whether it ended: the record is the core's (status marks it)
            seen = observe.observe([rec], {"conn": conn})
            if seen and seen[0].state in states.TERMINAL:
                rec = dataclasses.replace(rec, state=seen[0].state)
                continue  # one last read
        sleep(interval)


def status_files(rec: Record, *, conn: Connection | None = None) -> dict[str, str]:
    """TAO's status files in the job's results folder, ONE remote command (also after the job ended)."""
    from ...progress import READ_STATUS_SH, split_files
    from .results_access import location

    res = (conn or Connection()).script(READ_STATUS_SH, [location(rec).folder], what="read status.json",
                                        retry_on_drop=True)
    return split_files(res.stdout)


#: $1 a file of a search's folder: its text, nothing when it does not exist yet (capped: a journal of 10,000
#: trials is a few MB).
READ_SEARCH_FILE = r'''
f=$1
[ -f "$f" ] || exit 0
head -c 67108864 -- "$f"
'''


def search_file(rec: Record, path: str, *, conn: Connection | None = None) -> str:
    """A file of the search ``rec`` is a trial of (the study's journal), ONE remote command; only a file in the
    folder the record names (``search_dir``)."""
    folder = facts.SlurmFacts.of(rec).search_dir
    if not folder.startswith("/") or posixpath.dirname(path) != folder.rstrip("/") or "\n" in path:
        raise TaoError(f"job {rec.id} is not a trial of a search (its record names no search folder)")
    res = (conn or Connection()).script(READ_SEARCH_FILE, [path], what="read the study's journal",
                                        retry_on_drop=True)
    return res.stdout
