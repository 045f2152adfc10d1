"""One Docker (or Podman) host as a platform: jobs are detached containers labelled with their job id.

One verb per module, like the other adapters: :mod:`.submit` (plan, checks, ``docker run -d``),
:mod:`.observe` (one ``docker inspect`` for every job), :mod:`.logs`, :mod:`.cancel`,
:mod:`.results_access` (the results folder is a local bind mount), :mod:`.preflight`,
:mod:`.registry` (NGC login and pull); :mod:`.engine` is the one way to call the engine's CLI.
"""
