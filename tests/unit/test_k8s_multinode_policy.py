"""Multi-node Jobs on a shared cluster: a disruption fails the whole Job (a replaced rank cannot rejoin), and a
busy cluster queues them with a warning about partial starts."""
from __future__ import annotations

from taobank import pins
from taobank.platforms.kubernetes import gates, render
from taobank.platforms.kubernetes.gates import NodeGPUs


def _job(nodes: int) -> dict:
    spec = {"image": "i", "gpus": 2, "nodes": nodes, "command": "true", "no_results": True}
    (job,) = [o for o in render.render_manifests(spec, job_id="j1", namespace="ns") if o["kind"] == "Job"]
    return job["spec"]


def test_single_pod_jobs_retry_disruptions_multi_node_jobs_fail_at_once():
    single, multi = _job(1), _job(2)
    assert single["backoffLimit"] == int(pins.resolve("kubernetes.disruption_retries"))
    assert single["podFailurePolicy"]["rules"][0]["action"] == "Count"
    assert multi["backoffLimit"] == 0
    rules = multi["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1]["action"] == "FailJob" and rules[1]["onExitCodes"] == {"operator": "NotIn", "values": [0]}


def test_a_busy_cluster_queues_a_multi_node_job_and_warns_about_partial_starts():
    figures = [NodeGPUs("a", 8, 8, True), NodeGPUs("b", 8, 0, True)]
    line = gates.check_capacity(figures, 8, 2)
    assert line.startswith("queued:") and "pods that start first hold their GPUs" in line and "--require-free" in line
    single = gates.check_capacity([NodeGPUs("a", 8, 8, True)], 8, 1)
    assert single.startswith("queued:") and "hold their GPUs" not in single
