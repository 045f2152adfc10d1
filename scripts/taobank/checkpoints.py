"""How TAO names and finds its checkpoints, and how a run resumes: read from ONE table (versions.yaml
``tao_checkpoints``), one row per network family (Lightning networks, mmengine's bevfusion, OpenPCDet's
pointpillars). Which family a network is in is TAO's own fact, generated into ``schemas/tao_networks.json``
(:func:`taobank.tao_command.checkpoint_family`); a network the pinned TAO lacks is in the default family.

Used by ``continue`` and ``--parent`` (:mod:`taobank.campaign.lineage`, over a results listing) and by the
platform code that resumes a replaced run (the shell function :func:`shell_finder`, rendered into the
SLURM batch script and the Kubernetes pod wrapper). Nothing here guesses a name per network: the
table says what each family's trainer writes and which network is in which family.
"""
from __future__ import annotations

import posixpath
import re
from typing import Iterable, Mapping, Sequence

from . import pins, tao_command
from .contract import ResultFile
from .errors import TaoError

#: Characters a pinned glob may hold (it is written into shell text unquoted).
_GLOB = re.compile(r"[A-Za-z0-9_.*-]*\Z")
#: A pinned override key (written into shell text unquoted).
_KEY = re.compile(r"[A-Za-z0-9_.]*\Z")


def family(network: str | None) -> str:
    """The family of ``network`` (``schemas/tao_networks.json``, from TAO's facts); a network the pinned TAO does
    not have (a site's custom build): versions.yaml ``tao_checkpoints.default_family``."""
    t = pins.resolve("tao_checkpoints")
    found = tao_command.checkpoint_family(network)
    if found is not None and found not in (t.get("families") or {}):
        raise TaoError(f"schemas/tao_networks.json files {network} in checkpoint family {found!r}, which versions.yaml "
                       "tao_checkpoints.families lacks: add the family's names there")
    return found or str(t["default_family"])


def table(network: str | None = None) -> dict:
    """``tao_checkpoints`` of versions.yaml with the row of ``network``'s family, checked (globs and keys reach
    shell text)."""
    whole = dict(pins.resolve("tao_checkpoints"))
    t = {k: v for k, v in whole.items() if k != "families"}
    t.update(whole["families"][family(network)])
    for key in ("latest_glob", "epoch_glob"):
        if not _GLOB.match(str(t[key])):
            raise TaoError(f"versions.yaml tao_checkpoints {key} {t[key]!r} has characters a file glob may not: fix it")
    for key in ("resume_path", "resume_flag"):
        if not _KEY.match(str(t[key])) or (key == "resume_path" and not t[key]):
            raise TaoError(f"versions.yaml tao_checkpoints {key} {t[key]!r} is not a dotted config key: fix it")
    return t


def resume_keys(network: str | None = None) -> list[str]:
    """The override keys that say where a run of ``network`` resumes from (an earlier one is replaced)."""
    t = table(network)
    return [k for k in (t["resume_flag"], t["resume_path"]) if k]


def resumes(action: str | None) -> bool:
    """Whether runs of ``action`` resume from a checkpoint (train does; evaluate/export run as given)."""
    return (action or "") in set(pins.resolve("tao_checkpoints")["resume_actions"])


def _number(path: str, regex_key: str) -> int | None:
    found = list(re.finditer(str(pins.resolve("tao_checkpoints")[regex_key]), posixpath.basename(path)))
    return int(found[-1].group(1)) if found else None


def epoch_of(path: str) -> int | None:
    """The epoch in a checkpoint's name (``model_epoch_011_step_01200.pth`` -> 11), else None; the last match of
    the table's regex, as the shell finder's ``sed`` reads it."""
    return _number(path, "epoch_regex")


def step_of(path: str) -> int | None:
    """The step in a checkpoint's name (``model_epoch_011_step_01200.pth`` -> 1200), else None."""
    return _number(path, "step_regex")


def _fnmatch(name: str, glob: str) -> bool:
    """A POSIX sh glob on one name: ``*`` does not match a leading dot."""
    import fnmatch

    return fnmatch.fnmatchcase(name, glob) and (glob.startswith(".") or not name.startswith("."))


def latest(files: Iterable[ResultFile], action: str | None,
           links: Mapping[str, str] | None = None, network: str | None = None) -> ResultFile | None:
    """The checkpoint a run continues from, among a results listing (paths relative to the folder). The ONE
    rule, the same as :func:`shell_finder` (a property test holds them together); the folder is searched,
    then its action's sub-folder, names in sorted order, with the globs of ``network``'s family:

    1. the target of a ``*_latest.pth`` link (``links``: the listing's links to regular files inside the
       folder): TAO moves it only after a save completed, so a save cut short is never chosen;
    2. else the regular epoch file of the highest epoch, and of that epoch the highest step (the first of
       equals);
    3. else a regular ``*_latest.pth`` (a copy, not a link).

    None when there is none."""
    t = table(network)
    files = list(files)
    dirs = [""] + ([action] if action else [])
    by_path = {f.path: f for f in files}

    def in_order(paths: Iterable[str], glob: str) -> list[str]:
        return [p for d in dirs for p in sorted(paths)
                if glob and posixpath.dirname(p) == d and _fnmatch(posixpath.basename(p), glob)]

    for link in in_order((links or {}).keys(), t["latest_glob"]):
        target = (links or {})[link]
        return by_path.get(target) or ResultFile(target, 0, 0.0)
    best: tuple[int, int, str] | None = None
    for path in in_order(by_path, t["epoch_glob"]):
        epoch = epoch_of(path)
        step = step_of(path) or 0
        if epoch is not None and (best is None or (epoch, step) > best[:2]):
            best = (epoch, step, path)
    if best is not None:
        return by_path[best[2]]
    copies = in_order(by_path, t["latest_glob"])
    return by_path[copies[0]] if copies else None


def resume_args(path: str, network: str | None = None) -> list[str]:
    """The TAO overrides that resume a run of ``network`` from ``path`` (``key=value`` after ``-e spec.yaml``)."""
    t = table(network)
    return ([f"{t['resume_flag']}=true"] if t["resume_flag"] else []) + [f"{t['resume_path']}={path}"]


def override(path: str, network: str | None = None) -> str:
    """:func:`resume_args` as the words a person types."""
    return " ".join(resume_args(path, network))


def names_resume(words: Sequence[str], network: str | None = None) -> bool:
    """Whether ``words`` (a command's) hold a resume override already."""
    keys = resume_keys(network)
    return any(w.startswith(k + "=") for w in words for k in keys)


def with_resume(argv: Sequence[str], path: str, network: str | None = None) -> list[str]:
    """``argv`` resuming from ``path``: an earlier resume override is replaced (Hydra refuses a key twice)."""
    return [a for a in argv if not names_resume([a], network)] + resume_args(path, network)


def resumed_from(argv: Sequence[str], network: str | None = None) -> list[str]:
    """The checkpoints ``argv``'s resume overrides name (what :func:`with_resume` replaces)."""
    key = table(network)["resume_path"] + "="
    return [a[len(key):] for a in argv if a.startswith(key)]


def _sed(regex_key: str) -> str:
    """A table regex as a ``sed`` expression printing its number (the last match, leading zeros off)."""
    regex = str(pins.resolve("tao_checkpoints")[regex_key])
    found = re.fullmatch(r"([A-Za-z0-9_-]+)\(\[0-9\]\+\)", regex)
    if not found:
        raise TaoError(f"versions.yaml tao_checkpoints.{regex_key} {regex!r} must be a literal followed by ([0-9]+): "
                       "fix it")
    return f"s/.*{found.group(1)}0*\\([0-9][0-9]*\\).*/\\1/p"


def _latest_loop(glob: str, body: str) -> str:
    if not glob:  # the family writes no latest link
        return ""
    return ('  for tao_d do\n'
            f'    for tao_l in "$tao_d"/{glob}; do\n'
            f'{body}'
            "    done\n"
            "  done\n")


def shell_finder(network: str | None = None) -> str:
    """POSIX sh functions (bash and busybox sh too) built from the table row of ``network``'s family:

    ``tao_latest_checkpoint FOLDER ACTION`` prints the newest complete checkpoint by the ONE rule of
    :func:`latest`: the target of a ``*_latest.pth`` link (inside the folder), else the regular epoch file
    of the highest epoch and step, else a regular ``*_latest.pth``; nothing (status 1) when there is none.
    A linked action sub-folder is not searched (a results listing does not follow it either).
    :func:`resume_set` then rewrites the caller's ``"$@"``.
    """
    t = table(network)
    return (
        "tao_latest_checkpoint() {  # $1 results folder, $2 action: newest complete checkpoint (versions.yaml tao_checkpoints)\n"
        + ('  tao_root=$(cd -P -- "$1" 2>/dev/null && pwd -P) || return 1\n' if t["latest_glob"]
           else '  [ -d "$1" ] || return 1\n')
        + '  set -- "$1" "$1/$2"\n'
        '  if [ -z "${2##*/}" ] || [ -L "$2" ]; then set -- "$1"; fi\n'
        + _latest_loop(t["latest_glob"],
                       '      [ -L "$tao_l" ] || continue\n'
                       '      tao_t=$(readlink -f -- "$tao_l" 2>/dev/null) || continue\n'
                       '      case $tao_t in "$tao_root"/*) ;; *) continue ;; esac\n'
                       '      if [ -f "$tao_t" ]; then printf \'%s\\n\' "$tao_t"; return 0; fi\n')
        + '  tao_best=""; tao_n=-1; tao_m=-1\n'
        '  for tao_d do\n'
        f'    for tao_f in "$tao_d"/{t["epoch_glob"]}; do\n'
        '      [ -f "$tao_f" ] && [ ! -L "$tao_f" ] || continue\n'
        f"      tao_e=$(printf '%s\\n' \"${{tao_f##*/}}\" | sed -n '{_sed('epoch_regex')}')\n"
        f"      tao_s=$(printf '%s\\n' \"${{tao_f##*/}}\" | sed -n '{_sed('step_regex')}')\n"
        '      [ -n "$tao_e" ] || continue\n'
        '      tao_s=${tao_s:-0}\n'
        '      if [ "$tao_e" -gt "$tao_n" ] || { [ "$tao_e" -eq "$tao_n" ] && [ "$tao_s" -gt "$tao_m" ]; }; then\n'
        '        tao_n=$tao_e; tao_m=$tao_s; tao_best=$tao_f\n'
        '      fi\n'
        "    done\n"
        "  done\n"
        '  if [ -n "$tao_best" ]; then printf \'%s\\n\' "$tao_best"; return 0; fi\n'
        + _latest_loop(t["latest_glob"],
                       '      if [ -f "$tao_l" ] && [ ! -L "$tao_l" ]; then printf \'%s\\n\' "$tao_l"; return 0; fi\n')
        + "  return 1\n"
        "}\n"
    )


def resume_set(var: str = "tao_ckpt", network: str | None = None) -> str:
    """sh lines that rewrite ``"$@"`` to resume from ``$var``: an earlier resume override is dropped."""
    t = table(network)
    drop = " | ".join(f"{k}=*" for k in resume_keys(network))
    flag = f' "{t["resume_flag"]}=true"' if t["resume_flag"] else ""
    return (
        f'if [ -n "${{{var}:-}}" ]; then\n'
        '  tao_i=$#\n'
        '  while [ "$tao_i" -gt 0 ]; do\n'
        f'    tao_a=$1; shift; tao_i=$((tao_i - 1))\n'
        f'    case $tao_a in {drop}) ;; *) set -- "$@" "$tao_a" ;; esac\n'
        "  done\n"
        f'  set -- "$@"{flag} "{t["resume_path"]}=${var}"\n'
        f'  echo "tao: resuming from checkpoint ${var}"\n'
        "fi\n"
    )


__all__ = ["table", "family", "resume_keys", "resumes", "epoch_of", "step_of", "latest", "resume_args", "names_resume", "override",
           "with_resume", "resumed_from", "shell_finder", "resume_set"]
