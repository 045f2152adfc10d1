"""A local PostgreSQL for the tests of database studies (``submit --search --study-storage-env``): Debian's
``postgresql`` package (installed with apt when missing), one server started on 127.0.0.1 with a temporary data
folder, password authentication (SCRAM) and a random password, stopped and removed when the test is done.

PostgreSQL refuses to run as root: the server runs as the package's ``postgres`` user (``runuser``). Test
infrastructure only: nothing of the bank starts a database.
"""
from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from taobank.errors import TaoError

PACKAGES = ("postgresql",)
USER, DATABASE = "tao", "postgres"


@dataclass
class Database:
    """A running server: its port and the URL of its database (a secret: tests keep it in the environment)."""

    port: int
    password: str
    folder: Path
    #: the address the URL names (the first one the server listens on)
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{self.password}@{self.host}:{self.port}/{DATABASE}"

    def processes(self) -> list[int]:
        """The server's processes: its postmaster (``postmaster.pid``) and every backend it forked."""
        main = int((self.folder / "data" / "postmaster.pid").read_text().split()[0])
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(main)], capture_output=True, text=True)
        return [main, *(int(p) for p in out.stdout.split())]

    @contextlib.contextmanager
    def stalled(self) -> Iterator[None]:
        """The server frozen (SIGSTOP to every process of it) for the block's time, as a host stalled under load:
        connections and answers wait; then it goes on (SIGCONT)."""
        pids = self.processes()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # a backend that ended meanwhile
                os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            # runuser stops itself when its child stops (su's job control) and must be woken too
            parent = int(Path(f"/proc/{pids[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
            for pid in (*pids, parent):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)


def binaries() -> Path:
    """The server's programs (``/usr/lib/postgresql/<major>/bin``), the package installed when missing."""
    from testclusters import apt

    apt.ensure(PACKAGES, "study database (PostgreSQL)")
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise TaoError("postgresql is installed but no /usr/lib/postgresql/*/bin/initdb was found")
    return Path(found[-1]).parent


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def running(base: Path | None = None, *, listen: tuple[str, ...] = ("127.0.0.1",)) -> Iterator[Database]:
    """A PostgreSQL server on the addresses ``listen`` for the block's time (its data folder under ``base`` or a
    temporary one); its URL names the first address. Password (SCRAM) authentication from any client address
    (a pod's, when an address other than 127.0.0.1 is listened on)."""
    bindir = binaries()
    folder = Path(tempfile.mkdtemp(prefix="tao-pg.", dir=base))
    password = secrets.token_hex(16)
    data, sock, pwfile = folder / "data", folder / "sock", folder / "pw"
    sock.mkdir()
    pwfile.write_text(password + "\n", encoding="utf-8")
    pwfile.chmod(0o600)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        for p in (sock, pwfile):
            shutil.chown(p, "postgres")
        folder.chmod(0o700)
    proc = None
    try:
        subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}",
                                     "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"]),
                       check=True, capture_output=True, timeout=120)
        with open(data / "pg_hba.conf", "a", encoding="utf-8") as fh:  # a pod's address too (still a password)
            fh.write("host all all 0.0.0.0/0 scram-sha-256\n")
        port = _free_port()
        log = open(folder / "server.log", "wb")
        proc = subprocess.Popen(_as_postgres([str(bindir / "postgres"), "-D", str(data), "-h", ",".join(listen),
                                              "-p", str(port), "-k", str(sock), "-c", "fsync=off"]),
                                stdout=log, stderr=subprocess.STDOUT)
        db = Database(port, password, folder, listen[0])
        _wait(db, proc)
        yield db
    finally:
        if proc is not None:
            try:  # fast shutdown (SIGINT to the postmaster): clients still connected are cut, not waited for
                os.kill(int((data / "postmaster.pid").read_text().split()[0]), signal.SIGINT)
            except (OSError, ValueError, IndexError):
                proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _wait(db: Database, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    import pg8000.native  # type: ignore[import-untyped]

    end = time.time() + timeout
    while True:
        if proc.poll() is not None:
            text = (db.folder / "server.log").read_text(errors="replace")[-400:]
            raise TaoError(f"the local PostgreSQL exited {proc.returncode}: {text}")
        try:
            pg8000.native.Connection(USER, host=db.host, port=db.port, password=db.password,
                                     database=DATABASE, timeout=5).close()
            return
        except Exception:
            if time.time() > end:
                raise TaoError(f"the local PostgreSQL did not accept connections on {db.host}:{db.port} in "
                               f"{timeout:g} s") from None
            time.sleep(0.3)
