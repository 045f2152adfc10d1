"""stage on SLURM: small input files copied to the shared filesystem over the one connection."""
from __future__ import annotations

import os
import posixpath

from ..errors import TaoError
from ..run import last_line
from . import remote, storage, uploads
from .ssh import Connection


def stage_inputs(paths: list[str], dest: str, *, force: bool = False, conn: Connection | None = None) -> dict:
    """Copy small local files into a cluster folder (``lustre:///abs/dir``) over one SSH command."""
    if "://" not in str(dest):
        raise TaoError("--dest must be a cluster URI like lustre:///lustre/fsw/me/inputs")
    raw = str(dest).split("://", 1)[1]
    if ".." in raw.split("/"):
        raise TaoError("--dest must not contain '..': give the folder's absolute path")
    folder = storage.cluster_path(dest, "--dest")
    if folder == "/":
        raise TaoError("--dest / is not a folder to stage into: give your folder on the shared filesystem")
    if not paths:
        raise TaoError("stage needs at least one local file")
    files = uploads.collect([(os.path.basename(os.path.normpath(p)), p) for p in paths], what="stage")
    conn = conn or Connection()
    res = conn.script(remote.STAGE_IN, [folder, "force" if force else "keep"] + uploads.checksums(files),
                      stdin=storage.bundle({u.name: u.data for u in files}), check=False, what="stage inputs")
    if not res.ok:
        raise TaoError(f"staging into {folder} failed on {conn.host.entry}: {last_line(res.stderr or res.stdout)}")
    return {"dest": folder, "login_host": conn.host.entry,
            "files": [{"name": u.name, "path": posixpath.join(folder, u.name), "bytes": len(u.data), "sha256": u.sha256}
                      for u in files]}
