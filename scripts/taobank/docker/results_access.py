"""Docker's side of artifacts, fetch and prune: the results folder is a local bind mount, so the shared
scripts of :mod:`taobank.results_sh` run in a local ``sh`` (the same rules as on the clusters)."""
from __future__ import annotations

import posixpath
from pathlib import Path
from typing import BinaryIO, ContextManager

from .. import results_sh
from ..contract import ResultFile, ResultsListing, ResultsLocation, Transfer
from ..errors import TaoError
from ..paths import abs_path
from ..run import Result, pipe, run


class _Local:
    """This host as a :class:`taobank.results_sh.Shell`."""

    def text(self, script: str, args: list[str], *, what: str) -> Result:
        return run(["sh", "-c", script, "tao", *args], check=False, timeout=results_sh.TEXT_TIMEOUT_S, what=what)

    def stream(self, script: str, args: list[str], *, stdin: str, what: str) -> ContextManager[BinaryIO]:
        return pipe(["sh", "-c", script, "tao", *args], stdin=stdin, what=what)


def location(rec: dict) -> ResultsLocation:
    folder = abs_path((rec.get("backend") or {}).get("results_dir") or rec["results_dir"], "the record's results_dir")
    if posixpath.basename(folder) != rec["id"]:  # every Docker job writes <base>/<id>: anything else is damage
        raise TaoError(f"job {rec['id']}: its record names {folder} as its results folder, which is not named "
                       "after the job: refused (restore the record, or read the folder yourself)")
    return ResultsLocation(folder, True)


def list_results(rec: dict, loc: ResultsLocation, *, status: bool) -> ResultsListing:
    return results_sh.list_folder(_Local(), loc.folder, status=status)


def fetch_results(rec: dict, loc: ResultsLocation, paths: list[str], into: Path,
                  transfer: Transfer) -> list[ResultFile]:
    return results_sh.fetch_files(_Local(), loc.folder, paths, into, transfer)


def remove_results(rec: dict, loc: ResultsLocation) -> str:
    return results_sh.remove_folder(_Local(), loc.folder, rec["id"])


def remove_files(rec: dict, loc: ResultsLocation, delete: list[str], keep: dict[str, int]) -> list[ResultFile]:
    return results_sh.remove_files(_Local(), loc.folder, rec["id"], delete, keep)


def list_results_many(recs: list[dict], locs: list[ResultsLocation], *, status: bool) -> list[ResultsListing | TaoError]:
    """A sweep's folders in ONE local ``sh`` (the same script as SLURM's one remote command)."""
    return results_sh.list_folders(_Local(), [loc.folder for loc in locs], status=status)
