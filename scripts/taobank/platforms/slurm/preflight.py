"""Preflight on the login host (one remote command) and the enroot
credentials install (the key travels on stdin only)."""
from __future__ import annotations

import re

import os
from typing import Any, Mapping

from ...contract import Finding, preflight_ok
from ...errors import TaoError
from . import remote, resources, storage
from .ssh import Connection

ENROOT_HINT = ("Pyxis on the compute nodes reads ~/.config/enroot/.credentials (not NGC_KEY from the job "
               "environment); without it a private nvcr.io pull fails with \"Could not process JSON input\". "
               "Install it once per (cluster, user): tao_slurm.py enroot-credentials (see references/ssh-setup.md)")


_REGISTRY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*(?::[0-9]{1,5})?\Z")

#: The netrc machines a registry's pulls authenticate against: NGC's token service is its own host
#: (enroot's import documentation lists both lines for nvcr.io).
CREDENTIAL_MACHINES: dict[str, tuple[str, ...]] = {"nvcr.io": ("nvcr.io", "authn.nvidia.com")}


def credential_machines(registry: str) -> tuple[str, ...]:
    """The ``machine`` lines ``registry`` needs in ~/.config/enroot/.credentials."""
    if not _REGISTRY.match(registry or ""):
        raise TaoError("--registry must be a host name like nvcr.io (letters, digits, '.', '-', optional :port)")
    return CREDENTIAL_MACHINES.get(registry, (registry,))


def run_preflight(*, partition: str | None = None, private_registry: bool = False, registry: str = "nvcr.io",
                  env: Mapping[str, str] | None = None, conn: Connection | None = None) -> dict[str, Any]:
    env = os.environ if env is None else env
    needed = credential_machines(registry)
    conn = conn or Connection(env)
    host = conn.connect()
    spec = {"partition": partition} if partition else {}
    parts = resources.resolve(spec, env).partition
    base = storage.base_dir({}, env)
    res = conn.script(remote.PREFLIGHT, [parts, base], what="preflight", retry_on_drop=True)
    sections: dict[str, list[str]] = {}
    key = "head"
    missing_cmds = []
    for line in res.stdout.splitlines():
        if line.startswith("@@missing_cmd "):
            missing_cmds.append(line.split(" ", 1)[1])
        elif line.startswith("@@"):
            key = line[2:].strip()
            sections[key] = []
        else:
            sections.setdefault(key, []).append(line)
    known = {}
    for line in sections.get("partitions", []):
        f = line.split("|")
        if len(f) >= 5:
            known[f[0].rstrip("*")] = {"avail": f[1], "timelimit": f[2], "nodes": f[3], "gres": f[4]}
    found = [Finding("OK", "ssh", f"ssh: {conn.user or ''}@{host.entry} (BatchMode, host key checked)")]
    if missing_cmds:
        found.append(Finding("MISSING", "slurm", f"SLURM commands not on the login host PATH: {' '.join(missing_cmds)}"))
    else:
        found.append(Finding("OK", "slurm", "slurm commands: sbatch squeue sacct scancel srun sinfo scontrol"))
    wanted = [p for p in parts.split(",") if p]
    conv = (env.get("TAO_SLURM_CONVERSION_PARTITION") or "").strip()
    if conv and conv not in wanted:
        wanted.append(conv)  # the image conversion jobs' partition must exist too
    absent = [p for p in wanted if p not in known]
    if absent:
        found.append(Finding("MISSING", "partitions", f"partition(s) {', '.join(absent)} not in sinfo (have: "
                             f"{', '.join(sorted(known)) or 'none'}): set SLURM_PARTITION"))
    else:
        found.append(Finding("OK", "partitions", "partitions: " + ", ".join(
            f"{p} ({known[p]['avail']}, limit {known[p]['timelimit']}, gres {known[p]['gres']})" for p in wanted)))
    base_state = (sections.get("base") or ["absent"])[0]
    if base_state == "writable":
        found.append(Finding("OK", "results-base", f"results base: {base} writable"))
    elif base_state.startswith("creatable "):
        found.append(Finding("OK", "results-base", f"results base: {base} does not exist yet; submit creates it "
                             f"({base_state.split(' ', 1)[1]} is writable)"))
        base_state = "creatable"
    else:
        found.append(Finding("MISSING", "results-base", f"results base {base} is {base_state}: set "
                             "SLURM_BASE_RESULTS_DIR to your folder on the shared filesystem"))
    creds = (sections.get("enroot") or ["absent"])[0]
    machines = [ln.split(" ", 1)[1] for ln in (sections.get("enroot") or [])[1:] if ln.startswith("machine ")]
    lacking = [m for m in needed if m not in machines]
    if private_registry and lacking:
        found.append(Finding("MISSING", "enroot", f"enroot credentials have no machine line for {', '.join(lacking)}. "
                             + ENROOT_HINT))
    else:
        shown = f" (machines: {', '.join(machines)})" if machines else ""
        found.append(Finding("OK" if creds == "present" else "INFO", "enroot", f"enroot credentials: {creds}{shown}"))
    pyxis = (sections.get("pyxis") or ["no"])[0] == "yes"
    found.append(Finding("INFO", "pyxis", "pyxis (srun --container-image): " + (
        "available" if pyxis else "not available: use container_runtime none or ask the admins")))
    acct = (sections.get("sacct") or ["unavailable"])[0]
    found.append(Finding("INFO", "accounting", f"accounting (sacct): {acct}"
                         f"{'' if acct == 'ok' else '; status falls back to the exit marker'}"))
    return {"ok": preflight_ok(found), "login_host": host.entry, "partitions": known, "results_base": base,
            "results_base_state": base_state, "enroot_credentials": creds, "enroot_machines": machines,
            "pyxis": pyxis, "accounting": acct, "missing_commands": missing_cmds,
            "findings": [f.to_dict() for f in found], "lines": [f.line() for f in found]}


#: Where Pyxis (enroot) reads registry credentials, on the cluster (netrc format, mode 600).
ENROOT_CREDENTIALS_FILE = "~/.config/enroot/.credentials"
#: What a preview prints in place of the key.
KEY_MASK = "********"


def enroot_credential_lines(registry: str, key: str, *, key_env: str = "NGC_KEY",
                            password: str | None = None) -> tuple[tuple[str, ...], str]:
    """The registry's machine names and their netrc lines (nvcr.io: also authn.nvidia.com), each with
    ``password`` (default: the key); a one-line TaoError, never naming the key, when ``key`` is empty or the
    registry is not a host name."""
    if not key:
        raise TaoError(f"{key_env} is not set: export it (read it with 'read -rs {key_env}'), then run again")
    machines = credential_machines(registry)
    login = "$oauthtoken" if registry == "nvcr.io" else os.environ.get("ENROOT_REGISTRY_USER", "$oauthtoken")
    secret = key if password is None else password
    return machines, "".join(f"machine {m} login {login} password {secret}\n" for m in machines)


def install_enroot_credentials(registry: str, key: str, *, key_env: str = "NGC_KEY", conn: Connection | None = None) -> str:
    """Append/replace the registry's netrc lines (nvcr.io: also authn.nvidia.com); the key goes on stdin, never argv."""
    machines, lines = enroot_credential_lines(registry, key, key_env=key_env)
    conn = conn or Connection()
    conn.script(remote.ENROOT_CREDS, list(machines), stdin=lines, what="install enroot credentials")
    return conn.connect().entry


def preview_enroot_credentials(registry: str, key: str, *, key_env: str = "NGC_KEY") -> dict[str, Any]:
    """What :func:`install_enroot_credentials` would write, the key masked, checking what it checks before
    its SSH call (the key set, the registry, the SSH settings) and contacting nothing."""
    machines, lines = enroot_credential_lines(registry, key, key_env=key_env, password=KEY_MASK)
    conn = Connection()
    return {"registry": registry, "machines": list(machines), "login_hosts": [h.entry for h in conn.hosts],
            "file": ENROOT_CREDENTIALS_FILE, "mode": "600", "key_env": key_env,
            "lines": lines.splitlines()}
