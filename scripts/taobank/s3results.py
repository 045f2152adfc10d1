"""A job's results under an ``s3://`` prefix (storage tier C), read and deleted with this machine's AWS CLI.

The upload sidecar puts the job's folder at ``s3://bucket/prefix/<job id>/``;
these functions list it (``s3api list-objects-v2``), stream objects
(``s3 cp URI -``) and delete it (``s3 rm --recursive``), always under the
folder's own prefix with its trailing ``/`` (``.../job-1/`` never matches
``.../job-10``). Credentials are the AWS CLI's own (``AWS_ACCESS_KEY_ID`` ...,
never on a command line); ``S3_ENDPOINT_URL`` (the variable tier C jobs use)
becomes ``--endpoint-url``. S3 keeps no whole-file SHA-256: a download is
checked against the listed size and, for single-part uploads, the ETag (MD5).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

from .contract import ResultFile, ResultsListing, Transfer
from .errors import NotInResults, TaoError
from .paths import is_member
from .run import last_line, pipe, run
from .fsio import json_value
from .fsio import CHUNK
from .progress.remote import TAIL_BYTES
from .progress.statusfile import CUT

ENDPOINT_ENV = "S3_ENDPOINT_URL"
_ENDPOINT = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~/-]*)?\Z")
_MD5 = re.compile(r"[0-9a-f]{32}\Z")
#: Status files read for the best checkpoint (as progress.remote reads them on a volume).
MAX_STATUS_FILES = 16


def aws() -> list[str]:
    """The AWS CLI's argv prefix (with ``--endpoint-url`` from S3_ENDPOINT_URL); one line when it is missing."""
    if not shutil.which("aws"):
        raise TaoError("this job's results are in S3 (storage tier C): install the AWS CLI here (pip install "
                       "awscli) and export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and S3_ENDPOINT_URL for a "
                       "non-AWS endpoint)")
    argv = ["aws"]
    endpoint = (os.environ.get(ENDPOINT_ENV) or "").strip()
    if endpoint:
        if not _ENDPOINT.match(endpoint):
            raise TaoError(f"{ENDPOINT_ENV} is not an http(s) URL of host[:port][/path]: fix or unset it")
        argv += ["--endpoint-url", endpoint]
    return argv


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b``); a URI without a folder under the bucket is refused."""
    bucket, _, prefix = uri[len("s3://"):].partition("/") if uri.startswith("s3://") else ("", "", "")
    prefix = prefix.strip("/")
    if not bucket or not prefix:
        raise TaoError(f"{uri} is not an s3://bucket/folder results location")
    return bucket, prefix


def _when(text: object) -> float:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def list_prefix(uri: str, *, status: bool) -> ResultsListing:
    """Every object under the folder (paginated by the CLI); with ``status`` TAO's status files' last bytes."""
    bucket, prefix = split_uri(uri)
    res = run(aws() + ["s3api", "list-objects-v2", "--bucket", bucket, "--prefix", prefix + "/", "--output", "json"],
              check=False, timeout=600, what="aws s3api list-objects-v2")
    if not res.ok:
        raise TaoError(f"listing {uri} failed: {last_line(res.stderr or res.stdout)}: check the AWS credentials and "
                       "S3_ENDPOINT_URL")
    data = json_value(res.stdout, "the S3 listing") if res.stdout.strip() else {}
    files = []
    for obj in (data.get("Contents") or []) if isinstance(data, dict) else []:
        key = str(obj.get("Key") or "")
        rel = key[len(prefix) + 1:]
        if not key.startswith(prefix + "/") or not is_member(rel) or not isinstance(obj.get("Size"), int):
            continue
        etag = str(obj.get("ETag") or "").strip('"')
        files.append(ResultFile(rel, obj["Size"], _when(obj.get("LastModified")),
                                md5=etag if _MD5.match(etag) else None))
    files.sort(key=lambda f: f.path)
    listing = ResultsListing(uri, files, exists=bool(files))
    if status:
        names = [f.path for f in files if f.path == "status.json" or re.fullmatch(r"[^/]+/status\.json", f.path)]
        for rel in sorted(names, key=lambda n: (n != "status.json", n))[:MAX_STATUS_FILES]:
            got = run(aws() + ["s3", "cp", f"s3://{bucket}/{prefix}/{rel}", "-"], check=False, timeout=300,
                      what="aws s3 cp")
            if got.ok:  # cut to its end as a volume's reader cuts it (progress.remote)
                text = got.stdout[-TAIL_BYTES:]
                listing.status_files[rel] = text if len(got.stdout) <= TAIL_BYTES else \
                    f"{CUT}{len(got.stdout)}\n" + text.partition("\n")[2]
    return listing


def fetch(uri: str, paths: list[str], into: Path, transfer: Transfer) -> list[ResultFile]:
    """Stream the objects under ``paths`` (all when empty) through ``transfer``: one ``aws s3 cp URI -`` each,
    its MD5 computed as it is written and checked against the ETag when the ETag is one (single-part upload).
    An object is fetched whole again after an interruption (the CLI streams no range)."""
    bucket, prefix = split_uri(uri)
    listing = list_prefix(uri, status=False)
    chosen = [f for f in listing.files if not paths or any(f.path == p or f.path.startswith(p + "/") for p in paths)]
    for p in paths:
        if not any(f.path == p or f.path.startswith(p + "/") for f in listing.files):
            raise NotInResults(p, uri)
    transfer.start(chosen)
    done = 0
    for f in chosen:
        if transfer.have(f) is None:
            continue
        md5 = hashlib.md5(usedforsecurity=False)
        with transfer.part(f, 0) as w, pipe(aws() + ["s3", "cp", "--only-show-errors",
                                                     f"s3://{bucket}/{prefix}/{f.path}", "-"],
                                            what=f"aws s3 cp of {f.path}") as out:
            written = 0
            while chunk := out.read(min(CHUNK, f.size - written + 1)):
                if written + len(chunk) > f.size:
                    transfer.discard(f)
                    raise TaoError(f"{f.path}: more bytes arrived than the {f.size} S3 listed: it changed during "
                                   "the download; run the fetch again")
                md5.update(chunk)
                w.write(chunk)
                written += len(chunk)
                done += len(chunk)
                transfer.advance(done)
        if written != f.size or (f.md5 is not None and md5.hexdigest() != f.md5):
            transfer.discard(f)
            why = f"{written} bytes arrived, S3 listed {f.size}" if written != f.size else "MD5 mismatch with the ETag"
            raise TaoError(f"{f.path}: {why}: it changed during the download or the transfer broke; run the fetch "
                           "again")
        transfer.verified(f, written)
        transfer.finish(f, "size+md5 (ETag)" if f.md5 else
                        "size only (S3 keeps no whole-file digest for multipart uploads)")
    return chosen


def remove(uri: str, name: str) -> str:
    """Delete every object under the folder ``uri`` (whose last part must be ``name``); the prune note."""
    bucket, prefix = split_uri(uri)
    if prefix.rsplit("/", 1)[-1] != name:
        raise TaoError(f"{uri} is not named {name}: refused")
    count = len(list_prefix(uri, status=False).files)
    if not count:
        return f"{uri}/ holds nothing (deleted already): nothing to do"
    res = run(aws() + ["s3", "rm", "--recursive", "--only-show-errors", f"s3://{bucket}/{prefix}/"], check=False,
              timeout=3600, what="aws s3 rm")
    if not res.ok:
        raise TaoError(f"deleting {uri}/ failed: {last_line(res.stderr or res.stdout)}")
    return f"deleted {count} objects under {uri}/"
