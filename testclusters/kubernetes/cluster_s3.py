"""Buckets and objects in the running cluster's S3 server (tier C tests read and write them)."""
from __future__ import annotations

from . import s3
from .cluster_state import _load_cluster


def s3_endpoint() -> str:
    return _load_cluster()["s3_endpoint"]


def s3_make_bucket(bucket: str) -> None:
    data = _load_cluster()
    s3.make_bucket(data["s3_python"], data["s3_endpoint"], bucket)


def s3_put(bucket: str, key: str, body: str) -> None:
    data = _load_cluster()
    s3.put(data["s3_python"], data["s3_endpoint"], bucket, key, body)


def s3_get(bucket: str, key: str) -> str:
    data = _load_cluster()
    return s3.get(data["s3_python"], data["s3_endpoint"], bucket, key)


def s3_keys(bucket: str, prefix: str = "") -> list[str]:
    data = _load_cluster()
    return s3.keys(data["s3_python"], data["s3_endpoint"], bucket, prefix)
