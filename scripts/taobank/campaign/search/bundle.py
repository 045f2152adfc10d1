"""How a search travels with its sweep: ONE zip application (``search.pyz``) and the study's settings, staged
in the sweep's shared folder, and each trial's command wrapped to run the bundle first.

The bundle holds the trial runner (this package, with the bank's status.json parser it reads through) and the
pure-Python distributions Optuna's journal storage needs: optuna, colorlog, tqdm, packaging (and cmaes for
``--search cmaes``), copied from THIS machine's install of the pinned Optuna (``pip install optuna==5.0.0``:
the same code the client reads the study with). numpy is the image's (TAO's images carry it; it is compiled,
so it cannot travel as source). ``python3 search.pyz`` puts the bundle on the runner's own path only: TAO's
process starts with the environment it would have had without a search (no PYTHONPATH is set).

Site requirements (checked where the trial starts, each failure one line): Python 3.10 or later with numpy as
``python3`` in the trial's image (or on the node, SLURM runtime none); the sweep's folder on a filesystem every
trial shares, where creating a symbolic link is atomic (Optuna's journal lock: NFS, Lustre, a PVC, a local
folder).
"""
from __future__ import annotations

import functools
import importlib.metadata
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence

from ...errors import UsageError
from . import settings as settingsmod

#: The distributions the bundle carries (import names = distribution names here), and the optional ones.
CARRIED = ("optuna", "colorlog", "tqdm", "packaging")
OPTIONAL = ("cmaes",)
BUNDLE_FILE = "search.pyz"
#: The sweep's sub-folder holding the bundle, the settings and the journal.
FOLDER = "search"
MAIN = "from taobank.campaign.search.trial import main\nraise SystemExit(main())\n"
#: Fixed file times: the same install makes the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _pure_files(name: str, *, sources_only: bool = False, install: str = "") -> list[tuple[str, Path]]:
    """(path inside the bundle, file here) of an installed pure-Python distribution's package files
    (``sources_only``: its ``.py`` files alone, for a distribution whose compiled speed-ups have pure fallbacks)."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise UsageError(f"a search stages {name} from this machine, which does not have it: pip install "
                         f"{install or f'optuna=={settingsmod.OPTUNA_VERSION}'}") from None
    wheel = dist.read_text("WHEEL") or ""
    if "Root-Is-Purelib: true" not in wheel and not sources_only:
        raise UsageError(f"{name} is not installed as pure Python here: the search bundle cannot carry it")
    out = []
    for f in dist.files or []:
        parts = PurePosixPath(str(f)).parts
        if not parts or parts[0] in ("..", "/") or parts[0].endswith((".dist-info", ".data")) \
                or "__pycache__" in parts or str(f).endswith((".pyc", ".pyo")):
            continue
        if sources_only and not str(f).endswith((".py", ".typed")):
            continue
        out.append((str(PurePosixPath(*parts)), Path(str(dist.locate_file(f)))))
    return out


#: Parts of the bank the runner never imports (the platforms, the command line, the MCP server) and Optuna's own
#: test helpers: left out, the bundle is a quarter smaller (a Kubernetes ConfigMap holds at most 1 MiB).
LEFT_OUT = frozenset({"taobank/platforms", "taobank/cli", "taobank/mcp", "optuna/testing"})


def _kept(arc: str) -> bool:
    return "/".join(arc.split("/")[:2]) not in LEFT_OUT


def _bank_files() -> list[tuple[str, Path]]:
    """The bank's package (the runner and the code it reads status files with), sources only."""
    root = Path(__file__).resolve().parents[2]
    return [(str(PurePosixPath("taobank", *p.relative_to(root).parts)), p) for p in sorted(root.rglob("*.py"))
            if "__pycache__" not in p.parts]


def carried(sampler: str) -> tuple[str, ...]:
    return CARRIED + (("cmaes",) if sampler == "cmaes" else ())


@functools.lru_cache(maxsize=4)
def build(sampler: str = "tpe") -> bytes:
    """The bundle's bytes (the same for the same install); one line when Optuna is missing or not the pinned one."""
    settingsmod.optuna_module()
    members = dict(_bank_files())
    for name in carried(sampler):
        members.update(_pure_files(name))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        info = zipfile.ZipInfo("__main__.py", _EPOCH)
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, MAIN)
        for arc in sorted(a for a in members if _kept(a)):
            info = zipfile.ZipInfo(arc, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, members[arc].read_bytes())
    return buf.getvalue()


#: The most bytes of one part of a database study's libraries (:func:`db_parts`): a Kubernetes ConfigMap holds
#: 1 MiB, and the bundle fills most of one.
PART_BYTES = 900 * 1024
DB_PART = "search-db-{}.zip"


def _zip(members: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for arc in sorted(members):
            info = zipfile.ZipInfo(arc, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, members[arc])
    return buf.getvalue()


@functools.lru_cache(maxsize=1)
def db_parts() -> tuple[bytes, ...]:
    """The libraries a database study needs (:data:`taobank.campaign.search.storage.DB_DISTRIBUTIONS`: SQLAlchemy,
    Alembic, pg8000 ...), sources only, as zip files of at most :data:`PART_BYTES` each (a ConfigMap each on
    Kubernetes); the trial's runner unpacks them (Alembic reads its migrations from real files) before Optuna
    is imported. One line when one of them is missing here or not the pinned release."""
    import zlib

    from . import storage

    members: dict[str, bytes] = {}
    for name, version in storage.DB_DISTRIBUTIONS.items():
        pin = f"{name}=={version}"
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise UsageError(f"a search with {storage.FLAG} stages {name} from this machine, which does not have "
                             f"it: pip install {pin}") from None
        if have != version:
            raise UsageError(f"a search with {storage.FLAG} stages {pin}; this machine has {have}: pip install {pin}")
        for arc, path in _pure_files(name, sources_only=True, install=pin):
            if not arc.startswith(storage.DB_LEFT_OUT):
                members[arc] = path.read_bytes()
        dist = importlib.metadata.distribution(name)
        for f in dist.files or []:  # its METADATA: pg8000 and scramp ask importlib.metadata for their version
            words = PurePosixPath(str(f)).parts
            if len(words) == 2 and words[0].endswith(".dist-info") and words[1] == "METADATA":
                members[str(PurePosixPath(*words))] = Path(str(dist.locate_file(f))).read_bytes()
    parts: list[dict[str, bytes]] = [{}]
    size = 0
    for arc in sorted(members):
        cost = len(zlib.compress(members[arc], 6)) + 100 + 2 * len(arc)
        if parts[-1] and size + cost > PART_BYTES:
            parts.append({})
            size = 0
        parts[-1][arc] = members[arc]
        size += cost
    return tuple(_zip(p) for p in parts)


@dataclass
class Staging:
    """What a search adds to a sweep's launch (``Batch.search``): the files of its folder and each trial's
    command. An adapter only says where the folder is (shared by every trial) and stages the files with the
    sweep's other files."""

    settings: settingsmod.Settings
    python: str = "python3"

    def files(self, study: str) -> dict[str, bytes]:
        """``{name in the search folder: bytes}``: the bundle and the settings (the study named ``study``, the
        sweep's id)."""
        self.settings.study = study
        out = {BUNDLE_FILE: build(self.settings.sampler), settingsmod.SETTINGS_FILE: self.settings.to_json().encode()}
        if self.settings.storage_env:  # a database study: its libraries beside the bundle
            out.update({DB_PART.format(i): part for i, part in enumerate(db_parts())})
        return out

    def settings_text(self, study: str) -> str:
        """The settings file as staged for the study ``study`` (what a dry run shows)."""
        self.settings.study = study
        return self.settings.to_json()

    def wrap(self, argv: Sequence[str], folder: str, trial: int, journal: str | None = None) -> list[str]:
        """The trial's command: the runner first, TAO's argv after ``--`` as it was (``journal``: the study's
        journal when it is not in ``folder``)."""
        folder = folder.rstrip("/")
        return [self.python, f"{folder}/{BUNDLE_FILE}", "--settings", f"{folder}/{settingsmod.SETTINGS_FILE}",
                "--trial", str(int(trial)), *(["--journal", journal] if journal else []), "--",
                *passing_arguments(argv)]

    def prepare(self, study: str) -> str | None:
        """At submit, after the platform's checks and before any record: a database study's database reached from
        this machine and the study ``study`` created in it (one line that never shows its URL otherwise); the
        gate's line, None for a journal study (its file is made by the first trial)."""
        if not self.settings.storage_env:
            return None
        from . import storage

        return storage.prepare(self.settings.storage_env, study, settingsmod.direction(self.settings))

    def check_storage(self, pending: Sequence[str] = ()) -> str | None:
        """A dry run's ``--check``: a database study's database reached from here, nothing written (its URL's
        variable not set here, ``pending``: said, not checked)."""
        name = self.settings.storage_env
        if not name:
            return None
        if name in pending:
            return f"study database ${name} not checked: {name} is not set here"
        from . import storage

        return storage.check_reachable(name)

    def site(self, base: str, *, python: bool) -> tuple[str, list[str]]:
        """(the site check's shell, its arguments) for the results base ``base`` (:mod:`.site`: the journal's lock
        unless the study is in a database; ``python``: this shell's python3 too)."""
        from . import site

        return site.SEARCH_SITE, site.args(base, database=bool(self.settings.storage_env), python=python)

    def site_problems(self, output: str) -> dict[str, str]:
        from . import site

        return site.problems(output)

    def site_refusal(self, said: dict[str, str], **place: str) -> str | None:
        """:func:`.site.refusal`: the one line for what the site check found wrong (None: nothing)."""
        from . import site

        return site.refusal(said, **place)

    @property
    def python_check(self) -> str:
        """What the runner needs of ``python3``, as ``python3 -c`` runs it (an engine that runs the image alone)."""
        from . import site

        return site.PYTHON_CHECK

    def summary(self) -> dict[str, Any]:
        """What each trial's record keeps of the search, as flat backend values (the table and ``sweep best``
        read them: :func:`summary_of`)."""
        s = self.settings
        return {"search": s.sampler, "search_pruner": s.pruner, "search_trials": s.trials, "search_kpi": s.kpi,
                "search_mode": s.mode, "search_mode_from": s.mode_from,
                **({"search_storage_env": s.storage_env} if s.storage_env else {})}


def passing_arguments(argv: Sequence[str]) -> list[str]:
    """``argv`` such that the words the runner appends (the sampled ``key=value`` overrides) reach its command.
    A shell-text command (``sh -c TEXT``, how every platform runs a command given as text) gets them as its own
    last words (``sh -c 'TEXT "$@"' tao-search``; TEXT must be one simple command, the sweeps' rule); one that
    names its own positional words must pass them on with ``"$@"``, or the overrides would be lost: refused."""
    argv = list(argv)
    if len(argv) < 3 or argv[1] != "-c":
        return argv
    text = argv[2]
    if len(argv) == 3:
        from ... import tao_command

        tao_command.append_args({"command": text}, ["search.key=value"])  # one simple command, or one line
        return [argv[0], "-c", f'{text.rstrip()} "$@"', "tao-search"]
    if "$@" not in text and "${@}" not in text:
        raise UsageError('the command is shell text with words of its own after it but no "$@": the overrides each '
                         'search trial appends would never reach TAO; end the text with "$@"')
    return argv


def journal_path(folder: str) -> str:
    return f"{folder.rstrip('/')}/{settingsmod.JOURNAL_FILE}"


def summary_of(backend: Mapping[str, Any]) -> dict[str, Any] | None:
    """A record's search summary, ``{sampler, pruner, trials, kpi, mode, mode_from, dir, storage_env}`` (None: not
    a search; ``storage_env``: the NAME of the variable holding its database's URL, "" for a journal study)."""
    from . import is_search

    if not is_search(backend):
        return None
    return {"sampler": backend["search"], "pruner": backend.get("search_pruner"),
            "trials": backend.get("search_trials"), "kpi": backend.get("search_kpi"),
            "mode": backend.get("search_mode"), "mode_from": backend.get("search_mode_from") or "flag",
            "dir": backend.get("search_dir"), "storage_env": backend.get("search_storage_env") or ""}
