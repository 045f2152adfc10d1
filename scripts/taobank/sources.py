"""Data sources a job may fetch before it runs (S3, Hugging Face, NGC): the URI grammar, the credentials each
reads and the argv of each source's own CLI. Platform-neutral: a platform decides only where and when the
fetch runs (SLURM: a CPU-only prefetch job, :mod:`taobank.platforms.slurm.prefetch`).

* ``s3://bucket/key`` (a key ending in ``/`` is a prefix, copied recursively),
  ``hf://org/repo[/path/in/repo][@revision]`` (the seed's ``hf_model://`` too),
  ``ngc://org/[team/]model:version``; each lands at a relative destination.
* Credentials are never on argv: only their names are here (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
  AWS_SESSION_TOKEN, HF_TOKEN, NGC_KEY); the platform hands the values to the fetch in a private file.
* The programs: ``aws`` (``s3 cp``), ``hf`` (else ``huggingface-cli``) ``download``, ``ngc registry model
  download-version``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .errors import TaoError
from .paths import S3_BUCKET
from .s3results import ENDPOINT_ENV, _ENDPOINT

SCHEMES = ("s3", "hf", "ngc")
#: secret names each source reads from the submitter's environment: (required, optional)
SECRETS = {"s3": (("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"), ("AWS_SESSION_TOKEN",)),
           "hf": ((), ("HF_TOKEN",)),
           "ngc": ((), ("NGC_KEY",))}
#: plain (non-secret) settings passed to the prefetch job when the submitter has them
PLAIN_ENV = ("AWS_DEFAULT_REGION", "AWS_REGION")

_KEY = re.compile(r"[A-Za-z0-9!_.*'()+=,@-]+(/[A-Za-z0-9!_.*'()+=,@-]+)*/?\Z")
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_REV = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*\Z")
_DEST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*\Z")
_REGION = re.compile(r"[a-z0-9-]{1,32}\Z")


@dataclass(frozen=True)
class Prefetch:
    """One prefetch: where it comes from, where it lands (relative to ``<job_dir>/prefetch``)."""

    scheme: str  # s3 | hf | ngc
    source: str  # the URI as given (checked)
    dest: str
    #: s3: bucket, key; hf: repo, path ("" = whole repo), revision ("" = default); ngc: org, team, model, version
    parts: tuple[str, ...]


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def check_dest(dest: str) -> str:
    """A relative path under the prefetch folder: plain components, no ``..``, no leading ``/`` or ``-``."""
    if not isinstance(dest, str) or not _DEST.match(dest) or any(p in (".", "..") for p in dest.split("/")) \
            or len(dest) > 255:
        raise TaoError(f"prefetch destination {_shown(str(dest))} must be a relative path under the job's prefetch "
                       "folder (letters, digits, '._-' per part, '/' between parts; no '..', not starting with "
                       "'/', '.' or '-')")
    return dest


def parse_source(source: str) -> tuple[str, tuple[str, ...]]:
    """(scheme, parts) of a prefetch source URI; a one-line error naming the accepted forms otherwise."""
    forms = "s3://bucket/key, hf://org/repo[/file][@revision] or ngc://org/[team/]model:version"
    if not isinstance(source, str) or "://" not in source:
        raise TaoError(f"prefetch source {_shown(str(source))} is not a URI: use {forms}")
    scheme, _, rest = source.partition("://")
    if scheme == "hf_model":  # the seed's spelling
        scheme = "hf"
    if scheme == "s3":
        bucket, _, key = rest.partition("/")
        if not S3_BUCKET.match(bucket) or not key or not _KEY.match(key):
            raise TaoError(f"prefetch source {_shown(source)} is not s3://bucket/key (bucket: lowercase letters, "
                           "digits, '.-'; key: letters, digits and !_.*'()+=,@- with '/' between parts; a key "
                           "ending in '/' is a prefix)")
        return "s3", (bucket, key)
    if scheme == "hf":
        body, at, rev = rest.rpartition("@") if "@" in rest else (rest, "", "")
        parts = body.split("/")
        if len(parts) < 2 or not all(_PART.match(p) for p in parts) or (at and not _REV.match(rev)) \
                or any(p == ".." for p in rev.split("/")):
            raise TaoError(f"prefetch source {_shown(source)} is not hf://org/repo[/path/in/repo][@revision]")
        return "hf", ("/".join(parts[:2]), "/".join(parts[2:]), rev)
    if scheme == "ngc":
        body, colon, version = rest.rpartition(":")
        parts = body.split("/") if colon else []
        if len(parts) not in (2, 3) or not all(_PART.match(p) for p in parts) or not _PART.match(version or "-"):
            raise TaoError(f"prefetch source {_shown(source)} is not ngc://org/[team/]model:version")
        org, team, model = (parts[0], "", parts[1]) if len(parts) == 2 else tuple(parts)
        return "ngc", (org, team, model, version)
    raise TaoError(f"prefetch source scheme {_shown(scheme)} is not supported: use {forms}")


def parse_item(item: str) -> tuple[str, str]:
    """``SOURCE=DEST`` of the ``--prefetch`` flag: (dest, source)."""
    source, sep, dest = str(item).rpartition("=")
    if not sep or not source:
        raise TaoError(f"--prefetch {_shown(str(item))}: give SOURCE=DEST (e.g. s3://bucket/model.pth=ckpt/model.pth)")
    return dest, source


def collect(spec: Any) -> list[Prefetch]:
    """The spec's ``prefetch`` ({dest: source}; a typed spec's field or a mapping's key), each checked;
    destinations may not overlap."""
    given = (spec.get("prefetch") if isinstance(spec, Mapping) else getattr(spec, "prefetch", None)) or {}
    if not isinstance(given, Mapping):
        raise TaoError("prefetch must be a mapping {destination: source}")
    out = []
    for dest, source in given.items():
        scheme, parts = parse_source(source)
        out.append(Prefetch(scheme, str(source), check_dest(dest), parts))
    dests = sorted(p.dest for p in out)
    for a, b in zip(dests, dests[1:]):
        if b == a or b.startswith(a + "/"):
            raise TaoError(f"prefetch destinations {a} and {b} overlap: give each its own path")
    return out


def secrets_for(items: Iterable[Prefetch], env: Mapping[str, str], *, need_values: bool = True) -> dict[str, str]:
    """The credentials the prefetches read (required ones must be exported; optional ones when set)."""
    out: dict[str, str] = {}
    for p in items:
        required, optional = SECRETS[p.scheme]
        for name in required:
            if not env.get(name) and need_values:
                raise TaoError(f"prefetch {p.source}: export {name} (it goes to the prefetch job in a mode-600 file, "
                               "never on a command line)")
            out[name] = env.get(name, "") if need_values else ""
        for name in optional:
            if env.get(name):
                out[name] = env[name] if need_values else ""
    return out


def plain_env(items: Iterable[Prefetch], env: Mapping[str, str]) -> dict[str, str]:
    """Non-secret settings of the S3 fetches: S3_ENDPOINT_URL (checked) and the region, when set."""
    if not any(p.scheme == "s3" for p in items):
        return {}
    out = {}
    endpoint = env.get(ENDPOINT_ENV, "")
    if endpoint:
        if not _ENDPOINT.match(endpoint):
            raise TaoError(f"{ENDPOINT_ENV} is not an http(s)://host[:port] URL")
        out[ENDPOINT_ENV] = endpoint
    for name in PLAIN_ENV:
        if env.get(name):
            if not _REGION.match(env[name]):
                raise TaoError(f"{name} is not an AWS region name")
            out[name] = env[name]
    return out


def commands(p: Prefetch, target: str) -> list[list[str]]:
    """The argv lists that fetch ``p`` into ``target`` (an absolute path); the endpoint is added by the script.

    s3: ``aws s3 cp`` (``--recursive`` for a prefix); hf: ``hf download`` (``huggingface-cli download`` where
    ``hf`` is missing: same arguments); ngc: ``ngc registry model download-version`` (NGC_KEY becomes the
    CLI's NGC_CLI_API_KEY in the script, never an argument)."""
    if p.scheme == "s3":
        bucket, key = p.parts
        uri = f"s3://{bucket}/{key}"
        if key.endswith("/"):
            return [["aws", "s3", "cp", "--only-show-errors", "--recursive", uri, target + "/"]]
        return [["aws", "s3", "cp", "--only-show-errors", uri, target]]
    if p.scheme == "hf":
        repo, path, rev = p.parts
        argv = ["download", repo] + ([path] if path else []) + (["--revision", rev] if rev else []) + \
            ["--local-dir", target]
        return [["hf"] + argv, ["huggingface-cli"] + argv]
    org, team, model, version = p.parts
    name = "/".join(x for x in (org, team, model) if x) + ":" + version
    return [["ngc", "registry", "model", "download-version", name, "--dest", target, "--org", org]
            + (["--team", team] if team else [])]


def size_query(p: Prefetch) -> list[str] | None:
    """S3: the command that prints the bytes a fetch will bring (asked before it runs); None elsewhere."""
    if p.scheme != "s3":
        return None
    bucket, key = p.parts
    if key.endswith("/"):
        return ["aws", "s3", "ls", "--recursive", "--summarize", f"s3://{bucket}/{key}"]
    return ["aws", "s3api", "head-object", "--bucket", bucket, "--key", key, "--query", "ContentLength",
            "--output", "text"]
