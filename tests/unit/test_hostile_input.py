"""Hostile input: record values never become options, paths cannot climb out, no value is echoed,
no traceback reaches the user."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from taobank import envfile, names, records
from taobank.cli.entry import run_main
from taobank.errors import TaoError
from taobank.paths import is_under

BANK = Path(__file__).resolve().parents[2]


def _rec(**backend) -> records.Record:
    """A running record whose backend holds ``backend`` as read back (the checks under test decide)."""
    return records.Record(id="dino-train-aaaaaaaa", platform="slurm", state="RUNNING", image="i", network_arch="dino",
                          action="train", results_dir="/r", backend=backend, transitions=(), attempt=1,
                          created_at="", updated_at="")


@pytest.mark.parametrize("key,value", [
    ("slurm_job_id", "--user=u"), ("slurm_job_id", "12 34"), ("slurm_job_id", "-1"), ("slurm_job_id", "\u00b2"),
    ("script", "--wrap=id"), ("script", "relative/x.sbatch"), ("log_dir", "/a/../../etc"),
    ("job_dir", "/x\n/y"), ("job_name", "--all"), ("chain_attempt", "7x"), ("max_attempts", "2; rm"),
])
def test_slurm_record_values_are_checked_before_argv(key, value):
    from taobank.platforms.slurm import facts as slurm_facts

    with pytest.raises(TaoError, match=f"backend.{key} that is not") as exc:
        slurm_facts.SlurmFacts.of(_rec(**{key: value}))
    assert value not in str(exc.value)


@pytest.mark.parametrize("key,value", [
    ("name", "--all-namespaces"), ("namespace", "kube-system --all"), ("uid", "--force"),
    ("context", "--kubeconfig=/tmp/x"), ("nodes", "2; rm"),
])
def test_kubernetes_record_values_are_checked_before_argv(key, value):
    from taobank.platforms.kubernetes.kubectl import BACKEND_KINDS

    with pytest.raises(TaoError, match=f"backend.{key} that is not"):
        names.checked(_rec(**{key: value}), BACKEND_KINDS)


def test_good_record_values_pass():
    from taobank.platforms.kubernetes.kubectl import BACKEND_KINDS
    from taobank.platforms.slurm import facts as slurm_facts

    b = slurm_facts.SlurmFacts.of(_rec(slurm_job_id=123, script="/lustre/j/x.sbatch", job_name="dino-train-aaaaaaaa",
                                       staged_secrets=True, chain_attempt=2))
    assert (b.slurm_job_id, b.script, b.folder, b.staged_secrets, b.chain_attempt, b.infra_retries) == \
        ("123", "/lustre/j/x.sbatch", "", True, 2, True)  # numbers as text on a command line; unset flags default
    good = {"name": "dino-train-aaaaaaaa", "namespace": "tao-jobs", "uid": "1f0c3c2e-8d0b-4c43-9f4e-1d5c1a6b7e11",
            "context": "arn:aws:eks:us-east-1:123:cluster/gpu", "nodes": 2}
    assert names.checked(_rec(**good), BACKEND_KINDS) == {**good, "nodes": "2"}  # numbers come back as text


@pytest.mark.parametrize("path,root,inside", [
    ("/tao-staging/x", "/tao-staging", True), ("/tao-staging", "/tao-staging", True),
    ("/tao-staging/../var/run/x", "/tao-staging", False), ("/tao-stagingX/y", "/tao-staging", False),
    ("relative", "/", False), ("//tao-staging//a", "/tao-staging/", True), ("/etc", "/", True),
])
def test_is_under_normalises_and_refuses_dot_dot(path, root, inside):
    assert is_under(path, root) is inside


def test_tier_c_output_path_cannot_climb_out_of_staging():
    from taobank.platforms.kubernetes import render

    spec = {"image": "busybox", "command": "true", "storage_tier": "C", "results_dir": "s3://b/p",
            "s3_outputs": [{"path": "/tao-staging/../var/run/secrets/x", "uri": "s3://b/p/x"}]}
    with pytest.raises(TaoError, match="must be under staging_dir"):
        render.render_manifests(spec, job_id="dino-train-aaaaaaaa", namespace="default")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_a_bad_variable_name_is_never_echoed(name):
    if envfile.is_name(name):
        return
    with pytest.raises(TaoError) as exc:
        envfile.check_name(name, "--secret-env")
    assert name not in str(exc.value) or len(name) < 3  # short names can occur in the fixed text


def test_registry_is_a_host_name_not_a_pattern(monkeypatch):
    from taobank.platforms.slurm import preflight

    for bad in (".*", "nvcr.io/x", "a b", "-rf", "^machine"):
        with pytest.raises(TaoError, match="must be a host name"):
            preflight.install_enroot_credentials(bad, "k", conn=object())


def test_enroot_credentials_replace_only_the_exact_registry_line(tmp_path):
    """The remote script removes the line of exactly that registry (no regex), keeps the others."""
    from taobank.platforms.slurm import remote

    home = tmp_path
    creds = home / ".config" / "enroot" / ".credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text("machine nvcr.io login a password old\nmachine nvcrXio login b password keep\n"
                     "machine ghcr.io login c password keep2\n")
    subprocess.run(["sh", "-c", remote.ENROOT_CREDS, "tao", "nvcr.io"], input="machine nvcr.io login $oauthtoken password new\n",
                   text=True, check=True, env={**os.environ, "HOME": str(home)})
    lines = creds.read_text().splitlines()
    assert "machine nvcr.io login $oauthtoken password new" in lines and "old" not in creds.read_text()
    assert "machine nvcrXio login b password keep" in lines and "machine ghcr.io login c password keep2" in lines
    subprocess.run(["sh", "-c", remote.ENROOT_CREDS, "tao", ".*"], input="machine .* login x password y\n",
                   text=True, check=True, env={**os.environ, "HOME": str(home)})
    assert len(creds.read_text().splitlines()) == 4  # '.*' removed nothing of the others
    assert creds.stat().st_mode & 0o777 == 0o600


def test_materialized_config_is_private(tmp_path):
    import json

    req = tmp_path / "req.json"
    req.write_text(json.dumps({"backend": "kubernetes", "image": "img", "mode": "config",
                               "argv": ["dino", "train", "-e", "{config_path}"], "config": {"lr": 0.1},
                               "results_dir": "/results"}))
    out = tmp_path / "cfg.yaml"
    res = subprocess.run([sys.executable, str(BANK / "scripts" / "render_k8s_job.py"), "--request", str(req),
                          "--materialize-config", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert out.stat().st_mode & 0o777 == 0o600 and "lr: 0.1" in out.read_text()


@pytest.mark.parametrize("code,fragment", [(errno.ENOSPC, "free some space"), (errno.EROFS, "read-only"),
                                           (errno.EPERM, "immutable"), (errno.EACCES, "permissions")])
def test_os_errors_reach_the_user_as_one_line(code, fragment, capsys):
    def main(argv):
        raise OSError(code, os.strerror(code), "/state/x.json")

    with pytest.raises(SystemExit) as exc:
        run_main(main, [])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_encoding_errors_reach_the_user_as_one_line(capsys):
    def main(argv):
        "\udcff".encode("utf-8")

    with pytest.raises(SystemExit) as exc:
        run_main(main, [])
    assert exc.value.code == 1 and "UTF-8" in capsys.readouterr().err


def test_lone_surrogates_and_forged_lines_in_a_record(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "s"))
    with pytest.raises(TaoError, match="not valid text"):
        records.open_record("slurm", "img\udcff", "dino", "train", "A", "/r")
    rec = records.open_record("slurm", "img", "dino", "train", "A", "/r")
    records.mark(rec["id"], "RUNNING", message="ok\nstate: COMPLETE\nerr_class: none")
    res = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_job_record.py"), "show", rec["id"]],
                         capture_output=True, text=True, env={**os.environ, "TAO_STATE_DIR": str(tmp_path / "s")})
    assert res.returncode == 0
    assert [line for line in res.stdout.splitlines() if line.startswith("state:")] == ["state: RUNNING"]


@pytest.mark.parametrize("args", [["status", "--watch", "--interval", "0"], ["status", "--watch", "--interval", "-1"],
                                  ["logs", "dino-train-aaaaaaaa", "--tail", "0"]])
def test_bad_numbers_are_usage_errors(args, tmp_path):
    for helper in ("tao_k8s.py", "tao_slurm.py", "tao_jobs.py"):
        res = subprocess.run([sys.executable, str(BANK / "scripts" / helper), *args], capture_output=True, text=True,
                             env={**os.environ, "TAO_STATE_DIR": str(tmp_path / "s")}, timeout=60)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (helper, res.stderr)


def test_a_directory_as_secrets_file_is_one_line(tmp_path):
    with pytest.raises(TaoError, match="is a directory"):
        envfile.read(tmp_path, what="secrets file", private=True)
    bad = tmp_path / "latin1.env"
    bad.write_bytes(b"KEY=caf\xe9\n")
    bad.chmod(0o600)
    with pytest.raises(TaoError, match="not UTF-8"):
        envfile.read(bad, private=True)
