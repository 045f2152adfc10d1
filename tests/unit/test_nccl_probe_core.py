"""The platform-neutral NCCL probe: verdict rule, per-cluster cache, the multi-node gate."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from taobank.core import nccl_probe
from taobank import records
from taobank.cli.verbcli import nccl_report
from taobank.errors import TaoError


@pytest.mark.parametrize("result,verdict", [
    ({"state": "COMPLETE", "exit_code": None}, "ok"),
    ({"state": "ERROR", "exit_code": 124}, "hang/timeout"),
    ({"state": "CANCELED", "exit_code": 124}, "hang/timeout"),
    ({"state": "ERROR", "exit_code": 1}, "failed"),
    ({"state": "CANCELED", "exit_code": None, "never_ran": True}, "not-run"),
    ({"state": "ERROR", "exit_code": 127}, "program-missing"),
    ({"state": "CANCELED", "exit_code": None, "never_ran": True, "reason": "ImagePullBackOff"}, "pull-failed"),
    ({"state": "ERROR", "exit_code": None, "message": "image conversion job 7 ended FAILED: Could not process "
                                                     "JSON input"}, "pull-failed"),
])
def test_verdict(result, verdict):
    assert nccl_probe.verdict_of(result) == verdict


@pytest.mark.parametrize("verdict,names", [
    ("program-missing", ["exit 127", "--image"]), ("pull-failed", ["--ngc-pull-secret", "enroot-credentials"]),
    ("not-run", ["never started"]), ("failed", ["NCCL_SOCKET_IFNAME"]), ("hang/timeout", ["NCCL_SOCKET_IFNAME"]),
])
def test_the_advice_names_the_cause_and_blames_nccl_only_for_nccl(verdict, names):
    text = nccl_probe.advice_for(verdict, helper="tao_x.py", job_id="j1", network_advice="set NCCL_SOCKET_IFNAME")
    assert all(n in text for n in names) and ("NCCL_SOCKET_IFNAME" in text) == (verdict in ("failed", "hang/timeout"))
    assert nccl_probe.advice_for("ok", helper="h", job_id="j", network_advice="x") is None


def test_cache_is_mode_600_and_invisible_to_the_record_list(state_dir):
    nccl_probe.save_verdict("kubernetes", "ctx@https://a", {"verdict": "ok"})
    nccl_probe.save_verdict("kubernetes", "ctx@https://b", {"verdict": "failed"})
    nccl_probe.save_verdict("slurm", "login@site", {"verdict": "ok"})
    path = nccl_probe.cache_path()
    assert path.parent == records.state_dir()
    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text()) == {
        "kubernetes": {"ctx@https://a": {"verdict": "ok"}, "ctx@https://b": {"verdict": "failed"}},
        "slurm": {"login@site": {"verdict": "ok"}}}
    assert records.list_records() == []
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_damaged_cache_reads_as_empty(state_dir):
    nccl_probe.cache_path().write_text("[not a mapping")
    assert nccl_probe.load_cache() == {} and nccl_probe.cached("kubernetes", "x") is None
    nccl_probe.cache_path().write_text('["a list"]')
    assert nccl_probe.load_cache() == {}


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_an_ok_verdict_expires_after_the_pinned_age(state_dir):
    days = float(nccl_probe.pins.resolve("nccl_probe.max_age_days"))
    old = _stamp(datetime.now(timezone.utc) - timedelta(days=days + 1))
    nccl_probe.save_verdict("kubernetes", "c@s", {"verdict": "ok", "job_id": "j7", "checked_at": old})
    with pytest.raises(TaoError, match=f"the last ok probe \\(job j7, {old}\\) is older than"):
        nccl_probe.require_ok("kubernetes", "c@s", helper="tao_k8s.py", skip=False)
    assert not nccl_probe.fresh_ok({"verdict": "ok", "checked_at": "not a time"})
    assert nccl_probe.fresh_ok({"verdict": "ok", "checked_at": _stamp(datetime.now(timezone.utc))})


def test_gate_passes_on_a_cached_ok_for_this_cluster_only(state_dir):
    now = _stamp(datetime.now(timezone.utc))
    nccl_probe.save_verdict("slurm", "login@site", {"verdict": "ok", "job_id": "j1", "checked_at": now})
    assert nccl_probe.require_ok("slurm", "login@site", helper="tao_slurm.py", skip=False) == {
        "nccl_probe": "ok", "nccl_probe_job": "j1", "nccl_probe_at": now, "nccl_probe_backend": "nccl"}
    with pytest.raises(TaoError, match="no probe has run: run `tao_k8s.py nccl-probe` first"):
        nccl_probe.require_ok("kubernetes", "login@site", helper="tao_k8s.py", skip=False)
    with pytest.raises(TaoError, match="no probe has run"):
        nccl_probe.require_ok("slurm", "login@other", helper="tao_slurm.py", skip=False)


@pytest.mark.parametrize("verdict", ["failed", "hang/timeout", "not-run"])
def test_gate_refuses_a_bad_verdict_unless_skipped_knowingly(state_dir, verdict):
    nccl_probe.save_verdict("kubernetes", "c@s", {"verdict": verdict, "job_id": "j9"})
    with pytest.raises(TaoError, match=f"the last probe said {verdict} \\(job j9\\).*--skip-nccl-probe"):
        nccl_probe.require_ok("kubernetes", "c@s", helper="tao_k8s.py", skip=False)
    assert nccl_probe.require_ok("kubernetes", "c@s", helper="tao_k8s.py", skip=True) == {"nccl_probe": "skipped"}


def test_report_prints_one_line_and_exits_0_only_for_ok(capsys):
    ok = {"verdict": "ok", "cached": True, "checked_at": "2026-12-01T00:00:00Z", "job_id": "p-1", "cluster": "c@s"}
    assert nccl_report(ok, as_json=False) == 0
    assert capsys.readouterr().out == ("nccl-probe ok on c@s: cached from 2026-12-01T00:00:00Z (job p-1; --force "
                                       "re-probes); backend nccl proves NCCL over GPUs: an all-reduce between the "
                                       "nodes' GPUs\n")
    bad = {"verdict": "failed", "cached": False, "job_id": "p-2", "cluster": "c@s", "exit_code": 1, "advice": "fix it"}
    assert nccl_report(bad, as_json=True) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["verdict"] == "failed"
    assert out.err == "error: NCCL probe (nccl) failed on c@s (job p-2, exit code 1): fix it\n"


# ------------------------------------------------------------------ backends: nccl (default) and gloo-cpu
def test_a_gloo_verdict_opens_the_gate_only_where_the_cluster_accepts_it(state_dir, monkeypatch):
    """By default the gate wants NCCL over GPUs; a GPU-less cluster accepts gloo-cpu by saying so."""
    monkeypatch.delenv("TAO_NCCL_GATE_ACCEPTS", raising=False)
    now = _stamp(datetime.now(timezone.utc))
    nccl_probe.save_verdict("slurm", "c@s", {"verdict": "ok", "job_id": "g1", "checked_at": now, "backend": "gloo-cpu"})
    with pytest.raises(TaoError, match=r"used the gloo-cpu backend .*does not accept \(nccl: versions.yaml "
                                       r"nccl_probe.gate_accepts or \$TAO_NCCL_GATE_ACCEPTS\)"):
        nccl_probe.require_ok("slurm", "c@s", helper="tao_slurm.py", skip=False)
    monkeypatch.setenv("TAO_NCCL_GATE_ACCEPTS", "nccl,gloo-cpu")
    got = nccl_probe.require_ok("slurm", "c@s", helper="tao_slurm.py", skip=False)
    assert got["nccl_probe"] == "ok" and got["nccl_probe_backend"] == "gloo-cpu"
    assert nccl_probe.nccl_verdicts.proves("gloo-cpu") == \
        "gloo on CPU: the network path between nodes; NCCL over GPUs not proven"


@pytest.mark.parametrize("raw", ["gloo", "nccl,tcp", " , "])
def test_a_gate_override_naming_no_known_backend_is_one_line(state_dir, monkeypatch, raw):
    monkeypatch.setenv("TAO_NCCL_GATE_ACCEPTS", raw)
    with pytest.raises(TaoError, match="TAO_NCCL_GATE_ACCEPTS must list probe backends among nccl, gloo-cpu"):
        nccl_probe.nccl_verdicts.gate_accepts()


def test_a_cached_verdict_of_another_backend_is_not_reused(state_dir):
    now = _stamp(datetime.now(timezone.utc))
    nccl_probe.save_verdict("slurm", "c@s", {"verdict": "ok", "job_id": "g1", "checked_at": now, "backend": "gloo-cpu"})
    submitted = []
    views = iter([])  # noqa: F841

    def submit(spec):
        submitted.append(spec)
        raise TaoError("submitted")

    with pytest.raises(TaoError, match="submitted"):  # an NCCL probe runs: the gloo verdict proves less
        nccl_probe.run("slurm", "c@s", {}, submit, nodes=2, gpus_per_node=1, timeout=5, helper="h", advice="a")
    out = nccl_probe.run("slurm", "c@s", {}, submit, nodes=2, gpus_per_node=1, timeout=5, helper="h", advice="a",
                         backend="gloo-cpu")
    assert out["cached"] and out["backend"] == "gloo-cpu" and len(submitted) == 1


def test_no_gpu_is_its_own_verdict_with_advice_naming_gloo():
    res = {"state": "ERROR", "exit_code": nccl_probe.NO_GPU_EXIT, "backend": "nccl", "message": "exit 3"}
    assert nccl_probe.verdict_of(res) == "no-gpu"
    advice = nccl_probe.advice_for("no-gpu", helper="tao_slurm.py", job_id="p", network_advice="NCCL_X")
    assert "--backend gloo-cpu" in advice and "NCCL_X" not in advice
    assert nccl_probe.verdict_of({**res, "backend": "gloo-cpu"}) == "failed"


def test_gloo_script_runs_the_same_check_on_cpu_and_the_nccl_one_checks_for_a_gpu_first():
    s = nccl_probe.script_for("gloo-cpu")
    assert 'dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}"' in s and "cuda" not in s
    assert "dist.all_reduce(t)" in s and "ok = int(t.item()) == world" in s and "sys.exit(127)" in s
    assert nccl_probe.script_for("nccl", 45) == nccl_probe.SCRIPT.replace("RENDEZVOUS_S", "45")
    assert "RENDEZVOUS_S" not in s and "seconds=300)" in s  # late nodes are waited for: the default timeout
    pre = nccl_probe.gpu_precheck()
    assert pre.startswith("if command -v python3 >/dev/null 2>&1; then python3 -c ") and "|| exit $?; fi; " in pre
    with pytest.raises(TaoError, match="not one of nccl, gloo-cpu"):
        nccl_probe.script_for("mpi")
