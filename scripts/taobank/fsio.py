"""Private, atomic file writes, bounded reads, and the bounded parse of what is read: the one way the bank writes
and reads a file, and parses a document anyone may have written.

A temp file in the same folder (created mode 600 whatever the umask), written
and fsynced, then renamed over the target and the folder fsynced: a writer
killed at any point leaves the old file or the new one, never a torn one.

JSON and YAML from files and flags that anyone may have written are parsed here too (:func:`json_value`,
:func:`yaml_value`): job specs, action requests, records, caches, versions.yaml, ``--args-json``. YAML aliases
are refused (a few nested anchors expand to gigabytes), nesting is capped (deep nesting overflows the parser's
recursion), and every parser error, including Python's limit on integer digits, becomes one line naming the
source.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

from .errors import missing
from .errors import TaoError, UsageError

#: Bytes per read of a local copy (a fetch from Docker or S3): large enough for C speed, small enough for memory.
CHUNK = 1 << 20


def write_temp(folder: Path, prefix: str, data: bytes) -> str:
    """``data`` in a new mode-600 temp file of ``folder`` (fsynced); its path."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_each(folder: Path, files: Sequence[tuple[str, str, bytes]], *, new: bool = False) -> int:
    """Each ``(name, temp prefix, data)`` of ``files`` written in order as one file of ``folder``, each as
    :func:`write_private` writes one (a mode-600 temp file, fsynced, then moved into place and the folder
    fsynced), one call for a batch (a sweep's records). ``new``: a file is linked into place, never over one that
    exists; the batch stops at the first whose name exists. Returns how many were written (``len(files)``: all);
    an error raises once the files before it are in place."""
    for n, (name, prefix, data) in enumerate(files):
        tmp = write_temp(folder, prefix, data)
        try:
            if new:
                os.link(tmp, folder / name)
            else:
                os.replace(tmp, folder / name)
        except FileExistsError:
            if new:
                return n
            raise
        except BaseException:
            if not new:
                os.unlink(tmp)
            raise
        finally:
            if new:
                os.unlink(tmp)
        fsync_dir(folder)
    return len(files)


def write_private(path: Path | str, text: str | bytes) -> None:
    """Replace ``path`` atomically with ``text`` (UTF-8, or bytes as they are), mode 600."""
    path = Path(path)
    tmp = write_temp(path.parent, f".{path.name}.", text if isinstance(text, bytes) else text.encode("utf-8"))
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(path.parent)


#: Largest file the bank reads whole: specs, records, caches, env files and logs are far smaller.
MAX_READ_BYTES = 16 * 1024 * 1024


def read_cache(path: Path | str, what: str, *, max_bytes: int = 1024 * 1024) -> dict:
    """A small JSON object the bank keeps as a cache (its own file, never followed through a link): {} when it is
    missing, unreadable, damaged or not an object, which only costs what the cache saves."""
    try:
        raw = read_regular(path, what, max_bytes=max_bytes, follow_links=False, missing_ok=True)
        data = json_value(raw, what) if raw else {}
    except TaoError:
        return {}
    return data if isinstance(data, dict) else {}


def read_regular(path: Path | str, what: str, *, max_bytes: int = MAX_READ_BYTES, follow_links: bool = True,
                 missing_ok: bool = False) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``; else one-line TaoError.

    The one way the bank reads a file: a FIFO, a device (``/dev/zero``) or a
    socket never blocks or exhausts memory, because the file is opened
    non-blocking and checked with ``fstat`` before any read. ``follow_links``
    False (the bank's own state files) refuses a symlink. ``missing_ok``: a
    missing file gives None.
    """
    p = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise TaoError(f"cannot read {what} {p}: no such file", exit_code=2) from None
    except OSError as exc:
        why = "a symlink (never followed here)" if exc.errno in (errno.ELOOP, errno.EMLINK) else exc.strerror
        raise TaoError(f"cannot read {what} {p}: {why}", exit_code=2) from None
    except ValueError:  # a NUL in the path: no file can have that name
        raise TaoError(f"cannot read {what} {str(p)!r}: a path cannot hold a NUL character", exit_code=2) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise TaoError(f"{what} {p} is a directory: give the file", exit_code=2)
        if not stat.S_ISREG(st.st_mode):
            raise TaoError(f"{what} {p} is not a regular file (a FIFO, device or socket): give a plain file", exit_code=2)
        if st.st_size > max_bytes:
            raise TaoError(f"{what} {p} is larger than {max_bytes} bytes: that is not a {what}", exit_code=2)
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise TaoError(f"cannot read {what} {p}: {exc.strerror}", exit_code=2) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise TaoError(f"{what} {p} is larger than {max_bytes} bytes: that is not a {what}", exit_code=2)
    return data


#: What :func:`read_json` gives: the file's bytes (None: missing), the JSON value (None when it did not parse), and
#: the one-line error of the parse (None when it parsed).
JsonRead = tuple["bytes | None", Any, "TaoError | None"]


def read_json(path: Path | str, what: str, parsed_what: str, **kwargs: object) -> JsonRead:
    """:func:`read_regular` and then :func:`json_value` (named ``parsed_what`` in its error) in one call: a file
    that cannot be read raises, a document that does not parse comes back as its error, so a caller words the
    two its own way (a record: "remove or restore it", "restore it or remove it")."""
    raw = read_regular(path, what, **kwargs)  # type: ignore[arg-type]
    if raw is None:
        return None, None, None
    try:
        return raw, json_value(raw, parsed_what), None
    except TaoError as exc:
        return raw, None, exc


def read_json_each(paths: Iterable[Path], what: str, **kwargs: object) -> list[tuple[Path, JsonRead | TaoError]]:
    """:func:`read_json` of each path (its error named ``<what> <path>``), one call for a folder's files (a list
    of records): ``(path, what read_json gives)``, or ``(path, the one-line TaoError)`` for a file that cannot be
    read."""
    out: list[tuple[Path, JsonRead | TaoError]] = []
    for p in paths:
        try:
            out.append((p, read_json(p, what, f"{what} {p}", **kwargs)))
        except TaoError as exc:
            out.append((p, exc))
    return out


def read_text(path: Path | str, what: str, **kwargs: object) -> str | None:
    """:func:`read_regular` decoded as UTF-8 (one-line TaoError when it is not)."""
    data = read_regular(path, what, **kwargs)  # type: ignore[arg-type]
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TaoError(f"{what} {path} is not UTF-8 text: save it as UTF-8") from None


def flag_yaml(path: str, flag: str, what: str, max_bytes: int) -> object:
    """The YAML of a file a flag names (``--sweep-file``, ``--space-file``): a regular file under ``max_bytes`` (a
    FIFO or /dev/zero refused, never waited on), parsed bounded with unique keys at every level; a problem is the
    user's, one line (UsageError)."""
    try:
        text = read_text(path, what, max_bytes=max_bytes) or ""
        return yaml_value(text, f"{flag} {path}", unique_keys=True)
    except TaoError as exc:
        raise UsageError(str(exc)) from None


# ---------------------------------------------------------------- bounded parsing
#: Deepest nesting a document may have; a job spec needs fewer than ten levels.
MAX_DEPTH = 64


def _depth_ok(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return True


def json_value(text: str | bytes, what: str) -> Any:
    """``text`` parsed as JSON; one-line TaoError when it is not JSON or is nested deeper than MAX_DEPTH."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else "not valid JSON"
        raise TaoError(f"{what} is {why}") from None
    if not _depth_ok(value):
        raise TaoError(f"{what} is nested deeper than {MAX_DEPTH} levels")
    return value


_LOADER: Any = None
_UNIQUE_LOADER: Any = None


def _loader() -> Any:
    """A SafeLoader that refuses aliases and nesting deeper than MAX_DEPTH while composing (before any expansion)."""
    global _LOADER
    if _LOADER is None:
        try:
            import yaml
        except ImportError:
            raise missing("yaml") from None

        class Loader(yaml.SafeLoader):
            _depth = 0

            def compose_node(self, parent: Any, index: Any) -> Any:
                if self.check_event(yaml.AliasEvent):
                    mark = self.peek_event().start_mark
                    raise yaml.YAMLError(f"line {mark.line + 1}: YAML aliases (*name) are not accepted: "
                                         "write the value out")
                self._depth += 1
                try:
                    if self._depth > MAX_DEPTH:
                        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
                    return super().compose_node(parent, index)
                finally:
                    self._depth -= 1

        _LOADER = Loader
    return _LOADER


def _unique_loader() -> Any:
    """:func:`_loader` that also refuses a key given twice in one mapping (YAML keeps the last one silently)."""
    global _UNIQUE_LOADER
    if _UNIQUE_LOADER is None:
        try:
            import yaml
        except ImportError:
            raise missing("yaml") from None

        class UniqueLoader(_loader()):  # type: ignore[misc]
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                _no_key_twice(self, node)
                return super().construct_mapping(node, deep=deep)

        _UNIQUE_LOADER = UniqueLoader
    return _UNIQUE_LOADER


def _no_key_twice(loader: Any, node: Any) -> None:
    """Refuse a mapping ``node`` that gives a key twice (YAML keeps the last one silently)."""
    import yaml

    seen: set = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key: the base class says so
            dup = False
        if dup:
            raise yaml.YAMLError(f"line {key_node.start_mark.line + 1}: the key {str(key)[:60]!r} is given "
                                 "twice in one mapping: give it once")


_C_LOADERS: dict[bool, Any] = {}


def _c_loader(yaml: Any, unique_keys: bool) -> Any:
    """libyaml's SafeLoader (PyYAML's C parser, about 10x faster on a TAO spec), the unique-key rule of
    :func:`_unique_loader` kept (mappings are still built in Python); None where PyYAML has no libyaml. Its
    composer is C, so aliases and depth are refused by :func:`_events_ok` first."""
    if not getattr(yaml, "__with_libyaml__", False):
        return None
    if unique_keys not in _C_LOADERS:
        if unique_keys:
            class CUniqueLoader(yaml.CSafeLoader):  # type: ignore[misc,name-defined]
                def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                    _no_key_twice(self, node)
                    return super().construct_mapping(node, deep=deep)

            _C_LOADERS[True] = CUniqueLoader
        else:
            _C_LOADERS[False] = yaml.CSafeLoader
    return _C_LOADERS[unique_keys]


def _events_ok(yaml: Any, text: str) -> None:
    """The alias and depth rules of :func:`_loader`, on libyaml's parse events (before anything is built): a node
    is as deep as the collections open around it, plus one."""
    nodes, opening, closing = (yaml.ScalarEvent, yaml.AliasEvent), (yaml.MappingStartEvent, yaml.SequenceStartEvent), \
        (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    open_now = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise yaml.YAMLError(f"line {event.start_mark.line + 1}: YAML aliases (*name) are not accepted: "
                                 "write the value out")
        if isinstance(event, nodes + opening) and open_now + 1 > MAX_DEPTH:
            raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(event, opening):
            open_now += 1
        elif isinstance(event, closing):
            open_now -= 1


def yaml_value(text: str, what: str, *, unique_keys: bool = False) -> Any:
    """``text`` parsed as YAML (JSON is YAML); one-line TaoError naming ``what`` on any problem.
    ``unique_keys``: a key given twice in one mapping is refused instead of silently keeping the last."""
    try:
        import yaml
    except ImportError:
        raise missing("yaml") from None
    try:
        fast = _c_loader(yaml, unique_keys) if isinstance(text, str) else None
        if fast is not None:
            _events_ok(yaml, text)
            return yaml.load(text, Loader=fast)  # noqa: S506 - libyaml's SafeLoader
        return yaml.load(text, Loader=_unique_loader() if unique_keys else _loader())  # noqa: S506 - SafeLoader
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TaoError(f"{what} is not valid YAML/JSON: {first}") from None
    except (ValueError, RecursionError, OverflowError):  # e.g. an integer of more than 4,300 digits
        raise TaoError(f"{what} holds a value YAML cannot represent here (a number too long, or nesting too deep)") from None
