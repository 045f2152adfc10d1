"""The shell side of artifacts, fetch and prune: constant POSIX scripts, the same on every platform.

Kubernetes runs them in a short-lived reader pod (``kubectl exec POD -- sh -c
SCRIPT tao ARG...``), SLURM over the one SSH connection
(``Connection.script``). They run under busybox sh and a login node's
GNU tools alike: ``find``, ``stat -c``, ``sha256sum``, ``tar``. The folder is
always ``$1`` and every name a ``./`` path, so nothing a user or a training
wrote can be read as an option or as code. Names holding a newline or a
backslash are left out (a line protocol cannot carry them, and GNU tar reads
backslashes in names as escapes). The parsers here turn the output back
into :class:`~taobank.contract.ResultFile` values and refuse what they do
not recognise.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import BinaryIO, ContextManager, Protocol

from .contract import ResultFile, ResultsListing, Transfer
from .errors import TaoError
from .paths import is_member
from .progress.remote import READ_STATUS_SH, split_files
from .run import Result, last_line
from .tarstream import extract

#: $1: the results folder. "@@missing" when it does not exist; else "@@files", one "<size> <mtime> ./<name>"
#: line per regular file (no link is followed), then per symbolic link whose target is a regular file inside
#: the folder "@@link ./<name>" and "@@to ./<target>" (the target relative to the folder: TAO's
#: ``*_latest.pth`` link, which taobank.checkpoints.latest reads), then "@@status" and TAO's status files
#: (progress.remote.READ_STATUS_SH, the same $1).
LIST_RESULTS = r'''
if [ ! -d "$1" ]; then echo "@@missing"; exit 0; fi
cd -- "$1" || exit 3
echo "@@files"
find . -type f -exec sh -c '
  for f do
    case $f in *"
"*|*\\*) continue ;; esac
    stat -c "%s %Y %n" "$f" 2>/dev/null
  done' tao-stat {} +
root=$(pwd -P)
find . -type l -exec sh -c '
  root=$1; shift
  for f do
    case $f in *"
"*|*\\*) continue ;; esac
    t=$(readlink -f -- "$f" 2>/dev/null) || continue
    [ -f "$t" ] || continue
    case $t in "$root"/*) ;; *) continue ;; esac
    case $t in *"
"*|*\\*) continue ;; esac
    printf "@@link %s\n@@to ./%s\n" "$f" "${t#"$root"/}"
  done' tao-link "$root" {} +
echo "@@status"
''' + READ_STATUS_SH

#: $1: the results folder, then the relative paths asked for (none: everything). Per regular file under
#: them: "<size> <mtime> <sha256> ./<name>"; a path that is missing: "@@absent P"; a path that leaves the
#: folder (through a symbolic link): "@@outside P"; a path with a part find could not read (a subfolder
#: without permission): "@@unreadable P" after the files it could read (a note, not a failed fetch).
FILE_FACTS = r'''
[ -d "$1" ] || { echo "the results folder $1 does not exist" >&2; exit 3; }
cd -- "$1" || exit 3
root=$(pwd -P)
shift
[ $# -gt 0 ] || set -- .
for p do
  if [ "$p" = . ]; then q=.; else q=./$p; fi
  if [ ! -e "$q" ] && [ ! -L "$q" ]; then echo "@@absent $p"; continue; fi
  if [ -L "$q" ]; then echo "@@outside $p"; continue; fi
  up=$(cd -P -- "$(dirname -- "$q")" && pwd -P) || { echo "@@absent $p"; continue; }
  case $up in "$root" | "$root"/*) ;; *) echo "@@outside $p"; continue ;; esac
  find "$q" -type f -exec sh -c '
    for f do
      case $f in *"
"*|*\\*) continue ;; esac
      s=$(stat -c "%s %Y" "$f") && h=$(sha256sum < "$f") && echo "$s ${h%% *} $f"
    done' tao-sum {} + 2>/dev/null || echo "@@unreadable $p"
done
'''

#: $1: the results folder; stdin: the "./name" of each file, one a line. Writes a tar of exactly those
#: files to stdout (names are read by the shell, never by tar, so none is an option).
TAR_FILES = r'''
cd -- "$1" || exit 3
set --
while IFS= read -r f; do
  case $f in ./*) ;; *) echo "refused name: $f" >&2; exit 4 ;; esac
  case /$f/ in */../*) echo "refused name: $f" >&2; exit 4 ;; esac
  set -- "$@" "$f"
done
[ $# -gt 0 ] || { echo "no files to send" >&2; exit 5; }
exec tar -c -f - "$@"
'''

#: $1: the job's own results folder, $2: the name it must have (the job id). Deletes it only when it is a
#: directory (not a link) of that name: "@@removed", or "@@gone" when it is not there.
REMOVE_FOLDER = r'''
d=$1
case $d in /?*) ;; *) echo "refused: $d is not an absolute folder" >&2; exit 4 ;; esac
if [ ! -e "$d" ] && [ ! -L "$d" ]; then echo "@@gone"; exit 0; fi
if [ -L "$d" ] || [ ! -d "$d" ]; then echo "refused: $d is not a directory" >&2; exit 4; fi
[ "${d##*/}" = "$2" ] || { echo "refused: $d is not named $2" >&2; exit 5; }
rm -rf -- "$d" || exit 6
echo "@@removed"
'''

#: prune --keep. $1: the job's own results folder, $2: the name it must have (the job id), then per file a mode
#: word and a "./path": ``k:SIZE`` a file kept (checked first: a regular file of that size, else nothing is
#: deleted), ``d`` a file or link deleted (never a folder, never through a link out of the folder). Prints
#: "@@deleted N", then "@@kept <size> <mtime> <sha256> ./path" of each kept file after the deletion.
REMOVE_FILES = r'''
d=$1; name=$2; shift 2
case $d in /?*) ;; *) echo "refused: $d is not an absolute folder" >&2; exit 4 ;; esac
if [ -L "$d" ] || [ ! -d "$d" ]; then echo "refused: $d is not a directory" >&2; exit 4; fi
[ "${d##*/}" = "$name" ] || { echo "refused: $d is not named $name" >&2; exit 5; }
cd -- "$d" || exit 3
root=$(pwd -P)
inside() {
  case $1 in ./*) ;; *) echo "refused name: $1" >&2; exit 4 ;; esac
  case /$1/ in */../*) echo "refused name: $1" >&2; exit 4 ;; esac
  up=$(cd -P -- "$(dirname -- "$1")" 2>/dev/null && pwd -P) || return 1
  case $up in "$root" | "$root"/*) return 0 ;; esac
  echo "refused: $1 leaves the folder" >&2; exit 4
}
while [ $# -ge 2 ]; do
  mode=$1; f=$2; shift 2
  case $mode in
    k:*) inside "$f" || { echo "kept file $f is missing: nothing was deleted" >&2; exit 7; }
         if [ -L "$f" ] || [ ! -f "$f" ] || [ "$(stat -c %s -- "$f")" != "${mode#k:}" ]; then
           echo "kept file $f is not the file listed: nothing was deleted" >&2; exit 7; fi
         kept="${kept:+$kept
}$f" ;;
    d) inside "$f" || continue
       if [ -L "$f" ] || [ -f "$f" ]; then rm -f -- "$f" || exit 6; n=$((${n:-0} + 1)); fi ;;
    *) echo "refused mode: $mode" >&2; exit 4 ;;
  esac
done
echo "@@deleted ${n:-0}"
[ -n "${kept:-}" ] || exit 0
printf '%s
' "$kept" | while IFS= read -r f; do
  s=$(stat -c "%s %Y" -- "$f") && h=$(sha256sum < "$f") && echo "@@kept $s ${h%% *} $f"
done
'''

#: How long one text command may run: FILE_FACTS hashes every file it sends (tens of GB of checkpoints).
TEXT_TIMEOUT_S = 3600

_FILE = re.compile(r"(\d{1,20}) (\d{1,20}) \./(.+)")
_FACT = re.compile(r"(\d{1,20}) (\d{1,20}) ([0-9a-f]{64}) \./(.+)")


def parse_listing(folder: str, text: str, *, status: bool) -> ResultsListing:
    """:data:`LIST_RESULTS`' output as a listing; lines that are not a file of the folder are skipped."""
    head, _, rest = (text or "").partition("@@status\n")
    lines = head.splitlines()
    if "@@missing" in lines[:1]:
        return ResultsListing(folder, exists=False)
    if "@@files" not in lines:
        raise TaoError(f"listing {folder} gave an answer that is not a listing: {lines[-1] if lines else '(none)'}")
    files = []
    links: dict[str, str] = {}
    body = lines[lines.index("@@files") + 1:]
    for i, line in enumerate(body):
        m = _FILE.fullmatch(line)
        if m and is_member(m[3]):
            files.append(ResultFile(m[3], int(m[1]), float(m[2])))
        elif line.startswith("@@link ./") and i + 1 < len(body) and body[i + 1].startswith("@@to ./"):
            name, target = line[len("@@link ./"):], body[i + 1][len("@@to ./"):]
            if is_member(name) and is_member(target):
                links[name] = target
    files.sort(key=lambda f: f.path)
    return ResultsListing(folder, files, split_files(rest) if status else {}, links=dict(sorted(links.items())))


def parse_facts(folder: str, text: str, notes: list[str] | None = None) -> list[ResultFile]:
    """:data:`FILE_FACTS`' output as files with their sha256; a path outside or absent is one-line TaoError;
    a path find could not wholly read adds a line to ``notes``."""
    out: dict[str, ResultFile] = {}
    for line in (text or "").splitlines():
        if line.startswith("@@unreadable ") and notes is not None:
            what = "the folder" if line[13:] == "." else line[13:]
            notes.append(f"part of {what} in {folder} could not be read (permissions): its readable files were "
                         "fetched; fix the permissions on the cluster and fetch again for the rest")
            continue
        if line.startswith("@@absent "):
            raise TaoError(f"{line[9:]} is not in the results folder {folder}: see tao_jobs.py artifacts ID")
        if line.startswith("@@outside "):
            raise TaoError(f"{line[10:]} is a link or leads out of the results folder {folder}: refused")
        m = _FACT.fullmatch(line)
        if m and is_member(m[4]):
            out[m[4]] = ResultFile(m[4], int(m[1]), float(m[2]), sha256=m[3])
    return [out[k] for k in sorted(out)]


# ------------------------------------------------------------------ the verbs' remote steps, over any shell
class Shell(Protocol):
    """Where the scripts run: a reader pod (``kubectl exec``) or the login host (ssh)."""

    def text(self, script: str, args: list[str], *, what: str) -> Result:
        """Run ``sh -c script tao args...``; its result (never raises on a non-zero exit)."""

    def stream(self, script: str, args: list[str], *, stdin: str, what: str) -> ContextManager[BinaryIO]:
        """Run it with ``stdin`` and its output as a binary stream (:func:`taobank.run.pipe`)."""


def _checked(res: Result, what: str) -> str:
    if not res.ok:
        raise TaoError(f"{what} failed (exit {res.returncode}): {last_line(res.stderr or res.stdout)}")
    return res.stdout


def list_folder(shell: Shell, folder: str, *, status: bool) -> ResultsListing:
    """:data:`LIST_RESULTS` in one command, parsed."""
    what = f"listing {folder}"
    return parse_listing(folder, _checked(shell.text(LIST_RESULTS, [folder], what=what), what), status=status)


#: $1.. results folders: each one's :data:`LIST_RESULTS` answer under "@@folder <path>", then "@@rc <its exit>".
LIST_MANY = ("for d do printf '@@folder %s\\n' \"$d\"; sh -c " + shlex.quote(LIST_RESULTS)
             + " tao \"$d\"; printf '\\n@@rc %s\\n' \"$?\"; done")


def list_folders(shell: Shell, folders: list[str], *, status: bool) -> list[ResultsListing | TaoError]:
    """Several folders with :data:`LIST_MANY` in ONE command (a sweep's trials); a folder that could not be listed
    is its one-line TaoError in its place, a failed command raises."""
    if any("\n" in f for f in folders):
        raise TaoError("a results folder with a newline in its name cannot be listed")
    what = f"listing {len(folders)} results folders"
    text = _checked(shell.text(LIST_MANY, folders, what=what), what)
    parts: dict[str, tuple[str, str]] = {}
    for chunk in re.split(r"^@@folder ", text, flags=re.M)[1:]:
        name, _, rest = chunk.partition("\n")
        body, _, rc = rest.rpartition("\n@@rc ")
        parts[name] = (body, rc.strip())
    out: list[ResultsListing | TaoError] = []
    for folder in folders:
        body, rc = parts.get(folder, ("", "missing"))
        if rc != "0":
            out.append(TaoError(f"listing {folder} failed (exit {rc}): {last_line(body) or 'no answer'}"))
            continue
        try:
            out.append(parse_listing(folder, body, status=status))
        except TaoError as exc:
            out.append(exc)
    return out


def fetch_files(shell: Shell, folder: str, paths: list[str], into: Path, transfer: Transfer) -> list[ResultFile]:
    """Two commands: the files' facts (sizes, sha256), then a tar of exactly those files, written under ``into``."""
    notes: list[str] = []
    facts = parse_facts(folder, _checked(shell.text(FILE_FACTS, [folder, *paths], what=f"reading {folder}"),
                                         f"reading {folder}"), notes)
    for line in notes:
        note = getattr(transfer, "note", None)
        if note is not None:
            note(line)
    transfer.start(facts)
    names = "".join(f"./{f.path}\n" for f in facts)
    with shell.stream(TAR_FILES, [folder], stdin=names, what=f"sending files of {folder}") as out:
        extract(out, into, {f.path: f.size for f in facts}, transfer.advance, what=f"the download from {folder}")
    return facts


_KEPT = re.compile(r"@@kept (\d{1,20}) (\d{1,20}) ([0-9a-f]{64}) \./(.+)")


def remove_files(shell: Shell, folder: str, name: str, delete: list[str], keep: dict[str, int]) -> list[ResultFile]:
    """:data:`REMOVE_FILES`: delete ``delete`` (paths relative to the job's own ``folder``, named ``name``) after
    checking each ``keep`` file is there at its listed size; the kept files' facts read after the deletion."""
    args = [folder, name]
    for path, size in keep.items():
        args += [f"k:{int(size)}", f"./{path}"]
    for path in delete:
        args += ["d", f"./{path}"]
    res = shell.text(REMOVE_FILES, args, what=f"deleting checkpoints in {folder}")
    if not res.ok or "@@deleted" not in res.stdout:
        raise TaoError(f"deleting checkpoints in {folder} refused or failed on the cluster (exit {res.returncode}): "
                       f"{last_line(res.stderr or res.stdout)}")
    out = []
    for line in res.stdout.splitlines():
        m = _KEPT.fullmatch(line)
        if m:
            out.append(ResultFile(m.group(4), int(m.group(1)), float(m.group(2)), sha256=m.group(3)))
    return out


def remove_folder(shell: Shell, folder: str, name: str) -> str:
    """:data:`REMOVE_FOLDER`: the note for the prune line; a refusal on the cluster is one-line TaoError."""
    res = shell.text(REMOVE_FOLDER, [folder, name], what=f"deleting {folder}")
    lines = res.stdout.splitlines()
    if res.ok and "@@removed" in lines:
        return f"deleted {folder}"
    if res.ok and "@@gone" in lines:
        return f"{folder} was not there (deleted already): nothing to do"
    raise TaoError(f"deleting {folder} refused or failed on the cluster (exit {res.returncode}): "
                   f"{last_line(res.stderr or res.stdout)}")
