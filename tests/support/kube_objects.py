"""Manifests that carry arbitrary strings everywhere kubectl reads a string: data, labels, argv and env values."""
from __future__ import annotations

#: A multi-line script (tabs, trailing spaces, a long line) that must survive every dump and read.
SCRIPT = "set -eu\nfor f in a b; do\n  echo \"$f\" | tr a b  \n\tdone\n\n" + "word " * 40 + "\n"


def objects(values: list[str], names: list[str]) -> list[dict]:
    """A ConfigMap whose data holds ``values`` under ``names``; a Job whose labels, args and env values hold them."""
    data = dict(zip(names, values))
    env = [{"name": f"E{i}", "value": v} for i, v in enumerate(values)]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "tao-x", "labels": data},
           "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", SCRIPT, *values], "env": env}]}}}}
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tao-cm"}, "data": data}, job]
