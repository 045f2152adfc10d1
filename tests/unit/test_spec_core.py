"""taobank.spec: one loader and validator for every platform's job spec."""
import pytest

from taobank import spec
from taobank.errors import TaoError


def test_unknown_field_names_the_nearest_known_field():
    with pytest.raises(TaoError) as exc:
        spec.validate({"network_arch": "x", "action": "train", "command": "echo", "num_gpu": 2},
                      "slurm-job-spec.schema.json", "job spec")
    assert "unknown field 'num_gpu' (did you mean 'num_gpus'?)" in str(exc.value)


def test_unknown_field_without_a_near_match(tmp_path):
    with pytest.raises(TaoError) as exc:
        spec.validate({"network_arch": "x", "action": "train", "command": "echo", "zzz": 1},
                      "slurm-job-spec.schema.json", "job spec")
    assert "unknown field 'zzz'" in str(exc.value) and "did you mean" not in str(exc.value)


def test_load_file_refuses_a_non_mapping(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(TaoError, match="must hold a mapping"):
        spec.load_file(p)
