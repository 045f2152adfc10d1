"""Typed values across the adapter contract: what would let loose dicts creep back.

* the platforms render and plan from the typed spec (attribute access): a spec becomes a dict only where a
  document is written out, so ``<...spec...>.to_dict()`` appears in the adapters only at the places named here;
* the contract types carry no dict of many loose keys: the dict-typed fields that remain are named here with why,
  and every dict literal an adapter passes into one of them holds at most a handful of keys;
* what a view shows (``Observation.view``, ``Stop.view``) is the typed :class:`Shown`, laid over the view in its
  field order, so ``status --json`` / ``cancel --json`` keep their key order.
"""
from __future__ import annotations

import ast
import collections.abc
import dataclasses
import types
import typing
from pathlib import Path

import pytest

from taobank import contract
from taobank.contract import UNSET, Observation, Shown, Stop
from taobank.core.platform import JobView
from taobank.platforms.slurm.status import SlurmObservation

PKG = Path(__file__).resolve().parents[2] / "scripts" / "taobank"
ADAPTER_DIRS = ("platforms/kubernetes", "platforms/slurm", "platforms/docker")

#: (file under scripts/taobank, function): where a spec is still turned into a dict, and why
SPEC_TO_DICT_ALLOWED = {
    ("platforms/kubernetes/submit.py", "plan"): "the spec file kept beside the record (Plan.kept: a document written out)",
    ("platforms/slurm/submit.py", "plan"): "the newline check names the field as the spec file spells it",
}

#: contract dataclass fields still typed as a dict, and why each stays one
DICT_FIELDS_ALLOWED = {
    ("SubmitOptions", "config"): "a staged config file: text, mount path, key, sha256 (4 keys, one shape)",
    ("SubmitOptions", "env"): "SLURM: the settings (os.environ's shape: a map of variables, not loose keys)",
    ("Plan", "backend"): "the record's backend facts known before launch: stored as they are",
    ("Plan", "kept"): "file name -> text kept beside the record (a map of documents, not loose keys)",
    ("Gate", "backend"): "the record's backend facts the checks found: stored as they are",
    ("Launch", "backend"): "a few backend facts as a map, or the platform's typed Facts (a Kubernetes Job, a SLURM "
                           "sweep trial), written out as the record's backend",
    ("Launch", "details"): "facts shown with the new job (at most 5 keys, see below)",
    ("Observation", "backend"): "the record's backend facts: stored as they are",
    ("Stop", "backend"): "the record's backend facts: stored as they are",
    ("Shown", "progress"): "TAO's training progress as taobank.core.training reads it (JobView.progress, shown as is)",
    ("ResultsListing", "status_files"): "relative path -> file text (a map, not loose keys)",
    ("ResultsListing", "links"): "link path -> target path (a map, not loose keys)",
}
#: the most keys a dict literal may carry into a contract type's dict field
MAX_LOOSE_KEYS = 5


def _adapter_files() -> list[Path]:
    found = sorted(f for d in ADAPTER_DIRS for f in (PKG / d).glob("*.py"))
    assert len(found) > 30, "the adapters' folders moved: these checks would check nothing"
    return found


def _functions(tree: ast.AST):
    """(function name, node) for every node, by its innermost enclosing top-level or nested def."""
    def walk(node: ast.AST, name: str):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
            yield inner, child
            yield from walk(child, inner)
    yield from walk(tree, "<module>")


def test_adapters_turn_a_spec_into_a_dict_only_where_a_document_is_written_out():
    found = set()
    for path in _adapter_files():
        rel = path.relative_to(PKG).as_posix()
        for func, node in _functions(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_dict" \
                    and "spec" in ast.unparse(node.func.value).lower():
                found.add((rel, func))
    assert found <= set(SPEC_TO_DICT_ALLOWED), (
        f"a spec turned into a dict in {sorted(found - set(SPEC_TO_DICT_ALLOWED))}: read the typed spec's fields "
        "(a mapping from a file is typed once with JobSpec.of)")


def _is_dict_type(hint: typing.Any) -> bool:
    origin = typing.get_origin(hint) or hint
    if origin in (typing.Union, types.UnionType):
        return any(_is_dict_type(a) for a in typing.get_args(hint))
    return isinstance(origin, type) and issubclass(origin, (dict, collections.abc.Mapping))


def test_the_contract_types_carry_no_other_dict_field():
    dict_fields = set()
    for name in contract.__all__:
        cls = getattr(contract, name)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            continue
        hints = typing.get_type_hints(cls)
        dict_fields |= {(name, f.name) for f in dataclasses.fields(cls) if _is_dict_type(hints[f.name])}
    assert dict_fields == set(DICT_FIELDS_ALLOWED)


def test_no_adapter_passes_a_dict_of_many_loose_keys_into_a_contract_type():
    """Every dict literal an adapter hands a contract type (by keyword or by position) holds a handful of keys at
    most; what a view shows is never a dict. (A dict built up in a variable first is the typed Facts' job.)"""
    from taobank.platforms.docker.submit import DockerPlan
    from taobank.platforms.kubernetes.submit import KubePlan
    from taobank.platforms.slurm.submit import SlurmPlan

    types = {c.__name__: c for c in (contract.Plan, contract.Gate, contract.Launch, Observation, Stop, KubePlan,
                                     SlurmPlan, DockerPlan, SlurmObservation)}
    too_many = []
    for path in _adapter_files():
        for node in ast.walk(ast.parse(path.read_text())):
            cls = types.get(getattr(node.func, "id", getattr(node.func, "attr", None))) \
                if isinstance(node, ast.Call) else None
            if cls is None:
                continue
            names = [f.name for f in dataclasses.fields(cls)]
            given = [(names[i], a) for i, a in enumerate(node.args)] + [(kw.arg, kw.value) for kw in node.keywords]
            for name, value in given:
                if isinstance(value, ast.Dict) and (name == "view" or len(value.keys) > MAX_LOOSE_KEYS):
                    too_many.append(f"{path.relative_to(PKG)}:{node.lineno} {name}= {len(value.keys)} keys")
    assert too_many == []


def test_an_observation_has_no_loose_extra_and_shows_a_typed_view():
    names = {f.name for f in dataclasses.fields(Observation)}
    assert "extra" not in names
    assert isinstance(Observation("RUNNING").view, Shown) and isinstance(Stop("j").view, Shown)
    # SLURM's own verdict facts are typed fields of its observation, never a dict
    own = {f.name for f in dataclasses.fields(SlurmObservation)} - names
    assert own == {"moved", "pending_reason", "progress", "convert_log", "prefetch_log"}


def test_shown_lays_only_what_is_set_over_the_view_in_field_order():
    from taobank.core.track import _overlay

    view = JobView(id="j", platform="kubernetes", state="RUNNING", observed="old", exit_code=3,
                   extra={"pod_attempts": 9})
    _overlay(view, Shown(observed=None, reason="QueryFailed", pods=[], pod_attempts=0))
    out = view.to_dict()
    assert (out["observed"], out["reason"], out["exit_code"]) == (None, "QueryFailed", 3)  # exit_code left as it was
    assert list(out)[-2:] == ["pod_attempts", "pods"]  # an extra already there keeps its place; a new one follows
    assert Shown().items() == [] and Shown(deleted=False).items() == [("deleted", False)]
    assert repr(UNSET) == "UNSET"


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Shown)])
def test_every_shown_field_is_a_view_field_or_a_known_extra(field):
    assert field in {f.name for f in dataclasses.fields(JobView)} or field in ("pods", "pod_attempts", "deleted")


def test_of_types_a_mapping_by_its_schema_keys_and_keeps_a_typed_spec():
    from taobank.platforms.kubernetes.spec import KubernetesSpec
    from taobank.platforms.slurm.spec import SlurmSpec

    typed = KubernetesSpec(image="i", cpus="2")
    assert KubernetesSpec.of(typed) is typed
    # a spec file read back: the schema's spelling, and a key no renderer reads is left out as it always was
    assert KubernetesSpec.of({"image": "i", "cpu": "2", "working_dir": "/w", "gone": 1}) == \
        KubernetesSpec(image="i", cpus="2", workdir="/w")
    assert SlurmSpec.of({"num_nodes": 2, "memory": "8G", "results_base": "/l"}) == \
        SlurmSpec(nodes=2, memory="8G", results_dir="/l")


@pytest.mark.parametrize("platform", ["kubernetes", "slurm", "docker"])
@pytest.mark.parametrize("command", ["dino train -e /s.yaml", ["dino", "train", "-e", "/s.yaml"], "echo x",
                                     ["dino", "train", "train.num_gpus=2"]])
def test_with_gpu_args_is_the_dict_rule_on_the_typed_spec(platform, command):
    from taobank import tao_command
    from taobank.errors import TaoError
    from taobank.core import platform as contract

    cls = contract.get(platform).spec_type
    spec = cls.from_dict({"image": "i", "command": command, "network_arch": "dino", "action": "train"})
    try:
        want = spec.updated(tao_command.with_gpu_args(spec.to_dict(), 2, 1))
    except TaoError as exc:
        with pytest.raises(TaoError, match=str(exc)[:40].replace("[", r"\[").replace(".", r"\.")):
            spec.with_gpu_args(2, 1)
        return
    assert spec.with_gpu_args(2, 1) == want
    assert spec.command == command  # the spec itself is left as it was


def test_typed_backend_facts_are_written_out_in_the_records_key_order():
    from taobank.contract import Launch
    from taobank.platforms.kubernetes.submit import JobFacts
    from taobank.platforms.slurm.sweep import TrialFacts

    job = JobFacts(uid=None, namespace="ns", name="j", context="", owned="", nodes=2)
    assert job.to_dict() == {"uid": None, "namespace": "ns", "name": "j", "context": "", "owned": "", "nodes": 2}
    job.index, job.nodes = 3, 1  # a sweep's trial: nodes keeps its place, the index comes last
    assert list(Launch("ns/j", job, "Job created").facts()) == ["uid", "namespace", "name", "context", "owned",
                                                                 "nodes", "index"]
    trial = TrialFacts(staged_dir="/j", results_dir="/r", script="/j/s", login_host="h", job_name="t",
                       staged_secrets=False, self_retry=True, infra_retries=True)
    assert list(trial.to_dict()) == ["staged_dir", "results_dir", "script", "login_host", "job_name",
                                     "staged_secrets", "self_retry", "infra_retries"]
    trial.walltime_chain, trial.max_attempts, trial.slurm_job_id = True, 3, "9_0"
    assert list(trial.to_dict())[6:] == ["self_retry", "walltime_chain", "max_attempts", "infra_retries",
                                         "slurm_job_id"]
    plain = {"container_id": "c"}
    assert Launch("c", plain, "started").facts() is plain


#: Platform methods that take a spec as a mapping, and why: the edges where a spec as given (flags, a file, a saved
#: spec) enters the contract. Every other method takes the platform's typed spec (``SpecT``).
MAPPING_EDGES = {
    "typed_spec": "the one conversion: a mapping checked and typed",
    "typed_specs": "typed_spec of each spec of one launch",
    "submit": "the core's submit order over a batch of one: its spec check reads the mapping, then it types it",
}


def _mentions_a_mapping(annotation: str) -> bool:
    """The annotation text names a dict or a Mapping anywhere (``dict``, ``Mapping[str, Any] | None``,
    ``list[dict]``, ``SpecT | Mapping``)."""
    names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(ast.parse(annotation, mode="eval"))
             if isinstance(n, (ast.Name, ast.Attribute))}
    return bool(names & {"dict", "Dict", "Mapping", "MutableMapping"})


def _platform_classes() -> list[type]:
    """The contract's class and every adapter's (the three platforms and the toy of tests/support)."""
    import sys

    from taobank.core import platform as contract_module

    support = str(Path(__file__).resolve().parents[1] / "support")
    if support not in sys.path:
        sys.path.insert(0, support)
    from toyplatform.adapter import Toy

    adapters = [type(contract_module.get(name)) for name in ("kubernetes", "slurm", "docker")]
    return [contract_module.Platform, *adapters, Toy]


def test_no_platform_method_takes_a_spec_as_a_dict():
    """A hook gets and gives the platform's typed spec (``Platform.typed_spec`` makes one, ``to_dict()`` gives the
    mapping back): no method of the contract or of an adapter has a ``spec``/``specs`` parameter annotated as a
    dict or a Mapping (or none at all), and only the named edges take a mapping under any other name."""
    import inspect

    found, edges = [], set()
    for cls in _platform_classes():
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if fn.__qualname__.split(".")[0] != cls.__name__:
                continue  # inherited: checked on the class that defines it
            for param in list(inspect.signature(fn).parameters.values())[1:]:
                note = param.annotation
                text = note if isinstance(note, str) else getattr(note, "__name__", repr(note))
                if param.name in ("spec", "specs"):
                    if note is inspect.Parameter.empty or _mentions_a_mapping(text):
                        found.append(f"{cls.__name__}.{name}({param.name}: {text})")
                elif "spec" in param.name or param.name in ("mapping", "mappings"):
                    if _mentions_a_mapping(text):
                        edges.add(name)
    assert found == [], f"a hook takes a spec as a dict: {found} (take the platform's typed spec, SpecT)"
    assert edges <= set(MAPPING_EDGES), f"a new edge takes a spec as a mapping: {sorted(edges - set(MAPPING_EDGES))}"
    assert len(_platform_classes()) == 5


def test_the_check_sees_a_spec_taken_as_a_dict():
    """The check above can fail: a hook written the old way is found."""
    import inspect

    from taobank.core.platform import Platform

    class Old(Platform):  # type: ignore[type-arg]
        def preview(self, spec: dict, opts):  # type: ignore[no-untyped-def, override]
            return ""

    note = inspect.signature(Old.preview).parameters["spec"].annotation
    assert _mentions_a_mapping(note if isinstance(note, str) else note.__name__)
    assert _mentions_a_mapping("Mapping[str, Any] | None") and _mentions_a_mapping("list[dict[str, Any]]")
    assert not _mentions_a_mapping("SpecT") and not _mentions_a_mapping("KubernetesSpec")


def test_kubernetes_and_docker_facts_read_an_odd_backend_as_every_read_did():
    """Each adapter reads its record's backend through one typed class: a missing key is None (or ""), a number
    where text was written reads as its text, a count that is none (or not one) as None, and the fallbacks hold
    (Docker's container is the job id, its folder the record's)."""
    from types import SimpleNamespace

    from taobank.platforms.docker.engine import DockerFacts
    from taobank.platforms.kubernetes.kubectl import LOOKED, KubeFacts

    rec = SimpleNamespace(id="dino-train-1a2b3c4d", results_dir="/r/dino-train-1a2b3c4d", backend={})
    assert KubeFacts.of(rec) == KubeFacts()
    assert DockerFacts.of(rec) == DockerFacts(container=rec.id, folder=rec.results_dir)
    rec.backend = {"namespace": "ns", "name": 7, "uid": 0, "nodes": "2", "index": True, LOOKED: "t",
                   "engine": "podman", "stop_grace_seconds": "soon", "held": 1, "gpu_indices": None, "container": ""}
    kube, dock = KubeFacts.of(rec), DockerFacts.of(rec)
    assert (kube.namespace, kube.name, kube.uid, kube.nodes, kube.index, kube.looked) == ("ns", "7", "", 2, None, "t")
    assert (dock.engine, dock.stop_grace_seconds, dock.held, dock.gpu_indices, dock.container) == \
        ("podman", None, True, "", rec.id)
    rec.backend = {"nodes": 0, "index": 3, "stop_grace_seconds": 30}
    assert (KubeFacts.of(rec).nodes, KubeFacts.of(rec).index, DockerFacts.of(rec).stop_grace_seconds) == \
        (None, 3, 30)
