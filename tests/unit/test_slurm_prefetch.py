"""submit --prefetch (taobank.platforms.slurm.prefetch): parsing, the exact commands rendered (Hugging Face and NGC cannot
be reached from here: these pins are their only test), the cap, credentials, and the submit's one SBATCH command."""
from __future__ import annotations

import base64
import io
import tarfile
from collections import Counter

import pytest
from hypothesis import given, strategies as st

from fakeproc import PLAIN_SUBMIT, find_answer, ok, sacct_row, slurm_record, squeue_row, sweep_answer  # noqa: F401
from taobank.core import platform
from taobank import records
from taobank.contract import SubmitOptions
from taobank.errors import TaoError
from taobank.platforms.slurm import prefetch, remote, status as slurm_status
from taobank import sources
from taobank.states import State

SPEC = {"network_arch": "dino", "action": "train", "container_runtime": "none", "num_gpus": 1,
        "command": ["python", "train.py", "--ckpt", "{prefetch}/ckpt/model.pth"]}
S3_ENV = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY000001", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value-never-shown-1234",
          "S3_ENDPOINT_URL": "http://10.0.0.1:9000"}


def items(**given: str) -> list[sources.Prefetch]:
    return sources.collect({"prefetch": given})


@pytest.mark.parametrize("source, scheme, parts", [
    ("s3://tao-bucket/models/a.pth", "s3", ("tao-bucket", "models/a.pth")),
    ("s3://tao-bucket/cfg/", "s3", ("tao-bucket", "cfg/")),
    ("hf://org/repo", "hf", ("org/repo", "", "")),
    ("hf://org/repo/sub/config.json@v1.0", "hf", ("org/repo", "sub/config.json", "v1.0")),
    ("hf_model://org/repo@main", "hf", ("org/repo", "", "main")),  # the seed's spelling
    ("ngc://nvidia/tao/dino:v1", "ngc", ("nvidia", "tao", "dino", "v1")),
    ("ngc://myorg/model:1.0", "ngc", ("myorg", "", "model", "1.0")),
])
def test_sources_parse(source, scheme, parts):
    assert sources.parse_source(source) == (scheme, parts)


@pytest.mark.parametrize("source", ["/abs/file", "http://x/y", "s3://B/k", "s3://bucket", "s3://bucket/",
                                    "s3://bucket/a b", "hf://org", "hf://org/../x", "hf://org/repo@-x",
                                    "ngc://org/model", "ngc://a/b/c/d:v", "s3://bucket/$(id)"])
def test_bad_sources_are_one_line_errors(source):
    with pytest.raises(TaoError) as err:
        sources.parse_source(source)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("dest", ["/etc/x", "../x", "a/../b", ".hidden", "-rf", "a//b", "a b", "", "x/"])
def test_bad_destinations_are_refused(dest):
    with pytest.raises(TaoError, match="relative path under the job's prefetch folder"):
        sources.check_dest(dest)


@given(st.text(max_size=40))
def test_any_destination_is_refused_or_stays_under_the_folder(dest):
    try:
        out = sources.check_dest(dest)
    except TaoError:
        return
    assert not out.startswith(("/", "-", ".")) and ".." not in out.split("/") and "\n" not in out


@given(st.text(max_size=60))
def test_any_source_parses_or_is_a_tao_error(text):
    try:
        scheme, parts = sources.parse_source(text)
    except TaoError:
        return
    assert scheme in sources.SCHEMES and all("\n" not in p and " " not in p for p in parts)


def test_overlapping_destinations_are_refused():
    with pytest.raises(TaoError, match="overlap"):
        items(**{"ckpt": "s3://bucket/a/", "ckpt/x": "s3://bucket/b"})


def test_exact_commands_of_each_source():
    s3f, s3p, hf, hf_repo, ngc, ngc2 = items(**{
        "a.pth": "s3://bucket/m/a.pth", "cfg": "s3://bucket/cfg/", "hf": "hf://org/repo/config.json@main",
        "hfr": "hf://org/repo", "n": "ngc://nvidia/tao/dino:v1", "n2": "ngc://myorg/model:2"})
    assert sources.commands(s3f, "/j/prefetch/a.pth") == [
        ["aws", "s3", "cp", "--only-show-errors", "s3://bucket/m/a.pth", "/j/prefetch/a.pth"]]
    assert sources.commands(s3p, "/j/prefetch/cfg") == [
        ["aws", "s3", "cp", "--only-show-errors", "--recursive", "s3://bucket/cfg/", "/j/prefetch/cfg/"]]
    assert sources.size_query(s3f) == ["aws", "s3api", "head-object", "--bucket", "bucket", "--key", "m/a.pth",
                                        "--query", "ContentLength", "--output", "text"]
    assert sources.size_query(s3p) == ["aws", "s3", "ls", "--recursive", "--summarize", "s3://bucket/cfg/"]
    assert sources.commands(hf, "/j/prefetch/hf") == [
        ["hf", "download", "org/repo", "config.json", "--revision", "main", "--local-dir", "/j/prefetch/hf"],
        ["huggingface-cli", "download", "org/repo", "config.json", "--revision", "main", "--local-dir",
         "/j/prefetch/hf"]]
    assert sources.commands(hf_repo, "/j/p")[0] == ["hf", "download", "org/repo", "--local-dir", "/j/p"]
    assert sources.size_query(hf) is None and sources.size_query(ngc) is None  # capped by ulimit -f and du
    assert sources.commands(ngc, "/j/prefetch/n") == [
        ["ngc", "registry", "model", "download-version", "nvidia/tao/dino:v1", "--dest", "/j/prefetch/n",
         "--org", "nvidia", "--team", "tao"]]
    assert sources.commands(ngc2, "/j/p") == [
        ["ngc", "registry", "model", "download-version", "myorg/model:2", "--dest", "/j/p", "--org", "myorg"]]


def _script(given: dict, env: dict, spec: dict | None = None) -> str:
    its = items(**given)
    j = prefetch.job("job-1", "/lustre/u/jobs/job-1", its, spec or {}, env, gpu_partition="gpu,gpu2",
                     account="acct", has_credentials=bool(sources.secrets_for(its, env)))
    return prefetch.render(j)


def test_rendered_script_holds_the_commands_the_cap_and_no_gpu_and_no_secret():
    text = _script({"ckpt/a.pth": "s3://bucket/m/a.pth", "hf": "hf://org/repo@main", "n": "ngc://nvidia/tao/dino:v1"},
                   {**S3_ENV, "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123", "NGC_KEY": "nvapi-" + "k" * 40},
                   {"prefetch_max_bytes": 5000})
    assert "#SBATCH --partition=gpu\n#SBATCH --account=acct\n" in text and "gres" not in text and "--gpus" not in text
    assert "#SBATCH --no-requeue" in text and "TAO_MAX_BYTES=5000\n" in text and "ulimit -f 5 " in text
    assert ("aws s3 cp --only-show-errors s3://bucket/m/a.pth /lustre/u/jobs/job-1/prefetch/ckpt/a.pth "
            "|| tao_fail") in text
    assert "hf download org/repo --revision main --local-dir /lustre/u/jobs/job-1/prefetch/hf" in text
    assert "huggingface-cli download org/repo --revision main" in text
    assert "ngc registry model download-version nvidia/tao/dino:v1 --dest /lustre/u/jobs/job-1/prefetch/n" in text
    assert "export S3_ENDPOINT_URL=http://10.0.0.1:9000" in text
    assert 'command aws --endpoint-url "$S3_ENDPOINT_URL"' in text
    assert 'export NGC_CLI_API_KEY="$NGC_KEY"' in text and "env/prefetch-credentials.sh" in text
    for value in list(S3_ENV.values())[:2] + ["hf_abcdefghijklmnopqrstuvwxyz0123", "nvapi-" + "k" * 40]:
        assert value not in text


def test_partition_comes_from_the_prefetch_setting_then_the_conversion_partition():
    its = items(a="s3://bucket/a")
    pick = lambda spec, env: prefetch.job("j", "/x/j", its, spec, env, gpu_partition="gpu", account=None,  # noqa: E731
                                          has_credentials=False).partition
    assert pick({"prefetch_partition": "cpu1"}, {"TAO_SLURM_PREFETCH_PARTITION": "cpu2"}) == "cpu1"
    assert pick({}, {"TAO_SLURM_PREFETCH_PARTITION": "cpu2", "TAO_SLURM_CONVERSION_PARTITION": "conv"}) == "cpu2"
    assert pick({}, {"TAO_SLURM_CONVERSION_PARTITION": "conv"}) == "conv"
    assert pick({}, {}) == "gpu"


def test_s3_needs_its_keys_exported_and_names_the_missing_one():
    with pytest.raises(TaoError, match="export AWS_SECRET_ACCESS_KEY") as err:
        sources.secrets_for(items(a="s3://bucket/a"), {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY000001"})
    assert "AKIAEXAMPLEKEY000001" not in str(err.value)
    assert sources.secrets_for(items(a="hf://org/repo"), {}) == {}  # a public repo needs no token
    assert sources.secrets_for(items(a="hf://org/repo"), {"HF_TOKEN": "t"}) == {"HF_TOKEN": "t"}


def test_bad_endpoint_is_refused():
    with pytest.raises(TaoError, match="S3_ENDPOINT_URL"):
        sources.plain_env(items(a="s3://bucket/a"), {"S3_ENDPOINT_URL": "http://x/;rm -rf /"})


def test_cap_defaults_to_versions_yaml_and_is_overridable():
    from taobank import pins

    assert prefetch.max_bytes({}) == int(pins.resolve("slurm.uploads.max_prefetch_bytes"))
    assert prefetch.max_bytes({"prefetch_max_bytes": 10}) == 10
    with pytest.raises(TaoError):
        prefetch.max_bytes({"prefetch_max_bytes": 0})


def test_cli_flag_parses_source_equals_dest():
    assert sources.parse_item("s3://bucket/k=v/model.pth=ckpt/model.pth") == ("ckpt/model.pth",
                                                                                "s3://bucket/k=v/model.pth")
    with pytest.raises(TaoError, match="SOURCE=DEST"):
        sources.parse_item("s3://bucket/key")


# ------------------------------------------------------------------ the submit (fake ssh)
def _staged(call) -> dict:
    tar = tarfile.open(fileobj=io.BytesIO(base64.b64decode(call.stdin)))
    return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}


def test_submit_stages_the_prefetch_job_and_sbatches_both_in_one_command(slurm, monkeypatch):
    for k, v in S3_ENV.items():
        monkeypatch.setenv(k, v)
    slurm.ssh("STAGE")
    slurm.ssh("FIND", find_answer())
    slurm.ssh("SBATCH", "@@prefetch 700\n701\n")
    spec = {**SPEC, "prefetch": {"ckpt/model.pth": "s3://bucket/m/model.pth"}}
    view = platform.get("slurm").submit(spec, SubmitOptions())
    assert Counter(slurm.scripts()) == PLAIN_SUBMIT  # no remote command more than a plain submit
    b = records.load(view.id)["backend"]
    assert (b["prefetch_job_id"], b["slurm_job_id"]) == ("700", "701")
    assert b["prefetch_log"] == f"{b['job_dir']}/slurm-logs/prefetch-700.out"
    sbatch = next(c for c in slurm.calls if c.script == "SBATCH")
    assert sbatch.args[4] == f"{b['job_dir']}/sbatch/prefetch_{view.id}.sbatch"
    files = _staged(next(c for c in slurm.calls if c.script == "STAGE"))
    creds = files[prefetch.CREDS_FILE]
    assert S3_ENV["AWS_SECRET_ACCESS_KEY"] in creds  # in the mode-600 file only (STAGE runs under umask 077)
    assert all(S3_ENV["AWS_SECRET_ACCESS_KEY"] not in " ".join(c.argv) for c in slurm.calls)
    assert storage_creds_absent(files)  # the training job gets no credentials file of its own
    job = files[f"sbatch/job_{view.id}.sbatch"]
    assert f"{b['job_dir']}/prefetch/ckpt/model.pth" in job and "AWS_SECRET" not in job


def storage_creds_absent(files: dict) -> bool:
    from taobank.platforms.slurm import storage

    return storage.CREDS_FILE not in files


def test_sbatch_script_submits_prefetch_held_and_depends_on_it():
    s = remote.SBATCH
    assert 'sbatch --parsable --hold --job-name="$3-prefetch" "$5"' in s
    assert 'deps=${deps:+$deps:}$pre' in s and 'dep="--dependency=afterok:$deps"' in s
    assert 'echo "@@prefetch $pre"' in s


def test_command_naming_prefetch_without_one_is_refused():
    from taobank.platforms.slurm import submit

    with pytest.raises(TaoError, match="has no prefetch"):
        submit.plan(SPEC, {}, need_secrets=False)


def test_failed_prefetch_makes_the_training_job_error_with_the_logs_reason():
    pending = slurm_status.verdict(State.PENDING, "DependencyNeverSatisfied", "PENDING")
    failed = {"state": "FAILED", "exit_code": "3:0"}
    v = slurm_status.with_prefetch(pending, failed, "700")
    assert v.state == State.ERROR and v.needs_log and v.prefetch_log and not v.convert_log
    log = ("tao: prefetch s3://b/big.pth -> big.pth\ntao: prefetch failed: s3://b/big.pth is 4096 bytes; with 0 bytes "
           "already fetched that passes the prefetch cap of 1000 bytes (...); removed /x; the training job will not "
           "start\n")
    v = slurm_status.with_prefetch(pending, failed, "700", log_tail=log)
    assert v.state == State.ERROR and v.err_class == "ERR_PROGRAM" and "\n" not in v.message
    assert v.message.startswith("prefetch job 700 ended FAILED") and "prefetch cap of 1000 bytes" in v.message
    running = slurm_status.with_prefetch(pending, {"state": "RUNNING"}, "700")
    assert running.state == State.PENDING and "waiting for prefetch job 700" in running.message


def test_cli_dry_run_shows_the_prefetch_job_too_and_needs_no_keys():
    import os
    import subprocess
    from pathlib import Path

    bank = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "TAO_SSH", "TAO_SLURM", "AWS_"))}
    res = subprocess.run([str(bank / "scripts" / "tao_slurm.py"), "submit", "--dry-run", "--runtime", "none",
                          "--results-base", "/lustre/u", "--job-id", "dino-train-00000000",
                          "--prefetch", "s3://bucket/pre/dino.pth=ckpt/dino.pth", "--prefetch-max-bytes", "4096",
                          "--", "cat", "{prefetch}/ckpt/dino.pth"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "cat /lustre/u/jobs/dino-train-00000000/prefetch/ckpt/dino.pth" in res.stdout
    assert "sbatch/prefetch_dino-train-00000000.sbatch ----" in res.stdout and "TAO_MAX_BYTES=4096" in res.stdout
    bad = subprocess.run([str(bank / "scripts" / "tao_slurm.py"), "submit", "--dry-run", "--runtime", "none",
                          "--prefetch", "s3://bucket/x=../etc/passwd", "--", "true"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert bad.returncode != 0 and "relative path under the job's prefetch folder" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_cancel_stops_the_prefetch_job_too_and_removes_its_credentials(slurm):
    rec = slurm_record(state="PENDING")
    jdir = rec["backend"]["job_dir"]
    records.mark(rec["id"], "PENDING", backend={"prefetch_job_id": "100", "staged_prefetch_secrets": True,
                                                "prefetch_log": f"{jdir}/slurm-logs/prefetch-100.out"})
    slurm.ssh("scancel", "")
    slurm.ssh("REMOVE")
    views, errors = platform.cancel("slurm", [rec["id"]])
    assert errors == [] and views[0].state == "CANCELED"
    assert sorted(c.words[1] for c in slurm.ssh_calls("scancel")) == ["100", "101"]  # the prefetch and the job
    (rm,) = [c for c in slurm.of("ssh") if c.script == "REMOVE"]
    assert rm.args == [f"{jdir}/{prefetch.CREDS_FILE}"]


def test_a_lost_sbatch_answer_adopts_the_job_and_its_prefetch(slurm, monkeypatch):
    for k, v in S3_ENV.items():
        monkeypatch.setenv(k, v)

    def find(call):
        return find_answer([squeue_row("701", "PENDING", call.args[0])] if slurm.count("SBATCH") else [])

    slurm.ssh("STAGE")
    slurm.ssh("FIND", find)
    slurm.ssh("SBATCH", "")  # the answer was lost
    slurm.ssh("ADOPT", "@@prefetch 700\n")
    view = platform.get("slurm").submit({**SPEC, "prefetch": {"ckpt/model.pth": "s3://bucket/m.pth"}}, SubmitOptions())
    b = records.load(view.id)["backend"]
    assert (b["slurm_job_id"], b["prefetch_job_id"]) == ("701", "700")
    adopt = next(c for c in slurm.calls if c.script == "ADOPT")
    assert adopt.args[-1] == "prefetch"  # releases the held prefetch job of the name
