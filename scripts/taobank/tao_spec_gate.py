"""The spec check of a submit: every job's TAO experiment spec and overrides, before anything is created.

A job whose command runs the pinned TAO's entrypoint for its network and action (``dino train -e spec.yaml
train.num_epochs=10``, :func:`taobank.tao_command.tao_command`) is checked as ``tao_jobs.py spec check`` checks
it (:mod:`taobank.tao_spec_check`): the spec file its ``-e`` names, read where the platform says this machine can
read it (a Docker bind mount's host file, a SLURM upload, a Kubernetes staged config), with the command's
``key=value`` overrides. A spec the bank cannot read (a path inside the container, on a volume) is said so
and the overrides are still checked. Every job of a batch (a sweep's trials) is checked in one pass, each
spec file read once; any problem refuses the whole submit, one line per problem.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from . import tao_command
from .errors import TaoError

#: Where a platform says a spec path of the command can be read on this machine: its text, or None.
Reader = Callable[[Mapping[str, Any], str], "str | None"]
#: The flags of TAO's entrypoint that take a value (``-e spec.yaml``); other dashed words take none.
_VALUE_FLAGS = frozenset({"-e", "--experiment_spec_file", "--experiment_spec", "-r", "--results_dir", "-k", "--key",
                          "--gpus", "--num_nodes", "-m", "--model_path", "--gpu_index"})
#: What says how to skip the check, on the last line of a refusal.
SKIP = "nothing was submitted; fix the spec (tao_jobs.py spec check), or --no-spec-check for a TAO the bank does not know"


class SpecRefused(TaoError):
    """Problems of the specs of a submit: the first is the message, the others ``details`` (one line each)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = tuple(lines)  # as found, without the advice the last one carries
        last = f"{lines[-1]} ({SKIP})"
        shown = [*lines[:-1], last]
        super().__init__(shown[0])
        self.details = tuple(shown[1:])


def overrides_of(words: Sequence[str]) -> list[str]:
    """The Hydra overrides of a TAO command's words after ``NETWORK ACTION`` (``key=value``, ``+key=value``,
    ``~key``), the entrypoint's own flags and their values left out."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in _VALUE_FLAGS
            continue
        if "=" in word or word.startswith("~"):
            out.append(word)
    return out


def check(specs: Sequence[Mapping[str, Any]], read: Reader) -> tuple[list[str], list[str]]:
    """(problem lines, notes) of every job of ``specs`` that runs TAO's entrypoint; a job that does not (a
    shell script, another program) is not judged. Lines of a batch of several name the trial (``trial 3:``)."""
    problems: list[str] = []
    notes: list[str] = []
    shared: dict[str, list[int]] = {}  # an override's problem -> the trials that have it (said once)
    judged = 0
    docs: dict[tuple[str, str], Any] = {}  # (network, path) -> the spec's mapping, None (unreadable) or an error
    for i, spec in enumerate(specs):
        found = tao_command.tao_command(spec)
        if found is None:
            continue
        network, action = found
        judged += 1
        words = tao_command.command_words(spec) or []
        path = tao_command.spec_file_word(spec)
        doc: Any = None
        if path:
            if (network, path) not in docs:
                docs[(network, path)] = _read(spec, path, read)
                if docs[(network, path)] is None:
                    notes.append(f"spec file {path} is not readable on this machine (a path inside the job's "
                                 f"container or volume): the bank checked the command's overrides, not the file")
            doc = docs[(network, path)]
            if isinstance(doc, str):  # the file's own problem (not YAML, too big): said once, whatever the trials
                if doc not in problems:
                    problems.append(doc)
                continue
        from . import tao_spec_check  # only for a TAO command: a plain command never loads the schemas

        report = tao_spec_check.check(network, action, doc, overrides_of(words[2:]), required=doc is not None)
        for line in report.lines():
            shared.setdefault(line, []).append(i)
        notes += [n for n in report.notes if n not in notes]
    for line, trials in shared.items():  # a problem every trial shares is one line, not one per trial
        if len(specs) > 1 and len(trials) < judged:
            line = f"trial {','.join(map(str, trials))}: {line}" if len(trials) <= 8 else \
                f"trials {trials[0]}..{trials[-1]} ({len(trials)}): {line}"
        problems.append(line)
    return problems, notes


def _read(spec: Mapping[str, Any], path: str, read: Reader) -> Any:
    """The spec file's mapping; None when the platform cannot read it here; its problem (one line) otherwise."""
    from . import tao_spec_check

    try:
        text = read(spec, path)
        if text is None:
            return None
        return tao_spec_check.spec_mapping(text, f"spec file {path}")
    except TaoError as exc:
        return str(exc)


def local_file(path: str) -> str | None:
    """A spec file on this machine (the host path a platform mapped ``path`` to), at most the check's size."""
    from . import tao_spec_check

    try:
        doc_path = path
        import os

        if not os.path.isfile(doc_path):
            return None
        size = os.stat(doc_path).st_size
        if size > tao_spec_check.MAX_SPEC_BYTES:
            raise TaoError(f"spec file {path} is over the {tao_spec_check.MAX_SPEC_BYTES >> 20} MiB a TAO spec may be")
        with open(doc_path, "rb") as handle:
            return handle.read(tao_spec_check.MAX_SPEC_BYTES + 1).decode("utf-8")
    except UnicodeDecodeError:
        raise TaoError(f"spec file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise TaoError(f"spec file {path} cannot be read: {exc.strerror or exc}") from None
