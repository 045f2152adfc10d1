"""The credential-checking docker-registry on loopback that serves the ``nvcr.io/...``
images: start it, see it answer, push to it (test infrastructure)."""
from __future__ import annotations

import json
import os
import shutil
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from taobank.run import run
from . import k8s_pki, realnodes
from .cluster_state import _paths
from .daemons import _spawn, _which


def _start_registry(port: int) -> None:
    """docker-registry on loopback: TLS from the cluster CA, one htpasswd user with a random password."""
    import secrets

    d = _paths()["registry"]
    (d / "storage").mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    pki = _paths()["pki"]
    k8s_pki.issue(pki, k8s_pki.Cert("registry", "tao-local-registry", server=True, client=False,
                                    sans=k8s_pki.LOOPBACK_SANS))
    key = secrets.token_urlsafe(24)
    k8s_pki.write_private(d / "ngc-key", key)
    res = run(["htpasswd", "-niB", realnodes.REGISTRY_USER], stdin=key + "\n", timeout=60, what="htpasswd")
    k8s_pki.write_private(d / "htpasswd", res.stdout.strip() + "\n")
    config = realnodes.registry_config(d / "storage", port, pki / "registry.crt", pki / "registry.key",
                                       d / "htpasswd")
    (d / "config.yml").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    import base64

    auth = base64.b64encode(f"{realnodes.REGISTRY_USER}:{key}".encode()).decode()
    k8s_pki.write_private(d / "auth.json", json.dumps({"auths": {f"127.0.0.1:{port}": {"auth": auth}}}))
    (d / "certs").mkdir(exist_ok=True)
    shutil.copyfile(pki / "ca.crt", d / "certs" / "ca.crt")
    _spawn("registry", [_which("docker-registry"), "serve", str(d / "config.yml")])


def _registry_answers(port: int) -> bool:
    """The registry is up when /v2/ answers 401 (it demands credentials)."""
    ctx = ssl.create_default_context(cafile=str(_paths()["pki"] / "ca.crt"))
    try:
        urllib.request.urlopen(f"https://127.0.0.1:{port}/v2/", timeout=3, context=ctx)  # noqa: S310
    except urllib.error.HTTPError as exc:
        return exc.code == 401
    except (OSError, ValueError):
        return False
    return False


def _push(archive: Path, registry: str, path: str) -> None:
    d = _paths()["registry"]
    run(["skopeo", "copy", "--quiet", "--dest-authfile", str(d / "auth.json"), "--dest-cert-dir", str(d / "certs"),
         f"oci-archive:{archive}", f"docker://{registry}/{path}"], timeout=300, what=f"skopeo copy to {path}")
