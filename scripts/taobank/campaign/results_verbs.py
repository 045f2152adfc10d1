"""A job's results: ``artifacts`` (list, best checkpoint) and ``prune`` (delete); ``fetch`` (download, verified)
is :mod:`taobank.campaign.results_fetch`.

The verbs are written once, over four platform hooks
(:meth:`~taobank.core.platform.Platform.results_location`, ``list_results``,
``fetch_results``, ``remove_results``); a platform only reads, streams and
removes. What is decided here, the same everywhere:

* every PATH a user names is relative, inside the folder, never an option
  (:func:`taobank.paths.rel_path`);
* the best checkpoint: TAO's status file (``taobank.progress``) gives the
  epoch where a KPI is best, and the checkpoint is the one whose name carries
  that epoch (``model_epoch_004.pth``);
* prune deletes only a finished job's own folder, after confirmation; ``prune --keep best|last|N`` deletes
  the other checkpoints of it instead (the kept ones checked on the cluster before and after); either
  releases what the finished job still holds (a Docker container).

The core never prints: callers pass ``emit`` (progress lines) and
``confirm`` (the prompt) and print what is returned.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import checkpoints, fsio, kpirank, records
from ..contract import ResultFile, ResultsListing, ResultsLocation
from ..errors import TaoError, UsageError
from ..core.platform import get, load_for
from ..records import Record

#: Beside the record: where and when prune deleted the job's results.
PRUNED_FILE = "pruned.json"


def human(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


# ------------------------------------------------------------------ best checkpoint
def number_in_name(path: str, key: str) -> int | None:
    """The epoch (or step) a checkpoint's file name carries: the number after ``epoch`` (``model_epoch_004``,
    ``epoch=4-step=100``), else, for epochs, the name's last number; None when it has none."""
    stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
    tagged = re.findall(rf"{key}[_=-]?(\d+)", stem, flags=re.IGNORECASE)
    if tagged:
        return int(tagged[-1])
    if key == "epoch":
        bare = re.findall(r"\d+", stem)
        return int(bare[-1]) if bare else None
    return None


@dataclass
class Best:
    """The best checkpoint by one KPI, or why there is none (``note``)."""

    kpi: str
    mode: str
    key: str = "epoch"
    at: int | None = None
    value: Any = None
    checkpoints: list[str] = field(default_factory=list)
    status_file: str | None = None
    note: str | None = None
    #: the status file was too large to read whole (what was left out)
    cut: str | None = None
    #: the direction was taken from the KPI's name (no --mode given): :mod:`taobank.kpirank`
    inferred: bool = False

    @property
    def direction(self) -> kpirank.Direction:
        return kpirank.Direction(self.mode, self.inferred)

    def to_dict(self) -> dict:
        from ..progress.statusfile import json_number

        return {"kpi": self.kpi, "mode": self.mode, "mode_from": self.direction.source, self.key: self.at, "value": json_number(self.value)
                if self.value is not None else None, "checkpoints": self.checkpoints, "status_file": self.status_file,
                "note": self.note, "cut": self.cut}

    def line(self) -> str:
        from ..progress.statusfile import format_number

        if self.at is None:
            return f"best {self.kpi} ({self.direction.text()}): {self.note}"
        where = ", ".join(self.checkpoints) if self.checkpoints else f"no checkpoint ({self.note})"
        cut = f" (note: {self.cut})" if self.cut else ""
        return f"best {self.kpi} ({self.direction.text()}) = {format_number(self.value, 6)} at {self.key} {self.at}: {where}{cut}"


def find_best(listing: ResultsListing, kpi: str, mode: str | kpirank.Direction | None, action: str | None) -> Best:
    """The checkpoint of the epoch where ``kpi`` is best (``mode``: min, max, or None for the direction of its name,
    :func:`taobank.kpirank.direction`); a KPI name the status file lacks is a TaoError (naming the nearest one
    there is), said before a direction the name does not give."""
    from ..progress import best, key_column, series
    from ..progress.series import kpi_names, require_kpis
    from ..core.training import chosen_log

    chosen = chosen_log(listing.status_files, action)
    rows = series(chosen[1]) if chosen is not None else []
    if kpi_names(rows) and kpi not in kpi_names(rows):
        require_kpis(rows, [kpi])  # a misspelt KPI is said first, whatever the mode: its line names the nearest
    way = kpirank.direction(kpi, mode)
    found = Best(kpi, way.mode, inferred=way.inferred)
    if chosen is None:
        found.note = "no status.json in the results folder (TAO writes one per training), so no KPI to rank by"
        return found
    rel, log = chosen
    found.status_file = rel
    if log.cut_size:
        found.cut = f"{rel} is {log.cut_size} bytes: only its end was read, its first epochs not ranked"
    if not rows or not kpi_names(rows):
        found.note = f"{rel} holds no KPI values yet"
        return found
    found.key = key_column(rows)
    try:
        row = best(rows, kpi, way.mode)
    except TaoError as exc:
        if kpi not in kpi_names(rows):
            raise  # a misspelt KPI: the line names the ones there are
        found.note = str(exc)
        return found
    found.at, found.value = int(row[found.key]), row[kpi]
    # an epoch's KPIs are measured at its end: of its checkpoints (one per step interval), the last comes first
    found.checkpoints = sorted((f.path for f in listing.files
                                if f.checkpoint and number_in_name(f.path, found.key) == found.at),
                               key=lambda p: -(checkpoints.step_of(p) or 0))
    if not found.checkpoints:
        found.note = f"none of the {sum(f.checkpoint for f in listing.files)} checkpoints is named for " \
                     f"{found.key} {found.at}"
    return found


# ------------------------------------------------------------------ artifacts
@dataclass
class Artifacts:
    """What ``artifacts`` reports: the folder, its files (checkpoints marked) and the best checkpoint."""

    id: str
    platform: str
    listing: ResultsListing
    best: Best | None = None
    pruned: dict | None = None

    def to_dict(self) -> dict:
        files = [{**f.to_dict(), "best": bool(self.best and f.path in self.best.checkpoints)}
                 for f in self.listing.files]
        return {"id": self.id, "platform": self.platform, "folder": self.listing.folder,
                "exists": self.listing.exists, "files": files, "total_bytes": sum(f.size for f in self.listing.files),
                "checkpoints": sum(f.checkpoint for f in self.listing.files), "links": dict(self.listing.links),
                "best": self.best.to_dict() if self.best else None, "pruned": self.pruned,
                "left_out": list(self.listing.left_out)}

    def lines(self) -> list[str]:
        """The text form: a header line, a table (SIZE, MODIFIED, KIND, PATH), the best line."""
        from datetime import datetime, timezone

        from ..text import one_line

        ls = self.listing
        if not ls.exists:
            gone = f" (pruned {self.pruned.get('at')})" if self.pruned else " (not written yet, or deleted)"
            return [one_line(f"{self.id}: the results folder {ls.folder} does not exist{gone}")]
        total = sum(f.size for f in ls.files)
        out = [one_line(f"{self.id}: {len(ls.files)} files, {human(total)} in {ls.folder}")]
        if ls.files:
            chosen = set(self.best.checkpoints) if self.best else set()
            rows = [("SIZE", "MODIFIED (UTC)", "KIND", "PATH")]
            for f in ls.files:
                kind = "best" if f.path in chosen else "ckpt" if f.checkpoint else ""
                when = datetime.fromtimestamp(f.mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
                rows.append((human(f.size), when, kind, one_line(f.path)))
            widths = [max(len(r[i]) for r in rows) for i in range(3)]
            out += [f"{r[0]:>{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip() for r in rows]
        out += [one_line(f"link {name} -> {target}") for name, target in ls.links.items()]
        if ls.left_out:
            out.append(one_line(f"note: {len(ls.left_out)} file(s) not listed, their names hold a newline, backslash "
                                f"or control character (fetch cannot write them here): {', '.join(ls.left_out[:5])}"
                                f"{' ...' if len(ls.left_out) > 5 else ''}; rename them on the cluster"))
        if self.best:
            out.append(one_line(self.best.line()))
        return out


def _pruned_note(job_id: str) -> dict | None:
    from ..fsio import json_value

    path = records.state_dir() / f"{job_id}.d" / PRUNED_FILE
    data = fsio.read_regular(path, "prune note", follow_links=False, missing_ok=True)
    if not data:
        return None
    try:
        note = json_value(data, f"prune note {path}")
    except TaoError:
        return None
    return note if isinstance(note, dict) else None


def artifacts(platform: str | None, job_id: str, *, kpi: str | None = None, mode: str | None = None) -> Artifacts:
    """The job's results folder as the cluster sees it now (one remote command), with the best checkpoint
    (``mode`` None: the direction of the KPI's name)."""
    kpirank.check_mode(mode)  # an unknown mode before any cluster call
    if kpi is not None and not kpi.strip():
        raise UsageError("--kpi needs a KPI name (as in status.json, e.g. val_loss)")
    rec = load_for(job_id, platform, "artifacts")
    adapter = get(rec.platform)
    loc = adapter.results_location(rec)
    listing = adapter.list_results(rec, loc, status=kpi is not None)
    # a KPI the status files lack is said before a direction its name does not give (find_best's order)
    found = find_best(listing, kpi, mode, rec.action) if kpi is not None and listing.exists else None
    if kpi is not None and found is None:
        kpirank.direction(kpi, mode)  # no status file to look in: the direction is still needed
    return Artifacts(rec.id, rec.platform, listing, found, None if listing.exists else _pruned_note(rec.id))


# ------------------------------------------------------------------ prune
@dataclass
class Pruned:
    id: str
    folder: str
    removed: bool
    message: str
    #: prune --keep: the checkpoints deleted and the ones kept (with their size and sha256 after the deletion)
    deleted: list[str] = field(default_factory=list)
    kept: list[dict] = field(default_factory=list)
    #: prune --keep best: the KPI ranked by and its direction (``mode_from``: ``name`` when --mode was left out)
    ranked_by: dict | None = None

    def to_dict(self) -> dict:
        out = {"id": self.id, "folder": self.folder, "removed": self.removed, "message": self.message}
        if self.deleted or self.kept:
            out.update(deleted=self.deleted, kept=self.kept)
        if self.ranked_by:
            out["ranked_by"] = self.ranked_by
        return out

    def line(self) -> str:
        from ..text import one_line

        return one_line(f"{self.id}: {self.message}")


def prunable(rec: Record, loc: ResultsLocation, together: list[str] | tuple[str, ...] = ()) -> None:
    """Refuse (one line) a job whose folder prune must not delete: active, not its own folder, or holding the
    results of another record (a live one always; a finished one unless it is pruned ``together``)."""
    if not rec.terminal:
        raise TaoError(f"job {rec.id}'s record says {rec.state}: its results may still be written; if it ended "
                       f"unseen, refresh the record (tao_jobs.py status {rec.id}), else wait for it to end (or cancel "
                       f"it: tao_jobs.py cancel {rec.id}), then prune it")
    if not loc.own:
        raise TaoError(f"job {rec.id}: {loc.folder} is not the job's own folder ({loc.why_not_own}); prune "
                       "deletes only a folder named after the job: remove it yourself if you mean it")
    pruning = set(together)
    for other in map(Record.of, records.records_inside(loc.folder, rec.platform, rec.id)):
        if not other.terminal:
            raise TaoError(f"job {rec.id}: {loc.folder} holds the results of job {other.id}, which is "
                           f"{other.state}: prune deletes nothing a live job writes; wait for it to end")
        if other.id not in pruning:
            raise TaoError(f"job {rec.id}: {loc.folder} also holds the results of job {other.id}: prune both "
                           f"(prune {rec.id} {other.id}) or remove the folder yourself")


def keep_rule(keep: str | None, kpi: str | None, mode: str | None) -> str | int | None:
    """``--keep best|last|N`` checked before anything is read: "best" (needs ``kpi``), "last", a count, or None."""
    if keep is None:
        if kpi is not None:
            raise UsageError("--kpi chooses the checkpoint prune --keep best keeps: add --keep best")
        return None
    kpirank.direction(kpi, mode)
    if keep == "best":
        if not kpi or not kpi.strip():
            raise UsageError("--keep best needs --kpi NAME (a KPI of status.json, e.g. val_loss)")
        return "best"
    if kpi is not None:
        raise UsageError("--kpi ranks checkpoints for --keep best only")
    if keep == "last":
        return "last"
    if re.fullmatch(r"[1-9][0-9]{0,5}", keep or ""):
        return int(keep)
    raise UsageError(f"--keep {keep!r}: give best, last or a number of newest checkpoints (1 or more)")


def _kept(rec: Record, listing: ResultsListing, keep: str | int, kpi: str | None,
          mode: str | None) -> tuple[list[str], Best | None]:
    """The checkpoints ``keep`` chooses: the best epoch's last one (and the ranking), the one a run continues from,
    or the N newest."""
    ckpts = [f for f in listing.files if f.checkpoint]
    if keep == "best":
        found = find_best(listing, kpi or "", mode, rec.action)
        if not found.checkpoints:
            raise TaoError(f"no best checkpoint by {kpi} ({found.direction.text()}): {found.note or 'none found'}; "
                           "nothing was deleted")
        return found.checkpoints[:1], found
    if keep == "last":
        last = checkpoints.latest(listing.files, rec.action, listing.links, rec.network_arch)
        if last is None or not any(f.path == last.path for f in ckpts):
            raise TaoError("no checkpoint to keep as the last one; nothing was deleted")
        return [last.path], None
    newest = sorted(ckpts, key=lambda f: (checkpoints.epoch_of(f.path) if checkpoints.epoch_of(f.path) is not None
                                          else -1, checkpoints.step_of(f.path) or 0, f.mtime), reverse=True)
    return [f.path for f in newest[:int(keep)]], None


@dataclass
class PrunePlan:
    """What prune would delete of one job, read in one listing before anything is asked or deleted: the whole
    folder (``keep`` None) or the checkpoints ``keep`` does not choose (and the links to them)."""

    rec: Record
    adapter: Any
    loc: ResultsLocation
    listing: ResultsListing
    keep: str | int | None = None
    #: the files that go: every file of the folder, or the checkpoints not kept
    gone: list[ResultFile] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    #: why those are kept ("; the best by val_loss (min)"), or why a sweep trial keeps none
    why: str = ""
    ranked_by: dict | None = None

    @property
    def freed(self) -> int:
        return sum(f.size for f in self.gone)

    @property
    def anything(self) -> bool:
        """Something to delete (a whole folder that exists, or a checkpoint)."""
        return bool(self.gone or self.links) or self.keep is None  # a whole folder: also what the job holds

    def line(self) -> str:
        """One line: the job, what goes (files, bytes) and what stays."""
        from ..text import one_line

        head = f"{self.rec.id} ({self.rec.state})"
        if self.keep is None:
            if not self.listing.exists:
                return one_line(f"{head}: {self.loc.folder} does not exist (pruned already?): nothing to delete")
            if not self.listing.listed:
                return one_line(f"{head}: delete {self.loc.folder} and everything in it")
            return one_line(f"{head}: delete {self.loc.folder} and everything in it: {len(self.listing.files)} "
                            f"file(s), {human(self.freed)}")
        if not self.gone and not self.links:
            return one_line(f"{head}: nothing to delete: keeps {', '.join(self.kept) or 'no checkpoint'}{self.why}")
        keeping = f"keeping {', '.join(self.kept)}" if self.kept else "keeping no checkpoint"
        return one_line(f"{head}: delete {len(self.gone)} checkpoint(s), {human(self.freed)}, in {self.loc.folder}, "
                        f"{keeping}{self.why.replace(';', ',')}")

    def lines(self) -> list[str]:
        """:meth:`line`, then each file (and link) that would go, with its size."""
        from ..text import one_line

        return [self.line()] + [one_line(f"  {f.path} ({human(f.size)})") for f in self.gone] + \
            [one_line(f"  {name} (link)") for name in self.links]

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"id": self.rec.id, "state": self.rec.state, "folder": self.loc.folder,
                               "whole_folder": self.keep is None, "exists": self.listing.exists,
                               "files": [{"path": f.path, "size": f.size} for f in self.gone],
                               "links": self.links, "bytes": self.freed, "kept": self.kept}
        if self.ranked_by:
            out["ranked_by"] = self.ranked_by
        return out


def plan_prune(platform: str | None, ids: list[str], keep: str | None = None, kpi: str | None = None,
               mode: str | None = None, *, list_whole: bool = True) -> tuple[list[PrunePlan], list[str]]:
    """What ``prune`` would delete of each job (nothing is deleted): (plans, one-line errors of the jobs it would
    refuse). The folders are listed in one batch per platform (a whole folder only with ``list_whole``: nobody is
    asked). With ``keep`` best, trials of ONE sweep named together are ranked against each other: the winner keeps
    its best checkpoint, the others keep none."""
    if not ids:
        raise UsageError("prune needs job ids")
    rule = keep_rule(keep, kpi, mode)
    errors: list[str] = []
    found: list[tuple[Record, Any, ResultsLocation]] = []
    for job_id in dict.fromkeys(ids):
        try:
            rec = load_for(job_id, platform, "prune")
            adapter = get(rec.platform)
            loc = adapter.results_location(rec)
            prunable(rec, loc, ids)
            found.append((rec, adapter, loc))
        except TaoError as exc:
            errors.append(f"{job_id}: {exc}")
    listed: dict[str, ResultsListing | TaoError] = {}
    for name in dict.fromkeys(rec.platform for rec, _, _ in found):
        if rule is None and not list_whole:
            listed.update({rec.id: ResultsListing(loc.folder, listed=False) for rec, _, loc in found})
            break
        same = [(rec, a, loc) for rec, a, loc in found if rec.platform == name]
        got: list[ResultsListing | TaoError]
        if len(same) == 1:
            try:
                got = [same[0][1].list_results(same[0][0], same[0][2], status=rule == "best")]
            except TaoError as exc:
                got = [exc]
        else:
            got = same[0][1].list_results_many([g[0] for g in same], [g[2] for g in same], status=rule == "best")
        listed.update({g[0].id: one for g, one in zip(same, got)})
    plans: list[PrunePlan] = []
    for rec, adapter, loc in found:
        listing = listed[rec.id]
        if isinstance(listing, TaoError):
            errors.append(f"{rec.id}: {listing}")
            continue
        plan = PrunePlan(rec, adapter, loc, listing, rule)
        if rule is None:
            plan.gone = list(listing.files)
        elif not listing.exists:
            errors.append(f"{rec.id}: the results folder {loc.folder} does not exist (pruned already?): nothing "
                          "to keep")
            continue
        plans.append(plan)
    if rule is None:
        return plans, errors
    trials: dict[str, list[PrunePlan]] = {}
    for plan in plans:
        if plan.rec.sweep:
            trials.setdefault(plan.rec.sweep, []).append(plan)
    ranked = [p for group in trials.values() if len(group) > 1 for p in group] if rule == "best" else []
    out: list[PrunePlan] = []
    for plan in plans:
        if plan in ranked:
            continue
        try:
            kept, best = _kept(plan.rec, plan.listing, rule, kpi, mode)
        except TaoError as exc:
            errors.append(f"{plan.rec.id}: {exc}")
            continue
        plan.why = f"; the best by {best.kpi} ({best.direction.text()})" if best else ""
        plan.ranked_by = ({"kpi": best.kpi, "mode": best.mode, "mode_from": best.direction.source}
                          if best else None)
        out.append(_choose(plan, kept))
    for sweep, group in trials.items():
        if len(group) > 1 and rule == "best":
            more, refused = _sweep_winner(sweep, group, kpi or "", mode)
            out += more
            errors += refused
    order = {job_id: i for i, job_id in enumerate(dict.fromkeys(ids))}
    return sorted(out, key=lambda p: order.get(p.rec.id, 0)), errors


def _choose(plan: PrunePlan, kept: list[str]) -> PrunePlan:
    """The plan's kept checkpoints, and so what goes: every other checkpoint and the links to them."""
    plan.kept = kept
    plan.gone = [f for f in plan.listing.files if f.checkpoint and f.path not in kept]
    names = {f.path for f in plan.gone}
    plan.links = [name for name, target in plan.listing.links.items() if target in names]
    return plan


def _sweep_winner(sweep: str, group: list[PrunePlan], kpi: str,
                  mode: str | None) -> tuple[list[PrunePlan], list[str]]:
    """Trials of one sweep pruned together with ``--keep best``: the trial whose best ``kpi`` wins keeps that
    checkpoint (the rule of ``sweep best``); every other trial's checkpoints go. No trial with a best
    checkpoint: each is refused (nothing deleted)."""
    way = kpirank.direction(kpi, mode)
    bests: dict[str, Best] = {}
    for plan in group:
        try:
            b = find_best(plan.listing, kpi, way, plan.rec.action)
        except TaoError:
            continue
        if isinstance(b.value, (int, float)) and b.checkpoints:
            bests[plan.rec.id] = b
    if not bests:
        return [], [f"{p.rec.id}: no trial of sweep {sweep} named here has a best checkpoint by {kpi}: nothing "
                    "was deleted" for p in group]
    win_id = sorted(bests, key=lambda i: bests[i].value, reverse=way.mode == "max")[0]
    win = next(p for p in group if p.rec.id == win_id)
    top = bests[win_id]
    ranked_by = {"kpi": kpi, "mode": top.mode, "mode_from": top.direction.source, "sweep": sweep, "winner": win_id}
    from ..progress.statusfile import format_number

    value = f"{kpi} {format_number(top.value, 6)}"
    out = []
    for plan in group:
        plan.ranked_by = ranked_by
        if plan is win:
            plan.why = f"; sweep {sweep}'s winner, the best by {kpi} ({top.direction.text()}: {value})"
            out.append(_choose(plan, top.checkpoints[:1]))
        else:
            plan.why = f"; sweep {sweep}: trial {plan.rec.trial} lost to trial {win.rec.trial} {win_id} ({value})"
            out.append(_choose(plan, []))
    return out, []


def plan_text(plans: list[PrunePlan], errors: list[str]) -> str:
    """Every plan's lines (each file that would go), then the jobs prune refuses, then the total."""
    out = [line for p in plans for line in p.lines()]
    out += [f"refused: {e}" for e in errors]
    going = [p for p in plans if p.anything]
    out.append(f"in all: {sum(len(p.gone) for p in going)} file(s), {human(sum(p.freed for p in going))}, of "
               f"{len(going)} job(s)")
    return "\n".join(out) + "\n"


def _execute(plan: PrunePlan) -> Pruned:
    """Delete what ``plan`` lists (the kept files checked on the cluster before and after)."""
    rec, adapter, loc = plan.rec, plan.adapter, plan.loc
    if plan.keep is None:
        pruned = Pruned(rec.id, loc.folder, True, adapter.remove_results(rec, loc))
        fsio.write_private(records.artifact_dir(rec) / PRUNED_FILE, _note_json(loc.folder))
        return pruned
    sizes = {f.path: f.size for f in plan.listing.files}
    if not plan.gone and not plan.links:
        return Pruned(rec.id, loc.folder, False,
                      f"nothing to delete: keeps {', '.join(plan.kept) or 'no checkpoint'}{plan.why}",
                      kept=[{"path": p, "size": sizes[p]} for p in plan.kept], ranked_by=plan.ranked_by)
    after = {f.path: f for f in adapter.remove_files(rec, loc, [f.path for f in plan.gone] + plan.links,
                                                     {p: sizes[p] for p in plan.kept})}
    for path in plan.kept:
        if path not in after or after[path].size != sizes[path]:
            raise TaoError(f"{path} was not found intact after the deletion (listed {sizes[path]} bytes): check "
                           f"{loc.folder} with tao_jobs.py artifacts {rec.id}")
    first = after[plan.kept[0]] if plan.kept else None
    intact = (f"kept {', '.join(plan.kept)} (intact, sha256 {first.sha256[:12] if first and first.sha256 else '?'}"
              "...)") if plan.kept else "kept no checkpoint"
    return Pruned(rec.id, loc.folder, True,
                  f"deleted {len(plan.gone)} checkpoint(s), {human(plan.freed)}; {intact}{plan.why}",
                  deleted=[f.path for f in plan.gone] + plan.links,
                  kept=[{"path": p, "size": after[p].size, "sha256": after[p].sha256} for p in plan.kept],
                  ranked_by=plan.ranked_by)


def prune(platform: str | None, ids: list[str], *, confirm: Callable[[str], bool], keep: str | None = None,
          kpi: str | None = None, mode: str | None = None, preview: bool = True) -> tuple[list[Pruned], list[str]]:
    """Delete each finished job's own results folder or, with ``keep``, the checkpoints of it ``keep`` does not
    choose, after ONE ``confirm(question)`` for all of them (the question lists every file that would go:
    :func:`plan_text`); (results, one-line errors). Either releases what the finished job still holds
    (:meth:`~taobank.core.platform.Platform.release_pruned`: a Docker container).

    One job's failure does not stop the others. ``preview`` False (``--yes``: nobody reads the question): a whole
    folder is not listed first.
    """
    plans, errors = plan_prune(platform, ids, keep, kpi, mode, list_whole=preview)
    going = [p for p in plans if p.anything]
    if going and not confirm(plan_text(plans, errors) + "delete these for good? [y/N] "):
        return [Pruned(p.rec.id, p.loc.folder, False, f"kept {p.loc.folder} (not confirmed)" if p.keep is None
                       else "deleted nothing (not confirmed)") for p in plans], errors
    done: list[Pruned] = []
    for plan in plans:
        try:
            pruned = _execute(plan)
            try:
                note = plan.adapter.release_pruned(plan.rec) if pruned.removed else None
            except TaoError as exc:  # the results went as asked: what the job still holds is a note
                note = f"what the job still holds was not released ({exc})"
            if note:
                pruned.message = f"{pruned.message}; {note}"
            done.append(pruned)
        except TaoError as exc:
            errors.append(f"{plan.rec.id}: {exc}")
    return done, errors


def _note_json(folder: str) -> str:
    import json
    from datetime import datetime, timezone

    return json.dumps({"folder": folder, "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}) + "\n"
