"""The job flags every platform's submit shares, and the argparse grammar built from flag declarations.

One vocabulary on the command line (``--nodes``, ``--gpus-per-node``, ``--cpus``, ``--memory`` ...);
each adapter says, as data (:class:`taobank.flags.Shared`), its extra spellings and units and, in its
``flags`` module, the spec key each value goes to (Kubernetes counts GPUs per pod, SLURM in total).
"""
from __future__ import annotations

import argparse
from typing import Iterable

from ..flags import Flag, Shared

#: The flags of every submit, by value name; a platform adds spellings and help (:class:`Shared`).
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


def shared_flags(platform: Shared) -> tuple[Flag, ...]:
    """:data:`SHARED` as one platform spells them."""
    from dataclasses import replace

    return tuple(replace(f, names=f.names + tuple(platform.aliases.get(f.dest, ())),
                         help=platform.help.get(f.dest, f.help)) for f in SHARED)


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
