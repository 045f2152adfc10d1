"""What a site must give a search, checked before anything is created - ONE rule for every platform.

* Where the study's journal lives (the results base every trial shares), creating a symbolic link is exclusive:
  Optuna's ``JournalFileBackend`` locks the journal with one. A study kept in PostgreSQL
  (``--study-storage-env``) needs no such lock, so the check is left out.
* Where a trial runs, ``python3`` is 3.10 or later with numpy (the runner and Optuna run on it).

:data:`SEARCH_SITE` checks both where a shell runs next to the results (SLURM: the login host; Kubernetes: a helper
pod of the trial's image on the results volume); Docker's engine runs on this host, which tests the folder
itself and runs the image's ``python3`` (:mod:`taobank.platforms.docker.search`). :func:`problems` reads the words it
prints; each platform words the one line for its place. Adapters reach it through the search they are given
(``Batch.search``: :meth:`taobank.campaign.search.bundle.Staging.site`), never by an import.
"""
from __future__ import annotations

#: $1 the results base (its nearest existing folder is tested: writable, every study), $2 "lock" to test the
#: journal's lock there (not for a database study), $3 "python" to test this shell's python3. Prints the words of what failed (``no-write
#: DIR``, ``no-lock DIR``, ``no-python``) and leaves nothing behind.
SEARCH_SITE = r'''
b=$1
while [ ! -d "$b" ] && [ "$b" != / ]; do b=$(dirname -- "$b"); done
if d=$(mktemp -d "$b/.tao-search-check.XXXXXX" 2>/dev/null); then
  if [ "$2" = lock ]; then
    if ln -s tao "$d/lock" 2>/dev/null && ! ln -s tao "$d/lock" 2>/dev/null; then :; else echo "no-lock $b"; fi
  fi
  rm -rf -- "$d"
else
  echo "no-write $b"
fi
if [ "$3" = python ]; then
  python3 -c 'import sys, numpy; sys.exit(sys.version_info < (3, 10))' >/dev/null 2>&1 || echo "no-python"
fi
echo "site-checked"
exit 0
'''
#: What the runner needs of ``python3`` (the same test as :data:`SEARCH_SITE`'s, for an engine that runs it alone).
PYTHON_CHECK = "import sys, numpy; sys.exit(sys.version_info < (3, 10))"
#: What to do when the journal's lock does not work (every platform's line ends with it).
LOCK_ADVICE = ("use a filesystem that honours it (NFS, Lustre, a local disk), or keep the study in PostgreSQL with "
               "--study-storage-env NAME")


def refusal(said: dict[str, str], *, base: str, where: str, python_fix: str, nothing: str) -> str | None:
    """The one line refusing a search's site for the first of :func:`problems`' findings (a folder it cannot write,
    a journal lock that does not hold, no usable ``python3``); None when none. Each platform names the place
    (``where``: "on the results volume", "on login-1"), how to give the trials a ``python3`` (``python_fix``) and
    what was left undone (``nothing``)."""
    if "no-write" in said:
        return f"cannot write in {said['no-write']} {where}: a search keeps its study in the results base ({nothing})"
    if "no-lock" in said:
        return (f"the results base {base} {where} cannot hold a search's journal: creating a symbolic link there is "
                f"not exclusive, and Optuna's journal lock needs it; {LOCK_ADVICE} ({nothing})")
    if "no-python" in said:
        return f"{python_fix} ({nothing})"
    return None


def args(base: str, *, database: bool, python: bool) -> list[str]:
    """:data:`SEARCH_SITE`'s arguments: the results base, whether the lock is tested, whether python3 is."""
    return [base, "-" if database else "lock", "python" if python else "-"]


def problems(output: str) -> dict[str, str]:
    """``{word: folder or ""}`` of what :data:`SEARCH_SITE` found wrong; ``{"unchecked": ""}`` when it did not finish
    (its last word is missing)."""
    words = output.split()
    found: dict[str, str] = {}
    for i, w in enumerate(words):
        if w in ("no-write", "no-lock"):
            found[w] = words[i + 1] if i + 1 < len(words) else ""
        elif w == "no-python":
            found[w] = ""
    if "site-checked" not in words:
        found["unchecked"] = ""
    return found
