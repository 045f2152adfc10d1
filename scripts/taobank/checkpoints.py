"""How TAO names and finds its checkpoints: read from ONE table (versions.yaml ``tao_checkpoints``).

Used by ``continue`` and ``--parent`` (:mod:`taobank.lineage`, over a results listing) and by the
platform code that resumes a replaced run (the shell function :func:`shell_finder`, rendered into the
SLURM batch script and the Kubernetes pod wrapper). Nothing here guesses a name per network: the
table says what every TAO Lightning trainer writes.
"""
from __future__ import annotations

import posixpath
import re
from typing import Iterable, Sequence

from . import pins
from .contract import ResultFile
from .errors import TaoError

#: Characters a pinned glob may hold (it is written into shell text unquoted).
_GLOB = re.compile(r"[A-Za-z0-9_.*-]+\Z")


def table() -> dict:
    """``tao_checkpoints`` of versions.yaml, checked (the globs reach shell text)."""
    t = dict(pins.resolve("tao_checkpoints"))
    for key in ("latest_glob", "epoch_glob"):
        if not _GLOB.match(str(t[key])):
            raise TaoError(f"versions.yaml tao_checkpoints.{key} {t[key]!r} has characters a file glob may not: fix it")
    return t


def resume_key() -> str:
    return str(table()["resume_setting"])


def resumes(action: str | None) -> bool:
    """Whether runs of ``action`` resume from a checkpoint (train does; evaluate/export run as given)."""
    return (action or "") in set(table()["resume_actions"])


def epoch_of(path: str) -> int | None:
    """The epoch TAO reads from a checkpoint's name (``model_epoch_011.pth`` -> 11), else None."""
    found = re.search(str(table()["epoch_regex"]), posixpath.basename(path))
    return int(found.group(1)) if found else None


def _fnmatch(name: str, glob: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(name, glob)


def latest(files: Iterable[ResultFile], action: str | None) -> ResultFile | None:
    """The checkpoint a run continues from, among a results listing (paths relative to the folder): the
    highest epoch of the table's epoch files in the folder or its action's sub-folder; a regular
    ``*_latest.pth`` (a copy, not the link) only when there is no epoch file. None when there is none."""
    t = table()
    where = {"", action or ""}
    mine = [f for f in files if posixpath.dirname(f.path) in where]
    epochs = [(epoch_of(f.path), f) for f in mine if _fnmatch(posixpath.basename(f.path), t["epoch_glob"])]
    epochs = [(e, f) for e, f in epochs if e is not None]
    if epochs:
        return max(epochs, key=lambda ef: (ef[0], ef[1].mtime))[1]
    links = [f for f in mine if _fnmatch(posixpath.basename(f.path), t["latest_glob"])]
    return max(links, key=lambda f: f.mtime) if links else None


def override(path: str) -> str:
    """The TAO override that resumes from ``path`` (``key=value`` after ``-e spec.yaml``)."""
    return f"{resume_key()}={path}"


def with_resume(argv: Sequence[str], path: str) -> list[str]:
    """``argv`` resuming from ``path``: an earlier resume override is replaced (Hydra refuses a key twice)."""
    key = resume_key() + "="
    return [a for a in argv if not a.startswith(key)] + [override(path)]


def shell_finder() -> str:
    """POSIX sh functions (bash and busybox sh too) built from the table:

    ``tao_latest_checkpoint FOLDER ACTION`` prints the newest complete checkpoint: the target of the
    ``*_latest.pth`` link (it moves only after a save finished), else the highest ``epoch_NNN``;
    nothing (status 1) when there is none. :func:`resume_set` then rewrites the caller's ``"$@"``.
    """
    t = table()
    key = resume_key()
    if not re.match(r"[A-Za-z0-9_.]+\Z", key):
        raise TaoError(f"versions.yaml tao_checkpoints.resume_setting {key!r} is not a dotted config key: fix it")
    return (
        "tao_latest_checkpoint() {  # $1 results folder, $2 action: newest complete checkpoint (versions.yaml tao_checkpoints)\n"
        '  for tao_d in "$1" "$1/$2"; do\n'
        f'    for tao_l in "$tao_d"/{t["latest_glob"]}; do\n'
        '      if [ -L "$tao_l" ]; then\n'
        '        tao_t=$(readlink -f -- "$tao_l" 2>/dev/null) || continue\n'
        '        if [ -f "$tao_t" ]; then printf \'%s\\n\' "$tao_t"; return 0; fi\n'
        "      fi\n"
        "    done\n"
        "  done\n"
        '  tao_best=""; tao_n=-1\n'
        '  for tao_d in "$1" "$1/$2"; do\n'
        f'    for tao_f in "$tao_d"/{t["epoch_glob"]}; do\n'
        '      [ -f "$tao_f" ] || continue\n'
        "      tao_e=$(printf '%s\\n' \"${tao_f##*/}\" | sed -n 's/.*epoch_0*\\([0-9][0-9]*\\).*/\\1/p')\n"
        '      if [ -n "$tao_e" ] && [ "$tao_e" -gt "$tao_n" ]; then tao_n=$tao_e; tao_best=$tao_f; fi\n'
        "    done\n"
        "  done\n"
        '  [ -n "$tao_best" ] && printf \'%s\\n\' "$tao_best"\n'
        "}\n"
    )


def resume_set(var: str = "tao_ckpt") -> str:
    """sh lines that rewrite ``"$@"`` to resume from ``$var``: an earlier resume override is dropped."""
    key = resume_key()
    return (
        f'if [ -n "${{{var}:-}}" ]; then\n'
        '  tao_i=$#\n'
        '  while [ "$tao_i" -gt 0 ]; do\n'
        f'    tao_a=$1; shift; tao_i=$((tao_i - 1))\n'
        f'    case $tao_a in {key}=*) ;; *) set -- "$@" "$tao_a" ;; esac\n'
        "  done\n"
        f'  set -- "$@" "{key}=${var}"\n'
        f'  echo "tao: resuming from checkpoint ${var}"\n'
        "fi\n"
    )


__all__ = ["table", "resume_key", "resumes", "epoch_of", "latest", "override", "with_resume", "shell_finder",
           "resume_set"]
