"""NGC (or any registry) login through ``--password-stdin`` and the image pull with visible progress.

The key comes from an environment variable (NGC_KEY) or a mode-600 file; it only ever reaches the
engine's standard input: never argv, never a record, never a printed line (not even in an error).
"""
from __future__ import annotations

import os
import stat
from typing import Callable

from ... import fsio
from ...errors import TaoError
from ...redact import redact_text
from . import engine as eng
from .spec import check_image

#: NGC's fixed user name for API keys.
NGC_USER = "$oauthtoken"


def image_registry(image: str) -> str:
    """The registry host of an image reference (docker.io when it names none)."""
    first, sep, _ = image.partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else "docker.io"


def read_key(key_env: str = "NGC_KEY", key_file: str | None = None) -> str:
    """The key from ``key_file`` (mode 600, yours) or from ``$key_env``; one line when neither has it."""
    if key_file:
        path = os.path.expanduser(key_file)
        try:
            st = os.stat(path)
        except OSError as exc:
            raise TaoError(f"key file {path}: {exc.strerror}") from None
        if st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
            raise TaoError(f"key file {path} must be a regular file of mode 600 (chmod 600 {path})")
        key = (fsio.read_text(path, "key file", max_bytes=64 * 1024) or "").strip()
    else:
        key = os.environ.get(key_env, "").strip()
    if not key:
        where = f"the file {key_file}" if key_file else f"${key_env}"
        raise TaoError(f"no registry key in {where}: export {key_env} (NGC: an API key from ngc.nvidia.com, "
                       "Setup > API Key) or pass --key-file FILE (mode 600)")
    return key


def login(e: eng.Engine, registry: str, key: str, user: str = NGC_USER) -> str:
    """``<engine> login REGISTRY -u USER --password-stdin`` with the key on stdin; the engine's own line."""
    check_image(registry, "registry")
    res = e.run(["login", "--username", user, "--password-stdin", "--", registry], stdin=key + "\n", check=False,
                what=f"{e.name} login {registry}")
    if not res.ok:
        text = redact_text((res.stderr or res.stdout).replace(key, "***"))  # never echo the key, even in an error
        why = eng.explain(e.name, text, f"{e.name} login {registry}", res.returncode)
        if why.startswith(f"{e.name} login {registry} failed"):  # the engine answered: the registry said no
            why += ": check the registry name and the key (NGC: a personal key, user $oauthtoken); nothing was kept"
        raise TaoError(why)
    return f"logged in to {registry} as {user} ({e.name} keeps the credential in its own store)"


def ensure_image(e: eng.Engine, image: str, policy: str, progress: Callable[[str], None], *,
                 login: Callable[[], str] | None = None, skipped: list[str] | None = None) -> str:
    """Have ``image`` locally as ``policy`` says (missing, always, never); the gate line. ``login`` (the engine's
    login to the image's registry, ``--ngc-pull-secret``) runs just before a pull, never when none is needed.
    ``skipped`` (a dry run): a pull (and its login) is not done but said there."""
    check_image(image)
    have = e.run(["image", "inspect", "--format", "{{.Id}}", "--", image], check=False, what=f"{e.name} image inspect").ok
    if policy == "never" or (have and policy == "missing"):
        if not have:
            raise TaoError(f"image {image} is not on this host and pull is never: {e.name} pull {image} first; "
                           "nothing was done")
        return f"image {image} present"
    if skipped is not None:
        skipped.append(f"pulling {image}{' and the registry login before it' if login else ''} (a dry run pulls "
                       "nothing)")
        return f"image {image} {'present, pulled again by submit' if have else 'not here: submit pulls it'}"
    if login is not None:
        progress(login() + "\n")
    pull(e, image, progress)
    return f"image {image} pulled"


def pull(e: eng.Engine, image: str, progress: Callable[[str], None]) -> None:
    """``<engine> pull IMAGE`` with its progress shown as it comes; a failure says what to do in one line."""
    lines: list[str] = []

    def seen(text: str) -> None:
        lines.append(text)
        progress(text)

    check_image(image)
    rc = e.stream(["pull", "--", image], seen, merge_stderr=True)
    if rc == 0:
        return
    last = (lines[-1].strip() if lines else "") or f"exit {rc}"
    reg = image_registry(image)
    low = " ".join(lines[-3:]).lower()
    if any(w in low for w in ("unauthorized", "authentication required", "denied", "no basic auth")):
        raise TaoError(f"pulling {image} was refused by {reg} (credentials): run tao_docker.py login --registry {reg} "
                       "(key from $NGC_KEY or --key-file); nothing was done")
    if "manifest unknown" in low or "not found" in low or "does not exist" in low:
        raise TaoError(f"image {image} is not in {reg} ({last}): check the name and tag (or log in: some registries "
                       f"hide what you may not pull); nothing was done")
    raise TaoError(f"pulling {image} failed ({last}): check the network to {reg}, or log in (tao_docker.py login "
                   f"--registry {reg}); nothing was done")
