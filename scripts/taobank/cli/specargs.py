"""Argv -> job spec for every platform: the flags every submit shares (one vocabulary: ``--nodes``,
``--gpus-per-node``, ``--cpus``, ``--memory`` ...) and the grammar built from the adapter's flag declarations.

Each adapter's ``flags`` module declares its submit flags as data (``SHARED``, ``FLAGS``) and says where
each value goes (``spec_from_flags``); here they become argparse flags, and the parsed values plain
Python (``KEY=VALUE`` pairs a dict, the argv after ``--`` a list) the adapter places in its spec.
"""
from __future__ import annotations

import argparse
import functools
from typing import Any, Iterable

from .. import registry
from ..flags import Declarations, Flag
from .entry import parse_kv


def declaration(platform: str) -> Declarations:
    """The platform's flag declarations (its adapter's ``flags``)."""
    return registry.adapter(platform).flags


#: The flags of every submit, by value name; a platform adds spellings and help (:class:`taobank.flags.Shared`).
SHARED: tuple[Flag, ...] = (
    Flag(("--spec",), help="job spec file (YAML or JSON); flags override its values"),
    Flag(("--image",)),
    Flag(("--network-arch",), help="TAO network, e.g. dino (default: the one a TAO command names, "
                                    "`dino train ...`; else custom, a generic command)"),
    Flag(("--action",), help="TAO action, e.g. train (default: the one a TAO command names; else run)"),
    Flag(("--nodes",), type=int, help="nodes (pods on Kubernetes)"),
    Flag(("--gpus-per-node", "--gpus"), dest="gpus_per_node", type=int,
         help="GPUs on each node (--gpus is a synonym)"),
    Flag(("--cpus",)),
    Flag(("--memory",)),
    Flag(("--env",), kind="pairs", metavar="KEY=VALUE", help="non-secret env (repeatable)"),
    Flag(("--nccl-env",), kind="pairs", metavar="NCCL_X=VALUE", help="per-cluster NCCL env (repeatable)"),
)


def add_arguments(parser: argparse.ArgumentParser, flags: Iterable[Flag]) -> None:
    """Each declared flag on ``parser``, in order; flags naming one ``exclusive`` group share it."""
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for flag in flags:
        target: argparse._ActionsContainer = parser
        if flag.exclusive:
            if flag.exclusive not in groups:
                groups[flag.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[flag.exclusive]
        kwargs: dict = {"dest": flag.dest, "help": argparse.SUPPRESS if flag.hidden else flag.help}
        if flag.kind in ("value", "list", "pairs"):
            if flag.type is not str:
                kwargs["type"] = flag.type
            if flag.choices is not None:
                kwargs["choices"] = list(flag.choices)
            if flag.metavar is not None:
                kwargs["metavar"] = flag.metavar
            if flag.kind != "value":
                kwargs["action"] = "append"
        else:
            kwargs["action"] = "store_true" if flag.kind == "on" else "store_false"
        kwargs["default"] = flag.default
        target.add_argument(*flag.names, **kwargs)


@functools.cache
def flags_of(platform: str) -> tuple[Flag, ...]:
    """Every submit flag of ``platform``: the shared ones as it spells them, then its own."""
    decl = declaration(platform)
    return decl.SHARED.spell(SHARED) + tuple(decl.FLAGS)


def spec_arguments(parser: argparse.ArgumentParser, platform: str) -> None:
    """The job spec flags of ``platform``'s submit (and of render_k8s_job.py for Kubernetes)."""
    add_arguments(parser, flags_of(platform))


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
    command names (``dino train ...``) fill the ones neither gives (:func:`taobank.tao_command.identified`)."""
    from .. import tao_command

    return tao_command.identified(declaration(platform).spec_from_flags(args.spec, values_of(args, platform)))
