"""skills/tao-run-on-docker/evals/evals.json: at least 12 planning questions, each with the fields an eval runner
reads, covering every verb, credentials, failure diagnosis and progress/results; named scripts exist."""
from __future__ import annotations

import json
from pathlib import Path

BANK = Path(__file__).resolve().parents[2]
EVALS = BANK / "skills" / "tao-run-on-docker" / "evals" / "evals.json"
FIELDS = {"id", "question", "expected_skill", "expected_script", "ground_truth", "expected_behavior"}


def test_the_evals_have_the_fields_and_cover_the_skill():
    items = json.loads(EVALS.read_text(encoding="utf-8"))
    assert isinstance(items, list) and len(items) >= 12
    assert len({e["id"] for e in items}) == len(items)
    skills = {p.name for p in (BANK / "skills").iterdir() if (p / "SKILL.md").is_file()}
    for e in items:
        assert set(e) == FIELDS, e["id"]
        assert e["expected_skill"] in skills, e["id"]
        assert e["expected_script"] is None or (BANK / e["expected_script"]).is_file(), e["id"]
        assert isinstance(e["expected_behavior"], list) and e["expected_behavior"], e["id"]
        assert all(isinstance(b, str) and b for b in e["expected_behavior"])
    text = " ".join(e["question"] + " " + e["ground_truth"] for e in items).lower()
    for topic in ("preflight", "login", "submit", "status", "logs", "cancel", "fetch", "artifacts", "oom",
                  "ngc", "epoch", "unknown", "podman"):
        assert topic in text, topic
