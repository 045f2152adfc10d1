"""Certificates and kubeconfigs of the local Kubernetes cluster, made with the openssl CLI.

One throwaway CA signs every serving and client certificate (ECDSA P-256,
loopback names only). Keys are written mode 600 inside the cluster's state
folder and never leave it.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from taobank.errors import TaoError
from taobank.run import run

#: Service IP range of the local cluster; its first address is the kubernetes Service.
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"

_MIN_CONFIG = "[req]\ndistinguished_name = dn\n[dn]\n"


@dataclass(frozen=True)
class Cert:
    """A certificate request: file stem, subject CN/O, usage and SANs."""

    name: str
    cn: str
    org: str | None = None
    server: bool = False
    client: bool = True
    sans: tuple[str, ...] = ()


def _openssl_req(pki: Path, cert: Cert, *, ca: bool = False) -> None:
    subject = f"/CN={cert.cn}" + (f"/O={cert.org}" if cert.org else "")
    argv = [
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-days", "3650", "-subj", subject, "-config", str(pki / "openssl.cnf"),
        "-keyout", str(pki / f"{cert.name}.key"), "-out", str(pki / f"{cert.name}.crt"),
    ]
    if ca:
        argv += ["-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
    else:
        usages = [u for u, on in (("serverAuth", cert.server), ("clientAuth", cert.client)) if on]
        argv += ["-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
                 "-addext", "basicConstraints=critical,CA:FALSE",
                 "-addext", "keyUsage=critical,digitalSignature,keyEncipherment",
                 "-addext", "extendedKeyUsage=" + ",".join(usages)]
        if cert.sans:
            argv += ["-addext", "subjectAltName=" + ",".join(cert.sans)]
    run(argv, timeout=60, what=f"openssl (certificate {cert.name})")
    os.chmod(pki / f"{cert.name}.key", 0o600)


LOOPBACK_SANS = ("IP:127.0.0.1", "DNS:localhost")
APISERVER_SANS = LOOPBACK_SANS + (
    f"IP:{KUBERNETES_SERVICE_IP}", "DNS:kubernetes", "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local",
)

#: Every certificate of the cluster. system:masters is the apiserver's built-in
#: superuser group (admin, kwok, the apiserver's own kubelet client).
CERTS = (
    Cert("apiserver", "kube-apiserver", server=True, client=False, sans=APISERVER_SANS),
    Cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"),
    Cert("admin", "tao-local-admin", "system:masters"),
    Cert("controller-manager", "system:kube-controller-manager", server=True, sans=LOOPBACK_SANS),
    Cert("scheduler", "system:kube-scheduler", server=True, sans=LOOPBACK_SANS),
    Cert("kwok", "kwok-controller", "system:masters"),
    Cert("kwok-serving", "kwok-kubelet", server=True, client=False, sans=LOOPBACK_SANS),
)


def ensure_openssl() -> None:
    """The openssl CLI (Debian package ``openssl``); installed with apt-get when missing and root."""
    import shutil

    if shutil.which("openssl"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise TaoError("openssl not found: install the openssl package (apt-get install openssl)")
    apt_env = {"DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], timeout=600, env=apt_env, what="apt-get update")
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "openssl"], timeout=600,
        env=apt_env, what="apt-get install openssl")


def issue(pki: Path, cert: Cert) -> None:
    """Sign one more certificate with the cluster's CA (kubelets, registry, CoreDNS)."""
    _openssl_req(pki, cert)


def make_pki(pki: Path, user: str, user_group: str) -> None:
    """Create the CA, every component certificate, the restricted user's and the SA key pair."""
    ensure_openssl()
    pki.mkdir(parents=True, exist_ok=True)
    os.chmod(pki, 0o700)
    (pki / "openssl.cnf").write_text(_MIN_CONFIG, encoding="utf-8")
    _openssl_req(pki, Cert("ca", "tao-local-ca"), ca=True)
    for cert in CERTS + (Cert("user", user, user_group),):
        _openssl_req(pki, cert)
    # Service-account token signing key (ES256).
    run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-out", str(pki / "sa.key")], timeout=60, what="openssl (service-account key)")
    os.chmod(pki / "sa.key", 0o600)
    run(["openssl", "pkey", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub")],
        timeout=60, what="openssl (service-account public key)")


def kubeconfig(server: str, pki: Path, users: list[tuple[str, str, str]], current: str,
               namespace: str | None = None) -> str:
    """A kubeconfig (JSON is valid YAML) with one context per ``(context, user, cert stem)``.

    Certificates are referenced by path, so the file holds no key material.
    """
    cluster = "tao-local"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {
            "server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": user, "user": {
            "client-certificate": str(pki / f"{stem}.crt"),
            "client-key": str(pki / f"{stem}.key")}} for _, user, stem in users],
        "contexts": [{"name": ctx, "context": {"cluster": cluster, "user": user,
                                               **({"namespace": namespace} if namespace else {})}}
                     for ctx, user, _ in users],
        "current-context": current,
        "preferences": {},
    }
    return json.dumps(doc, indent=2) + "\n"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 600 from the start."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
