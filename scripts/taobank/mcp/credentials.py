"""The keys a submit needs, found in the server's environment or the user's credentials file, or stored there.

The credentials file is the one the tao-setup skill documents: ``$TAO_ENV_FILE``, else ``~/.config/tao/.env``,
mode 600, ``NAME=value`` lines. An agent's client starts the server without the shell that loads that file
(``set -a; . file``), so for a name a call needs and the environment lacks, the server reads the file itself
(the bank's one reader, :func:`taobank.envfile.read`, refusing a file others can read). A key the user gave
through the one-time page (:mod:`.keypage`) is written there as one ``NAME='value'`` line, mode 600, and put in
this process's environment, where the helper takes it by name as it takes an exported one.

Plain Python: no SDK. No function here returns, prints or raises a value.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from .. import envfile, fsio
from ..errors import TaoError

#: The variable that names another credentials file (tao-setup's load block reads the same one).
FILE_ENV = "TAO_ENV_FILE"
DEFAULT_FILE = "~/.config/tao/.env"
#: The NGC key a submit with ngc_pull_secret pulls with (Kubernetes: the job's pull Secret; Docker: the engine's login).
NGC_KEY = "NGC_KEY"
MAX_KEY = 16 * 1024


def env_file(environ: Mapping[str, str] | None = None) -> Path:
    """The user's credentials file: ``$TAO_ENV_FILE``, else ``~/.config/tao/.env``."""
    env = os.environ if environ is None else environ
    return Path(os.path.expanduser(env.get(FILE_ENV) or DEFAULT_FILE))


def needed(tool: str, arguments: Any) -> list[str]:
    """The credential names a submit call needs: ``secret_env``, the spec file's ``secrets`` (a file that
    does not load is left to the helper's own line), ``NGC_KEY`` for ``ngc_pull_secret``; for ``continue``,
    the same of the job's saved spec and options. A name that is not one (a value pasted in its place) is
    left to the helper, which refuses it unseen."""
    if not isinstance(arguments, dict):
        return []
    if tool == "continue":
        arguments = _saved(arguments.get("id"))
    elif not tool.startswith("submit_"):
        return []
    names: list[Any] = list(arguments.get("secret_env") or []) if isinstance(arguments.get("secret_env"), list) else []
    listed = arguments.get("secrets")
    path = arguments.get("spec")
    if isinstance(path, str) and path:
        from ..spec import load_file

        try:
            listed = load_file(path).get("secrets")
        except TaoError:
            listed = None
    names += listed if isinstance(listed, list) else []
    if arguments.get("ngc_pull_secret") is True:
        names.append(NGC_KEY)
    return [n for n in dict.fromkeys(n for n in names if isinstance(n, str)) if _a_name(n)]


def _saved(job: Any) -> dict:
    """The saved options of job ``job`` with its saved spec's ``secrets`` (what ``continue`` submits again);
    empty where none was kept (the helper says so)."""
    from ..core import jobfiles
    from .. import records

    if not isinstance(job, str):
        return {}
    try:
        records.load(job)  # a job id, of a job of these records (never a path)
        spec, options = jobfiles.load_spec(job)
    except TaoError:
        return {}
    return {**options, "secrets": spec.get("secrets")}


def _a_name(name: str) -> bool:
    try:
        envfile.check_secret_name(name)
    except TaoError:
        return False
    return True


def load(names: list[str]) -> list[str]:
    """Put each of ``names`` that this process's environment lacks into it from the credentials file; the
    names still missing. A file others can read, or a bad line, is a one-line :class:`TaoError`."""
    missing = [n for n in names if not os.environ.get(n)]
    path = env_file()
    if not missing or not path.exists():
        return missing
    values = envfile.read(path, what="credentials file", private=True)
    for name in missing:
        if values.get(name):
            os.environ[name] = values[name]
    return [n for n in missing if not os.environ.get(n)]


def check_key(value: str) -> str:
    """A key the file can hold as one line that its two readers (the shell's ``.``, :func:`envfile.read`)
    read back the same (:func:`envfile.check_value`, the file's one rule); a one-line error (never showing it)
    otherwise."""
    if not value:
        raise TaoError("no key was given: paste it and send it again")
    if len(value) > MAX_KEY:
        raise TaoError(f"the key is longer than {MAX_KEY} characters: is it a key? nothing was stored")
    return envfile.check_value(value, "key")


def store(name: str, value: str) -> Path:
    """Write ``name='value'`` into the credentials file (its other lines kept, an old line of ``name``
    replaced), mode 600 in a folder made mode 700; then into this process's environment. The file's path."""
    envfile.check_secret_name(name)
    value = check_key(value.strip())
    path = env_file()
    lines: list[str] = []
    try:
        if path.exists():
            envfile.read(path, what="credentials file", private=True)  # refuses a file others can read, a bad line
            text = (fsio.read_regular(path, "credentials file", max_bytes=1024 * 1024) or b"").decode("utf-8")
            lines = [ln for ln in envfile.split_lines(text.removesuffix("\n")) if _defines(ln) != name]
        else:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        lines.append(envfile.line_of(name, value, "key"))
        fsio.write_private(path, "\n".join(lines) + "\n")
    except OSError as exc:
        raise TaoError(f"cannot write the credentials file {path}: {exc.strerror or type(exc).__name__}; "
                       "nothing was stored") from None
    os.environ[name] = value
    return path


def _defines(line: str) -> str:
    return (envfile.parse_line(line) or ("", ""))[0]


def missing_line(tool: str, names: list[str]) -> str:
    """The one line for a client that cannot ask the user (no URL elicitation): which file takes the key."""
    path = env_file()
    return (f"error: {tool} needs {', '.join(names)}, set neither in the MCP server's environment nor in {path}: "
            f"add the line {names[0]}=<value> to that file (mode 600; the tao-setup skill) and call again; "
            "a key never goes into a tool call; nothing was done")
