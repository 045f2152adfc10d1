"""stage on SLURM: small input files and folders copied to the shared filesystem over the one connection."""
from __future__ import annotations

import os
import posixpath

from ...errors import TaoError
from ...run import last_line
from . import remote, storage, uploads
from .ssh import Connection


def stage_inputs(paths: list[str], dest: str, *, force: bool = False, conn: Connection | None = None) -> dict:
    """Copy small local files and folders into a cluster folder (``lustre:///abs/dir``) over one SSH command; a
    folder keeps its layout and gets a ``<folder>.sha256`` manifest beside it (checked there, kept for later)."""
    if "://" not in str(dest):
        raise TaoError("--dest must be a cluster URI like lustre:///lustre/fsw/me/inputs")
    raw = str(dest).split("://", 1)[1]
    if ".." in raw.split("/"):
        raise TaoError("--dest must not contain '..': give the folder's absolute path")
    folder = storage.cluster_path(dest, "--dest")
    if folder == "/":
        raise TaoError("--dest / is not a folder to stage into: give your folder on the shared filesystem")
    if not paths:
        raise TaoError("stage needs at least one local file or folder")
    plain = [p for p in paths if not os.path.isdir(os.path.expanduser(p))]
    files = uploads.collect([(os.path.basename(os.path.normpath(p)), p) for p in plain], what="stage") if plain else []
    manifests: list[uploads.Upload] = []
    for p in paths:
        if p not in plain:
            tree = uploads.collect_tree(p, what="stage")
            files += tree
            manifests.append(tree[-1])
    names = [u.name for u in files]
    if len(set(names)) != len(names) or len({n.split("/")[0] for n in names if "/" in n} & set(names)):
        raise TaoError("stage: two of the files or folders given have the same name: stage them one by one")
    conn = conn or Connection()
    # a folder's files are checked through its manifest on the cluster (one line per file would not fit argv)
    lines = uploads.checksums([u for u in files if "/" not in u.name]) + [f"manifest  {m.name}" for m in manifests]
    res = conn.script(remote.STAGE_IN, [folder, "force" if force else "keep"] + lines,
                      stdin=storage.bundle({u.name: u.data for u in files}), check=False, what="stage inputs")
    if not res.ok:
        raise TaoError(f"staging into {folder} failed on {conn.connect().entry}: {last_line(res.stderr or res.stdout)}")
    return {"dest": folder, "login_host": conn.connect().entry,
            "files": [{"name": u.name, "path": posixpath.join(folder, u.name), "bytes": len(u.data), "sha256": u.sha256}
                      for u in files]}
