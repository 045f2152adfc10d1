"""A study read back on this machine: its journal's text (fetched by the platform in one read) opened with
Optuna itself, so the trials' parameters, states and values are Optuna's own reading of the study.

Each trial's runner tags its Optuna trial with the bank's job id (``job_id``), which is how a sweep's record
finds its trial. A journal caught while a trial writes it may end in a torn line: it is read up to its last
whole line.
"""
from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ...errors import TaoError
from ...records import Record
from . import settings as settingsmod


@dataclass
class StudyTrial:
    """One Optuna trial of the study, as the sweep table shows it."""

    number: int
    state: str
    params: dict[str, Any] = field(default_factory=dict)
    value: float | None = None
    #: epochs the trial reported (its last step)
    epochs: int = 0
    job_id: str = ""

    def words(self) -> dict[str, str]:
        """The parameters as the ``key=value`` words the trial's TAO got."""
        from .trial import value_word

        return {k: value_word(v) for k, v in self.params.items()}

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Study:
    """The study's trials by the bank's job id, and its best trial (None before one completed)."""

    name: str
    trials: list[StudyTrial]
    best: StudyTrial | None = None

    def by_job(self) -> dict[str, StudyTrial]:
        return {t.job_id: t for t in self.trials if t.job_id}


def whole_lines(text: str) -> str:
    """The journal up to its last whole line (a line being written is not read)."""
    return text if not text or text.endswith("\n") else text[: text.rfind("\n") + 1]


def read(text: str, name: str, *, where: str = "the study journal") -> Study:
    """The study ``name`` in the journal ``text``; an empty journal is a study without trials yet. A journal
    Optuna cannot read is one line naming ``where``."""
    text = whole_lines(text)
    if not text.strip():
        return Study(name, [])
    optuna = settingsmod.optuna_module()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="tao-study-") as tmp:
        path = os.path.join(tmp, settingsmod.JOURNAL_FILE)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            study = optuna.load_study(study_name=name, storage=JournalStorage(JournalFileBackend(path)))
            frozen = study.get_trials(deepcopy=False)
        except Exception as exc:  # a damaged journal, a study of another name: one line, whatever Optuna raised
            raise TaoError(f"{where} cannot be read as study {name} ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:160] if str(exc) else 'no detail'})") from None
    return of_frozen(name, frozen, study.direction.name == "MINIMIZE")


def read_database(storage_env: str, name: str) -> Study:
    """The study ``name`` in the database whose URL is in this process's variable ``storage_env`` (a database
    study: :mod:`taobank.campaign.search.storage`); one line that never shows the URL when it cannot be read."""
    from . import storage

    optuna = settingsmod.optuna_module()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = storage.url_from(storage_env)
    rdb = storage.opened(url, storage_env)
    try:
        study = optuna.load_study(study_name=name, storage=rdb)
        frozen = study.get_trials(deepcopy=False)
        minimize = study.direction.name == "MINIMIZE"
    except KeyError:
        raise TaoError(f"the study database in ${storage_env} holds no study {name}") from None
    except Exception as exc:
        raise TaoError(storage.failure_line(exc, url, storage_env)) from None
    finally:
        rdb.engine.dispose()
    return of_frozen(name, frozen, minimize)


def of_frozen(name: str, frozen: list[Any], minimize: bool) -> Study:
    """The study from Optuna's frozen trials."""
    trials = []
    for t in frozen:
        value = t.value if t.value is not None and math.isfinite(t.value) else None
        steps = list(t.intermediate_values)
        trials.append(StudyTrial(t.number, t.state.name, dict(t.params), value, max(steps) if steps else 0,
                                 str(t.user_attrs.get("job_id") or "")))
    done = [(t.value, t) for t in trials if t.state == "COMPLETE" and t.value is not None]
    best = None
    if done:
        sign = 1.0 if minimize else -1.0
        best = min(done, key=lambda vt: sign * vt[0])[1]
    return Study(name, trials, best)


def fetch(rec: Record) -> tuple[str, str] | None:
    """(the text of the study journal of the search ``rec`` is a trial of, where it is): ONE read through the
    platform (:meth:`taobank.core.platform.Platform.read_search_file`); None for a record of no search (or not
    launched yet)."""
    from ...core import platform as core
    from . import bundle

    summary = bundle.summary_of(rec.backend)
    if summary is None or not summary.get("dir"):
        return None
    path = bundle.journal_path(str(summary["dir"]))
    return core.get(rec.platform).read_search_file(rec, path), path


def storage_env_of(rec: Record) -> str:
    """The NAME of the variable holding the URL of the database the search trial ``rec``'s study is in ("": its
    study is a journal file)."""
    from . import bundle

    summary = bundle.summary_of(rec.backend)
    return str(summary.get("storage_env") or "") if summary else ""


def of_trial(rec: Record) -> "Study | None":
    """The study the search trial ``rec`` belongs to, as Optuna reads it (None: not a search's trial): from its
    journal (one read through the platform) or its database (this machine must reach it, with the URL in the
    same variable the submit named)."""
    if storage_env_of(rec):
        return read_database(storage_env_of(rec), str(rec.sweep or ""))
    got = fetch(rec)
    if got is None:
        return None
    return read(got[0], str(rec.sweep or ""), where=f"the study journal {got[1]}")
