"""Rootless engines: the container's root is already the caller there, so the run gets no --user (Docker) or
--userns keep-id (Podman); a rootful engine runs it as the caller (--user UID:GID). Decided from the engine's
own `info` answer (recorded answers below: Docker's SecurityOptions, Podman's host.security.rootless)."""
from __future__ import annotations

import json

import pytest

from taobank.platforms.docker import render, userns

#: `docker info --format '{{json .}}'` (trimmed) of a rootful 20.10 engine and of a rootless 28.x one
DOCKER_ROOTFUL = {"ServerVersion": "20.10.24+dfsg1", "SecurityOptions": ["name=seccomp,profile=default"]}
DOCKER_ROOTLESS = {"ServerVersion": "28.2.2",
                   "SecurityOptions": ["name=seccomp,profile=builtin", "name=rootless", "name=cgroupns"]}
#: `podman info --format '{{json .}}'` (trimmed), run by a user and by root
PODMAN_ROOTLESS = {"host": {"security": {"rootless": True, "seccompEnabled": True}}, "version": {"Version": "4.9.3"}}
PODMAN_ROOTFUL = {"host": {"security": {"rootless": False, "seccompEnabled": True}}, "version": {"Version": "4.9.3"}}


@pytest.mark.parametrize("info,engine,user,ns", [
    (DOCKER_ROOTFUL, "docker", "1234:99", None),
    (DOCKER_ROOTLESS, "docker", "", None),
    (PODMAN_ROOTLESS, "podman", "", "keep-id"),
    (PODMAN_ROOTFUL, "podman", "1234:99", None),
    (PODMAN_ROOTLESS, "docker", "", None),  # the podman-docker shim answers as docker: no --user either
])
def test_user_flags_follow_the_engines_answer(info, engine, user, ns):
    assert userns.user_flags(engine, userns.rootless(info), "1234:99") == (user, ns)


def _engine(fake, engine: str, info: dict):
    fake.on(engine, lambda c: c.argv[1] == "info", json.dumps(info))
    fake.on(engine, lambda c: c.argv[1:3] == ["image", "inspect"], "sha256:1")
    fake.on(engine, lambda c: c.argv[1] == "run", "0123456789abcdef")


@pytest.mark.parametrize("engine,info,want,gone", [
    ("docker", DOCKER_ROOTFUL, ["--user", "1234:99"], ["--userns"]),
    ("docker", DOCKER_ROOTLESS, [], ["--user", "--userns"]),
    ("podman", PODMAN_ROOTLESS, ["--userns", "keep-id"], ["--user"]),
    ("podman", PODMAN_ROOTFUL, ["--user", "1234:99"], ["--userns"]),
])
def test_the_run_has_the_engines_user_flags(fake, cli, tmp_path, monkeypatch, engine, info, want, gone):
    monkeypatch.setattr("taobank.platforms.docker.submit.caller", lambda: "1234:99")
    _engine(fake, engine, info)
    out = cli("tao_docker.py", "submit", "--engine", engine, "--image", "img:1", "--gpus", "0", "--results-dir",
              str(tmp_path), "--json", "--", "true")
    assert out.rc == 0, out
    (run,) = [c for c in fake.calls if c.argv[1] == "run"]
    i = run.argv.index("--init")
    head = run.argv[:run.argv.index("img:1")]
    assert not set(gone) & set(head)
    if want:
        j = head.index(want[0])
        assert head[j:j + 2] == want and j > i
    assert ("rootless" in json.loads(out.out)["gate"]) == userns.rootless(info)


def test_render_leaves_out_an_empty_user():
    spec = render.RunSpec(engine="podman", job_id="j-1", image="img:1", command=["true"], host_results="/r/j-1",
                          container_results="/results", user="", userns="keep-id")
    argv = render.run_argv(spec)
    assert "--user" not in argv and argv[argv.index("--userns") + 1] == "keep-id"
