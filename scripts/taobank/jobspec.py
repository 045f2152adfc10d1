"""Typed job specs: the fields every platform shares named once (:class:`JobSpec`), one extension per platform.

The JSON Schemas in ``schemas/`` stay the on-disk truth (a spec file is checked against them); these
classes are the same vocabulary as Python types, and ``tests/unit/test_jobspec.py`` checks them against the
schemas both ways (every schema property is a field, every field a property or a shared one the platform
lacks). A platform spells a shared field its own way (SLURM's ``num_nodes`` is the shared ``nodes``):
``SPELLING`` says how, ``None`` where the platform has no such field (a Docker job runs on one host).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Mapping, TypeVar

from .errors import TaoError
from .redact import shown_keys, unknown_fields

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
        named, others = shown_keys(sorted((k for k in spec if k not in by_key), key=str))
        if named or others:
            raise TaoError(f"{cls.__name__}: {unknown_fields(named, others)} (see schemas/{cls.SCHEMA})")
        return cls(**{by_key[k]: v for k, v in spec.items()})

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


__all__ = ["given", "JobSpec", "FLAG_FIELDS"]
