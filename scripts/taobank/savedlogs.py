"""A finished job's logs, kept beside its record: every platform saves them here, redacted, mode 600.

The engine or cluster drops a job's output with the job (``docker rm``, ttlSecondsAfterFinished), so the
last lines are kept; a credential the job printed must not outlive it in a plain file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

from . import fsio, records
from .redact import redact_text


def save(job_id: str, name: str, content: str | Mapping[str, str]) -> Path:
    """Write ``content`` (one text, or named streams kept as JSON) to ``<artifact dir>/name``, redacted."""
    if isinstance(content, str):
        text = redact_text(content)
    else:
        text = json.dumps({k: redact_text(str(v or "")) for k, v in content.items()})
    path = records.artifact_dir(job_id) / name
    fsio.write_private(path, text)
    return path


def saved(job_id: str, name: str) -> Path | None:
    """The copy ``name`` saved for the job, or None when none was (the folder is never made here)."""
    path = records.state_dir() / f"{job_id}.d" / name
    return path if path.is_file() else None


def read(job_id: str, name: str, tail: int | None) -> str | None:
    """The last ``tail`` lines (None: all) of the text copy ``name`` (:func:`save`), or None when none was saved."""
    path = saved(job_id, name)
    raw = fsio.read_regular(path, "saved logs", follow_links=False) if path else None
    return None if path is None else _last((raw or b"").decode("utf-8", "replace"), tail)


def read_streams(job_id: str, name: str, tail: int, streams: tuple[str, ...]) -> dict[str, str] | None:
    """The last ``tail`` lines of each named stream of the JSON copy ``name`` (:func:`save`), or None."""
    path = saved(job_id, name)
    if path is None:
        return None
    data = json.loads((fsio.read_regular(path, "saved logs", follow_links=False) or b"{}").decode("utf-8", "replace"))
    return {k: _last(str(data.get(k) or ""), tail) for k in streams}


def _last(text: str, tail: int | None) -> str:
    return text if tail is None else "".join(text.splitlines(keepends=True)[-tail:])
