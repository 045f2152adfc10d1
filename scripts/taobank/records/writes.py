"""The record's two writers, :func:`open_record` (a new PENDING record under a fresh id) and :func:`mark` (a
move under the transition table of :mod:`taobank.states`), and what they clean before they store it: free text
redacted and cut, backend metadata never a credential, required text non-empty and printable. A writer hands
a record's texts to the scanner in one batch (:func:`taobank.text.stored_texts`), not one call per field; a
``results_dir`` carrying credentials is refused."""
from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from .. import names, registry, states
from ..errors import TaoError
from ..redact import secret_entries
from ..text import stored_texts
from ..states import State
from . import store
from .shape import ID_PLACEHOLDER, LINEAGE_FIELDS, check_results_dir
from .store import RECORD_VERSION, refuse_nested

STORAGE_TIERS = ("A", "C")
_MAX_MINT_TRIES = 32

MAX_TEXT = 4096
_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def encodable(text: str, what: str) -> str:
    """``text`` when it can be written as UTF-8 (no lone surrogates); else TaoError naming ``what``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise TaoError(f"{what} holds characters that are not valid text (lone surrogates): give plain UTF-8") from None
    return text


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def clean_texts(texts: Sequence[str | None]) -> list[str | None]:
    """Free texts (a message, a name) as stored: valid UTF-8, credentials masked, at most :data:`MAX_TEXT`
    characters each; None stays None. One call of the scanner for the batch."""
    given = [str(t) for t in texts if t is not None]
    done = iter(stored_texts(given))  # a byte of a cluster's answer that was not UTF-8: U+FFFD
    return [None if t is None else _cut(next(done)) for t in texts]


def clean_text(text: str | None) -> str | None:
    """One free text as :func:`clean_texts` stores it."""
    return clean_texts([text])[0]


def clean_backend(backend: Mapping[str, Any] | None) -> dict[str, Any]:
    """Backend metadata as stored: field-like keys, plain values, never a credential (refused, not masked).
    The keys and values go to the scanner in one call, for all keys together."""
    out: dict[str, Any] = {}
    if not backend:
        return out
    # flags such as staged_secrets=true are fine: only a text value counts, named or looking like a credential
    secret = secret_entries([(k, v) for k, v in backend.items() if isinstance(k, str) and isinstance(v, str) and v])
    for k, v in backend.items():  # the first problem in key order, as before
        if not isinstance(k, str) or not _META_KEY.match(k):
            raise TaoError(f"backend metadata key {k!r} is invalid: use letters, digits, _ . - (max 64)")
        if v is not None and not isinstance(v, (str, int, bool)):
            raise TaoError(f"backend metadata {k} must be a string, integer or boolean")
        if isinstance(v, str):  # a cluster's answer with a byte that is not UTF-8: one line, never a crash mid-write
            encodable(v, f"backend metadata {k}")
        if secret.get(k) == "name":
            raise TaoError(f"backend metadata {k} is named like a credential: never store secrets in a record")
        # the value alone: token shapes, user:pass@, signed URLs (keys are ours, e.g. cred_secret=tao-creds-x)
        if secret.get(k) == "value":
            raise TaoError(f"backend metadata {k} looks like a credential: never store secrets in a record")
        out[k] = v
    return out


def _description(value: str | None) -> str | None:
    """Free text naming the job (submit --name): one line, at most 200 characters (its credential check is the
    caller's, in the record's batch)."""
    if value is None or not str(value).strip():
        return None
    text = " ".join(str(value).split())
    if len(text) > 200:
        raise TaoError("the job name/description is longer than 200 characters: shorten it")
    return text


def required(name: str, value: Any) -> str:
    """A field that must hold text: stripped, non-empty, no control character."""
    text = encodable("" if value is None else str(value).strip(), name)
    if not text:
        raise TaoError(f"{name} is required: pass a non-empty value")
    if any(ord(c) < 32 for c in text):
        raise TaoError(f"{name} contains a control character: refused")
    return text


def open_record(
    platform: str,
    image: str,
    network_arch: str,
    action: str,
    storage_tier: str,
    results_dir: str,
    *,
    retry_of: str | None = None,
    backend: Mapping[str, Any] | None = None,
    description: str | None = None,
    job_id: str | None = None,
    lineage: Mapping[str, str | None] | None = None,
    sweep: tuple[str, int, Mapping[str, str]] | None = None,
    check_folder: bool = True,
) -> dict[str, Any]:
    """Mint an id and store a PENDING record; returns it (``rec["id"]``).

    ``job_id`` is an id minted up front (:func:`names.mint_job_id`, so a
    platform can render names from it before the record exists); it is refused
    if a record already has it.

    ``results_dir`` may hold :data:`ID_PLACEHOLDER` (``/results/{id}``): it
    becomes the minted id, so the record names the job's own folder.

    ``retry_of`` links a retry to a finished parent (attempt = parent's + 1);
    retrying a job that is still active is refused (it would run twice).

    ``lineage`` (``parent``, ``continues``: job ids, checked by :mod:`taobank.lineage`) is stored as given.

    ``check_folder``: refuse a results folder inside another record's folder, or holding one
    (:func:`refuse_nested`); a sweep checks all its trials' folders in one pass and passes False.
    """
    tier = required("storage_tier", storage_tier).upper()
    if tier not in STORAGE_TIERS:
        raise TaoError(f"storage tier {storage_tier!r} is unknown: use A (mounted volume) or C (S3 staging)")
    attempt = 1
    if retry_of is not None:
        parent = store.load(retry_of)
        if parent["platform"] != registry.canonical(platform):
            raise TaoError(f"job {retry_of} is a {parent['platform']} job: a retry runs on the same platform")
        if parent["state"] not in states.TERMINAL:
            raise TaoError(f"job {retry_of} is {parent['state']}: mark it ERROR or CANCELED before opening a retry")
        attempt = parent["attempt"] + 1
    plat = registry.canonical(platform)
    given = {"image": required("image", image), "network_arch": required("network_arch", network_arch),
             "action": required("action", action)}
    desc = _description(description)
    # the record's free texts, masked in one batch: each must come back as it was (stored as given)
    same = dict(zip(("description", *given), (t == c for t, c in zip((desc, *given.values()),
                                                                      clean_texts([desc, *given.values()])))))
    if desc is not None and not same["description"]:
        raise TaoError("the job name/description looks like it carries a credential: refused")
    rec: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "id": "",
        "platform": plat,
        **given,
        "description": desc,
        "storage_tier": tier,
        "results_dir": check_results_dir(results_dir),
        "backend_ref": None,
        "backend": clean_backend(backend),
        "state": states.INITIAL.value,  # plain strings in the store (the enum is for code)
        "err_class": None,
        "message": None,
        "transitions": [{"time": "", "state": states.INITIAL.value, "source": "agent", "message": "opened"}],
        "retry_of": retry_of,
        "attempt": attempt,
        "created_at": "",
        "updated_at": "",
    }
    for key, value in (lineage or {}).items():
        if key not in LINEAGE_FIELDS:
            raise TaoError(f"lineage field {key!r} is unknown: use {' or '.join(LINEAGE_FIELDS)}")
        if value is not None:
            rec[key] = store.check_id(value)
    if sweep is not None:  # a sweep trial (taobank.sweeps): its sweep id, index and overrides
        rec.update(sweep=sweep[0], trial=int(sweep[1]), overrides=dict(sweep[2]))
    if "@" in rec["image"].split("/", 1)[0]:  # user:password@registry/...; a digest's @ comes after a /
        raise TaoError("image carries credentials (user@ or user:pass@ before the registry): give the bare image "
                       "reference and use a pull secret")
    for field in given:  # stored as given (and arch/action shape the id)
        if not same[field]:
            raise TaoError(f"{field} looks like it carries a credential: give the bare value, never a secret")
    template = rec["results_dir"]
    if check_folder and retry_of is None:  # a retry carries on in its parent's folder, checked when that opened
        new_id = job_id or "new-job"
        refuse_nested([(template.replace(ID_PLACEHOLDER, new_id), new_id)], rec["platform"])
    at = store.now()  # stamped as it is stored
    rec["transitions"][0]["time"] = rec["created_at"] = rec["updated_at"] = at
    for _ in range(1 if job_id else _MAX_MINT_TRIES):
        rec["id"] = store.check_id(job_id) if job_id else names.mint_job_id(rec["network_arch"], rec["action"])
        rec["results_dir"] = template.replace(ID_PLACEHOLDER, rec["id"])  # one folder per job, named by its id
        if store.create(rec["id"], rec):
            return rec
    if job_id:
        raise TaoError(f"a record {job_id} exists already in {store.state_dir()}: submit again (a new id is minted)")
    raise TaoError(f"could not mint a free job id after {_MAX_MINT_TRIES} tries in {store.state_dir()}: "
                   "check the folder")


def mark(
    job_id: str,
    state: str,
    *,
    backend_ref: str | None = None,
    source: str = "agent",
    message: str | None = None,
    err_class: str | None = None,
    backend: Mapping[str, Any] | None = None,
    rebind: bool = False,
) -> dict[str, Any]:
    """Move a record to ``state`` under the transition table; returns the stored record.

    ``rebind``: ``backend_ref`` may change (a job that resubmitted itself under the same record:
    the ref follows the live backend job); otherwise a bound ref never changes.

    Same state on an active record: updates backend_ref/backend/message only
    (nothing is written when none of them changes).
    Same state on a terminal record: no-op. Anything outside the table: TaoError.
    """
    new = states.canonical_state(state)
    src = states.canonical_source(source)
    cls = states.canonical_err_class(err_class) if err_class else None
    if cls and new != State.ERROR:
        raise TaoError(f"err_class {cls} is only allowed with --state ERROR (got {new})")
    meta = clean_backend(backend)
    ref = None if backend_ref is None else required("backend_ref", backend_ref)
    msg, ref_seen = clean_texts([message, ref])  # one batch for the scanner
    if ref is not None and ref_seen != ref:
        raise TaoError("backend_ref looks like it carries a credential: refused")
    path = store.record_path(job_id)
    with store.locked(job_id):
        rec = store.read(path)
        cur = rec["state"]
        if cur in states.TERMINAL:
            if new == cur:
                return rec  # repeating a final mark (poller + agent) changes nothing
            raise TaoError(f"job {job_id} is {cur} (terminal) and cannot become {new}: {states.allowed_text(cur)}")
        if new != cur and not states.is_allowed(cur, new):
            raise TaoError(f"illegal transition {cur} -> {new} for job {job_id}: {states.allowed_text(cur)}")
        before = json.dumps(rec, sort_keys=True)
        if ref is not None:
            if rec["backend_ref"] not in (None, ref) and not rebind:
                raise TaoError(f"job {job_id} is bound to backend_ref {rec['backend_ref']!r}: it cannot change to {ref!r}")
            rec["backend_ref"] = ref
        rec["backend"].update(meta)
        if new == cur and (msg is None or msg == rec["message"]) and json.dumps(rec, sort_keys=True) == before:
            return rec  # a poll that learnt nothing new writes nothing
        at = store.now()
        if msg is not None:
            rec["message"] = msg
        if new != cur:
            rec["state"] = new.value
            rec["transitions"].append({"time": at, "state": new.value, "source": src, "message": msg})
            if new == State.ERROR:
                rec["err_class"] = cls
        rec["updated_at"] = at
        store.replace(job_id, rec)
        store.sweep_temps(job_id)
        return rec


__all__ = ["STORAGE_TIERS", "MAX_TEXT", "open_record", "mark", "encodable", "clean_text", "clean_texts",
           "clean_backend", "required"]
