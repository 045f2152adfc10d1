"""Container images for the real nodes, built here without any outside registry (test infrastructure).

Each image is a single layer made from Debian packages (``busybox-static``
for a shell and coreutils; for the S3 image also Python 3 from Debian and the
AWS CLI from PyPI) with ``umoci`` and saved as an OCI archive with ``skopeo``,
cached by content under ``$TAO_CACHE_DIR/images`` so a warm ``up`` only
imports them. The names are the ones the skill and the tests use, so a pod
spec needs no test-only image.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from taobank.errors import TaoError
from taobank.run import last_line, run

BUSYBOX = Path("/bin/busybox")
#: The sandbox ("pause") image containerd starts for every pod; nothing can pull the real one here.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: Keeps a pod's namespaces alive; exits on TERM/INT like the real pause binary.
PAUSE_SCRIPT = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Debian packages of the S3 image's Python (their dependency closure, minus what a
#: read-only Python runtime never uses: dpkg, perl, tar ...).
PYTHON_DEBS = ("python3-minimal", "libpython3.11-stdlib")
SKIP_DEBS = frozenset({"dpkg", "install-info", "perl", "perl-base", "perl-modules-5.36", "libperl5.36",
                       "libgdbm-compat4", "mailcap", "mime-support", "tar", "libacl1", "libselinux1",
                       "libpcre2-8-0", "libmd0", "libzstd1"})
AWS_WRAPPER = "#!/usr/bin/python3\nimport sys\nfrom awscli.clidriver import main\nsys.exit(main())\n"


@dataclass(frozen=True)
class Image:
    """One image: its reference, entrypoint and the files of its single layer."""

    ref: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ("/bin/sh",)
    #: extra files: path in the image -> text
    files: dict = field(default_factory=dict)
    #: Debian packages (with their dependencies) unpacked into the image
    debs: tuple[str, ...] = ()
    #: PyPI requirements installed into the image's dist-packages
    wheels: tuple[str, ...] = ()
    #: the wheels are exact pins installed with --no-deps from the Lightning wheel cache (testclusters.tao_lightning),
    #: offline: pip's resolver would replace the image's Debian torch with a CUDA torch from PyPI
    lightning_wheels: bool = False
    #: dependencies of ``debs`` left out (tools the image never runs)
    skip_debs: frozenset = SKIP_DEBS
    #: symlinks made last (path in the image -> target), replacing busybox's
    links: dict = field(default_factory=dict)

    def key(self) -> str:
        parts = [self.ref, self.entrypoint, self.cmd, sorted(self.files.items()), self.debs,
                 self.wheels, sorted(self.skip_debs), sorted(self.links.items()), _busybox_digest()]
        if self.lightning_wheels:  # only then: the other images keep their cached archives
            parts.append("lightning-wheels")
        blob = json.dumps(parts).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("TAO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tao-skill-bank")
    return Path(base) / "images"


def _busybox_digest() -> str:
    try:
        return hashlib.sha256(BUSYBOX.read_bytes()).hexdigest()[:16]
    except OSError:
        raise TaoError(f"{BUSYBOX} missing: apt-get install busybox-static") from None


def _rootfs(dest: Path, image: Image) -> None:
    """A minimal root: static busybox and its applets, /etc basics, the image's own files."""
    for d in ("bin", "etc", "tmp", "root", "proc", "sys", "dev", "var/tmp", "usr/bin"):
        (dest / d).mkdir(parents=True, exist_ok=True)
    if image.debs:
        _unpack_debs(dest, image.debs, image.skip_debs)
    if image.wheels:
        _install_wheels(dest / "usr" / "lib" / "python3" / "dist-packages", image.wheels, image.lightning_wheels)
    os.chmod(dest / "tmp", 0o1777)
    shutil.copy2(BUSYBOX, dest / "bin" / "busybox")
    res = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True)
    for applet in res.stdout.split():
        if applet != "busybox" and not (dest / "bin" / applet).exists():
            (dest / "bin" / applet).symlink_to("busybox")
    (dest / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
    (dest / "etc" / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    for path, text in image.files.items():
        target = dest / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        target.chmod(0o755)
    for path, points_to in image.links.items():
        link = dest / path.lstrip("/")
        link.unlink(missing_ok=True)
        link.symlink_to(points_to)


def deb_closure(roots: tuple[str, ...], skip: frozenset = SKIP_DEBS) -> list[str]:
    """``roots`` and everything they depend on (apt-cache), minus ``skip``."""
    res = run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
               "--no-breaks", "--no-replaces", "--no-enhances", *roots], timeout=120, what="apt-cache depends")
    names = {line.strip() for line in res.stdout.splitlines() if line and not line.startswith((" ", "<"))}
    return sorted(names - skip)


def _unpack_debs(dest: Path, roots: tuple[str, ...], skip: frozenset) -> None:
    """Download the .debs once (cached) and unpack them; no maintainer script runs."""
    debs = cache_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    names = deb_closure(roots, skip)
    have = {f.name.split("_", 1)[0] for f in debs.glob("*.deb")}
    missing = [n for n in names if n not in have]
    if missing:
        res = subprocess.run(["apt-get", "download", "-q", *missing], cwd=debs, capture_output=True, text=True,
                             timeout=900)
        if res.returncode != 0:
            raise TaoError(f"apt-get download of the S3 image's Python packages failed: {last_line(res.stderr)}")
    for f in sorted(debs.glob("*.deb")):
        if f.name.split("_", 1)[0] in names:
            run(["dpkg-deb", "-x", str(f), str(dest)], timeout=300, what=f"dpkg-deb -x {f.name}")


def _install_wheels(target: Path, requirements: tuple[str, ...], lightning: bool = False) -> None:
    """Pure-Python (or cp311 manylinux) wheels from PyPI for the image's Python 3.11."""
    import sys

    target.mkdir(parents=True, exist_ok=True)
    source: list[str] = []
    if lightning:
        from testclusters import tao_lightning

        source = ["--no-deps", "--no-index", "--find-links", str(tao_lightning.wheels())]
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          "--no-compile", "--only-binary=:all:", "--python-version", "3.11",
                          "--platform", "manylinux2014_x86_64", "--implementation", "cp", *source,
                          "--target", str(target), *requirements], capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise TaoError(f"pip install of {' '.join(requirements)} into an image failed: {last_line(res.stderr)}")
    shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts point at this host's Python


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise TaoError(f"{name} not found: apt-get install umoci skopeo (needed to build the local cluster's images)")
    return found


def archive(image: Image) -> Path:
    """The OCI archive of ``image`` (built once, then reused from the cache)."""
    out = cache_dir() / f"{image.key()}.tar"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    import sys

    print(f"local kubernetes: building image {image.ref} into {out} (first run only)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="tao-image-", dir=out.parent) as tmp:
        layout, rootfs = Path(tmp) / "layout", Path(tmp) / "rootfs"
        _rootfs(rootfs, image)
        umoci = _tool("umoci")
        steps = [
            [umoci, "init", "--layout", str(layout)],
            [umoci, "new", "--image", f"{layout}:build"],
            [umoci, "insert", "--rootless", "--image", f"{layout}:build", str(rootfs), "/"],
            [umoci, "config", "--image", f"{layout}:build", "--architecture", "amd64", "--os", "linux",
             "--config.env", PATH_ENV, "--config.workingdir", "/",
             *[a for e in image.entrypoint for a in ("--config.entrypoint", e)],
             *[a for c in image.cmd for a in ("--config.cmd", c)]],
            [_tool("skopeo"), "copy", "--quiet", f"oci:{layout}:build", f"oci-archive:{out}.partial:{image.ref}"],
        ]
        for argv in steps:
            res = run(argv, timeout=300, check=False, what=Path(argv[0]).name)
            if not res.ok:
                raise TaoError(f"building image {image.ref} failed at {Path(argv[0]).name} {argv[1]}: "
                               f"{last_line(res.stderr or res.stdout)}")
    Path(f"{out}.partial").replace(out)
    return out


def pause() -> Image:
    return Image(PAUSE_IMAGE, entrypoint=("/bin/sh", "-c", PAUSE_SCRIPT), cmd=())


def busybox(ref: str) -> Image:
    return Image(ref)


def s3_client(ref: str, awscli: str) -> Image:
    """/bin/sh, python3 and ``aws`` (the S3 client the tier C fetch/upload containers call)."""
    return Image(ref, entrypoint=(), cmd=("/bin/sh",), files={"/usr/bin/aws": AWS_WRAPPER},
                 debs=PYTHON_DEBS, wheels=(f"awscli=={awscli}",))


#: Debian's Python 3 with numpy, for a search's trials on the real nodes (the runner needs python3 and numpy, as
#: TAO's images have them; the stand-in's fake.lr_optimum uses the same python3).
SEARCH_IMAGE = "tao-local.test/python-numpy:2"


def python_numpy(ref: str = SEARCH_IMAGE) -> Image:
    """/bin/sh and python3 with numpy (Debian's packages and their closure; BLAS and LAPACK where numpy loads them,
    as Debian's alternatives would link them)."""
    return Image(ref, entrypoint=(), cmd=("/bin/sh",), debs=(*PYTHON_DEBS, "python3-numpy"),
                 links={f"{_MULTIARCH}/libblas.so.3": "blas/libblas.so.3",
                        f"{_MULTIARCH}/liblapack.so.3": "lapack/liblapack.so.3"})


#: A torchrun that never returns, as a rank does whose peers never join (no GPU here can run the real
#: all-reduce): it lets the NCCL probe's timeout path run on the real nodes. As in the real PyTorch
#: image, /bin/sh is dash and ``timeout`` is GNU coreutils' (busybox's sh runs its own timeout applet,
#: which execs the command as the container's PID 1, deaf to SIGTERM).
HANGING_TORCHRUN = "#!/bin/sh\necho \"torchrun (local test image): waiting for peers that never join\"\nexec sleep 2147483647\n"
HANG_IMAGE = "tao-local.test/torchrun-hang:1"


def hanging_torchrun() -> Image:
    return Image(HANG_IMAGE, files={"/usr/local/bin/torchrun": HANGING_TORCHRUN}, debs=("coreutils", "dash"),
                 skip_debs=frozenset({"dpkg", "tar", "perl-base", "install-info", "debianutils"}),
                 links={"/bin/sh": "dash"})


#: PyTorch on CPU (Debian's python3-torch: gloo, no CUDA) for ``nccl-probe --backend gloo-cpu`` on the real
#: nodes, with PyTorch Lightning (versions.yaml ``test_clusters.lightning``) for the TAO stand-in's DDP runs
#: (testclusters/tao_lightning; the tag names both versions). Large (about 1 GB unpacked: Debian's torch loads OpenCV, Qt, GDAL ... on import): built once per
#: version and cached like every image here, imported into the nodes only when a test needs it
#: (:func:`testclusters.kubernetes.torch_image.ensure`). /bin/sh is dash and ``timeout`` GNU's, as in the
#: real PyTorch image. The BLAS/LAPACK names are Debian alternatives (made by maintainer scripts, which
#: never run here): linked by hand.
TORCH_CPU_REPO = "tao-local.test/torch-cpu"
_TORCH_SKIP = frozenset({"dpkg", "install-info", "perl", "perl-base", "perl-modules-5.36", "libperl5.36"})
_MULTIARCH = "/usr/lib/x86_64-linux-gnu"


def torch_cpu(version: str) -> Image:
    from testclusters import tao_lightning

    lightning = tao_lightning.key().split("-")[0]
    return Image(f"{TORCH_CPU_REPO}:{version}-lightning{lightning}", debs=("python3-torch", "coreutils", "dash"),
                 skip_debs=_TORCH_SKIP, wheels=tuple(tao_lightning.requirements()), lightning_wheels=True,
                 links={"/bin/sh": "dash", f"{_MULTIARCH}/libblas.so.3": "blas/libblas.so.3",
                        f"{_MULTIARCH}/liblapack.so.3": "lapack/liblapack.so.3"})
