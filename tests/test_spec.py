from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES

from rooftop.errors import SpecError
from rooftop.problem.loader import load_problem
from rooftop.problem.spec import ProblemSpec, Tolerance

BASE = {
    "name": "p", "title": "t", "description": "d", "version": 1, "dtype": "float32", "regime": "memory",
    "flops": "B * N", "bytes": "8 * B * N", "shapes": [{"name": "a", "params": {"B": 2, "N": 3}}],
}


def write_problem(tmp_path: Path, **changes) -> Path:
    raw = {**BASE, **changes}
    raw = {k: v for k, v in raw.items() if v is not None}
    (tmp_path / "problem.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "reference.py").write_text((FIXTURES / "problems/scale/reference.py").read_text())
    return tmp_path


def error_for(tmp_path: Path, **changes) -> str:
    with pytest.raises(SpecError) as info:
        load_problem(write_problem(tmp_path, **changes))
    return str(info.value)


def test_valid_spec_loads(tmp_path):
    problem = load_problem(write_problem(tmp_path))
    assert problem.spec.name == "p" and problem.spec.shapes[0].split.value == "visible"


def test_unknown_key_is_an_error_naming_file_and_field(tmp_path):
    message = error_for(tmp_path, flopz="B")
    assert "problem.yaml" in message and "flopz" in message and "unknown key" in message


def test_unknown_nested_key(tmp_path):
    message = error_for(tmp_path, shapes=[{"name": "a", "params": {"B": 1, "N": 1}, "hidden": True}])
    assert "shapes[0].hidden" in message


def test_missing_field(tmp_path):
    message = error_for(tmp_path, version=None)
    assert "version" in message and "missing" in message


def test_bad_split_value(tmp_path):
    message = error_for(tmp_path, shapes=[{"name": "a", "params": {"B": 1, "N": 1}, "split": "secret"}])
    assert "shapes[0].split" in message and "secret" in message


def test_bad_dtype(tmp_path):
    assert "unknown dtype 'float33'" in error_for(tmp_path, dtype="float33")


def test_formula_must_be_arithmetic(tmp_path):
    message = error_for(tmp_path, flops="__import__('os').getcwd()")
    assert "flops" in message and "not allowed" in message


def test_formula_names_must_be_shape_params(tmp_path):
    message = error_for(tmp_path, flops="B * N * K")
    assert "K" in message and "'a'" in message


def test_duplicate_shape_names(tmp_path):
    shape = {"name": "a", "params": {"B": 1, "N": 1}}
    assert "used twice" in error_for(tmp_path, shapes=[shape, shape])


def test_invalid_yaml_and_missing_reference(tmp_path):
    (tmp_path / "problem.yaml").write_text("name: [unclosed\n")
    (tmp_path / "reference.py").write_text("")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_problem(tmp_path)
    write_problem(tmp_path)
    (tmp_path / "reference.py").write_text("class Model: pass\n")
    with pytest.raises(SpecError, match="get_inputs"):
        load_problem(tmp_path)


def spec(**changes) -> ProblemSpec:
    return ProblemSpec.model_validate({**BASE, **changes})


def test_default_tolerances_by_problem_dtype():
    assert spec(dtype="fp32").tolerance_for("float32") == Tolerance(atol=1e-4, rtol=1e-4)
    assert spec(dtype="bf16").tolerance_for("bfloat16") == Tolerance(atol=1e-2, rtol=1e-2)
    assert spec(dtype="float16").tolerance_for("float16").rtol == 1e-2
    assert spec(dtype="fp8").tolerance_for("bfloat16") == Tolerance(atol=0.1, rtol=0.1)
    assert spec(dtype="fp32").tolerance_for("int64") is None  # integers compare exactly


def test_override_is_resolved_by_the_problem_dtype_not_the_output_dtype():
    """An fp8 problem with a bf16 output uses the fp8 override (a peer's check applied the bf16 one)."""
    s = spec(dtype="float8_e4m3fn", tolerance={"fp8_e4m3": 0.15})
    tol = s.tolerance_for("bfloat16")
    assert (tol.atol, tol.rtol) == (0.15, 0.15)
    # an override keyed by another dtype would never apply: it is an error, not a silent no-op
    with pytest.raises(ValueError, match="override for bfloat16 never applies"):
        spec(dtype="float8_e4m3fn", tolerance={"fp8_e4m3": 0.15, "bfloat16": 0.01})
    assert spec(dtype="bf16", tolerance={"torch.bfloat16": {"atol": 0.05, "rtol": 0.02, "norm": 0.01}}) \
        .tolerance_for("bfloat16") == Tolerance(atol=0.05, rtol=0.02, norm=0.01)


def test_tolerance_keys_must_be_float_dtypes():
    with pytest.raises(ValueError, match="integer dtype"):
        spec(tolerance={"int32": 0.1})


def test_shape_selection():
    s = spec(shapes=[{"name": "a", "params": {"B": 1, "N": 1}},
                     {"name": "b", "params": {"B": 1, "N": 2}, "split": "held_out"}],
             smoke=[{"name": "c", "params": {"B": 1, "N": 1}}])
    assert [x.name for x in s.select("visible")] == ["a"]
    assert [x.name for x in s.select("held_out")] == ["b"]
    assert [x.name for x in s.select("all")] == ["a", "b"]
    assert [x.name for x in s.select("smoke")] == ["c"] and s.smoke[0].split.value == "smoke"
    assert s.flops_for(s.shapes[1]) == 2 and s.bytes_for(s.shapes[1]) == 16


def test_kernelbench_single_file():
    problem = load_problem(FIXTURES / "kernelbench_relu.py")
    assert problem.spec.kernelbench and len(problem.spec.shapes) == 1
    assert problem.spec.shapes[0].params == {"batch_size": 16, "dim": 512}
