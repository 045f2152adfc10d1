"""A search on Docker (``submit --search``): its folder beside the trials' results folders, mounted in every
trial's container at :data:`SEARCH_MOUNT`, checked before any record and staged before any container is made
(a bind mount needs its source); the study's journal read back from this host."""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import replace
from typing import Any

from ...contract import Gate
from ...errors import TaoError
from ...records import Record
from . import engine as eng

#: DockerPlan (taobank.platforms.docker.submit, which imports this module to stage the folder)
DockerPlan = Any


#: Where every trial's container sees the search's folder (the bundle, the settings, the study's journal).
SEARCH_MOUNT = "/tao-search"


def search_folder(plans: list[DockerPlan], sweep: str) -> str:
    """The search's folder on this host: ``<results base>/<sweep id>/search``, beside the trials' folders."""
    return os.path.join(os.path.dirname(plans[0].results_dir), sweep, "search")


def check_search(plans: list[DockerPlan], gate: Gate, sweep: str, search: Any) -> None:
    """Before any record, the one rule of every platform (taobank.campaign.search.site): the folder is new, creating a
    symbolic link beside it is exclusive (Optuna's journal lock; not for a study in a database) and the image runs
    ``python3`` 3.10+ with numpy (ONE ``run --rm``); then each trial's container gets the folder mounted and the
    runner in front of its command."""
    folder = search_folder(plans, sweep)
    if os.path.lexists(os.path.dirname(folder)):
        raise TaoError(f"{os.path.dirname(folder)} exists already: a search's folder is its own; nothing was done")
    probe = os.path.dirname(os.path.dirname(folder))
    while not os.path.isdir(probe):
        probe = os.path.dirname(probe)
    if not search.settings.storage_env:
        check_lock(probe, search)
    lock_word = "" if search.settings.storage_env else "journal lock ok; "
    first = plans[0]
    assert first.run is not None
    if gate.dry_run:  # a dry run pulls nothing: the image's python3 is run by the submit itself
        wrap_trials(plans, sweep, search)
        gate.lines.append(f"search folder {folder} ({lock_word}the image's python3 is checked at submit)")
        return
    e = eng.Engine(first.engine, first.host)
    user = ["--user", first.run.user] if first.run.user else []
    res = e.run(["run", "--rm", *user, first.run.image, "python3", "-c", search.python_check], check=False, timeout=300,
                what=f"{e.name} run (the image's python3)")
    if not res.ok:
        raise TaoError(f"the image {first.run.image} has no python3 of 3.10 or later with numpy, which each search "
                       "trial's runner needs (TAO's images have them); nothing was done")
    if search.settings.storage_env:
        gate.lines.append(check_database(e, first, probe, sweep, search))
    wrap_trials(plans, sweep, search)
    gate.lines.append(f"search folder {folder} ({lock_word}the image runs python3 with numpy)")


def check_database(e: eng.Engine, first: DockerPlan, probe: str, sweep: str, search: Any) -> str:
    """A database study: ONE ``run --rm`` of the trial's image on the trial's network, the search's files in a
    temporary folder mounted read-only, the runner's ``--check-storage`` reaching the database with the URL
    given by NAME (``--env NAME``: the engine reads it from this environment) - where the trials will run."""
    name = search.settings.storage_env
    assert first.run is not None
    user = ["--user", first.run.user] if first.run.user else []
    network = ["--network", first.run.network] if first.run.network and first.run.network != "default" else []
    try:
        with tempfile.TemporaryDirectory(prefix=".tao-search-db-check.", dir=probe) as tmp:
            os.chmod(tmp, 0o755)
            for fname, data in search.files(sweep).items():
                with open(os.path.join(tmp, fname), "wb") as fh:
                    fh.write(data)
            res = e.run(["run", "--rm", *user, *network, "--env", name, "--mount",
                         f"type=bind,source={tmp},target={SEARCH_MOUNT},readonly", first.run.image, "python3",
                         f"{SEARCH_MOUNT}/search.pyz", "--settings", f"{SEARCH_MOUNT}/study.json", "--check-storage"],
                        check=False, timeout=300, what=f"{e.name} run (the study database from a trial's container)")
    except OSError as exc:
        raise TaoError(f"cannot write in {probe} for the study database's check ({exc.strerror}); nothing was "
                       "done") from None
    said = [ln.split("tao-search:", 1)[1].strip() for ln in res.stdout.splitlines() if "tao-search:" in ln]
    if not res.ok:
        why = said[-1] if said else f"exit {res.returncode}"
        raise TaoError(f"a trial's container cannot reach its study database: {why} (give the trials a network "
                       "that reaches it, e.g. --network host); nothing was done")
    return f"study database ${name} reached from a trial's container"


def check_lock(probe: str, search: Any) -> None:
    """Creating a symbolic link in ``probe`` is exclusive (Optuna's journal lock), or one line saying what to do."""
    try:
        with tempfile.TemporaryDirectory(prefix=".tao-search-check.", dir=probe) as tmp:
            os.symlink("tao", os.path.join(tmp, "lock"))
            try:
                os.symlink("tao", os.path.join(tmp, "lock"))
                exclusive = False
            except FileExistsError:
                exclusive = True
    except OSError as exc:
        raise TaoError(f"cannot write in {probe}: a search keeps its study beside the results ({exc.strerror}); "
                       "nothing was done") from None
    if not exclusive:  # the one wording of every platform (taobank.campaign.search.site.refusal)
        raise TaoError(search.site_refusal({"no-lock": probe}, base=probe, where="on this host", python_fix="",
                                           nothing="nothing was done"))


def wrap_trials(plans: list[DockerPlan], sweep: str, search: Any) -> None:
    """Each trial's container with the search's folder mounted and the runner in front of its command."""
    folder = search_folder(plans, sweep)
    for i, plan in enumerate(plans):
        assert plan.run is not None
        plan.run = replace(plan.run, mounts=(*plan.run.mounts, (folder, SEARCH_MOUNT, False)),
                           command=search.wrap(plan.run.command, SEARCH_MOUNT, i))
        plan.backend["search_dir"] = folder


def stage_search(plans: list[DockerPlan], sweep: str, search: Any) -> str:
    """Write the search's files in its new folder (before any container is made: a bind mount needs it)."""
    folder = search_folder(plans, sweep)
    try:
        os.makedirs(folder, mode=0o755)
        for name, data in search.files(sweep).items():
            with open(os.path.join(folder, name), "wb") as fh:
                fh.write(data)
    except OSError as exc:
        unstage_search(folder)
        raise TaoError(f"cannot write the search's folder {folder}: {exc.strerror}") from None
    return folder


def unstage_search(folder: str) -> None:
    """Remove a search's folder a failed launch made (its parent, the sweep's, when that is left empty)."""
    shutil.rmtree(folder, ignore_errors=True)
    try:
        os.rmdir(os.path.dirname(folder))
    except OSError:
        pass


def read_search_file(rec: Record, path: str) -> str:
    """A file of the search's folder on this host ("" before it exists); only in the folder the record names."""
    from ... import fsio

    folder = eng.DockerFacts.of(rec).search_dir
    if not folder or os.path.dirname(path) != folder.rstrip("/"):
        raise TaoError(f"job {rec.id} is not a trial of a search (its record names no search folder)")
    return fsio.read_text(path, "the study journal", max_bytes=64 * 1024 * 1024, missing_ok=True) or ""
