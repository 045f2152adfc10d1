"""Command-line flags as data: each adapter declares what its submit accepts and where each value goes.

The command line (:mod:`taobank.cli.entry`) builds the argparse grammar from these declarations and
hands the adapter plain values (a ``KEY=VALUE`` flag already a dict, the argv after ``--`` already a
list), so no adapter imports argparse or the command line.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol

#: What a flag holds: one value; a repeatable list; repeatable KEY=VALUE pairs (a dict);
#: True when given (``on``); False when given (``off``).
KINDS = ("value", "list", "pairs", "on", "off")


@dataclass(frozen=True)
class Flag:
    """One flag: its spellings, what it holds, its help line (``hidden``: accepted, never listed)."""

    names: tuple[str, ...]
    dest: str = ""
    kind: str = "value"
    type: Callable[[str], Any] = str
    help: str | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    hidden: bool = False
    exclusive: str = ""  # flags naming the same group may not be given together

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"flag {self.names[0]}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if not self.dest:
            object.__setattr__(self, "dest", self.names[0].lstrip("-").replace("-", "_"))


@dataclass(frozen=True)
class Shared:
    """How a platform spells the flags every platform shares (:data:`taobank.cli.entry.SHARED`): extra
    spellings and its own help line per flag (its units), by the flag's value name."""

    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    help: Mapping[str, str] = field(default_factory=dict)

    def spell(self, flags: tuple[Flag, ...]) -> tuple[Flag, ...]:
        """``flags`` (the shared ones) as this platform spells them."""
        return tuple(replace(f, names=f.names + tuple(self.aliases.get(f.dest, ())), help=self.help.get(f.dest, f.help))
                     for f in flags)


def put(spec: dict[str, Any], values: Mapping[str, Any], keys: Mapping[str, str],
        convert: Mapping[str, Callable[[Any], Any]] | None = None) -> dict[str, Any]:
    """``spec`` with each given value (not None) written under its key, through ``convert`` where one is named."""
    for name, key in keys.items():
        value = values.get(name)
        if value is not None:
            spec[key] = (convert or {}).get(name, _same)(value)
    return spec


def merge(spec: dict[str, Any], values: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, Any]:
    """``spec`` with each given dict of pairs merged over the one under its key (the flags win)."""
    for name, key in keys.items():
        extra = values.get(name)
        if extra:
            spec[key] = {**(spec.get(key) or {}), **extra}
    return spec


def put_secrets_and_command(spec: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """The secret names (``--secret-env``) added to the spec's secrets, and the argv after ``--`` as its
    command: how the platforms whose command is an argv (SLURM, Docker) fold them in."""
    names = list(values.get("secret_env") or [])
    if names:
        spec["secrets"] = list(dict.fromkeys(list(spec.get("secrets") or []) + names))
    if values.get("command"):
        spec["command"] = list(values["command"])
    return spec


def _same(value: Any) -> Any:
    return value


class Declarations(Protocol):
    """A platform's submit flags (its ``flags`` module, the adapter's ``flags`` attribute): the shared flags as
    it spells them, its own, and how their values become its job spec."""

    @property
    def SHARED(self) -> Shared: ...

    @property
    def FLAGS(self) -> tuple[Flag, ...]: ...

    def spec_from_flags(self, path: str | None, values: Mapping[str, Any]) -> dict[str, Any]: ...
