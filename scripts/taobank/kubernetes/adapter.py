"""Kubernetes' side of the platform contract: the hooks, over :mod:`.verbs` and kubectl."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from .. import records
from ..platform import JobView, Logs, Platform
from . import verbs


def _view(result: Mapping[str, Any]) -> JobView:
    """A verbs result dict (status/cancel/submit) as the common view of its record."""
    rec = records.load(result["id"])
    seen = {k: v for k, v in result.items() if k not in ("id", "state", "err_class", "backend_ref")}
    return JobView.from_record(rec, **seen)


#: The job id a dry run without --job-id renders with (its Secret names follow from it).
PREVIEW_ID = "tao-render-preview"


class Kubernetes(Platform):
    name = verbs.PLATFORM

    def view(self, rec: Mapping[str, Any]) -> JobView:
        saved = records.state_dir() / f"{rec['id']}.d" / "logs.txt"
        return JobView.from_record(rec, saved_logs=str(saved) if saved.is_file() else None)

    def observe(self, recs: list[dict], *, retry: bool = True) -> list[JobView]:
        # The Job controller itself replaces disrupted pods (podFailurePolicy): ``retry`` has no effect here.
        return [_view(r) for r in verbs.status_records(recs)]

    def read_logs(self, rec: dict, *, tail: int | None) -> Logs:
        text, source = verbs.read_logs(rec, tail=tail)
        return Logs(rec["id"], {"pods": text}, source=source)

    def follow_logs(self, rec: dict, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        return verbs.follow_logs(rec, tail=tail)

    def cancel_one(self, rec: dict, context: dict) -> JobView:
        return _view(verbs.cancel(rec["id"]))

    def clean_finished(self, rec: dict, context: dict) -> str | None:
        return verbs.remove_credentials(rec)

    def submit(self, spec: dict, options: Mapping[str, Any]) -> JobView:
        from .kubectl import Kubectl

        explicit = options.get("namespace") or options.get("context")
        kube = Kubectl(options.get("namespace"), options.get("context")) if explicit or not options.get("job_id") \
            else None  # resuming a record: its own namespace/context (verbs.submit checks an explicit one)
        out = verbs.submit(spec, kube=kube,
                           job_id=options.get("job_id"), secret_env=options.get("secret_env") or [],
                           secrets_file=options.get("secrets_file"),
                           ngc_pull_secret=bool(options.get("ngc_pull_secret")), config=options.get("config"),
                           description=options.get("description"), require_free=bool(options.get("require_free")),
                           skip_nccl_probe=bool(options.get("skip_nccl_probe")))
        return _view(out)

    def preview(self, spec: dict, options: Mapping[str, Any]) -> str:
        from ..render import dump_yaml
        from .kubectl import Kubectl

        # the same checks of --namespace/--context as a real submit: a dry run that passes, submits
        namespace = Kubectl(options.get("namespace"), options.get("context")).namespace
        objs = verbs.preview(spec, namespace=namespace, job_id=options.get("job_id") or PREVIEW_ID,
                             secret_env=options.get("secret_env") or [], secrets_file=options.get("secrets_file"),
                             ngc_pull_secret=bool(options.get("ngc_pull_secret")), config=options.get("config"))
        return dump_yaml(objs)


PLATFORM = Kubernetes()
