"""Sweeps on Docker: the one launch (:func:`taobank.platforms.docker.submit.launch`) makes every trial's container and
starts the first ``--max-concurrent``; the others stay created (held) and the core releases them, ONE
``docker start`` of their names (here), as slots free during status. Before any record, each trial gets GPUs
no other running trial has (:func:`check`). Status is Docker's one ``docker inspect`` of every container;
cancel is :func:`taobank.platforms.docker.cancel.cancel_many`.
"""
from __future__ import annotations

import os
from dataclasses import replace

from ...contract import Gate
from ...errors import TaoError
from . import engine as eng
from . import gpus
from .submit import LABEL_SWEEP, DockerPlan, count_all  # noqa: F401  (the sweep label)
from ...records import Record



def check(plans: list[DockerPlan], max_concurrent: int, gate: Gate) -> None:
    """Each trial with a results folder of its own (the core's gate checked the first one's) and GPUs no other
    running trial has; refused before any record. The record of each trial names the GPUs it gets, and the
    gate warns when another active job has some of them."""
    taken = [p.results_dir for p in plans if os.path.exists(p.results_dir)]
    if taken:
        raise TaoError(f"{taken[0]} exists already: a trial's results folder is its own; nothing was done")
    slots = gpu_slots(plans[0].gpu_request, min(max_concurrent, len(plans)))
    for i, plan in enumerate(plans):
        assert plan.run is not None
        if slots:
            plan.run = replace(plan.run, gpus=slots[i % len(slots)])
            plan.backend["slot"] = i % len(slots)
            plan.backend["gpus"] = plan.backend["gpu_indices"] = ",".join(slots[i % len(slots)])
    if slots:
        for slot in slots:
            note = gpus.sharing(slot, plans[0].host)
            if note:
                gate.lines.append(note)
    elif plans[0].gpu_request not in (0, []):  # the same named devices (or all) for every trial, one at a time
        got = gpus.check_request(plans[0].gpu_request, gpus.host_gpus())
        same = ",".join(g.index for g in got)
        for plan in plans:
            plan.backend["gpu_indices"] = same
            count_all(plan, len(got))  # every trial, not only the one the core's gate checks


def gpu_slots(request: int | str | list[str], k: int) -> list[list[str]]:
    """The GPUs of each of ``k`` trials running at once, none shared: ``--gpus N`` alone would give every
    container the host's first N. Trial i is made with slot ``i % k`` and starts when that slot is free
    (:mod:`taobank.core.sweep_slots`). [] when no GPU is asked for; one line when the host has too few, or when
    the trials ask for the same named devices."""
    if request in (0, []):
        return []
    if not isinstance(request, int):
        if k > 1:
            raise TaoError(f"every trial asks for the same GPUs ({gpus.shown(request)}): {k} at once would share "
                           "them; ask for a count (gpus: N, each running trial gets its own) or --max-concurrent 1; "
                           "nothing was done")
        return []
    host = gpus.host_gpus()
    gpus.check_request(request, host)  # one line when the host has none, or too few for one trial
    found = host or []
    if k * request > len(found):
        raise TaoError(f"{k} trials at once with {request} GPU(s) each need {k * request} GPUs, this host has "
                       f"{len(found)}: use --max-concurrent {len(found) // request} or fewer; nothing was done")
    return [[g.index for g in found[s * request:(s + 1) * request]] for s in range(k)]


def release(recs: list[Record]) -> None:
    """Start these held trials: ONE ``docker start`` of their names per engine address."""
    for e, group in eng.Engine.grouped(recs):
        e.run(["start", *map(eng.container_of, group)], timeout=300, what=f"{e.name} start (release sweep trials)")

