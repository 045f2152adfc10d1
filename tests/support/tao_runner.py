"""TAO's own Hydra runner (nvidia-tao-core's ``nvidia_tao_core.hydra.runner.hydra_runner``) as the tests' oracle
of what a spec and its overrides do at the start of a TAO job.

The runner is run in this process exactly as a TAO entrypoint runs it (``@hydra_runner(config_path,
config_name, schema=ExperimentConfig)``, the overrides as its argv); its task then reads the sections the
action reads, as TAO's own task does first (``OmegaConf.to_container``: a required ``???`` fails there).
Test dependency only (requirements-tao.txt: nvidia-tao-core, omegaconf, hydra-core); the bank never imports it.
"""
from __future__ import annotations

import contextlib
import io
import logging
import sys
import warnings
from pathlib import Path
from typing import Sequence


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
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
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
