"""Reading a job's status files in ONE remote command (kubectl exec or ssh), and choosing among them.

TAO writes ``<results>/status.json`` or one per action (``<results>/train/status.json``).
:data:`READ_STATUS_SH` prints both kinds, whole up to :data:`TAIL_BYTES` (the last that many bytes of a larger
one; the text then starts with a ``#cut <size>`` line, so every reader can say so),
every file under a header line ``#status-file <size in bytes> <relative path>``
and every content line prefixed with ``|``, so no content (a torn last line
without its newline, a line that looks like a header) can be taken for a
header. :func:`split_files` turns that output back into ``{relative path: text}``;
:func:`pick` chooses the file to report.

The results folder is the script's ``$1``, never part of the script text:
Kubernetes runs :func:`read_argv` through ``kubectl exec POD -- ARGV``;
SLURM runs ``Connection.script(READ_STATUS_SH, [results_dir])``.
"""
from __future__ import annotations

import re

from ..errors import TaoError
from ..text import valid_text
from .statusfile import CUT, parse, stamp_key

#: Bytes read of each status file, from its end: the whole file of any real training (TAO writes about 1 KB an
#: epoch; per-step lines a few hundred KB), bounded for a runaway one. Metrics, best and --parent-kpi need them all.
TAIL_BYTES = 16 * 1024 * 1024
#: Status files read per folder (the top level plus the first action folders in glob order).
MAX_FILES = 16
HEADER = "#status-file "
TOP = "status.json"

#: $1: the results folder. Prints nothing when it holds no status file; always exits 0.
READ_STATUS_SH = r'''
d=$1; n=0
for f in "$d/status.json" "$d"/*/status.json; do
  [ -f "$f" ] || continue
  rel=${f#"$d"/}
  case $rel in *'
'*) continue ;; esac
  n=$((n + 1))
  [ "$n" -le 16 ] || break
  size=$(wc -c < "$f" | tr -d ' \t') || continue
  printf '#status-file %s %s\n' "$size" "$rel"
  tail -c 16777216 -- "$f" | sed 's/^/|/'
  echo
done
exit 0
'''

_REL = re.compile(r"(?:(?!\.\.?/)[^/]+/)?status\.json")  # the glob never yields . or ..


def read_argv(results_dir: str) -> list[str]:
    """The argv that prints the status files of ``results_dir`` (``kubectl exec POD -- <argv>``)."""
    if not isinstance(results_dir, str) or not results_dir.startswith("/") or any(
            ord(c) < 32 or ord(c) == 127 for c in results_dir):
        raise TaoError(f"cannot read training progress from {results_dir!r}: "
                       "it is read from an absolute folder on the cluster (the job's results_dir)")
    return ["sh", "-c", READ_STATUS_SH, "tao", results_dir]


#: ``$0``: :data:`READ_STATUS_SH`, ``$@``: the folders. Each folder's output follows a line :data:`FOLDER` (a content
#: line starts with ``|``, so none can be taken for it).
READ_MANY_SH = 'for d in "$@"; do echo "#status-folder"; sh -c "$0" tao "$d"; done; exit 0'
FOLDER = "#status-folder"


def read_many_argv(results_dirs: list[str]) -> list[str]:
    """The argv that prints the status files of every folder of ``results_dirs`` in ONE command (a sweep's
    trials on one host), each folder checked as :func:`read_argv` checks it; :func:`split_many` reads it."""
    for d in results_dirs:
        read_argv(d)
    return ["sh", "-c", READ_MANY_SH, READ_STATUS_SH, *results_dirs]


def split_many(output: str | None, n: int) -> list[dict[str, str]]:
    """:data:`READ_MANY_SH`'s output as each folder's :func:`split_files`, in order (``n`` folders; a folder its
    output lacks has none)."""
    parts: list[list[str]] = []
    for line in valid_text(output or "").split("\n"):  # checked once for every folder
        if line == FOLDER:
            parts.append([])
        elif parts:
            parts[-1].append(line)
    return [_split("\n".join(p)) for p in parts[:n]] + [{} for _ in range(n - len(parts[:n]))]


def split_files(output: str | None) -> dict[str, str]:
    """:data:`READ_STATUS_SH`'s output as ``{relative path: text}``; lines outside a file are ignored.

    A file larger than :data:`TAIL_BYTES` loses its first line (``tail -c``
    cut it mid-line), so no half line is ever parsed as a whole one, and starts with ``#cut <size>``
    (:func:`taobank.progress.statusfile.parse` reads it as ``StatusLog.cut_size``).
    """
    return _split(valid_text(output or ""))  # JSON text: a byte that was not UTF-8 is U+FFFD


def _split(text: str) -> dict[str, str]:
    files: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    current: list[str] | None = None
    for line in text.split("\n"):
        if line.startswith("|"):
            if current is not None:
                current.append(line[1:])
            continue
        current = None
        if not line.startswith(HEADER):
            continue
        size, _, rel = line[len(HEADER):].partition(" ")
        if _REL.fullmatch(rel) and size.isdigit() and rel not in files and len(files) < MAX_FILES:
            current = files[rel] = []
            sizes[rel] = int(size)
    out = {}
    for rel, lines in files.items():
        head = ""
        if sizes[rel] > TAIL_BYTES:
            lines, head = lines[1:], f"{CUT}{sizes[rel]}\n"
        out[rel] = head + "".join(ln + "\n" for ln in lines)
    return out


def _newest(text: str) -> tuple[int, ...]:
    keys = [k for k in (stamp_key(e.stamp) for e in parse(text).events) if k is not None]
    return max(keys) if keys else ()


def pick(files: dict[str, str], action: str | None = None) -> str | None:
    """The file to report, by this rule: ``<action>/status.json``, else the top-level ``status.json``,
    else the action folder whose newest line is the newest (files without a readable time last, then by
    name); None when there is none. A chosen file may be empty: training has just (re)started."""
    if action and f"{action}/{TOP}" in files:
        return f"{action}/{TOP}"
    if TOP in files:
        return TOP
    chosen, newest = None, None
    for rel in sorted(files):
        stamp = _newest(files[rel])
        if newest is None or stamp > newest:
            chosen, newest = rel, stamp
    return chosen
