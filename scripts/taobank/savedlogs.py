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
