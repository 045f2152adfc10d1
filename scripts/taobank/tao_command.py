"""The pinned TAO and a job's command line: what TAO accepts per network (the checked-in table, read once), a
command's words (one tokenizer, one output rule for every platform's path checks), the absolute paths it and
its spec files name, and the ``key=value`` arguments the bank adds to a TAO command.

TAO's entrypoint (``dino train -e spec.yaml KEY=VALUE ...``) does not look at
the GPUs a scheduler gave the container: it takes ``num_gpus``, ``gpu_ids``
and ``num_nodes`` from its own command line (found by substring), else from
the spec file's section of the action, else one GPU on one node. So a job
given 8 GPUs trains on one unless the command says ``train.num_gpus=8``.
:func:`with_gpu_args` says it, for the actions TAO counts GPUs for and only
with the keys the network's own schema has (:func:`section_keys`: TAO's
Hydra runner refuses any other), and refuses a command whose own values
disagree with what the job is given. Nor does TAO look at ``RESULTS_DIR``:
it writes under its ``results_dir`` override, so :func:`results_args` passes
the job's folder (:func:`identified` reads the network and action from a TAO
command whose flags do not name them).

:func:`append_args` is the one rule for adding words to a command, whatever
its form (an argv list in ``args`` or ``command``, or shell text): sweeps,
dataset keys and the GPU arguments all go through it.
"""
from __future__ import annotations

import ast
import functools
import json
import posixpath
import re
import shlex
from typing import Any, Iterator, Mapping, Sequence

from . import BANK_ROOT
from .fsio import yaml_value
from .errors import TaoError
from .paths import abs_path
from .spec import GENERIC

#: A ``key=`` (or spec-file key) whose value the job writes: an output, never an input to check.
OUTPUT_KEY = re.compile(r"(result|output|log|save|checkpoint_dir|ckpt_dir)", re.IGNORECASE)
#: What follows one of these is written by the shell, not read.
REDIRECTS = frozenset({">", ">>", "&>", ">|"})
#: Characters of shell operators: a word made of them only is no path.
OPERATORS = frozenset(";&|<>()")


def shell_words(text: str) -> list[str]:
    """``text`` split as the shell would (operators as their own words); [] when its quotes do not balance."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        return list(lex)
    except ValueError:  # unbalanced quotes: the shell will say so; nothing to check here
        return []


def skipped(word: str, before: str) -> bool:
    """A shell operator, or the target of a redirection: no path the job reads."""
    return set(word) <= OPERATORS or before in REDIRECTS


def read_candidates(words: list[str]) -> Iterator[tuple[str, str, str]]:
    """``(word before, candidate, key)`` for each word that may name something the job reads: the value
    of a ``key=value`` word (``key`` set), else the word itself (``key`` ""). Operators, redirection
    targets and values of output keys are left out; each platform classifies what remains."""
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        if skipped(word, before):
            continue
        key, sep, value = word.partition("=")
        if sep and OUTPUT_KEY.search(key):
            continue
        keyed = bool(sep) and not key.startswith("/")
        yield before, (value if keyed else word), (key if keyed else "")


_OUTPUT_FLAGS = frozenset({"-o", "-r"})
#: Shell expansions, globs, quotes, regex and operator characters, whitespace: such a word is no path to check.
_NOT_A_PATH = re.compile(r"[*?\[\]$`{}^|()<>;&!'\"\\#%~=\s]")


def _is_output_flag(word: str) -> bool:
    return word in _OUTPUT_FLAGS or (word.startswith("--") and bool(OUTPUT_KEY.search(word)))


def _paths_in(text: str, what: str) -> Iterator[str]:
    """The paths of one value: ``/a`` or a ``,``/``:`` list of them; each passes the one path rule."""
    if not text.startswith("/") or "://" in text or _NOT_A_PATH.search(text):
        return
    for part in re.split(r"[,:]", text):
        if part.startswith("/") and part.strip("/"):
            yield abs_path(part, what)


def command_paths(command: str | list[str] | None, argv: list[str]) -> list[str]:
    """Paths the command reads: ``argv`` word by word, or the shell words of a string ``command``."""
    words = shell_words(command) if isinstance(command, str) else list(argv)
    out: list[str] = []
    for before, cand, _key in read_candidates(words):
        if not _is_output_flag(before):
            out += _paths_in(cand, "path in the command")
    return out


def _yaml_paths(node: Any, key: str, what: str) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _yaml_paths(v, str(k), what)
    elif isinstance(node, list):
        for v in node:
            yield from _yaml_paths(v, key, what)
    elif isinstance(node, str) and not OUTPUT_KEY.search(key):
        yield from _paths_in(node, what)


def spec_file_paths(name: str, data: bytes) -> list[str]:
    """Paths the values of an uploaded YAML/JSON spec file name (its keys say which are outputs)."""
    try:
        doc = yaml_value(data.decode("utf-8"), f"spec file {name}")
    except (TaoError, UnicodeDecodeError):
        return []
    return list(_yaml_paths(doc, "", f"path in spec file {name}"))


#: TAO actions whose entrypoint reads GPU and node counts -> the spec section the keys live in
#: (distill trains: TAO reads its GPUs from ``train``). Other actions (export, gen_trt_engine) use one GPU.
GPU_ACTIONS: dict[str, str] = {"train": "train", "evaluate": "evaluate", "inference": "inference", "distill": "train"}
#: What an action word of a TAO command looks like (``train``, ``gen_trt_engine``).
_ACTION = re.compile(r"[a-z][a-z0-9_]*\Z")
#: The words a command may use for the job's folder instead of its path: the variable every platform sets, where
#: something expands it (a shell runs shell text; the kubelet expands ``$(NAME)`` in a Kubernetes command or args).
#: (TAO's alias pair names the same folder.)
_SHELL_REFS = ("$RESULTS_DIR", "${RESULTS_DIR}", "$TAO_API_RESULTS_DIR/$TAO_API_JOB_ID",
               "${TAO_API_RESULTS_DIR}/${TAO_API_JOB_ID}")
_KUBELET_REFS = ("$(RESULTS_DIR)", "$(TAO_API_RESULTS_DIR)/$(TAO_API_JOB_ID)")

#: A TAO override key: dotted identifiers (``train.optim.lr``); never starts like an option. The one rule
#: for sweeps (:mod:`taobank.campaign.sweepfile`) and the records that store a trial's overrides.
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


#: A folder's job id not known yet (a plan made before its record: ``records.ID_PLACEHOLDER``) matches any id.
_ID = "{id}"


def _same_folder(value: str, folder: str) -> bool:
    got, want = value.rstrip("/") or "/", folder.rstrip("/") or "/"
    if _ID in want:
        return re.fullmatch(re.escape(want).replace(re.escape(_ID), "[^/]+"), got) is not None
    return got == want


def _shown_folder(folder: str) -> str:
    return (folder.rstrip("/") or "/").replace(_ID, "<job id>")


def tao_command(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """(network, action) when the command runs the pinned TAO's entrypoint for the spec's network and action
    (``dino train ...``, the network one TAO knows); None for any other command."""
    words = command_words(spec)
    arch, action = str(spec.get("network_arch") or ""), str(spec.get("action") or "")
    if not words or len(words) < 2 or not known(arch):
        return None
    return (arch, action) if posixpath.basename(words[0]) == arch and words[1] == action else None


def identified(spec: Mapping[str, Any]) -> dict:
    """``spec`` with the network and action its TAO command names (``dino train ...``, a network the pinned TAO
    knows) where the spec leaves them unset or generic; a given one that disagrees is refused in one line."""
    out = dict(spec)
    words = command_words(spec)
    if not words or len(words) < 2:
        return out
    network, action = posixpath.basename(words[0]), words[1]
    if not known(network) or not _ACTION.match(action):
        return out
    for key, found, flag in (("network_arch", network, "--network-arch"), ("action", action, "--action")):
        given = out.get(key)
        if given in (None, "", GENERIC[key]):
            out[key] = found
        elif given != found:
            raise TaoError(f"{flag} {shlex.quote(str(given))[:60]} disagrees with the command, which runs "
                           f"{network} {action}: drop {flag} (the command names it) or fix the command")
    return out


def identified_each(specs: Sequence[Mapping[str, Any]]) -> tuple[list[dict], bool]:
    """:func:`identified` of each spec, and whether any of them runs TAO's entrypoint (:func:`tao_command`)."""
    out = [identified(spec) for spec in specs]
    return out, any([tao_command(spec) for spec in out])  # a list: each spec judged, as a batch is


def gpu_section(spec: Mapping[str, Any]) -> str | None:
    """The spec section TAO reads the GPU counts from, when the command runs TAO's entrypoint for the spec's network
    and an action that counts GPUs (``dino train ...``); None for any other command."""
    found = tao_command(spec)
    return GPU_ACTIONS.get(found[1]) if found else None


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
    ``train.num_nodes=M`` past one node), each unless the command says it already and only where the network's
    schema has the key (pointpillars' evaluate has none: TAO's Hydra runner would refuse it); [] for a command
    that is not TAO's entrypoint or a job without GPUs. A command whose own count disagrees is refused in one
    line, and so is a job of several nodes for a network whose section has no ``num_nodes``."""
    section = gpu_section(spec)
    if section is None or gpus_per_node < 1:
        return []
    network, action = str(spec["network_arch"]), str(spec["action"])
    keys = section_keys(network, section)
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
    if nodes > 1 and "num_nodes" not in keys:
        raise TaoError(f"{network} {action} has no {section}.num_nodes in TAO {tao_version()}'s schema "
                       f"({TABLE_FILE}): it runs on one node; ask for --nodes 1")
    extra = [] if _given(words, "num_gpus") or "num_gpus" not in keys else [f"{section}.num_gpus={gpus_per_node}"]
    if nodes > 1 and not _given(words, "num_nodes"):
        extra.append(f"{section}.num_nodes={nodes}")
    return extra


def _single_quoted(text: str, ref: str) -> bool:
    """Whether shell ``text`` writes ``results_dir=<ref>`` inside single quotes (the shell keeps ``$`` as it is)."""
    try:
        raw = shlex.split(text, posix=False)  # words with their quotes kept
    except ValueError:
        return False
    return any("results_dir=" in w and ref in w and "'" in w.split("results_dir=", 1)[0] + w.split(ref, 1)[0]
               for w in raw)


def results_args(spec: Mapping[str, Any], folder: str | None, *, kubelet: bool = False) -> list[str]:
    """``results_dir=<folder>`` for a TAO command (:func:`tao_command`): TAO writes under its own ``results_dir``
    (``<results_dir>/<action>``), never under ``$RESULTS_DIR``, so the job's folder must reach it as an override.
    [] for another command, a job that keeps no folder, or a command that names the folder already (its path, or
    ``$RESULTS_DIR`` where it is expanded: in shell text, and ``$(RESULTS_DIR)`` where the ``kubelet`` runs it);
    a command that names another folder, or a variable nothing expands, is refused in one line naming both."""
    found = tao_command(spec)
    if found is None or not folder or not takes_results_dir(found[0]):
        return []
    given = [w.partition("=")[2] for w in command_words(spec) or [] if w.partition("=")[0].lstrip("+") == "results_dir"
             and "=" in w]
    refs = (_SHELL_REFS if isinstance(spec.get("command"), str) and not isinstance(spec.get("args"), list) else ()) \
        + (_KUBELET_REFS if kubelet else ())
    want = folder.rstrip("/") or "/"
    for value in given:
        if value in _SHELL_REFS and value in refs and _single_quoted(str(spec.get("command")), value):
            raise TaoError(f"the command's results_dir={value} is in single quotes, which the shell does not expand "
                           f"(TAO would get the words as they are): drop it, the bank passes the job's folder "
                           f"{_shown_folder(folder)}")
        if value in _SHELL_REFS + _KUBELET_REFS and value not in refs:
            raise TaoError(f"the command's results_dir={value} is not expanded in an argv list (TAO would get the "
                           f"words as they are): drop it, the bank passes the job's folder {_shown_folder(folder)}")
        if value not in refs and not _same_folder(value, folder):
            raise TaoError(f"the command sets results_dir={shlex.quote(value)[:120]} but the job's folder is "
                           f"{_shown_folder(folder)} "
                           "($RESULTS_DIR): drop results_dir= from the command (the bank passes the job's folder) "
                           "or set it to $RESULTS_DIR")
    return [] if given else [f"results_dir={want}"]


def unseen_warning(spec: Mapping[str, Any]) -> str | None:
    """A ``warning:`` line when the command seems to run TAO's entrypoint for an action that counts GPUs, but the
    bank cannot add its count: a network the pinned TAO does not know, or a form it cannot add words to
    (``cd /w && dino train ...``, several lines). TAO would use one GPU."""
    section = GPU_ACTIONS.get(str(spec.get("action") or ""))
    arch = str(spec.get("network_arch") or "")
    value = spec.get("args") if isinstance(spec.get("args"), list) else spec.get("command")
    text = " ".join(map(str, value)) if isinstance(value, list) else str(value or "")
    if section is None or arch in ("", GENERIC["network_arch"]) or gpu_section(spec) is not None or "num_gpus=" in text:
        return None
    if not any(w == arch or w.endswith("/" + arch) for w in shell_words(text) or text.split()):
        return None
    if not known(arch):
        return (f"warning: TAO {tao_version()} has no network {arch} ({TABLE_FILE}), so the "
                f"bank adds no GPU keys: add {section}.num_gpus=N (GPUs per node) to the command yourself if {arch} "
                "takes it, or TAO trains on one GPU")
    return (f"warning: the command runs {arch} in a form the bank cannot add {section}.num_gpus to: add "
            f"{section}.num_gpus=N (GPUs per node) to it yourself, or TAO trains on one GPU")


#: How a TAO experiment spec names the job's folder itself: Hydra's resolver of the variable every platform sets.
SPEC_RESULTS_REF = "${oc.env:RESULTS_DIR}"


def spec_file_word(spec: Mapping[str, Any]) -> str | None:
    """The experiment spec file a TAO command names (``-e PATH``, ``--experiment_spec_file PATH`` or ``=PATH``)."""
    if tao_command(spec) is None:
        return None
    words = command_words(spec) or []
    for i, word in enumerate(words[2:], 2):
        if word in ("-e", "--experiment_spec_file") and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--experiment_spec_file="):
            return word.partition("=")[2]
    return None


def check_spec_results_dir(name: str, text: str, folder: str) -> None:
    """Refuse, in one line naming both, a TAO experiment spec (``name``, its ``text``) whose top-level
    ``results_dir`` names another folder than the job's ``folder``."""
    try:
        doc = yaml_value(text, f"spec file {name}")
    except TaoError:
        return  # not YAML: TAO refuses it itself, with its own words
    value = doc.get("results_dir") if isinstance(doc, dict) else None
    if value in (None, "", SPEC_RESULTS_REF):
        return
    if not _same_folder(str(value), folder):
        raise TaoError(f"spec file {name} sets results_dir: {shlex.quote(str(value))[:120]} but the job's folder is "
                       f"{_shown_folder(folder)} ($RESULTS_DIR): drop results_dir from {name} (the bank passes the job's folder) or "
                       f"set it to {SPEC_RESULTS_REF}")


def with_gpu_args(spec: Mapping[str, Any], gpus_per_node: int, nodes: int) -> dict:
    """``spec`` whose TAO command uses the GPUs and nodes the job is given (:func:`gpu_args`)."""
    return append_args(spec, gpu_args(spec, gpus_per_node, nodes))


def with_results_dir(spec: Mapping[str, Any], folder: str | None, *, kubelet: bool = False) -> dict:
    """``spec`` whose TAO command writes into the job's folder (:func:`results_args`)."""
    return append_args(spec, results_args(spec, folder, kubelet=kubelet))


def with_job_args(spec: Mapping[str, Any], gpus_per_node: int, nodes: int, folder: str | None, *,
                  kubelet: bool = False) -> dict:
    """:func:`with_gpu_args`, then :func:`with_results_dir`: the command a job runs, in one call."""
    return with_results_dir(with_gpu_args(spec, gpus_per_node, nodes), folder, kubelet=kubelet)


# ------------------------------------------------------------ the networks of the pinned TAO
# What the pinned TAO accepts, per network: the checked-in table ``schemas/tao_networks.json``.
#
# The table is generated from NVIDIA's own packages (``python3 -m devtools.tao_schema``: the config dataclasses
# of ``nvidia-tao-core`` and the image list of ``nvidia-tao``, at the pinned TAO version) and a unit test
# regenerates it and fails on any difference. The bank reads only this file at run time: TAO's packages are
# test dependencies, never the helpers'.
#: Where the table lives, relative to the bank's root.
TABLE_FILE = "schemas/tao_networks.json"
#: The keys TAO's entrypoint reads the GPUs and nodes from, by the name it splits the command on.
GPU_KEYS = ("num_gpus", "gpu_ids", "num_nodes")
#: The keys a run resumes with: Lightning's checkpoint path, mmengine's flag and checkpoint.
RESUME_KEYS = ("resume_training_checkpoint_path", "resume", "pretrained_checkpoint")


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The whole table (read once)."""
    path = BANK_ROOT / TABLE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaoError(f"{TABLE_FILE} cannot be read ({exc.__class__.__name__}): restore it from git") from None
    if not isinstance(data, dict) or not isinstance(data.get("networks"), dict):
        raise TaoError(f"{TABLE_FILE} has no networks: regenerate it with python3 -m devtools.tao_schema")
    return data


def tao_version() -> str:
    """The TAO version the table was read from."""
    return str(table()["tao_version"])


def known(network: str | None) -> bool:
    """Whether the pinned TAO has ``network`` (a config schema and an image of NVIDIA's launcher)."""
    return bool(network) and network in table()["networks"]


def networks() -> list[str]:
    return sorted(table()["networks"])


def section_keys(network: str, section: str) -> list[str]:
    """The GPU and node keys (of :data:`GPU_KEYS`) the network's ``section`` takes; [] for one it lacks."""
    row = table()["networks"].get(network) or {}
    return list((row.get("sections") or {}).get(section, {}).get("gpu_keys") or [])


def resume_keys(network: str) -> list[str]:
    """The resume keys (of :data:`RESUME_KEYS`) the network's ``train`` section takes."""
    row = table()["networks"].get(network) or {}
    return list((row.get("sections") or {}).get("train", {}).get("resume_keys") or [])


def takes_results_dir(network: str) -> bool:
    """Whether the network's experiment config has ``results_dir`` at its top level."""
    return bool((table()["networks"].get(network) or {}).get("results_dir"))


def image(kind: str) -> str | None:
    """The image NVIDIA's launcher names for the pinned TAO version: ``pyt`` or ``deploy`` (None: it names none)."""
    value = (table().get("images") or {}).get(kind)
    return str(value) if value else None


def plain_epoch_names(network: str) -> bool:
    """Whether the network's checkpoints carry the epoch unpadded (``checkpoint_epoch_1.pth``), unlike Lightning's
    ``model_epoch_001``: TAO's own list (nvidia-tao-core's ``MISSING_EPOCH_FORMAT_NETWORKS``)."""
    return bool((table()["networks"].get(network) or {}).get("plain_epoch_names"))


def checkpoint_family(network: str | None) -> str | None:
    """The checkpoint family (versions.yaml ``tao_checkpoints.families``) of a network the pinned TAO has, read
    from TAO's own facts by the generator (its epoch naming, its train section's resume keys); None for another."""
    found = (table()["networks"].get(network or "") or {}).get("checkpoint_family")
    return str(found) if found else None


def kpis(network: str) -> tuple[list[str], list[str]] | None:
    """(the KPI names, the regular expressions of the names) ``network`` logs, as TAO's own API lists them; None
    when TAO lists none for it (the bank cannot tell a KPI it does not log)."""
    row = table()["networks"].get(network) or {}
    if not row.get("kpis"):
        return None
    return [str(k) for k in row["kpis"]], [str(p) for p in row.get("kpi_patterns") or []]


def logs_kpi(network: str, kpi: str) -> bool | None:
    """Whether ``network`` logs ``kpi`` (a name TAO lists, or one of its patterns); None when TAO lists none.

    TAO's list is the KPIs its API offers to rank by (DINO: ``val_mAP50`` alone), not every one its trainer writes:
    each trainer also writes its losses (``train_loss``, ``val_loss``) to status.json, so a loss is always taken."""
    import re

    found = kpis(network)
    if found is None:
        return None
    names, patterns = found
    return kpi in names or any(re.fullmatch(p, kpi) for p in patterns) or re.fullmatch(r"(train|val)_loss", kpi) is not None


def automl(network: str) -> bool:
    """Whether TAO's own AutoML takes ``network`` (nvidia-tao-core's ``AUTOML_DISABLED_NETWORKS`` lacks it)."""
    return bool((table()["networks"].get(network) or {}).get("automl", True))


#: What a submit says (a note on stderr) of a command that is not TAO's entrypoint form but carries words TAO would
#: read as overrides (a stand-in such as ``sh -c '...' tao train.num_epochs=3``): they reach the program as they
#: are, and the bank cannot know that program is TAO, so they are not checked.
NOT_TAO_FORM = ("spec check: the command is not TAO's `<network> <action>` form; its arguments were not checked "
                "(tao_jobs.py spec check FILE KEY=VALUE... --network N --action A checks them)")
#: What a search's submit says (a note) of its space when its command is not TAO's entrypoint form.
NOT_TAO_FORM_SPACE = ("spec check: the command is not TAO's `<network> <action>` form; the search space (--space) "
                      "was not checked against TAO's spec")
#: What a dry run's check summary lists among what it did not check, for the same command.
NOT_TAO_FORM_SKIPPED = "the spec check (the command is not TAO's `<network> <action>` form; its arguments were not checked)"
#: A word a Hydra runner reads as an override: ``key=value`` (``+key=``, ``++key=``), dotted identifiers with a
#: lower-case letter (an all-capitals ``NAME=value`` is an environment assignment, ``--flag=value`` an option).
_OVERRIDE_LIKE = re.compile(r"\+{0,2}([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)=")


def carries_overrides(spec: Mapping[str, Any], besides: Sequence[str] = ()) -> bool:
    """Whether the job's command or args (an argv list, or shell text; a word holding spaces, such as ``sh -c``'s
    script, read as shell words too) carry a ``key=value`` word TAO would take for an override; a key of
    ``besides`` does not count (the resume override ``continue`` adds: the bank's own word, not the user's)."""
    words: list[str] = []
    for value in (spec.get("command"), spec.get("args")):
        if isinstance(value, list):
            words += [str(w) for w in value]
        elif isinstance(value, str):
            words += shell_words(value)
    for word in words:
        for part in (shell_words(word) if len(word.split()) > 1 else [word]):
            found = _OVERRIDE_LIKE.match(part)
            if found and any(c.islower() for c in found.group(1)) and found.group(1) not in besides:
                return True
    return False
