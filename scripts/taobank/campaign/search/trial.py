"""The trial-side runner of a search: one trial of the study, run where the trial runs, with nobody polling.

``python3 <sweep>/search/search.pyz --settings <sweep>/search/study.json --trial I -- TAO ARGV...``
(the bundle, :mod:`taobank.campaign.search.bundle`, holds Optuna and this package; it is on this process's path only:
TAO's process gets the environment it would get without a search). In order:

1. open the study (Optuna's JournalStorage on the journal file beside the settings; its own file lock) and
   ``ask`` it for this trial's parameters (the sampler seeded from ``seed`` and ``I``);
2. run TAO with them appended as ``key=value`` overrides (the values as a sweep writes them);
3. read TAO's status.json every ``poll_seconds`` (a local read; the bank's one parser): each epoch's KPI,
   once the epoch has ended, is ``report``-ed (step = epochs done), and ``should_prune`` asked;
4. pruned: SIGTERM to TAO's process group, a grace, SIGKILL; then a ``PRUNED`` line appended to TAO's
   status.json (the core reads it as the trial's end: :func:`taobank.core.track.tao_last_word`) and ``tell``
   PRUNED; exit 0;
5. TAO ended by itself: ``tell`` the best epoch's value (the rule ``sweep best`` ranks by), or FAIL when it
   failed, never wrote the KPI, or wrote only NaN; exit with TAO's code (1 when the KPI is missing).

A signal to this process (cancel, the wall-time chain's USR1) goes to TAO's group as it is; a run ended
that way is told FAIL. A database study's calls that get no answer are retried for a while (:class:`Patience`). Every line this prints starts ``tao-search:``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ...errors import TaoError
from . import settings as settingsmod

PREFIX = "tao-search:"
#: Exit status of a trial whose study could not be opened (a corrupted journal, a lock that does not work).
EXIT_STUDY = 3
#: Exit status of a trial whose TAO never wrote the study's KPI.
EXIT_NO_KPI = 1


def say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


#: Exception classes of the database's client libraries (SQLAlchemy, pg8000, Optuna's RDB storage) that say the
#: database did not answer, not that the call was wrong: a database study retries them.
UNANSWERED = frozenset({"OperationalError", "InterfaceError", "DisconnectionError", "StorageInternalError"})


def unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) says the database could not be reached or did not answer."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if isinstance(seen, OSError) or type(seen).__name__ in UNANSWERED:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Patience:
    """Calls to a study: a database study's are retried while the database does not answer (a server restarted,
    a host stalled under load), for up to ``db_patience_seconds``, one line per retry, TAO running on meanwhile;
    a journal study's run once (its file is local: a failure is not a wait)."""

    def __init__(self, s: settingsmod.Settings, sleep: Callable[[float], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.s, self.sleep, self.clock = s, sleep, clock

    def __call__(self, what: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if not self.s.storage_env:
            return fn(*args, **kw)
        start, wait = self.clock(), 1.0
        while True:
            try:
                return fn(*args, **kw)
            except Exception as exc:
                if not unanswered(exc) or self.clock() - start + wait > self.s.db_patience_seconds:
                    raise
                say(f"the study database in ${self.s.storage_env} did not answer ({what}: {type(exc).__name__}); "
                    f"trying again in {wait:g} s")
                self.sleep(wait)
                wait = min(wait * 2, 30.0)


def value_word(value: Any) -> str:
    """A sampled value as one ``key=value`` word: numbers as a sweep writes them (the sweep's one rule)."""
    from .. import sweepfile

    return sweepfile.value_text("search", value)


# ------------------------------------------------------------------ reading TAO's status file
def status_files(results: Path) -> dict[str, str]:
    """TAO's status files in the trial's results folder, ``{relative path: text}`` (as the platforms read them:
    the top level and one folder down)."""
    out: dict[str, str] = {}
    candidates = [results / "status.json"] + sorted(results.glob("*/status.json"))
    for path in candidates:
        try:
            if path.is_file():
                out[str(path.relative_to(results))] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return out


@dataclass
class Reading:
    """What TAO's status file says now: the finished epochs' KPI values (0-based epoch -> value, NaN kept),
    whether the run has ended, the KPIs it writes and the file's path."""

    values: dict[int, float] = field(default_factory=dict)
    ended: bool = False
    kpis: list[str] = field(default_factory=list)
    file: str | None = None


def read(results: Path, action: str, kpi: str) -> Reading:
    """The study's KPI per finished epoch. An epoch counts once a later epoch is written or the run ended: TAO
    writes the next epoch's validation before that epoch's line, so the last row is not final until then."""
    from ...progress import remote, statusfile
    from ...progress.series import key_column, kpi_names, series

    files = status_files(results)
    chosen = remote.pick(files, action or None)
    if chosen is None:
        return Reading()
    log = statusfile.parse(files[chosen])
    rows = series(log)
    ended = statusfile.outcome(log) is not None
    out = Reading(ended=ended, kpis=kpi_names(rows), file=str(results / chosen))
    if not rows or key_column(rows) != "epoch":
        return out
    last = max(int(r["epoch"]) for r in rows)
    for row in rows:
        value = row.get(kpi)
        epoch = int(row["epoch"])
        if (epoch < last or ended) and isinstance(value, (int, float)) and not isinstance(value, bool):
            out.values[epoch] = float(value)
    return out


def stamp_fields(now: float | None = None) -> dict[str, str]:
    """``date`` and ``time`` as TAO's StatusLogger writes them (``12/6/2026``, ``9:5:3``: not zero-padded)."""
    t = time.localtime(now)
    return {"date": f"{t.tm_mon}/{t.tm_mday}/{t.tm_year}", "time": f"{t.tm_hour}:{t.tm_min}:{t.tm_sec}"}


def write_pruned(path: str, message: str, epoch: int | None) -> None:
    """TAO's status file gets the trial's end as TAO's writer would say it (TAO has exited: nothing else
    writes the file now)."""
    line: dict[str, Any] = {} if epoch is None else {"epoch": epoch}
    line.update(stamp_fields())
    line.update({"status": "PRUNED", "verbosity": "INFO", "message": message})
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


# ------------------------------------------------------------------ the rung's cut
def number(value: float) -> str:
    return format(value, ".4g")


def cut_of(study: Any, trial_id: int, s: settingsmod.Settings, step: int) -> float | None:
    """The value a trial had to beat at the rung where it was pruned (Optuna's own rule for successive halving:
    the best 1/eta of the values that reached that rung; the median of the other trials' values at that step for
    the median pruner); None when it cannot be told (hyperband's brackets, too few trials)."""
    trials = study.get_trials(deepcopy=False)
    me = next((t for t in trials if t._trial_id == trial_id), None)
    if me is None:
        return None
    minimize = s.mode == "min"
    if s.pruner == "asha":
        rungs = sorted((k for k in me.system_attrs if k.startswith("completed_rung_")),
                       key=lambda k: int(k.rsplit("_", 1)[1]))
        if not rungs:
            return None
        key = rungs[-1]
        values = sorted(float(t.system_attrs[key]) for t in trials if key in t.system_attrs
                        and not math.isnan(float(t.system_attrs[key])))
        if not values:
            return None
        k = max(len(values) // settingsmod.REDUCTION_FACTOR - 1, 0)
        return values[k] if minimize else values[-(k + 1)]
    if s.pruner == "median":
        others = [t.intermediate_values[step] for t in trials
                  if t._trial_id != trial_id and step in t.intermediate_values
                  and not math.isnan(t.intermediate_values[step])]
        if not others:
            return None
        others.sort()
        mid = len(others) // 2
        return others[mid] if len(others) % 2 else (others[mid - 1] + others[mid]) / 2
    return None


def pruned_line(s: settingsmod.Settings, epoch: int, value: float, cut: float | None) -> str:
    """``PRUNED at epoch 3: val_loss 0.91, worse than the rung's cut 0.62`` (the epoch counted from 1)."""
    what = f"PRUNED at epoch {epoch + 1}: {s.kpi} {number(value)}"
    if cut is None:
        return f"{what}, stopped by the {s.pruner} pruner"
    return f"{what}, worse than the {'median' if s.pruner == 'median' else 'rung'}'s cut {number(cut)}"


# ------------------------------------------------------------------ the run
class Tao:
    """TAO's process, in a process group of its own (its workers are stopped with it)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(list(argv), start_new_session=True, env=env)

    def poll(self) -> int | None:
        return self.proc.poll()

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace: float) -> int:
        """SIGTERM, up to ``grace`` seconds to end, then SIGKILL; TAO's exit status."""
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            return self.proc.wait()


def unpack_db_libraries(folder: Path) -> Path | None:
    """A database study's libraries (``search-db-*.zip`` beside the settings, :func:`taobank.campaign.search.bundle.db_parts`)
    and the bundle's Optuna unpacked in a private temporary folder put first on this process's path (Alembic
    reads Optuna's migrations from real files, not from a zip); None when the folder has none. The folder is
    removed when this process exits."""
    import atexit
    import shutil
    import tempfile
    import zipfile

    from .bundle import DB_PART

    parts = sorted(folder.glob(DB_PART.format("*")))
    if not parts:
        return None
    try:
        where = Path(tempfile.mkdtemp(prefix="tao-search-db."))
        atexit.register(shutil.rmtree, where, True)
        for part in parts:
            with zipfile.ZipFile(part) as z:
                z.extractall(where)
        archive = getattr(getattr(sys.modules[__name__], "__loader__", None), "archive", None)
        if archive and "optuna" not in sys.modules:  # Optuna too: its migrations are files Alembic lists
            with zipfile.ZipFile(archive) as z:
                z.extractall(where, [n for n in z.namelist() if n.startswith("optuna/")])
    except (OSError, zipfile.BadZipFile) as exc:
        raise TaoError(f"cannot unpack the study database's libraries ({type(exc).__name__}: {exc})") from None
    sys.path.insert(0, str(where))
    return where


def open_storage(s: settingsmod.Settings, journal: Path) -> tuple[Any, str]:
    """(the study's storage, how a line names it): the journal file, or the database whose URL is in the variable
    ``s.storage_env`` (never shown)."""
    if s.storage_env:
        from . import storage

        url = storage.url_from(s.storage_env)
        return storage.opened(url, s.storage_env, s.db_timeout_seconds), f"the study database in ${s.storage_env}"
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str(journal))), f"the study journal {journal}"


def open_study(s: settingsmod.Settings, journal: Path, trial_index: int) -> Any:
    """The study on its storage, created by the first trial that gets here (the journal's lock, the database's
    unique study name make that safe); a storage that cannot be read is a one-line TaoError naming it."""
    optuna = settingsmod.optuna_module()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    where = f"the study database in ${s.storage_env}" if s.storage_env else f"the study journal {journal}"
    try:
        storage, where = open_storage(s, journal)
        return optuna.create_study(storage=storage, study_name=s.study, direction=settingsmod.direction(s),
                                   sampler=settingsmod.sampler(s, trial_index), pruner=settingsmod.pruner(s),
                                   load_if_exists=True)
    except TaoError:
        raise
    except Exception as exc:  # Optuna raises many kinds on a damaged journal: all are this one line
        detail = str(exc).splitlines()[0][:200] if str(exc) else "no detail"
        if s.storage_env:
            from . import storage as storagemod

            detail = storagemod.scrub(detail, os.environ.get(s.storage_env, ""))
        see = "" if s.storage_env else "; see references/search.md (a damaged journal)"
        raise TaoError(f"{where} cannot be read ({type(exc).__name__}: {detail}): this trial fails, the "
                       f"others go on{see}") from None


def tao_environment(s: settingsmod.Settings) -> dict[str, str] | None:
    """TAO's environment: this process's, less the variable holding the study database's URL (None: unchanged)."""
    if not s.storage_env:
        return None
    return {k: v for k, v in os.environ.items() if k != s.storage_env}


def run(settings_path: Path, trial_index: int, argv: Sequence[str], *, results: Path, journal: Path | None = None,
        start: Callable[..., Tao] = Tao, sleep: Callable[[float], None] = time.sleep) -> int:
    """One trial, start to end (see the module text); the process's exit status. ``journal``: where the study's
    journal is when it is not beside the settings (Kubernetes: the settings are in a read-only ConfigMap, the
    journal on the shared results volume; its folder is made)."""
    try:
        s = settingsmod.Settings.from_dict(json.loads(settings_path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        say(f"cannot read the study's settings {settings_path}: {exc}")
        return EXIT_STUDY
    if journal is None:
        journal = settings_path.parent / settingsmod.JOURNAL_FILE
    else:
        try:
            journal.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            say(f"cannot make the study's folder {journal.parent}: {exc.strerror}")
            return EXIT_STUDY
    patience = Patience(s, sleep)
    try:
        if s.storage_env:
            unpack_db_libraries(settings_path.parent)
        study = patience("opening the study", open_study, s, journal, trial_index)
        trial = study.ask(settingsmod.distributions(s.space))  # not retried: a lost answer would leave a trial behind
        # the bank's job id: TAO_JOB_ID where the folder's name may differ from it (a Kubernetes trial)
        patience("naming the trial", trial.set_user_attr, "job_id",
                 os.environ.get("TAO_JOB_ID") or os.environ.get("TAO_API_JOB_ID", ""))
        patience("naming the trial", trial.set_user_attr, "sweep_trial", trial_index)
    except TaoError as exc:
        say(str(exc))
        return EXIT_STUDY
    optuna = settingsmod.optuna_module()
    words = [f"{k}={value_word(v)}" for k, v in trial.params.items()]
    say(f"trial {trial.number} of study {s.study} ({s.sampler}, {s.pruner}): {' '.join(words)}")
    stopped: list[int] = []
    tao: Tao | None = None

    def forward(sig: int, _frame: Any) -> None:
        stopped.append(sig)
        if tao is not None:
            tao.signal(sig)

    forwarded = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
    before = {sig: signal.getsignal(sig) for sig in forwarded}
    for sig in forwarded:
        signal.signal(sig, forward)
    try:
        env = tao_environment(s)
        tao = start(list(argv) + words, **({"env": env} if env is not None else {}))
        try:
            return follow(study, trial, s, tao, results, stopped, sleep, patience)
        except Exception as exc:  # the journal failed under the study (damaged, its folder gone): one line, TAO stopped
            if tao.poll() is None:
                tao.stop(s.stop_grace_seconds)
            try:
                study.tell(trial, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
            except Exception:
                pass
            first = str(exc).splitlines()[0][:200] if str(exc) else "no detail"
            where = f"the study journal {journal}"
            if s.storage_env:
                from . import storage as storagemod

                first, where = storagemod.scrub(first, os.environ.get(s.storage_env, "")), \
                    f"the study database in ${s.storage_env}"
            say(f"{where} failed under this trial ({type(exc).__name__}: {first}): TAO stopped, "
                "the trial fails; the others go on")
            return EXIT_STUDY
        except BaseException:
            if tao.poll() is None:  # an interrupt here must not leave TAO running unwatched, nor the trial RUNNING
                tao.stop(s.stop_grace_seconds)
            raise
    finally:  # the handlers were this trial's: a caller in the same process gets its own back
        for sig, handler in before.items():
            signal.signal(sig, handler)


def follow(study: Any, trial: Any, s: settingsmod.Settings, tao: Tao, results: Path, stopped: list[int],
           sleep: Callable[[float], None], patience: Patience) -> int:
    """Report each finished epoch, prune when the pruner says so, and tell the end (steps 3 to 5)."""
    optuna = settingsmod.optuna_module()
    reported: dict[int, float] = {}
    reading = Reading()
    while True:
        code = tao.poll()
        reading = read(results, s.action, s.kpi)
        for epoch in sorted(set(reading.values) - set(reported)):
            value = reading.values[epoch]
            reported[epoch] = value
            patience(f"reporting epoch {epoch + 1}", trial.report, value, epoch + 1)
            if code is None and not stopped and patience("asking the pruner", trial.should_prune):
                cut = patience("reading the rung's cut", cut_of, study, trial._trial_id, s, epoch + 1)
                line = pruned_line(s, epoch, value, cut)
                say(f"{line}: stopping TAO (SIGTERM, {s.stop_grace_seconds:g} s before SIGKILL)")
                rc = tao.stop(s.stop_grace_seconds)
                say(f"TAO stopped (exit {rc})")
                if reading.file:
                    write_pruned(reading.file, line, epoch)
                tell(patience, study, trial, state=optuna.trial.TrialState.PRUNED)
                return 0
        if code is not None:
            break
        sleep(s.poll_seconds)
    return finish(study, trial, s, reading, reported, code, stopped, patience)


def tell(patience: Patience, study: Any, trial: Any, *values: float, state: Any = None) -> None:
    """``study.tell``, retried as :class:`Patience` retries; a retry after a tell that did land is a no-op."""
    patience("telling the trial's end", study.tell, trial, *values, **({"state": state} if state is not None else {}),
             skip_if_finished=True)


def finish(study: Any, trial: Any, s: settingsmod.Settings, reading: Reading, reported: dict[int, float],
           code: int, stopped: list[int], patience: Patience) -> int:
    """Tell the study how the run ended; the trial's exit status."""
    optuna = settingsmod.optuna_module()
    fail = optuna.trial.TrialState.FAIL
    finite = [v for v in reported.values() if math.isfinite(v)]
    if stopped:
        tell(patience, study, trial, state=fail)
        say(f"stopped by signal {stopped[0]}: trial {trial.number} told FAIL")
        return code if code else 128 + stopped[0]
    if code != 0:
        tell(patience, study, trial, state=fail)
        say(f"TAO exited {code}: trial {trial.number} told FAIL")
        return code
    if not finite:
        tell(patience, study, trial, state=fail)
        if reported:
            say(f"every {s.kpi} TAO wrote is NaN or infinite: trial {trial.number} told FAIL")
        else:
            has = ", ".join(reading.kpis) or "no KPI at all"
            say(f"TAO never wrote {s.kpi} to status.json (it writes {has}): trial {trial.number} told FAIL; give "
                "--kpi one of those")
        return EXIT_NO_KPI
    best = min(finite) if s.mode == "min" else max(finite)
    tell(patience, study, trial, best)
    say(f"trial {trial.number} COMPLETE: best {s.kpi} {number(best)} over {len(reported)} epoch(s)")
    return 0


def check_storage(settings_path: Path) -> int:
    """``--check-storage``: the study's database reached from here (where a trial runs), nothing written; one
    line either way (the URL never shown). A journal study has nothing to reach."""
    try:
        s = settingsmod.Settings.from_dict(json.loads(settings_path.read_text(encoding="utf-8")))
        if not s.storage_env:
            say("the study is a journal file: no database to reach")
            return 0
        from . import storage

        unpack_db_libraries(settings_path.parent)
        storage.reach(storage.url_from(s.storage_env), s.storage_env)
    except (OSError, ValueError, TaoError) as exc:
        say(str(exc) if isinstance(exc, TaoError) else f"cannot read the study's settings {settings_path}: {exc}")
        return EXIT_STUDY
    say(f"study database ${s.storage_env} reached")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="search.pyz", description="one trial of a tao-skill-bank search")
    p.add_argument("--settings", required=True, help="the study's settings file (study.json)")
    p.add_argument("--trial", type=int, help="the sweep's trial index (seeds the sampler)")
    p.add_argument("--journal", help="the study's journal, when it is not beside the settings")
    p.add_argument("--check-storage", action="store_true", help="only check that the study's database is reached "
                   "from here (the submit's site check)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- TAO's argv")
    args = p.parse_args(argv)
    if args.check_storage:
        return check_storage(Path(args.settings))
    if args.trial is None:
        p.error("the following arguments are required: --trial")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        say("no TAO command after --")
        return 2
    results = os.environ.get("RESULTS_DIR") or ""
    if not results:
        say("RESULTS_DIR is not set: the trial's results folder is where TAO's status.json is read")
        return 2
    return run(Path(args.settings), args.trial, command, results=Path(results),
               journal=Path(args.journal) if args.journal else None)


if __name__ == "__main__":
    sys.exit(main())
