"""The kubectl client: every call carries ``-n <namespace>`` and ``--context`` (when set).

Built from ``TAO_K8S_NAMESPACE`` (default ``default``) and ``TAO_K8S_CONTEXT``
or from a record's ``backend`` (so status/cancel talk to the cluster the job
was submitted to). Both are checked here, by the rule a record's values are
checked with (:mod:`taobank.names`): what submit accepts, status and cancel
read back, and neither can reach kubectl as an option. All calls go through
:func:`taobank.run.run`; Secret material only ever travels on stdin. A record's backend is read back here
too, typed (:class:`KubeFacts`): the adapter's one reader of what submit recorded.

Everything the cluster says enters the bank here, cleaned for a terminal before anyone reads it: kubectl's
stderr (an admission webhook's words, "Error from server ...") and every string of its JSON answers
(:func:`cluster_json`: node, queue and claim text) have their control characters escaped.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable

from ... import names
from ...errors import TaoError
from ...run import Result, last_line, run, stream
from ...records import Record
from ...text import cleaned, one_line, terminal_text

NAMESPACE_ENV = "TAO_K8S_NAMESPACE"
CONTEXT_ENV = "TAO_K8S_CONTEXT"
#: The kind of every Kubernetes backend value of a record that reaches a kubectl command line.
BACKEND_KINDS = {"namespace": "namespace", "name": "dns1123", "uid": "uid", "context": "context", "nodes": "number",
                 "index": "number"}
#: The record's backend fact saying its gone Job's folder was read and held no marker (UTC time of the look):
#: a finished pod wrote its marker before its Job could be deleted, so later statuses do not look again.
LOOKED = "exit_marker_none"


@dataclasses.dataclass(frozen=True)
class KubeFacts:
    """A Kubernetes record's backend read back typed (:meth:`of`), with the defaults the adapter always read it
    with: None (or "") for what the record does not hold, since a record an older bank wrote may lack a key.
    Never an error here: what reaches kubectl is checked by :meth:`Kubectl.for_record` (:mod:`taobank.names`)."""

    namespace: str | None = None
    #: the kubeconfig context (None or "": the current one)
    context: str | None = None
    #: the Job's name (None: ``render.job_name_for`` of the record's id)
    name: str | None = None
    uid: str | None = None
    #: what the Job owns, ``kind/name`` comma-separated (its credential Secrets among them)
    owned: str = ""
    #: pods that run at once (None: not recorded)
    nodes: int | None = None
    #: a sweep's trial: its completion index in the sweep's Indexed Job (None: a Job of its own)
    index: int | None = None
    #: a search's folder (settings, journal), shared by a sweep's trials
    search_dir: str = ""
    #: the Kueue ClusterQueue behind the job's queue, as the gate found it
    cluster_queue: str | None = None
    #: when a gone Job's results folder was read and held no exit marker (:data:`LOOKED`)
    looked: str | None = None

    @classmethod
    def of(cls, rec: Record) -> "KubeFacts":
        """The record's facts. A value of another type reads as text (falsy stays falsy, None stays None), a
        number that is none as None: the tolerance every read had."""
        b = rec.backend or {}
        index = b.get("index")
        v = names.backend_read(b, ("namespace", "context", "name", "uid", "owned", "search_dir", "cluster_queue",
                                   LOOKED), counts=("nodes",))
        return cls(namespace=v["namespace"], context=v["context"], name=v["name"], uid=v["uid"],
                   owned=v["owned"] or "", nodes=v["nodes"],
                   index=index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else None,
                   search_dir=v["search_dir"] or "", cluster_queue=v["cluster_queue"], looked=v[LOOKED])


def checked_namespace(value: str, source: str) -> str:
    """``value`` if it is a namespace a record can carry back (:mod:`taobank.names`' rule), else one line
    naming where it came from (``source``: the flag or the variable)."""
    if not names.is_namespace_name(value):
        raise TaoError(f"namespace {value!r} (from {source}) is not a valid Kubernetes namespace name "
                       "(lower-case letters, digits and -, at most 63 characters): fix it")
    return value


def checked_context(value: str, source: str) -> str:
    """``value`` if it is a context name a record can carry back (:mod:`taobank.names`' rule), so
    status and cancel can always reach a job submit created; checked before anything is created."""
    if not names.is_context_name(value):
        raise TaoError(f"context {value!r} (from {source}) is not a kubeconfig context name the bank can use "
                       f"({names.CONTEXT_RULE}): rename it with kubectl config rename-context")
    return value


class Kubectl:
    def __init__(self, namespace: str | None = None, context: str | None = None) -> None:
        ns_source = "--namespace" if namespace else NAMESPACE_ENV
        self.namespace = checked_namespace(namespace or os.environ.get(NAMESPACE_ENV) or "default", ns_source)
        # None = take TAO_K8S_CONTEXT; "" = explicitly none (the kubeconfig's current context)
        ctx_source = "--context" if context is not None else CONTEXT_ENV
        ctx = (context if context is not None else os.environ.get(CONTEXT_ENV)) or None
        self.context = checked_context(ctx, ctx_source) if ctx is not None else None

    @classmethod
    def for_record(cls, rec: Record) -> "Kubectl":
        names.checked(rec, BACKEND_KINDS)  # every value that reaches kubectl, checked first (one line on a bad one)
        facts = KubeFacts.of(rec)
        ns = facts.namespace
        if not ns and rec.backend_ref and "/" in rec.backend_ref:
            ref_ns = {"namespace": rec.backend_ref.split("/", 1)[0]}
            ns = names.checked(dataclasses.replace(rec, backend=ref_ns), {"namespace": "namespace"})["namespace"]
        # the cluster the job went to, not whatever the environment says today
        return cls(ns, facts.context or "") if ns else cls()

    def argv(self, *args: str) -> list[str]:
        out = ["kubectl"]
        if self.context:
            out += ["--context", self.context]
        out += ["-n", self.namespace]
        return out + [str(a) for a in args]

    def run(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60,
            what: str | None = None) -> Result:
        """kubectl's answer, its stderr cleaned for a terminal (control characters escaped, a credential masked);
        with ``check`` a failure is one line naming ``what`` and the last line kubectl said."""
        label = what or f"kubectl {args[0]}"
        res = run(self.argv(*args), stdin=stdin, check=False, timeout=timeout, what=label)
        if res.stderr:  # cleaned in place: a Result made again would decode its text a second time
            res.stderr = terminal_text(res.stderr)
        if check and res.returncode != 0:
            raise TaoError(f"{label} failed (exit {res.returncode}): {one_line(last_line(res.stderr or res.stdout))}")
        return res

    def json(self, *args: str, what: str | None = None, timeout: float = 60) -> dict:
        """Run with ``-o json`` and parse; an empty answer (``--ignore-not-found``) gives {}."""
        res = self.run(*args, "-o", "json", what=what, timeout=timeout)
        if not res.stdout.strip():
            return {}
        try:
            return cluster_json(res.stdout)
        except ValueError:
            raise TaoError(f"{what or 'kubectl'} returned output that is not JSON") from None

    def items(self, *args: str, what: str | None = None) -> list[dict]:
        return self.json("get", *args, what=what).get("items") or []

    def apply(self, objs: list[dict], *, create: bool = False) -> list[dict]:
        """Apply (or create) objects sent as JSON on stdin; return the server's objects."""
        verb = "create" if create else "apply"
        res = self.run(verb, "-f", "-", "-o", "json", stdin=_as_list(objs), what=f"kubectl {verb}")
        return json_objects(res.stdout)

    def dry_run(self, objs: list[dict]) -> Result:
        """The server's dry run of creating ``objs``, unchecked: a refusal's stderr names each object it refused."""
        return self.run("create", "--dry-run=server", "-f", "-", "-o", "json", stdin=_as_list(objs), check=False,
                        what="kubectl create --dry-run=server")

    def can_i(self, verb: str, resource: str) -> bool:
        res = self.run("auth", "can-i", verb, resource, check=False, what="kubectl auth can-i")
        answer = res.stdout.strip().lower()
        if answer not in ("yes", "no"):
            raise TaoError(f"kubectl auth can-i {verb} {resource} failed: {one_line((res.stderr or res.stdout).strip())[:200]}")
        return answer == "yes"

    def cluster_key(self) -> str:
        """``<context>@<server URL>`` of the cluster kubectl talks to (what NCCL probe verdicts are kept by)."""
        view = self.json("config", "view", "--minify", what="kubectl config view")
        context = self.context or view.get("current-context") or ""
        clusters = view.get("clusters") or [{}]
        server = (clusters[0].get("cluster") or {}).get("server") or ""
        if not server:
            raise TaoError("cannot tell which cluster kubectl talks to (no server in kubectl config view): "
                           "check KUBECONFIG / --context")
        return f"{context}@{server}"

    def stream(self, *args: str, on_text: Callable[[str], None]) -> int:
        """Run with its output handed to ``on_text`` as it comes (``logs --follow``); returns the exit code."""
        return stream(self.argv(*args), on_text)


def _as_list(objs: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})


def cluster_json(text: str) -> Any:
    """kubectl's JSON answer with every string cleaned for a terminal (:func:`taobank.text.cleaned`): the one
    parse of what a cluster says. ValueError for text that is not JSON."""
    return cleaned(json.loads(text))


def json_objects(text: str) -> list[dict]:
    """Objects from kubectl ``-o json`` output: one object, a List, or several objects back to back
    (``kubectl create -f`` prints one document per object). Not cleaned: these are the bank's own objects as the
    server stored them, read back to check them byte for byte (a ConfigMap's file holds newlines)."""
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
