"""How TAO names and finds its checkpoints: read from ONE table (versions.yaml ``tao_checkpoints``).

Used by ``continue`` and ``--parent`` (:mod:`taobank.lineage`, over a results listing) and by the
platform code that resumes a replaced run (the shell function :func:`shell_finder`, rendered into the
SLURM batch script and the Kubernetes pod wrapper). Nothing here guesses a name per network: the
table says what every TAO Lightning trainer writes.
"""
from __future__ import annotations

import posixpath
import re
from typing import Iterable, Mapping, Sequence

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
    """The epoch TAO reads from a checkpoint's name (``model_epoch_011.pth`` -> 11), else None; the last
    match of the table's regex, as the shell finder's ``sed`` reads it."""
    found = list(re.finditer(str(table()["epoch_regex"]), posixpath.basename(path)))
    return int(found[-1].group(1)) if found else None


def _fnmatch(name: str, glob: str) -> bool:
    """A POSIX sh glob on one name: ``*`` does not match a leading dot."""
    import fnmatch

    return fnmatch.fnmatchcase(name, glob) and (glob.startswith(".") or not name.startswith("."))


def latest(files: Iterable[ResultFile], action: str | None,
           links: Mapping[str, str] | None = None) -> ResultFile | None:
    """The checkpoint a run continues from, among a results listing (paths relative to the folder). The ONE
    rule, the same as :func:`shell_finder` (a property test holds them together); the folder is searched,
    then its action's sub-folder, names in sorted order:

    1. the target of a ``*_latest.pth`` link (``links``: the listing's links to regular files inside the
       folder): TAO moves it only after a save completed, so a save cut short is never chosen;
    2. else the highest epoch of the regular epoch files (the first of equals);
    3. else a regular ``*_latest.pth`` (a copy, not a link).

    None when there is none."""
    t = table()
    files = list(files)
    dirs = [""] + ([action] if action else [])
    by_path = {f.path: f for f in files}

    def in_order(paths: Iterable[str], glob: str) -> list[str]:
        return [p for d in dirs for p in sorted(paths)
                if posixpath.dirname(p) == d and _fnmatch(posixpath.basename(p), glob)]

    for link in in_order((links or {}).keys(), t["latest_glob"]):
        target = (links or {})[link]
        return by_path.get(target) or ResultFile(target, 0, 0.0)
    best: tuple[int, str] | None = None
    for path in in_order(by_path, t["epoch_glob"]):
        epoch = epoch_of(path)
        if epoch is not None and (best is None or epoch > best[0]):
            best = (epoch, path)
    if best is not None:
        return by_path[best[1]]
    copies = in_order(by_path, t["latest_glob"])
    return by_path[copies[0]] if copies else None


def override(path: str) -> str:
    """The TAO override that resumes from ``path`` (``key=value`` after ``-e spec.yaml``)."""
    return f"{resume_key()}={path}"


def with_resume(argv: Sequence[str], path: str) -> list[str]:
    """``argv`` resuming from ``path``: an earlier resume override is replaced (Hydra refuses a key twice)."""
    key = resume_key() + "="
    return [a for a in argv if not a.startswith(key)] + [override(path)]


def resumed_from(argv: Sequence[str]) -> list[str]:
    """The checkpoints ``argv``'s resume overrides name (what :func:`with_resume` replaces)."""
    key = resume_key() + "="
    return [a[len(key):] for a in argv if a.startswith(key)]


def _epoch_sed() -> str:
    """The table's epoch regex as a ``sed`` expression printing the epoch (the last match, leading zeros off)."""
    found = re.fullmatch(r"([A-Za-z0-9_-]+)\(\[0-9\]\+\)", str(table()["epoch_regex"]))
    if not found:
        raise TaoError(f"versions.yaml tao_checkpoints.epoch_regex {table()['epoch_regex']!r} must be a literal "
                       "followed by ([0-9]+): fix it")
    return f"s/.*{found.group(1)}0*\\([0-9][0-9]*\\).*/\\1/p"


def shell_finder() -> str:
    """POSIX sh functions (bash and busybox sh too) built from the table:

    ``tao_latest_checkpoint FOLDER ACTION`` prints the newest complete checkpoint by the ONE rule of
    :func:`latest`: the target of a ``*_latest.pth`` link (inside the folder), else the highest
    ``epoch_NNN`` regular file, else a regular ``*_latest.pth``; nothing (status 1) when there is none.
    A linked action sub-folder is not searched (a results listing does not follow it either).
    :func:`resume_set` then rewrites the caller's ``"$@"``.
    """
    t = table()
    key = resume_key()
    if not re.match(r"[A-Za-z0-9_.]+\Z", key):
        raise TaoError(f"versions.yaml tao_checkpoints.resume_setting {key!r} is not a dotted config key: fix it")
    return (
        "tao_latest_checkpoint() {  # $1 results folder, $2 action: newest complete checkpoint (versions.yaml tao_checkpoints)\n"
        '  tao_root=$(cd -P -- "$1" 2>/dev/null && pwd -P) || return 1\n'
        '  set -- "$1" "$1/$2"\n'
        '  if [ -z "${2##*/}" ] || [ -L "$2" ]; then set -- "$1"; fi\n'
        '  for tao_d do\n'
        f'    for tao_l in "$tao_d"/{t["latest_glob"]}; do\n'
        '      [ -L "$tao_l" ] || continue\n'
        '      tao_t=$(readlink -f -- "$tao_l" 2>/dev/null) || continue\n'
        '      case $tao_t in "$tao_root"/*) ;; *) continue ;; esac\n'
        '      if [ -f "$tao_t" ]; then printf \'%s\\n\' "$tao_t"; return 0; fi\n'
        "    done\n"
        "  done\n"
        '  tao_best=""; tao_n=-1\n'
        '  for tao_d do\n'
        f'    for tao_f in "$tao_d"/{t["epoch_glob"]}; do\n'
        '      [ -f "$tao_f" ] && [ ! -L "$tao_f" ] || continue\n'
        f"      tao_e=$(printf '%s\\n' \"${{tao_f##*/}}\" | sed -n '{_epoch_sed()}')\n"
        '      if [ -n "$tao_e" ] && [ "$tao_e" -gt "$tao_n" ]; then tao_n=$tao_e; tao_best=$tao_f; fi\n'
        "    done\n"
        "  done\n"
        '  if [ -n "$tao_best" ]; then printf \'%s\\n\' "$tao_best"; return 0; fi\n'
        '  for tao_d do\n'
        f'    for tao_l in "$tao_d"/{t["latest_glob"]}; do\n'
        '      if [ -f "$tao_l" ] && [ ! -L "$tao_l" ]; then printf \'%s\\n\' "$tao_l"; return 0; fi\n'
        "    done\n"
        "  done\n"
        "  return 1\n"
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


__all__ = ["table", "resume_key", "resumes", "epoch_of", "latest", "override", "with_resume", "resumed_from", "shell_finder",
           "resume_set"]
