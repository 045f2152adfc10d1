"""A dry run refuses what the submit refuses, before anything is contacted, made or shown.

The record's checks (a credential in ``--name``, the image or the results folder; a folder inside another job's)
run in every dry run, ``--check`` or not, and in the submit before its cluster checks (taobank.core.pipeline): the
same one line on every platform, the value never printed, no process run, no record."""
from __future__ import annotations

import pytest

from taobank import records
from taobank.contract import SubmitOptions
from taobank.core import pipeline, platform
from taobank.errors import TaoError

#: a name that looks like an NGC API key (made here, so no scanner of this repository flags the file)
TOKEN = "nvapi-" + "Zq8Xw3Lp9Rt2Vb6Nm4Kc7Hd1Fg5Js0Ya" * 2
NAME_REFUSED = "the job name/description (--name) looks like it carries a credential"
PASSWORD = "hunter2pass"
IMAGE = f"bob:{PASSWORD}@nvcr.io/nvidia/tao/tao-toolkit:6"

SLURM = ["tao_slurm.py", "submit", "--runtime", "none", "--results-base", "/lustre/u", "--num-gpus", "1", "--cpus", "1"]
K8S = ["tao_k8s.py", "submit", "--no-results", "--command", "echo hi"]
DOCKER = ["tao_docker.py", "submit", "--gpus", "0"]
PLATFORMS = ["slurm", "kubernetes", "docker"]

def _argv(name: str, tmp_path, *extra: str, image: str = "img:1") -> list[str]:
    if name == "slurm":
        return [*SLURM, "--image", image, *extra, "--", "true"]
    if name == "kubernetes":
        return [*K8S, "--image", image, *extra]
    return [*DOCKER, "--image", image, "--results-dir", str(tmp_path / "results"), *extra, "--", "true"]


@pytest.fixture()
def anywhere(slurm, monkeypatch, tmp_path):
    """The fake runner with each platform's settings: SLURM's login host, no DOCKER_HOST."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("TAO_DOCKER_ENGINE", raising=False)
    monkeypatch.setattr(platform.get("docker"), "engine", None)
    return slurm


def _refused_unseen(out, needle: str, secret: str) -> None:
    assert out.rc == 1 and len(out.err_lines) == 1 and needle in out.err, out
    assert secret not in out.err and secret not in out.out


@pytest.mark.parametrize("name", PLATFORMS)
@pytest.mark.parametrize("how", [(), ("--dry-run",), ("--dry-run", "--check"), ("--sweep", "a=1,2", "--dry-run"),
                                 ("--sweep", "a=1,2", "--dry-run", "--check")],
                         ids=["submit", "dry-run", "dry-run-check", "sweep-dry-run", "sweep-dry-run-check"])
def test_a_credential_in_the_name_is_refused_alike_before_anything_runs(anywhere, cli, tmp_path, name, how):
    out = cli(*_argv(name, tmp_path, "--name", f"coco {TOKEN}", *how))
    _refused_unseen(out, NAME_REFUSED, TOKEN)
    assert anywhere.calls == []  # no cluster, engine or kubectl call: refused before the checks contact one
    assert records.list_records() == []


@pytest.mark.parametrize("name", PLATFORMS)
@pytest.mark.parametrize("how", [(), ("--dry-run",), ("--dry-run", "--check")])
def test_an_image_with_a_password_is_refused_and_never_shown(anywhere, cli, tmp_path, name, how):
    """The preview used to print it (the sbatch script, the manifest, the docker command) while the submit
    refused it; the submit now refuses it before a pull or a check could put it on a command line."""
    out = cli(*_argv(name, tmp_path, *how, image=IMAGE))
    _refused_unseen(out, "image carries credentials", PASSWORD)
    assert anywhere.calls == [] and records.list_records() == []


@pytest.mark.parametrize("name", PLATFORMS)
def test_a_plain_name_passes_the_dry_run_and_is_not_contacted(anywhere, cli, tmp_path, monkeypatch, name):
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "state"))  # not made yet
    out = cli(*_argv(name, tmp_path, "--name", "dino coco baseline", "--dry-run"))
    assert out.rc == 0 and out.err_lines[0].startswith("dry run: nothing was contacted"), out
    assert anywhere.calls == [] and not (tmp_path / "state").exists()  # a dry run makes nothing, not even the record folder


def test_a_results_folder_inside_another_jobs_is_refused_by_the_plain_dry_run(anywhere, cli, tmp_path):
    rec = records.open_record("docker", "img:1", "dino", "train", "A", str(tmp_path / "results" / "{id}"))
    inner = cli(*DOCKER, "--image", "img:1", "--results-dir", rec["results_dir"], "--dry-run", "--", "true")
    assert inner.rc == 1 and f"lies inside job {rec['id']}'s folder" in inner.err and len(inner.err_lines) == 1
    assert anywhere.calls == [] and len(records.list_records()) == 1


# ------------------------------------------------------------------ the core: one check, before the cluster's
class Counting:
    """A platform that plans without a cluster and counts its checks and launches."""

    name = "docker"
    helper = "tao_docker.py"

    def __init__(self) -> None:
        self.checks = 0
        self.launches = 0

    def typed_spec(self, spec):
        from taobank.platforms.docker.spec import DockerSpec

        return DockerSpec.from_dict(spec)

    def typed_specs(self, specs):
        return [self.typed_spec(s) for s in specs]

    def plan_all(self, specs, opts, rec):
        from taobank.contract import Plan

        return [Plan(s, str(s.image), "dino", "train", "A", "/r/results/{id}") for s in specs]

    def cluster_key(self, plan):
        return "here"

    def check(self, plans, gate, batch):
        self.checks += 1

    def launch(self, plans, recs, batch):
        self.launches += 1
        raise AssertionError("launched")

    def preview(self, spec, opts):
        return "preview\n"

    def view(self, rec):
        from taobank.core.platform import JobView

        return JobView.from_record(rec)


@pytest.mark.parametrize("run", ["submit", "check", "plain"])
def test_the_core_refuses_the_record_before_the_platform_checks(state_dir, run):
    stand = Counting()
    spec = {"image": "img:1", "command": ["true"]}
    opts = SubmitOptions(description=TOKEN)
    with pytest.raises(TaoError, match="looks like it carries a credential") as err:
        if run == "submit":
            pipeline.submit(stand, [spec], opts)  # type: ignore[arg-type]
        else:
            pipeline.preview(stand, spec, opts, check=run == "check")  # type: ignore[arg-type]
    assert TOKEN not in str(err.value)
    assert (stand.checks, stand.launches) == (0, 0) and records.list_records() == []


def test_a_submit_judges_its_records_texts_and_folders_once(state_dir, monkeypatch):
    """The check before the cluster's and the opening after it share the scanner's answers (what the platform's
    checks may change, the backend, is judged again)."""
    from taobank.contract import Launch
    from taobank.records import writes

    stand = Counting()
    stand.launch = lambda plans, recs, batch: [Launch(f"c{i}", {}, "started") for i in range(len(plans))]
    calls: list[int] = []
    real = writes.check_results_dirs
    monkeypatch.setattr(writes, "check_results_dirs", lambda dirs: calls.append(len(dirs)) or real(dirs))
    done = pipeline.submit(stand, [{"image": "img:1", "command": ["true"]}] * 2,  # type: ignore[arg-type]
                           SubmitOptions(description="baseline"), trials=[{"a": "1"}, {"a": "2"}])
    assert calls == [2] and len(done.views) == 2 and stand.checks == 1
    assert [records.load(v.id)["description"] for v in done.views] == ["baseline", "baseline"]


def test_check_openings_refuses_what_open_records_refuses_and_stores_nothing(state_dir):
    good = records.Opening("img:1", "dino", "train", "A", "/r/results/{id}", description="baseline")
    bad = [records.Opening("img:1", "dino", "train", "A", "/r/results/{id}", description=f"x {TOKEN}"),
           records.Opening(IMAGE, "dino", "train", "A", "/r/results/{id}"),
           records.Opening("img:1", "dino", "train", "A", "/r/results/{id}", description="x" * 201),
           records.Opening("img:1", "dino", "train", "Z", "/r/results/{id}"),
           records.Opening("img:1", "dino", "train", "A", "/r/results/{id}", lineage={"parent": "not an id!"})]
    records.check_openings("docker", [good, good])
    assert records.list_records() == []
    for opening in bad:
        with pytest.raises(TaoError) as checked:
            records.check_openings("docker", [good, opening])
        with pytest.raises(TaoError) as opened:
            records.open_records("docker", [opening])
        assert str(checked.value) == str(opened.value) and TOKEN not in str(checked.value)
    assert records.list_records() == []
