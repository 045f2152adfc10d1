"""The ``key=value`` arguments the bank adds to a job's TAO command, and how they are added.

TAO's entrypoint (``dino train -e spec.yaml KEY=VALUE ...``) does not look at
the GPUs a scheduler gave the container: it takes ``num_gpus``, ``gpu_ids``
and ``num_nodes`` from its own command line (found by substring), else from
the spec file's section of the action, else one GPU on one node. So a job
given 8 GPUs trains on one unless the command says ``train.num_gpus=8``.
:func:`with_gpu_args` says it, for the actions TAO counts GPUs for, and
refuses a command whose own values disagree with what the job is given.

:func:`append_args` is the one rule for adding words to a command, whatever
its form (an argv list in ``args`` or ``command``, or shell text): sweeps,
dataset keys and the GPU arguments all go through it.
"""
from __future__ import annotations

import ast
import posixpath
import re
import shlex
from typing import Any, Mapping, Sequence

from .cmdwords import OPERATORS, shell_words
from .errors import TaoError

#: TAO actions whose entrypoint reads GPU and node counts -> the spec section the keys live in
#: (distill trains: TAO reads its GPUs from ``train``). Other actions (export, gen_trt_engine) use one GPU.
GPU_ACTIONS: dict[str, str] = {"train": "train", "evaluate": "evaluate", "inference": "inference", "distill": "train"}
#: The keys TAO's entrypoint looks for, by the name it splits on.
GPU_KEYS = ("num_gpus", "gpu_ids", "num_nodes")

#: A TAO override key: dotted identifiers (``train.optim.lr``); never starts like an option. The one rule
#: for sweeps (:mod:`taobank.sweepfile`) and the records that store a trial's overrides.
OVERRIDE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_0-9]+)*\Z")
#: A value safe as one ``key=value`` argument anywhere (argv, ``sh -c`` text, sbatch, a manifest):
#: no space, quote, comma, ``=``, shell or glob character. Brackets hold TAO list values (``[1,2]`` needs a file).
OVERRIDE_VALUE = re.compile(r"[A-Za-z0-9_.+\-/:@%]+\Z")


def append_args(spec: Mapping[str, Any], extra: Sequence[str]) -> dict:
    """``spec`` with ``extra`` appended to its command: an argv list (``args``, or a list ``command``) gets them
    as arguments; shell text gets them as quoted words. Raises when the spec has no command to append to."""
    out = dict(spec)
    if not extra:
        return out
    if isinstance(out.get("args"), list):
        out["args"] = list(out["args"]) + list(extra)
    elif isinstance(out.get("command"), list):
        out["command"] = list(out["command"]) + list(extra)
    elif isinstance(out.get("command"), str):
        out["command"] = _append_to_text(out["command"], extra)
    else:
        raise TaoError("the job has no command to append key=value arguments to: give command (or args)")
    return out


def _append_to_text(text: str, extra: Sequence[str]) -> str:
    """Shell text with ``extra`` as quoted words at its end, when they would reach its one command as arguments:
    not after a newline (another command) nor inside a ``#`` comment."""
    base = text.rstrip()
    joined = " ".join([base, *map(shlex.quote, extra)])
    if "\n" in base or shell_words(joined) != shell_words(base) + list(extra):
        raise TaoError(f"the command is shell text of several lines or with a comment, so {extra[0]} cannot be "
                       "added to it safely: give the command as an argv list (or one line without a comment)")
    return joined


def command_words(spec: Mapping[str, Any]) -> list[str] | None:
    """The words of the job's command (an argv list as it is; shell text split as the shell would, None when it
    is more than one simple command: the bank cannot tell which of its commands is TAO's)."""
    value = spec.get("args") if isinstance(spec.get("args"), list) else spec.get("command")
    if isinstance(value, list):
        return [str(w) for w in value]
    if isinstance(value, str):
        if "\n" in value.strip():
            return None  # several commands: the bank cannot tell which is TAO's
        words = shell_words(value)
        return words if words and not any(set(w) <= OPERATORS for w in words) else None
    return None


def gpu_section(spec: Mapping[str, Any]) -> str | None:
    """The spec section TAO reads the GPU counts from, when the command runs TAO's entrypoint for the spec's network
    and an action that counts GPUs (``dino train ...``); None for any other command."""
    section = GPU_ACTIONS.get(str(spec.get("action") or ""))
    words = command_words(spec)
    arch = str(spec.get("network_arch") or "")
    if section is None or not words or len(words) < 2 or arch in ("", "custom"):
        return None
    return section if posixpath.basename(words[0]) == arch and words[1] == spec.get("action") else None


def _given(words: Sequence[str], key: str) -> tuple[str, str] | None:
    """The word that sets ``key`` (TAO finds it by substring: ``train.num_gpus=4`` sets num_gpus) and its value."""
    for word in words:
        name, sep, value = word.partition("=")
        if sep and (name == key or name.endswith("." + key)):
            return word, value
    return None


def _count(word: str, value: str, key: str) -> int:
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        parsed = None
    if key == "gpu_ids":
        if isinstance(parsed, (list, tuple)) and all(isinstance(i, int) for i in parsed):
            return len(parsed)
        raise TaoError(f"the command's {shlex.quote(word)[:80]} is not a list of GPU indices such as [0,1] "
                       "(TAO reads it with no spaces): fix it or drop it (the bank passes the GPU count)")
    if isinstance(parsed, int) and not isinstance(parsed, bool):
        return parsed
    raise TaoError(f"the command's {shlex.quote(word)[:80]} is not a whole number: fix it or drop it "
                   "(the bank passes the count the job is given)")


def gpu_args(spec: Mapping[str, Any], gpus_per_node: int, nodes: int) -> list[str]:
    """What the command must add so TAO uses the GPUs and nodes the job is given: ``train.num_gpus=N`` (and
    ``train.num_nodes=M`` past one node), each unless the command says it already; [] for a command that is not
    TAO's entrypoint or a job without GPUs. A command whose own count disagrees is refused in one line."""
    section = gpu_section(spec)
    if section is None or gpus_per_node < 1:
        return []
    words = command_words(spec) or []
    asked = {"num_gpus": gpus_per_node, "gpu_ids": gpus_per_node, "num_nodes": nodes}
    unit = {"num_gpus": "GPUs per node", "gpu_ids": "GPUs per node", "num_nodes": "nodes"}
    for key in GPU_KEYS:
        found = _given(words, key)
        if found and _count(*found, key) != asked[key]:
            flag = "--gpus-per-node" if key != "num_nodes" else "--nodes"
            raise TaoError(f"the command sets {shlex.quote(found[0])[:80]} but the job is given {asked[key]} "
                           f"{unit[key]}: drop it from the command (the bank passes {section}.{key}) or ask for "
                           f"{_count(*found, key)} with {flag}")
    extra = [] if _given(words, "num_gpus") else [f"{section}.num_gpus={gpus_per_node}"]
    if nodes > 1 and not _given(words, "num_nodes"):
        extra.append(f"{section}.num_nodes={nodes}")
    return extra


def unseen_warning(spec: Mapping[str, Any]) -> str | None:
    """A ``warning:`` line when the command seems to run TAO's entrypoint for an action that counts GPUs, but in a
    form the bank cannot add its count to (``cd /w && dino train ...``, several lines): TAO would use one GPU."""
    section = GPU_ACTIONS.get(str(spec.get("action") or ""))
    arch = str(spec.get("network_arch") or "")
    value = spec.get("args") if isinstance(spec.get("args"), list) else spec.get("command")
    text = " ".join(map(str, value)) if isinstance(value, list) else str(value or "")
    if section is None or arch in ("", "custom") or gpu_section(spec) is not None or "num_gpus=" in text:
        return None
    if not any(w == arch or w.endswith("/" + arch) for w in shell_words(text) or text.split()):
        return None
    return (f"warning: the command runs {arch} in a form the bank cannot add {section}.num_gpus to: add "
            f"{section}.num_gpus=N (GPUs per node) to it yourself, or TAO trains on one GPU")


def with_gpu_args(spec: Mapping[str, Any], gpus_per_node: int, nodes: int) -> dict:
    """``spec`` whose TAO command uses the GPUs and nodes the job is given (:func:`gpu_args`)."""
    return append_args(spec, gpu_args(spec, gpus_per_node, nodes))
