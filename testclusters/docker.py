"""A real Docker engine for the tests and the demo: Debian's ``docker.io`` started as its own dockerd
(test infrastructure).

It runs beside anything else on the machine: its own socket, data root, exec root and pid file under
``${TAO_LOCAL_CLUSTER_DIR:-~/.local/state/tao-skill-bank/clusters}/docker``. This machine's limits
shape the flags: no iptables and no default bridge (containers get the engine's default network, which
is then no network, or ``--network host``), the OOM score left alone (processes here lack
CAP_SYS_RESOURCE), and overlay2 with a fallback to the vfs storage driver where overlay cannot mount.
One image is made here with no registry: a static busybox imported as :data:`IMAGE`.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import time
from pathlib import Path

from taobank.errors import TaoError
from taobank.run import run

from . import apt
from .procs import live_pid, log_tail, stop_pid, wait_for

PACKAGES = ("docker.io", "busybox-static")
DOCKERD = "/usr/sbin/dockerd"
BUSYBOX = Path("/bin/busybox")
#: The image every local job uses (busybox: sh, sleep, head ...), imported from the host's static busybox.
IMAGE = "tao-local.test/busybox:1"
IMAGE_ENV = "TAO_LOCAL_DOCKER_IMAGE"
START_TIMEOUT_S = 60.0


def state_dir() -> Path:
    base = os.environ.get("TAO_LOCAL_CLUSTER_DIR") or str(Path.home() / ".local" / "state" / "tao-skill-bank" / "clusters")
    return Path(base) / "docker"


def _paths() -> dict[str, Path]:
    d = state_dir()
    return {"root": d, "sock": d / "docker.sock", "pid": d / "dockerd.pid", "log": d / "dockerd.log",
            "data": d / "data", "exec": d / "exec", "results": d / "results", "config": d / "client",
            "cluster": d / "cluster.json"}


def env() -> dict[str, str]:
    p = _paths()
    return {"DOCKER_HOST": f"unix://{p['sock']}", "TAO_DOCKER_ENGINE": "docker",
            "TAO_DOCKER_RESULTS_DIR": str(p["results"]), IMAGE_ENV: IMAGE, "DOCKER_CONFIG": str(p["config"]),
            "TAO_DOCKER_NO_GPUS": "1"}  # this engine has no GPU: preflight reports the GPU checks as not run


def _docker(words: list[str], **kw):
    return run(["docker", *words], env={"DOCKER_HOST": env()["DOCKER_HOST"], "DOCKER_CONFIG": env()["DOCKER_CONFIG"]},
               **kw)


def _answers() -> bool:
    return _docker(["version", "--format", "{{.Server.Version}}"], check=False, timeout=10).ok


def _argv(driver: str | None) -> list[str]:
    p = _paths()
    argv = [DOCKERD, "--data-root", str(p["data"]), "--exec-root", str(p["exec"]), "--host", f"unix://{p['sock']}",
            "--pidfile", str(p["pid"]), "--iptables=false", "--ip6tables=false", "--bridge=none",
            "--userland-proxy=false"]
    if "--oom-score-adjust" in subprocess.run([DOCKERD, "--help"], capture_output=True, text=True).stdout:
        argv.append("--oom-score-adjust=0")  # no CAP_SYS_RESOURCE here: never ask for a negative score
    return argv + (["--storage-driver", driver] if driver else [])


def _start(driver: str | None) -> bool:
    p = _paths()
    with open(p["log"], "ab") as log:
        proc = subprocess.Popen(_argv(driver), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    ok = wait_for(lambda: proc.poll() is None and _answers(), START_TIMEOUT_S, interval=0.25)
    if not ok and proc.poll() is None:
        proc.terminate()
        proc.wait(15)
    return ok


def _add_root_user(tar: tarfile.TarFile) -> None:
    """/etc/passwd and /etc/group naming root: what a container's shell and `id` expect."""
    for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
        data = text.encode()
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _import(archive: bytes, image: str, path: str, *, timeout: float) -> None:
    """``docker import`` of a root filesystem tar into the local engine as ``image`` with ``PATH=path``."""
    res = subprocess.run(["docker", "import", "--change", f"ENV PATH={path}", "-", image], input=archive,
                         capture_output=True, env={**os.environ, "DOCKER_HOST": env()["DOCKER_HOST"]}, timeout=timeout)
    if res.returncode != 0:
        raise TaoError(f"docker import of {image} failed: {res.stderr.decode(errors='replace').strip()[-200:]}")


def _image() -> None:
    """Import the busybox image once (a tar of busybox and its applet links; no registry)."""
    if _docker(["image", "inspect", IMAGE], check=False, timeout=30).ok:
        return
    if not BUSYBOX.is_file():
        raise TaoError(f"{BUSYBOX} missing: apt-get install busybox-static")
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True).stdout.split()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "tmp", "etc", "root", "results"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d in ("tmp", "results") else 0o755
            tar.addfile(info)
        tar.add(str(BUSYBOX), "bin/busybox")
        for a in applets:
            if a != "busybox":
                info = tarfile.TarInfo(f"bin/{a}")
                info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(info)
        _add_root_user(tar)
    _import(buf.getvalue(), IMAGE, "/bin", timeout=120)


#: The image of the local search runs (submit --search): busybox as above plus the host's Debian Python 3.11 with
#: numpy (a search trial's runner needs python3 and numpy, as TAO's images have) and gawk (the stand-in trainer's
#: fake.lr_optimum needs awk's log()). Imported from the host's files with their shared libraries; no registry.
PYTHON_IMAGE = "tao-local.test/python:1"
PYTHON_PACKAGES = ("python3", "python3-numpy", "gawk")
_PYTHON_TREES = ("/usr/lib/python3.11", "/usr/lib/python3/dist-packages/numpy")
_PYTHON_SKIP = {"__pycache__", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
                "config-3.11-x86_64-linux-gnu"}


def _libraries(files: list[Path]) -> set[str]:
    """The shared libraries (and the loader) the ELF files among ``files`` load, as ldd names them."""
    out: set[str] = set()
    for f in files:
        res = subprocess.run(["ldd", str(f)], capture_output=True, text=True)
        for line in res.stdout.splitlines():
            words = line.split()
            path = words[2] if len(words) >= 3 and words[1] == "=>" else words[0] if words else ""
            if path.startswith("/"):
                out.add(path)
    return out


def _python_image() -> None:
    """Import :data:`PYTHON_IMAGE` once: busybox's applets, the host's python3.11 with its standard library and
    numpy, gawk, and every shared library they load (dereferenced, at the paths ldd names)."""
    if _docker(["image", "inspect", PYTHON_IMAGE], check=False, timeout=30).ok:
        return
    apt.ensure(PYTHON_PACKAGES, "Python for the local search image")
    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True).stdout.split()
    files: dict[str, Path] = {"usr/bin/python3.11": Path("/usr/bin/python3.11"), "usr/bin/gawk": Path("/usr/bin/gawk")}
    for tree in _PYTHON_TREES:
        for root, dirs, names in os.walk(tree):
            dirs[:] = [d for d in dirs if d not in _PYTHON_SKIP]
            for n in names:
                path = Path(root) / n
                if path.is_file():
                    files[str(path).lstrip("/")] = path
    elves = [p for p in files.values() if p.suffix == ".so" or ".so." in p.name or p.parent.name == "bin"]
    for lib in _libraries(elves):
        files.setdefault(lib.lstrip("/"), Path(lib))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        made: set[str] = set()

        def folder(name: str, mode: int = 0o755) -> None:
            parts = Path(name).parts
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in made:
                    made.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, mode if i == len(parts) else 0o755
                    tar.addfile(info)
        for d in ("bin", "etc", "root"):
            folder(d)
        for d in ("tmp", "results"):
            folder(d, 0o1777)
        tar.add(str(BUSYBOX), "bin/busybox")
        for a in applets:
            if a != "busybox":
                info = tarfile.TarInfo(f"bin/{a}")
                info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(info)
        for name in sorted(files):
            folder(str(Path(name).parent))
            tar.add(str(files[name].resolve()), name)
        info = tarfile.TarInfo("usr/bin/python3")
        info.type, info.linkname = tarfile.SYMTYPE, "python3.11"
        tar.addfile(info)
        _add_root_user(tar)
    _import(buf.getvalue(), PYTHON_IMAGE, "/usr/bin:/bin", timeout=600)


def up() -> dict[str, str]:
    """Start dockerd (idempotent), wait until it answers, import the image; the env a skill user sets."""
    started = time.monotonic()
    apt.ensure(PACKAGES, "Docker engine")
    p = _paths()
    for key in ("root", "data", "exec", "results", "config"):
        p[key].mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(p["results"], 0o755)
    if not (live_pid(p["pid"], DOCKERD) and _answers()):
        driver = json.loads(p["cluster"].read_text()).get("driver") if p["cluster"].is_file() else None
        if not _start(driver):
            if driver == "vfs" or not _start("vfs"):  # overlay2 cannot mount here: the slow, always-working driver
                raise TaoError(f"dockerd did not come up within {START_TIMEOUT_S:.0f}s: see {p['log']} "
                               f"(last line: {log_tail(p['log'])})")
            driver = "vfs"
        p["cluster"].write_text(json.dumps({"driver": driver}) + "\n")
    _image()
    _python_image()
    print(f"local docker: ready in {time.monotonic() - started:.1f}s", file=__import__("sys").stderr)
    return env()


def down() -> None:
    """Stop dockerd by its pid file (it stops its containers and its containerd)."""
    p = _paths()
    pid = live_pid(p["pid"], DOCKERD)
    if pid:
        stop_pid(pid, DOCKERD, grace=30.0)


def status() -> dict:
    p = _paths()
    pid = live_pid(p["pid"], DOCKERD)
    ready = bool(pid) and _answers()
    version = _docker(["version", "--format", "{{.Server.Version}}"], check=False, timeout=10).stdout.strip() \
        if ready else ""
    return {"ready": ready, "pid": pid, "version": version, "socket": str(p["sock"]), "state_dir": str(p["root"])}
