"""The one subprocess runner of the bank.

argv lists only (never a shell string), secrets on stdin only, a timeout on
every call, and a call log the tests and benchmarks read (``CALLS``).
"""
from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, Callable, Iterator, Mapping, Sequence, cast

from .errors import TaoError
from .text import valid_text

#: Every argv run in this process, in order (benchmarks count kubectl/ssh calls).
CALLS: list[list[str]] = []

#: When set (tests, benchmarks), each argv is also appended as one JSON line here.
CALL_LOG_ENV = "TAO_CALL_LOG"


@dataclass
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def __post_init__(self) -> None:
        # a child's bytes (a real one, or a recorded answer in bytes) become text by the one rule
        self.stdout, self.stderr = decode_output(self.stdout), decode_error(self.stderr)

    @property
    def ok(self) -> bool:
        return self.returncode == 0


#: A stand-in for the operating system in unit tests: ``(argv, stdin) -> Result``
#: (or raise TaoError). None runs real processes. Set with :func:`fake_processes`.
_fake: Callable[[list[str], str | None], "Result"] | None = None


def decode_output(data: bytes | str | None) -> str:
    """A child's standard output as text that holds every byte it wrote: invalid UTF-8 (a Latin-1 byte in a
    status file, a file name that is not UTF-8) becomes lone surrogates, which an argv or a path turns back into
    the same bytes (a name listed can be fetched or removed), and which :func:`taobank.text.one_line` shows
    escaped and :func:`taobank.text.valid_text` turns into U+FFFD where text is stored or parsed."""
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")


def output_lines(text: str | None) -> list[str]:
    """A child's output as the lines its protocol wrote, split at ``\n`` only: ``str.splitlines`` also splits at
    ``\r``, ``\x0b``, ``\x1c``, NEL and U+2028, which a file name may hold (a name read as two lines is a file
    that is not there and one that is lost)."""
    return (text or "").split("\n")


def decode_error(data: bytes | str | None) -> str:
    """A child's standard error as text: only ever quoted in a message, so an invalid byte becomes U+FFFD."""
    if data is None:
        return ""
    return valid_text(data) if isinstance(data, str) else data.decode("utf-8", "replace")


@contextmanager
def fake_processes(answer: Callable[[list[str], str | None], "Result"]) -> Iterator[None]:
    """Route every :func:`run` and :func:`stream` of this process to ``answer`` (unit tests).

    Every kubectl and ssh call of the bank goes through this module, so the
    orchestration (submit, adopt, retry, cancel) can be tested in
    milliseconds against recorded answers.
    """
    global _fake
    saved, _fake = _fake, answer
    try:
        yield
    finally:
        _fake = saved


def run(
    argv: Sequence[str],
    *,
    stdin: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    what: str | None = None,
) -> Result:
    """Run ``argv`` and capture its output.

    ``stdin`` is the only way to hand a secret to a child. With ``check`` a
    non-zero exit raises TaoError naming ``what`` (default: the program) and
    the last line of stderr.
    """
    argv = _record([str(a) for a in argv])
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    label = what or os.path.basename(argv[0])
    if _fake is not None:
        res = _fake(argv, stdin)
        if check and not res.ok:
            raise TaoError(f"{label} failed (exit {res.returncode}): {last_line(res.stderr or res.stdout)}")
        return res
    try:
        proc = subprocess.run(
            argv,
            input=stdin.encode("utf-8", "surrogateescape") if stdin is not None else None,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=full_env,
        )
    except FileNotFoundError:
        raise TaoError(f"{argv[0]} not found on PATH: install it or fix PATH") from None
    except subprocess.TimeoutExpired:
        raise TaoError(f"{label} did not answer within {timeout:.0f}s: check connectivity and retry") from None
    # the child's bytes as they are: Result decodes them once, by the one rule (its __post_init__)
    res = Result(argv, proc.returncode, proc.stdout, proc.stderr)  # type: ignore[arg-type]
    if check and not res.ok:
        raise TaoError(f"{label} failed (exit {res.returncode}): {last_line(res.stderr or res.stdout)}")
    return res


def spawn_detached(argv: Sequence[str], *, log: str | os.PathLike, env: Mapping[str, str],
                   cwd: str | os.PathLike | None = None) -> int:
    """Start ``argv`` in its own session (it outlives this process and its terminal), output appended to the
    mode-600 file ``log``, ``env`` as its whole environment, in the folder ``cwd``; its pid. Under
    :func:`fake_processes` the call is answered (pid = the answer's stdout) and nothing starts."""
    argv = _record([str(a) for a in argv])
    if _fake is not None:
        res = _fake(argv, None)
        if not res.ok:
            raise TaoError(f"{os.path.basename(argv[0])} did not start: {last_line(res.stderr)}")
        return int(res.stdout.strip() or 0)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True,
                                close_fds=True, env=dict(env), cwd=cwd)
    except OSError as exc:
        raise TaoError(f"{os.path.basename(argv[0])} did not start: {exc.strerror}") from None
    finally:
        os.close(fd)
    return proc.pid


def _record(argv: list[str]) -> list[str]:
    """Append ``argv`` to CALLS and, when TAO_CALL_LOG is set, to that file."""
    CALLS.append(argv)
    log = os.environ.get(CALL_LOG_ENV)
    if log:
        import json

        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(argv) + "\n")
    return argv


def stream(argv: Sequence[str], on_text: Callable[[str], None], *, env: Mapping[str, str] | None = None,
           merge_stderr: bool = False) -> int:
    """Run ``argv`` and hand its output to ``on_text`` line by line as it comes (follow modes); the exit code.
    ``env``: variables added to this process's environment for the child (as :func:`run`); ``merge_stderr``:
    its standard error comes through ``on_text`` too (a pull's refusal is read, not only shown)."""
    argv = _record([str(a) for a in argv])
    if _fake is not None:
        res = _fake(argv, None)
        if res.stdout:
            on_text(res.stdout)
        return res.returncode
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                                encoding="utf-8", errors="replace", bufsize=1,
                                env=None if env is None else {**os.environ, **env},
                                stderr=subprocess.STDOUT if merge_stderr else None)
    except FileNotFoundError:
        raise TaoError(f"{argv[0]} not found on PATH: install it or fix PATH") from None
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            on_text(line)
    return proc.wait()


@contextmanager
def pipe(argv: Sequence[str], *, stdin: str | None = None, what: str | None = None) -> Iterator[BinaryIO]:
    """Run ``argv`` and hand its standard output as a binary stream (a tar over ``kubectl exec`` or ssh).

    No timeout: a transfer takes as long as it takes (ssh's keep-alives end a dead link). ``stdin`` is
    written by a thread, so a child that writes before it has read everything cannot deadlock. On leaving
    the block the exit code is checked (non-zero: TaoError with stderr's last line); a block that fails
    kills the child, and the child's own error, when it has one, is the one reported.
    """
    import io
    import tempfile
    import threading

    argv = _record([str(a) for a in argv])
    label = what or os.path.basename(argv[0])
    if _fake is not None:
        res = _fake(argv, stdin)
        data = (res.stdout or "").encode("utf-8", "surrogateescape")
        try:
            yield io.BytesIO(data)
        except (TaoError, OSError, EOFError):
            if not res.ok:
                raise TaoError(f"{label} failed (exit {res.returncode}): {last_line(res.stderr or '')}") from None
            raise
        if not res.ok:
            raise TaoError(f"{label} failed (exit {res.returncode}): {last_line(res.stderr or '')}")
        return
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err)
        except FileNotFoundError:
            raise TaoError(f"{argv[0]} not found on PATH: install it or fix PATH") from None
        feeder = None
        if stdin is not None:
            def feed() -> None:
                # stdin is closed whatever happens: a child left waiting on it would hang the caller
                try:
                    proc.stdin.write(stdin.encode("utf-8", "surrogateescape"))  # type: ignore[union-attr]
                except (OSError, UnicodeError):
                    pass  # the child stopped reading: its exit code says why
                finally:
                    try:
                        proc.stdin.close()  # type: ignore[union-attr]
                    except OSError:
                        pass
            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()

        def failure() -> TaoError | None:
            err.seek(0)
            text = err.read().decode("utf-8", "replace")
            return None if proc.returncode == 0 else TaoError(
                f"{label} failed (exit {proc.returncode}): {last_line(text)}")

        assert proc.stdout is not None
        try:
            yield cast(BinaryIO, proc.stdout)  # a pipe opened in binary mode
        except BaseException:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            why = failure()
            if why is not None and proc.returncode > 0:  # the child's own error (not our kill) explains it best
                raise why from None
            raise
        finally:
            if feeder is not None:
                feeder.join(timeout=5)
        while proc.stdout.read(1 << 16):  # what the reader left (a tar's end padding)
            pass
        proc.wait()
        why = failure()
        if why is not None:
            raise why


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (what a one-line error quotes)."""
    for line in reversed((text or "").splitlines()):
        if line.strip():
            return line.strip()
    return "(no output)"


def _catchable() -> list:
    import signal

    return [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None]


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """Inside the block SIGTERM and SIGHUP end the process as Ctrl-C does (KeyboardInterrupt), so ``finally``
    clauses run (a reader pod deleted, a fetch's verified bytes kept) where the default would kill it on the
    spot. Only where the handler is still the default, and only on the main thread (no handlers elsewhere)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    mine = [s for s in _catchable() if signal.getsignal(s) == signal.SIG_DFL]
    for s in mine:
        signal.signal(s, stop)
    try:
        yield
    finally:
        for s in mine:
            signal.signal(s, signal.SIG_DFL)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP ignored for the block (a cleanup a second Ctrl-C must not cut short)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = [signal.SIGINT, *_catchable()]
    old = {s: signal.getsignal(s) for s in sigs}
    for s in sigs:
        signal.signal(s, signal.SIG_IGN)
    try:
        yield
    finally:
        for s in sigs:
            signal.signal(s, old[s] if old[s] is not None else signal.SIG_DFL)
