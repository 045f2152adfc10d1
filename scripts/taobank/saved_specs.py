"""The spec a job was submitted with, kept beside its record so ``continue`` can run it again.

Written by the core's submit (:meth:`taobank.platform.Platform.submit`) into the record's
mode-700 artifact folder (``<state>/<id>.d/submit-spec.json``, mode 600). It holds what a
submit needs to be repeated, never a secret: secrets are named in a spec, never given
(``secrets`` / ``--secret-env`` hold variable names; their values are read again at the
next submit).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from . import fsio, records
from .errors import TaoError

FILE = "submit-spec.json"
#: The submit options repeated by ``continue`` (names and places only: no value of a secret).
KEPT_OPTIONS = ("secret_env", "secrets_file", "ngc_pull_secret", "config", "namespace", "context")


def save(job_id: str, spec: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> None:
    """Keep ``spec`` (as given to submit) and the repeatable ``options`` of job ``job_id``."""
    opts = {k: v for k, v in (options or {}).items() if k in KEPT_OPTIONS and v not in (None, (), [], False)}
    data = {"spec": dict(spec), "options": {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()}}
    try:
        text = json.dumps(data, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise TaoError(f"the spec of job {job_id} cannot be kept as JSON ({exc})") from None
    from .redact import lint_text

    found = lint_text(text, FILE)
    if found:  # a value that looks like a credential is never written down: only why (continue says it)
        rules = ", ".join(sorted({f.rule for f in found}))
        text = json.dumps({"not_kept": f"a value in its spec looks like a credential ({rules}); the bank never "
                                       "writes one down"}, sort_keys=True)
    fsio.write_private(records.artifact_dir(job_id) / FILE, text + "\n")


def load(job_id: str) -> tuple[dict, dict]:
    """(spec, options) job ``job_id`` was submitted with; one line when the bank kept none."""
    path = records.state_dir() / f"{job_id}.d" / FILE
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


__all__ = ["save", "load", "FILE", "KEPT_OPTIONS"]
