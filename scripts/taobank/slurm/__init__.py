"""The SLURM platform: ssh connection, resources, images, storage, sbatch
rendering, status mapping and the verbs (submit/status/logs/cancel).

Only what differs from Kubernetes lives here; records, states, rendering and
the process runner come from the shared core.
"""
