"""A token pasted where a variable NAME belongs is never printed, not even in the error that rejects it.

Kubernetes (``--secret-env``, collect_credentials) and SLURM (the spec's ``secrets``, collect_secrets)
ask the same predicate, :func:`taobank.redact.looks_like_secret`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from taobank.errors import TaoError
from taobank.platforms.kubernetes.submit import collect_credentials
from taobank.platforms.slurm.storage import collect_secrets

BANK = Path(__file__).resolve().parents[2]

# vendor prefixes are joined at run time so that push-protection scanners do not take the file for a leak
TOKENS = [
    "hf" + "_" + "AbCdEfGh12345678" * 2,
    "gh" + "p_" + "x1Y2" * 9,
    "AK" + "IA" + "ABCDEFGHIJ234567",
    "github" + "_pat_" + "A1b2C3d4" * 4,
    "fa4e" + "0123456789abcdef" * 2,  # a hex API key (W&B)
    "Xk3vQ9pL2mWr7tZsB8nC",  # a generated password
]


def _pieces(value: str, n: int = 6) -> set[str]:
    return {value[i:i + n] for i in range(len(value) - n + 1)}


def _assert_not_shown(message: str, token: str) -> None:
    assert not [p for p in _pieces(token) if p in message], message
    assert "not shown" in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("token", TOKENS)
def test_k8s_secret_env_never_echoes_a_token(token, monkeypatch):
    monkeypatch.delenv(token, raising=False)
    with pytest.raises(TaoError) as exc:
        collect_credentials([token])
    _assert_not_shown(str(exc.value), token)


@pytest.mark.parametrize("token", TOKENS)
def test_k8s_token_rejected_even_when_exported_under_that_name(token, monkeypatch):
    """A variable that happens to be named like a token still names nothing a user meant: never use it."""
    monkeypatch.setenv(token, "value")
    with pytest.raises(TaoError) as exc:
        collect_credentials([token])
    _assert_not_shown(str(exc.value), token)


@pytest.mark.parametrize("token", TOKENS)
def test_slurm_secrets_never_echo_a_token(token):
    with pytest.raises(TaoError) as exc:
        collect_secrets([token], {})
    _assert_not_shown(str(exc.value), token)


def test_real_names_are_still_named_in_the_error(monkeypatch):
    monkeypatch.delenv("MY_HF_TOKEN", raising=False)
    with pytest.raises(TaoError, match="MY_HF_TOKEN is not set"):
        collect_credentials(["MY_HF_TOKEN"])
    with pytest.raises(TaoError, match="secret NGC_API_KEY is listed but not set"):
        collect_secrets(["NGC_API_KEY"], {})
    monkeypatch.setenv("MY_HF_TOKEN", "v")
    assert collect_credentials(["MY_HF_TOKEN"]) == {"MY_HF_TOKEN": "v"}
    assert collect_secrets(["NGC_API_KEY"], {"NGC_API_KEY": "k"}) == {"NGC_API_KEY": "k"}


def test_cli_submit_never_echoes_a_token(tmp_path):
    """Through tao_k8s.py submit: stderr says what is wrong without the token (it was printed twice)."""
    token = TOKENS[0]
    env = {k: v for k, v in os.environ.items() if k != token}
    env["TAO_HOME"] = str(tmp_path)
    r = subprocess.run([sys.executable, str(BANK / "scripts" / "tao_k8s.py"), "submit", "--image",
                        "nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt", "--command", "echo hi", "--secret-env", token],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert not [p for p in _pieces(token) if p in out], out
    assert "--secret-env" in r.stderr and "not shown" in r.stderr


def test_a_slurm_dry_run_never_prints_a_token_listed_as_a_secret_name(tmp_path):
    import subprocess
    import sys

    from taobank import BANK_ROOT

    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123"
    spec = tmp_path / "job.yaml"
    spec.write_text(f"network_arch: dino\naction: train\ncommand: [python3, t.py]\nsecrets: [{token}]\n"
                    "container_runtime: none\nresults_base: /lustre/me\n")
    res = subprocess.run([sys.executable, str(BANK_ROOT / "scripts" / "tao_slurm.py"), "submit", "--dry-run",
                          "--spec", str(spec)], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "TAO_STATE_DIR": str(tmp_path / "s"), "SLURM_USER": "me"})
    assert res.returncode != 0 and token not in res.stdout + res.stderr and token[:12] not in res.stderr


_HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCd"
_AK = "AKIA" + "ABCDEFGHIJKLMNOP"
_K8S = ["tao_k8s.py", "submit", "--dry-run", "--image", "x", "--command", "true", "--no-results"]
_SLURM_SPEC = ("network_arch: dino\naction: train\ncommand: [python3, t.py]\ncontainer_runtime: none\n"
               "results_base: /lustre/me\n")


@pytest.mark.parametrize("extra", [["--namespace", _HF], ["--image-pull-secret", _HF], ["--pvc-mount", _HF],
                                   ["--pvc-mount", _HF + ":/d"], ["--cpu", _HF], ["--ttl", _HF],
                                   ["--storage-tier", _HF], [_HF], ["--request", _HF], ["--env", f"X_{_HF}=1"],
                                   ["--nccl-env", f"NCCL_{_AK}=1"], ["--env", f"X={_HF}"]])
def test_a_token_in_any_kubernetes_flag_is_never_printed(extra, tmp_path):
    _refused_unseen(_K8S + extra, tmp_path)


@pytest.mark.parametrize("extra", [["--mem", _HF], ["--time", _HF], ["--job-id", _HF], ["--partition", _HF],
                                   ["--account", _HF], ["--cpus-per-task", _HF], [_HF], ["--env", f"X={_HF}"],
                                   ["--env", f"{_AK}=x"]])
def test_a_token_in_any_slurm_flag_is_never_printed(extra, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(_SLURM_SPEC)
    _refused_unseen(["tao_slurm.py", "submit", "--dry-run", "--spec", str(spec)] + extra, tmp_path)


def _refused_unseen(argv: list[str], tmp_path) -> None:
    from taobank import BANK_ROOT

    res = subprocess.run([sys.executable, str(BANK_ROOT / "scripts" / argv[0]), *argv[1:]], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "TAO_STATE_DIR": str(tmp_path / "s"),
                                                     "SLURM_USER": "me"})
    out = res.stdout + res.stderr
    assert res.returncode != 0 and _HF[:12] not in out and _AK[:10] not in out and "Traceback" not in out, out


NGC_LIKE = "nv" + "api-" + "AbCdEfGh12345678" * 4  # a key with a dash: not even a variable name


@pytest.mark.parametrize("helper", ["tao_slurm.py", "tao_docker.py", "tao_k8s.py"])
@pytest.mark.parametrize("token", [NGC_LIKE, TOKENS[0]])
def test_a_token_given_to_secret_env_is_refused_on_every_helper_as_a_name_it_is_not(helper, token, cli, fake):
    """The refusal says what the flag takes (a variable's NAME), not a spec field the user never wrote."""
    out = cli(helper, "submit", "--image", "nvcr.io/x/y:1", "--network-arch", "dino", "--action", "train",
              "--secret-env", token, "--dry-run",
              *(["--command", "dino train"] if helper == "tao_k8s.py" else ["--", "dino", "train"]))
    assert out.rc != 0 and len(out.err_lines) == 1, out
    _assert_not_shown(out.err, token)
    assert "NAME of an exported variable" in out.err and "schema" not in out.err
    assert not [p for p in _pieces(token) if p in out.out]
