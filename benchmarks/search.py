#!/usr/bin/env python3
"""A search's quality and cost against a grid and against random search, measured in one run (real Optuna 5.0.0,
real journal storage on a file; the bank's own sampler and pruner settings, taobank.campaign.search.settings).

  python3 benchmarks/search.py [--trials 24] [--concurrent 4] [--epochs 9] [--seeds 10] [--check]

The trainer is the stand-in's curve in Python (testclusters/fake_tao_train.sh with fake.lr_optimum=0.001): the
val_loss of epoch e (0-based, of E) is 0.4 + 0.25 * log10(lr / 0.001)^2 + 0.02 * (e - b)^2 with b = (2E+2)//3 - 1,
plus a noise of at most 0.01 drawn from (lr, e); its optimum is 0.4. K trials run in lockstep (one epoch each per
tick), each reporting every epoch as the trial's runner does (taobank.campaign.search.trial: report, should_prune, tell the
best epoch's value; a pruned trial's epochs stop there), a new trial asked as one ends, N in all.

For each seed it measures:
  tpe+asha      the study's best value and the epochs it ran
  grid          N log-spaced learning rates over the same range, every epoch: its best and N * E epochs
  random        random search without pruning at the SAME epoch budget as tpe+asha: its best
and prints per seed, then the ratios: epochs tpe+asha / grid, seeds where tpe+asha is within 5 % of the optimum,
seeds where it beats random at equal epochs, and the study's own overhead per trial (ask + tell + reports on the
journal file). Issue 48's targets (N=24, K=4, 10 seeds): epochs <= 50 % of the grid's, within 5 % in every seed,
beats random in >= 8 of 10, overhead <= 1 s a trial; without --check the run exits 1 when one is missed.

--check (CI, tests/unit/test_benchmarks.py, at a small N): exits 1 unless the counts hold: every trial asked once
and told once (COMPLETE or PRUNED in the journal), one report per epoch run, no trial past E epochs, and the grid's
epochs N * E. Times are never asserted there.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BANK = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BANK / "scripts")]

from taobank.campaign.search import settings as settingsmod, space  # noqa: E402

LOW, HIGH, OPTIMUM_LR, OPTIMUM = 1e-5, 1e-1, 1e-3, 0.4


def val_loss(lr: float, epoch: int, epochs: int) -> float:
    """The stand-in's val_loss (fake.lr_optimum=0.001) at a 0-based epoch, with its bounded noise."""
    best_epoch = (2 * epochs + 2) // 3 - 1
    noise = random.Random(f"{lr!r}/{epoch}").uniform(-0.01, 0.01)
    return OPTIMUM + 0.25 * math.log10(lr / OPTIMUM_LR) ** 2 + 0.02 * (epoch - best_epoch) ** 2 + noise


@dataclass
class Outcome:
    best: float
    epochs: int
    asked: int
    told: int
    reports: int
    overhead_s: float
    over_epochs: int = 0


def study_run(sampler: str, pruner: str, trials: int, k: int, epochs: int, seed: int) -> Outcome:
    """N trials, K at once in lockstep, on a fresh journal: the runner's ask/report/should_prune/tell per trial."""
    optuna = settingsmod.optuna_module()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    s = settingsmod.make("bench", sampler=sampler, pruner=pruner, trials=trials, kpi="val_loss", mode=None,
                         space=space.from_flags([f"train.optim.lr=loguniform({LOW},{HIGH})"]), seed=seed)
    dists = settingsmod.distributions(s.space)
    with tempfile.TemporaryDirectory(prefix="tao-search-bench-") as tmp:
        storage = JournalStorage(JournalFileBackend(str(Path(tmp) / "journal.log")))
        overhead = 0.0
        asked = told = reports = spent = over = 0
        active: list[list] = []  # [study, trial, lr, next epoch, values]

        def ask() -> None:
            nonlocal asked, overhead
            t0 = time.perf_counter()
            # each worker opens the study with its own seeded sampler, as each trial's runner does
            study = optuna.create_study(storage=storage, study_name="bench", direction="minimize",
                                        sampler=settingsmod.sampler(s, asked), pruner=settingsmod.pruner(s),
                                        load_if_exists=True)
            trial = study.ask(dists)
            overhead += time.perf_counter() - t0
            active.append([study, trial, float(trial.params["train.optim.lr"]), 0, []])
            asked += 1

        while asked < min(k, trials):
            ask()
        while active:
            for run in list(active):
                study, trial, lr, epoch, values = run
                value = val_loss(lr, epoch, epochs)
                values.append(value)
                spent += 1
                t0 = time.perf_counter()
                trial.report(value, epoch + 1)
                reports += 1
                pruned = trial.should_prune()
                if pruned:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                elif epoch + 1 == epochs:
                    study.tell(trial, min(values))
                overhead += time.perf_counter() - t0
                run[3] = epoch + 1
                over += run[3] > epochs
                if pruned or epoch + 1 == epochs:
                    told += 1
                    active.remove(run)
                    if asked < trials:
                        ask()
        final = optuna.load_study(study_name="bench", storage=storage)
        done = [t for t in final.trials if t.state.name in ("COMPLETE", "PRUNED")]
        best = final.best_value if any(t.state.name == "COMPLETE" for t in done) else math.inf
        return Outcome(best, spent, asked, len(done) if told == len(done) else -1, reports, overhead / max(asked, 1),
                       over)


def grid(trials: int, epochs: int) -> Outcome:
    """N log-spaced learning rates, every epoch of each."""
    lrs = [LOW * (HIGH / LOW) ** (i / (trials - 1)) for i in range(trials)] if trials > 1 else [OPTIMUM_LR]
    best = min(min(val_loss(lr, e, epochs) for e in range(epochs)) for lr in lrs)
    return Outcome(best, trials * epochs, trials, trials, trials * epochs, 0.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=24)
    p.add_argument("--concurrent", type=int, default=4)
    p.add_argument("--epochs", type=int, default=9)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--check", action="store_true", help="assert the counts only (CI, small N)")
    a = p.parse_args(argv)
    n, k, e = a.trials, a.concurrent, a.epochs
    base = grid(n, e)
    print(f"search benchmark: N={n} trials, K={k} at once, E={e} epochs; grid: best {base.best:.4f}, "
          f"{base.epochs} epochs")
    print(f"{'seed':>4} {'tpe+asha best':>14} {'epochs':>7} {'random best':>12} {'random trials':>14} "
          f"{'overhead/trial':>15}")
    problems: list[str] = []
    wins = close = 0
    ratios, overheads = [], []
    for seed in range(a.seeds):
        tpe = study_run("tpe", "asha", n, k, e, seed)
        budget_trials = max(1, tpe.epochs // e)  # random search, every epoch, the same budget
        # its own seeds: TPE's random start-up draws with the study's seed would repeat random search's own
        rnd = study_run("random", "none", budget_trials, min(k, budget_trials), e, 1000 + seed)
        wins += tpe.best < rnd.best
        close += tpe.best <= OPTIMUM * 1.05
        ratios.append(tpe.epochs / base.epochs)
        overheads.append(tpe.overhead_s)
        print(f"{seed:>4} {tpe.best:>14.4f} {tpe.epochs:>7} {rnd.best:>12.4f} {budget_trials:>14} "
              f"{tpe.overhead_s:>14.3f}s")
        for name, o, want in (("tpe+asha", tpe, n), ("random", rnd, budget_trials)):
            if o.asked != want or o.told != want:
                problems.append(f"seed {seed} {name}: {o.asked} asked, {o.told} told, {want} wanted")
            if o.reports != o.epochs or o.over_epochs:
                problems.append(f"seed {seed} {name}: {o.reports} reports for {o.epochs} epochs run, "
                                f"{o.over_epochs} past {e}")
    if base.epochs != n * e:
        problems.append(f"grid: {base.epochs} epochs, not {n * e}")
    ratio, overhead = sum(ratios) / len(ratios), max(overheads)
    print(f"epochs tpe+asha / grid: {ratio:.2f}x (mean; target <= 0.50)")
    print(f"within 5 % of the optimum {OPTIMUM}: {close} of {a.seeds} seeds (target: all)")
    print(f"beats random at equal epochs: {wins} of {a.seeds} seeds (target >= 80 %)")
    print(f"study overhead per trial (ask + tell + reports, journal file): {overhead:.3f} s at most (target <= 1 s)")
    if not a.check:
        if ratio > 0.5:
            problems.append(f"tpe+asha ran {ratio:.2f}x the grid's epochs (target <= 0.50)")
        if close < a.seeds:
            problems.append(f"within 5 % of the optimum in {close} of {a.seeds} seeds")
        if wins < math.ceil(0.8 * a.seeds):
            problems.append(f"beat random in {wins} of {a.seeds} seeds (target >= 80 %)")
        if overhead > 1.0:
            problems.append(f"overhead {overhead:.3f} s a trial (target <= 1 s)")
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
