"""Job ids: RFC 1035 labels, short enough, random, for any input."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from taobank import names

TAO_ARCHS = [
    "deformable_detr", "action_recognition", "visual_changenet", "classification_pyt",
    "dino", "grounding_dino", "mask2former", "ocdnet", "ocrnet", "pointpillars",
    "pose_classification", "re_identification", "segformer", "centerpose", "mal",
    "rtdetr", "stylegan_xl", "bevfusion", "nvdinov2", "mask_grounding_dino",
    "optical_inspection", "ml_recog", "cosmos-rl", "visual_changenet_classify",
]
ACTIONS = ["train", "evaluate", "inference", "export", "gen_trt_engine", "prune", "retrain", "dataset_convert"]


@pytest.mark.parametrize("arch", TAO_ARCHS)
@pytest.mark.parametrize("action", ACTIONS)
def test_every_tao_arch_gives_valid_id(arch, action):
    job_id = names.mint_job_id(arch, action)
    assert names.is_dns1035_label(job_id) and names.is_dns1123_label(job_id)
    assert len(job_id) <= names.MAX_ID_LEN
    assert len(f"tao-creds-{job_id}") <= 63 and len(f"{job_id}-99999") <= 63


def test_underscore_becomes_dash_and_case_is_lowered():
    job_id = names.mint_job_id("Deformable_DETR", "Train")
    assert job_id.startswith("deformable-detr-train-")
    assert re.fullmatch(r"deformable-detr-train-[0-9a-f]{8}", job_id)


def test_leading_digit_and_empty_inputs():
    assert names.mint_job_id("3d_pose", "train")[0].isalpha()
    job_id = names.mint_job_id("", "")
    assert job_id.startswith("job-run-") and names.is_dns1035_label(job_id)
    assert names.mint_job_id("日本語", "??")[:8] == "job-run-"


def test_sanitize_label():
    assert names.sanitize_label("visual_changenet") == "visual-changenet"
    assert names.sanitize_label("Café__Crème!") == "cafe-creme"
    assert names.sanitize_label("123abc") == "x-123abc"
    assert names.sanitize_label("---", 10) == "x"
    assert names.sanitize_label("a" * 100, 20) == "a" * 20
    assert names.sanitize_label("ab-" + "c" * 20, 3) == "ab"  # never ends on '-'


@pytest.mark.parametrize("label,ok1035,ok1123", [
    ("abc", True, True), ("a-b-1", True, True), ("1abc", False, True), ("-a", False, False),
    ("a-", False, False), ("A", False, False), ("a_b", False, False), ("a" * 63, True, True),
    ("a" * 64, False, False), ("", False, False), ("a.b", False, False),
])
def test_label_predicates(label, ok1035, ok1123):
    assert names.is_dns1035_label(label) is ok1035
    assert names.is_dns1123_label(label) is ok1123


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80))
def test_any_arch_action_gives_valid_id(arch, action):
    job_id = names.mint_job_id(arch, action)
    assert names.is_dns1035_label(job_id), job_id
    assert len(job_id) <= names.MAX_ID_LEN


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.integers(min_value=1, max_value=63))
def test_sanitize_label_property(s, n):
    out = names.sanitize_label(s, n)
    assert names.is_dns1035_label(out) and len(out) <= n


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=40), st.text(max_size=20))
def test_ids_are_unique(arch, action):
    # Distinct random suffixes must give distinct ids whatever the arch/action
    # (the stem truncation never eats the suffix). The suffixes are fed in
    # deterministically: a real 32-bit draw would collide by chance ~1e-4 of
    # runs; the store retries such a collision (test_records covers that).
    suffixes = iter(f"{i:08x}" for i in range(200))
    orig = names._suffix
    names._suffix = lambda: next(suffixes)
    try:
        ids = {names.mint_job_id(arch, action) for _ in range(200)}
    finally:
        names._suffix = orig
    assert len(ids) == 200
