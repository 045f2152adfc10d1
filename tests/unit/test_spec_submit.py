"""The spec check of a submit (taobank.tao_spec_gate through pipeline.check_specs), above the platform contract.

Each platform only says where a spec file the command names is readable here; the check, its lines and the
opt-out are the core's. Nothing here contacts a cluster: the refusal comes before any plan.
"""
from __future__ import annotations

import pytest

from taobank.core import pipeline, platform
from taobank import tao_spec_gate, tao_spec_schema
from taobank.contract import Gate, SubmitOptions
from taobank.errors import TaoError


@pytest.fixture()
def template(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    path = folder / "train.yaml"
    path.write_text(tao_spec_schema.template("dino", "train"), encoding="utf-8")
    return path


def job(*words: str, **kw) -> dict:
    return {"network_arch": "dino", "action": "train", "command": ["dino", "train", *words], **kw}


def refused(name: str, specs_: list[dict], opts: SubmitOptions | None = None) -> tao_spec_gate.SpecRefused:
    with pytest.raises(tao_spec_gate.SpecRefused) as got:
        pipeline.check_specs(platform.get(name), specs_, opts or SubmitOptions(), Gate())
    return got.value


def test_docker_reads_the_spec_through_its_bind_mount(template):
    template.write_text("train:\n  num_epoch: 3\n", encoding="utf-8")
    spec = job("-e", "/specs/train.yaml", mounts=[{"host": str(template.parent), "container": "/specs"}])
    err = refused("docker", [spec])
    assert str(err).startswith("train.num_epoch: no such key") and "did you mean train.num_epochs?" in str(err)
    assert err.details == ()


def test_slurm_reads_the_upload_the_command_names(template):
    spec = job("-e", "{specs}/train.yaml", "train.optim.lr=abc", spec_files={"train.yaml": str(template)})
    err = refused("slurm", [spec])
    assert str(err).startswith("train.optim.lr: 'abc' is not a number")
    template.write_text("train: [1]\n", encoding="utf-8")
    assert "train: a list" in str(refused("slurm", [job("-e", "{specs}/train.yaml", spec_files={
        "train.yaml": str(template)})]))


def test_kubernetes_reads_a_requests_staged_config():
    opts = SubmitOptions(config={"text": "train:\n  num_epoch: 3\n", "mount_path": "/tao/config/spec.yaml"})
    err = refused("kubernetes", [job("-e", "/tao/config/spec.yaml")], opts)
    assert "did you mean train.num_epochs?" in str(err)


def test_a_spec_the_bank_cannot_read_is_said_and_its_overrides_still_checked():
    gate = Gate()
    pipeline.check_specs(platform.get("kubernetes"), [job("-e", "/pvc/train.yaml", "train.num_epochs=3")],
                         SubmitOptions(), gate)
    assert gate.notes() == ["warning: spec file /pvc/train.yaml is not readable on this machine (a path inside "
                            "the job's container or volume): the bank checked the command's overrides, not the file"]
    assert "did you mean train.num_epochs?" in str(refused("kubernetes", [job("-e", "/pvc/t.yaml", "train.num_epoch=3")]))


def test_every_problem_is_a_line_and_a_sweep_names_its_trials(template):
    spec = [job("-e", "/specs/train.yaml", f"train.optim.lr={v}", mounts=[{"host": str(template.parent),
                                                                          "container": "/specs"}])
            for v in ("0.1", "abc", "0.2", "5")]
    err = refused("docker", spec)
    lines = [str(err), *err.details]
    assert lines[0] == "trial 1: train.optim.lr: 'abc' is not a number"
    assert lines[1].startswith("trial 3: train.optim.lr: 5 is above TAO's maximum 1") and \
        lines[1].endswith(f"({tao_spec_gate.SKIP})")


def test_no_spec_check_skips_with_a_warning_and_other_commands_are_not_judged():
    gate = Gate()
    pipeline.check_specs(platform.get("docker"), [job("train.num_epoch=3")], SubmitOptions(spec_check=False), gate)
    assert gate.notes() == ["warning: the spec check is skipped (--no-spec-check): TAO's own runner judges the spec "
                            "when the job starts"]
    gate = Gate()
    for other in ({"network_arch": "dino", "action": "train", "command": "sh -c 'dino train x=1'"},
                  {"network_arch": "dino", "action": "train", "command": ["python3", "train.py", "a.b=1"]},
                  {"network_arch": "mynet", "action": "train", "command": ["mynet", "train", "a=1"]}):
        pipeline.check_specs(platform.get("docker"), [other], SubmitOptions(), gate)
    assert gate.lines == []


def test_a_spec_file_that_is_not_yaml_is_one_line_once_for_a_sweep(template):
    template.write_text("train: [\n", encoding="utf-8")
    spec = [job("-e", "/specs/train.yaml", mounts=[{"host": str(template.parent), "container": "/specs"}])] * 3
    err = refused("docker", spec)
    assert "not valid YAML" in str(err) and len(err.details) == 0


@pytest.mark.parametrize("words,want", [
    (["-e", "s.yaml", "a=1", "+b=2", "~c", "--gpus", "2", "-r", "/r", "d.e=[1,2]"], ["a=1", "+b=2", "~c", "d.e=[1,2]"]),
    (["--experiment_spec_file=/s.yaml", "x=1"], ["x=1"]),
])
def test_the_overrides_of_a_tao_command(words, want):
    assert tao_spec_gate.overrides_of(words) == want


def test_the_refusal_comes_before_any_record(state_dir, template):
    from taobank import records

    spec = job("-e", "/specs/train.yaml", "train.num_epoch=10", image="img:1", gpus=0,
               mounts=[{"host": str(template.parent), "container": "/specs"}])
    with pytest.raises(TaoError, match="did you mean train.num_epochs"):
        platform.get("docker").submit(spec, SubmitOptions())
    assert records.list_records() == []
