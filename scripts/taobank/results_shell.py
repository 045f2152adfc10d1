"""The shell side of artifacts, fetch and prune: constant POSIX scripts, the same on every platform.

Kubernetes runs them in a short-lived reader pod (``kubectl exec POD -- sh -c
SCRIPT tao ARG...``), SLURM over the one SSH connection
(``Connection.script``). They run under busybox sh and a login node's
GNU tools alike: ``find``, ``stat -c``, ``dd``, ``tee``, ``cksum`` or
``md5sum``. The folder is always ``$1`` and every name a ``./`` path, so
nothing a user or a training wrote can be read as an option or as code.
Names holding a newline or a backslash are left out and named in a note (a
line protocol cannot carry them). The parsers here turn the output back
into :class:`~taobank.contract.ResultFile` values and refuse what they do
not recognise; :func:`receive` writes a fetch's stream block by verified
block through the core's :class:`~taobank.contract.Transfer`.
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import re
import shlex
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, ContextManager, Protocol, cast

from .contract import ResultFile, ResultsListing, Transfer
from .errors import NotInResults, TaoError
from .paths import is_member
from .progress.remote import READ_STATUS_SH, split_files
from .run import Result, last_line, output_lines

#: Shell text for ``find ... -type l -exec sh -c "$LINKS" tao-link "$root" {} +`` (run with the folder as the current
#: directory, $root its physical path): per symbolic link whose target is a regular file inside the folder,
#: "@@link ./<name>" and "@@to ./<target>" (the target relative to the folder); links with a name or target a line
#: cannot carry are skipped. Set as a shell variable first (:data:`_SET_LINKS`).
_LINKS = r'''
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
  done'''
_SET_LINKS = "LINKS='" + _LINKS + "'\n"

#: $1: the results folder. "@@missing" when it does not exist; else "@@files", one "<size> <mtime> ./<name>"
#: line per regular file (no link is followed), then per symbolic link whose target is a regular file inside
#: the folder "@@link ./<name>" and "@@to ./<target>" (a file whose name a line cannot carry: "@@odd N", a newline
#: or backslash shown as "?"; the target relative to the folder: TAO's
#: ``*_latest.pth`` link, which taobank.checkpoints.latest reads), then "@@status" and TAO's status files
#: (progress.remote.READ_STATUS_SH, the same $1).
LIST_RESULTS = _SET_LINKS + r'''
if [ ! -d "$1" ]; then echo "@@missing"; exit 0; fi
cd -- "$1" || exit 3
echo "@@files"
find . -type f -exec sh -c '
  for f do
    case $f in *"
"*|*\\*) printf "@@odd %s\n" "$(printf %s "$f" | tr "\n\\\\" "??")"; continue ;; esac
    stat -c "%s %Y %n" "$f" 2>/dev/null
  done' tao-stat {} +
root=$(pwd -P)
find . -type l -exec sh -c "$LINKS" tao-link "$root" {} +
echo "@@status"
''' + READ_STATUS_SH

#: $1: the results folder, then the relative paths asked for (none: everything). Per regular file under
#: them: "<size> <mtime> ./<name>" (no file is read: the bytes are read once, by :data:`SEND_FILES`); a path that
#: is missing: "@@absent P"; a path that leaves the folder (through a symbolic link), or a link to anything but a
#: regular file inside it: "@@outside P"; per symbolic link under them (or named) whose target is a regular file
#: inside the folder, that file's line too when named, and "@@link ./<name>" "@@to ./<target>"; a name a
#: line cannot carry (a newline or a backslash): "@@odd N" with those characters as "?"; a path with a part
#: find could not read (a subfolder without permission): "@@unreadable P" (a note, not a failed fetch).
FILE_FACTS = _SET_LINKS + r"""
[ -d "$1" ] || { echo "the results folder $1 does not exist" >&2; exit 3; }
cd -- "$1" || exit 3
root=$(pwd -P)
shift
[ $# -gt 0 ] || set -- .
for p do
  if [ "$p" = . ]; then q=.; else q=./$p; fi
  if [ ! -e "$q" ] && [ ! -L "$q" ]; then echo "@@absent $p"; continue; fi
  up=$(cd -P -- "$(dirname -- "$q")" && pwd -P) || { echo "@@absent $p"; continue; }
  case $up in "$root" | "$root"/*) ;; *) echo "@@outside $p"; continue ;; esac
  if [ -L "$q" ]; then
    t=$(readlink -f -- "$q" 2>/dev/null) || t=""
    case $t in "$root"/*) ;; *) echo "@@outside $p"; continue ;; esac
    case $t in *"
"*|*\\*) echo "@@outside $p"; continue ;; esac
    if [ ! -f "$t" ]; then echo "@@outside $p"; continue; fi
    s=$(stat -c "%s %Y" "$t") && echo "$s ./${t#"$root"/}" && sh -c "$LINKS" tao-link "$root" "$q"
    continue
  fi
  find "$q" -type f -exec sh -c '
    for f do
      case $f in *"
"*|*\\*) printf "@@odd %s\n" "$(printf %s "$f" | tr "\n\\\\" "??")"; continue ;; esac
      s=$(stat -c "%s %Y" "$f") && echo "$s $f"
    done' tao-stat {} + 2>/dev/null || echo "@@unreadable $p"
  find "$q" -type l -exec sh -c "$LINKS" tao-link "$root" {} + 2>/dev/null || :  # (an unreadable part: said above)
done
"""

#: Bytes per verified block of :data:`SEND_FILES`: a resumed fetch starts again at the last verified block.
BLOCK = 64 << 20
#: dd's block: BLOCK and every resume offset are multiples of it.
DD_BLOCK = 1 << 20

#: $1: the results folder, $2: the block size (a multiple of 1 MiB). stdin: "<offset> <size> <mtime> ./<name>"
#: per file (names are read by the shell, never by a tool, so none is an option). Each file is READ ONCE from
#: its storage: its bytes go to stdout through ``tee``, which also feeds the digest (POSIX ``cksum``, CRC-32 +
#: length, where the system has it: memory speed; else ``md5sum``: busybox builds without cksum). Busybox's tee
#: copies 1 KiB at a time (64 MB/s), so there each block is read into a temp file, which the digest and ``dd``
#: then read from memory. Per file:
#: "@@file <alg> <offset> <size> <mtime> ./<name>" (offset: where it starts, 0 unless the size and mtime are the
#: ones given), then per block of at most $2 bytes the bytes and "@@sum <digest> [<length>]", then
#: "@@end <size> <mtime>" as stat says after the read (a file rewritten meanwhile differs). A file that is gone or
#: no longer a regular file: "@@gone ./<name>"; one whose folder now leads out (a link swapped in since the
#: listing): "@@outside ./<name>". Where the cluster has python3 (login nodes, TAO's images) the same protocol is
#: spoken by :data:`SEND_PY`: one process reads, sends and digests (zlib's CRC-32, "crc32"), a third of the CPU
#: of dd, tee and cksum, and no bit reversal here. $3 "sh" keeps the shell (tests).
SEND_FILES = r"""
if [ "${3:-}" != sh ] && command -v python3 >/dev/null 2>&1 && python3 -c "import zlib" >/dev/null 2>&1; then
  exec python3 -c '@SEND_PY@' "$@"
fi
cd -- "$1" || exit 3
root=$(pwd -P)
B=$2
K=1048576
t=$(mktemp -d "${TMPDIR:-/tmp}/tao-send.XXXXXX") || exit 5
trap 'rm -rf "$t"' EXIT
trap 'exit 143' TERM HUP INT PIPE
mkfifo "$t/p" || exit 5
if cksum </dev/null >/dev/null 2>&1; then alg=crc; else alg=md5; fi
case $(tee --help 2>&1) in *BusyBox*) split=copy ;; *) split=tee ;; esac
while IFS= read -r line; do
  off=${line%% *}; rest=${line#* }; want=${rest%% *}; rest=${rest#* }; wt=${rest%% *}; f=${rest#* }
  case $f in ./*) ;; *) echo "refused name: $f" >&2; exit 4 ;; esac
  case /$f/ in */../*) echo "refused name: $f" >&2; exit 4 ;; esac
  case $off$want$wt in *[!0-9]*|'') echo "refused line: $line" >&2; exit 4 ;; esac
  if [ -L "$f" ] || [ ! -f "$f" ]; then printf '@@gone %s\n' "$f"; continue; fi
  up=$(cd -P -- "${f%/*}" && pwd -P) || { printf '@@gone %s\n' "$f"; continue; }
  case $up in "$root" | "$root"/*) ;; *) printf '@@outside %s\n' "$f"; continue ;; esac
  s=$(stat -c "%s %Y" "$f") || { printf '@@gone %s\n' "$f"; continue; }
  size=${s% *}; mt=${s#* }
  if [ "$size $mt" != "$want $wt" ] || [ "$off" -gt "$size" ] || [ $((off % K)) -ne 0 ]; then off=0; fi
  printf '@@file %s %s %s %s %s\n' "$alg" "$off" "$size" "$mt" "$f"
  while [ "$off" -lt "$size" ]; do
    n=$((size - off)); [ "$n" -gt "$B" ] && n=$B
    if [ $split = copy ]; then
      dd if="$f" of="$t/b" bs=$K skip=$((off / K)) count=$(((n + K - 1) / K)) 2>/dev/null
      truncate -s "$n" "$t/b" || exit 6
      if [ $alg = crc ]; then cksum < "$t/b" > "$t/h" & else md5sum < "$t/b" > "$t/h" & fi
      dd if="$t/b" bs=$K 2>/dev/null
    else
      if [ $alg = crc ]; then cksum < "$t/p" > "$t/h" & else md5sum < "$t/p" > "$t/h" & fi
      if [ $((n % K)) -eq 0 ]; then
        dd if="$f" bs=$K skip=$((off / K)) count=$((n / K)) 2>/dev/null | tee "$t/p"
      else
        dd if="$f" bs=$K skip=$((off / K)) count=$(((n + K - 1) / K)) 2>/dev/null | head -c "$n" | tee "$t/p"
      fi
    fi
    wait $! || exit 6
    read -r h c < "$t/h" || exit 6
    if [ $alg = crc ]; then printf '@@sum %s %s\n' "$h" "$c"; else printf '@@sum %s\n' "$h"; fi
    off=$((off + n))
  done
  s=$(stat -c "%s %Y" "$f" 2>/dev/null) || s="gone gone"
  printf '@@end %s\n' "$s"
done
"""

#: :data:`SEND_FILES` in Python (no single quote: it is quoted by the shell; Python 3.4 or later). Each byte is
#: copied once in user space: into one reused 128 KiB buffer (it stays in the CPU's cache), where zlib computes the
#: block's CRC-32; the kernel then sends the same bytes from the page cache to stdout (``sendfile``: no copy here),
#: or, where it cannot, they are written from that buffer (a file rewritten between the two reads gives a CRC the
#: receiver refuses). On Linux its stdout pipe holds 1 MiB (1031: F_SETPIPE_SZ), so sshd finds the next chunk
#: queued while it encrypts. A file that shrinks while read ends the stream (exit 6): the receiver says it changed.
SEND_PY = r"""
import errno, os, re, select, signal, stat, sys, zlib
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
try:
    os.chdir(sys.argv[1])
except OSError:
    sys.exit(3)
root, B, K = os.getcwdb(), int(sys.argv[2]), 1 << 20
C = 128 << 10
buf = memoryview(bytearray(C))
kernel = hasattr(os, "sendfile")
if sys.platform.startswith("linux"):
    try:
        import fcntl
        fcntl.fcntl(1, 1031, K)
    except (ImportError, OSError):
        pass
def put(data):
    while data:
        try:
            data = data[os.write(1, data):]
        except BlockingIOError:
            select.select([], [1], [])
def send(*words):
    put(b" ".join(w if isinstance(w, bytes) else str(w).encode() for w in words) + b"\n")
def block(fh, off, n):
    global kernel
    crc = 0
    while n:
        k = fh.readinto(buf[:min(C, n)])
        if not k:
            sys.exit(6)
        crc = zlib.crc32(buf[:k], crc)
        s = 0
        while kernel and s < k:
            try:
                m = os.sendfile(1, fh.fileno(), off + s, k - s)
            except BlockingIOError:
                select.select([], [1], [])
                continue
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                kernel = False
                break
            if not m:
                sys.exit(6)
            s += m
        put(buf[s:k])
        off, n = off + k, n - k
    return crc
for line in sys.stdin.buffer:
    line = line[:-1] if line.endswith(b"\n") else line
    m = re.fullmatch(rb"(\d+) (\d+) (\d+) (.*)", line, re.S)
    if not m:
        sys.stderr.write("refused line: %r\n" % line); sys.exit(4)
    f = m.group(4)
    if not f.startswith(b"./") or b"/../" in b"/" + f + b"/":
        sys.stderr.write("refused name: %r\n" % f); sys.exit(4)
    try:
        up = os.path.realpath(os.path.dirname(f))
        fd = os.open(f, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        send(b"@@gone", f); continue
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd); send(b"@@gone", f); continue
    if up != root and not up.startswith(root.rstrip(b"/") + b"/"):
        os.close(fd); send(b"@@outside", f); continue
    off, size, mt = int(m.group(1)), st.st_size, int(st.st_mtime)
    if (size, mt) != (int(m.group(2)), int(m.group(3))) or off > size or off % K:
        off = 0
    send(b"@@file crc32", off, size, mt, f)
    with os.fdopen(fd, "rb", buffering=0) as fh:
        fh.seek(off)
        while off < size:
            n = min(B, size - off)
            send(b"@@sum", block(fh, off, n), n)
            off += n
    try:
        st = os.stat(f)
        send(b"@@end", st.st_size, int(st.st_mtime))
    except OSError:
        send(b"@@end gone gone")
"""
assert "'" not in SEND_PY
SEND_FILES = SEND_FILES.replace("@SEND_PY@", SEND_PY)

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

#: How long one text command may run: a listing of a large shared folder.
TEXT_TIMEOUT_S = 3600

_FILE = re.compile(r"(\d{1,20}) (\d{1,20}) \./(.+)")


def parse_listing(folder: str, text: str, *, status: bool) -> ResultsListing:
    """:data:`LIST_RESULTS`' output as a listing; lines that are not a file of the folder are skipped."""
    head, _, rest = (text or "").partition("@@status\n")
    lines = output_lines(head)
    if "@@missing" in lines[:1]:
        return ResultsListing(folder, exists=False)
    if "@@files" not in lines:
        raise TaoError(f"listing {folder} gave an answer that is not a listing: {lines[-1] if lines else '(none)'}")
    files = []
    links: dict[str, str] = {}
    body = lines[lines.index("@@files") + 1:]
    left_out: list[str] = []
    for i, line in enumerate(body):
        m = _FILE.fullmatch(line)
        if m and is_member(m[3]):
            files.append(ResultFile(m[3], int(m[1]), float(m[2])))
        elif m or line.startswith("@@odd ./"):  # a name no line or local path may carry: said, never hidden
            left_out.append(m[3] if m else line[len("@@odd "):].removeprefix("./"))
        elif line.startswith("@@link ./") and i + 1 < len(body) and body[i + 1].startswith("@@to ./"):
            name, target = line[len("@@link ./"):], body[i + 1][len("@@to ./"):]
            if is_member(name) and is_member(target):
                links[name] = target
    files.sort(key=lambda f: f.path)
    return ResultsListing(folder, files, split_files(rest) if status else {}, links=dict(sorted(links.items())),
                          left_out=sorted(left_out))


def parse_facts(folder: str, text: str, notes: list[str] | None = None,
                links: dict[str, str] | None = None) -> list[ResultFile]:
    """:data:`FILE_FACTS`' output as files; a path outside or absent is one-line TaoError; a path find could not
    wholly read, or a name a line cannot carry, adds a line to ``notes``; each link to a file inside the folder is
    added to ``links`` (link path -> target path)."""
    out: dict[str, ResultFile] = {}
    lines = output_lines(text)
    for i, line in enumerate(lines):
        if line.startswith("@@link ./") and i + 1 < len(lines) and lines[i + 1].startswith("@@to ./"):
            name, target = line[len("@@link ./"):], lines[i + 1][len("@@to ./"):]
            if links is not None and is_member(name) and is_member(target):
                links[name] = target
            continue
        if line.startswith("@@unreadable ") and notes is not None:
            what = "the folder" if line[13:] == "." else line[13:]
            notes.append(f"part of {what} in {folder} could not be read (permissions): its readable files were "
                         "fetched; fix the permissions on the cluster and fetch again for the rest")
            continue
        if line.startswith("@@odd ") and notes is not None:
            notes.append(f"{line[6:]} (? marks a newline or backslash) was not fetched: such a name cannot be "
                         "written safely here; rename it on the cluster and fetch it again")
            continue
        if line.startswith("@@absent "):
            raise NotInResults(line[9:], folder)
        if line.startswith("@@outside "):
            raise TaoError(f"{line[10:]} is a link or leads out of the results folder {folder}: refused")
        m = _FILE.fullmatch(line)
        if m and is_member(m[3]):
            out[m[3]] = ResultFile(m[3], int(m[1]), float(m[2]))
        elif m and notes is not None:
            notes.append(f"{m[3]} was not fetched: a name with a control character cannot be written safely here; "
                         "rename it on the cluster and fetch it again")
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


def read_facts(shell: Shell, folder: str, paths: list[str], transfer: Transfer) -> list[ResultFile]:
    """:data:`FILE_FACTS` in one command: the files under ``paths``; the transfer is told (notes, then start)."""
    notes: list[str] = []
    links: dict[str, str] = {}
    what = f"reading {folder}"
    facts = parse_facts(folder, _checked(shell.text(FILE_FACTS, [folder, *paths], what=what), what), notes, links)
    for line in notes:
        transfer.note(line)
    transfer.start(facts, dict(sorted(links.items())))
    return facts


#: Times a stream that ended early with no error (``kubectl exec`` can cut its output and still exit 0) is resumed
#: from its last verified block, each only after the one before moved some bytes.
RESUMES = 3


@dataclass
class Progress:
    """Where a fetch's stream stands: each file not yet whole (path: the file as last announced and its verified
    bytes), and the bytes moved by this fetch so far."""

    left: dict[str, tuple[ResultFile, int]]
    moved: int = 0
    #: :attr:`moved` at the last verified block (a cut stream's bytes after it are sent again)
    kept: int = 0


def fetch_files(shell: Shell, folder: str, paths: list[str], into: Path, transfer: Transfer) -> list[ResultFile]:
    """Two commands: the files' sizes and mtimes, then :data:`SEND_FILES` of what is not here yet (each byte read
    once on the cluster, its digest computed in the same pass and checked here as it is written); a stream cut
    short is asked again from its last verified block (:data:`RESUMES`)."""
    facts = read_facts(shell, folder, paths, transfer)
    progress = Progress({f.path: (f, have) for f in facts if (have := transfer.have(f)) is not None})
    resumes = RESUMES
    while progress.left:
        asked = "".join(f"{have} {f.size} {int(f.mtime)} ./{f.path}\n" for f, have in progress.left.values())
        came = progress.moved
        try:
            with shell.stream(SEND_FILES, [folder, str(BLOCK)], stdin=asked, what=f"sending files of {folder}") as out:
                receive(out, folder, [f for f, _ in progress.left.values()], transfer, progress)
        except StreamCut:
            if not resumes or progress.moved == came:  # nothing came through the last try: the link is down
                raise
            progress.moved = progress.kept  # the cut block's bytes come again
            resumes -= 1
            transfer.note(f"the stream from {folder} ended early with no error; resumed from the last verified block")
            continue
        break
    return facts


class PosixCksum:
    """POSIX ``cksum`` (CRC-32, polynomial 0x04C11DB7, not reflected, then the length) over zlib's reflected
    CRC-32: the bytes bit-reversed in, the result bit-reversed out; C speed."""

    REV = bytes(int(f"{i:08b}"[::-1], 2) for i in range(256))

    def __init__(self) -> None:
        self.crc, self.length = 0xFFFFFFFF, 0

    def update(self, data: bytes | memoryview) -> None:
        # the one copy made here: translate's bit-reversed bytes (a whole reused buffer through its own object)
        src: bytes | bytearray
        if isinstance(data, memoryview):
            whole = data.obj if isinstance(data.obj, (bytes, bytearray)) and data.nbytes == len(data.obj) else None
            src = whole if whole is not None else data.tobytes()
        else:
            src = data
        self.crc = zlib.crc32(src.translate(self.REV), self.crc)
        self.length += len(src)

    def value(self) -> tuple[int, int]:
        n, tail = self.length, bytearray()
        while n:
            tail.append(n & 0xFF)
            n >>= 8
        return int(f"{zlib.crc32(bytes(tail).translate(self.REV), self.crc):032b}"[::-1], 2), self.length


class ZlibCrc:
    """zlib's CRC-32 and the length, as :data:`SEND_PY` sends them."""

    def __init__(self) -> None:
        self.crc, self.length = 0, 0

    def update(self, data: bytes | memoryview) -> None:
        self.crc = zlib.crc32(data, self.crc)
        self.length += len(data)

    def value(self) -> tuple[int, int]:
        return self.crc, self.length


def _md5() -> Any:
    return hashlib.md5(usedforsecurity=False)


_HEAD = re.compile(rb"@@file (crc32|crc|md5) (\d{1,20}) (\d{1,20}) (\d{1,20}) \./(.+)\n")
_SUM = re.compile(rb"@@sum ([0-9a-f]{32}|\d{1,10})(?: (\d{1,20}))?\n")
#: Bytes read from the stream at a time into one reused buffer, which the digest reads and the file is written from
#: (each byte copied once here, no new object per read). Small enough to stay in the CPU's cache between the
#: digest and the write: with 1 MiB the kernel's copy into the page cache cost 2.5x the receiver's CPU (perf).
READ_CHUNK = 128 << 10
VERIFIED = {"crc": f"size+cksum CRC-32 per {BLOCK >> 20} MiB read on the cluster",
            "crc32": f"size+CRC-32 per {BLOCK >> 20} MiB read on the cluster",
            "md5": f"size+md5 per {BLOCK >> 20} MiB read on the cluster"}


class StreamCut(TaoError):
    """The stream ended before the bytes it announced: a file cut short while read, or a connection dropped."""


def _broke(name: str) -> TaoError:
    return StreamCut(f"the download of {name} broke off: it changed size while being fetched (a training still "
                    "writing it) or the connection dropped; nothing unverified was kept: run the fetch again")


#: Bytes the pipe from ssh (or kubectl) may hold (Linux's default unprivileged maximum): it keeps filling while
#: this process digests and writes the last chunk, instead of stopping the sender 64 KiB ahead.
PIPE_BYTES = 1 << 20


def _widen(out: BinaryIO) -> None:
    """The pipe ``out`` reads widened to :data:`PIPE_BYTES` where the system allows (Linux); else as it is."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is None:
        return
    try:
        fcntl.fcntl(out.fileno(), setsize, PIPE_BYTES)
    except (OSError, ValueError):  # not a pipe (bytes in tests), or over the system's limit
        pass


def receive(out: BinaryIO, folder: str, files: list[ResultFile], transfer: Transfer,
            progress: Progress | None = None) -> None:
    """Write :data:`SEND_FILES`' stream of ``files``, block by verified block, through ``transfer``;
    ``progress`` is kept up to date, so a cut stream can be asked again from its last verified block."""
    progress = progress or Progress({})
    remaining = progress.left
    pending = {f.path: f for f in files}
    changed: list[str] = []
    done = progress.moved
    buf = memoryview(bytearray(READ_CHUNK))
    readinto = cast(io.BufferedIOBase, out).readinto  # a pipe opened in binary mode (run.pipe), or bytes in tests
    _widen(out)
    while True:
        line = out.readline(1 << 16)
        if not line:
            break
        if line.startswith(b"@@gone ./"):
            name = line[9:].rstrip(b"\n").decode("utf-8", "replace")
            gone = pending.pop(name, None)
            remaining.pop(name, None)
            if gone is not None:
                transfer.discard(gone)
                transfer.note(f"{name} was deleted from {folder} while the fetch ran (a training rotating its "
                              "checkpoints): not fetched")
            continue
        if line.startswith(b"@@outside ./"):
            name = line[12:].rstrip(b"\n").decode("utf-8", "replace")
            raise TaoError(f"{name} now leads out of the results folder {folder} (a link swapped in since it was "
                           "listed): refused")
        m = _HEAD.fullmatch(line)
        name = m[5].decode("utf-8", "surrogateescape") if m else ""
        if not m or name not in pending:
            raise TaoError(f"the download from {folder} sent {line[:80]!r}, not a file it was asked for: refused; "
                           "run the fetch again")
        alg, off, size, mtime = m[1].decode(), int(m[2]), int(m[3]), int(m[4])
        f = pending.pop(name)
        if (size, mtime) != (f.size, int(f.mtime)):
            f = ResultFile(f.path, size, float(mtime))
        pos = off
        remaining[name] = (f, pos)
        with transfer.part(f, off) as w:
            while pos < size:
                n = min(BLOCK, size - pos)
                digest = PosixCksum() if alg == "crc" else ZlibCrc() if alg == "crc32" else _md5()
                left = n
                while left:
                    k = readinto(buf[:min(READ_CHUNK, left)])
                    if not k:
                        raise _broke(name)
                    view = buf[:k]
                    digest.update(view)
                    w.write(view)
                    left -= k
                    done += k
                    progress.moved = done
                    transfer.advance(done)
                s = _SUM.fullmatch(out.readline(200))
                if s is None:
                    raise _broke(name)
                if isinstance(digest, (PosixCksum, ZlibCrc)):
                    ok = s[2] is not None and digest.value() == (int(s[1]), int(s[2]))
                else:
                    ok = digest.hexdigest() == s[1].decode()
                if not ok:
                    transfer.discard(f)
                    raise TaoError(f"{name}: the bytes received differ from the bytes read on the cluster (at "
                                   f"{pos}..{pos + n}): it changed while being fetched or the transfer broke; "
                                   "nothing of it was kept: run the fetch again")
                pos += n
                w.flush()
                transfer.verified(f, pos)
                remaining[name] = (f, pos)
                progress.kept = done
        end = out.readline(200)
        if end != f"@@end {size} {mtime}\n".encode():
            if not end.startswith(b"@@end "):
                raise _broke(name)
            transfer.discard(f)
            changed.append(name)
            remaining[name] = (f, 0)  # a stream cut later asks for it whole again
            continue
        transfer.finish(f, VERIFIED[alg])
        remaining.pop(name, None)
    if changed:
        raise TaoError(f"{', '.join(changed)} changed while being fetched (a training still writing it): nothing of "
                       "it was kept; the other files were fetched; fetch it again once it is written")
    if pending:
        raise _broke(next(iter(pending)))


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
    for line in output_lines(res.stdout):
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
