"""A real S3 endpoint for storage tier C: moto's server, in a venv cached by version (test infrastructure).

It listens on the cluster bridge's gateway address, the one address both the
pods (fetch/upload containers) and this host reach. Any access key is
accepted; buckets live in memory and vanish with ``down``. Tests read and
write objects through :func:`put`, :func:`get` and :func:`make_bucket`, which
run boto3 in the same venv (the test process itself needs no boto3).
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

from taobank.errors import TaoError
from taobank.run import last_line

#: Credentials the tests put in the per-job Secret (moto checks only their presence).
ACCESS_KEY_ID = "AKIATAOLOCALTEST0001"
REGION = "us-east-1"


def venv_dir(version: str) -> Path:
    base = os.environ.get("TAO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tao-skill-bank")
    return Path(base) / f"moto-{version}"


def ensure_venv(version: str) -> Path:
    """The venv's python with ``moto[server]==version`` installed (built once, under a lock)."""
    d = venv_dir(version)
    py = d / "bin" / "python3"
    if (d / "installed").is_file():
        return py
    d.parent.mkdir(parents=True, exist_ok=True)
    with open(d.parent / f"{d.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (d / "installed").is_file():
            return py
        print(f"local kubernetes: installing moto[server]=={version} into {d} (first run only)",
              file=sys.stderr, flush=True)
        for argv in ([sys.executable, "-m", "venv", "--clear", str(d)],
                     [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                      f"moto[server]=={version}"]):
            res = subprocess.run(argv, capture_output=True, text=True, timeout=900)
            if res.returncode != 0:
                raise TaoError(f"installing moto[server]=={version} failed: {last_line(res.stderr or res.stdout)}")
        (d / "installed").write_text(version + "\n", encoding="utf-8")
    return py


def server_argv(python: Path, host: str, port: int) -> list[str]:
    return [str(python), "-m", "moto.server", "-H", host, "-p", str(port)]


_CLIENT = """
import json, sys, boto3
req = json.load(sys.stdin)
s3 = boto3.client("s3", endpoint_url=req["endpoint"], region_name=req["region"],
                  aws_access_key_id=req["key_id"], aws_secret_access_key=req["secret"])
op = req["op"]
if op == "make_bucket":
    s3.create_bucket(Bucket=req["bucket"])
elif op == "put":
    s3.put_object(Bucket=req["bucket"], Key=req["key"], Body=req["body"].encode())
elif op == "get":
    sys.stdout.write(s3.get_object(Bucket=req["bucket"], Key=req["key"])["Body"].read().decode())
elif op == "list":
    out = s3.list_objects_v2(Bucket=req["bucket"], Prefix=req.get("prefix", ""))
    sys.stdout.write(json.dumps(sorted(o["Key"] for o in out.get("Contents", []))))
"""


def _call(python: str, endpoint: str, op: str, **kw: str) -> str:
    req = {"endpoint": endpoint, "region": REGION, "key_id": ACCESS_KEY_ID, "secret": "local-only", "op": op, **kw}
    res = subprocess.run([python, "-c", _CLIENT], input=json.dumps(req), capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise TaoError(f"S3 {op} at {endpoint} failed: {last_line(res.stderr)}")
    return res.stdout


def make_bucket(python: str, endpoint: str, bucket: str) -> None:
    _call(python, endpoint, "make_bucket", bucket=bucket)


def put(python: str, endpoint: str, bucket: str, key: str, body: str) -> None:
    _call(python, endpoint, "put", bucket=bucket, key=key, body=body)


def get(python: str, endpoint: str, bucket: str, key: str) -> str:
    return _call(python, endpoint, "get", bucket=bucket, key=key)


def keys(python: str, endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    return json.loads(_call(python, endpoint, "list", bucket=bucket, prefix=prefix))
