"""The core owns a record after launch: what an adapter saw or stopped becomes a mark here, and only here.

An adapter reads its platform (``observe``), stops a list of jobs (``stop``), cleans up what ended
(``ended``) and relaunches an infrastructure retry (``relaunch``); it never writes a record. This module
applies the one transition rule (:func:`taobank.states.next_move`) and the one cancel rule, opens retry
records (``retry_of`` chains) and asks the adapter to clean up once a job has ended.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable

from .. import names, records, states
from ..contract import Launch, Observation, Shown, Stop
from ..errors import TaoError
from ..records import Record
from ..records.store import get_each
from ..records.writes import Marking, mark_many
from ..states import State

if TYPE_CHECKING:  # the platform module imports this one
    from .platform import Platform

    Adapter = Platform[Any, Any]


def refresh(adapter: Adapter, recs: list[Record], *, retry: bool = True) -> list[Any]:
    """Observe the active ``recs`` of one platform (one batched query), mark them, open the infrastructure
    retries the observations ask for, clean up what ended; their views, retries appended. One pass per step
    for all of them: the records to mark read again in one read, every transition decided in one call."""
    context: dict[str, Any] = {}
    recs = [r if isinstance(r, Record) else Record.of(r) for r in recs]
    seen = {o.job_id: o for o in adapter.observe(recs, context=context)}
    views: dict[str, tuple[Record, Observation | None]] = {}
    ended: list[Record] = []
    carried: set[str] = set()
    notes: dict[str, str] = {}
    asked = [(r, o) for r in recs for o in [seen.get(r.id)] if o is not None and o.asked]
    now = dict(zip([r.id for r, _ in asked], get_each([r.id for r, _ in asked])))  # another poller may have moved them
    for _, told in asked:
        tao_last_word(told)
    read = [(r, o, cur) for r, o in asked for cur in [now[r.id]] if isinstance(cur, Record)]
    marking: list[tuple[Record, Record, Observation, Marking, bool]] = []
    moves = dict(zip([r.id for r, _, _ in read], states.next_moves(
        [(cur.state, o.state, o.message, cur.message, o.keep_if) for _, o, cur in read])))
    for rec in recs:
        obs = seen.get(rec.id)
        if obs is None or not obs.asked:  # never launched, or not asked: the record stays as it is
            views[rec.id] = (rec, obs)
            continue
        views[rec.id] = (rec, None)  # its place among the views (the marks below are one batch)
        try:
            cur = now[rec.id]
            if not isinstance(cur, Record):
                raise cur
            planned = _planned(adapter, cur, obs, moves[rec.id], retry, views, carried, notes)
        except TaoError as exc:  # this record alone (damaged, or refused the mark): the others go on
            views[rec.id] = (rec, None)
            notes[rec.id] = f"not updated: {exc}"
            continue
        if planned is not None:
            marking.append((rec, cur, obs, *planned))
    done = _marked([m for _, _, _, m, _ in marking])
    typed = [g if isinstance(g, TaoError) else Record.of(g) for g in done]
    moved = [not isinstance(g, TaoError) and g.terminal and not cur.terminal for (_, cur, _, _, _), g in zip(marking, typed)]
    for (rec, cur, obs, _, relaunch), got, ends in zip(marking, typed, moved):
        try:
            if isinstance(got, TaoError):
                raise got
            _apply(adapter, cur, got, obs, relaunch, ends, context, views, ended, carried)
        except TaoError as exc:  # this record alone (refused the mark, or its retry could not be opened)
            views[rec.id] = (rec, None)
            notes[rec.id] = f"not updated: {exc}"
    if ended:
        for jid, note in adapter.ended(ended, context, carried_on=frozenset(carried)).items():
            if note:
                notes[jid] = f"{views[jid][0].message or ''}; {note}".lstrip("; ")
    shown = adapter.views([rec for rec, _ in views.values()])
    said = {jid: list(obs.view.items()) for jid, (_, obs) in views.items() if obs is not None}
    out = []
    for jid, view in zip(views, shown):
        _overlay(view, said.get(jid, ()))
        if jid in notes:
            view.message = notes[jid]
        out.append(view)
    return out


def _planned(adapter: Adapter, cur: Record, obs: Observation, move: states.Move, retry: bool,
             views: dict[str, tuple[Record, Observation | None]], carried: set[str],
             notes: dict[str, str]) -> tuple[Marking, bool] | None:
    """The mark ``obs`` asks of ``cur`` (its record as read again now; ``move``: :func:`taobank.states.next_move`
    of the two, TAO's last word applied) and whether an infrastructure retry is resubmitted after it; None when
    the record stays as it is (:func:`refresh`'s step for one job)."""
    if move.state is None:
        views[cur.id] = (cur, obs)
        if cur.terminal and obs.state != cur.state:
            notes[cur.id] = f"{obs.message}; the record is terminal ({cur.state}) and stays the source of truth"
        return None
    message, relaunch = move.message, False
    if move.state == State.ERROR and obs.retry and retry:
        message, relaunch, goes_on = _retry_verdict(adapter, cur, message or obs.message)
        if goes_on:
            carried.add(cur.id)
    if obs.cut_short and move.state in (State.ERROR, State.CANCELED) and cur.id not in carried:
        # first, so a table that cuts long messages still shows what to do
        message = f"{states.continue_hint(cur.id, obs.cut_short)}; {message or obs.message}"
    return Marking(cur.id, move.state, backend_ref=obs.backend_ref, source="poller", message=message,
                   err_class=obs.err_class if move.state == State.ERROR else None,
                   backend={k: v for k, v in obs.backend.items() if v is not None} or None,
                   rebind=obs.backend_ref is not None), relaunch


def _marked(marks: list[Marking]) -> list[dict[str, Any] | TaoError]:
    """Every mark of one status in one batch (:func:`taobank.records.writes.mark_many`); when one is refused,
    each is marked alone instead, so the others still move (a mark the batch wrote already changes nothing)."""
    if not marks:
        return []
    try:
        return list(mark_many(marks))
    except TaoError:
        pass
    out: list[dict[str, Any] | TaoError] = []
    for m in marks:
        try:
            out.extend(mark_many([m]))
        except TaoError as exc:
            out.append(exc)
    return out


def _apply(adapter: Adapter, cur: Record, marked: Record, obs: Observation, relaunch: bool, ends: bool,
           context: dict[str, Any], views: dict[str, tuple[Record, Observation | None]], ended: list[Record],
           carried: set[str]) -> None:
    """``cur`` marked as ``marked``: its view, the infrastructure retry it asked for, and its end (``ends``: the
    mark ended it)."""
    views[cur.id] = (marked, obs)
    if relaunch:
        nxt = open_retry(adapter, marked, context)
        views[nxt.id] = (nxt, None)
        if nxt.state == State.ERROR:  # the resubmit failed: the chain ends here
            carried.discard(cur.id)
    if ends:
        ended.append(marked)


def tao_last_word(obs: Observation) -> Observation:
    """The one rule over every platform's verdict: a run whose status file TAO ended with FAILURE failed, whatever
    its exit code (TAO's workflow catches an interrupt, writes FAILURE and exits 0); the message says so. A clean
    end whose status file ends in PRUNED (a search trial's runner stopped TAO for the study's pruner) is PRUNED."""
    end = obs.tao_end
    if obs.state == State.COMPLETE and end is not None and end.status == State.PRUNED:
        # a search trial its study's pruner stopped: the runner stopped TAO and ended cleanly (taobank.campaign.search)
        obs.state, obs.err_class, obs.retry = State.PRUNED, None, False
        obs.message = end.message or "PRUNED by the study's pruner"
        return obs
    if obs.state == State.COMPLETE and end is not None and end.status == "FAILURE":
        said = f" ({end.message})" if end.message else ""
        code = f"exit code {obs.exit_code}" if obs.exit_code is not None else "a clean end"
        obs.state, obs.err_class, obs.retry = State.ERROR, "ERR_PROGRAM", False
        obs.message = f"TAO's status.json ends in FAILURE{said} despite {code}: the run failed; read its logs"
    return obs


def _overlay(view: Any, seen: Shown | Iterable[tuple[str, Any]]) -> None:
    """``seen`` (or its items, read already) laid over the view: its fields by name, the others into its extra
    facts."""
    for key, value in (seen.items() if isinstance(seen, Shown) else seen):
        if hasattr(view, key) and key != "extra":
            setattr(view, key, value)
        else:
            view.extra[key] = value


# ------------------------------------------------------------------ infrastructure retries
def _retry_verdict(adapter: Adapter, rec: records.Record, message: str) -> tuple[str, bool, bool]:
    """(the failed record's message, resubmit now, a retry carries on) for a job whose failure is worth a retry:
    bounded by the platform's limit, and one poller resubmits, never two."""
    attempt = int(rec.attempt or 1)
    limit = adapter.max_retries()
    if attempt > limit:
        return f"{message}; retry limit {limit} reached", False, False
    if claim_retry(rec):
        return f"{message}; resubmitting (attempt {attempt + 1})", True, True
    return message, False, True  # another poller resubmits it


def claim_retry(rec: records.Record) -> bool:
    """Only one poller may resubmit a failed record: the one that creates this file."""
    path = records.artifact_dir(rec) / f"{rec.platform or 'job'}-retry.claim"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def open_retry(adapter: Adapter, failed: Record, context: dict[str, Any]) -> Record:
    """A new record linked by ``retry_of`` that the adapter relaunches; it says so when that fails."""
    was = Record.of(failed)
    job_id = names.mint_job_id(was.network_arch, was.action)
    new = Record.of(records.open_record(adapter.name, was.image, was.network_arch, was.action,
                                        was.storage_tier or "A", was.results_dir, retry_of=was.id,
                                        description=was.description, job_id=job_id,
                                        backend=adapter.retry_backend(was, job_id, context))).id
    records.mark(new, State.PENDING, message=f"infrastructure retry of {was.id}")
    try:
        launch = adapter.relaunch(new, context)
    except TaoError as exc:  # the retry could not be submitted: say so on its record
        return Record.of(records.mark(new, State.ERROR, message=f"resubmit failed: {exc}", err_class="ERR_INFRA"))
    if launch is None:  # a job of a record opened a moment ago cannot exist: never guess which one it is
        return Record.of(records.mark(new, State.ERROR, message="resubmit failed: the retry has a job already",
                                      err_class="ERR_INFRA"))
    return Record.of(records.mark(new, State.PENDING, backend_ref=launch.backend_ref, backend=launch.facts(),
                                  message=launch.message))


# ------------------------------------------------------------------ cancel: the one rule
def stop(adapter: Adapter, recs: list[Record], context: dict[str, Any], *, batch: bool) -> tuple[list[Any], list[str]]:
    """Stop the active ``recs`` of one platform (``batch``: in one adapter call, else one call per job) and mark
    each CANCELED, or how it really ended first; (views, one-line errors ``"<id>: ..."``)."""
    recs = [r if isinstance(r, Record) else Record.of(r) for r in recs]
    stops: list[Stop] = []
    for group in ([recs] if batch and len(recs) > 1 else [[r] for r in recs]):
        try:
            stops += adapter.stop(group, context)
        except TaoError as exc:
            stops += [Stop(r.id, error=str(exc)) for r in group]
    views, errors = [], []
    for s in stops:
        if s.error:
            errors.append(f"{s.job_id}: {s.error}")
            continue
        final = s.final
        rec = Record.of(records.mark(s.job_id, final, message=s.message or None,
                                     err_class=s.err_class if final == State.ERROR else None,
                                     backend=s.backend or None))
        view = adapter.view(rec)
        _overlay(view, s.view)
        if s.said is not None:
            view.message = s.said
        views.append(view)
    return views, errors


def already_ended(adapter: Adapter, rec: Record, context: dict[str, Any]) -> Any:
    """``cancel`` of a job that had ended: nothing to stop; what it still held is released (a note)."""
    note = adapter.clean_finished(rec, context)
    view = adapter.view(rec)
    view.message = f"already {rec.state}: nothing to cancel" + (f"; {note}" if note else "")
    view.extra.setdefault("deleted", False)
    return view
