"""PyTorch Lightning and the TAO stand-in (tao_entry.py, tao_train.py) for the local clusters (test infrastructure).

The wheels (versions.yaml ``test_clusters.lightning``, all pure Python) are downloaded once into
``$TAO_CACHE_DIR/wheels/lightning-<key>`` and installed from there, offline, with ``--no-deps``: pip's
resolver does not count Debian's torch (it reports 1.13.0a0) and would replace it with a CUDA torch 2.x.
The SLURM nodes get a venv (``--system-site-packages``: Debian's torch and numpy) built from them by
``up slurm``; the real Kubernetes nodes get them in the torch-cpu image (testclusters.kubernetes.images).

The stand-in's files are copied next to each ``<network>`` launcher (:func:`install_standin`), so the
job's command starts with the network's name as TAO's does (``dino train ...``).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from taobank import pins
from taobank.errors import TaoError
from taobank.run import last_line

PIN_KEY = "test_clusters.lightning"
HERE = Path(__file__).resolve().parent
#: the stand-in's own files, copied beside the launchers
STANDIN_FILES = ("tao_entry.py", "tao_train.py", "torch_py311.py")
#: the networks a launcher is made for (the command's first word must be the spec's network_arch)
NETWORKS = ("dino",)
RANKS_FILE = "lightning_ranks.jsonl"
#: Debian's Python, the one whose dist-packages hold python3-torch
DEBIAN_PYTHON = "/usr/bin/python3"


def requirements() -> list[str]:
    return [f"{name}=={version}" for name, version in sorted(pins.resolve(PIN_KEY).items())]


def key() -> str:
    """Names the wheel set (and every install of it): the Lightning version and a digest of all pins."""
    pinned = pins.resolve(PIN_KEY)
    digest = hashlib.sha256("\n".join(requirements()).encode()).hexdigest()[:8]
    return f"{pinned['pytorch-lightning']}-{digest}"


def cache_base() -> Path:
    base = os.environ.get("TAO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tao-skill-bank")
    return Path(base)


def wheels() -> Path:
    """The folder of the pinned wheels, downloaded once (then only read)."""
    dest = cache_base() / "wheels" / f"lightning-{key()}"
    if (dest / ".complete").is_file():
        return dest
    part = dest.with_name(dest.name + ".partial")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    print(f"tao_lightning: downloading {' '.join(requirements())} into {dest} (first run only)", file=sys.stderr,
          flush=True)
    res = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                          "--no-deps", "--only-binary=:all:", "--dest", str(part), *requirements()],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise TaoError(f"pip download of the Lightning wheels failed: {last_line(res.stderr or res.stdout)}")
    (part / ".complete").write_text("\n".join(requirements()) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    part.replace(dest)
    return dest


def launcher(python: str) -> str:
    """A ``<network>`` command: runs tao_entry.py from its own folder under ``python``, named as it was called."""
    return (f"#!{python}\n"
            "# TAO stand-in launcher (testclusters/tao_lightning): `<network> <action> [-e spec] key=value ...`\n"
            "import os, sys\n"
            "sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))\n"
            "from tao_entry import main\n"
            "sys.exit(main(os.path.basename(sys.argv[0])))\n")


def install_standin(folder: Path, python: str, mode: int = 0o755) -> None:
    """The stand-in's files and one launcher per network in ``folder`` (rewritten when they differ)."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = {name: (HERE / name).read_text(encoding="utf-8") for name in STANDIN_FILES}
    texts.update({net: launcher(python) for net in NETWORKS})
    for name, text in texts.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            tmp = path.with_name(f".{name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.chmod(mode if name in NETWORKS else 0o644)
            tmp.replace(path)


def ensure_venv(parent: Path) -> Path:
    """A venv over Debian's Python with the pinned wheels, at ``parent/lightning-<key>`` (built once, offline
    from the wheel cache); returns its python. Readable by every user (jobs run as the test user)."""
    dest = parent / f"lightning-{key()}"
    python = dest / "bin" / "python"
    if (dest / ".complete").is_file():
        return python
    src = wheels()
    shutil.rmtree(dest, ignore_errors=True)
    parent.mkdir(parents=True, exist_ok=True)
    print(f"tao_lightning: building {dest} (first run only)", file=sys.stderr, flush=True)
    for argv in ([DEBIAN_PYTHON, "-m", "venv", "--system-site-packages", str(dest)],
                 [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                  "--no-index", "--find-links", str(src), *requirements()]):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if res.returncode != 0:
            raise TaoError(f"building the Lightning venv failed at {' '.join(argv[:3])}: "
                           f"{last_line(res.stderr or res.stdout)}")
    # Lightning imports, and the torch it sees is still Debian's (nothing in the venv shadows it)
    check = subprocess.run([str(python), "-c", "import sys; sys.path.insert(0, sys.argv[1]); import torch_py311; "
                            "torch_py311.install(); import pytorch_lightning, torch; print(torch.__file__)",
                            str(HERE)], capture_output=True, text=True, timeout=300)
    if check.returncode != 0 or not check.stdout.strip().startswith("/usr/lib/python3/"):
        raise TaoError(f"the Lightning venv {dest} cannot import Lightning over Debian's torch: "
                       f"{last_line(check.stderr or check.stdout)}")
    (dest / ".complete").write_text("\n".join(requirements()) + "\n")
    return python
