"""The sweep flags and verbs of the helpers (one grammar for every platform; the work is taobank.sweeps).

  submit ... --sweep KEY=V1,V2 [--sweep KEY2=...] | --sweep-file sweep.yaml [--max-concurrent K] [--dry-run]
  status --sweep ID [--kpi NAME [--mode min|max]] [--watch] [--json]     cancel --sweep ID     tao_jobs.py sweep best ID --kpi NAME [--mode min|max]
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import kpirank, sweepfile
from ..errors import EXIT_FAILED, EXIT_OK, UsageError
from ..text import error_line
from .entry import print_direction_note, print_gate_notes, print_json


def add_submit_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sweep (many trials of this job, one record each; references/sweeps.md)")
    g.add_argument("--sweep", action="append", metavar="KEY=V1,V2", help="a TAO override and its values (repeatable: "
                   "the cartesian product); each trial gets KEY=VALUE after its command")
    g.add_argument("--sweep-file", metavar="FILE", help="grid, explicit trials, or seeded random samples (YAML)")
    g.add_argument("--max-concurrent", type=int, metavar="K", help="at most K trials run at once (default: all)")
    s = p.add_argument_group("search (an Optuna study its trials drive themselves; references/search.md)")
    s.add_argument("--search", metavar="SAMPLER", help="tpe | random | grid | cmaes: each trial asks the study for "
                   "its overrides as it starts")
    s.add_argument("--trials", type=int, metavar="N", help="with --search: how many trials the study runs")
    s.add_argument("--kpi", metavar="NAME", help="with --search: the KPI of status.json the study optimizes (one the "
                   "network logs, as TAO lists it, or its train_loss/val_loss)")
    s.add_argument("--no-kpi-check", action="store_true", help="with --search: take a --kpi TAO does not list (a "
                   "KPI its trainer writes all the same)")
    s.add_argument("--mode", choices=kpirank.MODES, help=f"with --search: {kpirank.MODE_HELP}")
    s.add_argument("--space", action="append", metavar="KEY=EXPR", help="with --search (repeatable): "
                   "KEY=loguniform(a,b) | uniform(a,b) | int(a,b) | choice(x,y,...); default: the keys TAO marks "
                   "automl_enabled for the job's network, within TAO's ranges (said on stderr)")
    s.add_argument("--space-file", metavar="FILE", help="with --search: the space as a YAML mapping KEY: EXPR")
    s.add_argument("--prune", metavar="PRUNER", help="with --search: asha (default) | hyperband | "
                   "median | none, over TAO's epochs")
    s.add_argument("--search-seed", type=int, default=0, metavar="S", help="with --search: the samplers' seed "
                   "(each trial's sampler is seeded from S and its index)")
    s.add_argument("--study-storage-env", metavar="NAME", help="with --search: keep the study in a PostgreSQL "
                   "database, its URL (postgresql://<user>:<password>@<host>:<port>/<database>) in the exported variable NAME; it "
                   "reaches the trials as a secret (default: a journal file on the results volume)")
    # the URL itself is a secret: taken only to be refused, unseen (search_of)
    s.add_argument("--study-storage", metavar="URL", help=argparse.SUPPRESS)


#: The flags only a search takes (a plain submit or sweep that names one is refused).
SEARCH_ONLY = ("trials", "kpi", "mode", "space", "space_file", "search_seed", "prune", "study_storage_env",
               "no_kpi_check")


def search_of(args: argparse.Namespace, spec: dict | None) -> object | None:
    """The search the flags describe (:class:`taobank.search.bundle.Staging`), None without ``--search``;
    every setting checked before anything is read or created. ``spec`` None: the flags alone, before the job's
    spec is built (a space left out is then TAO's AutoML keys, read with the spec's network:
    :func:`taobank.search.automl.of_job`)."""
    if getattr(args, "study_storage", None) is not None:
        from ..search import storage as storagemod

        raise UsageError(f"--study-storage takes no URL on the command line (it holds a password; it is not shown): "
                         f"export it and give {storagemod.FLAG} NAME, e.g. export TAO_STUDY_DB=postgresql://... "
                         f"then {storagemod.FLAG} TAO_STUDY_DB")
    if getattr(args, "search", None) is None:
        given = [f"--{n.replace('_', '-')}" for n in SEARCH_ONLY if getattr(args, n, None) not in (None, 0, [])]
        if given:
            raise UsageError(f"{given[0]} belongs to a search: give --search tpe|random|grid|cmaes too")
        return None
    from ..search import automl, bundle, settings, space

    if getattr(args, "sweep", None) or getattr(args, "sweep_file", None):
        raise UsageError("give --search or --sweep/--sweep-file, not both: a search chooses its trials' overrides")
    if args.trials is None:
        raise UsageError("--search needs --trials N: how many trials the study runs")
    chosen = space.of(args.space, args.space_file)
    make = dict(sampler=args.search, pruner=args.prune or "asha", trials=args.trials, kpi=args.kpi, mode=args.mode,
                seed=args.search_seed, storage_env=getattr(args, "study_storage_env", None) or "")
    if spec is None:
        settings.make("", **make, space=chosen, space_later=True)  # type: ignore[arg-type]
        return None
    checked = not getattr(args, "no_spec_check", False) and not getattr(args, "no_kpi_check", False)
    default: Any = None
    if not chosen:
        default = automl.of_job(spec)
        chosen = default.space
    try:
        found = settings.make("", **make, space=chosen, action=str(spec.get("action") or ""))  # type: ignore[arg-type]
    except UsageError as exc:
        if default is None:
            raise
        raise UsageError(f"{exc} (the space is TAO's AutoML keys of {default.network} {default.action}: give "
                         "--space to choose your own)") from None
    if checked:
        automl.check_kpi(spec, found.kpi)
    if default is not None:
        sys.stderr.write("".join(f"{line}\n" for line in default.lines()))
    return bundle.Staging(found)


def trials_of(args: argparse.Namespace) -> list[dict[str, str]] | None:
    """The trials the flags describe, or None (a plain submit); --max-concurrent alone is refused. A search's
    trials have no overrides yet (each asks the study as it starts)."""
    if getattr(args, "search", None) is not None:
        search_of(args, None)  # every search setting checked before the spec is read
        return [{} for _ in range(int(args.trials))]
    search_of(args, None)  # a search flag without --search is refused
    given, file = getattr(args, "sweep", None), getattr(args, "sweep_file", None)
    trials = sweepfile.trials(given, file) if given or file else None
    if trials is None and getattr(args, "max_concurrent", None) is not None:
        raise UsageError("--max-concurrent limits a sweep: give --sweep or --sweep-file too")
    return trials


def submit(platform: str, spec: dict, opts: object, trials: list[dict[str, str]], args: argparse.Namespace) -> int:
    from .. import sweeps

    from dataclasses import replace

    if getattr(args, "parent", None):
        opts = replace(opts, parent=args.parent)  # type: ignore[type-var]
    opts = replace(opts, spec_check=not getattr(args, "no_spec_check", False))  # type: ignore[type-var]
    search = search_of(args, spec)
    if getattr(args, "dry_run", False):  # the trial table and what would be sent; nothing created
        shown = sweeps.preview(platform, spec, opts, trials, args.max_concurrent,  # type: ignore[arg-type]
                               parent_kpi=getattr(args, "parent_kpi", None),
                               parent_mode=getattr(args, "parent_mode", None),
                               allow_incomplete_parent=bool(getattr(args, "allow_incomplete_parent", False)),
                               check=bool(getattr(args, "check", False)), search=search)
        print_gate_notes("sweep preview:", shown.notes)
        print_json(shown.to_dict()) if args.json else sys.stdout.write(shown.text())
        return EXIT_OK
    if getattr(args, "check", False):
        raise UsageError("--check runs a dry run's read-only checks: give --dry-run too")
    print_direction_note(getattr(args, "parent_kpi", None), getattr(args, "parent_mode", None), "--parent-mode")
    done = sweeps.submit(platform, spec, opts, trials, args.max_concurrent,  # type: ignore[arg-type]
                         parent_kpi=getattr(args, "parent_kpi", None), parent_mode=getattr(args, "parent_mode", None),
                         allow_incomplete_parent=bool(getattr(args, "allow_incomplete_parent", False)),
                         search=search)
    print_gate_notes(f"sweep {done.sweep}", done.notes)
    if args.json:
        print_json(done.to_dict())
    elif args.quiet:
        print(done.sweep)
    else:
        what = "a search of " if search is not None else ""
        print(f"sweep {done.sweep} submitted: {what}{len(done.views)} trials, at most {done.max_concurrent} at once")
        for v in done.views:
            print(f"  {v.id} {v.backend_ref or '-'} {' '.join(sweepfile.args_of(_overrides(v.id)))}")
        print(f"watch it: tao_jobs.py status --sweep {done.sweep}")
    return EXIT_OK


def _overrides(job_id: str) -> dict:
    from .. import records

    return dict(records.get(job_id).overrides or {})


def _own(sweep_id: str, platform: str | None) -> list | None:
    """A platform helper drives only its own platform's sweeps (as it does jobs); tao_jobs.py drives any.
    The trials it read (passed on: each record read once per command), None when it read none."""
    from .. import sweeps
    from ..record_selection import owned

    if platform is None:
        return None
    recs = sweeps.trial_records(sweep_id)
    owned(recs[0], platform, "sweep")
    return recs


def status(args: argparse.Namespace, platform: str | None = None) -> int:
    from .. import jobstatus, sweeps

    recs = _own(args.sweep, platform)
    if args.watch:
        ids = [r.id for r in recs or sweeps.trial_records(args.sweep)]
        jobstatus.watch(None, ids, on_line=lambda line: print(line, flush=True), retry=not args.no_retry,
                        first=args.interval)
        recs = None  # the watch moved them on: read again
    rows = sweeps.status(args.sweep, retry=not args.no_retry, kpi=getattr(args, "kpi", None),
                         mode=getattr(args, "mode", None), recs=recs)
    if args.json:
        print_json([r.to_dict() for r in rows])
    else:
        sys.stdout.write(sweeps.table(rows, headers=not getattr(args, "no_headers", False)))
        line = sweeps.study_best_line(rows)
        if line and not getattr(args, "no_headers", False):
            print(line)
    if args.watch:
        return EXIT_FAILED if any(r.state == "ERROR" for r in rows) else EXIT_OK
    return EXIT_OK


def cancel(args: argparse.Namespace, platform: str | None = None) -> int:
    from .. import sweeps

    _own(args.sweep, platform)
    views, errors = sweeps.cancel(args.sweep)
    if args.json:
        print_json([v.to_dict() for v in views])
    else:
        for v in views:
            print(v.line())
    for line in errors:
        print(error_line(line), file=sys.stderr)
    return EXIT_FAILED if errors else EXIT_OK


def add_sweep_verb(sub: argparse._SubParsersAction) -> None:
    """``tao_jobs.py sweep best ID --kpi NAME [--mode min|max]``; ``tao_jobs.py study ID [--dashboard]``."""
    st = sub.add_parser("study", help="a search's study: every trial's parameters, state, epochs and value, and the "
                        "best")
    st.add_argument("id", metavar="SWEEP")
    st.add_argument("--dashboard", action="store_true", help="serve the study in optuna-dashboard on 127.0.0.1 "
                    "(from a copy of its journal, refreshed; Ctrl-C stops it)")
    st.add_argument("--port", type=int, default=8080, help="with --dashboard: the port (default 8080)")
    st.add_argument("--json", action="store_true", help="the study's trials and best")
    st.set_defaults(func=cmd_study)
    p = sub.add_parser("sweep", help="compare the trials of a sweep")
    verbs = p.add_subparsers(dest="sweep_verb", required=True)
    b = verbs.add_parser("best", help="the trial with the best KPI, and its best checkpoint")
    b.add_argument("id", metavar="SWEEP")
    b.add_argument("--kpi", metavar="NAME", help="a KPI of status.json (val_loss, mAP ...); a search's own KPI when "
                   "left out")
    b.add_argument("--mode", choices=kpirank.MODES, help=kpirank.MODE_HELP)
    b.add_argument("--json", action="store_true", help="the winner and every trial ranked")
    b.set_defaults(func=cmd_best)


def cmd_best(args: argparse.Namespace) -> int:
    from .. import sweeps

    win = sweeps.best(args.id, args.kpi, args.mode)
    if args.json:
        print_json(win.to_dict())
    else:
        print(win.line())
    return EXIT_OK if win.id else EXIT_FAILED


def cmd_study(args: argparse.Namespace) -> int:
    from .. import records, sweeps
    from ..search import journal

    recs = sweeps.trial_records(args.id)
    storage_env = journal.storage_env_of(recs[0])
    if args.dashboard:
        from ..search import dashboard

        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        if storage_env:  # a database study: served from the database, with the URL of this shell
            dashboard.serve_database(storage_env, args.port, on_line=say)
            return EXIT_OK
        if sweeps.journal_text(args.id, recs[:1]) is None:
            raise UsageError(f"sweep {args.id} is not a search (submit --search): it has no study")

        def fetch() -> str:
            got = sweeps.journal_text(args.id, recs[:1])
            return got[0] if got else ""

        dashboard.serve(records.artifact_dir(recs[0].id) / dashboard.COPY_FILE, fetch, args.port, on_line=say)
        return EXIT_OK
    view = sweeps.study_view(args.id, recs)  # the one read of its journal, or its database
    if args.json:
        print_json(view)
    else:
        sys.stdout.write(sweeps.study_text(view))
    return EXIT_OK
