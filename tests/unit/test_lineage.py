"""continue and --parent, the core's rules (taobank.campaign.lineage) over a stand-in platform: which checkpoint, which
refusals (one line, nothing created), what the new record names; and the one checkpoint table."""
from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from taobank.records import Record
from taobank import checkpoints, records
from taobank.core import jobfiles
from taobank.campaign import lineage
from taobank.contract import Plan, ResultFile, ResultsListing, ResultsLocation
from taobank.errors import TaoError
from taobank.core.platform import JobView
from taobank.platforms.kubernetes.spec import KubernetesSpec
from taobank.platforms.slurm.spec import SlurmSpec

KEY = "train.resume_training_checkpoint_path"


class Stand:
    """A platform that lists a fixed folder and records what it was asked to submit; its hooks take the typed spec
    (of the platform it stands in for)."""

    name = "slurm"
    spec_type: type = SlurmSpec

    def __init__(self, files: list[str], exists: bool = True) -> None:
        self.files = [ResultFile(p, 1, float(i)) for i, p in enumerate(files)]
        self.exists = exists
        self.submitted: list[tuple[dict, object]] = []

    def results_location(self, rec):
        return ResultsLocation(rec.results_dir, True)

    def list_results(self, rec, loc, *, status):
        return ResultsListing(loc.folder, self.files if self.exists else [], exists=self.exists)

    def lineage_access(self, spec, parent, folder):
        return replace(spec, inputs=[*(spec.inputs or []), folder])  # the folder reached: named in the spec

    def typed_spec(self, mapping):
        return self.spec_type.from_dict(mapping)

    def submit(self, spec, opts):
        self.submitted.append((spec, opts))
        rec = records.open_record("slurm", "img", "dino", spec.get("action", "train"), "A", "/l/results/{id}",
                                  lineage={"parent": opts.parent, "continues": opts.continues})
        return JobView.from_record(rec)

    def preview(self, spec, opts):
        return f"preview {spec.command}"

    def typed_specs(self, mappings):  # the contract's defaults: each spec typed, and planned, on its own
        return [self.typed_spec(m) for m in mappings]

    def plan_all(self, specs, opts, rec):
        return [Plan(spec, "img", "dino", str(spec.action or "train"), "A", "/l/results/{id}") for spec in specs]


@pytest.fixture()
def stand(state_dir, monkeypatch):
    made = Stand(["model_epoch_002.pth", "model_epoch_010.pth", "model_epoch_009.pth", "status.json",
                  "other/model_epoch_099.pth"])
    real = lineage.get

    def get(name):  # the stand, answering --queue as the named platform does (with its typed spec)
        made.with_queue, made.spec_type = real(name).with_queue, real(name).spec_type
        return made

    monkeypatch.setattr(lineage, "get", get)
    return made


def job(state: str = "CANCELED", action: str = "train", command=None) -> dict:
    rec = records.open_record("slurm", "img", "dino", action, "A", "/l/results/{id}")
    jobfiles.save_spec(rec["id"], {"action": action, "command": command or ["dino", "train", "-e", "s.yaml"]},
                   {"secret_env": ("NGC_KEY",), "namespace": None})
    if state != "PENDING":
        records.mark(rec["id"], "RUNNING")
        records.mark(rec["id"], state, err_class="ERR_PROGRAM" if state == "ERROR" else None)
    return records.load(rec["id"])


def test_continue_resumes_from_the_highest_epoch_and_names_the_job_it_continues(stand):
    old = job()
    view = lineage.continue_job("slurm", old["id"])
    spec, opts = stand.submitted[-1]
    want = f"{old['results_dir']}/model_epoch_010.pth"
    assert spec["command"] == ["dino", "train", "-e", "s.yaml", f"{KEY}={want}"]
    assert opts.continues == old["id"] and opts.secret_env == ("NGC_KEY",)
    assert records.load(view.id)["continues"] == old["id"] and view.extra["continues_from"] == want


def test_continue_from_a_named_checkpoint_replaces_an_earlier_override(stand):
    old = job(state="ERROR", command=["dino", "train", f"{KEY}=/x/model_epoch_001.pth"])
    lineage.continue_job(None, old["id"], checkpoint=f"{old['results_dir']}/model_epoch_002.pth")
    spec, _ = stand.submitted[-1]
    assert spec["command"] == ["dino", "train", f"{KEY}={old['results_dir']}/model_epoch_002.pth"]


@pytest.mark.parametrize("state,needle", [("COMPLETE", "nothing to continue"), ("PENDING", "cancel it first")])
def test_continue_refuses_a_job_that_is_not_over_or_succeeded(stand, state, needle):
    old = job(state=state)
    with pytest.raises(TaoError, match=needle) as err:
        lineage.continue_job("slurm", old["id"])
    assert stand.submitted == []
    if state == "COMPLETE":  # a finished training: how to train it further, with the network's own resume key
        assert (f"submit a train job with --parent {old['id']}, train.resume_training_checkpoint_path="
                "{parent.checkpoint} and a larger train.num_epochs") in str(err.value)


@pytest.mark.parametrize("named,needle", [
    ("/etc/passwd", "outside job"), ("model_epoch_777.pth", "no such file"), ("../x.pth", "not a path inside"),
    ("-rf", "not a path inside"), ("status.json", "not a TAO checkpoint")])
def test_a_bad_checkpoint_is_one_line_and_nothing_is_created(stand, named, needle):
    old = job()
    before = len(records.list_records())
    with pytest.raises(TaoError, match=needle) as err:
        lineage.continue_job("slurm", old["id"], checkpoint=named)
    assert "\n" not in str(err.value) and len(records.list_records()) == before and stand.submitted == []


def test_continue_refuses_gone_results_no_checkpoint_no_saved_spec_and_shell_text(stand, state_dir):
    stand.exists = False
    with pytest.raises(TaoError, match="is gone"):
        lineage.continue_job("slurm", job()["id"])
    stand.exists, stand.files = True, [ResultFile("status.json", 1, 0.0)]
    with pytest.raises(TaoError, match="left no checkpoint"):
        lineage.continue_job("slurm", job()["id"])
    stand.files = [ResultFile("model_epoch_001.pth", 1, 0.0)]
    with pytest.raises(TaoError, match="names a checkpoint already"):
        lineage.continue_job("slurm", job(command=f"dino train {KEY}=/x/model_epoch_000.pth")["id"])
    bare = records.open_record("slurm", "img", "dino", "train", "A", "/l/results/{id}")
    records.mark(bare["id"], "CANCELED")
    with pytest.raises(TaoError, match="no saved spec"):
        lineage.continue_job("slurm", bare["id"])
    with pytest.raises(TaoError, match="only train jobs continue"):
        lineage.continue_job("slurm", job(action="evaluate")["id"])
    assert stand.submitted == []


def test_shell_text_is_continued_with_the_override_appended_as_a_quoted_word(stand):
    old = job(command="cd /work && dino train -e 's p.yaml'")
    lineage.continue_job("slurm", old["id"])
    spec, _ = stand.submitted[-1]
    assert spec["command"] == f"cd /work && dino train -e 's p.yaml' {KEY}={old['results_dir']}/model_epoch_010.pth"


def test_a_dry_run_creates_nothing(stand):
    old = job()
    before = len(records.list_records())
    assert lineage.continue_job("slurm", old["id"], dry_run=True).startswith("preview [")
    assert len(records.list_records()) == before


# ------------------------------------------------------------------ --parent
def test_parent_placeholders_are_filled_and_the_folder_reached(stand):
    parent = job(state="COMPLETE")
    folder = parent["results_dir"]
    child = lineage.with_parent("slurm", {"command": ["eval", "-e", "s.yaml", "evaluate.checkpoint={parent.checkpoint}"],
                                          "env": {"IN": "{parent.results_dir}/x"}}, parent["id"])
    assert child["command"][-1] == f"evaluate.checkpoint={folder}/model_epoch_010.pth"
    assert child["env"]["IN"] == f"{folder}/x" and child["inputs"] == [folder]


@pytest.mark.parametrize("case,needle", [("missing", "no such job record"), ("k8s", "is a kubernetes job"),
                                         ("running", "not COMPLETE"), ("unknown", "unknown placeholder")])
def test_parent_refusals_are_one_line(stand, case, needle):
    if case == "missing":
        pid = "dino-train-00000000"
    elif case == "k8s":
        pid = records.open_record("kubernetes", "img", "dino", "train", "A", "/r/{id}")["id"]
    else:
        pid = job(state="COMPLETE" if case == "unknown" else "PENDING")["id"]
    with pytest.raises(TaoError, match=needle) as err:
        lineage.with_parent("slurm", {"command": ["x", "{parent.best}" if case == "unknown" else "y"]}, pid)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("extra,needle", [
    ({"imag": "x"}, "invalid job spec: field (top level): unknown field 'imag' (did you mean 'image'?)"),
    ({"nodes": None}, "invalid job spec: field nodes: null is not a value (leave the key out)")])
def test_a_childs_spec_is_refused_in_the_schemas_own_words_before_its_parent_is_reached(stand, extra, needle):
    """The platform's hook types the child's spec before the submit's schema check: the same refusal, and a null
    the submit would refuse is not dropped on the way (to_dict leaves nulls out)."""
    parent = job(state="COMPLETE")
    with pytest.raises(TaoError) as err:
        lineage.with_parent("slurm", {"command": ["eval", "{parent.results_dir}"], **extra}, parent["id"])
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert stand.submitted == []


def test_an_incomplete_parent_when_asked_and_a_missing_checkpoint(stand):
    pid = job(state="ERROR")["id"]
    assert lineage.with_parent("slurm", {"command": ["x"]}, pid, allow_incomplete=True)["command"] == ["x"]
    stand.files = []
    with pytest.raises(TaoError, match="left no checkpoint"):
        lineage.with_parent("slurm", {"command": ["{parent.checkpoint}"]}, pid, allow_incomplete=True)
    stand.exists = False
    with pytest.raises(TaoError, match="is gone"):
        lineage.with_parent("slurm", {"command": ["x"]}, pid, allow_incomplete=True)


def test_the_chain_names_every_link(stand):
    first = job()
    view = lineage.continue_job("slurm", first["id"])
    records.mark(view.id, "RUNNING")
    records.mark(view.id, "COMPLETE")
    child = records.open_record("slurm", "img", "dino", "evaluate", "A", "/l/{id}", lineage={"parent": view.id})
    assert [r["id"] for r in lineage.chain(child["id"])] == [first["id"], view.id, child["id"]]


def test_lineage_fields_are_job_ids(state_dir):
    with pytest.raises(TaoError, match="not a job id"):
        records.open_record("slurm", "img", "dino", "train", "A", "/l/{id}", lineage={"parent": "../x"})
    with pytest.raises(TaoError, match="unknown"):
        records.open_record("slurm", "img", "dino", "train", "A", "/l/{id}", lineage={"grandparent": "a"})


# ------------------------------------------------------------------ the table
def test_latest_prefers_epochs_then_a_copied_latest_file():
    files = [ResultFile("train/model_epoch_1000.pth", 1, 1.0), ResultFile("train/model_epoch_999.pth", 1, 2.0),
             ResultFile("x/model_epoch_5000.pth", 1, 3.0), ResultFile("dino_latest.pth", 1, 9.0)]
    assert checkpoints.latest(files, "train").path == "train/model_epoch_1000.pth"
    assert checkpoints.latest([ResultFile("dino_latest.pth", 1, 9.0)], "train").path == "dino_latest.pth"
    assert checkpoints.latest([ResultFile("model.onnx", 1, 1.0)], "train") is None


@given(st.lists(st.sampled_from([f"{KEY}=a", "x", "-e", f"{KEY}=", "y=1"]), max_size=6))
def test_with_resume_leaves_exactly_one_override_last(argv):
    out = checkpoints.with_resume(argv, "/r/model_epoch_003.pth")
    assert [a for a in out if a.startswith(KEY + "=")] == [f"{KEY}=/r/model_epoch_003.pth"] and out[-1].startswith(KEY)
    assert [a for a in out[:-1]] == [a for a in argv if not a.startswith(KEY + "=")]


def test_the_shell_finder_takes_the_latest_link_else_the_highest_epoch(tmp_path: Path):
    (tmp_path / "train").mkdir()
    for e in (2, 999, 1000):
        (tmp_path / "train" / f"model_epoch_{e:03d}.pth").write_text("x")

    def found() -> str:
        script = checkpoints.shell_finder() + f'tao_latest_checkpoint "{tmp_path}" train'
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True).stdout.strip()

    assert found() == f"{tmp_path}/train/model_epoch_1000.pth"
    (tmp_path / "dino_model_latest.pth").symlink_to("train/model_epoch_002.pth")
    assert found() == f"{tmp_path}/train/model_epoch_002.pth"  # the link moves only after a save completed
    (tmp_path / "train" / "model_epoch_002.pth").unlink()  # a dangling link is ignored
    assert found() == f"{tmp_path}/train/model_epoch_1000.pth"


def test_list_shows_the_parent_and_show_prints_the_chain(stand, cli):
    first = job()
    view = lineage.continue_job("slurm", first["id"])
    listed = cli("tao_jobs.py", "list")
    header, *rows = listed.out.splitlines()
    assert "ATTEMPT  PARENT" in header
    assert any(r.startswith(view.id) and f" {first['id']} " in r for r in rows)
    shown = cli("tao_job_record.py", "show", view.id, "--lineage")
    assert shown.rc == 0 and shown.out.splitlines() == [f"{first['id']}  CANCELED  dino/train",
                                                        f"{view.id}  PENDING  dino/train  continues {first['id']}"]
    missing = cli("tao_jobs.py", "continue", "dino-train-99999999")
    assert missing.rc == 1 and len(missing.err_lines) == 1


#: a finished training job whose folder /r/job the tests of --from read
_REC = Record(id="dino-train-1a2b3c4d", platform="slurm", state="COMPLETE", image="i", network_arch="dino",
              action="train", results_dir="/r/job", backend={}, transitions=(), attempt=1, created_at="",
              updated_at="")


@given(st.text(max_size=40))
def test_any_from_text_is_a_file_of_the_folder_or_one_line(named):
    rec = _REC
    files = [ResultFile("model_epoch_001.pth", 1, 0.0), ResultFile("train/model_epoch_002.pth", 1, 0.0)]
    try:
        got = lineage._checkpoint(rec, ResultsListing("/r/job", files), "/r/job", named)
    except TaoError as exc:
        assert "\n" not in str(exc)
    else:
        assert got in ("/r/job/model_epoch_001.pth", "/r/job/train/model_epoch_002.pth")


def test_a_spec_holding_a_credential_is_never_kept(state_dir):
    rec = records.open_record("slurm", "img", "dino", "train", "A", "/l/{id}")
    jobfiles.save_spec(rec["id"], {"command": ["x"], "env": {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}})
    with pytest.raises(TaoError, match="spec was not kept"):
        jobfiles.load_spec(rec["id"])


def test_parent_checkpoint_best_by_a_kpi(stand):
    rows = [f'{{"epoch": {e}, "status": "RUNNING", "kpi": {{"val_loss": {v}}}}}' for e, v in ((2, 0.5), (9, 0.2), (10, 0.3))]
    listing = stand.list_results

    def with_status(rec, loc, *, status):
        out = listing(rec, loc, status=status)
        out.status_files = {"status.json": "\n".join(rows) + "\n"} if status else {}
        return out

    stand.list_results = with_status
    parent = job(state="COMPLETE")
    child = lineage.with_parent("slurm", {"command": ["{parent.checkpoint}"]}, parent["id"], kpi="val_loss")
    assert child["command"] == [f"{parent['results_dir']}/model_epoch_009.pth"]
    with pytest.raises(TaoError, match="it has val_loss"):  # a misspelt KPI names the ones there are
        lineage.with_parent("slurm", {"command": ["x"]}, parent["id"], kpi="nope_loss")
    stand.files = [f for f in stand.files if "009" not in f.path]  # the best epoch left no checkpoint
    with pytest.raises(TaoError, match="nothing was submitted"):
        lineage.with_parent("slurm", {"command": ["{parent.checkpoint}"]}, parent["id"], kpi="val_loss")


# ------------------------------------------------------------------ results in object storage
class RemoteStand(Stand):
    """Results under an s3:// prefix: the platform downloads what a new job uses (``lineage_fetch``: what it was
    asked to fetch and to drop is kept in ``fetches``)."""

    spec_type = KubernetesSpec  # a spec with args, as a Kubernetes tier C job's

    def __init__(self, files: list[str]) -> None:
        super().__init__(files)
        self.fetches: list[tuple[dict, list]] = []

    def lineage_access(self, spec, parent, folder):
        raise AssertionError("an S3 folder is never mounted")

    def lineage_fetch(self, spec, job, folder, files, replaces=()):
        """As Kubernetes does: the downloads join the spec's ``s3_inputs`` (what the submitted spec must carry)."""
        self.fetches.append(({k: f"{folder}/{v}" for k, v in files.items()}, list(replaces)))
        inputs = [{"uri": f"{folder}/{v}", "path": f"/stage/from-{job.id}/{v}"} for v in files.values()]
        return (replace(spec, s3_inputs=[i for i in spec.s3_inputs or [] if i["path"] not in replaces] + inputs),
                {k: f"/stage/from-{job.id}/{v}" for k, v in files.items()})


@pytest.fixture()
def remote(state_dir, monkeypatch):
    made = RemoteStand(["model_epoch_002.pth", "model_epoch_010.pth", "status.json"])
    real = lineage.get

    def get(name):  # the stand, answering --queue as the named platform does
        made.with_queue = real(name).with_queue
        return made

    monkeypatch.setattr(lineage, "get", get)
    return made


def s3_job(state: str) -> dict:
    rec = records.open_record("slurm", "img", "dino", "train", "C", "s3://b/runs/{id}")
    jobfiles.save_spec(rec["id"], {"action": "train", "args": ["dino", "train", "-e", "s.yaml"]}, {})
    records.mark(rec["id"], "RUNNING")
    records.mark(rec["id"], state, err_class="ERR_PROGRAM" if state == "ERROR" else None)
    return records.load(rec["id"])


@pytest.mark.parametrize("named", [None, "model_epoch_002.pth", "URI"])
def test_continue_from_s3_downloads_the_checkpoint_and_resumes_from_the_copy(remote, named):
    old = s3_job("ERROR")
    folder = old["results_dir"]
    chosen = "model_epoch_010.pth" if named is None else "model_epoch_002.pth"
    view = lineage.continue_job(None, old["id"], checkpoint=f"{folder}/{chosen}" if named == "URI" else named)
    spec, _ = remote.submitted[-1]
    local = f"/stage/from-{old['id']}/{chosen}"
    assert spec["args"][-1] == f"{KEY}={local}" and remote.fetches[-1][0] == {"checkpoint": f"{folder}/{chosen}"}
    assert spec["s3_inputs"] == [{"uri": f"{folder}/{chosen}", "path": local}]  # the download travels with the job
    assert view.extra["continues_from"] == local and remote.fetches[-1][1] == []


def test_continuing_a_continued_s3_job_drops_the_download_it_resumed_from(remote):
    old = s3_job("ERROR")
    jobfiles.save_spec(old["id"], {"action": "train", "args": ["dino", "train", f"{KEY}=/stage/from-x/model_epoch_001.pth"],
                                   "s3_inputs": [{"uri": "s3://b/x/model_epoch_001.pth",
                                                  "path": "/stage/from-x/model_epoch_001.pth"}]}, {})
    lineage.continue_job(None, old["id"])
    spec, _ = remote.submitted[-1]
    assert remote.fetches[-1][1] == ["/stage/from-x/model_epoch_001.pth"]
    assert [i["path"] for i in spec["s3_inputs"]] == [f"/stage/from-{old['id']}/model_epoch_010.pth"]  # old one gone
    assert spec["args"] == ["dino", "train", f"{KEY}=/stage/from-{old['id']}/model_epoch_010.pth"]


def test_an_s3_parents_checkpoint_is_downloaded_and_its_folder_cannot_be_named(remote):
    parent = s3_job("COMPLETE")
    child = lineage.with_parent("slurm", {"args": ["eval", "evaluate.checkpoint={parent.checkpoint}"]}, parent["id"])
    assert child["args"][-1] == f"evaluate.checkpoint=/stage/from-{parent['id']}/model_epoch_010.pth"
    assert remote.fetches[-1][0] == {"{parent.checkpoint}": f"{parent['results_dir']}/model_epoch_010.pth"}
    lineage.with_parent("slurm", {"args": ["eval"]}, parent["id"])
    assert remote.fetches[-1][0] == {}  # nothing named: nothing fetched
    with pytest.raises(TaoError, match=r"no job can mount: \{parent.results_dir\} has no folder") as err:
        lineage.with_parent("slurm", {"args": ["eval", "{parent.results_dir}/x"]}, parent["id"])
    assert "\n" not in str(err.value)


def test_a_platform_that_cannot_download_refuses_in_one_line(state_dir):
    from taobank.core import platform

    with pytest.raises(TaoError, match="slurm jobs cannot download them: fetch the checkpoint") as err:
        platform.get("slurm").lineage_fetch(SlurmSpec(), _REC, "s3://b/r/dino-train-1", {"c": "m.pth"})
    assert str(err.value).startswith(f"job {_REC.id} keeps its results in s3://") and "\n" not in str(err.value)


@pytest.mark.parametrize("named", ["//r/job/model_epoch_001.pth", "/r//job/./train/model_epoch_002.pth",
                                   "///r/job/model_epoch_001.pth"])
def test_from_an_absolute_path_with_doubled_slashes_is_the_same_file(named):
    """Issue 38 item 11: ``//abs/path`` was cut one character too far and refused."""
    rec = _REC
    files = [ResultFile("model_epoch_001.pth", 1, 0.0), ResultFile("train/model_epoch_002.pth", 1, 0.0)]
    got = lineage._checkpoint(rec, ResultsListing("/r/job", files), "/r/job", named)
    assert got == "/r/job/" + named.rsplit("/job/", 1)[1].lstrip("./")


@pytest.mark.parametrize("named", ["/elsewhere/" + "a" * 5000, "b" * 5000 + ".pth", "c/" * 2500 + "x.pth"])
def test_a_long_from_value_is_cut_in_the_error(named):
    rec = _REC
    with pytest.raises(TaoError) as err:
        lineage._checkpoint(rec, ResultsListing("/r/job", []), "/r/job", named)
    assert len(str(err.value)) < 400 and "\n" not in str(err.value)


def test_continue_with_more_time_sets_the_platforms_own_limit(stand, monkeypatch):
    """``continue --time-*``: the new job's spec carries the limit as its platform spells it; Docker, which has
    none, refuses before anything is read or made."""
    from taobank.core import platform as core

    old = job(state="ERROR", command=["dino", "train", "-e", "s.yaml"])
    jobfiles.save_spec(old["id"], {"action": "train", "command": ["dino", "train"], "time_hours": 1,
                               "timeout_hours": 0.9})
    slurm = core.get("slurm")
    monkeypatch.setattr(stand, "with_time_limit", slurm.with_time_limit, raising=False)
    lineage.continue_job("slurm", old["id"], time_minutes=150)
    spec, _ = stand.submitted[-1]
    assert spec["time_minutes"] == 150 and "time_hours" not in spec and "timeout_hours" not in spec
    assert core.get("kubernetes").with_time_limit(KubernetesSpec(image="x"), 2.5) == \
        KubernetesSpec(image="x", active_deadline_seconds=150)
    monkeypatch.setattr(stand, "with_time_limit", core.get("docker").with_time_limit, raising=False)
    before = len(stand.submitted)
    with pytest.raises(TaoError, match="docker jobs have no time limit: continue without --time-hours"):
        lineage.continue_job("slurm", old["id"], time_minutes=60)
    with pytest.raises(TaoError, match="positive number"):
        lineage.continue_job("slurm", old["id"], time_minutes=-1)
    assert len(stand.submitted) == before


def test_continue_time_flags_reach_the_core_as_minutes(cli, stand):
    old = job(state="ERROR")
    out = cli("tao_jobs.py", "continue", old["id"], "--time-hours", "2", "--time-minutes", "5")
    assert out.rc == 2 and "not allowed with" in out.err
    out = cli("tao_jobs.py", "continue", old["id"], "--time-hours", "abc")
    assert out.rc == 2 and len(out.err_lines) == 1


def test_continue_queue_moves_a_kubernetes_job_to_another_queue_and_is_refused_elsewhere(stand):
    from taobank.errors import UsageError

    with pytest.raises(UsageError, match="--queue is not an option of slurm jobs"):
        lineage.continue_job("slurm", job()["id"], queue="team-b")
    assert stand.submitted == []
    rec = records.open_record("kubernetes", "img", "dino", "train", "A", "/l/results/{id}")
    jobfiles.save_spec(rec["id"], {"action": "train", "command": ["dino", "train", "-e", "s.yaml"], "queue": "team-a"}, {})
    records.mark(rec["id"], "RUNNING")
    records.mark(rec["id"], "CANCELED")
    lineage.continue_job(None, rec["id"])
    assert stand.submitted[-1][0]["queue"] == "team-a"  # its own queue by default
    lineage.continue_job(None, rec["id"], queue="team-b")
    assert stand.submitted[-1][0]["queue"] == "team-b"
