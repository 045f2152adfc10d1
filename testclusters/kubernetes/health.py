"""Health checks of the daemons over HTTP(S): /health, /healthz, and the API
server's /readyz with the admin certificate (test infrastructure)."""
from __future__ import annotations

import ssl
import urllib.request

from .cluster_state import _paths


def _http_ok(url: str, want: str = "ok", context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as resp:  # noqa: S310 (loopback only)
            return resp.status == 200 and want in resp.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return False


def _https_ok(port: int) -> bool:
    """A component's /healthz (its serving cert is ours; only liveness matters here)."""
    ctx = ssl.create_default_context(cafile=str(_paths()["pki"] / "ca.crt"))
    return _http_ok(f"https://127.0.0.1:{port}/healthz", context=ctx)


def _api_ready(data: dict) -> bool:
    server = data.get("server")
    pki = _paths()["pki"]
    if not server or not (pki / "admin.crt").exists():
        return False
    try:
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    except (OSError, ssl.SSLError):
        return False
    return _http_ok(f"{server}/readyz", context=ctx)
