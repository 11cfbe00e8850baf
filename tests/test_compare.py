from pathlib import Path

import pytest
import torch

from rooftop.check.compare import compare_outputs, storage_overlaps
from rooftop.problem import dtypes
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
    ref = torch.softmax(torch.randn(4, 100_000, generator=torch.Generator().manual_seed(3)), dim=-1)
    assert float(ref.max()) < 1e-3  # (an unseeded draw's largest value passed 1e-3 now and then)
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


def _screen_cases() -> list[tuple[ProblemSpec, torch.Tensor, torch.Tensor]]:
    """Outputs with elements right at, just inside and just outside their bounds, NaNs, Infs,
    tiny and huge values, in each screened dtype."""
    gen = torch.Generator().manual_seed(7)
    cases = []
    for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16"), (torch.float16, "float16"),
                        (torch.float64, "float64")):
        for trial in range(64):
            magnitude = 10.0 ** ((trial % 7 - 3) if trial % 4 else (-25, 25, -12, 12)[trial % 16 // 4])
            ref = (torch.randn(257, generator=gen, dtype=torch.float64) * magnitude).to(dtype)
            problem = spec(dtype=name)
            tol = problem.tolerance_for(dtypes.from_torch(dtype), None)
            bound = tol.atol + tol.rtol * ref.double().abs()
            # offsets at a chosen fraction of each element's bound: far inside, at the margin, outside
            scale = torch.tensor([0.0, 0.5, 1 - 1e-6, 1.0, 1 + 1e-6, 2.0][trial % 6], dtype=torch.float64)
            sign = torch.where(torch.rand(257, generator=gen) < 0.5, -1.0, 1.0).double()
            got = (ref.double() + sign * bound * scale * torch.rand(257, generator=gen).double()).to(dtype)
            if trial % 5 == 4:
                got[trial % 257] = float("nan")
            if trial % 7 == 5:
                ref[3], got[3] = float("inf"), float("inf")
            cases.append((problem, ref, got))
    return cases


def _decides_as_the_float64_pass(monkeypatch, cases) -> None:
    import rooftop.check.compare as compare

    for problem, ref, got in cases:
        screened_figures: dict = {}
        screened = compare_outputs(problem, ref, got, [], screened_figures)
        with monkeypatch.context() as m:
            m.setattr(compare, "_screen", lambda *a: None)
            exact_figures: dict = {}
            exact = compare_outputs(problem, ref, got, [], exact_figures)
        assert [x.message for x in screened] == [x.message for x in exact]
        for key in ("max_abs_error", "norm_rel_error"):
            a, b = screened_figures.get(key), exact_figures.get(key)
            assert (a is None) == (b is None)
            assert a is None or a == b or (a != a and b != b) or abs(a - b) <= 1e-6 * abs(b) + 1e-30


@pytest.mark.parametrize("path", ["numpy", "torch"])
def test_screening_pass_decides_exactly_as_the_float64_pass(monkeypatch, path):
    """The screen may only settle comparisons that pass with room to spare: over the cases every
    verdict and message equals the float64 pass's, and its figures agree, whether a small host
    output is screened through numpy (probes, CPU outputs) or through the torch passes."""
    import rooftop.check.compare as compare

    if path == "torch":
        monkeypatch.setattr(compare, "SMALL", 0)
    _decides_as_the_float64_pass(monkeypatch, _screen_cases())


def test_the_numpy_screen_reads_the_torch_passes_figures():
    """The two host screens give the same five figures (the numpy one in float64 throughout)."""
    import rooftop.check.compare as compare

    for problem, ref, got in _screen_cases():
        tol = problem.tolerance_for(dtypes.from_torch(ref.dtype), None)
        small = compare._screen_small(ref, got, tol)
        passes = compare._screen_passes(ref.double(), got.double(), tol)
        assert small[4] == passes[4]  # elements near their bound
        for a, b in zip(small[:4], passes[:4]):
            assert (a != a and b != b) or a == b or abs(a - b) <= 1e-12 * abs(b), (a, b)


def test_screening_pass_settles_the_common_case():
    """An output inside its tolerance is settled by the screen alone (no float64 pass)."""
    import rooftop.check.compare as compare

    ref = torch.randn(10_000)
    assert compare._screen(ref, ref + 1e-6, spec().tolerance_for(compare.dtypes.from_torch(ref.dtype), None))


def test_fingerprint_tells_apart_any_changed_word_and_repeats_for_the_same_bits():
    from rooftop.check.compare import fingerprint

    for value in (torch.randn(1000), torch.randint(0, 255, (1001,), dtype=torch.uint8), torch.randn(3, 5).half()):
        same = fingerprint(value.clone())
        assert fingerprint(value) == same
        for index in (0, value.numel() // 2, value.numel() - 1):
            changed = value.clone().reshape(-1)
            changed.view(torch.uint8)[index * value.element_size()] ^= 1  # one bit of one element
            assert fingerprint(changed.reshape(value.shape)) != same, (value.dtype, index)
    swapped = torch.arange(8, dtype=torch.float32)
    assert fingerprint(swapped) != fingerprint(swapped.flip(0))  # same words, other order
    assert fingerprint(torch.zeros(4)) != fingerprint(-torch.zeros(4))


def test_fused_kernels_under_triton_s_interpreter():
    """The fused kernels' own tests (tests/interpreted_fused.py) run in a process that imports
    Triton with its interpreter on: an interpreted kernel cannot call Triton's library functions
    when Triton was first imported without it, as other tests here do."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(Path(__file__).parent / "interpreted_fused.py")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]


def test_fused_kernels_step_aside_where_they_cannot_run():
    """CPU tensors never take the fused path, and a device the kernels cannot be launched on (here
    the CPU, without the interpreter) leaves the comparison to the torch passes, not to an error."""
    from rooftop.check import fused

    assert not fused.wanted(torch.zeros(fused.MIN_ELEMENTS))
    assert fused.warm.__wrapped__(torch.device("cpu")) is False


@pytest.mark.gpu
def test_fused_kernels_on_the_gpu_agree_with_the_torch_passes(monkeypatch):
    """On a GPU, for outputs large enough to take the fused path: the same verdicts, messages and
    figures as the torch passes, and the same fingerprints bit for bit."""
    import rooftop.check.compare as compare
    from rooftop.check import fused

    gen = torch.Generator(device="cuda").manual_seed(11)
    n = fused.MIN_ELEMENTS + 12345
    for dtype, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
        ref = torch.randn(n, device="cuda", generator=gen).to(dtype)
        problem = spec(dtype=name)
        near = ref.clone()
        near[n - 3] = ref[n - 3].double() * 1.5 + 1  # one element over its bound, in the ragged last tile
        nan = ref.clone()
        nan[17] = float("nan")
        for got in (ref.clone(), (ref.double() * (1 + 1e-4)).to(dtype), near, nan):
            assert fused.wanted(ref, got)
            fast_figures: dict = {}
            fast = compare_outputs(problem, ref, got, [], fast_figures)
            with monkeypatch.context() as m:
                m.setattr(fused, "wanted", lambda *tensors: False)
                slow_figures: dict = {}
                slow = compare_outputs(problem, ref, got, [], slow_figures)
                slow_print = compare.fingerprint(got)
            assert [x.message for x in fast] == [x.message for x in slow]
            for key, value in slow_figures.items():
                fast_value = fast_figures[key]
                assert (fast_value != fast_value and value != value) or \
                    abs(fast_value - value) <= 1e-5 * abs(value) + 1e-30, (key, fast_value, value)
            assert compare.fingerprint(got) == slow_print


def test_probes_widen_only_the_normwise_bound():
    from rooftop.check.probe import PROBE_NORM_SLACK, Probe, check_probes

    problem = spec(dtype="bfloat16")
    ref = torch.full((1000,), 0.001, dtype=torch.bfloat16)
    ref[7] = 4.0  # one large value dominates a sample's norm
    positions = [7, 1, 2, 3]

    def probe(values):
        return [Probe(type="Tensor", dtype="bfloat16", shape=[1000], device="cpu", positions=positions,
                      values=values)]

    # the large value 1.2 % off, the small ones exact: elementwise within 1e-2 + 1e-2 * 4, normwise
    # over the four samples 1.2e-2, above the whole output's 1e-2 but within its slack
    honest = [4.0 * 1.012, 0.001, 0.001, 0.001]
    assert check_probes(problem, ref, probe(honest)) == []
    assert 0.012 < 1e-2 * PROBE_NORM_SLACK
    assert check_probes(problem, ref, probe([0.0, 0.0, 0.0, 0.0])), "zeros while timed"
    small = torch.full((1000,), 0.001, dtype=torch.bfloat16)  # small values pass atol elementwise ...
    assert check_probes(problem, small, probe([0.0] * 4)), "... but not the normwise bound, widened or not"
