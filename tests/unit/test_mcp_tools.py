"""The MCP tools (taobank.mcp.tools): schemas read off the helpers' parsers, argv that never turns a value
into an option, the helpers' own one-line errors, and no field that carries a secret's value."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from taobank.cli import entry
from taobank.mcp import tools

BANK = Path(__file__).resolve().parents[2]
SCRIPTS = BANK / "scripts"

#: Properties whose name says credential: each carries a NAME (a variable, a file, a Secret), never a value.
SECRET_WORDS = re.compile(r"secret|key|token|passw|credential|auth|api_?key", re.I)
NAME_CARRIERS = {"secret_env": "array", "secrets_file": "string", "ngc_pull_secret": "boolean",
                 "image_pull_secret": "string"}


def _schemas() -> dict[str, dict]:
    return {t.name: tools.input_schema(t) for t in tools.TOOLS}


def test_every_verb_is_a_tool():
    names = {t.name for t in tools.TOOLS}
    assert names >= {"preflight_kubernetes", "preflight_slurm", "preflight_docker", "submit_kubernetes",
                     "submit_slurm", "submit_docker", "status", "logs", "cancel", "metrics", "artifacts", "fetch",
                     "prune", "continue", "sweep_best", "list", "spec_template", "spec_check"}


def test_no_schema_has_a_field_for_a_secret_value():
    seen = set()
    for name, schema in _schemas().items():
        for prop, sub in schema["properties"].items():
            if SECRET_WORDS.search(prop):
                assert prop in NAME_CARRIERS, f"{name}.{prop} looks like a credential value"
                assert sub["type"] == NAME_CARRIERS[prop], f"{name}.{prop}"
                seen.add(prop)
    assert {"secret_env", "secrets_file"} <= seen  # the credential names are offered, so the check has teeth
    env = _schemas()["submit_docker"]["properties"]["env"]
    assert "non-secret" in env["description"]


@pytest.mark.parametrize("platform", ["kubernetes", "slurm", "docker"])
def test_submit_schema_is_the_declared_flag_vocabulary(platform):
    """One source: every listed flag the CLI declares for a platform's submit is a property, typed as declared."""
    props = _schemas()[f"submit_{platform}"]["properties"]
    for flag in entry.flags_of(platform):
        if flag.hidden:
            continue
        prop = flag.names[0][2:].replace("-", "_")
        assert prop in props, f"--{prop} of {platform} submit is not offered"
        want = {"pairs": "object", "list": "array", "on": "boolean", "off": "boolean"}.get(flag.kind) \
            or {int: "integer", float: "number"}.get(flag.type, "string")
        assert props[prop]["type"] == want, prop
        if flag.choices:
            assert props[prop]["enum"] == list(flag.choices)
    for extra in ("dry_run", "name", "parent", "sweep", "max_concurrent"):
        assert extra in props
    assert "quiet" not in props and "json" not in props


def test_schemas_are_closed_and_hints_truthful():
    for spec in tools.TOOLS:
        schema = tools.input_schema(spec)
        assert schema["additionalProperties"] is False
        hints = tools.tool_annotations(spec)
        assert not (hints["readOnlyHint"] and hints["destructiveHint"])
    by = {t.name: tools.tool_annotations(t) for t in tools.TOOLS}
    assert by["prune"]["destructiveHint"] and by["cancel"]["destructiveHint"]
    assert by["logs"]["readOnlyHint"] and by["metrics"]["readOnlyHint"] and by["list"]["openWorldHint"] is False
    assert not by["submit_slurm"]["idempotentHint"] and not by["status"]["readOnlyHint"]  # status writes records


HOSTILE = ["--all", "-rf", "$(id)", "`id`", "a;b", "x\ny", "\x1b[2J", "../../etc/passwd", "--to=/etc", "\u202e",
           "a" * 5000, ""]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_never_becomes_an_option(value):
    argv = tools.to_argv(tools.by_name("logs"), {"id": value, "tail": 3})
    assert argv == ["logs", "--json", "--tail=3", "--", value]
    argv = tools.to_argv(tools.by_name("submit_docker"), {"image": value, "env": {"K": value}, "command": [value]})
    assert argv == ["submit", "--json", f"--image={value}", f"--env=K={value}", "--", value]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(max_size=12), st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                                        st.text(max_size=20), st.lists(st.integers(), max_size=2)),
                       max_size=4))
def test_any_arguments_give_a_result_never_a_traceback(state_dir, arguments):
    for name in ("logs", "status", "cancel", "fetch", "sweep_best"):
        done = tools.run(tools.by_name(name), arguments)
        assert done.exit_code in (0, 1, 2)
        assert "Traceback" not in done.stderr
        if done.exit_code:
            assert all("\n" not in line for line in done.errors) and done.errors[0].startswith("error: ")


@pytest.mark.parametrize("name,arguments,says", [
    ("logs", {"tail": "ten"}, "error: logs: tail must be a whole number"),
    ("logs", {"tail": True}, "error: logs: tail must be a whole number"),
    ("status", {"ids": "abc"}, "error: status: ids must be a list of strings"),
    ("fetch", {"id": "x"}, "error: fetch: to is required"),
    ("artifacts", {"mode": "median"}, "error: artifacts: mode must be one of min, max"),
    ("submit_docker", {"env": {"A=B": "c"}}, "error: submit_docker: env must be an object whose keys are names"),
    ("submit_docker", {"secret": ["X"]}, "error: submit_docker: unknown argument 'secret'"),
    ("list", ["not", "an", "object"], "error: list: the arguments must be an object"),
])
def test_wrong_types_are_refused_in_one_line(state_dir, name, arguments, says):
    done = tools.run(tools.by_name(name), arguments)
    assert done.exit_code == 2
    assert len(done.errors) == 1 and done.errors[0].startswith(says)


def _cli(script: str, *argv: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPTS / script), *argv], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("name,arguments,argv", [
    ("logs", {"id": "no-such-job"}, ["logs", "no-such-job"]),
    ("status", {"ids": ["x y"]}, ["status", "--", "x y"]),
    ("cancel", {"last": True, "all": True}, ["cancel", "--last", "--all"]),
    ("continue", {"id": "nope-aaaaaaaa"}, ["continue", "nope-aaaaaaaa"]),
    ("sweep_best", {"id": "s1", "kpi": "val_loss"}, ["sweep", "best", "s1", "--kpi", "val_loss"]),
    ("prune", {"ids": ["a"]}, ["prune", "a"]),
    ("spec_template", {"network": "dinox", "action": "train"}, ["spec", "template", "dinox", "train"]),
])
def test_the_cli_line_is_the_tool_line(state_dir, name, arguments, argv):
    """Same function, same error: the tool's isError text is the line tao_jobs.py prints, exit code too."""
    import os

    done = tools.run(tools.by_name(name), arguments)
    shell = _cli("tao_jobs.py", *argv, env={**os.environ, "TAO_STATE_DIR": str(state_dir)})
    assert done.exit_code == shell.returncode != 0
    assert done.errors == [ln for ln in shell.stderr.splitlines() if ln.startswith("error:")]


def test_dry_run_is_the_helpers_dry_run(state_dir):
    args = {"image": "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt", "dry_run": True, "name": "mcp dry",
            "gpus_per_node": 1, "command": ["echo", "--not-an-option"]}
    done = tools.run(tools.by_name("submit_docker"), args)
    assert done.exit_code == 0, done.stderr
    shell = _cli("tao_docker.py", "submit", "--json", "--image", args["image"], "--dry-run", "--name", "mcp dry",
                 "--gpus-per-node", "1", "--", "echo", "--not-an-option")
    assert done.result == json.loads(shell.stdout)
    assert "--not-an-option" in done.result["command"]
    assert not any(state_dir.glob("**/*.json"))  # a dry run opens no record


def test_tao_mcp_without_the_sdk_says_what_to_install():
    code = ("import sys; sys.modules['mcp'] = None; sys.path.insert(0, sys.argv[1]); import tao_mcp; "
            "sys.exit(tao_mcp.main([]))")
    proc = subprocess.run([sys.executable, "-c", code, str(SCRIPTS)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "pip install" in proc.stderr and '"mcp>=2' in proc.stderr
    assert "Traceback" not in proc.stderr


def test_tools_listing_needs_no_sdk():
    code = ("import sys, runpy; sys.modules['mcp'] = None; sys.path.insert(0, sys.argv[1]); "
            "sys.argv = ['tao_mcp.py', '--tools']; runpy.run_path(sys.argv and sys.path[0] + '/tao_mcp.py', "
            "run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code, str(SCRIPTS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert {t["name"] for t in json.loads(proc.stdout)} == {t.name for t in tools.TOOLS}


def test_each_stderr_line_reaches_on_line_as_it_is_printed(state_dir):
    """What becomes a progress notification: every line the helper prints on stderr, cleaned, in order."""
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "broken-aaaaaaaa.json").write_text("{\x1b[2J")
    seen: list[str] = []
    done = tools.run(tools.by_name("list"), {}, on_line=seen.append)
    assert done.exit_code == 0 and done.result == []
    assert seen and seen == done.notes and seen[0].startswith("warning: skipped ")
    assert "\x1b" not in "".join(seen)


@pytest.mark.parametrize("tool", ["submit_docker", "submit_slurm", "submit_kubernetes"])
def test_a_key_pasted_into_env_is_refused_and_never_echoed(state_dir, tool):
    """The model may still paste a value into a plain field: the helper's gate refuses it, the line names the
    variable, never the value, and no record is opened."""
    key = "nvapi-" + "Q7" * 30
    args = {"image": "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt", "dry_run": True, "env": {"NGC_API_KEY": key}}
    args.update({"command": "true"} if tool == "submit_kubernetes" else {"command": ["true"]})
    done = tools.run(tools.by_name(tool), args)
    assert done.exit_code != 0 and "NGC_API_KEY" in done.errors[0], done.errors
    assert key not in done.stdout + done.stderr
    assert not any(state_dir.glob("**/*.json"))


def test_spec_template_and_spec_check_are_the_clis_answers(tmp_path):
    """An agent gets the YAML template (or with json its schema), and the check's problems, each with its path."""
    from taobank import tao_spec_schema

    done = tools.run(tools.by_name("spec_template"), {"network": "dino", "action": "train"})
    assert done.exit_code == 0 and done.result == tao_spec_schema.template("dino", "train").strip()
    done = tools.run(tools.by_name("spec_template"), {"network": "dino", "action": "train", "json": True})
    assert done.result["x-tao"]["network"] == "dino" and "train" in done.result["properties"]
    spec = tmp_path / "train.yaml"
    spec.write_text(tao_spec_schema.template("dino", "train"))
    done = tools.run(tools.by_name("spec_check"), {"file": str(spec), "overrides": ["train.num_epoch=10"],
                                                   "network": "dino", "action": "train"})
    assert done.exit_code == 1 and not done.result["ok"]
    assert [p["path"] for p in done.result["problems"]] == ["train.num_epoch"]
    assert done.errors == [f"error: {done.result['problems'][0]['path']}: {done.result['problems'][0]['message']}"]
    done = tools.run(tools.by_name("spec_check"), {"file": str(spec), "network": "dino", "action": "train"})
    assert done.exit_code == 0 and done.result["ok"]


def test_the_study_tool_returns_the_search_table_the_cli_prints(docker_fake, tmp_path, monkeypatch, capfd):
    """A search on the fake engine whose trials really ran (the runner on the stand-in, one journal): the tool's
    result is ``tao_jobs.py study ID --json`` (each trial's number, sweep trial, id, state, epochs, value and
    parameters, and the best); a sweep that is not a search is the CLI's one line."""
    import os

    from fakeproc import ok
    from test_docker_campaigns import SPEC, Engine
    from test_search_launch import staging
    from taobank import records
    from taobank.campaign import sweeps
    from taobank.contract import SubmitOptions
    from taobank.campaign.search import trial

    docker_fake.on("python3", lambda c: c.argv[1:4] == ["-m", "taobank", "supervise"], ok("4242\n"))
    engine = Engine(docker_fake)
    engine.fake.on("docker", lambda c: c.argv[1] == "run" and "--rm" in c.argv, ok(""))
    st_ = staging()
    st_.settings.poll_seconds, st_.settings.action = 0.2, "train"
    done = sweeps.submit("docker", SPEC, SubmitOptions(), [{}, {}], 2, search=st_)
    folder = records.get(done.views[0].id).backend["search_dir"]
    settings_path = os.path.join(folder, "study.json")
    with open(settings_path, "w", encoding="utf-8") as fh:  # the stand-in writes status.json under train/
        fh.write(st_.settings_text(done.sweep))
    trainer = os.path.join(os.path.dirname(__file__), "..", "..", "testclusters", "fake_tao_train.sh")
    for i, view in enumerate(done.views):
        results = tmp_path / f"r{i}"
        results.mkdir()
        monkeypatch.setenv("TAO_API_JOB_ID", view.id)
        assert trial.run(Path(settings_path), i, ["sh", trainer, "--results", str(results), "--epochs", "2", "-e",
                                                  "x", "fake.lr_optimum=0.001"], results=results) == 0
    capfd.readouterr()
    got = tools.run(tools.by_name("study"), {"id": done.sweep})
    assert got.exit_code == 0, got.stderr
    table = got.result
    assert table["sweep"] == done.sweep and table["kpi"] == "val_loss" and table["mode"] == "min"
    assert sorted(t["job_id"] for t in table["trials"]) == sorted(v.id for v in done.views)
    for t in table["trials"]:
        assert t["state"] == "COMPLETE" and t["epochs"] == 2 and isinstance(t["value"], float)
        assert set(t["params"]) == {"train.optim.lr"} and t["trial"] in (0, 1)
    assert table["best"]["value"] == min(t["value"] for t in table["trials"])
    shell = _cli("tao_jobs.py", "study", done.sweep, "--json",
                 env={**os.environ, "TAO_STATE_DIR": str(tmp_path / "state")})
    assert json.loads(shell.stdout) == table
    text = _cli("tao_jobs.py", "study", done.sweep, env={**os.environ, "TAO_STATE_DIR": str(tmp_path / "state")})
    assert text.stdout.startswith("NUMBER") and "best: number " in text.stdout
    plain = sweeps.submit("docker", {**SPEC}, SubmitOptions(), [{"a": "1"}, {"a": "2"}], 2)
    got = tools.run(tools.by_name("study"), {"id": plain.sweep})
    assert got.exit_code != 0 and got.errors == [f"error: sweep {plain.sweep} is not a search (submit --search): "
                                                 "it has no study"]
    assert "dashboard" not in tools.input_schema(tools.by_name("study"))["properties"]
