"""Where a study lives: Optuna's journal file on the sweep's shared folder (the default), or a PostgreSQL database
many sweeps share (``--study-storage-env NAME``: Optuna's RDB storage).

The database's URL carries a password, so it is a secret and travels as every secret of the bank does: by the
NAME of an exported variable (the ``--secret-env`` rule, :func:`taobank.envfile.check_secret_name`), its value
sent to each trial on the platform's secret channel (a Kubernetes Secret referenced by env, SLURM's credentials
file staged on stdin, Docker's ``--env NAME`` read from the engine's environment). The settings, records,
manifests, argv and every line printed hold the NAME only; a line about the database never quotes the URL or
any part of it (:func:`failure_line`). The trial's runner reads the URL from its environment and takes the
variable out of TAO's (TAO never sees the password).

The database driver is pg8000 (pure Python, so it travels in the search's folder as source with SQLAlchemy and
Alembic, which Optuna's RDB storage needs: :data:`DB_DISTRIBUTIONS`); ``postgresql://`` URLs are read as
``postgresql+pg8000://``.
"""
from __future__ import annotations

import os
import re
from typing import Any, Mapping

from ...errors import TaoError, UsageError

#: The URL schemes taken (psycopg2 is compiled and cannot travel: every URL is opened with pg8000).
SCHEMES = ("postgresql", "postgres", "postgresql+pg8000")
DRIVER = "postgresql+pg8000"
#: The pure-Python distributions a database study needs beside Optuna (pinned in requirements-dev.txt), and the
#: package folders each one carries (import names). SQLAlchemy and MarkupSafe ship compiled speed-ups with pure
#: fallbacks: their sources travel, the compiled parts do not.
DB_DISTRIBUTIONS = {"sqlalchemy": "2.1.9", "alembic": "1.20.1", "mako": "1.4.3", "markupsafe": "3.0.3",
                    "typing_extensions": "4.16.0", "pg8000": "1.31.6", "scramp": "1.5.0", "asn1crypto": "1.5.1",
                    "python-dateutil": "2.9.0.post0", "six": "1.17.0"}
#: What the database libraries leave out: their test suites and the dialects a PostgreSQL study never loads.
DB_LEFT_OUT = ("sqlalchemy/testing/", "sqlalchemy/dialects/mssql/", "sqlalchemy/dialects/oracle/", "sqlalchemy/ext/mypy/",
               "alembic/testing/", "mako/testing/", "mako/ext/")
FLAG = "--study-storage-env"
#: How long one connection attempt waits (a trial, the submit's check, a read): an unreachable host is one line.
CONNECT_TIMEOUT_SECONDS = 15


def check_name(name: object) -> str:
    """The NAME of the exported variable that holds the database URL; a URL pasted in its place is refused unseen."""
    from ...envfile import check_secret_name

    if isinstance(name, str) and "://" in name:
        raise UsageError(f"{FLAG} takes the NAME of an exported variable holding the database URL, never the URL "
                         "(it holds a password; it is not shown): export TAO_STUDY_DB=... and give "
                         f"{FLAG} TAO_STUDY_DB")
    return check_secret_name(name, f"{FLAG} name")


def checked_url(url: str, name: str) -> str:
    """The URL as Optuna opens it (``postgresql+pg8000://...``); one line naming ``name`` (never the URL) when
    it is not a PostgreSQL URL."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep or scheme.lower() not in SCHEMES or not rest:
        raise UsageError(f"{name} does not hold a PostgreSQL URL (its value is not shown): export {name}="
                         "postgresql://<user>:<password>@<host>:<port>/<database>")
    return f"{DRIVER}://{rest}"


def url_from(name: str, env: Mapping[str, str] | None = None) -> str:
    """The database URL in the variable ``name`` of ``env`` (this process's environment by default), checked."""
    env = os.environ if env is None else env
    value = env.get(check_name(name))
    if not value:
        raise TaoError(f"{FLAG} {name}: {name} is not set in the environment: export it first (the study "
                       "database's URL, postgresql://<user>:<password>@<host>:<port>/<database>)")
    return checked_url(value, name)


def secrets_of(url: str) -> list[str]:
    """The parts of ``url`` no line may show: the URL itself (and its given spelling), its password, its
    ``user:password`` and everything before the host."""
    out = [url, url.split("://", 1)[-1]]
    rest = url.split("://", 1)[-1]
    auth = rest.rsplit("@", 1)[0] if "@" in rest else rest  # no host: all of it may be the password
    if auth:
        out.append(auth)
        if ":" in auth:
            out.append(auth.split(":", 1)[1])
    return sorted({s for s in out if s}, key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` with every part of ``url`` that holds the password masked, then the bank's redaction."""
    from ...redact import MASK, redact_text

    for part in secrets_of(url):
        text = text.replace(part, MASK)
    text = re.sub(r"[A-Za-z][\w+.-]*://[^\s'\"]*@", f"{MASK}@", text)  # any user:password@ left (another spelling)
    return redact_text(text)


def failure_line(exc: BaseException, url: str, name: str) -> str:
    """One line about a database that failed: the exception's first line, every part of the URL masked."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else "no detail"
    text = re.sub(r"\s*\(Background on this error at: [^)]*\)", "", text)
    said = re.search(r"'M': '([^']*)'", text)  # PostgreSQL's own message in pg8000's dict
    if said:
        text = said.group(1)
    return f"the study database in ${name} cannot be used ({type(exc).__name__}: {scrub(text, url)[:240]})"


def rdb(url: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> Any:
    """Optuna's RDB storage on ``url`` (SQLAlchemy with pg8000); its tables made when they are not there yet.
    ``timeout``: pg8000's socket timeout, for the connection and for every answer; each call has a connection
    of its own."""
    from optuna.storages import RDBStorage
    from sqlalchemy.pool import NullPool

    # no pool: a connection that timed out mid-answer is closed with its call, never handed to the next one
    return RDBStorage(url, engine_kwargs={"poolclass": NullPool, "connect_args": {"timeout": timeout}})


def opened(url: str, name: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> Any:
    """:func:`rdb`, with any failure one line that never shows the URL."""
    try:
        return rdb(url, timeout)
    except Exception as exc:  # SQLAlchemy, pg8000 and Optuna raise many kinds: all are this one line
        raise TaoError(failure_line(exc, url, name)) from None


def prepare(name: str, study: str, direction: str, env: Mapping[str, str] | None = None) -> str:
    """At submit, from this machine: the database reached, Optuna's tables made and the study ``study`` created
    (a study of that name there already is refused); one line that never shows the URL otherwise. The line
    for the gate."""
    optuna = _need("optuna")
    url = url_from(name, env)
    storage = opened(url, name)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        optuna.create_study(storage=storage, study_name=study, direction=direction, load_if_exists=False)
    except optuna.exceptions.DuplicatedStudyError:
        raise TaoError(f"the study database in ${name} holds a study {study} already: nothing was done") from None
    except Exception as exc:
        raise TaoError(failure_line(exc, url, name)) from None
    finally:
        try:
            storage.engine.dispose()
        except Exception:
            pass
    return f"study database ${name} reached from here: study {study} created in it (its trials must reach it too)"


def check_reachable(name: str, env: Mapping[str, str] | None = None) -> str:
    """A dry run's check: the database reached from this machine, nothing written; the line for the gate."""
    reach(url_from(name, env), name)
    return f"study database ${name} reached from here (its trials must reach it too)"


def reach(url: str, name: str) -> None:
    """One connection and ``SELECT 1`` (nothing written); one line that never shows the URL when it fails. The
    submit's check from this machine, and from where the trials run (the runner's ``--check-storage``)."""
    sqlalchemy = _need("sqlalchemy")
    try:
        engine = sqlalchemy.create_engine(url, connect_args={"timeout": CONNECT_TIMEOUT_SECONDS})
        try:
            with engine.connect() as conn:
                conn.execute(sqlalchemy.text("SELECT 1"))
        finally:
            engine.dispose()
    except Exception as exc:
        raise TaoError(failure_line(exc, url, name)) from None


def _need(module: str) -> Any:
    """``module`` (Optuna, SQLAlchemy: this machine reaches the database too), or one line saying how to get it.
    (:mod:`.settings` checks Optuna's release; it imports this module, so this one does not import it.)"""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        pins = " ".join(f"{n}=={v}" for n, v in DB_DISTRIBUTIONS.items() if n in ("sqlalchemy", "alembic", "pg8000"))
        raise UsageError(f"a search with {FLAG} reaches its database from this machine too: pip install optuna "
                         f"{pins}") from None
