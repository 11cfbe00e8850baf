import torch

from rooftop.check.compare import compare_outputs, storage_overlaps
from rooftop.problem.spec import ProblemSpec

BASE = {"name": "p", "title": "t", "description": "d", "version": 1, "dtype": "float32", "regime": "memory",
        "shapes": [{"name": "a"}]}


def spec(**changes) -> ProblemSpec:
    return ProblemSpec.model_validate({**BASE, **changes})


def test_equal_outputs_pass():
    x = torch.randn(100)
    assert compare_outputs(spec(), x, x.clone(), []) == []


def test_zeros_fail_for_small_outputs_thanks_to_the_normwise_bound():
    """Elementwise allclose alone passes zeros when every |ref| < atol (softmax over long rows)."""
    ref = torch.softmax(torch.randn(4, 100_000), dim=-1)
    assert float(ref.max()) < 1e-3
    zeros = torch.zeros_like(ref)
    assert torch.allclose(zeros, ref, atol=1e-2, rtol=1e-2)  # what a plain allclose would accept
    [mismatch] = compare_outputs(spec(dtype="float16", tolerance={"float16": 1e-2}), ref, zeros, [])
    assert "normwise" in mismatch.message and mismatch.norm_rel_error == 1.0


def test_tolerance_bound_and_numbers():
    ref = torch.ones(10)
    [m] = compare_outputs(spec(), ref, ref + 1e-3, [])
    assert "exceed atol=0.0001" in m.message and abs(m.max_abs_error - 1e-3) < 1e-6
    assert compare_outputs(spec(tolerance={"fp32": 1e-2}), ref, ref + 1e-3, []) == []


def test_worst_element_is_reported_at_its_index():
    ref = torch.zeros(3, 4)
    got = ref.clone()
    got[2, 1] = 0.5
    [m] = compare_outputs(spec(), ref, got, [])
    assert "worst at (2, 1): got 0.5, expected 0" in m.message and "1 of 12" in m.message


def test_nan_where_reference_is_finite_fails():
    ref = torch.ones(4)
    got = ref.clone()
    got[2] = float("nan")
    [m] = compare_outputs(spec(), ref, got, [])
    assert "NaN/Inf" in m.message and "(2,)" in m.message


def test_reference_nans_must_be_reproduced():
    ref = torch.tensor([1.0, float("inf"), float("nan")])
    assert compare_outputs(spec(), ref, ref.clone(), []) == []
    assert compare_outputs(spec(), ref, torch.tensor([1.0, 5.0, float("nan")]), [])


def test_contract_shape_dtype_type_and_count():
    ref = torch.ones(2, 3)
    assert "shape" in compare_outputs(spec(), ref, torch.ones(3, 2), [])[0].message
    assert "dtype" in compare_outputs(spec(), ref, torch.ones(2, 3, dtype=torch.float64), [])[0].message
    assert "torch.Tensor" in compare_outputs(spec(), ref, ref.numpy(), [])[0].message
    assert "2 output" in compare_outputs(spec(), (ref, ref), ref, [])[0].message


class Sub(torch.Tensor):
    pass


def test_tensor_subclass_is_not_a_tensor_output():
    ref = torch.ones(3)
    assert "torch.Tensor" in compare_outputs(spec(), ref, ref.clone().as_subclass(Sub), [])[0].message


def test_integer_outputs_compare_exactly():
    ref = torch.arange(5)
    assert compare_outputs(spec(), ref, ref.clone(), []) == []
    assert "differ" in compare_outputs(spec(), ref, ref + 1, [])[0].message


def test_indices_of_ties_pass_by_gathering():
    s = spec(outputs=[{"name": "values"},
                      {"name": "indices", "compare": "gather", "gather": {"input": 0, "dim": -1, "values_output": 0}}])
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0]])
    ref = (torch.tensor([[3.0]]), torch.tensor([[1]]))
    assert compare_outputs(s, ref, (torch.tensor([[3.0]]), torch.tensor([[2]])), [x]) == []  # the other tie
    [m] = compare_outputs(s, ref, (torch.tensor([[3.0]]), torch.tensor([[0]])), [x])
    assert m.output.startswith("indices")
    # a tie is not a licence to name the same element twice
    ref2 = (torch.tensor([[3.0, 3.0]]), torch.tensor([[1, 2]]))
    assert compare_outputs(s, ref2, (torch.tensor([[3.0, 3.0]]), torch.tensor([[2, 1]])), [x]) == []
    [m] = compare_outputs(s, ref2, (torch.tensor([[3.0, 3.0]]), torch.tensor([[1, 1]])), [x])
    assert "repeat" in m.message


def test_storage_overlap():
    x = torch.zeros(10)
    assert storage_overlaps(x, x[2:5]) and not storage_overlaps(x, x.clone())
