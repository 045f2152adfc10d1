"""Hyperparameter search over a sweep: an Optuna study the sweep's own trials drive, with nobody polling.

A search is a sweep of N trials whose overrides are not known at submit: each trial, as it starts, asks
the study (an Optuna journal on the sweep's shared folder) for them, runs TAO with them, reports each
epoch's KPI from TAO's status.json, stops TAO when the pruner says so and tells the study how it ended
(docs/architecture.md, "Search"). Modules:

* :mod:`.space`    the ``--space KEY=loguniform(a,b)|uniform(a,b)|int(a,b)|choice(x,y,...)`` grammar (pure)
* :mod:`.settings` the study's settings (sampler, pruner, trials, KPI, space) checked once, and the Optuna
  objects they make
* :mod:`.trial`    the trial-side runner (runs on the cluster, inside the staged bundle)
* :mod:`.bundle`   the bundle (Optuna and the runner in one zip application) and the trial's wrapped command
* :mod:`.journal`  the study read back on this machine (the sweep table's parameters, ``sweep best``)
"""
from __future__ import annotations

from typing import Any, Mapping


def is_search(backend: Mapping[str, Any]) -> bool:
    """Whether a record's ``backend`` is a search trial's (its summary: :func:`taobank.campaign.search.bundle.summary_of`);
    read without importing the search's modules (a plain sweep's status needs none of them)."""
    return isinstance(backend.get("search"), str)
