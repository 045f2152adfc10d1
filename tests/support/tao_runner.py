"""TAO's own Hydra runner (nvidia-tao-core's ``nvidia_tao_core.hydra.runner.hydra_runner``) as the tests' oracle
of what a spec and its overrides do at the start of a TAO job.

The runner is run in this process exactly as a TAO entrypoint runs it (``@hydra_runner(config_path,
config_name, schema=ExperimentConfig)``, the overrides as its argv); its task then reads the sections the
action reads, as TAO's own task does first (``OmegaConf.to_container``: a required ``???`` fails there).
Test dependency only (requirements-tao.txt: nvidia-tao-core, omegaconf, hydra-core); the bank never imports it.

Two pieces of Hydra's work that cannot change a verdict are skipped (``TAO_RUNNER_PLAIN=1`` keeps them; a unit
test runs both ways on the same specs and they agree), halving a run:

- ``Hydra.get_mode`` composes the whole config a first time only to read ``hydra.mode``, swallowing any error,
  and a spec never sets ``hydra.mode``, so it always returns None; the run then composes it again, and that
  compose is the one that judges the spec. It returns None here without composing.
- ``hydra_runner`` stores the schema in Hydra's ConfigStore at every run (``OmegaConf.structured`` of the whole
  experiment dataclass); the same class under the same name is stored once (ConfigStore hands every load a deep
  copy, so a stored node is never changed by a run).

:func:`run_many` runs a batch of specs over worker processes (forked from this one, TAO's modules already
loaded): ``TAO_RUNNER_WORKERS`` of them, default this machine's CPUs (at most 4).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

#: config name -> (the schema class, the ConfigStore node made of it) this process stored
_STORED: dict[str, tuple[Any, Any]] = {}


@contextlib.contextmanager
def _quick() -> Iterator[None]:
    """The two savings of the module's docstring, for the length of one run (none with TAO_RUNNER_PLAIN=1)."""
    if os.environ.get("TAO_RUNNER_PLAIN") == "1":
        yield
        return
    from hydra._internal.hydra import Hydra
    from hydra.core.config_store import ConfigStore

    get_mode, store = Hydra.get_mode, ConfigStore.store

    def no_mode(self: Any, config_name: Any, overrides: Any) -> None:  # what get_mode returns for every spec
        return None

    def store_once(self: Any, name: str, node: Any, group: Any = None, package: Any = None,
                   provider: Any = None) -> None:
        plain = group is None and package is None and provider is None
        held = _STORED.get(name)
        if plain and held is not None and held[0] is node and self.repo.get(f"{name}.yaml") is held[1]:
            return
        store(self, name, node, group, package, provider)
        if plain:
            _STORED[name] = (node, self.repo.get(f"{name}.yaml"))

    Hydra.get_mode, ConfigStore.store = no_mode, store_once  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode, ConfigStore.store = get_mode, store  # type: ignore[method-assign]


def run(exp: type, spec_file: Path, overrides: Sequence[str], reads: Sequence[str]) -> tuple[bool, str]:
    """(accepted, what it said) for TAO's runner on ``spec_file`` with ``overrides`` and schema ``exp``;
    ``reads``: the top-level sections the action's task reads."""
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from nvidia_tao_core.hydra.runner import hydra_runner

    seen: dict = {}

    def task(cfg) -> None:  # what TAO's entrypoint does first: read its config
        for key in reads:
            if key in cfg and OmegaConf.is_config(cfg._get_node(key)) and not cfg._get_node(key)._is_none():
                OmegaConf.to_container(cfg[key], resolve=False, throw_on_missing=True)
            elif key in cfg:
                cfg[key]  # a required top-level value fails here
        seen["ok"] = True

    task.__module__ = __name__
    main = hydra_runner(config_path=str(spec_file.parent), config_name=spec_file.stem, schema=exp)(task)
    argv, sys.argv = sys.argv, ["tao_runner", *overrides]
    err = io.StringIO()
    GlobalHydra.instance().clear()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings(), \
                _quick():
            warnings.simplefilter("ignore")  # Hydra's notes on its own deprecations, not about the spec
            main()
    except SystemExit:
        pass
    except Exception as exc:  # noqa: BLE001 - any failure of the runner is a refusal, its text kept
        err.write(f"{type(exc).__name__}: {exc}")
    finally:
        sys.argv = argv
        GlobalHydra.instance().clear()
        logging.disable(logging.NOTSET)
    return bool(seen.get("ok")), err.getvalue()


@dataclass(frozen=True)
class Job:
    """One run of :func:`run_many`: the spec's text (written as ``<action>.yaml``) and its overrides."""

    network: str
    action: str
    text: str
    overrides: tuple[str, ...]
    reads: tuple[str, ...]


#: process id -> its folder of spec files: two processes (a forked worker and its parent) never share one
_FOLDERS: dict[int, Path] = {}


def _one(job: Job) -> tuple[bool, str]:
    from devtools import tao_specs

    folder = _FOLDERS.get(os.getpid())
    if folder is None:
        folder = _FOLDERS[os.getpid()] = Path(tempfile.mkdtemp(prefix="tao-runner-"))
    spec_file = folder / f"{job.action}.yaml"
    spec_file.write_text(job.text, encoding="utf-8")
    exp = tao_specs.experiment_class(job.network, job.action)
    assert exp is not None, (job.network, job.action)
    return run(exp, spec_file, list(job.overrides), job.reads)


#: At most this many runner processes by default (each holds TAO's modules, about 200 MB).
MAX_WORKERS = 4


def workers() -> int:
    """How many processes :func:`run_many` uses: ``TAO_RUNNER_WORKERS``, else this machine's CPUs (at most
    :data:`MAX_WORKERS`). Not divided among pytest-xdist's workers: with ``--dist loadfile`` the two runner files
    are the last to finish, and their pools then have the CPUs the other files left."""
    given = os.environ.get("TAO_RUNNER_WORKERS")
    if given:
        return max(1, int(given))
    return max(1, min(MAX_WORKERS, os.cpu_count() or 1))


_POOL: list[Any] = []


def run_many(jobs: Sequence[Job]) -> list[tuple[bool, str]]:
    """(accepted, what it said) of each job, in order: TAO's runner over :func:`workers` processes."""
    n = workers()
    if n == 1 or len(jobs) < 2:
        return [_one(job) for job in jobs]
    if not _POOL:
        import atexit
        import multiprocessing

        _POOL.append(multiprocessing.get_context("fork").Pool(n))
        atexit.register(_POOL[0].terminate)
    return list(_POOL[0].map(_one, jobs, chunksize=max(1, len(jobs) // (4 * n))))
