"""Kernel-to-kernel tasks: the solution stays in the starter's language and computes with its own
kernels, and its speedup is measured against the starter's stored time."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, fixture_problem, run

from rooftop.errors import SpecError
from rooftop.integrity.policy import check_language, check_source
from rooftop.measure.baselines import time_baselines
from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline.trusted.scoring import attach_stored_baselines
from rooftop.problem.loader import load_problem
from rooftop.problem.spec import Policy
from rooftop.store.db import Store

QUICK = TimingPolicy(warmup_calls=1, warmup_seconds=0, min_samples=3, min_seconds=0, target_rse=None, max_samples=5)
TRITON = Policy(language="triton", allow_torch_ops=False)
CUDA = Policy(language="cuda", allow_torch_ops=False)

TRITON_KERNEL = """
import triton
import triton.language as tl

@triton.jit
def k(x_ptr):
    pass
"""
INLINE = '''
from torch.utils.cpp_extension import load_inline
SOURCE = """
__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }
torch::Tensor run(torch::Tensor x) { auto y = torch::empty_like(x); BODY; return y; }
"""
module = load_inline(name="k", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=SOURCE,
                     functions=["run"])
'''


def _rules(sources: dict[str, str], policy: Policy) -> list[str]:
    found = [v.rule for _, v in check_language({Path(n): t for n, t in sources.items()}, policy)]
    for name, text in sources.items():
        if name.endswith(".py"):
            found += [v.rule for v in check_source(text, policy, name)]
    return found


def test_a_k2k_problem_loads_its_starter_and_needs_one(tmp_path):
    problem = fixture_problem("scale_k2k")
    assert problem.spec.baseline == "starter" and problem.spec.policy.language == "triton"
    assert problem.starter == FIXTURES / "problems" / "scale_k2k" / "starter" / "solution.py"
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("problem.yaml", "reference.py"):
        (bare / name).write_text((FIXTURES / "problems" / "scale_k2k" / name).read_text())
    with pytest.raises(SpecError, match="starter/solution.py"):
        load_problem(bare)


def test_a_triton_task_takes_triton_kernels_only():
    assert _rules({"solution.py": TRITON_KERNEL}, TRITON) == []
    assert _rules({"solution.py": "import torch\n"}, TRITON) == ["language"]  # no kernel at all
    assert "language" in _rules({"solution.py": TRITON_KERNEL + INLINE.replace("BODY", "")}, TRITON)
    assert "language" in _rules({"solution.py": TRITON_KERNEL, "kernels/k.cu": "__global__ void k() {}"}, TRITON)
    ctypes = TRITON_KERNEL + "import ctypes\nlib = ctypes.CDLL('libk.so')\n"
    assert "language" in _rules({"solution.py": ctypes}, TRITON)


def test_a_cuda_task_takes_cuda_kernels_and_no_library_compute():
    assert _rules({"solution.py": INLINE.replace("BODY", "k<<<1, 32>>>(x.data_ptr<float>(), y.data_ptr<float>(), "
                                                 "x.numel())")}, CUDA) == []
    assert _rules({"solution.py": "import torch\n"}, CUDA) == ["language"]
    assert "language" in _rules({"solution.py": TRITON_KERNEL + INLINE.replace("BODY", "")}, CUDA)
    for body in ("y = at::matmul(x, x)", "y = torch::softmax(x, 0)", "cublasSgemm(handle)", "y = x.sum(0)",
                 "cub::DeviceReduce::Sum(nullptr, n, x, y, 1)"):
        assert _rules({"solution.py": INLINE.replace("BODY", body)}, CUDA) == ["library"], body
    # a standalone .cu file is read the same way
    assert _rules({"solution.py": "import ctypes\nlib = ctypes.CDLL('k.so')\n",
                   "k.cu": "void f() { cublasGemmEx(h); }"}, CUDA) == []  # .cu files: checked by the static gate


def test_the_static_gate_names_the_language_rule(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                     "    def __init__(self, alpha):\n        super().__init__()\n        self.alpha = alpha\n\n"
                     "    def forward(self, x):\n        return torch.empty_like(x)\n")
    verdict = run("scale_k2k", plain, shapes="smoke")
    assert verdict.status.value == "rejected"
    assert any("[language]" in m and "Triton" in m for m in verdict.messages), verdict.messages
    native = tmp_path / "native"
    native.mkdir()
    (native / "solution.py").write_text("import ctypes\nimport os\nlib = ctypes.CDLL(os.path.join(os.environ["
                                        "'ROOFTOP_BUILD_DIR'], 'k.so'))\n")
    (native / "k.cu").write_text('extern "C" void k(float* y) { cublasSgemm(0); }\n')
    cuda_task = fixture_problem("scale_k2k").spec.policy.model_copy(update={"language": "cuda"})
    from rooftop.pipeline.trusted.static import check_solution_files
    from rooftop.solution.loader import load_solution
    from rooftop.verdict import GateFailed

    with pytest.raises(GateFailed) as failed:
        check_solution_files(load_solution(native), cuda_task)
    assert "[library]" in " ".join(failed.value.messages)


@pytest.mark.quiet
@pytest.mark.slow
def test_the_speedup_and_reward_are_over_the_stored_starter(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the starter is timed in this process, on the CPU
    problem = fixture_problem("scale_k2k")
    starter = run("scale_k2k", problem.starter, shapes="smoke")
    assert starter.status.value == "correct" and starter.baseline == "starter"
    store = Store(tmp_path / "r.db")
    records = time_baselines(problem, problem.spec.select("smoke"), "cpu", kinds=("eager", "starter"), policy=QUICK)
    assert {r.kind for r in records if r.stats is not None} == {"eager", "starter"}, [r.error for r in records]
    store.baselines.save(records)
    verdict = run("scale_k2k", "triton_scale.py", shapes="smoke")
    assert verdict.status.value == "correct"
    before, bare = verdict.reward, verdict.model_copy(deep=True)  # the same verdict, before any baseline
    assert attach_stored_baselines(verdict, store) == 2
    [shape] = verdict.shapes
    assert shape.speedups["starter"] == pytest.approx(shape.baselines["starter"] / shape.candidate.median)
    if "contention" not in shape.flags:  # a shape timed beside a busy neighbour is left out of the means
        assert verdict.reward == pytest.approx(verdict.summary.geomean_speedups["starter"] - 1.0)
        assert verdict.reward != before
    # without a stored starter the verdict says why its speedup is unknown
    attach_stored_baselines(bare, Store(tmp_path / "empty.db"))
    assert any("no starter baseline" in m for m in bare.messages)
