"""The constant shell scripts the verbs run on the login host.

Each is run as ``sh -c SCRIPT tao ARG...`` through :meth:`Connection.script`:
the script text is code, every user value arrives as a positional argument
(quoted by ``shlex.join``), and secrets arrive on stdin only.
"""
from __future__ import annotations

from ... import results_shell

#: Separates the data paths of :data:`MISSING` from the ``.sqsh`` images it checks.
SQSH_MARK = "@@sqsh"
#: An argument of :data:`MISSING` that prints the size of every node of every partition (``@@node
#: PARTITION|NODE|CPUS|MEMORY_MB|GRES`` lines, :func:`taobank.platforms.slurm.resources.node_sizes`) and the name of
#: every partition (``@@part NAME``, :func:`taobank.platforms.slurm.resources.partitions`) in the same command.
NODES_MARK = "@@nodes"

#: Print every argument path that does not exist (one remote command for all). After SQSH_MARK, a
#: ``.sqsh`` that is empty or lacks the squashfs magic (``hsqs``, its first 4 bytes: a failed or
#: half-copied import) is printed too, as ``PATH (empty or not a squashfs image)``. NODES_MARK: the nodes'
#: sizes and the partitions as sinfo has them, hidden ones too (``-a``: sbatch takes them); nothing when sinfo
#: cannot say.
MISSING = r'''
sq=0
for p do
  if [ "$p" = @@sqsh ]; then sq=1; continue; fi
  if [ "$p" = @@nodes ] && [ "$sq" = 0 ]; then
    sinfo -a -h -N -o '@@node %P|%N|%c|%m|%G' 2>/dev/null; sinfo -a -h -o '@@part %P' 2>/dev/null; continue
  fi
  if [ ! -e "$p" ]; then printf '%s\n' "$p"
  elif [ "$sq" = 1 ] && [ "$(head -c 4 -- "$p" 2>/dev/null | tr -c 'a-z' .)" != hsqs ]; then
    printf '%s (empty or not a squashfs image)\n' "$p"
  fi
done
'''

#: $1 job dir, $2 results dir, then ``sha256sum -c`` lines of the uploaded spec files;
#: stdin: base64 tar of the staged files.
STAGE = (
    'umask 077 && mkdir -p -- "$1" "$2" && base64 -d | tar -x -o -f - -C "$1" '
    '&& mkdir -p -- "$1/sbatch" "$1/slurm-logs" "$1/meta" "$1/specs" "$1/env" '
    '&& d=$1 && shift 2 && { [ $# -eq 0 ] || { cd -- "$d/specs" && printf "%s\\n" "$@" | sha256sum -c --quiet -; }; }'
)

#: Small inputs into a cluster folder: $1 the folder, $2 "force" or "keep", then
#: ``sha256sum -c`` lines (``<hex>  <name>``) and ``manifest  <folder>.sha256`` lines (a staged folder:
#: its own manifest checks its files, and the folder must not exist unless forced); stdin: base64 tar.
STAGE_IN = r'''
d=$1; mode=$2; shift 2
umask 077
mkdir -p -- "$d" || exit 3
if [ "$mode" != force ]; then
  for line do
    n=${line#*  }
    case $line in "manifest  "*) n=${n%.sha256};; esac
    if [ -e "$d/$n" ]; then echo "$d/$n exists (use --force to replace it)" >&2; exit 5; fi
  done
fi
base64 -d | tar -x -o -f - -C "$d" || exit 3
cd -- "$d" || exit 3
for line do
  case $line in
    "manifest  "*) sha256sum -c --quiet -- "${line#manifest  }" >&2 || exit 4 ;;
    *) printf '%s\n' "$line" | sha256sum -c --quiet - >&2 || exit 4 ;;
  esac
done
'''

#: $1 script, $2 log root (<job_dir>/slurm-logs), $3 job name, $4 the image
#: conversion job it waits for ("" = none): afterok, and SLURM cancels it if
#: that job fails (--kill-on-invalid-dep), so it never holds a GPU for nothing.
#: Submitted held, so the job cannot start before its log folder
#: <log root>/<name>-<id>/ exists (SLURM does not create it) and before
#: the caller has the id; released at once. A held submit skips sbatch's
#: node-configuration check (it would sit PENDING with BadConstraints), so
#: ``--test-only`` runs first and its definite refusals stop the submit.
#: $5 (optional) the prefetch job's script (:mod:`taobank.platforms.slurm.prefetch`): sbatched held first (a held
#: one of the same name left by a lost answer is cancelled), the training job waits for it too (afterok),
#: it is released after the training job, and its id is printed as ``@@prefetch ID`` before the job's id;
#: a refused training sbatch cancels it. Same one remote command.
SBATCH = r'''
if ! t=$(sbatch --test-only --job-name="$3" "$1" 2>&1); then
  case $t in
    *"node configuration is not available"*|*"nvalid partition"*|*"nvalid account"*|*"nvalid qos"*|*"ime limit"*|*"nvalid generic resource"*|*"nvalid feature"*|*"accounting/QOS policy"*)
      echo "$t" >&2; exit 3;;
  esac
fi
pre=""
if [ -n "${5:-}" ]; then
  scancel --name="$3-prefetch" --user="$(id -un)" --state=PENDING >/dev/null 2>&1 || true
  out=$(sbatch --parsable --hold --job-name="$3-prefetch" "$5") || exit 3
  pre=${out%%;*}
  case $pre in ''|*[!0-9]*) echo "unexpected sbatch answer (prefetch): $out" >&2; exit 4;; esac
fi
deps=$4
if [ -n "$pre" ]; then deps=${deps:+$deps:}$pre; fi
if [ -n "$deps" ]; then dep="--dependency=afterok:$deps"; else dep="--kill-on-invalid-dep=yes"; fi
out=$(sbatch --parsable --hold --kill-on-invalid-dep=yes "$dep" --job-name="$3" "$1") || { [ -z "$pre" ] || scancel "$pre"; exit 3; }
jid=${out%%;*}
case $jid in ''|*[!0-9]*) echo "unexpected sbatch answer: $out" >&2; exit 4;; esac
if ! mkdir -p -- "$2/$3-$jid"; then scancel "$jid" $pre; echo "cannot create $2/$3-$jid" >&2; exit 5; fi
scontrol release "$jid" || { scancel "$jid" $pre; exit 6; }
# the conversion (and prefetch) were submitted held: they start only now that the job waiting for them exists
if [ -n "$4" ]; then scontrol release "$4" >/dev/null 2>&1 || true; fi
if [ -n "$pre" ]; then scontrol release "$pre" >/dev/null 2>&1 || true; echo "@@prefetch $pre"; fi
echo "$jid"
'''

#: The image conversion job: $1 its script. Prints the job id. Held: released by SBATCH (or ADOPT) once
#: the training job exists, so a fast failure cannot end before the dependency does, and a refused
#: training sbatch leaves nothing running (the caller cancels the held conversion).
CONVERT = r'''
out=$(sbatch --parsable --hold "$1") || exit 3
jid=${out%%;*}
case $jid in ''|*[!0-9]*) echo "unexpected sbatch answer: $out" >&2; exit 4;; esac
echo "$jid"
'''

#: Reconcile by exact job name: $1 name. squeue -t all: a job that already ended is still listed for MinJobAge
#: (300 s by default), so a short job is found even before accounting (sacct) has recorded it.
FIND = r'''
squeue -h -t all -o '%i|%T|%r|%j' --name="$1"
echo "@@sacct"
sacct -n -X -P -o JobIDRaw,JobName,State,ExitCode --name="$1" -S now-14days 2>/dev/null
true
'''

#: Adopt a found job: $1 id, $2 log root, $3 name, $4 the held conversion job to release ("" = none),
#: $5 (optional) "prefetch": also release the held prefetch job of the name and print ``@@prefetch ID``.
ADOPT = ('mkdir -p -- "$2/$3-$1" && { scontrol release "$1" >/dev/null 2>&1; '
         'if [ -n "$4" ]; then scontrol release "$4" >/dev/null 2>&1; fi; '
         'if [ -n "${5:-}" ]; then for p in $(squeue -h -o %i --name="$3-prefetch" 2>/dev/null); do '
         'scontrol release "$p" >/dev/null 2>&1; echo "@@prefetch $p"; done; fi; true; }')

#: A SWEEP argument ``<folder>/*/status.json``: the status file of every sub-folder (16 at most, as
#: progress.READ_STATUS_SH reads them), each a section of its own.
STATUS_GLOB = "*/status.json"

#: One sweep: $1 comma list of ids, then small files (exit markers, TAO status.json: their last 64 KiB).
#: Exactly one squeue and one sacct; array tasks (sweep trials) are one line each, as ``<array id>_<task>``.
SWEEP = r'''
ids=$1; shift
echo "@@squeue"
squeue -h -r -o '%i|%T|%r|%j' -j "$ids" 2>&1
echo "@@rc $?"
echo "@@sacct"
sacct -n -P -o JobID,JobName,State,ExitCode,ReqMem,Timelimit,NodeList -j "$ids" 2>&1
echo "@@rc $?"
for m do
  case $m in
    */'*/status.json')
      n=0
      for f in "${m%/?/status.json}"/*/status.json; do
        [ -f "$f" ] || continue
        case $f in *'
'*) continue ;; esac
        n=$((n + 1))
        [ "$n" -le 16 ] || break
        echo "@@marker $f"
        tail -c 65536 -- "$f" 2>/dev/null
        echo
      done ;;
    *)
      echo "@@marker $m"
      tail -c 65536 -- "$m" 2>/dev/null
      echo ;;
  esac
done
'''

#: Last bytes of logs: args are files.
TAIL_FILES = r'''
n=$1; shift
for f do
  echo "@@file $f"
  tail -c "$n" -- "$f" 2>/dev/null
  echo
done
'''

#: Logs: $1 lines, $2 out, $3 err.
LOGS = r'''
echo "@@out"
tail -n "$1" -- "$2" 2>&1
echo "@@err"
tail -n "$1" -- "$3" 2>&1
true
'''

#: Follow: $1 boundary, $2 out file, $3 out offset, $4 err file, $5 err offset.
#: Prints sizes, then the new bytes of each file, split by the boundary. An
#: offset written ``tN`` means "the last N lines of what is there now" (the
#: first read of ``logs -f --tail N``), cut from the same snapshot as the size.
FOLLOW = r'''
b=$1
s2=$(wc -c < "$2" 2>/dev/null || echo 0); s4=$(wc -c < "$4" 2>/dev/null || echo 0)
echo "$s2 $s4"
part() {
  case "$2" in
    t*) head -c "$3" -- "$1" 2>/dev/null | tail -n "${2#t}" ;;
    *) [ "$3" -gt "$2" ] && tail -c +$(($2 + 1)) -- "$1" | head -c $(($3 - $2)) ;;
  esac
}
echo "$b"
part "$2" "$3" "$s2"
echo "$b"
part "$4" "$5" "$s4"
true
'''

#: Cancel every job of ours named $1 (a job that resubmitted itself keeps its name).
CANCEL_NAME = 'scancel --name="$1" --user="$(id -un)"'

#: Remove files (credentials of finished jobs).
REMOVE = 'rm -f -- "$@"'

#: A submit refused after staging takes back what it made: $1 the job's staged folder (named after $3, the job
#: id), $2 its results folder, removed only when empty (a folder with output is never touched).
UNSTAGE = r'''
case ${1##*/} in "$3") ;; *) echo "refusing to remove $1: not the folder of job $3" >&2; exit 3;; esac
rm -rf -- "$1" || exit 3
[ -z "$2" ] || [ ! -d "$2" ] || rmdir -- "$2" 2>/dev/null || [ -n "$(ls -A -- "$2")" ]
'''

#: Enroot credentials: stdin carries the netrc lines; the args are their machine names (lines
#: of exactly those machines are replaced, compared as strings, never as patterns).
ENROOT_CREDS = r'''
umask 077
mkdir -p "$HOME/.config/enroot"
f="$HOME/.config/enroot/.credentials"
touch "$f"
awk 'BEGIN { for (i = 1; i < ARGC; i++) drop[ARGV[i]] = 1; ARGC = 1 }
     !($1 == "machine" && ($2 in drop))' "$@" < "$f" > "$f.tmp"
cat >> "$f.tmp"
mv -f "$f.tmp" "$f"
chmod 600 "$f"
'''

#: Preflight facts: $1 partition list, $2 results base.
PREFLIGHT = r'''
for c in sbatch squeue sacct scancel srun sinfo scontrol; do command -v "$c" >/dev/null 2>&1 || echo "@@missing_cmd $c"; done
echo "@@partitions"
sinfo -h -o '%P|%a|%l|%D|%G' 2>&1
echo "@@base"
if [ -d "$2" ] && [ -w "$2" ]; then echo writable; elif [ -d "$2" ]; then echo readonly; else
  p=$2; while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname -- "$p"); done
  # submit makes the folder (mkdir -p): a writable nearest existing parent is enough
  if [ -d "$p" ] && [ -w "$p" ]; then echo "creatable $p"; else echo absent; fi
fi
echo "@@enroot"
# only the machine names (fields 1-2 of machine lines): the values are never read out
f="$HOME/.config/enroot/.credentials"
if [ -s "$f" ]; then
  echo present; awk '$1 == "machine" && NF >= 2 { print "machine", $2 }' "$f" 2>/dev/null
else echo absent; fi
echo "@@pyxis"
if srun --help 2>/dev/null | grep -q -- --container-image; then echo yes; else echo no; fi
echo "@@sacct"
sacct -n -X -o JobID -S now-1hours >/dev/null 2>&1 && echo ok || echo unavailable
'''

#: artifacts / fetch / prune: the results scripts shared with Kubernetes' reader pod, named here like every
#: script run over ssh (folder as $1; see taobank.results_shell).
LIST_RESULTS = results_shell.LIST_RESULTS
FILE_FACTS = results_shell.FILE_FACTS
SEND_FILES = results_shell.SEND_FILES
REMOVE_FOLDER = results_shell.REMOVE_FOLDER
