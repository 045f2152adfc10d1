"""Third-party imports with a one-line hint when a dependency is missing."""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

from .errors import MissingDependency

# import name -> pip distribution name
_PIP_NAMES = {"yaml": "pyyaml", "jsonschema": "jsonschema", "jinja2": "jinja2"}


def require(module: str) -> ModuleType:
    """Import ``module`` or raise MissingDependency (a TaoError) naming the pip package to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pip_name = _PIP_NAMES.get(module, module)
        raise MissingDependency(
            f"missing Python dependency '{pip_name}': run "
            f"'{sys.executable} -m pip install {pip_name}' "
            f"(or pip install -r requirements.txt in the bank)"
        ) from None
