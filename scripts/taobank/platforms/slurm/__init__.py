"""The SLURM platform: ssh connection, resources, images, storage, sbatch
rendering, status mapping and the verbs (submit/status/logs/cancel).

Only what differs from Kubernetes lives here; records, states, rendering and
the process runner come from the shared core.
"""
from ...registry import HostClient, PlatformInfo

#: who this platform is (:mod:`taobank.registry`)
INFO = PlatformInfo(
    dry_run_shows="the sbatch script", name="slurm", helper="tao_slurm.py", finish_verb="resume",
    client=HostClient("ssh", ("ssh",), "install the OpenSSH client (apt-get install openssh-client)", ("ssh", "-V"),
                      r"OpenSSH_([0-9][0-9.p]*)", "tools.openssh_min", product="OpenSSH",
                      upgrade="the OpenSSH client"))
