"""A search space: ``KEY=loguniform(a,b)|uniform(a,b)|int(a,b)|choice(x,y,...)``, from flags or a file.

Pure (no Optuna here: :mod:`taobank.campaign.search.settings` makes its distributions). Every bound and choice is
checked once, at submit, so a trial never meets a space Optuna would refuse: an empty or inverted range, a
log range touching 0, a choice of one value (a fixed value belongs in the command), a choice TAO could not
take as one ``key=value`` argument (:func:`taobank.campaign.sweepfile.value_text`'s rule).

Space file (YAML or JSON): a mapping of key to the same expression::

    train.optim.lr: loguniform(1e-5, 1e-2)
    train.optim.weight_decay: uniform(0, 0.1)
    model.backbone: choice(resnet18, resnet34)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .. import sweepfile
from ...errors import UsageError

KINDS = ("loguniform", "uniform", "int", "choice")
_EXPR = re.compile(r"\s*([a-z]+)\s*\((.*)\)\s*\Z", re.S)
MAX_CHOICES = 256
MAX_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Param:
    """One key's range: ``kind`` is one of :data:`KINDS`; ``low``/``high`` for a range, ``choices`` for a choice."""

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    choices: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "choice":
            return {"kind": self.kind, "choices": list(self.choices)}
        return {"kind": self.kind, "low": self.low, "high": self.high}

    @classmethod
    def from_dict(cls, key: str, data: Mapping[str, Any]) -> "Param":
        """A param read back from the study's settings file: checked again by the same rules."""
        if not isinstance(data, Mapping):
            raise UsageError(f"search space: {key} is not a range")
        if data.get("kind") == "choice":
            choices = data.get("choices")
            return parse(key, f"choice({','.join(map(str, choices))})" if isinstance(choices, list) else "choice()")
        return parse(key, f"{data.get('kind')}({data.get('low')},{data.get('high')})")

    def text(self) -> str:
        """The expression as a user writes it: ``loguniform(1e-05,0.01)``."""
        if self.kind == "choice":
            return f"choice({','.join(self.choices)})"
        return f"{self.kind}({self.low:g},{self.high:g})"

    def grid(self) -> list[Any] | None:
        """Every value, for the grid sampler: a choice's values, an int range's whole numbers; None for a
        continuous range (a grid cannot enumerate it)."""
        if self.kind == "choice":
            return list(self.choices)
        if self.kind == "int":
            assert isinstance(self.low, int) and isinstance(self.high, int)
            return list(range(self.low, self.high + 1))
        return None


def _number(key: str, kind: str, word: str) -> float:
    try:
        value = float(word)
    except ValueError:
        raise UsageError(f"--space {key}={kind}(...): {word.strip()[:30]!r} is not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"--space {key}={kind}(...): the bounds must be finite numbers")
    return value


def parse(key: str, expr: str) -> Param:
    """One key's expression, checked (a one-line usage error naming the key and what to change)."""
    sweepfile.check_key(key)
    m = _EXPR.match(str(expr))
    if not m or m.group(1) not in KINDS:
        raise UsageError(f"--space {key}={str(expr)[:60]}: use loguniform(a,b), uniform(a,b), int(a,b) or "
                         "choice(x,y,...)")
    kind, inside = m.group(1), m.group(2)
    words = [w.strip() for w in inside.split(",")]
    if kind == "choice":
        words = [w for w in words if w]
        if len(words) < 2:
            raise UsageError(f"--space {key}=choice(...) needs at least two values (a fixed value belongs in the "
                             "command)")
        if len(words) > MAX_CHOICES:
            raise UsageError(f"--space {key}=choice(...) has more than {MAX_CHOICES} values")
        values = [sweepfile.value_text(key, w) for w in words]
        if len(set(values)) != len(values):
            raise UsageError(f"--space {key}=choice(...) lists a value twice")
        return Param(key, kind, choices=tuple(values))
    if len(words) != 2:
        raise UsageError(f"--space {key}={kind}(a,b) takes two bounds, low and high")
    low, high = (_number(key, kind, w) for w in words)
    if not low < high:
        raise UsageError(f"--space {key}={kind}({words[0]},{words[1]}): the range is empty or inverted (low must "
                         "be below high)")
    if kind == "loguniform" and low <= 0:
        raise UsageError(f"--space {key}=loguniform({words[0]},{words[1]}): a log range needs bounds above 0 "
                         "(use uniform for a range from 0)")
    if kind == "int":
        if low != int(low) or high != int(high):
            raise UsageError(f"--space {key}=int({words[0]},{words[1]}): the bounds must be whole numbers")
        return Param(key, kind, int(low), int(high))
    return Param(key, kind, low, high)


def from_flags(items: Iterable[str]) -> dict[str, Param]:
    """``--space KEY=EXPR`` flags (repeatable) as ``{key: Param}``; a key given twice is refused."""
    out: dict[str, Param] = {}
    for item in items:
        key, sep, expr = str(item).partition("=")
        if not sep:
            raise UsageError(f"--space {str(item)[:60]!r} must look like KEY=loguniform(a,b)")
        key = key.strip()
        if key in out:
            raise UsageError(f"--space names {key} twice: give one range per key")
        out[key] = parse(key, expr)
    return out


def from_data(data: Any) -> dict[str, Param]:
    """A parsed space file: ``{key: expression}``."""
    if not isinstance(data, Mapping) or not data:
        raise UsageError("the space file must be a non-empty mapping of key: loguniform(a,b) | uniform(a,b) | "
                         "int(a,b) | choice(x,y,...)")
    out: dict[str, Param] = {}
    for key, expr in data.items():
        if not isinstance(expr, str):
            raise UsageError(f"space file: {str(key)[:60]} must be an expression such as loguniform(1e-5,1e-2)")
        out[str(key)] = parse(str(key), expr)
    return out


def load(path: str) -> dict[str, Param]:
    """The space of a file a flag names (a regular file under a size cap; keys unique)."""
    from ... import fsio

    return from_data(fsio.flag_yaml(path, "--space-file", "space file", MAX_FILE_BYTES))


def of(flags: Iterable[str] | None, file: str | None) -> dict[str, Param]:
    """The space of a submit: ``--space`` flags or ``--space-file``, not both; {} when neither is given (the
    search then takes TAO's AutoML keys of the job's network: :mod:`taobank.campaign.search.automl`)."""
    flags = list(flags or [])
    if flags and file:
        raise UsageError("give --space flags or --space-file, not both")
    if not flags and not file:
        return {}
    return from_flags(flags) if flags else load(file or "")


def edges(space: Mapping[str, Param]) -> list[dict[str, str]]:
    """One override per value a space can reach at its edges (a range's bounds, each choice): what the spec
    check is given, so an unknown key, a float for an integer key or a bound outside TAO's range is refused at
    submit, not in every trial."""
    out: list[dict[str, str]] = []
    for key, param in space.items():
        values = list(param.choices) if param.kind == "choice" else [repr(param.low), repr(param.high)]
        out += [{key: value} for value in dict.fromkeys(values)]
    return out


def to_dict(space: Mapping[str, Param]) -> dict[str, dict[str, Any]]:
    return {k: p.to_dict() for k, p in space.items()}


def from_dict(data: Any) -> dict[str, Param]:
    if not isinstance(data, Mapping) or not data:
        raise UsageError("search settings: the space is empty")
    return {str(k): Param.from_dict(str(k), v) for k, v in data.items()}
