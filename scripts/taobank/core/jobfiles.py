"""The files a job keeps beside its record (its mode-700 artifact folder ``<state>/<id>.d/``, each file mode 600).

The spec it was submitted with (``submit-spec.json``), so ``continue`` can run it again: written by the core's
submit, it holds what a submit needs to be repeated, never a secret (``secrets`` / ``--secret-env`` hold variable
names; their values are read again at the next submit).

Its final logs, redacted: the engine or cluster drops a job's output with the job (``docker rm``,
ttlSecondsAfterFinished), so every platform keeps the last lines here; a credential the job printed must not
outlive it in a plain file.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import fsio, records
from ..errors import TaoError
from ..redact import redact_text

SPEC_FILE = "submit-spec.json"
#: The submit options repeated by ``continue`` (names and places only: no value of a secret).
KEPT_OPTIONS = ("secret_env", "secrets_file", "ngc_pull_secret", "config", "namespace", "context")


def save_spec(job_id: str, spec: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> None:
    """Keep ``spec`` (as given to submit) and the repeatable ``options`` of job ``job_id``."""
    save_specs([(job_id, spec)], options)


def save_specs(jobs: Sequence[tuple[str | records.Record, Mapping[str, Any]]],
               options: Mapping[str, Any] | None = None, files: Sequence[Mapping[str, str]] = ()) -> None:
    """:func:`save_spec` of each ``(job id or record, spec)`` (a sweep's trials, submitted with the same
    ``options``), in order, with each job's ``files`` (:attr:`taobank.contract.Plan.kept`, written as given): the
    texts linted in one run of scanner calls, the folders of the jobs given by id found in one read."""
    opts = {k: v for k, v in (options or {}).items() if k in KEPT_OPTIONS and v not in (None, (), [], False)}
    kept = {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()}
    texts, failure, held = [], None, []
    for job, spec in jobs:  # a spec that cannot be kept ends the batch: the ones before it are kept
        try:
            texts.append(json.dumps({"spec": dict(spec), "options": kept}, sort_keys=True, default=str))
            held.append(job)
        except (TypeError, ValueError) as exc:
            failure = TaoError(f"the spec of job {getattr(job, 'id', job)} cannot be kept as JSON ({exc})")
            break
    from ..redact import lint_text

    found = [lint_text(text, SPEC_FILE) for text in texts]
    for n, hits in enumerate(found):
        if hits:  # a value that looks like a credential is never written down: only why (continue says it)
            rules = ", ".join(sorted({f.rule for f in hits}))
            texts[n] = json.dumps({"not_kept": f"a value in its spec looks like a credential ({rules}); the bank "
                                               "never writes one down"}, sort_keys=True)
    folders = records.artifact_dirs(held)  # a Record in hand is not read again
    for folder, text, more in zip(folders, texts, [*files, *[{}] * (len(texts) - len(files))]):
        if isinstance(folder, TaoError):
            raise folder
        fsio.write_private(folder / SPEC_FILE, text + "\n")
        for name, content in more.items():
            fsio.write_private(folder / name, content)
    if failure is not None:
        raise failure


def load_spec(job_id: str) -> tuple[dict, dict]:
    """(spec, options) job ``job_id`` was submitted with; one line when the bank kept none."""
    path = records.state_dir() / f"{job_id}.d" / SPEC_FILE
    raw = fsio.read_regular(path, "saved spec", follow_links=False, missing_ok=True)
    if raw is None:
        raise TaoError(f"job {job_id} has no saved spec ({path}): it was submitted before this bank kept one, "
                       "or by hand; submit it again with train.resume_training_checkpoint_path=<checkpoint>")
    data = fsio.json_value(raw, f"saved spec {path}")
    if isinstance(data, dict) and isinstance(data.get("not_kept"), str):
        raise TaoError(f"job {job_id}'s spec was not kept: {data['not_kept'][:200]}; pass secrets by name "
                       "(secrets / --secret-env) and submit it again with train.resume_training_checkpoint_path="
                       "<checkpoint>")
    if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
        raise TaoError(f"saved spec {path} is damaged: submit the job again by hand")
    return data["spec"], dict(data.get("options") or {})


# ------------------------------------------------------------ final logs
def save_logs(job: str | records.Record, name: str, content: str | Mapping[str, str]) -> Path:
    """Write ``content`` (one text, or named streams kept as JSON) to ``<artifact dir>/name``, redacted."""
    got = save_logs_each([(job, name, content)])[0]
    if isinstance(got, TaoError):
        raise got
    return got


def save_logs_each(items: Sequence[tuple[str | records.Record, str, str | Mapping[str, str]]]) -> list[Path | TaoError]:
    """:func:`save_logs` of each ``(job, name, content)`` (a sweep's trials that ended together): all redacted,
    their folders found in one pass, then written; the list ends at the first job whose folder is refused."""
    texts: list[str] = []
    jobs: list[str | records.Record] = []
    for job, _, content in items:  # every text through the scanner, one after another
        jobs.append(job)
        if isinstance(content, str):
            texts.append(redact_text(content))
            continue
        streams: dict[str, str] = {}
        for k, v in content.items():
            streams[k] = redact_text(str(v or ""))
        texts.append(json.dumps(streams))
    out: list[Path | TaoError] = []
    for folder, (_, name, _), text in zip(records.artifact_dirs(jobs), items, texts):
        if isinstance(folder, TaoError):
            out.append(folder)
            break
        fsio.write_private(folder / name, text)
        out.append(folder / name)
    return out


def saved_logs(job_id: str, name: str) -> Path | None:
    """The copy ``name`` saved for the job, or None when none was (the folder is never made here)."""
    path = records.state_dir() / f"{job_id}.d" / name
    return path if path.is_file() else None


def read_logs(job_id: str, name: str, tail: int | None) -> str | None:
    """The last ``tail`` lines (None: all) of the text copy ``name`` (:func:`save_logs`), or None when none was saved."""
    path = saved_logs(job_id, name)
    raw = fsio.read_regular(path, "saved logs", follow_links=False) if path else None
    return None if path is None else _last((raw or b"").decode("utf-8", "replace"), tail)


def read_log_streams(job_id: str, name: str, tail: int, streams: tuple[str, ...]) -> dict[str, str] | None:
    """The last ``tail`` lines of each named stream of the JSON copy ``name`` (:func:`save_logs`), or None."""
    path = saved_logs(job_id, name)
    if path is None:
        return None
    data = json.loads((fsio.read_regular(path, "saved logs", follow_links=False) or b"{}").decode("utf-8", "replace"))
    return {k: _last(str(data.get(k) or ""), tail) for k in streams}


def _last(text: str, tail: int | None) -> str:
    return text if tail is None else "".join(text.splitlines(keepends=True)[-tail:])
