"""What ``dump_yaml`` writes, the real kubectl reads back with every string the same string.

kubectl's YAML reader (sigs.k8s.io/yaml over go-yaml) retypes plain scalars PyYAML takes for
strings: ``--env F=y`` once reached the cluster as ``true``. Each example batches many random
strings into one ConfigMap (data keys and values) and one Job (labels, container args, env values)
and makes ONE kubectl call: ``kubectl annotate --local -f - -o json``, which parses the YAML the way
``kubectl apply/create -f`` does, keeps the objects unstructured (a retyped value shows as a number,
boolean or null; metadata is decoded typed, so a retyped label is refused) and needs no cluster: the kubeconfig given is empty.
(``create --dry-run=client`` still asks a server for its API groups.)

kubectl is the one on PATH and the local cluster's (TAO_LOCAL_K8S_KUBECTL); none found FAILS.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from taobank.platforms.kubernetes.kubectl import json_objects
from taobank.render import dump_yaml
from tests.support.kube_objects import SCRIPT, objects

pytestmark = pytest.mark.e2e
KUBECTL_ENV = "TAO_LOCAL_K8S_KUBECTL"

#: Strings YAML 1.1 readers may read as something else when left plain, and escapes to get right.
SPECIAL = [
    "y", "Y", "n", "N", "yes", "No", "on", "ON", "off", "Off", "true", "False", "null", "NULL", "~", "",
    "1e3", "1E3", "09", "0o17", "0x1F", "0b101", "1_000", "+1", "-1", ".5", "1.", "-.inf", ".inf", ".NaN",
    "190:20:30", "1:20", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "=", "<<", "- x", "? x", "a: b", "# c",
    "&a", "*a", "!t", "!!str", "%TAG", "---", "...", "|", ">", "'", '"', "\\", "[1]", "{a: 1}",
    " lead", "trail ", "\t", "\x00", "\x85", "\xa0", "\u2028", "\u2029", "\ufeff", "\ufffe", "\x7f", "\x1b",
    "\r\n", "a\nb\n", "\n\n", " \n ", "\\\n", "\U0001F600", "\u00e9",
]

_chars = st.characters(blacklist_categories=("Cs",))  # a lone surrogate is no UTF-8: no JSON carries it
strings = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(alphabet=_chars, max_size=40),
    st.lists(st.sampled_from(SPECIAL + [SCRIPT]), min_size=1, max_size=5).map("".join),
    st.text(alphabet=" ab\n\\\"\x85\u00e9", min_size=70, max_size=300),  # long lines the emitter folds
)
keys = st.one_of(strings.filter(bool), st.from_regex(r"[A-Za-z][A-Za-z0-9_./-]{0,20}", fullmatch=True))


def _kubectls() -> list[str]:
    """Every kubectl to test: the one on PATH and the local cluster's (same version as its server)."""
    found = [shutil.which("kubectl"), os.environ.get(KUBECTL_ENV)]
    try:
        import testclusters.kubernetes as lk

        found.append(lk.env().get(KUBECTL_ENV))
    except Exception:  # no cluster state: PATH and the environment are enough
        pass
    out: list[str] = []
    for exe in found:
        if exe and os.access(exe, os.X_OK) and os.path.realpath(exe) not in map(os.path.realpath, out):
            out.append(exe)
    return out


KUBECTLS = _kubectls()


@pytest.fixture(params=KUBECTLS or [None], ids=lambda exe: f"kubectl={exe}")
def kubectl(request, tmp_path_factory):
    """A function: objects -> what kubectl parsed from their ``dump_yaml`` text (no cluster contacted)."""
    home = tmp_path_factory.mktemp("kubectl-home")
    config = home / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "KUBECONFIG": str(config)}

    def read_back(text: str) -> list[dict]:
        if request.param is None:  # a FAILED test, never a skip or a setup error
            pytest.fail(f"no kubectl: put one on PATH or set {KUBECTL_ENV} "
                        "(python3 scripts/local_cluster.py env kubernetes prints it)", pytrace=False)
        proc = subprocess.run([request.param, "annotate", "--local", "-f", "-", "-o", "json", "tao-roundtrip=1"],
                              input=text.encode("utf-8"), capture_output=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        objs = json_objects(proc.stdout.decode("utf-8"))
        for obj in objs:
            obj["metadata"].pop("annotations", None)
        return objs

    return read_back




def _strings_in(obj) -> bool:
    """True when every leaf of the ConfigMap data / env values / args is a str (none retyped)."""
    if obj.get("kind") == "ConfigMap":
        return all(isinstance(k, str) and isinstance(v, str) for k, v in obj["data"].items())
    (c,) = obj["spec"]["template"]["spec"]["containers"]
    return all(isinstance(a, str) for a in c["command"]) and all(isinstance(e["value"], str) for e in c["env"])


def test_every_special_form_comes_back_a_string(kubectl):
    objs = objects(SPECIAL + [SCRIPT], [f"k{i}" for i in range(len(SPECIAL) + 1)])
    objs += objects(SPECIAL[:-1], [s or "empty" for s in SPECIAL[1:]])  # and as keys
    got = kubectl(dump_yaml(objs))
    assert all(_strings_in(o) for o in got)
    assert got == objs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(values=st.lists(strings, min_size=1, max_size=30), names=st.lists(keys, min_size=1, max_size=30))
def test_random_strings_come_back_identical_through_kubectl(kubectl, values, names):
    objs = objects(values, names)
    got = kubectl(dump_yaml(objs))  # one kubectl call for the whole batch
    assert all(_strings_in(o) for o in got)
    assert got == objs


def test_control_a_plain_dump_is_retyped_by_kubectl(kubectl):
    """The fault this guards against, shown with PyYAML's own dumper (so the harness can see it)."""
    objs = objects(["y", "1e3", "09"], ["F", "L", "I"])
    del objs[1]["metadata"]["labels"]  # kubectl decodes metadata typed: a retyped label is refused outright
    cm, job_obj = kubectl(yaml.safe_dump_all(objs, sort_keys=False))
    assert cm["data"] == {"F": True, "L": 1000, "I": 9}
    assert [e["value"] for e in job_obj["spec"]["template"]["spec"]["containers"][0]["env"]] == [True, 1000, 9]


def test_a_rendered_job_with_hostile_env_round_trips(kubectl, tmp_path: Path):
    """The reported symptom end to end: ``--env F=y L=1e3 I=09`` through render_manifests and kubectl."""
    from taobank.platforms.kubernetes.render import find, render_manifests

    env = {"F": "y", "L": "1e3", "I": "09", "O": "0o17", "T": "~", "D": "2001-12-14", "H": "0x1F", "M": "<<"}
    objs = render_manifests({"image": "busybox", "command": SCRIPT, "env": env, "no_results": True},
                            job_id="dino-train-0a1b2c3d", namespace="default")
    got = find(kubectl(dump_yaml(objs)), "Job")
    sent = {e["name"]: e.get("value") for e in got["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert {k: sent[k] for k in env} == env
    assert got == find(objs, "Job")
