"""Argv -> job spec for every platform: the grammar built from the adapter's flag declarations.

Each adapter's ``flags`` module declares its submit flags as data (``SHARED``, ``FLAGS``) and says where
each value goes (``spec_from_flags``); here they become argparse flags, and the parsed values plain
Python (``KEY=VALUE`` pairs a dict, the argv after ``--`` a list) the adapter places in its spec.
"""
from __future__ import annotations

import argparse
from typing import Any

from .. import registry
from ..flags import Declarations, Flag
from . import jobflags
from .entry import parse_kv


def declaration(platform: str) -> Declarations:
    """The platform's flag declarations (its adapter's ``flags``)."""
    return registry.adapter(platform).flags


def flags_of(platform: str) -> tuple[Flag, ...]:
    """Every submit flag of ``platform``: the shared ones as it spells them, then its own."""
    decl = declaration(platform)
    return jobflags.shared_flags(decl.SHARED) + tuple(decl.FLAGS)


def spec_arguments(parser: argparse.ArgumentParser, platform: str) -> None:
    """The job spec flags of ``platform``'s submit (and of render_k8s_job.py for Kubernetes)."""
    jobflags.add_arguments(parser, flags_of(platform))


def values_of(args: argparse.Namespace, platform: str) -> dict[str, Any]:
    """The declared flags' values from ``args``, as the adapter takes them."""
    from .verbcli import deprecated

    values: dict[str, Any] = {}
    for flag in flags_of(platform):
        value = getattr(args, flag.dest, None)
        values[flag.dest] = parse_kv(value, flag.names[0]) if flag.kind == "pairs" else value
    if values.get("secret"):
        deprecated("--secret")
        values["secret_env"] = list(values.get("secret_env") or []) + list(values.pop("secret"))
    command = getattr(args, "command", None)
    if isinstance(command, list):  # the argv after ``--`` (SLURM, Docker)
        values["command"] = (command[1:] if command and command[0] == "--" else command) or None
    return values


def spec_from_args(args: argparse.Namespace, platform: str) -> dict:
    """``--spec`` merged with the flags (flags win), validated by the platform; the network and action a TAO
    command names (``dino train ...``) fill the ones neither gives (:func:`taobank.taoargs.identified`)."""
    from .. import taoargs

    return taoargs.identified(declaration(platform).spec_from_flags(args.spec, values_of(args, platform)))
