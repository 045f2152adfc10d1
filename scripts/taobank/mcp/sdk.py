"""The ``mcp`` SDK's server parts without its package ``__init__`` files: a faster start-up.

``import mcp.server.lowlevel`` first runs ``mcp/__init__.py`` and ``mcp/server/__init__.py``, which import
the SDK's client (HTTP clients), the MCPServer framework and its resource models: about a third of the
SDK's import time, none of it used by a stdio server on the low-level ``Server``. :func:`light` puts bare
package modules in their place (same files, same ``__path__``), so only the submodules the server imports
run. If that does not hold for an SDK version, everything is dropped and the plain import is used.

Most of what is left is pydantic building a validator for each of the SDK's several hundred protocol models
(two protocol versions) as they are defined. They are defined with pydantic's ``defer_build`` default on,
so each is built on its first use instead: a session uses a few dozen of them.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from contextlib import contextmanager
from typing import Iterator

#: Packages whose ``__init__`` the server does not need.
SKIPPED = ("mcp", "mcp.server")
#: What the server imports from the SDK (server.py).
NEEDED = ("mcp.server.lowlevel.server", "mcp.server.stdio", "mcp.shared.exceptions")


def light() -> bool:
    """Import :data:`NEEDED` under bare :data:`SKIPPED` packages; False (and a clean slate for the plain
    import) where that fails. Does nothing once any ``mcp`` module is imported."""
    if any(name == "mcp" or name.startswith("mcp.") for name in sys.modules):
        return False
    try:
        for name in SKIPPED:
            spec = importlib.util.find_spec(name)  # the parent is already the bare one: its __init__ never runs
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError(name)
            module = types.ModuleType(name, f"{name} (package __init__ skipped: taobank.mcp.sdk)")
            module.__spec__, module.__file__, module.__package__ = spec, spec.origin, name
            module.__path__ = list(spec.submodule_search_locations)
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, module)
        with _models_built_on_first_use():
            for name in NEEDED:
                importlib.import_module(name)
        return True
    except Exception:  # noqa: BLE001 - another SDK layout: the plain import instead
        for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
            del sys.modules[name]
        return False


@contextmanager
def _models_built_on_first_use() -> Iterator[None]:
    """pydantic's ``defer_build`` as the default of the models defined meanwhile (the SDK's), where this
    pydantic keeps its defaults where it did (2.x); otherwise nothing changes."""
    try:
        from pydantic._internal import _config

        defaults = _config.config_defaults
    except Exception:  # noqa: BLE001 - another pydantic: the models are built as they are defined
        defaults = None
    if not isinstance(defaults, dict) or "defer_build" not in defaults:
        yield
        return
    before = defaults["defer_build"]
    defaults["defer_build"] = True
    try:
        yield
    finally:
        defaults["defer_build"] = before
