"""JSON and YAML from files and flags that anyone may have written: bounded, never a traceback.

Every document the bank reads (job specs, action requests, records, caches,
versions.yaml, ``--args-json``) is parsed here. YAML aliases are refused (a
few nested anchors expand to gigabytes), nesting is capped (deep nesting
overflows the parser's recursion), and every parser error, including
Python's limit on integer digits, becomes one line naming the source.
"""
from __future__ import annotations

import json
from typing import Any

from .errors import TaoError, require

#: Deepest nesting a document may have; a job spec needs fewer than ten levels.
MAX_DEPTH = 64


def _depth_ok(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


def json_value(text: str | bytes, what: str) -> Any:
    """``text`` parsed as JSON; one-line TaoError when it is not JSON or is nested deeper than MAX_DEPTH."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else "not valid JSON"
        raise TaoError(f"{what} is {why}") from None
    if not _depth_ok(value):
        raise TaoError(f"{what} is nested deeper than {MAX_DEPTH} levels")
    return value


_LOADER: Any = None
_UNIQUE_LOADER: Any = None


def _loader() -> Any:
    """A SafeLoader that refuses aliases and nesting deeper than MAX_DEPTH while composing (before any expansion)."""
    global _LOADER
    if _LOADER is None:
        require("yaml")  # one line naming the package when PyYAML is missing
        import yaml

        class Loader(yaml.SafeLoader):
            _depth = 0

            def compose_node(self, parent: Any, index: Any) -> Any:
                if self.check_event(yaml.AliasEvent):
                    mark = self.peek_event().start_mark
                    raise yaml.YAMLError(f"line {mark.line + 1}: YAML aliases (*name) are not accepted: "
                                         "write the value out")
                self._depth += 1
                try:
                    if self._depth > MAX_DEPTH:
                        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
                    return super().compose_node(parent, index)
                finally:
                    self._depth -= 1

        _LOADER = Loader
    return _LOADER


def _unique_loader() -> Any:
    """:func:`_loader` that also refuses a key given twice in one mapping (YAML keeps the last one silently)."""
    global _UNIQUE_LOADER
    if _UNIQUE_LOADER is None:
        yaml = require("yaml")

        class UniqueLoader(_loader()):  # type: ignore[misc]
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                _no_key_twice(self, node)
                return super().construct_mapping(node, deep=deep)

        _UNIQUE_LOADER = UniqueLoader
    return _UNIQUE_LOADER


def _no_key_twice(loader: Any, node: Any) -> None:
    """Refuse a mapping ``node`` that gives a key twice (YAML keeps the last one silently)."""
    import yaml

    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key: the base class says so
            dup = False
        if dup:
            raise yaml.YAMLError(f"line {key_node.start_mark.line + 1}: the key {str(key)[:60]!r} is given "
                                 "twice in one mapping: give it once")


_C_LOADERS: dict[bool, Any] = {}


def _c_loader(yaml: Any, unique_keys: bool) -> Any:
    """libyaml's SafeLoader (PyYAML's C parser, about 10x faster on a TAO spec), the unique-key rule of
    :func:`_unique_loader` kept (mappings are still built in Python); None where PyYAML has no libyaml. Its
    composer is C, so aliases and depth are refused by :func:`_events_ok` first."""
    if not getattr(yaml, "__with_libyaml__", False):
        return None
    if unique_keys not in _C_LOADERS:
        if unique_keys:
            class CUniqueLoader(yaml.CSafeLoader):  # type: ignore[misc,name-defined]
                def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                    _no_key_twice(self, node)
                    return super().construct_mapping(node, deep=deep)

            _C_LOADERS[True] = CUniqueLoader
        else:
            _C_LOADERS[False] = yaml.CSafeLoader
    return _C_LOADERS[unique_keys]


def _events_ok(yaml: Any, text: str) -> None:
    """The alias and depth rules of :func:`_loader`, on libyaml's parse events (before anything is built): a node
    is as deep as the collections open around it, plus one."""
    nodes, opening, closing = (yaml.ScalarEvent, yaml.AliasEvent), (yaml.MappingStartEvent, yaml.SequenceStartEvent), \
        (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    open_now = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.YAMLError(f"line {event.start_mark.line + 1}: YAML aliases (*name) are not accepted: "
                                 "write the value out")
        if isinstance(event, nodes + opening) and open_now + 1 > MAX_DEPTH:
            raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(event, opening):
            open_now += 1
        elif isinstance(event, closing):
            open_now -= 1


def yaml_value(text: str, what: str, *, unique_keys: bool = False) -> Any:
    """``text`` parsed as YAML (JSON is YAML); one-line TaoError naming ``what`` on any problem.
    ``unique_keys``: a key given twice in one mapping is refused instead of silently keeping the last."""
    yaml = require("yaml")
    try:
        fast = _c_loader(yaml, unique_keys) if isinstance(text, str) else None
        if fast is not None:
            _events_ok(yaml, text)
            return yaml.load(text, Loader=fast)  # noqa: S506 - libyaml's SafeLoader
        return yaml.load(text, Loader=_unique_loader() if unique_keys else _loader())  # noqa: S506 - SafeLoader
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TaoError(f"{what} is not valid YAML/JSON: {first}") from None
    except (ValueError, RecursionError, OverflowError):  # e.g. an integer of more than 4,300 digits
        raise TaoError(f"{what} holds a value YAML cannot represent here (a number too long, or nesting too deep)") from None
