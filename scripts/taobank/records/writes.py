"""The record's two writers, :func:`open_record` (a new PENDING record under a fresh id) and :func:`mark` (a
move under the transition table of :mod:`taobank.states`), and what they clean before they store it: free text
redacted and cut, backend metadata never a credential, required text non-empty and printable. A writer hands
a record's texts to the scanner in one batch (:func:`taobank.text.stored_texts`), not one call per field; a
``results_dir`` carrying credentials is refused."""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from .. import names, registry, states
from ..errors import TaoError
from ..redact import secret_entries, secret_entries_each
from ..text import stored_texts
from ..states import State
from . import store
from .shape import ID_PLACEHOLDER, LINEAGE_FIELDS, check_results_dirs
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
    return _put_back(texts, stored_texts([str(t) for t in texts if t is not None]))


def _put_back(texts: Sequence[str | None], stored: list[str]) -> list[str | None]:
    """``texts`` as :func:`clean_texts` gives them, from what :func:`stored_texts` made of those not None."""
    done = iter(stored)  # a byte of a cluster's answer that was not UTF-8: U+FFFD
    return [None if t is None else _cut(next(done)) for t in texts]


def clean_text(text: str | None) -> str | None:
    """One free text as :func:`clean_texts` stores it."""
    return clean_texts([text])[0]


def clean_backend(backend: Mapping[str, Any] | None) -> dict[str, Any]:
    """Backend metadata as stored: field-like keys, plain values, never a credential (refused, not masked).
    The keys and values go to the scanner in one call, for all keys together."""
    return _checked_backend(backend, secret_entries(_text_entries(backend)))


def _text_entries(backend: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The pairs of ``backend`` the scanner judges: flags such as staged_secrets=true are fine, only a text value
    counts, named or looking like a credential."""
    return [(k, v) for k, v in (backend or {}).items() if isinstance(k, str) and isinstance(v, str) and v]


def _checked_backend(backend: Mapping[str, Any] | None, secret: Mapping[str, str]) -> dict[str, Any]:
    """:func:`clean_backend` given the scanner's verdict on its pairs (:func:`secret_entries`)."""
    out: dict[str, Any] = {}
    for k, v in (backend or {}).items():  # the first problem in key order, as before
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


@dataclass(frozen=True)
class Opening:
    """One new record of :func:`open_records`: what :func:`open_record` takes but the platform."""

    image: str
    network_arch: str
    action: str
    storage_tier: str
    results_dir: str
    retry_of: str | None = None
    backend: Mapping[str, Any] | None = None
    description: str | None = None
    job_id: str | None = None
    lineage: Mapping[str, str | None] | None = None
    sweep: tuple[str, int, Mapping[str, str]] | None = None


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
    """Mint an id and store a PENDING record; returns it (``rec["id"]``): :func:`open_records` of one.

    ``job_id`` is an id minted up front (:func:`names.mint_job_id`, so a
    platform can render names from it before the record exists); it is refused
    if a record already has it.

    ``results_dir`` may hold :data:`ID_PLACEHOLDER` (``/results/{id}``): it
    becomes the minted id, so the record names the job's own folder.

    ``retry_of`` links a retry to a finished parent (attempt = parent's + 1);
    retrying a job that is still active is refused (it would run twice).

    ``lineage`` (``parent``, ``continues``: job ids, checked by :mod:`taobank.campaign.lineage`) is stored as given.

    ``check_folder``: refuse a results folder inside another record's folder, or holding one
    (:func:`refuse_nested`); a sweep checks all its trials' folders in one pass and passes False.
    """
    return open_records(platform, [Opening(image, network_arch, action, storage_tier, results_dir, retry_of=retry_of,
                                           backend=backend, description=description, job_id=job_id,
                                           lineage=lineage, sweep=sweep)], check_folder=check_folder)[0]


def _tier(storage_tier: str) -> str:
    tier = required("storage_tier", storage_tier).upper()
    if tier not in STORAGE_TIERS:
        raise TaoError(f"storage tier {storage_tier!r} is unknown: use A (mounted volume) or C (S3 staging)")
    return tier


def _given(o: Opening) -> tuple[dict[str, str], str | None]:
    """The required texts of ``o`` and its description, as stored (before their credential check)."""
    given = {"image": required("image", o.image), "network_arch": required("network_arch", o.network_arch),
             "action": required("action", o.action)}
    return given, _description(o.description)


@dataclass(frozen=True)
class Checked:
    """What :func:`check_openings` judged of a batch: its free texts and results folders and the scanner's answers
    on them, so the :func:`open_records` of the same batch does not ask again of what is unchanged (a backend,
    which the platform's checks may add to, is judged anew)."""

    texts: tuple[str, ...]
    stored: tuple[str, ...]
    dirs: tuple[str, ...]
    folders: tuple[str | TaoError, ...]
    #: each record's backend text entries and the scanner's secret entries of them (asked again when they differ)
    entries: tuple[tuple[tuple[str, str], ...], ...] = ()
    secrets: tuple[dict[str, str], ...] = ()


def open_records(platform: str, openings: Sequence[Opening], *, check_folder: bool = True,
                 opened: list[dict[str, Any]] | None = None, checked: Checked | None = None) -> list[dict[str, Any]]:
    """Store a PENDING record for each of ``openings`` on ``platform`` (a sweep's trials; one job is a batch of
    one), in order; returns them. Each record is cleaned and checked as :func:`open_record` says, in the same
    order of checks, with one scanner call for all their texts, one for all their results folders and one for
    all their backends; the records are checked by the schema in one call and written in one call.

    A batch refused at its n-th record stores the records before it (as opening them one by one would) and then
    raises; ``opened`` (a list) receives each record once it is stored, so a caller can undo a batch cut short.
    ``check_folder``: every new folder against the stored records' (:func:`refuse_nested`, one pass).
    ``checked``: what :func:`check_openings` found of this batch before (what is unchanged is not judged again).
    """
    out = opened if opened is not None else []
    recs, templates, failure, _ = _checked(platform, openings, check_folder, checked)
    for rec, at in zip(recs, store.stamps(len(recs))):  # stamped as they are stored
        rec["transitions"][0]["time"] = rec["created_at"] = rec["updated_at"] = at
    tries = [1] * len(recs)
    done = 0
    while done < len(recs):
        made, refused = store.create_each(recs[done:])
        out += recs[done:done + made]
        done += made
        if refused is not None:
            raise refused
        if done == len(recs):
            break
        rec, o = recs[done], openings[done]  # its id exists already
        if o.job_id:
            raise TaoError(f"a record {o.job_id} exists already in {store.state_dir()}: submit again (a new id is "
                           "minted)")
        if tries[done] >= _MAX_MINT_TRIES:
            raise TaoError(f"could not mint a free job id after {_MAX_MINT_TRIES} tries in {store.state_dir()}: "
                           "check the folder")
        tries[done] += 1
        rec["id"] = names.mint_job_id(rec["network_arch"], rec["action"])
        rec["results_dir"] = templates[done].replace(ID_PLACEHOLDER, rec["id"])
    if failure is not None:
        raise failure
    return recs


def check_openings(platform: str, openings: Sequence[Opening], *, check_folder: bool = True) -> Checked:
    """Every check :func:`open_records` makes of ``openings``, nothing stored: its first refusal, raised as it
    raises it (a credential in the name, the image or the results folder; a bad id; a folder inside another
    job's). A submit and its dry run make it before any cluster call, so that what the record would refuse is
    refused before anything is contacted, made or shown (:func:`taobank.core.pipeline.check_records`). Returns
    what it judged, for the :func:`open_records` of the same batch."""
    _, _, failure, seen = _checked(platform, openings, check_folder, None)
    if failure is not None:
        raise failure
    return seen


def _checked(platform: str, openings: Sequence[Opening], check_folder: bool,
             seen: Checked | None) -> tuple[list[dict[str, Any]], list[str], TaoError | None, Checked]:
    """The records ``openings`` open, checked in :func:`open_record`'s order and nothing stored: (the records
    before the first refused one, each with an id and its folder named by it; their folders' templates; that
    refusal, or None; what was judged). A folder inside another record's (``check_folder``) raises at once, as it
    did before any record of the batch was stored. ``seen``: the scanner's answers on the same texts and folders,
    taken as they are."""
    entries = [_text_entries(o.backend) for o in openings]
    # what is judged by a call into another module, for the whole batch first (nothing raises here)
    tiers: list[str | TaoError] = []
    givens: list[tuple[dict[str, str], str | None] | TaoError] = []
    for o in openings:
        try:
            tiers.append(_tier(o.storage_tier))
        except TaoError as exc:
            tiers.append(exc)
        try:
            givens.append(_given(o))
        except TaoError as exc:
            givens.append(exc)
    texts = [t for g in givens if not isinstance(g, TaoError) for t in (g[1], *g[0].values())]
    given_texts = tuple(str(t) for t in texts if t is not None)
    dirs = tuple(o.results_dir for o in openings)
    if seen is None or (seen.texts, seen.dirs) != (given_texts, dirs):
        # the record's free texts, masked in one batch (clean_texts), and the folders, each judged once
        seen = Checked(given_texts, tuple(stored_texts(list(given_texts))), dirs,
                       tuple(check_results_dirs(list(dirs))))
    keyed = tuple(map(tuple, entries))
    if seen.entries != keyed:  # not yet judged, or a backend the platform's checks added to
        seen = replace(seen, entries=keyed, secrets=tuple(secret_entries_each(entries)))
    folders, stored = list(seen.folders), list(seen.stored)
    secrets = list(seen.secrets)
    masked = iter(_put_back(texts, stored))
    # each must come back as it was (stored as given)
    same = [None if isinstance(g, TaoError) else
            [t == next(masked) for t in (g[1], *g[0].values())] for g in givens]
    # each record's checks in the order open_record runs them; the first refused record ends the batch
    recs: list[dict[str, Any]] = []
    failure: TaoError | None = None
    plat: str | None = None
    lineage_ids: dict[str, str] = {}
    for i, o in enumerate(openings):
        try:
            rec = _record(o, tiers[i], givens[i], same[i], folders[i], secrets[i], platform, plat, lineage_ids)
        except TaoError as exc:
            failure = exc
            break
        plat = rec["platform"]
        recs.append(rec)
    templates = [rec["results_dir"] for rec in recs]
    if check_folder:  # a retry carries on in its parent's folder, checked when that opened
        refuse_nested([(t.replace(ID_PLACEHOLDER, o.job_id or "new-job"), o.job_id or "new-job")
                       for t, o in zip(templates, openings) if o.retry_of is None], platform)
    for i, (rec, o) in enumerate(zip(recs, openings)):
        try:
            rec["id"] = store.check_id(o.job_id) if o.job_id else names.mint_job_id(rec["network_arch"], rec["action"])
        except TaoError as exc:
            del recs[i:]
            del templates[i:]
            failure = exc
            break
        rec["results_dir"] = templates[i].replace(ID_PLACEHOLDER, rec["id"])  # one folder per job, named by its id
    return recs, templates, failure, seen


def _record(o: Opening, tier: str | TaoError, given_desc: tuple[dict[str, str], str | None] | TaoError,
            same: list[bool] | None, folder: str | TaoError, secret: Mapping[str, str], platform: str,
            plat: str | None, lineage_ids: dict[str, str]) -> dict[str, Any]:
    """The record ``o`` opens (no id, no time yet), from what the batch's scanner calls found; TaoError naming
    the first problem, in :func:`open_record`'s order. ``plat``: ``platform``'s canonical name when an earlier
    record of the batch found it."""
    if isinstance(tier, TaoError):
        raise tier
    attempt = 1
    if o.retry_of is not None:
        parent = store.load(o.retry_of)
        if parent["platform"] != registry.canonical(platform):
            raise TaoError(f"job {o.retry_of} is a {parent['platform']} job: a retry runs on the same platform")
        if parent["state"] not in states.TERMINAL:
            raise TaoError(f"job {o.retry_of} is {parent['state']}: mark it ERROR or CANCELED before opening a retry")
        attempt = parent["attempt"] + 1
    # a canonical name (an adapter's own) needs no look-up
    plat = plat or (platform if platform in registry.PACKAGES else registry.canonical(platform))
    if isinstance(given_desc, TaoError):
        raise given_desc
    given, desc = given_desc
    assert same is not None
    if desc is not None and not same[0]:
        raise TaoError("the job name/description (--name) looks like it carries a credential, so it is refused (the "
                       "value is not shown): give a name that holds no secret")
    if isinstance(folder, TaoError):
        raise folder
    rec: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "id": "",
        "platform": plat,
        **given,
        "description": desc,
        "storage_tier": tier,
        "results_dir": folder,
        "backend_ref": None,
        "backend": _checked_backend(o.backend, secret),
        "state": states.INITIAL.value,  # plain strings in the store (the enum is for code)
        "err_class": None,
        "message": None,
        "transitions": [{"time": "", "state": states.INITIAL.value, "source": "agent", "message": "opened"}],
        "retry_of": o.retry_of,
        "attempt": attempt,
        "created_at": "",
        "updated_at": "",
    }
    for key, value in (o.lineage or {}).items():
        if key not in LINEAGE_FIELDS:
            raise TaoError(f"lineage field {key!r} is unknown: use {' or '.join(LINEAGE_FIELDS)}")
        if value is not None:
            if value not in lineage_ids:  # the batch's trials share their lineage: each id checked once
                lineage_ids[value] = store.check_id(value)
            rec[key] = lineage_ids[value]
    if o.sweep is not None:  # a sweep trial (taobank.campaign.sweeps): its sweep id, index and overrides
        rec.update(sweep=o.sweep[0], trial=int(o.sweep[1]), overrides=dict(o.sweep[2]))
    if "@" in rec["image"].split("/", 1)[0]:  # user:password@registry/...; a digest's @ comes after a /
        raise TaoError("image carries credentials (user@ or user:pass@ before the registry): give the bare image "
                       "reference and use a pull secret")
    for field, ok in zip(given, same[1:]):  # stored as given (and arch/action shape the id)
        if not ok:
            raise TaoError(f"{field} looks like it carries a credential: give the bare value, never a secret")
    return rec


@dataclass(frozen=True)
class Marking:
    """One move of :func:`mark_many`: what :func:`mark` takes; ``state`` None binds a record just launched (it
    keeps its state while active, else goes to the first one: a record ended meanwhile refuses the bind)."""

    job_id: str
    state: str | None
    backend_ref: str | None = None
    source: str = "agent"
    message: str | None = None
    err_class: str | None = None
    backend: Mapping[str, Any] | None = None
    rebind: bool = False


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
    """Move a record to ``state`` under the transition table; returns the stored record (:func:`mark_many` of one).

    ``rebind``: ``backend_ref`` may change (a job that resubmitted itself under the same record:
    the ref follows the live backend job); otherwise a bound ref never changes.

    Same state on an active record: updates backend_ref/backend/message only
    (nothing is written when none of them changes).
    Same state on a terminal record: no-op. Anything outside the table: TaoError.
    """
    return mark_many([Marking(job_id, state, backend_ref, source, message, err_class, backend, rebind)])[0]


def mark_many(marks: Sequence[Marking]) -> list[dict[str, Any]]:
    """Each of ``marks`` done as :func:`mark` does it, in order (a sweep's trials bound after their launch);
    returns the stored records. What is asked is checked first, each mark in :func:`mark`'s order of checks
    with one scanner call for all backends and one for all texts; then every record of the batch is locked
    (:func:`store.locked_each`), read in one call, moved, checked by the schema in one call and written in one
    call. A batch refused at its n-th mark writes the marks before it (as marking them one by one would) and
    then raises."""
    n = len(marks)
    ids = [m.job_id for m in marks]
    entries = [_text_entries(m.backend) for m in marks]
    # each mark's message and backend_ref as required() passes it on, masked in one batch below (clean_texts)
    texts = [t for m in marks for t in (m.message, None if m.backend_ref is None else str(m.backend_ref).strip())]
    given_texts = [str(t) for t in texts if t is not None]
    errs: list[TaoError | None] = [None] * n
    moves: list[tuple[State | None, str, str | None]] = []
    for k, m in enumerate(marks):  # the names (states' own words; a State and a known source are already)
        if (m.state is None or m.state in states.STATES) and m.source in states.SOURCES \
                and (not m.err_class or m.err_class in states.ERR_CLASSES):
            moves.append((None if m.state is None else State(m.state), m.source, m.err_class or None))
            continue
        try:
            moves.append((None if m.state is None else states.canonical_state(m.state),
                          states.canonical_source(m.source),
                          states.canonical_err_class(m.err_class) if m.err_class else None))
        except TaoError as exc:
            errs[k] = exc
            moves.append((State.ERROR, "", None))
    stored = stored_texts(given_texts)
    secrets = secret_entries_each(entries)
    cleaned = _put_back(texts, stored)
    metas: list[dict[str, Any]] = [{}] * n
    refs: list[str | None] = [None] * n
    for k, m in enumerate(marks):
        if errs[k] is not None:
            continue
        try:
            new, _, cls = moves[k]
            if cls and new != State.ERROR:
                raise TaoError(f"err_class {cls} is only allowed with --state ERROR (got {new})")
            metas[k] = _checked_backend(m.backend, secrets[k])
            refs[k] = None if m.backend_ref is None else required("backend_ref", m.backend_ref)
        except TaoError as exc:
            errs[k] = exc
    msgs: list[str | None] = [None] * n
    for k in range(n):
        msgs[k], ref_seen = cleaned[2 * k], cleaned[2 * k + 1]
        if errs[k] is None and refs[k] is not None and ref_seen != refs[k]:
            errs[k] = TaoError("backend_ref looks like it carries a credential: refused")
    checked: list[Path] = []  # the paths of the marks before the first refused one, at least
    for k, m in enumerate(marks):
        if errs[k] is None:
            try:
                checked.append(store.record_path(m.job_id))
            except TaoError as exc:
                errs[k] = exc
    first = n  # the marks before the first refused one are done; its error is raised once they are written
    for k, err in enumerate(errs):
        if err is not None:
            first = k
            break
    failure = errs[first] if first < n else None
    marks = marks[:first]
    current: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    changed: dict[str, dict[str, Any]] = {}
    with store.locked_each(ids[:first]):
        read = store.read_each(checked[:first])
        stamps = store.stamps(first)
        try:
            for k, m in enumerate(marks):
                job_id, (asked, src, cls), ref, msg = m.job_id, moves[k], refs[k], msgs[k]
                got = copy.deepcopy(current[job_id]) if job_id in current else read[k]  # a job marked twice
                if isinstance(got, TaoError):
                    raise got
                rec = got
                cur = rec["state"]
                new = asked if asked is not None else State(cur) if cur in states.ACTIVE else states.INITIAL
                if cur in states.TERMINAL:
                    if new == cur:
                        out.append(rec)  # repeating a final mark (poller + agent) changes nothing
                        continue
                    raise TaoError(f"job {job_id} is {cur} (terminal) and cannot become {new}: "
                                   f"{states.allowed_text(cur)}")
                if new != cur and not states.is_allowed(cur, new):
                    raise TaoError(f"illegal transition {cur} -> {new} for job {job_id}: {states.allowed_text(cur)}")
                before = json.dumps(rec, sort_keys=True)
                if ref is not None:
                    if rec["backend_ref"] not in (None, ref) and not m.rebind:
                        raise TaoError(f"job {job_id} is bound to backend_ref {rec['backend_ref']!r}: it cannot "
                                       f"change to {ref!r}")
                    rec["backend_ref"] = ref
                rec["backend"].update(metas[k])
                if new == cur and (msg is None or msg == rec["message"]) and json.dumps(rec, sort_keys=True) == before:
                    out.append(rec)  # a poll that learnt nothing new writes nothing
                    current[job_id] = rec
                    continue
                at = stamps[k]
                if msg is not None:
                    rec["message"] = msg
                if new != cur:
                    rec["state"] = new.value
                    rec["transitions"].append({"time": at, "state": new.value, "source": src, "message": msg})
                    if new == State.ERROR:
                        rec["err_class"] = cls
                rec["updated_at"] = at
                out.append(rec)
                current[job_id] = changed[job_id] = rec
        except TaoError as exc:
            failure = exc
        if changed:
            try:
                store.replace_each(list(changed.items()))
            finally:
                for job_id in changed:
                    store.sweep_temps(job_id)
    if failure is not None:
        raise failure
    return out


__all__ = ["STORAGE_TIERS", "MAX_TEXT", "Opening", "Marking", "open_record", "open_records", "mark", "mark_many",
           "encodable", "clean_text", "clean_texts", "clean_backend", "required"]
