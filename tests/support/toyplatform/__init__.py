"""A toy fourth platform whose "cluster" is a dict in memory: made by the steps of docs/architecture.md's
"Adding a platform" and nothing else (this folder, and one line in the registry that its tests add)."""
from taobank.registry import HostClient, PlatformInfo

INFO = PlatformInfo(name="toy", helper="tao_jobs.py",
                    client=HostClient("python3", ("python3",), "install Python 3"))
