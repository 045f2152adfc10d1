"""The spec check of a submit (taobank.tao_spec_gate through pipeline.check_specs), above the platform contract.

Each platform only says where a spec file the command names is readable here; the check, its lines and the
opt-out are the core's. Nothing here contacts a cluster: the refusal comes before any plan.
"""
from __future__ import annotations

import pytest

from taobank.core import pipeline, platform
from taobank import tao_command, tao_spec_gate, tao_spec_schema
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
    for other in ({"network_arch": "dino", "action": "train", "command": "sh -c 'dino train x=1'"},
                  {"network_arch": "dino", "action": "train", "command": ["python3", "train.py", "a.b=1"]},
                  {"network_arch": "mynet", "action": "train", "command": ["mynet", "train", "a=1"]}):
        gate = Gate()  # not judged (a bad value passes), but said: its key=value words reach the program unchecked
        pipeline.check_specs(platform.get("docker"), [other], SubmitOptions(), gate)
        assert gate.notes() == [f"note: {tao_command.NOT_TAO_FORM}"], other
        assert gate.skipped == []


STAND_IN = ["sh", "-c", 'exec sh /fake/fake_tao_train.sh --results "$RESULTS_DIR" --epochs 5 "$@"', "tao"]


def stand_in(*extra: str) -> dict:
    return {"network_arch": "dino", "action": "train", "command": [*STAND_IN, *extra]}


def test_a_command_not_in_taos_form_with_overrides_is_one_note_and_a_dry_runs_skipped_check():
    """Issue: the spec check did nothing for the skills' stand-in (`sh -c '...' tao train.num_epoch=3`) and said
    nothing, and a dry run with --check then claimed nothing was skipped. It is still not judged (the bank cannot
    know the program is TAO), but a submit says so in one note, and a dry run lists it among what it skipped."""
    gate = Gate()
    pipeline.check_specs(platform.get("docker"), [stand_in("train.num_epoch=3")], SubmitOptions(), gate)
    assert gate.notes() == [f"note: {tao_command.NOT_TAO_FORM}"]
    assert "`<network> <action>` form; its arguments were not checked" in gate.notes()[0]
    dry = Gate(dry_run=True)
    specs = pipeline.check_specs(platform.get("docker"), [stand_in("train.num_epoch=3")], SubmitOptions(), dry)
    assert dry.lines == [] and dry.skipped == [tao_command.NOT_TAO_FORM_SKIPPED]
    said = pipeline.DryRun(dry, [], specs, SubmitOptions()).first_line()
    assert "nothing was skipped" not in said and f"not checked: {tao_command.NOT_TAO_FORM_SKIPPED}" in said
    # a sweep's trials (each its overrides): one note for the batch
    gate = Gate()
    pipeline.check_specs(platform.get("docker"), [stand_in(f"fake.best_val={v}") for v in (100, 300)],
                         SubmitOptions(), gate)
    assert gate.notes() == [f"note: {tao_command.NOT_TAO_FORM}"]


def test_continue_of_the_stand_in_is_not_noisy_for_its_own_resume_override():
    """continue appends TAO's resume override itself: that word alone is no user argument left unchecked."""
    resume = "train.resume_training_checkpoint_path=/res/a/train/model_epoch_001.pth"
    gate = Gate()
    pipeline.check_specs(platform.get("docker"), [stand_in(resume)], SubmitOptions(continues="dino-train-0000000a"), gate)
    assert gate.lines == []
    pipeline.check_specs(platform.get("docker"), [stand_in("train.num_epoch=3", resume)],
                         SubmitOptions(continues="dino-train-0000000a"), gate)
    assert gate.notes() == [f"note: {tao_command.NOT_TAO_FORM}"]


@pytest.mark.parametrize("command", [
    STAND_IN,  # the stand-in alone: no argument TAO would read, nothing to say
    ["python3", "train.py", "--lr=0.1"],  # an option, not an override
    "NCCL_DEBUG=INFO python3 train.py",  # an environment assignment
    ["true"],
])
def test_a_command_without_override_words_is_not_noisy(command):
    gate = Gate()
    pipeline.check_specs(platform.get("docker"), [{"network_arch": "dino", "action": "train", "command": command}],
                         SubmitOptions(), gate)
    assert gate.lines == [] and gate.skipped == []


def test_an_opted_out_check_is_never_said_nothing_was_skipped():
    """--dry-run --check --no-spec-check: the summary lists the spec check as skipped; --no-spec-check silences the
    stand-in's note."""
    dry = Gate(dry_run=True)
    specs = pipeline.check_specs(platform.get("docker"), [job("train.num_epochs=3")], SubmitOptions(spec_check=False),
                                 dry)
    said = pipeline.DryRun(dry, [], specs, SubmitOptions()).first_line()
    assert said.endswith("not checked: the spec check (--no-spec-check)")
    gate = Gate()
    pipeline.check_specs(platform.get("docker"), [stand_in("train.num_epoch=3")], SubmitOptions(spec_check=False), gate)
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
