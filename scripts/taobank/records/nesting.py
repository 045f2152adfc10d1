"""One job's results folder against the other records' (a prune of one job must never delete another's):
:func:`refuse_nested` when a job opens, :func:`records_inside` when one is pruned."""
from __future__ import annotations

from typing import Any

from ..errors import TaoError
from . import store
from .folders import folder_of, within


def refuse_nested(folders: list[tuple[str, str]], platform: str) -> None:
    """A new job's results folder (``(folder, job id)``) may neither lie inside another record's folder nor hold
    one: ``prune`` of the outer job would delete the inner job's results (one pass over the records for all
    ``folders``). Only a folder named after its job can be pruned, so only such an outer folder counts."""
    others = [(r, folder_of(r)) for r in store.list_records(platform=platform)]
    for new, new_id in folders:
        for r, old in others:
            if not old or new.rstrip("/") == old:
                continue  # the same folder: a retry carries on in its parent's
            if within(new, old) and old.rsplit("/", 1)[-1] == r["id"]:
                raise TaoError(f"results folder {new} lies inside job {r['id']}'s folder {old}: pruning that job "
                               "would delete it; choose a folder outside every job's folder")
            if within(old, new) and new.rstrip("/").rsplit("/", 1)[-1] == new_id:
                raise TaoError(f"results folder {new} holds job {r['id']}'s folder {old}: choose a folder that holds "
                               "no other job's results")


def records_inside(folder: str, platform: str, besides: str) -> list[dict[str, Any]]:
    """The records (other than ``besides``) whose results lie in ``folder`` (inside it, or the same folder)."""
    return [r for r in store.list_records(platform=platform) if r["id"] != besides and within(folder_of(r), folder)]


__all__ = ["refuse_nested", "records_inside"]
