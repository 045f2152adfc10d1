"""The kubectl client: every call carries ``-n <namespace>`` and ``--context`` (when set).

Built from ``TAO_K8S_NAMESPACE`` (default ``default``) and ``TAO_K8S_CONTEXT``
or from a record's ``backend`` (so status/cancel talk to the cluster the job
was submitted to). All calls go through :func:`taobank.run.run`; Secret
material only ever travels on stdin.
"""
from __future__ import annotations

import json
import os

from .. import names
from ..errors import TaoError
from ..run import Result, run, stream

NAMESPACE_ENV = "TAO_K8S_NAMESPACE"
CONTEXT_ENV = "TAO_K8S_CONTEXT"
#: The kind of every Kubernetes backend value of a record that reaches a kubectl command line.
BACKEND_KINDS = {"namespace": "dns1123", "name": "dns1123", "uid": "uid", "context": "context", "nodes": "number"}


class Kubectl:
    def __init__(self, namespace: str | None = None, context: str | None = None) -> None:
        self.namespace = namespace or os.environ.get(NAMESPACE_ENV) or "default"
        # None = take TAO_K8S_CONTEXT; "" = explicitly none (the kubeconfig's current context)
        self.context = (context if context is not None else os.environ.get(CONTEXT_ENV)) or None
        if not names.is_dns1123_label(self.namespace):
            raise TaoError(f"namespace {self.namespace!r} is not a valid Kubernetes name: fix {NAMESPACE_ENV}")

    @classmethod
    def for_record(cls, rec: dict) -> "Kubectl":
        from ..recvalues import checked

        b = checked(rec, BACKEND_KINDS)
        ns = b.get("namespace")
        if not ns and rec.get("backend_ref") and "/" in rec["backend_ref"]:
            ns = rec["backend_ref"].split("/", 1)[0]
        # the cluster the job went to, not whatever the environment says today
        return cls(ns, b.get("context", "") or "") if ns else cls()

    def argv(self, *args: str) -> list[str]:
        out = ["kubectl"]
        if self.context:
            out += ["--context", self.context]
        out += ["-n", self.namespace]
        return out + [str(a) for a in args]

    def run(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60,
            what: str | None = None) -> Result:
        return run(self.argv(*args), stdin=stdin, check=check, timeout=timeout, what=what or f"kubectl {args[0]}")

    def json(self, *args: str, what: str | None = None, timeout: float = 60) -> dict:
        """Run with ``-o json`` and parse; an empty answer (``--ignore-not-found``) gives {}."""
        res = self.run(*args, "-o", "json", what=what, timeout=timeout)
        if not res.stdout.strip():
            return {}
        try:
            return json.loads(res.stdout)
        except ValueError:
            raise TaoError(f"{what or 'kubectl'} returned output that is not JSON") from None

    def items(self, *args: str, what: str | None = None) -> list[dict]:
        return self.json("get", *args, what=what).get("items") or []

    def apply(self, objs: list[dict], *, dry_run: bool = False, create: bool = False) -> list[dict]:
        """Apply (or create) objects sent as JSON on stdin; return the server's objects."""
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
        verb = ["create"] if create else ["apply"]
        extra = ["--dry-run=server"] if dry_run else []
        what = "kubectl " + verb[0] + (" --dry-run=server" if dry_run else "")
        res = self.run(*verb, *extra, "-f", "-", "-o", "json", stdin=body, what=what)
        return json_objects(res.stdout)

    def can_i(self, verb: str, resource: str) -> bool:
        res = self.run("auth", "can-i", verb, resource, check=False, what="kubectl auth can-i")
        answer = res.stdout.strip().lower()
        if answer not in ("yes", "no"):
            raise TaoError(f"kubectl auth can-i {verb} {resource} failed: {(res.stderr or res.stdout).strip()[:200]}")
        return answer == "yes"

    def stream(self, *args: str) -> int:
        """Run with output passed through (``logs --follow``); returns the exit code."""
        return stream(self.argv(*args))


def json_objects(text: str) -> list[dict]:
    """Objects from kubectl ``-o json`` output: one object, a List, or several objects back to back
    (``kubectl create -f`` prints one document per object)."""
    decoder = json.JSONDecoder()
    out: list[dict] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        try:
            obj, i = decoder.raw_decode(text, i)
        except ValueError:
            raise TaoError("kubectl returned output that is not JSON") from None
        out.extend(obj.get("items") or [] if obj.get("kind") == "List" else [obj])
    return out
