"""One Docker (or Podman) host as a platform: jobs are detached containers labelled with their job id.

One verb per module, like the other adapters: :mod:`.submit` (plan, checks, ``docker run -d``),
:mod:`.observe` (one ``docker inspect`` for every job), :mod:`.logs`, :mod:`.cancel`,
:mod:`.results_access` (the results folder is a local bind mount), :mod:`.preflight`,
:mod:`.registry` (NGC login and pull); :mod:`.engine` is the one way to call the engine's CLI, and holds the
platform's names, labels and pinned defaults.
"""
from ...registry import HostClient, PlatformInfo

#: who this platform is (:mod:`taobank.registry`)
INFO = PlatformInfo(
    dry_run_shows="the engine command", name="docker", helper="tao_docker.py",
    client=HostClient("engine", ("docker", "podman"), "install the Docker CLI (apt-get install docker.io) or podman"))
