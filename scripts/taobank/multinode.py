"""What every node of a multi-node job runs before and around TAO, so a node never trains alone (all platforms).

Given ``WORLD_SIZE``, TAO's entrypoint (nvidia_tao_pytorch/core/entrypoint.py ``launch``) checks the rendezvous
(core/distributed/validator.py ``validate_configs``: MASTER_ADDR must resolve, rank 0 must bind its port) and
rewrites the ``-e`` spec file IN PLACE (its ``train`` num_nodes/num_gpus/gpu_ids). Any exception there is
logged as ``[Multinode] Error overriding configs: ...`` then ``[Multinode] Using default configs.`` and the
node goes on with ``--nnodes=1``: for the networks TAO starts with torchrun (rtdetr, bevfusion, pointpillars)
that node trains alone, and the job may still end COMPLETE. Three causes, three answers:

* one spec file on shared storage, rewritten by every node at once (one node reads it while another has
  just truncated it), or a read-only one (a ConfigMap): each node gets its own copy in a node-local
  writable folder and the command names the copy (:func:`node_local_specs`);
* rank 0's name (``<job>-0.<service>`` on Kubernetes) not resolvable yet when a pod starts: the node waits
  until it resolves steadily (:data:`STEADY_ANSWERS` answers in a row), bounded
  (``multinode.rank0_name_wait_s``), and stops the job in one line when it never comes;
* any other fallback: the node's output is watched for TAO's line; the node stops its command and exits
  :data:`FALLBACK_EXIT`, so the job fails with that line instead of training on one node.

:data:`GUARD_SCRIPT` is the one script for this; each platform puts :func:`guard_argv` around the user's argv.
"""
from __future__ import annotations

import posixpath
import re
from typing import Callable, Sequence

from . import pins
from .tao_command import shell_words

#: The lines TAO logs when its multi-node set-up failed and the node falls back to one node (the first one
#: carries the reason). Matched as plain substrings of a log line.
FALLBACK_LINES = ("[Multinode] Error overriding configs", "[Multinode] Using default configs")
#: Exit codes of the guard's own stops (sysexits): a spec file it cannot copy, rank 0's name never resolved,
#: TAO fell back to one node.
COPY_EXIT = 66
NAME_EXIT = 69
FALLBACK_EXIT = 70
#: After a wait, how many answers in a row make rank 0's name count as resolved.
STEADY_ANSWERS = 3
#: The node-local folder of a job's spec copies is this prefix + the job id: /dev/shm is writable and per node on
#: every platform (the Kubernetes pod's own memory volume, the SLURM node's tmpfs, which every user's jobs on the
#: node share: so no folder of its own there, which another user would own).
LOCAL_PREFIX = "/dev/shm/tao-node-specs-"
#: TAO's spec option (argparse: ``-e X``, ``--experiment_spec_file X`` or ``--experiment_spec_file=X``).
SPEC_OPTIONS = ("-e", "--experiment_spec_file")
#: A value the bank can name again in shell text unchanged: no quote, space, expansion or glob character.
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+\Z")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")

# $1: seconds to wait for MASTER_ADDR's name (0: no wait); $2: the job's node count; $3: number of spec copies
# n; then n (source, copy) pairs; then the command. Values arrive as positional parameters only. One line (each
# fragment ends so that a space joins it to the next): an sbatch word carries no newline.
_GUARD_LINES = (
    'w=$1; nodes=$2; n=$3; shift 3; copies="";',
    'while [ "$n" -gt 0 ]; do',
    # copied under a name of this node's own, then renamed: nodes that share /dev/shm (several on one host) never
    # meet half a file or each other's create
    '  if ! (umask 077 && mkdir -p -- "${2%/*}" && cp -- "$1" "$2.${NODE_RANK:-x}.$$" && mv -f -- "$2.${NODE_RANK:-x}.$$" "$2"); then',
    f'    echo "tao: cannot copy the spec file $1 to this node\'s own $2 (TAO rewrites it on every node): fix the path" >&2; exit {COPY_EXIT};',
    '  fi;',
    # the spec's siblings are linked beside the copy: Hydra reads a spec's defaults (dataset/..., model/...) from
    # the folder TAO hands it (the copy's), and TAO rewrites only the file itself
    '  case "$1" in /*/*) sd=${1%/*} ;; /*) sd=/ ;; */*) sd=$PWD/${1%/*} ;; *) sd=$PWD ;; esac;',
    '  for x in "${sd%/}"/*; do',
    '    b=${x##*/}; if [ -e "$x" ] && [ "$b" != "${1##*/}" ]; then ln -s -- "$x" "${2%/*}/$b" 2>/dev/null; fi;',
    '  done;',
    '  copies=${2%/*/*}; shift 2; n=$((n - 1));',
    'done;',
    'tao_resolves() {',
    '  if command -v getent >/dev/null 2>&1; then getent ahostsv4 "$1" >/dev/null 2>&1;',
    '  else python3 -c "import socket,sys; socket.gethostbyname(sys.argv[1])" "$1" 2>/dev/null; fi;',
    '};',
    # A name that has just come up may still answer now and then not (a DNS replica or cache behind the others,
    # a slice rewritten): after a wait it must resolve STEADY_ANSWERS times in a row, a second apart, since TAO
    # asks once more and falls back on one miss.
    f'tao_steady() {{ k=0; while tao_resolves "$1"; do k=$((k + 1)); [ "$k" -ge {STEADY_ANSWERS} ] && return 0; sleep 1; done; return 1; }};',
    'if [ "$w" -gt 0 ] && ! command -v getent >/dev/null 2>&1 && ! command -v python3 >/dev/null 2>&1; then',
    '  echo "tao: warning: cannot check that rank 0\'s name resolves here (no getent or python3)" >&2; w=0;',
    'fi;',
    'if [ "$w" -gt 0 ] && [ -n "${MASTER_ADDR:-}" ] && ! tao_resolves "$MASTER_ADDR"; then',
    '  echo "tao: waiting up to $w s for rank 0\'s name $MASTER_ADDR to resolve";',
    '  s=$(date +%s);',
    '  until tao_steady "$MASTER_ADDR"; do',
    '    if [ $(( $(date +%s) - s )) -ge "$w" ]; then',
    '      echo "tao: rank 0\'s name $MASTER_ADDR did not resolve within $w s on node rank ${NODE_RANK:-?} of $nodes: '
    'the job stops rather than train on one node (check the job\'s headless Service and the cluster DNS)" >&2;',
    f'      exit {NAME_EXIT};',
    '    fi;',
    '    sleep 2;',
    '  done;',
    '  echo "tao: rank 0\'s name $MASTER_ADDR resolves";',
    'fi;',
    # The watch: the command's stdout and stderr each pass through awk unchanged (line by line); the first line of
    # TAO's fallback is kept in the private folder $d and the command gets TERM. Without mktemp, awk or a FIFO the
    # command runs unwatched (and its copies are still removed when it ends).
    'd=$(mktemp -d /dev/shm/.tao-node-XXXXXX 2>/dev/null) || d="";',
    'a1=""; a2="";',
    'watch=\'{ print; fflush() } !hit && (index($0, m1) || index($0, m2)) { hit = 1; s = $0; '
    'gsub(/\\033\\[[0-9;]*m/, "", s); print s > f; close(f); system("kill -TERM " p " 2>/dev/null") }\';',
    'if [ -n "$d" ] && command -v awk >/dev/null 2>&1 && mkfifo -- "$d/out" "$d/err" 2>/dev/null; then',
    '  "$@" > "$d/out" 2> "$d/err" &',
    '  cpid=$!;',
    '  (trap "" TERM INT; exec awk -v p="$cpid" -v f="$d/fell" -v m1="$M1" -v m2="$M2" "$watch" < "$d/out") &',
    '  a1=$!;',
    '  (trap "" TERM INT; exec awk -v p="$cpid" -v f="$d/fell.2" -v m1="$M1" -v m2="$M2" "$watch" < "$d/err" >&2) &',
    '  a2=$!;',
    'else',
    '  echo "tao: warning: cannot watch this node for TAO falling back to one node (no mktemp, awk or mkfifo)" >&2;',
    '  "$@" &',
    '  cpid=$!;',
    'fi;',
    't=0;',
    "trap 't=1; kill -TERM \"$cpid\" 2>/dev/null' TERM INT;",
    'wait "$cpid"; rc=$?;',
    'while [ "$t" = 1 ]; do t=0; wait "$cpid"; r=$?; if [ "$r" != 127 ]; then rc=$r; fi; done;',
    'i=0;',
    'while [ -n "$a1" ] && { kill -0 "$a1" || kill -0 "$a2"; } 2>/dev/null && [ "$i" -lt 20 ]; do sleep 0.1 2>/dev/null || sleep 1; i=$((i + 1)); done;',
    'if [ -n "$a1" ]; then kill -KILL "$a1" "$a2" 2>/dev/null; fi;',
    f'case "$copies" in {LOCAL_PREFIX}?*) rm -rf -- "$copies" ;; esac;',
    'line="";',
    'if [ -n "$d" ]; then line=$(cat -- "$d/fell" "$d/fell.2" 2>/dev/null | head -n 1 | cut -c 1-300); rm -rf -- "$d"; fi;',
    'if [ -n "$line" ]; then',
    '  echo "tao: node rank ${NODE_RANK:-?} of a $nodes-node job fell back to training on one node (TAO: $line): '
    'the job stops instead" >&2;',
    f'  exit {FALLBACK_EXIT};',
    'fi;',
    'exit "$rc"',
)
#: The guard, one line, with the fallback lines set (shell assignments of constant text).
GUARD_SCRIPT = " ".join([f"M1='{FALLBACK_LINES[0]}'; M2='{FALLBACK_LINES[1]}';",
                         *(ln.strip() for ln in _GUARD_LINES)])


def rank0_name_wait_s() -> int:
    """How long a node waits for rank 0's name to resolve before it stops the job (versions.yaml)."""
    return int(pins.resolve("multinode.rank0_name_wait_s"))


def local_copy(job_id: str, index: int, source: str) -> str | None:
    """The node-local path of the ``index``-th spec file of job ``job_id``; None when its name is not plain."""
    base = posixpath.basename(source)
    if not _PLAIN_NAME.match(base) or not _PLAIN_NAME.match(job_id):
        return None
    return f"{LOCAL_PREFIX}{job_id}/{index}/{base}"


def _spec_positions(words: Sequence[str]) -> list[tuple[int, str, str]]:
    """``(word index, prefix, spec path)`` for each spec file the words name (prefix: ``--opt=`` or "")."""
    out = []
    for i, word in enumerate(words):
        if word in SPEC_OPTIONS and i + 1 < len(words):
            out.append((i + 1, "", words[i + 1]))
        elif word.startswith("--experiment_spec_file="):
            out.append((i, "--experiment_spec_file=", word.split("=", 1)[1]))
    return out


def _rewrite_text(text: str, job_id: str, pairs: list[tuple[str, str]]) -> str:
    """Shell text naming the node's copies, where a spec path is plain and appears once (it is replaced in the
    text, so every other word keeps its quoting and expansions)."""
    words = shell_words(text)
    for i, _prefix, source in _spec_positions(words):
        copy = local_copy(job_id, len(pairs), source)
        if copy is None or not _PLAIN.match(source) or words.count(words[i]) != 1:
            continue
        found = list(re.finditer(r"(?<![^\s=])" + re.escape(source) + r"(?![^\s;&|)])", text))
        if len(found) != 1:
            continue
        text = text[:found[0].start()] + copy + text[found[0].end():]
        pairs.append((source, copy))
    return text


def node_local_specs(argv: Sequence[str], job_id: str) -> tuple[list[str], list[tuple[str, str]]]:
    """``argv`` naming each node's own copy of its ``-e`` spec files, and the (source, copy) pairs the guard
    copies first. Shell text (``sh -c TEXT`` or ``bash -c TEXT``) is rewritten in its text, any other argv word
    by word. A spec the bank cannot name again this way is left as it is: the guard's watch still stops a node
    that falls back."""
    pairs: list[tuple[str, str]] = []
    out = list(argv)
    if len(out) >= 3 and posixpath.basename(out[0]) in ("sh", "bash") and out[1] == "-c":
        out[2] = _rewrite_text(out[2], job_id, pairs)
        return out, pairs
    for i, prefix, source in _spec_positions(out):
        copy = local_copy(job_id, len(pairs), source)
        if copy is None or "\n" in source:
            continue
        out[i] = prefix + copy
        pairs.append((source, copy))
    return out, pairs


def guarded(argv: Sequence[str], job_id: str, nodes: int, literal: Callable[[str], str] = str) -> list[str]:
    """One rank's argv in a ``nodes``-node job: its own spec copies, under the guard (:data:`GUARD_SCRIPT`)."""
    out, pairs = node_local_specs(argv, job_id)
    return guard_argv(out, pairs, nodes, rank0_name_wait_s(), literal)


def guard_argv(argv: Sequence[str], pairs: Sequence[tuple[str, str]], nodes: int, wait_s: int,
               literal: Callable[[str], str] = str) -> list[str]:
    """``argv`` run under :data:`GUARD_SCRIPT` (spec copies, rank 0's name, the fallback watch); ``literal``
    keeps the script as written where the platform would expand it (Kubernetes' ``$(VAR)``)."""
    flat = [w for pair in pairs for w in pair]
    return ["/bin/sh", "-c", literal(GUARD_SCRIPT), "tao-node", str(int(wait_s)), str(int(nodes)), str(len(pairs)), *flat,
            *argv]
