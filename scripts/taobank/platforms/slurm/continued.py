"""``continue`` of a SLURM job reads its ``spec_files`` again from this machine: the same files, or a refusal.

The saved spec names each spec file by an absolute path (``--spec-file`` paths are made absolute at
submit; a spec file's own entries are relative to it), and the job's record keeps each file's sha256
(``backend.spec_files``, checked on the cluster at staging). A continue run from another folder, or
after the file was edited, would otherwise upload other text silently: it is refused in one line.
"""
from __future__ import annotations

import os

from ... import records
from ...errors import TaoError
from .spec import SlurmSpec
from . import uploads
from ...records import Record


def _kept(rec: Record) -> dict[str, str]:
    """name -> sha256 the continued job was staged with (none for a record older than the digests)."""
    from .facts import SlurmFacts

    text = SlurmFacts.of(rec).spec_files
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def check(spec: SlurmSpec, job_id: str) -> None:
    """Refuse a continue of ``job_id`` whose spec files are named relatively or differ from what it ran with."""
    files = dict(spec.spec_files or {})
    hint = f"restore it, or submit a new job with train.resume_training_checkpoint_path=<checkpoint of {job_id}>"
    for name, path in files.items():
        if not os.path.isabs(os.path.expanduser(str(path))):
            raise TaoError(f"job {job_id}'s saved spec names spec file {name} by a relative path ({path}): continue "
                           f"cannot tell which file that was; {hint}")
    then = _kept(records.get(job_id))
    if not then:
        return
    now = {u.name: u for u in uploads.collect(files, what="spec_files")}
    for name, sha in sorted(then.items()):
        got = now.get(name)
        if got is None or got.sha256 != sha:
            was = f"sha256 {sha[:12]}... then, {got.sha256[:12]}... now" if got else "no longer named"
            raise TaoError(f"spec file {name} ({files.get(name, '?')}) changed since job {job_id} ran ({was}): {hint}")
