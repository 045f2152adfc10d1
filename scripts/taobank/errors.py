"""The one exception type for failures a user must act on, the exit codes of every helper, and the import of a
third-party package that fails as one (:func:`require`)."""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

#: Exit codes of every verb of every helper (README "Exit codes").
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class TaoError(Exception):
    """A user-facing failure: one line saying what failed and what to do.

    ``exit_code`` is what the entry point exits with (1 by default; 2 is
    reserved for "missing input file" style errors where a tool documents it).
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        # Keep it one line whatever the caller passed.
        super().__init__(" ".join(str(message).split()))
        self.exit_code = exit_code


class UsageError(TaoError):
    """Bad command-line input (exit 2, like argparse)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


class MissingDependency(TaoError):
    """A third-party Python package the helper needs is not installed (see :func:`require`)."""


class SubmitUncertain(TaoError):
    """A launch may or may not have created the job (its answer was lost): the record stays PENDING for a
    resume, which looks before it creates anything. ``note``: what the record should say meanwhile (the core
    writes it)."""

    def __init__(self, message: str, note: str | None = None) -> None:
        super().__init__(message)
        self.note = note


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
