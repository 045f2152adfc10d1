"""Which images the real nodes get and how: imported into every node's containerd, or
served only by the registry, so a pull needs the pull Secret (test infrastructure)."""
from __future__ import annotations

from . import images, realnodes
from .daemons import _wait
from .realnodes_ctr import _ctr
from .registry import _push, _registry_answers

#: Images only the credential-checking registry serves (a pull needs the pull Secret).
REGISTRY_ONLY = ("tao_toolkit",)


def _load_images(plan: dict) -> None:
    """Build (cached) and hand out the images: push the registry-only ones, import the rest on every node.

    Runs in a thread while the control plane starts: it only waits and runs clients, never writes cluster.json.
    """
    nodes, registry_port = plan["nodes"], plan["registry_port"]
    registry = f"127.0.0.1:{registry_port}"
    preload, served = _images()
    archives = {img.ref: images.archive(img) for img in preload + served}
    _wait("registry", lambda: _registry_answers(registry_port))
    for img in served:
        _push(archives[img.ref], registry, realnodes.registry_path(img.ref))
    for n in nodes:
        _wait(f"containerd-{n.name}", lambda n=n: _ctr(n, "version", check=False, timeout=10).ok)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(nodes) * len(preload)) as pool:  # I/O bound: one ctr per image and node
        jobs = [pool.submit(_ctr, n, "images", "import", str(archives[img.ref])) for n in nodes for img in preload]
        for job in jobs:
            job.result()


def _images() -> tuple[list[images.Image], list[images.Image]]:
    """(imported on every real node, served only by the credential-checking registry)."""
    pins = _image_pins()
    preload = [images.pause(), images.busybox(pins["busybox"]), images.s3_client(pins["s3_client"], pins["awscli"]),
               images.hanging_torchrun()]
    return preload, [images.busybox(pins[k]) for k in REGISTRY_ONLY]


def _image_pins() -> dict[str, str]:
    from taobank import pins as pinsmod

    return {"busybox": str(pinsmod.resolve("images.busybox")),
            "tao_toolkit": str(pinsmod.resolve("images.tao_toolkit.pyt")),
            "s3_client": str(pinsmod.resolve("images.s3_client")),
            "awscli": str(pinsmod.resolve("test_clusters.kubernetes.awscli")),
            "moto": str(pinsmod.resolve("test_clusters.kubernetes.moto"))}
