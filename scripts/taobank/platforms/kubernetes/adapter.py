"""Kubernetes' side of the platform contract: the hooks, over kubectl (one module per verb)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ...core import jobfiles
from ...contract import Batch, Gate, Launch, Observation, Stop, SubmitOptions, SweepPreview
from . import spec as specmod
from .spec import KubernetesSpec
from ...core.platform import JobView, Logs, Platform, ResultsAccess
from . import INFO, submit
from .submit import KubePlan
from ...records import Record

#: The job id a dry run without --job-id renders with (its Secret names follow from it).
PREVIEW_ID = "tao-render-preview"


class Kubernetes(Platform[KubernetesSpec, KubePlan]):
    info = INFO
    flags = specmod  # its submit flags as data, beside its job spec

    @property
    def results_access(self) -> ResultsAccess:  # artifacts / fetch / prune (the verbs: taobank.campaign.results_verbs)
        from . import results_access

        return results_access

    def view(self, rec: Record) -> JobView:
        saved = jobfiles.saved_logs(rec.id, "logs.txt")
        return JobView.from_record(rec, saved_logs=str(saved) if saved else None)

    def observe(self, recs: list[Record], *, context: dict) -> list[Observation]:
        from . import observe

        # The Job controller itself replaces disrupted pods (podFailurePolicy): no observation asks for a retry.
        return observe.observe(recs, context)

    def ended(self, recs: list[Record], context: dict, *, carried_on: frozenset[str] = frozenset()) -> dict[str, str]:
        from . import observe

        return observe.ended(recs, context)

    def read_logs(self, rec: Record, *, tail: int | None) -> Logs:
        from . import logs

        text, source = logs.read_logs(rec, tail=tail)
        return Logs(rec.id, {"pods": text}, source=source)

    def follow_logs(self, rec: Record, *, tail: int | None, emit: Callable[[str, str], None]) -> int:
        from . import logs

        return logs.follow_logs(rec, tail=tail, emit=emit)

    def read_status_files(self, rec: Record, *, live: bool) -> dict[str, str]:
        from . import statusfiles

        return statusfiles.read(rec, live=live)

    def stop(self, recs: list[Record], context: dict) -> list[Stop]:
        from . import cancel

        return cancel.stop(recs)

    def clean_finished(self, rec: Record, context: dict) -> str | None:
        from . import credentials
        from .objects import index_of

        if index_of(rec) is not None:  # the sweep's Secrets serve its other trials: they go with its Job
            return None
        return credentials.remove_credentials(rec)

    # -- submit hooks (the order is the core's: Platform.submit)
    spec_type = KubernetesSpec

    def typed_spec(self, mapping: Mapping[str, Any]) -> KubernetesSpec:
        # the schema's check is the spec's last step where it is made (kubernetes.spec.finish: flags, the probe)
        return KubernetesSpec.from_dict(mapping)

    def plan(self, spec: KubernetesSpec, opts: SubmitOptions, rec: Record | None) -> KubePlan:
        return submit.plan(spec, opts, rec)

    def adopt(self, plan: KubePlan, rec: Record, gate: Gate) -> Launch | None:
        return submit.adopt(plan, rec, gate)

    def cluster_key(self, plan: KubePlan) -> str:
        assert plan.kube is not None
        return plan.kube.cluster_key()

    def check(self, plans: list[KubePlan], gate: Gate, batch: Batch) -> None:
        submit.check(plans, gate, batch)

    def launch(self, plans: list[KubePlan], recs: list[Record], batch: Batch) -> list[Launch]:
        return submit.launch(plans, recs, batch)

    def with_secret(self, spec: KubernetesSpec, opts: SubmitOptions, name: str) -> tuple[KubernetesSpec, SubmitOptions]:
        from dataclasses import replace

        return spec, replace(opts, secret_env=tuple(dict.fromkeys((*opts.secret_env, name))))

    def with_time_limit(self, spec: KubernetesSpec, minutes: float) -> KubernetesSpec:
        import math
        from dataclasses import replace

        return replace(spec, active_deadline_seconds=max(1, math.ceil(minutes * 60)))

    def spec_text(self, spec: KubernetesSpec, path: str, opts: SubmitOptions) -> str | None:
        """The staged config file of an action request (``--request`` with ``--config-file``) at ``path``."""
        config = opts.config or {}
        return str(config["text"]) if config.get("mount_path") == path and "text" in config else None

    def lineage_access(self, spec: KubernetesSpec, parent: Record, folder: str) -> KubernetesSpec:
        from .lineage_access import reachable

        return reachable(spec, parent, folder)

    def lineage_fetch(self, spec: KubernetesSpec, job: Record, folder: str, files: dict[str, str],
                      replaces: Sequence[str] = ()) -> tuple[KubernetesSpec, dict[str, str]]:
        from .lineage_access import fetched

        return fetched(spec, job, folder, files, replaces)

    def with_queue(self, spec: KubernetesSpec, queue: str) -> KubernetesSpec:
        from dataclasses import replace

        return replace(spec, queue=queue)

    # -- sweeps (the verbs: taobank.campaign.sweeps): ONE Indexed Job; the Job controller keeps --max-concurrent itself
    def release_trials(self, recs: list[Record]) -> None:
        from . import sweep

        sweep.release(recs)

    def read_status_many(self, recs: list[Record]) -> dict[str, dict[str, str]]:
        from . import sweep

        return sweep.read_status_many(recs)

    runs_searches = True  # the bundle in a ConfigMap every trial's pod mounts; the journal on the results volume

    def read_search_file(self, rec: Record, path: str) -> str:
        from . import sweep

        return sweep.read_search_file(rec, path)

    def preview(self, spec: KubernetesSpec, opts: SubmitOptions) -> str:
        from ...render import dump_yaml
        from .kubectl import Kubectl

        # the same checks of --namespace/--context as a real submit: a dry run that passes, submits
        namespace = Kubectl(opts.namespace, opts.context).namespace
        objs = submit.preview(spec, namespace=namespace, job_id=opts.job_id or PREVIEW_ID,
                              secret_env=opts.secret_env, secrets_file=opts.secrets_file,
                              ngc_pull_secret=opts.ngc_pull_secret,
                              config=dict(opts.config) if opts.config is not None else None)
        return dump_yaml(objs)

    def preview_sweep(self, specs: list[KubernetesSpec], opts: SubmitOptions, ids: list[str], batch: Batch) -> SweepPreview:
        from ...render import dump_yaml
        from .kubectl import Kubectl

        namespace = Kubectl(opts.namespace, opts.context).namespace
        objs, folders = submit.preview_sweep(
            specs, ids, batch, namespace=namespace, secret_env=opts.secret_env, secrets_file=opts.secrets_file,
            ngc_pull_secret=opts.ngc_pull_secret, config=dict(opts.config) if opts.config is not None else None)
        shared = [(f"{o['kind']} {o['metadata']['name']}", dump_yaml([o])) for o in objs]
        return SweepPreview(shared=shared, trials=[[] for _ in ids], results_dirs=folders)


PLATFORM = Kubernetes()
