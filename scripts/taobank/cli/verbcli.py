"""One command-line grammar for the job verbs of every helper (tao_k8s.py, tao_slurm.py, tao_jobs.py), the sweep
flags and verbs included (the work is taobank.campaign.sweeps).

  status [ID... | --last] [--watch] [--interval S] [--no-retry] [--json]   --json is always a list
  logs ID | --last [--tail N] [-f/--follow] [--json]
  cancel ID... | --last | --all [--json]
  artifacts ID | --last [--kpi NAME [--mode min|max]] [--json]
  fetch ID [PATH...] | --last [PATH...] --to DIR [--force] [--copy] [--json]
  prune ID... [--keep best|last|N [--kpi NAME]] [--dry-run] [--yes] [--json]
  submit ... [--dry-run] [--quiet] [--json] [--name TEXT]
  --version

--last stands for the most recently created record (of the helper's platform;
any platform for tao_jobs.py).

Exit codes (every helper): 0 ok; 1 failed, or a watched job ended in ERROR;
2 usage; 130 interrupted. Old spellings keep working for one release and
print a deprecation line on stderr.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from ..core import platform as core
from .. import registry
from ..campaign import sweepfile
from ..errors import EXIT_FAILED, EXIT_OK, TaoError, UsageError
from ..jobspec import KPI_MODE_HELP, KPI_MODES
from ..text import error_line, one_line, terminal_text
from .entry import deprecated, print_direction_note, print_gate_notes, print_json


# ------------------------------------------------------------------ --last
def add_last(p: argparse.ArgumentParser, platform: str | None) -> None:
    where = f"{platform} " if platform else ""
    p.add_argument("--last", action="store_true", help=f"the {where}job submitted last (the newest record)")


def chosen_ids(args: argparse.Namespace, platform: str | None) -> list[str]:
    """The ids a verb acts on: those given, or the newest record's with --last (never both)."""
    ids = list(getattr(args, "ids", None) or ([args.id] if getattr(args, "id", None) else []))
    if not args.last:
        return ids
    if ids or getattr(args, "all", False):
        raise UsageError("--last names one job: give it without job ids or --all")
    return [core.last_id(platform)]


# ------------------------------------------------------------------ status
def one_job(args: argparse.Namespace, platform: str | None, verb: str) -> str:
    """The one job a verb reads: the id given, or the newest record's with --last."""
    ids = chosen_ids(args, platform)
    if not ids:
        raise UsageError(f"{verb} needs a job id or --last")
    return ids[0]


def add_status(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    where = f"{platform} " if platform else ""
    p = sub.add_parser("status", help=f"refresh and print job states (no id: every active {where}job)")
    p.add_argument("ids", nargs="*", metavar="ID")
    add_last(p, platform)
    p.add_argument("--watch", action="store_true", help="poll with backoff until every job is terminal")
    p.add_argument("--interval", type=float, default=5.0, help="first poll delay in seconds for --watch (doubles up "
                   "to 60 while nothing changes)")
    p.add_argument("--no-retry", action="store_true", help="never resubmit an infrastructure failure (SLURM)")
    p.add_argument("--json", action="store_true", help="print a JSON list (always a list)")
    p.add_argument("--sweep", metavar="SWEEP", help="one table of a sweep's trials (overrides, progress, KPIs)")
    p.add_argument("--kpi", metavar="NAME", help="with --sweep: each trial's best value of this KPI and its epoch, "
                   "as sweep best ranks them (default: the latest value of every KPI)")
    p.add_argument("--mode", choices=KPI_MODES, help=f"with --kpi: {KPI_MODE_HELP}")
    p.set_defaults(func=lambda a: cmd_status(a, platform))
    return p


def _progress(as_json: bool) -> Callable[[str], None]:
    """Watch lines, one per job change: on a terminal a job's new line rewrites its previous one when that
    was the last line printed; stderr under --json."""
    out = sys.stderr if as_json else sys.stdout
    tty = out.isatty()
    last_job: list[str] = []  # the job whose line the terminal shows last

    def emit(line: str) -> None:
        if tty:
            job = line.split(" ", 1)[0]
            out.write(("\r\033[K" if last_job == [job] else "\n" if last_job else "") + line[:200])
            last_job[:] = [job]
        else:
            out.write(line + "\n")
        out.flush()

    emit.tty = tty  # type: ignore[attr-defined]
    return emit


def cmd_status(args: argparse.Namespace, platform: str | None) -> int:
    from ..campaign import jobstatus

    if not 0.5 <= args.interval <= 3600:  # nan fails too
        raise UsageError("--interval must be between 0.5 and 3600 seconds")
    if getattr(args, "sweep", None):
        if args.ids or getattr(args, "last", False):
            raise UsageError("give job ids or --sweep, not both")
        return sweep_status(args, platform)
    if getattr(args, "kpi", None) is not None:
        raise UsageError("--kpi ranks the trials of a sweep: give --sweep SWEEP too (one job: artifacts ID --kpi NAME)")
    retry = not args.no_retry
    ids = chosen_ids(args, platform)
    if args.watch:
        emit = _progress(args.json)
        views = jobstatus.watch(platform, ids or None, on_line=emit, retry=retry, first=args.interval)
        if emit.tty:  # type: ignore[attr-defined]
            (sys.stderr if args.json else sys.stdout).write("\n")
        if args.json:
            print_json([v.to_dict() for v in views])
        return core.watch_exit_code(views)
    problems: list[str] = []
    views = jobstatus.status(platform, ids or None, retry=retry, problems=problems)
    for line in problems:  # a damaged record never stops the status of the others
        print(one_line(f"warning: skipped {line}"), file=sys.stderr)
    if args.json:
        print_json([v.to_dict() for v in views])
    elif not views:
        print(f"no active {platform or ''} jobs".replace("  ", " "))
    elif getattr(args, "table", False):
        from ..campaign import jobtable

        sys.stdout.write(jobtable.render(views, headers=not args.no_headers))
    else:
        for v in views:
            print(v.line())
    hinted = [v.id for v in views if v.extra.get("progress_hint")]
    if hinted and not args.json:
        print(f"note: {jobstatus.PROGRESS_HINT} ({len(hinted)} running jobs here; e.g. status {hinted[0]})", file=sys.stderr)
    return EXIT_OK


# ------------------------------------------------------------------ logs
def add_logs(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    p = sub.add_parser("logs", help="the job's output (every pod / main.out and main.err)")
    p.add_argument("id", metavar="ID", nargs="?")
    add_last(p, platform)
    p.add_argument("--tail", type=int, metavar="N", help="last N lines (per pod / per stream)")
    p.add_argument("--lines", type=int, help=argparse.SUPPRESS)  # deprecated spelling of --tail
    p.add_argument("-f", "--follow", action="store_true", help="stream new output until the job ends")
    p.add_argument("--json", action="store_true", help='{"id", "source", "sections": {name: text}}')
    p.add_argument("--raw", action="store_true", help="the job's bytes as they are (default: control characters "
                   "and terminal escape sequences shown escaped, as \\x1b)")
    p.set_defaults(func=lambda a: cmd_logs(a, platform))
    return p


def cmd_logs(args: argparse.Namespace, platform: str | None) -> int:
    job_id = one_job(args, platform, "logs")
    tail = args.tail
    if args.lines is not None:
        deprecated("--lines")
        tail = tail if tail is not None else args.lines
    if args.follow:
        if args.json:
            raise UsageError("--follow streams text: drop --json")

        def emit(section: str, text: str) -> None:
            stream = sys.stderr if section.endswith("main.err") else sys.stdout
            stream.write(text if args.raw else terminal_text(text))
            stream.flush()

        return core.follow(platform, job_id, tail=tail, emit=emit)
    out = core.logs(platform, job_id, tail=tail)
    if args.json:
        print_json(out.to_dict())
        return EXIT_OK
    if out.source == "saved":
        sys.stdout.flush()  # the note on its own line, before the text it is about
        print("# the job has ended and its output is no longer on the cluster or engine; these are the logs "
              "saved when it ended", file=sys.stderr)
    elif out.source == "volume":
        print("# the job's pods are gone; this is the output copy the job kept on its results volume", file=sys.stderr)
    many = len(out.sections) > 1
    for name, text in out.sections.items():
        if many:
            print(f"==> {name} <==")
        if not args.raw:
            text = terminal_text(text)
        sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
    return EXIT_OK


# ------------------------------------------------------------------ cancel
def add_cancel(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    where = f"{platform} " if platform else ""
    p = sub.add_parser("cancel", help="stop jobs and mark them CANCELED (their credentials are removed)")
    p.add_argument("ids", nargs="*", metavar="ID")
    add_last(p, platform)
    p.add_argument("--all", action="store_true", help=f"every active {where}job of this machine's records")
    p.add_argument("--sweep", metavar="SWEEP", help="every trial of this sweep (held ones too)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=lambda a: cmd_cancel(a, platform))
    return p


def cmd_cancel(args: argparse.Namespace, platform: str | None) -> int:
    if args.ids and args.all:
        raise UsageError("give job ids or --all, not both")
    if getattr(args, "sweep", None):
        if args.ids or args.all or getattr(args, "last", False):
            raise UsageError("give job ids, --all or --sweep, not two of them")
        return sweep_cancel(args, platform)
    views, errors = core.cancel(platform, chosen_ids(args, platform) or None, all_active=args.all)
    if args.json:
        print_json([v.to_dict() for v in views])
    else:
        for v in views:
            print(v.line())
        if not views and not errors:
            print("no active jobs to cancel")
    for line in errors:
        print(error_line(line), file=sys.stderr)
    return EXIT_FAILED if errors else EXIT_OK


# ------------------------------------------------------------------ results: artifacts, fetch, prune
def add_artifacts(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    p = sub.add_parser("artifacts", help="list a job's results (size, time, checkpoints; the best by a KPI)")
    p.add_argument("id", metavar="ID", nargs="?")
    add_last(p, platform)
    p.add_argument("--kpi", metavar="NAME", help="mark the best checkpoint by this KPI of status.json (val_loss ...)")
    p.add_argument("--mode", choices=KPI_MODES, help=KPI_MODE_HELP)
    p.add_argument("--json", action="store_true", help='{"folder", "files": [...], "best": {...}}')
    p.set_defaults(func=lambda a: cmd_artifacts(a, platform))
    return p


def cmd_artifacts(args: argparse.Namespace, platform: str | None) -> int:
    from ..campaign import results_verbs

    found = results_verbs.artifacts(platform, one_job(args, platform, "artifacts"), kpi=args.kpi, mode=args.mode)
    if args.json:
        print_json(found.to_dict())
        return EXIT_OK
    stream = sys.stdout if found.listing.exists else sys.stderr
    print("\n".join(found.lines()), file=stream)
    return EXIT_OK


def add_fetch(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    p = sub.add_parser("fetch", help="download a job's results (all, or the PATHs inside its folder), verified")
    p.add_argument("words", nargs="*", metavar="ID [PATH...]", help="the job id, then paths relative to its "
                   "results folder (none: everything); with --last only paths")
    add_last(p, platform)
    p.add_argument("--to", required=True, metavar="DIR", help="local folder (made if missing)")
    p.add_argument("--force", action="store_true", help="replace files that exist under --to")
    p.add_argument("--copy", action="store_true", help="Docker: copy even a finished job's big files (by default "
                   "they are hard links where --to is on the same filesystem: the job's own files)")
    p.add_argument("--best", action="store_true", help="only the best checkpoint by --kpi (as artifacts --kpi "
                   "finds it), in place of PATHs")
    p.add_argument("--kpi", metavar="NAME", help="with --best: the KPI that ranks the checkpoints (val_loss)")
    p.add_argument("--mode", choices=KPI_MODES, help=f"with --best: {KPI_MODE_HELP}")
    p.add_argument("--json", action="store_true", help="a JSON list of the files fetched")
    p.set_defaults(func=lambda a: cmd_fetch(a, platform))
    return p


def _progress_line() -> Callable[[str], None]:
    """Transfer progress on stderr: rewritten in place on a terminal, one line each otherwise."""
    tty = sys.stderr.isatty()

    def emit(text: str) -> None:
        sys.stderr.write(("\r\033[K" + text) if tty else text + "\n")
        sys.stderr.flush()

    emit.tty = tty  # type: ignore[attr-defined]
    return emit


def cmd_fetch(args: argparse.Namespace, platform: str | None) -> int:
    from ..campaign import results_fetch, results_verbs

    words = list(args.words)
    if args.last:
        job_id = core.last_id(platform)
    elif words:
        job_id = words.pop(0)
    else:
        raise UsageError("fetch needs a job id or --last")
    if args.best != (args.kpi is not None):
        raise UsageError("--best and --kpi NAME go together: fetch ID --best --kpi val_loss --to DIR")
    if args.best:
        if words:
            raise UsageError("--best fetches the best checkpoint: drop the PATHs")
        found = results_verbs.artifacts(platform, job_id, kpi=args.kpi, mode=args.mode).best
        if found is None or not found.checkpoints:
            why = (found.note if found is not None else None) or "no checkpoint was written at that epoch"
            raise TaoError(f"job {job_id}: no best checkpoint by {args.kpi}: {why}")
        words = list(found.checkpoints)
    emit = _progress_line()
    try:  # --json: nothing but the JSON (no progress line)
        got = results_fetch.fetch(platform, job_id, words, args.to, force=args.force, links=not args.copy,
                                 emit=None if args.json else emit,
                                 note=lambda text: print(one_line(f"note: {text}"), file=sys.stderr))
    finally:
        if emit.tty and not args.json:  # type: ignore[attr-defined]
            sys.stderr.write("\r\033[K")
    if args.json:
        print_json([f.to_dict() for f in got])
    else:
        files = [f for f in got if not f.link_to]
        total = sum(f.file.size for f in files)
        moved = sum(f.moved for f in files)
        now = "" if moved == total else f", {results_verbs.human(moved)} moved by this run"
        links = len(got) - len(files)
        and_links = f" and {links} link{'s' if links > 1 else ''}" if links else ""
        print(f"fetched {len(files)} file{'s' if len(files) != 1 else ''}{and_links} ({results_verbs.human(total)}{now}) "
              f"of {job_id}, each verified:")
        for f in got:
            print(f"  {f.line()}")
    return EXIT_OK


def add_prune(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    p = sub.add_parser("prune", help="delete finished jobs' results folders, or with --keep their other checkpoints "
                       "(lists what goes, then asks once; --dry-run only lists; --yes for scripts)")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--keep", metavar="best|last|N", help="delete only checkpoints, keeping the best (--kpi), the "
                   "last (the one continue resumes from) or the N newest; the kept ones are checked intact. "
                   "Trials of one sweep named together with --keep best: the winner keeps its best, the others none")
    p.add_argument("--kpi", metavar="NAME", help="with --keep best: the KPI of status.json to rank by (val_loss ...)")
    p.add_argument("--mode", choices=KPI_MODES, help=f"with --keep best: {KPI_MODE_HELP}")
    p.add_argument("--dry-run", action="store_true", help="list each file that would go (and its size), per job; "
                   "delete nothing")
    p.add_argument("--yes", action="store_true", help="do not ask (needed when stdin is not a terminal)")
    p.add_argument("--json", action="store_true", help="a JSON list")
    p.set_defaults(func=lambda a: cmd_prune(a, platform))
    return p


#: How long prune's one question waits for an answer on a terminal (seconds); then it deletes nothing.
ANSWER_WAIT_S = 120.0


def answer(question: str, wait_s: float | None = None) -> bool:
    """Ask ``question`` on stderr (ending in a newline: a reader that shows whole lines shows it) and read one line
    of stdin; yes only for y/yes. No answer within ``wait_s``, or end of input, is no: never a hang."""
    import select

    wait_s = ANSWER_WAIT_S if wait_s is None else wait_s
    sys.stderr.write(question if question.endswith("\n") else question + "\n")
    sys.stderr.flush()
    try:
        fd: int | None = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None  # a stand-in stdin (tests): read it as is
    if fd is not None and not select.select([fd], [], [], wait_s)[0]:
        sys.stderr.write(f"no answer in {wait_s:.0f} s: nothing was deleted\n")
        return False
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def cmd_prune(args: argparse.Namespace, platform: str | None) -> int:
    from ..campaign import results_verbs

    results_verbs.keep_rule(args.keep, args.kpi, args.mode)  # a usage error before any question
    if args.dry_run:
        plans, errors = results_verbs.plan_prune(platform, args.ids, args.keep, args.kpi, args.mode)
        if args.json:
            print_json([p.to_dict() for p in plans])
        elif plans:
            print("dry run, nothing deleted: " + results_verbs.plan_text(plans, []).rstrip("\n"))
        sys.stderr.write("".join(error_line(line) + "\n" for line in errors))
        return EXIT_FAILED if errors else EXIT_OK
    tty = sys.stdin.isatty()

    def ask(question: str) -> bool:
        if args.yes:
            return True
        if not tty:  # say what it would delete, then refuse
            sys.stderr.write(question.rsplit("\n", 1)[0] + "\n")
            raise UsageError("prune deletes results for good and nothing was deleted: run it on a terminal to "
                             "answer its one question, or pass --yes (--dry-run only lists)")
        return answer(question)

    done, errors = results_verbs.prune(platform, args.ids, confirm=ask, keep=args.keep, kpi=args.kpi, mode=args.mode,
                                       preview=not args.yes)
    if args.json:
        print_json([d.to_dict() for d in done])
    elif done:
        print("\n".join(d.line() for d in done))
    sys.stderr.write("".join(error_line(line) + "\n" for line in errors))
    return EXIT_FAILED if errors else EXIT_OK


def add_results(sub: argparse._SubParsersAction, platform: str | None) -> None:
    """artifacts, fetch and prune, identical for every helper."""
    add_artifacts(sub, platform)
    add_fetch(sub, platform)
    add_prune(sub, platform)


# ------------------------------------------------------------------ submit
# ------------------------------------------------------------------ metrics
def add_metrics(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    p = sub.add_parser("metrics", help="the KPIs a TAO training logged, by epoch (also after the job ended)")
    p.add_argument("id", metavar="ID", nargs="?")
    add_last(p, platform)
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help='{"id", "file", "skipped_lines", "rows": [...]}')
    shape.add_argument("--csv", action="store_true", help="the table as CSV")
    shape.add_argument("--plot", action="store_true", help="a terminal chart (needs the plotext package)")
    p.add_argument("--kpi", action="append", metavar="NAME", help="the KPIs to chart (repeatable; default: all)")
    p.add_argument("--png", metavar="FILE", help="also write the chart as an image (needs matplotlib); an existing "
                   "FILE needs --force")
    p.add_argument("--force", action="store_true", help="with --png: replace an existing FILE")
    p.set_defaults(func=lambda a: cmd_metrics(a, platform))
    return p


def cmd_metrics(args: argparse.Namespace, platform: str | None) -> int:
    from ..campaign import jobstatus

    from .. import progress
    from ..progress.series import require_kpis

    job_id = one_job(args, platform, "metrics")
    if args.kpi and not (args.plot or args.png):
        raise UsageError("--kpi chooses what --plot or --png draws: add one of them")
    if args.force and not args.png:
        raise UsageError("--force replaces the --png FILE: add --png FILE")
    if args.png:
        png_target(args.png, args.force)  # refused before any cluster call, as fetch refuses
    rows, log, chosen = jobstatus.metrics(platform, job_id)
    if args.kpi:
        require_kpis(rows, args.kpi)
    if args.json:
        print_json({"id": job_id, "file": chosen, "skipped_lines": log.skipped, "cut_bytes": log.cut_size,
                    "rows": progress.to_json(rows)})
    elif args.csv:
        sys.stdout.write(progress.to_csv(rows))
    elif args.plot:
        sys.stdout.write(progress.plot_terminal(rows, args.kpi) + "\n")
    else:
        sys.stdout.write(progress.table(rows) + "\n")  # a table ends its last line, as every other output does
    if log.skipped and not args.json:
        print(f"note: {log.skipped} unreadable line(s) of {chosen} skipped", file=sys.stderr)
    if log.cut_size and not args.json:
        print(f"note: {chosen} is {log.cut_size} bytes: only its last {progress.remote.TAIL_BYTES} were read, "
              "so its first epochs are not shown", file=sys.stderr)
    if args.png:
        print(f"wrote {progress.plot_png(rows, args.kpi, args.png)}", file=sys.stderr)
    return EXIT_OK


def png_target(path: str, force: bool) -> None:
    """``metrics --png FILE``: an existing file (or a link, or a folder) is never replaced without ``--force``."""
    from pathlib import Path

    target = Path(path)
    if target.is_dir():
        raise TaoError(f"--png {one_line(path)} is a folder: give a file name")
    if (target.exists() or target.is_symlink()) and not force:
        raise TaoError(f"--png {one_line(path)} exists: pass --force to replace it, or pick another file")


def add_submit_outputs(p: argparse.ArgumentParser) -> None:
    """The flags every submit shares: what to print, and a name that tells jobs apart."""
    p.add_argument("--name", dest="description", metavar="TEXT",
                   help="free text stored in the record and shown by tao_jobs.py list (max 200 chars)")
    p.add_argument("--dry-run", action="store_true", help="print what would be sent (manifest / script); "
                   "contact nothing, open no record (its first line, on stderr, says what it did not check)")
    p.add_argument("--check", action="store_true", help="with --dry-run: first run the submit's read-only checks "
                   "(the cluster or engine, GPUs, queue or quota, input paths, image; no pull, no record)")
    p.add_argument("--no-spec-check", action="store_true", help="skip the check of TAO experiment specs and "
                   "overrides against the pinned TAO's schema (a network it does not know, a site's own TAO build)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the new job's view as JSON")
    out.add_argument("-q", "--quiet", action="store_true", help="print only the job id")


def print_submitted(view: core.JobView, args: argparse.Namespace, details: list[str]) -> None:
    if args.json:
        print_json(view.to_dict())
    elif args.quiet:
        print(view.id)
    else:
        print(f"{view.id} submitted: {view.backend_ref or '-'} state={view.state}")
        for line in details:
            print(line)


def add_nccl_probe(sub: argparse._SubParsersAction, help: str) -> argparse.ArgumentParser:
    """The nccl-probe options both helpers share; each adds only its platform's placement flags."""
    p = sub.add_parser("nccl-probe", help=help)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--gpus-per-node", type=int, default=1)
    p.add_argument("--image", help="default: versions.yaml images.nccl_probe")
    p.add_argument("--backend", choices=["nccl", "gloo-cpu"], default="nccl",
                   help="nccl (default): NCCL all-reduce over the GPUs; gloo-cpu: gloo over TCP on the CPU, one "
                        "process per node: proves the network path between nodes, not NCCL over GPUs")
    p.add_argument("--timeout", type=int, default=300, help="seconds the all-reduce may take (coreutils timeout)")
    p.add_argument("--force", action="store_true", help="probe again even if an ok verdict is cached")
    p.add_argument("--interval", type=float, default=5.0, help="status poll interval")
    p.add_argument("--max-wait", type=float, help="seconds to wait for the job before cancelling it "
                   "(default: --timeout + 600)")
    p.add_argument("--json", action="store_true")
    return p


def nccl_report(out: dict, *, as_json: bool) -> int:
    """Print a probe result the one way both helpers do; the exit code is 0 only for ``ok``."""
    from ..core.nccl_probe import PROVES, backend_of

    ok = out["verdict"] == "ok"
    if as_json:
        print_json(out)
    elif ok:
        how = f"cached from {out['checked_at']} (job {out['job_id']}; --force re-probes)" if out["cached"] \
            else f"job {out['job_id']}"
        print(f"nccl-probe ok on {out['cluster']}: {how}; backend {out.get('backend') or 'nccl'} proves "
              f"{PROVES[backend_of(out)]}")
    if not ok:
        print(f"error: NCCL probe ({backend_of(out)}) {out['verdict']} on {out['cluster']} (job {out['job_id']}, exit code "
              f"{out['exit_code']}): {out['advice']}", file=sys.stderr)
    return 0 if ok else 1


def add_common(sub: argparse._SubParsersAction, platform: str | None) -> None:
    """status, logs, cancel and metrics, identical for every helper."""
    add_status(sub, platform)
    add_logs(sub, platform)
    add_cancel(sub, platform)
    add_metrics(sub, platform)


# ------------------------------------------------------------------ lineage: continue, submit --parent
def add_continue(sub: argparse._SubParsersAction, platform: str | None) -> argparse.ArgumentParser:
    """``continue ID [--from CHECKPOINT]``: a new job carrying on a failed/canceled/timed-out one."""
    p = sub.add_parser("continue", help="a NEW job continuing a failed, canceled or timed-out train job from its "
                       "latest checkpoint (or --from); same spec otherwise; its record names the job it continues")
    p.add_argument("id", metavar="ID")
    p.add_argument("--from", dest="checkpoint", metavar="CHECKPOINT",
                   help="a checkpoint inside the job's results folder (relative to it, or absolute)")
    more = p.add_mutually_exclusive_group()
    more.add_argument("--time-hours", type=float, metavar="H", help="the new job's time limit, for a job that ran "
                      "out of time (SLURM wall time, Kubernetes activeDeadlineSeconds; Docker jobs have none)")
    more.add_argument("--time-minutes", type=float, metavar="M", help="the same, in minutes")
    add_submit_outputs(p)  # --name (default: the old job's), --quiet, --json
    p.set_defaults(func=lambda a: cmd_continue(a, platform))
    return p


def cmd_continue(args: argparse.Namespace, platform: str | None) -> int:
    from ..campaign import lineage

    minutes = args.time_minutes if args.time_hours is None else args.time_hours * 60
    if args.check and not args.dry_run:
        raise UsageError("--check runs a dry run's read-only checks: give --dry-run too")
    view = lineage.continue_job(platform, args.id, checkpoint=args.checkpoint, description=args.description,
                                dry_run=args.dry_run, time_minutes=minutes, queue=getattr(args, "queue", None),
                                check=args.check, note=lambda line: print(line, file=sys.stderr),
                                spec_check=not args.no_spec_check)
    if args.dry_run:
        print_json({"continues": args.id, "preview": view}) if args.json else sys.stdout.write(view)
        return EXIT_OK
    print_gate_notes(view.id, view.extra.get("gate_notes") or [])
    print_submitted(view, args, [f"continues {args.id} from {view.extra.get('continues_from')}"])
    return EXIT_OK


def add_parent(p: argparse.ArgumentParser) -> None:
    """``submit --parent ID``: a job using a train job's results ({parent.results_dir}, {parent.checkpoint})."""
    p.add_argument("--parent", metavar="ID", help="a job whose results this one uses: {parent.results_dir} and "
                   "{parent.checkpoint} (its latest checkpoint) are filled in the command, args, env and specs")
    p.add_argument("--allow-incomplete-parent", action="store_true",
                   help="use a parent that is not COMPLETE (what it left so far)")
    p.add_argument("--parent-kpi", metavar="NAME", help="{parent.checkpoint} is the checkpoint of the epoch where "
                   "this KPI (as in status.json, e.g. val_loss) is best, not the newest")
    p.add_argument("--parent-mode", choices=KPI_MODES, help=f"with --parent-kpi: {KPI_MODE_HELP}")


def checked_preview(platform: str, check: bool) -> Callable:
    """The platform's preview of a spec, with the dry run's lines on stderr (:func:`taobank.core.pipeline.preview`:
    without ``check`` (``--check``) which checks it did not run; with it, the submit's read-only checks first)."""
    def run(spec: dict, opts):  # type: ignore[no-untyped-def]
        from ..core import pipeline

        text, lines = pipeline.preview(core.get(platform), spec, opts, check=check)
        for line in lines:
            print(line, file=sys.stderr)
        return text

    return run


def submit_lineage(platform: str, spec: dict, opts, args: argparse.Namespace, dry_run: bool = False):
    """The submit (or the dry run) of a spec, through :mod:`taobank.campaign.lineage` with --parent."""
    from dataclasses import replace

    from ..campaign import lineage

    opts = replace(opts, spec_check=not getattr(args, "no_spec_check", False))
    preview = checked_preview(platform, bool(getattr(args, "check", False))) if dry_run else None
    if preview is None and getattr(args, "check", False):
        raise UsageError("--check runs a dry run's read-only checks: give --dry-run too")
    if not getattr(args, "parent", None):
        if getattr(args, "parent_kpi", None) is not None or getattr(args, "allow_incomplete_parent", False):
            raise UsageError("--parent-kpi and --allow-incomplete-parent choose from a parent: give --parent ID too")
        return preview(spec, opts) if preview is not None else registry.adapter(platform).submit(spec, opts)
    print_direction_note(args.parent_kpi, args.parent_mode, "--parent-mode")
    return lineage.submit_with_parent(platform, spec, replace(opts, parent=args.parent),
                                      allow_incomplete=args.allow_incomplete_parent, kpi=args.parent_kpi,
                                      mode=args.parent_mode, preview=preview)


# ------------------------------------------------------------------ sweeps
# The sweep flags and verbs of the helpers (one grammar for every platform; the work is taobank.campaign.sweeps).
#
# submit ... --sweep KEY=V1,V2 [--sweep KEY2=...] | --sweep-file sweep.yaml [--max-concurrent K] [--dry-run]
# status --sweep ID [--kpi NAME [--mode min|max]] [--watch] [--json]     cancel --sweep ID     tao_jobs.py sweep best ID --kpi NAME [--mode min|max]
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
    s.add_argument("--mode", choices=KPI_MODES, help=f"with --search: {KPI_MODE_HELP}")
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
    """The search the flags describe (:class:`taobank.campaign.search.bundle.Staging`), None without ``--search``;
    every setting checked before anything is read or created. ``spec`` None: the flags alone, before the job's
    spec is built (a space left out is then TAO's AutoML keys, read with the spec's network:
    :func:`taobank.campaign.search.automl.of_job`)."""
    if getattr(args, "study_storage", None) is not None:
        from ..campaign.search import storage as storagemod

        raise UsageError(f"--study-storage takes no URL on the command line (it holds a password; it is not shown): "
                         f"export it and give {storagemod.FLAG} NAME, e.g. export TAO_STUDY_DB=postgresql://... "
                         f"then {storagemod.FLAG} TAO_STUDY_DB")
    if getattr(args, "search", None) is None:
        given = [f"--{n.replace('_', '-')}" for n in SEARCH_ONLY if getattr(args, n, None) not in (None, 0, [])]
        if given:
            raise UsageError(f"{given[0]} belongs to a search: give --search tpe|random|grid|cmaes too")
        return None
    from ..campaign.search import automl, bundle, settings, space

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


def sweep_submit(platform: str, spec: dict, opts: object, trials: list[dict[str, str]], args: argparse.Namespace) -> int:
    from ..campaign import sweeps

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
            print(f"  {v.id} {v.backend_ref or '-'} {' '.join(sweepfile.args_of(_sweep_overrides(v.id)))}")
        print(f"watch it: tao_jobs.py status --sweep {done.sweep}")
    return EXIT_OK


def _sweep_overrides(job_id: str) -> dict:
    from .. import records

    return dict(records.get(job_id).overrides or {})


def _own_sweep(sweep_id: str, platform: str | None) -> list | None:
    """A platform helper drives only its own platform's sweeps (as it does jobs); tao_jobs.py drives any.
    The trials it read (passed on: each record read once per command), None when it read none."""
    from ..campaign import sweeps
    from ..core.record_selection import owned

    if platform is None:
        return None
    recs = sweeps.trial_records(sweep_id)
    owned(recs[0], platform, "sweep")
    return recs


def sweep_status(args: argparse.Namespace, platform: str | None = None) -> int:
    from ..campaign import jobstatus, sweeps

    recs = _own_sweep(args.sweep, platform)
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


def sweep_cancel(args: argparse.Namespace, platform: str | None = None) -> int:
    from ..campaign import sweeps

    _own_sweep(args.sweep, platform)
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
    b.add_argument("--mode", choices=KPI_MODES, help=KPI_MODE_HELP)
    b.add_argument("--json", action="store_true", help="the winner and every trial ranked")
    b.set_defaults(func=cmd_best)


def cmd_best(args: argparse.Namespace) -> int:
    from ..campaign import sweeps

    win = sweeps.best(args.id, args.kpi, args.mode)
    if args.json:
        print_json(win.to_dict())
    else:
        print(win.line())
    return EXIT_OK if win.id else EXIT_FAILED


def cmd_study(args: argparse.Namespace) -> int:
    from .. import records
    from ..campaign import sweeps
    from ..campaign.search import journal

    recs = sweeps.trial_records(args.id)
    storage_env = journal.storage_env_of(recs[0])
    if args.dashboard:
        from ..campaign.search import dashboard

        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        if storage_env:  # a database study: served from the database, with the URL of this shell
            dashboard.serve_database(storage_env, args.port, on_line=say)
            return EXIT_OK
        if sweeps.journal_text(args.id, recs[:1]) is None:
            raise UsageError(f"sweep {args.id} is not a search (submit --search): it has no study")

        def fetch() -> str:
            got = sweeps.journal_text(args.id, recs[:1])
            return got[0] if got else ""

        dashboard.serve(records.artifact_dir(recs[0]) / dashboard.COPY_FILE, fetch, args.port, on_line=say)
        return EXIT_OK
    view = sweeps.study_view(args.id, recs)  # the one read of its journal, or its database
    if args.json:
        print_json(view)
    else:
        sys.stdout.write(sweeps.study_text(view))
    return EXIT_OK
