"""The MCP tools as data, each a helper verb: its schema from the helper's own parser, its run the helper's own main.

A tool's input schema is read off the argparse parser the helper builds (itself built from the flag
declarations, :mod:`taobank.jobspec`), so the CLI and the tools share one vocabulary: ``--gpus-per-node``
is ``gpus_per_node``. A call's typed arguments become the helper's argv as ``--flag=value`` words and
positionals after ``--`` (a value is never read as an option), and the helper's ``main`` runs through
:func:`taobank.cli.entry.run_main` with ``--json``: the same records, gates and one-line errors as a shell.
No tool takes a secret's value: credentials are named (``secret_env``: a variable of the server's
environment; ``secrets_file``: a mode-600 file), as on the command line.

Plain Python: the ``mcp`` SDK is imported by :mod:`.server` only.
"""
from __future__ import annotations

import argparse
import importlib
import io
import json
import threading
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import registry
from ..errors import UsageError
from ..text import error_line, one_line

#: Options no tool offers: output shapes (a tool always answers JSON), streams and terminal prompts.
OUTPUT_ONLY = ("json", "quiet", "no_headers", "raw", "csv", "plot", "png", "follow", "watch", "interval", "help",
               "version")
#: The most notes (the helper's stderr lines) a result carries; a transfer prints one per file.
MAX_NOTES = 100

_ARRAY = {"type": "array", "items": {"type": "object"}}
_OBJECT = {"type": "object"}


@dataclass(frozen=True)
class ToolSpec:
    """One tool: the helper script and verb it runs, what it offers of that verb, and truthful hints."""

    name: str
    script: str  # a module in scripts/: tao_jobs, tao_docker, tao_slurm, tao_k8s
    verb: tuple[str, ...]
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = True  # it talks to a cluster or an engine
    drop: tuple[str, ...] = ()  # more options not offered
    split: tuple[str, str, str] | None = None  # positional -> (first word's property, the rest's)
    keep: tuple[str, ...] = ()  # output-only options this tool still offers (status: watch, its lines progress)
    result: dict = field(default_factory=lambda: dict(_OBJECT))
    note: str = ""  # said after the verb's help line


def _platform_tools() -> tuple[ToolSpec, ...]:
    """Each platform of the registry with a helper of its own: its preflight, then its submit."""
    infos = [registry.info(name) for name in registry.names()]
    infos = [i for i in infos if i.dry_run_shows]
    script = {i.name: i.helper.removesuffix(".py") for i in infos}
    return (*(ToolSpec(f"preflight_{i.name}", script[i.name], ("preflight",), True, False, True,
                       result=dict(_ARRAY if i.preflight_list else _OBJECT)) for i in infos),
            *(ToolSpec(f"submit_{i.name}", script[i.name], ("submit",), False, False, False,
                       note=f"With dry_run: {i.dry_run_shows}, nothing contacted. With sweep: many trials, one "
                            "record each. With search (tpe, random, grid, cmaes; trials, kpi, space): an Optuna "
                            "study its trials drive themselves, pruned ones end PRUNED.") for i in infos))


TOOLS: tuple[ToolSpec, ...] = (
    *_platform_tools(),
    ToolSpec("list", "tao_jobs", ("list",), True, False, True, open_world=False, result=_ARRAY),
    ToolSpec("status", "tao_jobs", ("status",), False, False, True, result=_ARRAY, keep=("watch", "interval"),
             note="Records are refreshed (one query per platform); a SLURM infrastructure failure may be resubmitted "
                  "unless no_retry. With watch: until every job has ended, each change a progress notification; "
                  "cancelling the call stops the watch, not the jobs."),
    ToolSpec("logs", "tao_jobs", ("logs",), True, False, True),
    ToolSpec("cancel", "tao_jobs", ("cancel",), False, True, True, result=_ARRAY),
    ToolSpec("metrics", "tao_jobs", ("metrics",), True, False, True, drop=("kpi", "force")),
    ToolSpec("artifacts", "tao_jobs", ("artifacts",), True, False, True),
    ToolSpec("fetch", "tao_jobs", ("fetch",), False, True, True, split=("words", "id", "paths"), result=_ARRAY,
             note="Files are written under `to` on the server's machine. A rerun skips files already there (moved 0) "
                  "and resumes a half-fetched one; a file there that differs is replaced only with force."),
    ToolSpec("prune", "tao_jobs", ("prune",), False, True, True, result=_ARRAY,
             note="Deletes for good: a client that can ask (elicitation) asks the user first; otherwise pass yes=true "
                  "once the user agreed."),
    ToolSpec("continue", "tao_jobs", ("continue",), False, False, False),
    ToolSpec("sweep_best", "tao_jobs", ("sweep", "best"), True, False, True),
    ToolSpec("study", "tao_jobs", ("study",), True, False, True, drop=("dashboard", "port"),
             note="A search's study (submit with search): each Optuna trial's number, sweep trial, job id, state "
                  "(COMPLETE, PRUNED, RUNNING, FAIL), epochs reported, value of the study's KPI and parameters, and "
                  "the best; read from its journal (one read) or its database."),
    ToolSpec("spec_template", "tao_jobs", ("spec", "template"), True, False, True, open_world=False, keep=("json",),
             note="The YAML template (each key's TAO default, its description as a comment, REQUIRED for ???); with "
                  "json: its JSON Schema. Edit it, check it with spec_check, then submit."),
    ToolSpec("spec_check", "tao_jobs", ("spec", "check"), True, False, True, open_world=False,
             note="One problem per entry with its dotted path (unknown keys name the nearest real one); every submit "
                  "runs the same check."),
)


@dataclass(frozen=True)
class Param:
    """One tool argument and the CLI word it becomes."""

    prop: str
    option: str | None  # None: a positional
    kind: str  # string integer number boolean list pairs positional-list
    help: str = ""
    choices: tuple[str, ...] | None = None
    required: bool = False
    item: str = "string"  # list items: string, integer, number

    def schema(self) -> dict:
        items = {"type": self.item}
        kinds: dict[str, dict[str, Any]] = {
                             "string": {"type": "string"}, "integer": {"type": "integer"}, "number": {"type": "number"},
                             "boolean": {"type": "boolean"}, "list": {"type": "array", "items": items},
                             "positional-list": {"type": "array", "items": items},
                             "pairs": {"type": "object", "additionalProperties": {"type": "string"}}}
        s = kinds[self.kind]
        if self.choices:
            s = {**s, "enum": list(self.choices)}
        if self.help:
            s = {**s, "description": self.help}
        return s


_LOCK = threading.RLock()  # one helper run at a time: they print through the process's sys.stdout
_PARSERS: dict[str, argparse.ArgumentParser] = {}


def helper_parser(script: str) -> argparse.ArgumentParser:
    """The parser ``script``'s main parses with: its ``build_parser()``, built once (nothing of it runs)."""
    if script not in _PARSERS:
        _PARSERS[script] = importlib.import_module(script).build_parser()
    return _PARSERS[script]


def _sub(parser: argparse.ArgumentParser, word: str) -> tuple[argparse.ArgumentParser, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return action.choices[word], helps.get(word, "")
    raise KeyError(word)


def verb_parser(spec: ToolSpec) -> tuple[argparse.ArgumentParser, str]:
    """The subcommand parser of ``spec`` and its help line."""
    parser, help_line = helper_parser(spec.script), ""
    for word in spec.verb:
        parser, help_line = _sub(parser, word)
    return parser, help_line


def _kind_of(action: argparse.Action) -> tuple[str, str]:
    numeric = {int: "integer", float: "number"}.get(action.type, "string")  # type: ignore[call-overload]
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "boolean", "string"
    if not action.option_strings:
        if action.nargs in (argparse.REMAINDER, "*", "+"):
            return "positional-list", numeric
        return numeric, numeric
    if isinstance(action, argparse._AppendAction):
        return ("pairs" if action.dest in _PAIRS else "list"), numeric
    return numeric, numeric


#: the declared KEY=VALUE flags (:mod:`taobank.jobspec` kind "pairs") of every platform
_PAIRS: set[str] = set()


def _load_pairs() -> None:
    if not _PAIRS:
        from ..cli import entry

        for platform in registry.names():
            _PAIRS.update(f.dest for f in entry.flags_of(platform) if f.kind == "pairs")


def params(spec: ToolSpec) -> list[Param]:
    """The arguments ``spec`` offers, in the verb's order: every listed option but the output-only ones."""
    _load_pairs()
    parser, _ = verb_parser(spec)
    out: list[Param] = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        longs = [o for o in action.option_strings if o.startswith("--")]
        prop = (longs[0][2:] if longs else action.dest).replace("-", "_")
        if (prop in OUTPUT_ONLY or action.dest in OUTPUT_ONLY) and prop not in spec.keep or prop in spec.drop:
            continue
        kind, item = _kind_of(action)
        text = one_line(action.help or "") or {"ID": "job ids" if kind == "positional-list" else "a job id",
                                               "SWEEP": "a sweep id"}.get(str(action.metavar), "")
        if action.option_strings and isinstance(action.metavar, str) and kind in ("string", "list", "pairs"):
            text = f"{text} ({action.metavar})".strip() if action.metavar not in text else text
        choices = tuple(str(c) for c in action.choices) if action.choices else None
        required = bool(action.required) if action.option_strings else action.nargs in (None, "+")
        option = longs[0] if longs else (action.option_strings[0] if action.option_strings else None)
        if spec.split and action.dest == spec.split[0]:
            out.append(Param(spec.split[1], None, "string", "the job id (leave out with last)"))
            out.append(Param(spec.split[2], None, "positional-list", "paths inside its results folder (none: all)"))
            continue
        out.append(Param(prop, option, kind, text, choices, required, item))
    return out


def has_json(spec: ToolSpec) -> bool:
    parser, _ = verb_parser(spec)
    return any("--json" in a.option_strings for a in parser._actions)


def input_schema(spec: ToolSpec) -> dict:
    ps = params(spec)
    schema: dict[str, Any] = {"type": "object", "properties": {p.prop: p.schema() for p in ps},
                              "additionalProperties": False}
    required = [p.prop for p in ps if p.required]
    if required:
        schema["required"] = required
    return schema


def output_schema(spec: ToolSpec) -> dict:
    """What structuredContent holds: the helper's ``--json`` answer and its notes (stderr lines)."""
    return {"type": "object", "properties": {
        "result": {**spec.result, "description": "what the helper prints with --json"},
        "notes": {"type": "array", "items": {"type": "string"}, "description": "the helper's notes and warnings"},
        "exit_code": {"type": "integer", "description": "the helper's exit code: 0 ok, 1 failed, 2 usage"}},
        "required": ["result", "notes", "exit_code"]}


def description(spec: ToolSpec) -> str:
    _, help_line = verb_parser(spec)
    cli = " ".join(["tao_jobs.py" if spec.script == "tao_jobs" else f"{spec.script}.py", *spec.verb])
    text = f"{help_line[:1].upper()}{help_line[1:]} (as `{cli}`)."
    return f"{text} {spec.note}".strip()


def tool_annotations(spec: ToolSpec) -> dict[str, Any]:
    return {"title": " ".join(["TAO", *spec.verb]) + (f" ({spec.script[4:]})" if spec.script != "tao_jobs" else ""),
            "readOnlyHint": spec.read_only, "destructiveHint": spec.destructive,
            "idempotentHint": spec.idempotent, "openWorldHint": spec.open_world}


def by_name(name: Any) -> ToolSpec:
    for spec in TOOLS:
        if spec.name == name:
            return spec
    raise UsageError(f"no tool {one_line(name)!r}: one of {', '.join(t.name for t in TOOLS)}")


# ------------------------------------------------------------------ resources
#: A job's resources: its view (tao://jobs/<id>, refreshed as status does), its logs and its KPI series.
RESOURCE_PREFIX = "tao://jobs/"
RESOURCE_PARTS = {"": ("status", "the job's view, refreshed as status does"),
                  "logs": ("logs", "the job's output (every pod / stream)"),
                  "metrics": ("metrics", "the KPIs its training logged, by epoch")}


def resource_call(uri: Any) -> tuple[str, ToolSpec, dict]:
    """(job id, the tool that answers ``uri``, its arguments); the job id itself is checked by the helper."""
    text = str(uri)
    if not text.startswith(RESOURCE_PREFIX):
        raise UsageError(f"no resource {one_line(text)[:200]!r}: they are {RESOURCE_PREFIX}<job id>[/logs|/metrics]")
    job, _, part = text[len(RESOURCE_PREFIX):].partition("/")
    if part not in RESOURCE_PARTS or not job:
        raise UsageError(f"no resource {one_line(text)[:200]!r}: they are {RESOURCE_PREFIX}<job id>[/logs|/metrics]")
    tool = by_name(RESOURCE_PARTS[part][0])
    return job, tool, ({"ids": [job]} if tool.name == "status" else {"id": job})


# ------------------------------------------------------------------ a call
def confirmation(spec: ToolSpec, arguments: Any) -> str | None:
    """The question a user answers (MCP elicitation) before this call deletes or stops many things, or None:
    prune without yes (the shell asks on a terminal), cancel with all."""
    if not isinstance(arguments, dict):
        return None
    if spec.name == "prune" and arguments.get("yes") is not True and isinstance(arguments.get("ids"), list):
        ids = ", ".join(one_line(i) for i in arguments["ids"][:20]) + (" ..." if len(arguments["ids"]) > 20 else "")
        return f"Delete the results folders of {ids} for good (tao prune)?"
    if spec.name == "cancel" and arguments.get("all") is True:
        return "Cancel every active TAO job of this machine's records (tao cancel --all)?"
    return None


def prune_question(question: str, plans: list) -> str:
    """prune's question with what its dry run lists: files and bytes of each job, and in all."""
    from ..campaign.results_verbs import human

    each = [f"{one_line(str(p.get('id')))}: {len(p.get('files') or [])} file(s), {human(int(p.get('bytes') or 0))}"
            for p in plans[:20] if isinstance(p, dict)]
    total = sum(int(p.get("bytes") or 0) for p in plans if isinstance(p, dict))
    return f"{question} It deletes {'; '.join(each)} ({human(total)} in all)."


def confirmed(spec: ToolSpec, arguments: dict) -> dict:
    """The arguments once the user said yes: prune gets ``yes`` (it asks no more)."""
    return {**arguments, "yes": True} if spec.name == "prune" else arguments


_TYPES = {"string": (str,), "integer": (int,), "number": (int, float)}
_SAYS = {"string": "a string", "integer": "a whole number", "number": "a number", "boolean": "true or false"}


def _typed(spec: ToolSpec, p: Param, value: Any) -> None:
    def bad(what: str) -> UsageError:
        return UsageError(f"{spec.name}: {p.prop} must be {what}")

    if p.kind == "boolean":
        if not isinstance(value, bool):
            raise bad(_SAYS["boolean"])
        return
    if p.kind in ("list", "positional-list"):
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, _TYPES[p.item]) for v in value):
            raise bad(f"a list of {_SAYS[p.item].split(' ', 1)[1]}s")
        return
    if p.kind == "pairs":
        if not isinstance(value, dict) or any(not isinstance(v, str) for v in value.values()):
            raise bad("an object of string values")
        if any(not k or "=" in k for k in value):
            raise bad("an object whose keys are names (not empty, no '=')")
        return
    if isinstance(value, bool) or not isinstance(value, _TYPES[p.kind]):
        raise bad(_SAYS[p.kind])
    if p.choices and str(value) not in p.choices:
        raise bad(f"one of {', '.join(p.choices)}")


def to_argv(spec: ToolSpec, arguments: Any) -> list[str]:
    """The helper's argv for a call: ``--flag=value`` words, then ``--`` and the positionals."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise UsageError(f"{spec.name}: the arguments must be an object")
    ps = {p.prop: p for p in params(spec)}
    unknown = sorted(set(arguments) - set(ps))
    if unknown:
        raise UsageError(f"{spec.name}: unknown argument {one_line(unknown[0])!r}: one of {', '.join(ps)}")
    argv = list(spec.verb) + (["--json"] if has_json(spec) and "json" not in spec.keep else [])
    rest: list[str] = []
    for prop, p in ps.items():
        if prop not in arguments or arguments[prop] is None:
            if p.required:
                raise UsageError(f"{spec.name}: {prop} is required")
            continue
        value = arguments[prop]
        _typed(spec, p, value)
        if p.option is None:
            rest += [str(v) for v in value] if isinstance(value, list) else [str(value)]
        elif p.kind == "boolean":
            argv += [p.option] if value else []
        elif p.kind == "list":
            argv += [f"{p.option}={v}" for v in value]
        elif p.kind == "pairs":
            argv += [f"{p.option}={k}={v}" for k, v in value.items()]
        else:
            argv.append(f"{p.option}={value}")
    return argv + (["--", *rest] if rest else [])


@dataclass
class Outcome:
    """A helper run: exit code, what it printed, and the tool result made of it."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def notes(self) -> list[str]:
        lines = [one_line(ln) for ln in self.stderr.splitlines() if ln.strip()]
        return lines[-MAX_NOTES:]

    @property
    def errors(self) -> list[str]:
        """The one-line errors the helper printed (every stderr line, when none says ``error:``)."""
        said = [ln for ln in self.notes if ln.startswith("error:")]
        return said or self.notes or [f"error: exit code {self.exit_code}"]

    @property
    def result(self) -> Any:
        text = self.stdout.strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def structured(self) -> dict:
        return {"result": self.result, "notes": self.notes, "exit_code": self.exit_code}


class _Lines(io.StringIO):
    """The helper's stderr, kept; each finished line also handed to ``on_line`` (a progress notification)."""

    def __init__(self, on_line: Callable[[str], None] | None) -> None:
        super().__init__()
        self.on_line, self.partial = on_line, ""

    def write(self, text: str) -> int:
        n = super().write(text)
        if self.on_line is not None:
            *done, self.partial = (self.partial + text).replace("\r", "\n").split("\n")
            for line in done:
                if line.strip():
                    self.on_line(one_line(line))
        return n


def run(spec: ToolSpec, arguments: Any, on_line: Callable[[str], None] | None = None) -> Outcome:
    """Run the tool's verb as the helper does; a bad argument is refused with the helper's kind of line.
    ``on_line``: called with each line the helper prints on stderr (watch lines, transfer progress, notes)."""
    from ..cli.entry import run_main

    try:
        argv = to_argv(spec, arguments)
    except UsageError as exc:
        return Outcome(exc.exit_code, "", error_line(exc) + "\n")
    module = importlib.import_module(spec.script)
    out, err = io.StringIO(), _Lines(on_line)
    with _LOCK, redirect_stdout(out), redirect_stderr(err):
        try:
            run_main(module.main, argv)
            code: Any = 0
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # noqa: BLE001 - a bug of the bank: one line, never a traceback to the client
            err.write(error_line(f"internal error ({type(exc).__name__}): {exc}: please report it") + "\n")
            code = 1
    rc = code if isinstance(code, int) else (0 if code is None else 1)
    return Outcome(rc, out.getvalue(), err.getvalue())
