"""The one registry of platforms: each line names a platform and its package.

A platform's package says who it is in ``INFO`` (:class:`PlatformInfo`: its helper, the other spellings users
type, the client this machine needs), read without importing anything heavy, so ``check_host.py`` works on a
host that lacks the bank's dependencies. Its ``adapter`` module's ``PLATFORM`` object implements the contract
(:class:`taobank.core.platform.Platform`); everything else a platform has (flags, spec type, results and sweep
access, NCCL probe) is a typed attribute of that object. Adding a platform is a folder and one line here.
An adapter is imported only when asked for: a SLURM verb never imports the Kubernetes code.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import TaoError

if TYPE_CHECKING:
    from .core.platform import Platform

#: platform name -> its package (``INFO`` in its ``__init__``, ``PLATFORM`` in its ``adapter`` module)
PACKAGES: dict[str, str] = {
    "kubernetes": "taobank.platforms.kubernetes",
    "slurm": "taobank.platforms.slurm",
    "docker": "taobank.platforms.docker",
}


@dataclass(frozen=True)
class HostClient:
    """The client program a platform's jobs need on this machine (``check_host.py --platform``)."""

    label: str
    programs: tuple[str, ...]  # any one of them on PATH will do
    install: str  # what to do when none is on PATH
    version_argv: tuple[str, ...] = ()  # prints the version (stdout or stderr); () = any version
    version_pattern: str = ""  # its first group is the version
    minimum_key: str = ""  # versions.yaml key of the lowest version that works
    product: str = ""  # what the version numbers ("OpenSSH"), shown before it
    upgrade: str = ""  # what to upgrade when it is too old (default: the label)


@dataclass(frozen=True)
class PlatformInfo:
    """Who a platform is, without its code: what hints, help lines and host checks name."""

    name: str
    helper: str  # the script a user runs (``tao_k8s.py``)
    client: HostClient
    aliases: tuple[str, ...] = ()
    finish_verb: str = "submit --job-id"  # finishes a record whose submit died half-way
    #: what its helper's ``submit --dry-run`` shows ("the manifest"): its helper's preflight and submit become the
    #: MCP server's ``preflight_<name>``/``submit_<name>`` tools; "" (no helper of its own): no such tools
    dry_run_shows: str = ""
    #: its preflight's --json is a list of checks (else one object)
    preflight_list: bool = False


def names() -> tuple[str, ...]:
    """Every platform's name, in the registry's order."""
    return tuple(PACKAGES)


def known(name: object) -> bool:
    """Whether ``name`` is a platform's name exactly as records store it."""
    return isinstance(name, str) and name in PACKAGES


def info(name: str) -> PlatformInfo:
    """``INFO`` of platform ``name`` (any spelling :func:`canonical` takes)."""
    found: PlatformInfo = importlib.import_module(PACKAGES[canonical(name)]).INFO
    return found


def canonical(name: str) -> str:
    """``k8s``/``K8S``/``kube``/``Kubernetes`` -> ``kubernetes``; an unknown name is refused in one line."""
    key = str(name).strip().lower()
    if key in PACKAGES:
        return key
    infos = [importlib.import_module(package).INFO for package in PACKAGES.values()]
    for each in infos:
        if key in each.aliases:
            return str(each.name)
    spelled = "; ".join(f"{each.aliases[0]} is accepted for {each.name}" for each in infos if each.aliases)
    raise TaoError(f"unknown platform {name!r}: use one of {', '.join(names())}" + (f" ({spelled})" if spelled else ""))


def adapter(name: str) -> Platform[Any, Any]:
    """The ``PLATFORM`` object of platform ``name`` (any spelling :func:`canonical` takes)."""
    found: Platform[Any, Any] = importlib.import_module(PACKAGES[canonical(name)] + ".adapter").PLATFORM
    return found
