"""The job-record store: one JSON file per job, the source of truth for a job.

The parts, one idea each:

* :mod:`.record` -- :class:`Record`, a record as typed values (what code reads);
* :mod:`.shape` -- the record's shape, written once in ``schemas/job-record.schema.json`` and checked by
  :mod:`.schemacheck` (compiled once, no jsonschema import), plus the transition table and the id rule;
* :mod:`.store` -- the state folder, the lock, atomic writes, reads and lists;
* :mod:`.writes` -- the two writers, :func:`open_record` and :func:`mark`; :mod:`.values` cleans what they store;
* :mod:`.folders` and :mod:`.nesting` -- results-folder rules, alone and against the other records.

Callers import this package (``from taobank import records``); the names below are its API.
"""
from __future__ import annotations

from .folders import ID_PLACEHOLDER, NO_RESULTS_DIR, check_results_dir, folder_of, within
from .nesting import records_inside, refuse_nested
from .record import RECORD_VERSION, Record, run_times
from .shape import LINEAGE_FIELDS, SCHEMA_FILE, SWEEP_FIELDS, validate
from .store import (STATE_DIR_ENV, artifact_dir, find, get, list_records, load, record_path, state_dir,
                    state_lock)
from .writes import STORAGE_TIERS, mark, open_record

__all__ = ["Record", "RECORD_VERSION", "get", "find", "state_dir", "open_record", "mark", "load", "folder_of",
           "within", "refuse_nested", "records_inside", "list_records", "run_times", "artifact_dir",
           "check_results_dir", "validate", "record_path", "state_lock", "STATE_DIR_ENV", "SCHEMA_FILE",
           "STORAGE_TIERS", "ID_PLACEHOLDER", "NO_RESULTS_DIR", "LINEAGE_FIELDS", "SWEEP_FIELDS"]
