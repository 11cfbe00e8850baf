"""A problem's mistakes are all reported at once, and its code is checked before any solution runs."""

import shutil
import time
from pathlib import Path

import pytest
import torch
import yaml
from conftest import FIXTURES

from rooftop.errors import SpecError
from rooftop.problem.loader import load_problem
from rooftop.problem.registry import bundled_names, resolve
from rooftop.problem.validate import check_problem

SCALE = FIXTURES / "problems/scale"


def scale_copy(tmp_path: Path, spec_changes: dict | None = None, reference: str | None = None,
               drop: tuple[str, ...] = ()) -> Path:
    """The `scale` fixture problem copied into tmp_path, with its spec or its reference edited."""
    folder = tmp_path / "scale"
    shutil.copytree(SCALE, folder)
    raw = yaml.safe_load((folder / "problem.yaml").read_text())
    raw.update(spec_changes or {})
    for key in drop:
        raw.pop(key)
    (folder / "problem.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    if reference is not None:
        (folder / "reference.py").write_text(reference)
    return folder


def spec_error(folder: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_problem(folder)
    message = str(info.value)
    assert "\n" not in message  # the CLI prints a SpecError as one line
    return message


def check_error(folder: Path) -> str:
    problem = load_problem(folder)
    with pytest.raises(SpecError) as info:
        check_problem(problem)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- every spec error at once ---------------------------------------------------------------------
def test_a_misspelt_key_is_reported_with_a_suggestion_and_the_field_it_leaves_missing(tmp_path):
    raw = yaml.safe_load((SCALE / "problem.yaml").read_text())
    message = spec_error(scale_copy(tmp_path, {"shape": raw["shapes"]}, drop=("shapes",)))
    assert message.endswith("problem.yaml: shape: unknown key (did you mean 'shapes'?); "
                            "shapes: required field is missing")


def test_errors_in_nested_places_are_all_reported(tmp_path):
    message = spec_error(scale_copy(tmp_path, {
        "shapes": [{"name": "small", "parms": {"B": 8, "N": 256}},
                   {"name": "odd", "params": {"B": 3, "N": 1001}, "split": "hidden"}],
        "policy": {"forbiden": ["torch.mul"]},
        "tolerance": {"float32": {"atoll": 0.1, "rtol": 0.1}},
        "regime": "bandwidth",
    }))
    for part in ["shapes[0].parms: unknown key (did you mean 'params'?)",
                 "policy.forbiden: unknown key (did you mean 'forbidden'?)",
                 "tolerance.float32.atoll: unknown key (did you mean 'atol'?)",
                 "tolerance.float32.atol: required field is missing",
                 "shapes[1].split: Input should be 'visible', 'held_out' or 'smoke' (got 'hidden')",
                 "regime: Input should be 'compute' or 'memory' (got 'bandwidth')"]:
        assert part in message
    assert message.count("; ") == 5


def test_a_value_that_fits_no_member_of_a_union_is_one_error(tmp_path):
    message = spec_error(scale_copy(tmp_path, {"shapes": [{"name": "a", "params": {"B": [8], "N": 4}}]}))
    assert message.endswith("problem.yaml: shapes[0].params.B: expected int, float, bool or str")


def test_a_key_with_no_close_match_lists_the_keys_valid_there(tmp_path):
    message = spec_error(scale_copy(tmp_path, {"shapes": [{"name": "a", "params": {"B": 8, "N": 4}, "zzz": 1}]}))
    assert "shapes[0].zzz: unknown key (expected one of: name, params, split, note, flops, bytes)" in message


def test_a_file_full_of_errors_gives_a_line_of_bounded_length(tmp_path):
    message = spec_error(scale_copy(tmp_path, {f"unknown_{i}": i for i in range(20)}))
    assert message.count(": unknown key") == 8 and message.endswith("; and 12 more")
    assert message.count("check its spelling") == 1  # the generic hint is said once
    assert len(message) < 600


# -- the problem's code checked against its shapes --------------------------------------------------
REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x * self.alpha

'''


def test_get_inputs_parameters_that_do_not_match_the_shapes_name_file_function_and_shape(tmp_path):
    folder = scale_copy(tmp_path, {"flops": None, "bytes": None,
                                   "shapes": [{"name": "small", "params": {"batch": 8, "n": 256}}],
                                   "smoke": [{"name": "tiny", "params": {"batch": 2, "n": 8}}]},
                        reference=REFERENCE + "def get_init_inputs(**_):\n    return [0.5]\n\n\n"
                                              "def get_inputs(batch, N):\n    return [torch.randn(batch, N)]\n")
    message = check_error(folder)
    assert message == (f"{folder.resolve() / 'reference.py'}: get_inputs: shape 'small' (batch=8, n=256): "
                       "got an unexpected keyword argument 'n' and missing a required argument 'N' "
                       "(it takes batch, N)")


def test_get_init_inputs_failing_for_one_held_out_shape_is_caught(tmp_path):
    reference = REFERENCE + '''def get_init_inputs(B, N, **_):
    if N % 2:
        raise ValueError(f"N must be even, got {N}")
    return [0.5]


def get_inputs(B, N, **_):
    return [torch.randn(B, N)]
'''
    message = check_error(scale_copy(tmp_path, reference=reference))
    assert "reference.py: get_init_inputs: shape 'odd' (B=3, N=1001): ValueError: N must be even, got 1001" \
        in message


def test_a_model_that_takes_other_init_arguments_is_caught(tmp_path):
    reference = REFERENCE + "def get_init_inputs(**_):\n    return [0.5, 2]\n\n\n" \
                            "def get_inputs(B, N, **_):\n    return [torch.randn(B, N)]\n"
    message = check_error(scale_copy(tmp_path, reference=reference))
    assert "reference.py: Model: shape 'small' (B=8, N=256): get_init_inputs gives 2 argument(s)" in message
    assert "Model takes alpha" in message


def test_a_model_constructor_that_fails_for_a_shape_is_caught(tmp_path):
    reference = REFERENCE.replace("self.alpha = alpha", "if alpha > 1:\n            raise ValueError('alpha > 1')\n"
                                  "        self.alpha = alpha") \
        + "def get_init_inputs(N, **_):\n    return [N / 1000]\n\n\n" \
          "def get_inputs(B, N, **_):\n    return [torch.randn(B, N)]\n"
    message = check_error(scale_copy(tmp_path, reference=reference))
    assert "reference.py: Model: shape 'odd' (B=3, N=1001): ValueError: alpha > 1" in message


def test_get_inputs_must_return_a_list(tmp_path):
    reference = REFERENCE + "def get_init_inputs(**_):\n    return [0.5]\n\n\n" \
                            "def get_inputs(B, N, **_):\n    return torch.randn(B, N)\n"
    message = check_error(scale_copy(tmp_path, reference=reference))
    assert "get_inputs: shape 'small'" in message and "must return a list or tuple (got Tensor)" in message


def test_a_reference_that_fails_to_import_is_a_spec_error(tmp_path):
    reference = "import no_such_module_here\n" + REFERENCE \
        + "def get_init_inputs(**_):\n    return [0.5]\n\n\ndef get_inputs(B, N, **_):\n    return []\n"
    message = check_error(scale_copy(tmp_path, reference=reference))
    assert "reference.py: importing it failed: ModuleNotFoundError" in message
    assert "no_such_module_here" in message


PROBLEMS = [f"bundled:{name}" for name in bundled_names()] + \
    [str(p) for p in sorted((FIXTURES / "problems").iterdir()) if (p / "problem.yaml").is_file()] + \
    [str(FIXTURES / "kernelbench_relu.py")]


@pytest.mark.parametrize("where", PROBLEMS, ids=lambda w: Path(w.removeprefix("bundled:")).name)
def test_every_bundled_and_fixture_problem_passes(where):
    problem = resolve(where.removeprefix("bundled:")) if where.startswith("bundled:") else load_problem(where)
    rng = torch.random.get_rng_state()
    check_problem(problem)
    assert torch.equal(rng, torch.random.get_rng_state())  # the check leaves the caller's seed alone


def test_huge_shapes_allocate_nothing(tmp_path):
    """Terabytes of inputs: only the meta device makes this pass, and fast."""
    folder = scale_copy(tmp_path, {"shapes": [{"name": "huge", "params": {"B": 1 << 20, "N": 1 << 20}}],
                                   "smoke": []})
    problem = load_problem(folder)
    started = time.perf_counter()
    check_problem(problem)
    assert time.perf_counter() - started < 10


NO_META_KERNEL = '''
def get_inputs(B, N, **_):
    counts = torch.bincount(torch.randint(0, N, (B,)), minlength=N)  # aten::bincount has no meta kernel
    return [torch.randn(B, N) + counts]
'''

SIMULATED = '''
def get_inputs(B, N, **_):
    x = torch.randn(B, N)
    if x.device.type == "meta":
        raise NotImplementedError("aten::some_op: no kernel for the Meta backend")
    return [x]
'''


@pytest.mark.parametrize("get_inputs", [NO_META_KERNEL, SIMULATED], ids=["bincount", "simulated"])
def test_an_op_without_a_meta_kernel_is_not_a_failure(tmp_path, get_inputs):
    if get_inputs is NO_META_KERNEL:
        try:
            torch.bincount(torch.zeros(3, dtype=torch.long, device="meta"))
            pytest.skip("this torch has a meta kernel for bincount")
        except NotImplementedError:
            pass
    folder = scale_copy(tmp_path, reference=REFERENCE + "def get_init_inputs(**_):\n    return [0.5]\n\n"
                        + get_inputs)
    problem = load_problem(folder)
    check_problem(problem)
    namespace: dict = {}
    exec((folder / "reference.py").read_text(), namespace)
    assert namespace["get_inputs"](B=2, N=3)[0].shape == (2, 3)  # on a real device it works


def test_inputs_put_on_the_gpu_are_not_a_failure_on_any_machine(tmp_path):
    """Without CUDA the move cannot be checked; with it, a meta tensor cannot be copied: neither is
    the problem's mistake."""
    reference = REFERENCE + "def get_init_inputs(**_):\n    return [0.5]\n\n\n" \
                            "def get_inputs(B, N, **_):\n    return [torch.randn(B, N).cuda()]\n"
    check_problem(load_problem(scale_copy(tmp_path, reference=reference)))
