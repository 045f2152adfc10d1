"""stamp_versions: marked literals follow versions.yaml; --check lists drift."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devtools import stamp

BANK = Path(__file__).resolve().parents[2]
STAMP = BANK / "scripts" / "stamp_versions.py"

VERSIONS = """\
images:
  pyt: "nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"
  pyxis: "nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt"
wheels:
  sdk: "nvidia-tao-sdk[slurm]==7.1.0rc42"
gpu_host:
  cuda: "13.0"
slurm:
  num_gpus: 4
  use_requeue: true
"""


@pytest.fixture()
def env(tmp_path, monkeypatch):
    f = tmp_path / "versions.yaml"
    f.write_text(VERSIONS)
    monkeypatch.setenv("TAO_VERSIONS_FILE", str(f))
    return tmp_path


CASES = [
    # (line before, line after)
    ('IMAGE="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"  # versions-key: images.pyt\n',
     'IMAGE="nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt"  # versions-key: images.pyt\n'),
    ('IMAGE="${IMAGE:-nvcr.io#nvidia/tao/tao-toolkit:6.0-pyt}"  # versions-key: images.pyxis\n',
     'IMAGE="${IMAGE:-nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt}"  # versions-key: images.pyxis\n'),
    ("IMAGE=${IMAGE:-old}  # versions-key: images.pyt\n",
     "IMAGE=${IMAGE:-nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt}  # versions-key: images.pyt\n"),
    ("  image: 'old:1'  # versions-key: images.pyt\n",
     "  image: 'nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt'  # versions-key: images.pyt\n"),
    ("| CUDA | `12.8` | <!-- versions-key: gpu_host.cuda -->\n",
     "| CUDA | `13.0` | <!-- versions-key: gpu_host.cuda -->\n"),
    ('pip install "nvidia-tao-sdk[slurm]==7.0" --pre  # versions-key: wheels.sdk\n',
     'pip install "nvidia-tao-sdk[slurm]==7.1.0rc42" --pre  # versions-key: wheels.sdk\n'),
    ("#SBATCH --gpus-per-node=8  # versions-key: slurm.num_gpus\n",
     "#SBATCH --gpus-per-node=4  # versions-key: slurm.num_gpus\n"),
    ("IMAGE=nvcr.io#nvidia/tao/tao-toolkit:6.0-pyt  # versions-key: images.pyxis\n",
     "IMAGE=nvcr.io#nvidia/tao/tao-toolkit:7.1.0-pyt  # versions-key: images.pyxis\n"),
    ("NUM_GPUS=2; # versions-key: slurm.num_gpus\n", "NUM_GPUS=4; # versions-key: slurm.num_gpus\n"),
    ("use_requeue: false  # versions-key: slurm.use_requeue\n", "use_requeue: true  # versions-key: slurm.use_requeue\n"),
    ("cuda 13.0 // versions-key: gpu_host.cuda\r\n", "cuda 13.0 // versions-key: gpu_host.cuda\r\n"),
]


@pytest.mark.parametrize("before,after", CASES)
def test_stamp_rewrites_only_the_literal(env, before, after):
    f = env / "skills" / "x" / "SKILL.md"
    f.parent.mkdir(parents=True)
    f.write_bytes(("line one\n" + before + "tail\n").encode())
    drifts = stamp.stamp([f], check=True)
    assert len(drifts) == (0 if before == after else 1)
    assert f.read_bytes() == ("line one\n" + before + "tail\n").encode()  # --check changes nothing
    stamp.stamp([f])
    assert f.read_bytes() == ("line one\n" + after + "tail\n").encode()
    assert stamp.stamp([f], check=True) == []


def test_check_lists_every_drift_with_file_line(env):
    d = env / "templates"
    d.mkdir()
    (d / "a.yaml").write_text('a: "x"  # versions-key: images.pyt\nb: 1\nc: "13.0" # versions-key: gpu_host.cuda\n')
    (d / "b.sh").write_text('X="y" # versions-key: gpu_host.cuda\nZ="q" # versions-key: images.nope\n# versions-key: images.pyt\n')
    drifts = stamp.stamp([d], check=True, root=env)
    got = sorted(str(x) for x in drifts)
    assert got[0] == "templates/a.yaml:1 images.pyt expected 'nvcr.io/nvidia/tao/tao-toolkit:7.1.0-pyt' found 'x'"
    assert got[1] == "templates/b.sh:1 gpu_host.cuda expected '13.0' found 'y'"
    assert got[2].startswith("templates/b.sh:2 images.nope: unknown key") and "images.pyt" in got[2]
    assert got[3] == "templates/b.sh:3 images.pyt: no literal before the marker"
    assert len(got) == 4


def test_cli_check_and_stamp(env):
    f = env / "s.md"
    f.write_text("`7.0` <!-- versions-key: gpu_host.cuda -->\n")
    e = dict(os.environ)
    r = subprocess.run([sys.executable, str(STAMP), "--check", str(f)], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 1 and "s.md:1 gpu_host.cuda expected '13.0' found '7.0'" in r.stdout
    r = subprocess.run([sys.executable, str(STAMP), str(f)], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0 and f.read_text() == "`13.0` <!-- versions-key: gpu_host.cuda -->\n"
    r = subprocess.run([sys.executable, str(STAMP), "--check", str(f)], capture_output=True, text=True, env=e, timeout=60)
    assert r.returncode == 0 and r.stdout == ""
    r = subprocess.run([sys.executable, str(STAMP), "--help"], capture_output=True, text=True, env=e, timeout=60)
    assert "LAST such span" in r.stdout


def test_repo_is_stamped(monkeypatch):
    monkeypatch.delenv("TAO_VERSIONS_FILE", raising=False)
    assert [str(d) for d in stamp.stamp(check=True)] == []
