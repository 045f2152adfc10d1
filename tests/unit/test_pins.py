"""versions.yaml: one parser, quoted and Pyxis values survive, clear errors."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from taobank import pins
from taobank.errors import TaoError

BANK = Path(__file__).resolve().parents[2]
RESOLVE = BANK / "scripts" / "resolve_versions_key.py"

SAMPLE = """\
images:
  pyt: "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"
  pyxis: "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"
  pyxis_plain: nvcr.io#nvidia/tao/x:1  # a comment after a value
  single: 'it''s "quoted"'
gpu_host:
  driver_branch: "580"
  cuda: "13.0"
slurm:
  defaults:
    num_gpus: 4
    timeout_hours: 3.8
    use_requeue: true
"""


@pytest.fixture()
def vfile(tmp_path, monkeypatch):
    f = tmp_path / "versions.yaml"
    f.write_text(SAMPLE)
    monkeypatch.setenv("TAO_VERSIONS_FILE", str(f))
    return f


def test_quoted_and_pyxis_values_survive(vfile):
    assert pins.resolve("images.pyt") == "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"
    assert pins.resolve("images.pyxis") == "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"
    assert pins.resolve("images.pyxis_plain") == "nvcr.io#nvidia/tao/x:1"
    assert pins.resolve("images.single") == 'it\'s "quoted"'
    assert pins.resolve("gpu_host.driver_branch") == "580"
    assert pins.format_value(pins.resolve("gpu_host.cuda")) == "13.0"


def test_scalars_and_sections(vfile):
    assert pins.resolve("slurm.defaults.num_gpus") == 4
    assert pins.format_value(pins.resolve("slurm.defaults.use_requeue")) == "true"
    assert pins.format_value(pins.resolve("slurm.defaults.timeout_hours")) == "3.8"
    assert pins.resolve("slurm.defaults")["num_gpus"] == 4
    assert pins.get("nope.key", "d") == "d"
    assert pins.get("images.pyt").startswith("nvcr.io/")
    assert "slurm.defaults.use_requeue" in pins.flatten()


def test_unknown_key_suggests(vfile):
    with pytest.raises(TaoError) as exc:
        pins.resolve("images.pyxs")
    assert exc.value.exit_code == 1
    assert "images.pyxis" in str(exc.value)


def test_missing_file_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_VERSIONS_FILE", str(tmp_path / "none.yaml"))
    with pytest.raises(TaoError) as exc:
        pins.load()
    assert exc.value.exit_code == 2


def test_bad_yaml(tmp_path, monkeypatch):
    f = tmp_path / "v.yaml"
    f.write_text("a: [1,\n")
    monkeypatch.setenv("TAO_VERSIONS_FILE", str(f))
    with pytest.raises(TaoError, match="not valid YAML"):
        pins.load()


def test_reload_after_edit(vfile):
    assert pins.resolve("gpu_host.cuda") == "13.0"
    vfile.write_text(SAMPLE.replace('"13.0"', '"13.1"'))
    assert pins.resolve("gpu_host.cuda") == "13.1"


def test_repo_versions_yaml_has_issue_pins(monkeypatch):
    monkeypatch.delenv("TAO_VERSIONS_FILE", raising=False)
    assert pins.resolve("images.tao_toolkit.pyt_pyxis").startswith("nvcr.io#nvidia/")
    assert pins.resolve("gpu_host.driver_branch") == "580"
    assert pins.resolve("gpu_host.cuda") == "13.0"
    assert pins.resolve("gpu_host.nvidia_container_toolkit") == "1.19.0"


def _cli(*args, env=None):
    import os
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, str(RESOLVE), *args], capture_output=True, text=True, env=e, timeout=60)


def test_cli_exit_codes(vfile, tmp_path):
    r = _cli("images.pyxis", env={"TAO_VERSIONS_FILE": str(vfile)})
    assert r.returncode == 0 and r.stdout == "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt\n"
    r = _cli("images.pyxs", env={"TAO_VERSIONS_FILE": str(vfile)})
    assert r.returncode == 1 and "did you mean images.pyxis" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _cli("images.pyt", env={"TAO_VERSIONS_FILE": str(tmp_path / "missing.yaml")})
    assert r.returncode == 2 and "not found" in r.stderr
    r = _cli("slurm.defaults", "--json", env={"TAO_VERSIONS_FILE": str(vfile)})
    assert r.returncode == 0 and '"num_gpus": 4' in r.stdout
    r = _cli("--list", env={"TAO_VERSIONS_FILE": str(vfile)})
    assert "images.pyxis=nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt" in r.stdout.splitlines()


def test_pins_is_the_only_versions_reader():
    """No other module parses versions.yaml itself."""
    offenders = []
    for f in [*(BANK / "scripts").rglob("*.py"), *(BANK / "devtools").rglob("*.py")]:
        if f.name in ("pins.py", "stamp.py"):
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if "versions.yaml" in line and re.search(r"open\(|read_text|read_bytes|safe_load|yaml\.load", line):
                offenders.append(f"{f.relative_to(BANK)}:{n}")
    assert offenders == []


def test_every_package_and_image_pin_is_exact(monkeypatch):
    """Package pins are ``name[extras]==version`` of a release (PyPI has no ``7.1.0rc42``: a pin the registry lacks
    is caught by tests/e2e/registries, which downloads each); image pins name a registry, a repository and a tag."""
    import re

    monkeypatch.delenv("TAO_VERSIONS_FILE", raising=False)
    for key, pin in pins.resolve("wheels").items():
        assert re.fullmatch(r"[a-z0-9-]+(\[[a-z0-9,-]+\])?==\d+(\.\d+)+", pin), f"wheels.{key} {pin!r}"
    for key, ref in pins.resolve("images.tao_toolkit").items():
        assert re.fullmatch(r"nvcr\.io[/#]nvidia/tao/tao-toolkit:\d+\.\d+\.\d+-[a-z0-9-]+", ref), (key, ref)
    assert pins.resolve("images.tao_toolkit.deploy").endswith("-deploy")
    pyt = pins.resolve("images.tao_toolkit.pyt")
    assert pins.resolve("images.tao_toolkit.pyt_pyxis") == pyt.replace("nvcr.io/", "nvcr.io#", 1)
