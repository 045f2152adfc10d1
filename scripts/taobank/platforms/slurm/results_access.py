"""SLURM's side of artifacts, fetch and prune: the scripts of :mod:`taobank.results_shell` over the one SSH connection.

The job's folder is the record's ``results_dir``: ``<base>/results/<job id>``
on the cluster's shared filesystem (``backend.results_dir`` on records made
when the top-level value was the parent). Listing is one remote command (every trial of a sweep: one too);
a fetch is two over the same ControlMaster connection (the files' sizes, then
each file read once and streamed back with a digest per block); prune is one.
"""
from __future__ import annotations

import posixpath
from pathlib import Path
from typing import BinaryIO, ContextManager

from ... import results_shell
from ...contract import ResultFile, ResultsListing, ResultsLocation, Transfer
from ...errors import TaoError
from ...paths import abs_path
from ...run import Result, pipe
from . import facts
from .ssh import Connection
from ...records import Record


class _Login:
    """The login host as a :class:`taobank.results_shell.Shell`."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def text(self, script: str, args: list[str], *, what: str) -> Result:
        return self.conn.script(script, args, check=False, timeout=results_shell.TEXT_TIMEOUT_S, what=what)

    def stream(self, script: str, args: list[str], *, stdin: str, what: str) -> ContextManager[BinaryIO]:
        return pipe(self.conn.command_argv(["sh", "-c", script, "tao", *args]), stdin=stdin, what=what)


def location(rec: Record) -> ResultsLocation:
    """The job's folder; its own when it is named after the job (a record keeping the parent is not)."""
    folder = abs_path(facts.SlurmFacts.of(rec).results_dir or rec.results_dir, "the record's results_dir")
    if posixpath.basename(folder) != rec.id:
        return ResultsLocation(folder, False, f"the record keeps the parent folder, not <base>/results/{rec.id}")
    return ResultsLocation(folder, True)


def list_results(rec: Record, loc: ResultsLocation, *, status: bool) -> ResultsListing:
    return results_shell.list_folder(_Login(Connection()), loc.folder, status=status)


def list_results_many(recs: list[Record], locs: list[ResultsLocation], *, status: bool) -> list[ResultsListing | TaoError]:
    """Every folder in ONE remote command (a sweep's trials: ``sweep best``)."""
    return results_shell.list_folders(_Login(Connection()), [loc.folder for loc in locs], status=status)


def fetch_results(rec: Record, loc: ResultsLocation, paths: list[str], into: Path,
                  transfer: Transfer) -> list[ResultFile]:
    return results_shell.fetch_files(_Login(Connection()), loc.folder, paths, into, transfer)


def remove_results(rec: Record, loc: ResultsLocation) -> str:
    return results_shell.remove_folder(_Login(Connection()), loc.folder, rec.id)


def remove_files(rec: Record, loc: ResultsLocation, delete: list[str], keep: dict[str, int]) -> list[ResultFile]:
    return results_shell.remove_files(_Login(Connection()), loc.folder, rec.id, delete, keep)
