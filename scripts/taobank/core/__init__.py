"""The core: the platform contract every adapter implements (:mod:`.platform`), the one submit order
(:mod:`.pipeline`), observations applied to records (:mod:`.track`), the NCCL probe's run; and below them
what a job keeps beside its record (its spec and final logs, training progress, sweep slots, NCCL
verdicts, which records a verb means). Adapters sit above it; the campaign above them."""
