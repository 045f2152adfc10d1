"""Sweeps on Docker: every trial's container made with ``docker create`` (one per trial: the CLI makes one
container a call), then ONE ``docker start`` of the first ``--max-concurrent``; the others stay created
(held) and the core releases them, ONE ``docker start`` of their names, as slots free during status.
Status is Docker's one ``docker inspect`` of every container; cancel is :func:`taobank.docker.cancel.cancel_many`.

Every container is made before any starts: a failure removes what was made (one ``docker rm --force``)
and the trials' folders, so no trial runs without the others.
"""
from __future__ import annotations

import os
from dataclasses import replace

from ..contract import Gate, Launch
from ..errors import TaoError
from . import engine as eng
from . import facts, gpus, render
from .submit import DockerPlan, count_all

#: The label every trial container carries (its sweep id): ``docker ps --filter label=...`` finds a sweep.
LABEL_SWEEP = "org.tao-skill-bank.sweep"


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
    (:mod:`taobank.sweepslots`). [] when no GPU is asked for; one line when the host has too few, or when
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


def launch(plans: list[DockerPlan], recs: list[dict], max_concurrent: int) -> list[Launch]:
    """Make every trial's folder and container, then start the first ``max_concurrent`` in one call."""
    first = plans[0]
    e = eng.Engine(first.engine, first.host)
    sweep_id = recs[0]["sweep"]
    made: list[str] = []
    folders: list[str] = []
    ids: dict[str, str] = {}
    try:
        for plan, rec in zip(plans, recs):
            assert plan.run is not None
            try:
                os.makedirs(plan.results_dir, mode=0o755)
            except OSError as exc:
                raise TaoError(f"cannot create the results folder {plan.results_dir}: {exc.strerror}") from None
            folders.append(plan.results_dir)
            run = replace(plan.run, labels={**plan.run.labels, LABEL_SWEEP: sweep_id})
            made.append(rec["id"])  # a create that did not answer may have made it: removed on failure too
            res = e.run(render.create_argv(run), check=False, timeout=300, what=f"{e.name} create")
            if not res.ok:
                raise TaoError(eng.explain(e.name, res.stderr or res.stdout, f"{e.name} create", res.returncode))
            ids[rec["id"]] = (res.stdout.strip().splitlines() or [rec["id"]])[-1][:64]
        start = [r["id"] for r in recs[:max_concurrent]]
        res = e.run(["start", *start], check=False, timeout=300, what=f"{e.name} start")
        if not res.ok:
            raise TaoError(eng.explain(e.name, res.stderr or res.stdout, f"{e.name} start", res.returncode))
    except TaoError as exc:
        _undo(e, made, folders)
        raise TaoError(f"{exc}; every trial's container was removed") from None
    out = []
    for i, rec in enumerate(recs):
        held = i >= max_concurrent
        cid = ids[rec["id"]]
        out.append(Launch(backend_ref=cid[:12], backend={"container_id": cid, "held": held},
                          message=f"container {rec['id']} " + ("created, held (waits for a sweep slot)" if held
                                                               else f"started ({e.name} start)"),
                          details={"container": rec["id"], "results": plans[i].results_dir}))
    return out


def _undo(e: eng.Engine, names: list[str], folders: list[str]) -> None:
    """Remove the containers made so far (one call) and the empty folders (best effort)."""
    if names:
        e.run(["rm", "--force", *names], check=False, timeout=300, what=f"{e.name} rm")
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            pass


def release(recs: list[dict]) -> None:
    """Start these held trials: ONE ``docker start`` of their names per engine address."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rec in recs:
        e = eng.Engine.of(rec)
        groups.setdefault((e.name, e.host or ""), []).append(facts.container_of(rec))
    for (name, host), names in groups.items():
        e = eng.Engine(name, host or None)
        e.run(["start", *names], timeout=300, what=f"{name} start (release sweep trials)")
