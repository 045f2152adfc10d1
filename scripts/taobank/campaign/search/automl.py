"""What TAO says of a search's job: the space given no ``--space`` (the keys TAO marks ``automl_enabled`` for the
job's network), and the KPIs the network logs (:func:`check_kpi`).

TAO's own AutoML (nvidia-tao-core's ``microservices/automl``) searches the keys its config dataclasses mark
``automl_enabled`` (its "automl default parameters"), each within the ``valid_min``/``valid_max``/
``valid_options`` of the same metadata; the generator keeps those facts as ``x-automl`` on each such key
(``schemas/tao_specs/``). The bank takes the keys of the sections the action reads and turns each into one
expression of :mod:`taobank.campaign.search.space`, by these rules (references/search.md says them to users):

- a boolean: ``choice(true,false)``; a key with ``valid_options``: ``choice`` of them;
- an integer: ``int(valid_min, valid_max)``; an open top (``inf``) is TAO's default, as TAO's AutoML takes it;
  no bounds at all: TAO's rule for such an integer, ``int(max(1, d // 2), 2 d)`` (``d`` the default);
- a float whose default ``d`` is positive, under 0.01 and a decade or more under the top of its range (an open
  top counts as infinitely far): a learning rate or a weight decay, whose useful values span decades, searched
  on a log scale over the two decades either side of ``d`` within TAO's range:
  ``loguniform(max(valid_min, d/100), min(valid_max, 100 d))``;
- any other float: ``uniform(valid_min, valid_max)``, an open top being TAO's default as above; no bounds at
  all: TAO's rule for such a float, ``uniform(d/10, 10 d)``.

Left out (the bank's sampler draws each key on its own): keys TAO ties to another (``depends_on``, and the
``parent_param`` keys others depend on), a ``math_cond`` other than a lower bound (``/ 8``: a multiple of 8,
``^ 2``: a power), lists, and keys whose range is empty after these rules.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ... import tao_spec_schema, tao_command
from ...errors import UsageError
from .space import Param

#: A float default below this, and a decade or more under its range's top, is searched on a log scale.
LOG_BELOW = 0.01
#: The log scale's reach either side of TAO's default, in factors of ten.
DECADES = 2
#: A ``math_cond`` that only bounds a value from below (``> 0.0``, ``>= 1``): kept by the range itself.
_LOWER = re.compile(r"\s*>=?\s*-?[0-9.]+\s*\Z")


@dataclass
class Default:
    """The space TAO's AutoML keys give a network action, and the keys left out with why."""

    network: str
    action: str
    space: dict[str, Param]
    left_out: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """What a submit says on stderr: where the space comes from, then one ``KEY=EXPR`` line per key."""
        head = (f"search space: TAO's AutoML keys of {self.network} {self.action} ({len(self.space)} keys"
                + (f"; {len(self.left_out)} left out: tied to another key or no usable range" if self.left_out else "")
                + "); give --space KEY=EXPR to choose your own")
        return [head, *(f"  {k}={p.text()}" for k, p in self.space.items())]


def _number(value: Any) -> float | None:
    """A bound of ``x-automl`` as a number: None for an open side (``"inf"``) or none given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _short(x: float) -> float:
    return float(f"{x:.6g}")


def param(key: str, node: dict, facts: dict) -> tuple[Param | None, str]:
    """The range of one AutoML key by the module's rules, or (None, why it is left out)."""
    if facts.get("depends_on") or facts.get("parent_param"):
        return None, "TAO ties it to another key"
    cond = facts.get("math_cond")
    if isinstance(cond, str) and cond and not _LOWER.match(cond):
        return None, f"TAO's condition {cond!r} is not a range"
    kinds = [k for k in tao_spec_schema.types(node) if k != "null"]
    options = facts.get("valid_options") or node.get("enum")
    if kinds == ["boolean"]:
        return Param(key, "choice", choices=("true", "false")), ""
    if isinstance(options, list) and len(set(map(str, options))) >= 2:
        return Param(key, "choice", choices=tuple(dict.fromkeys(str(o) for o in options))), ""
    d = node.get("default")
    if isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d):
        return None, "no default to read a range from"
    low, high = _number(facts.get("valid_min")), _number(facts.get("valid_max"))
    open_top = facts.get("valid_max") == "inf"
    if kinds == ["integer"]:
        if low is None or (high is None and not open_top):  # TAO's rule for an integer with no range
            low, high = float(max(1, int(d) // 2)), float(2 * int(d))
        elif high is None:  # an open top: TAO's AutoML takes the default
            high = float(d)
        first, last = math.ceil(low), math.floor(high)
        return (Param(key, "int", first, last), "") if first < last else (None, "its range is empty")
    if kinds != ["number"]:
        return None, "not a number, a boolean or options"
    if 0 < d < LOG_BELOW and (high is None or high >= d * 10):
        lo = _short(max(low or 0.0, d / 10 ** DECADES))
        hi = _short(min(high if high is not None else math.inf, d * 10 ** DECADES))
        lo = max(lo, low or 0.0)
        return (Param(key, "loguniform", lo, hi), "") if 0 < lo < hi else (None, "its range is empty")
    if low is None or (high is None and not open_top):  # TAO's rule for a float with no range
        if d <= 0:
            return None, "no range and no positive default"
        low, high = _short(d / 10), _short(d * 10)
    elif high is None:
        high = float(d)
    return (Param(key, "uniform", low, high), "") if low < high else (None, "its range is empty")


def default(network: str, action: str) -> Default:
    """The space of ``network action`` from TAO's AutoML keys; a one-line usage error when it has none."""
    if not tao_command.known(network):
        raise UsageError(f"a search without --space takes TAO's AutoML keys of the job's network, and the pinned TAO "
                         f"has no network {str(network)[:60]!r}: give --space KEY=loguniform(a,b) (repeatable)")
    s = tao_spec_schema.spec(network, action)
    found = Default(network, action, {})
    for key, node in tao_spec_schema.walk(s.schema):
        facts = node.get("x-automl")
        if not isinstance(facts, dict) or key.split(".")[0] not in s.reads:
            continue
        got, why = param(key, node, facts)
        if got is None:
            found.left_out[key] = why
        else:
            found.space[key] = got
    if not found.space or not tao_command.automl(network):
        why = "TAO's AutoML does not take it" if not tao_command.automl(network) else \
            "TAO marks none of its keys for AutoML with a usable range"
        raise UsageError(f"{network} {action}: {why}, so a search needs a space: give --space KEY=loguniform(a,b) "
                         "(repeatable) or --space-file FILE")
    return found


def of_job(spec: dict) -> Default:
    """:func:`default` of the network and action a job runs (its command, or ``--network-arch``/``--action``)."""
    job = tao_command.identified(dict(spec))
    network, action = str(job.get("network_arch") or ""), str(job.get("action") or "")
    if network in ("", tao_command.GENERIC["network_arch"]):
        raise UsageError("a search without --space takes TAO's AutoML keys of the job's network: give --network-arch "
                         "(or a command that runs TAO's entrypoint, dino train ...), or --space KEY=loguniform(a,b)")
    return default(network, action)


def check_kpi(spec: dict, kpi: str) -> None:
    """Refuse (one line listing what it logs) a KPI the job's network does not log, TAO's own list, for a job that
    runs the pinned TAO's entrypoint (the spec check's jobs: ``--no-spec-check`` skips both, for a custom build)."""
    found = tao_command.tao_command(tao_command.identified(dict(spec)))
    if found is None or tao_command.logs_kpi(found[0], kpi) is not False:
        return
    names, patterns = tao_command.kpis(found[0]) or ([], [])
    more = f" (and names matching TAO's {len(patterns)} patterns of its per-class KPIs)" if patterns else ""
    raise UsageError(f"--kpi {kpi[:60]!r}: {found[0]} does not log it; TAO lists {', '.join(names)}{more}, and its "
                     "train_loss and val_loss: give one of them (nothing was submitted; --no-kpi-check for a KPI its "
                     "trainer writes all the same)")
