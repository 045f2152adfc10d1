"""Typed job specs: the fields every platform shares named once (:class:`JobSpec`), one extension per platform.

The JSON Schemas in ``schemas/`` stay the on-disk truth (a spec file is checked against them); these
classes are the same vocabulary as Python types, and ``tests/unit/test_jobspec.py`` checks them against the
schemas both ways (every schema property is a field, every field a property or a shared one the platform
lacks). A platform spells a shared field its own way (SLURM's ``num_nodes`` is the shared ``nodes``):
``SPELLING`` says how, ``None`` where the platform has no such field (a Docker job runs on one host).

The submit flags that fill a spec are declared here too, as data (:class:`Flag`, :class:`Shared`): each adapter
says what its submit accepts and where each value goes; the command line builds its grammar from them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, ClassVar, Mapping, Protocol, TypeVar

from .errors import TaoError
from .redact import shown_keys

T = TypeVar("T", bound="JobSpec")


def given(value: Any, default: Any) -> Any:
    """A spec field's ``value``, or ``default`` where the spec leaves it unset (a given 0, "" or False is kept)."""
    return default if value is None else value


#: The shared submit flags (:data:`taobank.cli.entry.SHARED`) that set a shared field, by flag value name.
FLAG_FIELDS = {"image": "image", "network_arch": "network_arch", "action": "action", "nodes": "nodes",
               "gpus_per_node": "gpus", "cpus": "cpus", "memory": "memory"}


@dataclass
class JobSpec:
    """What every platform's job spec holds, by one name (None: not given; the platform's default applies)."""

    image: str | None = None
    #: a string runs under the platform's shell; a list is the argv (Kubernetes spells that one ``args``)
    command: str | list[str] | None = None
    network_arch: str | None = None
    action: str | None = None
    env: dict[str, str] | None = None
    nccl_env: dict[str, str] | None = None
    nodes: int | None = None
    #: GPUs on each node (SLURM counts them in total instead: its ``num_gpus``)
    gpus: int | str | None = None
    cpus: int | float | str | None = None
    memory: str | None = None
    #: where the job's results folder goes (the folder that holds ``<job id>``, or an ``s3://`` prefix)
    results_dir: str | None = None
    #: names of variables of the submitter's environment handed to the job (never their values)
    secrets: list[str] | None = None
    #: paths the job reads, checked before it is queued
    inputs: list[str] | None = None
    shm_size: str | None = None
    workdir: str | None = None
    master_port: int | None = None

    #: schema name; the platform's key of each shared field it spells otherwise (None: it has none)
    SCHEMA: ClassVar[str] = ""
    SPELLING: ClassVar[Mapping[str, str | None]] = {}
    #: an older spelling of a key, still read (old key -> key); written back only as the key
    ALIASES: ClassVar[Mapping[str, str]] = {}
    #: whether the platform's runner expands ``$(NAME)`` in the command's words (the kubelet does)
    KUBELET_EXPANDS: ClassVar[bool] = False

    @classmethod
    def key(cls, name: str) -> str | None:
        """The spec key of field ``name`` on this platform (None: the platform has no such field)."""
        return cls.SPELLING.get(name, name)

    @classmethod
    def keys(cls) -> dict[str, str]:
        """Field name -> spec key, for every field this platform has: its schema's properties."""
        return {f.name: key for f in fields(cls) for key in [cls.key(f.name)] if key is not None}

    @classmethod
    def flag_keys(cls) -> dict[str, str]:
        """The shared flags' value names -> this platform's spec keys (those it has)."""
        return {flag: key for flag, name in FLAG_FIELDS.items() for key in [cls.key(name)] if key is not None}

    @classmethod
    def canonical(cls, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``spec`` with each alias renamed to its key (SLURM's ``mem`` -> ``memory``); both given is refused."""
        out = dict(spec)
        for old, key in cls.ALIASES.items():
            if old in out:
                if key in out:
                    raise TaoError(f"the job spec gives both {key} and {old} (an older name of {key}): keep {key}")
                out[key] = out.pop(old)
        return out

    @classmethod
    def from_dict(cls: type[T], spec: Mapping[str, Any]) -> T:
        """A valid spec mapping (:meth:`parse` checks it first) as this type; an unknown key is refused."""
        spec = cls.canonical(spec)
        by_key = {key: name for name, key in cls.keys().items()}
        unknown = [k for k in spec if k not in by_key]
        if unknown:  # the schema's own words: each key that may be shown with its nearest known key
            from .spec import unknown_keys

            raise TaoError(f"invalid job spec: field (top level): {unknown_keys(unknown, list(by_key))} "
                           f"(see schemas/{cls.SCHEMA})")
        return cls(**{by_key[k]: v for k, v in spec.items()})

    @classmethod
    def given(cls: type[T], spec: Mapping[str, Any]) -> T:
        """A spec as given, before its values are judged (a placeholder may still stand in one; the submit's
        schema check judges them), typed for a hook that changes it: an unknown key or a null refused in the
        schema's own words, as the submit would refuse them (:meth:`to_dict` drops a null)."""
        nulls = sorted((k for k, v in spec.items() if v is None), key=str)
        if nulls:
            named, others = shown_keys(nulls)
            which = ", ".join(named) + (f" and {others} more" if others else "") if named else f"{others} fields"
            raise TaoError(f"invalid job spec: field {which}: null is not a value (leave the key out) "
                           f"(see schemas/{cls.SCHEMA})")
        return cls.from_dict(spec)

    @classmethod
    def of(cls: type[T], spec: "T | Mapping[str, Any]") -> T:
        """``spec`` typed: as it is when it is one already; a mapping (a spec file read back, written by
        :meth:`to_dict` after :meth:`parse`) by its schema's keys, any other key ignored as a renderer ignores it."""
        if isinstance(spec, cls):
            return spec
        if not isinstance(spec, Mapping):  # another platform's typed spec: a programming error, not a user's
            raise TypeError(f"{cls.__name__}.of got a {type(spec).__name__}")
        by_key = {key: name for name, key in cls.keys().items()}
        return cls(**{by_key[k]: v for k, v in cls.canonical(spec).items() if k in by_key})

    @classmethod
    def parse(cls: type[T], spec: Mapping[str, Any], what: str = "job spec") -> T:
        """``spec`` checked against the platform's schema (one line naming the field), then typed."""
        from .spec import validate

        spec = cls.canonical(spec)
        validate(spec, cls.SCHEMA, what)
        return cls.from_dict(spec)

    def to_dict(self) -> dict[str, Any]:
        """The spec as its schema spells it, given fields only (what :meth:`from_dict` read, byte for byte)."""
        out: dict[str, Any] = {}
        for name, key in type(self).keys().items():
            value = getattr(self, name)
            if value is not None:
                out[key] = value
        lacking = [f.name for f in fields(self) if getattr(self, f.name) is not None and type(self).key(f.name) is None]
        if lacking:
            raise TaoError(f"{type(self).__name__} has no {', '.join(lacking)}: leave it unset on this platform")
        return out

    def updated(self: T, changes: Mapping[str, Any]) -> T:
        """This spec with ``changes`` (spec keys, as :func:`taobank.tao_command.with_gpu_args` returns them) applied."""
        return type(self).from_dict({**self.to_dict(), **changes})

    def with_gpu_args(self: T, gpus_per_node: int, nodes: int) -> T:
        """This spec whose TAO command uses the GPUs and nodes the job is given
        (:func:`taobank.tao_command.with_gpu_args`, which reads only the command and what it runs)."""
        from . import tao_command

        words = {"command": self.command, "args": getattr(self, "args", None), "action": self.action,
                 "network_arch": self.network_arch}
        changed = tao_command.with_gpu_args({k: v for k, v in words.items() if v is not None}, gpus_per_node, nodes)
        return replace(self, **{k: changed[k] for k in ("command", "args") if k in changed and hasattr(self, k)})

    def with_results_dir(self: T, folder: str | None) -> T:
        """This spec whose TAO command writes into the job's folder ``folder`` (the value of ``$RESULTS_DIR`` in
        the container; :func:`taobank.tao_command.with_results_dir`)."""
        from . import tao_command

        words = {"command": self.command, "args": getattr(self, "args", None), "action": self.action,
                 "network_arch": self.network_arch}
        changed = tao_command.with_results_dir({k: v for k, v in words.items() if v is not None}, folder,
                                           kubelet=self.KUBELET_EXPANDS)
        return replace(self, **{k: changed[k] for k in ("command", "args") if k in changed and hasattr(self, k)})

    def with_job_args(self: T, gpus_per_node: int, nodes: int, folder: str | None) -> T:
        """:meth:`with_gpu_args`, then :meth:`with_results_dir` (:func:`taobank.tao_command.with_job_args`: the
        command reads and is rewritten in one call)."""
        from . import tao_command

        words = {"command": self.command, "args": getattr(self, "args", None), "action": self.action,
                 "network_arch": self.network_arch}
        changed = tao_command.with_job_args({k: v for k, v in words.items() if v is not None}, gpus_per_node, nodes,
                                            folder, kubelet=self.KUBELET_EXPANDS)
        return replace(self, **{k: changed[k] for k in ("command", "args") if k in changed and hasattr(self, k)})


__all__ = ["given", "JobSpec", "FLAG_FIELDS"]


# ------------------------------------------------------------ the submit flags, as data
# Command-line flags as data: each adapter declares what its submit accepts and where each value goes.
#
# The command line (:mod:`taobank.cli.entry`) builds the argparse grammar from these declarations and
# hands the adapter plain values (a ``KEY=VALUE`` flag already a dict, the argv after ``--`` already a
# list), so no adapter imports argparse or the command line.
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


#: ``--mode`` of every verb that ranks by a KPI (submit's ``--parent-mode``, ``--search``'s too): its choices and
#: its help line (the rule is :func:`taobank.kpirank.direction`'s).
KPI_MODES = ("min", "max")
KPI_MODE_HELP = ("best is the lowest (min) or highest (max) value; default: from the KPI's name (lower for a loss, "
                 "cost or error, higher for mAP, accuracy, IoU, F1, recall ...; any other name needs --mode)")


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
    from .envfile import check_secret_name

    names = [check_secret_name(n, "--secret-env value") for n in values.get("secret_env") or []]
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
