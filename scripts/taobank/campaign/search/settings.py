"""A study's settings, checked once (at submit and again by each trial), and the Optuna objects they make.

The settings travel with the sweep as one JSON file beside the study's journal (``study.json``): every
trial reads the same file, so the sampler, pruner, space and KPI cannot differ between trials. Optuna is
imported only where an object is made (the client needs it to stage the bundle; the trial has it in the
bundle).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ... import kpirank
from ...errors import UsageError
from . import space as spacemod

#: The Optuna release the bank stages and tests (requirements-dev.txt pins the same).
OPTUNA_VERSION = "5.0.0"
SAMPLERS = ("tpe", "random", "grid", "cmaes")
PRUNERS = ("asha", "hyperband", "median", "none")
#: ASHA's and Hyperband's reduction factor: one trial in 3 goes on at each rung (rungs at epoch 1, 3, 9, ...).
REDUCTION_FACTOR = 3
#: Seconds between two reads of TAO's status.json by a trial's runner (a local file read: no cluster call).
POLL_SECONDS = 2.0
#: Seconds a pruned TAO has after SIGTERM to write its last lines and exit, before SIGKILL.
STOP_GRACE_SECONDS = 60.0
#: A database study: seconds one call to the database may wait (connect or answer) before it counts as failed, and
#: seconds a trial keeps retrying failed calls (a restarted server, a stalled host) before the trial fails.
DB_TIMEOUT_SECONDS = 30.0
DB_PATIENCE_SECONDS = 300.0
MAX_TRIALS = 10000
SETTINGS_FILE, JOURNAL_FILE = "study.json", "journal.log"


@dataclass
class Settings:
    """What a study is: how it samples and prunes, how many trials, which KPI which way, over which space."""

    study: str
    sampler: str
    pruner: str
    trials: int
    kpi: str
    mode: str
    space: dict[str, spacemod.Param]
    seed: int = 0
    #: TAO's action (its status.json may be ``<results>/<action>/status.json``)
    action: str = ""
    poll_seconds: float = POLL_SECONDS
    stop_grace_seconds: float = STOP_GRACE_SECONDS
    #: where the mode came from: ``flag`` or ``name`` (:mod:`taobank.kpirank`)
    mode_from: str = "flag"
    #: the NAME of the variable holding the study database's URL (``--study-storage-env``; never the URL): the
    #: study is in that PostgreSQL database, not in the journal file (:mod:`taobank.campaign.search.storage`)
    storage_env: str = ""
    db_timeout_seconds: float = DB_TIMEOUT_SECONDS
    db_patience_seconds: float = DB_PATIENCE_SECONDS
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"study": self.study, "sampler": self.sampler, "pruner": self.pruner, "trials": self.trials,
                "kpi": self.kpi, "mode": self.mode, "mode_from": self.mode_from, "seed": self.seed,
                "action": self.action, "poll_seconds": self.poll_seconds,
                "stop_grace_seconds": self.stop_grace_seconds, "space": spacemod.to_dict(self.space),
                "optuna": OPTUNA_VERSION, **({"storage_env": self.storage_env, "db_timeout_seconds": self.db_timeout_seconds,
                    "db_patience_seconds": self.db_patience_seconds} if self.storage_env else {})}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> "Settings":
        """Settings read back (the trial's ``study.json``), checked by the same rules as at submit."""
        if not isinstance(data, Mapping):
            raise UsageError("search settings are not a JSON object")
        try:
            out = cls(study=str(data["study"]), sampler=str(data["sampler"]), pruner=str(data["pruner"]),
                      trials=data["trials"], kpi=str(data["kpi"]), mode=str(data["mode"]),
                      space=spacemod.from_dict(data["space"]), seed=data.get("seed", 0),
                      action=str(data.get("action") or ""), poll_seconds=float(data.get("poll_seconds", POLL_SECONDS)),
                      stop_grace_seconds=float(data.get("stop_grace_seconds", STOP_GRACE_SECONDS)),
                      mode_from=str(data.get("mode_from") or "flag"),
                      storage_env=str(data.get("storage_env") or ""),
                      db_timeout_seconds=float(data.get("db_timeout_seconds", DB_TIMEOUT_SECONDS)),
                      db_patience_seconds=float(data.get("db_patience_seconds", DB_PATIENCE_SECONDS)))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"search settings lack or garble {exc}") from None
        return out.checked()

    def checked(self, *, space_later: bool = False) -> "Settings":
        """These settings, or a one-line usage error naming the flag to change. ``space_later``: an empty space
        is TAO's AutoML keys, read once the job's network is known (:mod:`taobank.campaign.search.automl`)."""
        if self.sampler not in SAMPLERS:
            raise UsageError(f"--search {self.sampler[:30]!r} is unknown: use one of {', '.join(SAMPLERS)}")
        if self.pruner not in PRUNERS:
            raise UsageError(f"--prune {self.pruner[:30]!r} is unknown: use one of {', '.join(PRUNERS)}")
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or not 1 <= self.trials <= MAX_TRIALS:
            raise UsageError(f"--trials must be a whole number from 1 to {MAX_TRIALS} (got {self.trials})")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise UsageError("--search-seed must be a whole number")
        if not self.kpi or not self.kpi.strip():
            raise UsageError("a search needs --kpi NAME: the KPI TAO writes to status.json that the study optimizes")
        kpirank.direction(self.kpi, self.mode)
        if self.storage_env:
            from . import storage

            storage.check_name(self.storage_env)
        if not self.space:
            if space_later:
                return self
            raise UsageError("a search needs a space: --space KEY=loguniform(a,b)")
        if not 0 < self.poll_seconds <= 3600 or not 0 < self.stop_grace_seconds <= 3600:
            raise UsageError("search settings: poll_seconds and stop_grace_seconds must be within (0, 3600]")
        if not 0 < self.db_timeout_seconds <= 3600 or not 0 <= self.db_patience_seconds <= 86400:
            raise UsageError("search settings: db_timeout_seconds must be within (0, 3600], db_patience_seconds "
                             "within [0, 86400]")
        if self.sampler == "grid":
            points = 1
            for p in self.space.values():
                values = p.grid()
                if values is None:
                    raise UsageError(f"--search grid enumerates its space: {p.key}={p.text()} is continuous (use "
                                     "int(a,b) or choice(x,y,...), or --search tpe|random)")
                points *= len(values)
                if points > MAX_TRIALS:
                    break
            if self.trials > points:
                raise UsageError(f"--search grid: the space has {points} points, fewer than --trials {self.trials}: "
                                 f"give --trials {points} at most")
        return self


def make(study: str, *, sampler: str, pruner: str, trials: int, kpi: str | None, mode: str | None,
         space: Mapping[str, spacemod.Param], seed: int = 0, action: str = "", space_later: bool = False,
         storage_env: str = "") -> Settings:
    """Settings from a submit's flags (``mode`` None: from the KPI's name, :func:`taobank.kpirank.direction`);
    ``space_later``: an empty space is checked once TAO's AutoML keys fill it."""
    if not kpi or not str(kpi).strip():
        raise UsageError("a search needs --kpi NAME: the KPI TAO writes to status.json that the study optimizes")
    way = kpirank.direction(kpi, mode)
    return Settings(study=study, sampler=str(sampler), pruner=str(pruner), trials=trials, kpi=str(kpi),
                    mode=way.mode, mode_from=way.source, space=dict(space), seed=seed, action=action,
                    storage_env=storage_env or "").checked(space_later=space_later)


# ------------------------------------------------------------------ the Optuna objects
def optuna_module() -> Any:
    """Optuna, at the pinned release, or a one-line error saying how to get it."""
    try:
        import optuna
    except ImportError as exc:
        import importlib.util

        if importlib.util.find_spec("optuna") is not None:  # Optuna is there, something it loads is not
            said = next((ln.strip() for ln in reversed(str(exc).splitlines()) if ln.strip()), type(exc).__name__)
            raise UsageError(f"Optuna cannot be imported here: {said[:200]} (a search needs python3 3.10+ with a "
                             "working numpy)") from None
        raise UsageError(f"a search needs Optuna {OPTUNA_VERSION} on this machine (it is staged with the sweep from "
                         f"here): pip install optuna=={OPTUNA_VERSION}") from None
    if optuna.__version__ != OPTUNA_VERSION:
        raise UsageError(f"a search needs Optuna {OPTUNA_VERSION}; this machine has {optuna.__version__}: "
                         f"pip install optuna=={OPTUNA_VERSION}")
    return optuna


def distributions(space: Mapping[str, spacemod.Param]) -> dict[str, Any]:
    """The space as Optuna's distributions (what ``study.ask`` takes)."""
    d = optuna_module().distributions
    out: dict[str, Any] = {}
    for key, p in space.items():
        if p.kind == "choice":
            out[key] = d.CategoricalDistribution(list(p.choices))
        elif p.kind == "int":
            out[key] = d.IntDistribution(int(p.low or 0), int(p.high or 0))
        else:
            out[key] = d.FloatDistribution(float(p.low or 0), float(p.high or 0), log=p.kind == "loguniform")
    return out


def sampler(s: Settings, trial_index: int) -> Any:
    """The study's sampler, seeded per trial (two trials asking at once must not draw the same random start, and
    ``--search-seed`` 1 must not repeat seed 0's draws one trial later: :func:`trial_seed`). TPE starts from random draws for a quarter of the trials (at least 2, at most 10: Optuna's
    default of 10 would make a 12-trial study random) and lies to itself about running trials (constant liar),
    which keeps K trials asking at once from crowding one point."""
    samplers = optuna_module().samplers
    seed = trial_seed(s.seed, trial_index)
    if s.sampler == "tpe":
        return samplers.TPESampler(seed=seed, n_startup_trials=max(2, min(10, s.trials // 4)), constant_liar=True)
    if s.sampler == "random":
        return samplers.RandomSampler(seed=seed)
    if s.sampler == "grid":
        return samplers.GridSampler({k: p.grid() for k, p in s.space.items()}, seed=seed)
    try:
        return samplers.CmaEsSampler(seed=seed)
    except ImportError:
        raise UsageError("--search cmaes needs the cmaes package beside Optuna: pip install cmaes") from None


def trial_seed(seed: int, trial_index: int) -> int:
    """The seed of trial ``trial_index``'s sampler: distinct for every (seed, trial) below a million trials."""
    return (int(seed) * 1_000_003 + int(trial_index)) % 2**32


def pruner(s: Settings) -> Any:
    """The study's pruner over TAO's epochs (the step a trial reports is the epoch, counted from 1)."""
    pruners = optuna_module().pruners
    if s.pruner == "asha":
        return pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=REDUCTION_FACTOR)
    if s.pruner == "hyperband":
        return pruners.HyperbandPruner(min_resource=1, reduction_factor=REDUCTION_FACTOR)
    if s.pruner == "median":
        return pruners.MedianPruner(n_startup_trials=max(1, min(5, s.trials // 4)), n_warmup_steps=1)
    return pruners.NopPruner()


def direction(s: Settings) -> str:
    return "minimize" if s.mode == "min" else "maximize"
