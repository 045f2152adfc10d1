"""Features over one job or many, built on the core's submit/status/cancel: sweeps and their supervisor's
table, lineage (continue, --parent), results (artifacts, fetch, prune), the job table, status with
progress, and a sweep's Optuna search (:mod:`.search`)."""
