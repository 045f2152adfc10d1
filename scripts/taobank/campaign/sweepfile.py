"""What a sweep is made of: the trials' override sets, from ``--sweep KEY=V1,V2`` flags or a sweep file.

A trial is an ordered ``{key: value}`` map; each pair reaches TAO as one
``key=value`` argument after ``-e spec.yaml`` (TAO's override form). Every key
and value is checked here, once, so nothing unsafe as such an argument (a
space, a quote, a shell character, an option-looking key) reaches a command
line, a manifest or a record. Pure: no I/O except reading the sweep file.

Sweep file (YAML or JSON), exactly one of::

    grid:   {train.lr: [0.1, 0.01], train.batch_size: [8, 16]}      # the cartesian product
    trials: [{train.lr: 0.1}, {train.lr: 0.01, train.batch_size: 16}]  # an explicit list
    random: {samples: 20, seed: 7, params: {
               train.lr: {low: 1.0e-5, high: 1.0e-2, log: true},     # log-uniform
               train.wd: {low: 0, high: 0.1},                        # uniform
               train.epochs: {low: 5, high: 20, int: true},          # whole numbers
               model.backbone: {choices: [resnet18, resnet34]}}}
"""
from __future__ import annotations

import itertools
import math
import random
import re
from typing import Any, Iterable, Mapping

from ..errors import UsageError
from ..tao_command import OVERRIDE_KEY, OVERRIDE_VALUE

#: A TAO override key and a value safe as one ``key=value`` argument: the rules are taobank.tao_command'.
KEY, VALUE = OVERRIDE_KEY, OVERRIDE_VALUE
MAX_TRIALS = 10000
MAX_LEN = 256
#: Largest sweep file read: 10,000 trials of a few overrides each fit in far less.
MAX_FILE_BYTES = 1024 * 1024
#: A number as YAML 1.2 writes it (``1e-5``): YAML 1.1 (PyYAML) reads a float without a dot as a string.
_NUMBER_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")
_FORMS = ("grid", "trials", "random")


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not KEY.match(key) or len(key) > MAX_LEN:
        raise UsageError(f"sweep key {str(key)[:60]!r} is not a TAO override key: use dotted names like train.lr")
    return key


def value_text(key: str, value: Any) -> str:
    """The value as TAO reads it (numbers in their shortest form, booleans lower-case), checked."""
    return value_texts(key, [value])[0]


def value_texts(key: str, values: Iterable[Any]) -> list[str]:
    """:func:`value_text` of each value of ``key`` (a ``--sweep`` flag's), in one call: each value's own rules,
    then the credential lint of those that pass in one run of scanner calls; the first value refused, in order,
    raises what :func:`value_text` of it alone raises."""
    from ..redact import lint_text

    texts: list[str | UsageError] = []
    for value in values:
        try:
            texts.append(_plain_text(key, value))
        except UsageError as exc:
            texts.append(exc)
    # it reaches argv, the record and the saved spec: never a credential
    linted = [isinstance(t, str) and bool(lint_text(t, "sweep value")) for t in texts]
    out = []
    for text, bad in zip(texts, linted):
        if isinstance(text, UsageError):
            raise text
        if bad:
            raise UsageError(f"sweep value of {key} looks like a credential (not shown): pass secrets by name "
                             "(--secret-env NAME), never as an override")
        out.append(text)
    return out


def _plain_text(key: str, value: Any) -> str:
    """The rules of :func:`value_text` but its credential lint."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise UsageError(f"sweep value of {key} is not a finite number")
        text = repr(value) if abs(value) >= 1e-4 or value == 0 else f"{value:.6g}"
    elif isinstance(value, str):
        text = value
    else:
        raise UsageError(f"sweep value of {key} must be a number, a word or true/false (got {type(value).__name__})")
    if not text:
        raise UsageError(f"sweep value of {key} is empty: give a value, or leave the key out")
    if len(text) > MAX_LEN or not VALUE.match(text):
        raise UsageError(f"sweep value of {key} is not safe as one key=value argument (spaces, quotes, commas, = and "
                         "shell characters are refused): use letters, digits and _.+-/:@%")
    return text


def check_size(counts: Iterable[int], what: str) -> None:
    """Refuse a sweep of more than MAX_TRIALS trials from its value counts alone, before any trial is built
    (a 10-key grid of 10 values each is 10^10 trials: counted, it costs nothing; built, all memory)."""
    total = 1
    for n in counts:
        total *= n
        if total > MAX_TRIALS:
            raise UsageError(f"{what} makes more than {MAX_TRIALS} trials (the product of the value counts): at "
                             f"most {MAX_TRIALS}; split it")


def _unique(key: str, values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        dup = next(v for v in values if values.count(v) > 1)
        raise UsageError(f"sweep key {key} lists {dup} twice: each trial must differ")
    return values


def parse_flags(items: Iterable[str]) -> dict[str, list[str]]:
    """``--sweep KEY=V1,V2`` flags (repeatable) as ``{key: [values]}``; a key given twice is refused."""
    grid: dict[str, list[str]] = {}
    items = list(items)
    check_size((item.count(",") + 1 for item in items), "--sweep")
    for item in items:
        key, sep, rest = item.partition("=")
        if not sep:
            raise UsageError(f"--sweep {item[:60]!r} must look like KEY=V1,V2,...")
        check_key(key)
        if key in grid:
            raise UsageError(f"--sweep names {key} twice: give all its values in one flag (KEY=V1,V2)")
        grid[key] = _unique(key, value_texts(key, rest.split(",")))
    return grid


def product(grid: Mapping[str, list[str]]) -> list[dict[str, str]]:
    """Every combination, the first key varying slowest (trial order is stable)."""
    keys = list(grid)
    combos = list(itertools.product(*(grid[k] for k in keys))) if keys else []
    return [dict(zip(keys, c)) for c in combos]


def check_trials(trials: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rules every sweep obeys, however it was described: 1..MAX_TRIALS trials, no two alike."""
    if not trials:
        raise UsageError("the sweep has no trials (N = 0): give at least one value per key")
    if len(trials) > MAX_TRIALS:
        raise UsageError(f"the sweep has {len(trials)} trials: at most {MAX_TRIALS}; split it")
    seen: set[tuple] = set()
    for i, t in enumerate(trials):
        key = tuple(sorted(t.items()))
        if key in seen:
            raise UsageError(f"trial {i} repeats an earlier trial's overrides exactly: each trial must differ")
        seen.add(key)
    return trials


def _mapping(value: Any, what: str) -> Mapping:
    if not isinstance(value, Mapping) or not value:
        raise UsageError(f"{what} must be a non-empty mapping")
    return value


def _number(spec: Mapping, name: str, key: str) -> float:
    v = spec.get(name)
    if isinstance(v, str) and _NUMBER_TEXT.match(v.strip()):
        v = float(v)  # ``1e-5``: a number YAML 1.1 left as text
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise UsageError(f"sweep file: random param {key} needs a number {name}")
    return float(v)


def _sample(key: str, spec: Any, rng: random.Random) -> str:
    spec = _mapping(spec, f"sweep file: random param {key}")
    unknown = set(spec) - {"low", "high", "log", "int", "choices"}
    if unknown:
        raise UsageError(f"sweep file: random param {key} has unknown field(s) {', '.join(sorted(map(str, unknown)))}: "
                         "use low/high (log, int) or choices")
    if "choices" in spec:
        choices = spec["choices"]
        if not isinstance(choices, list) or not choices:
            raise UsageError(f"sweep file: random param {key}: choices must be a non-empty list")
        return value_text(key, choices[rng.randrange(len(choices))])
    low, high = _number(spec, "low", key), _number(spec, "high", key)
    if not low < high:
        raise UsageError(f"sweep file: random param {key} needs low < high")
    if spec.get("log"):
        if low <= 0:
            raise UsageError(f"sweep file: random param {key} is log-uniform: low must be above 0")
        x = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        x = rng.uniform(low, high)
    if spec.get("int"):
        return value_text(key, int(min(high, max(low, round(x)))))
    return value_text(key, float(f"{x:.4g}"))


def random_trials(block: Any) -> list[dict[str, str]]:
    """``samples`` draws from ``params`` with ``seed`` (the same file gives the same trials)."""
    block = _mapping(block, "sweep file: random")
    unknown = set(block) - {"samples", "seed", "params"}
    if unknown:
        raise UsageError(f"sweep file: random has unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    n, seed = block.get("samples"), block.get("seed")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise UsageError("sweep file: random.samples must be a whole number")
    check_size([n], "sweep file: random.samples")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UsageError("sweep file: random.seed must be a whole number (the same seed gives the same trials)")
    params = _mapping(block.get("params"), "sweep file: random.params")
    keys = [check_key(k) for k in params]
    rng = random.Random(seed)
    return [{k: _sample(k, params[k], rng) for k in keys} for _ in range(n)]


def from_data(data: Any) -> list[dict[str, str]]:
    """Trials from a parsed sweep file (see the module text)."""
    data = _mapping(data, "the sweep file")
    forms = [f for f in _FORMS if f in data]
    extra = set(data) - set(_FORMS)
    if len(forms) != 1 or extra:
        raise UsageError("the sweep file must hold exactly one of grid, trials or random")
    form = forms[0]
    if form == "grid":
        grid = _mapping(data["grid"], "sweep file: grid")
        check_size((len(v) if isinstance(v, list) else 1 for v in grid.values()), "sweep file: grid")
        out: dict[str, list[str]] = {}
        for key, values in grid.items():
            check_key(key)
            if not isinstance(values, list):
                values = [values]
            out[key] = _unique(key, value_texts(key, values))
        return product(out)
    if form == "trials":
        items = data["trials"]
        if not isinstance(items, list):
            raise UsageError("sweep file: trials must be a list of {key: value} maps")
        check_size([len(items)], "sweep file: trials")
        return [{check_key(k): value_text(k, v) for k, v in _mapping(t, f"sweep file: trial {i}").items()}
                for i, t in enumerate(items)]
    return random_trials(data["random"])


def load(path: str) -> list[dict[str, str]]:
    """The trials of a sweep file: read by the one rule for files a flag names (a regular file under a size
    cap: a FIFO or /dev/zero is refused, never waited on), keys unique at every level."""
    from .. import fsio

    return from_data(fsio.flag_yaml(path, "--sweep-file", "sweep file", MAX_FILE_BYTES))


def trials(flags: Iterable[str] | None, file: str | None) -> list[dict[str, str]] | None:
    """The trials of a submit (None: not a sweep); ``--sweep`` and ``--sweep-file`` exclude each other."""
    flags = list(flags or [])
    if flags and file:
        raise UsageError("give --sweep flags or --sweep-file, not both")
    if not flags and not file:
        return None
    return check_trials(product(parse_flags(flags)) if flags else load(file or ""))


def args_of(overrides: Mapping[str, str]) -> list[str]:
    """The ``key=value`` arguments of one trial, in order."""
    return [f"{k}={v}" for k, v in overrides.items()]
