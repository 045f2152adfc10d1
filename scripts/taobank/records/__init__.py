"""The job-record store: one JSON file per job, the source of truth for a job.

The parts, one idea each:

* :mod:`.shape` -- what a record is: the shape written once in ``schemas/job-record.schema.json`` and compiled
  into plain checks (no jsonschema import), the results-folder rules, and the verdict on a whole record
  (:func:`shape.damage`, :func:`validate`);
* :mod:`.store` -- the state folder, the lock, atomic writes, reads and lists, what a read gives
  (:class:`Record`, a record as typed values: what code reads), and one job's results folder against the other
  records' (:func:`refuse_nested`, :func:`records_inside`);
* :mod:`.writes` -- the two writers, :func:`open_record` and :func:`mark`, and the cleaning of what they store
  (:func:`check_openings`: what opening would refuse, nothing stored).

Callers import this package (``from taobank import records``); the names below are its API.
"""
from __future__ import annotations

from .shape import (ID_PLACEHOLDER, LINEAGE_FIELDS, NO_RESULTS_DIR, SCHEMA_FILE, SWEEP_FIELDS, check_results_dir,
                    folder_of, validate, within)
from .store import (RECORD_VERSION, STATE_DIR_ENV, NoRecord, NotAJobId, Record, UnknownJob, artifact_dir, artifact_dirs, find, get, get_each, list_records, load, record_path,
                    records_inside, refuse_nested, state_dir, state_lock)
from .writes import STORAGE_TIERS, Checked, Marking, Opening, check_openings, mark, mark_many, open_record, open_records

__all__ = ["Record", "RECORD_VERSION", "UnknownJob", "NoRecord", "NotAJobId", "get", "find", "state_dir", "open_record",
           "open_records", "Opening", "mark", "mark_many", "Marking", "check_openings", "Checked", "get_each",
           "artifact_dirs", "load", "folder_of",
           "within", "refuse_nested", "records_inside", "list_records", "artifact_dir",
           "check_results_dir", "validate", "record_path", "state_lock", "STATE_DIR_ENV", "SCHEMA_FILE",
           "STORAGE_TIERS", "ID_PLACEHOLDER", "NO_RESULTS_DIR", "LINEAGE_FIELDS", "SWEEP_FIELDS"]
