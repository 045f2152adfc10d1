"""The one exception type for failures a user must act on, the exit codes of every helper, and the one line of a
third-party package that is not installed (:func:`missing`)."""
from __future__ import annotations

import sys

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
    """A third-party Python package the helper needs is not installed (see :func:`missing`)."""


class NotInResults(TaoError):
    """A PATH asked of a job's results folder is not there (the verb, which knows the job, says which to list)."""

    def __init__(self, path: str, folder: str) -> None:
        super().__init__(f"{path} is not in the results folder {folder}")
        self.path, self.folder = path, folder


class SubmitUncertain(TaoError):
    """A launch may or may not have created the job (its answer was lost): the record stays PENDING for a
    resume, which looks before it creates anything. ``note``: what the record should say meanwhile (the core
    writes it)."""

    def __init__(self, message: str, note: str | None = None) -> None:
        super().__init__(message)
        self.note = note


# import name -> pip distribution name
_PIP_NAMES = {"yaml": "pyyaml", "jsonschema": "jsonschema", "jinja2": "jinja2"}


def missing(module: str) -> MissingDependency:
    """The one-line error of a failed ``import module`` (raise it ``from None``), naming the pip package to
    install. Callers import the module themselves (``try: import yaml except ImportError: raise missing(...)``):
    the import is then a dictionary look-up once loaded, no call of a helper."""
    pip_name = _PIP_NAMES.get(module, module)
    return MissingDependency(f"missing Python dependency '{pip_name}': run '{sys.executable} -m pip install "
                             f"{pip_name}' (or pip install -r requirements.txt in the bank)")
