import pytest

from rooftop.integrity.policy import check_source
from rooftop.problem.spec import Policy

SOFTMAX = Policy(forbidden=["torch.softmax", "torch.nn.functional.softmax", "Tensor.softmax"])
MATMUL = Policy(forbidden=["torch.matmul", "torch.mm"])


@pytest.mark.parametrize("source", [
    "import torch\ny = torch.softmax(x, -1)",
    "import torch.nn.functional as F\ny = F.softmax(x, -1)",
    "from torch.nn import functional as fn\ny = fn.softmax(x, dim=1)",
    "from torch import softmax as s\ny = s(x, 1)",
    "y = x.softmax(-1)",
    "import torch\nf = torch.softmax\ny = f(x)",
    "import torch\ny = torch.ops.aten._softmax(x, -1, False)",
])
def test_forbidden_softmax_in_every_spelling(source):
    violations = check_source(source, SOFTMAX)
    assert violations and violations[0].rule == "forbidden-op"


def test_matmul_operator_is_forbidden_with_matmul():
    [v] = check_source("y = a @ b", MATMUL)
    assert "@" in v.message and v.line == 1


def test_allowed_code_passes():
    source = ("import torch\nimport triton\ny = torch.empty_like(x)\n"
              "z = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)\n")
    assert check_source(source, SOFTMAX) == []
    assert check_source("self.softmax = None\n", SOFTMAX) == []  # an attribute name is not a call


def test_torch_compute_disallowed_when_problem_requires_kernels():
    policy = Policy(allow_torch_ops=False)
    source = "import torch\ny = torch.empty(3, device='cuda')\nz = torch.exp(y)\n"
    [v] = check_source(source, policy)
    assert v.rule == "torch-compute" and v.line == 3 and "torch.exp" in v.message


def test_syntax_error_raises():
    with pytest.raises(SyntaxError):
        check_source("def f(:\n", SOFTMAX)


def rules(source: str, policy: Policy = SOFTMAX) -> set[str]:
    return {v.rule for v in check_source(source, policy)}


@pytest.mark.parametrize("source,rule", [
    ("import subprocess", "import"),
    ("from socket import create_connection", "import"),
    ("import threading\nthreading.Thread(target=f).start()", "thread"),
    ("import torch\ns = torch.cuda.Stream()", "stream"),
    ("import torch\nwith torch.cuda.stream(s):\n    pass", "stream"),
    ("import time\ntime.perf_counter = lambda: 0.0", "patch"),
    ("import torch\ntorch.cuda.Event.elapsed_time = lambda a, b: 1e-6", "patch"),
    ("import torch\nsetattr(torch, 'allclose', lambda *a, **k: True)", "patch"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True", "patch"),
    ("import torch\nclass Lazy(torch.Tensor):\n    pass", "tensor-subclass"),
    ("import torch\ny = torch.Tensor._make_subclass(C, x)", "tensor-subclass"),
    ("class M:\n    def __torch_function__(self, *a):\n        pass", "tensor-subclass"),
    ("import torch\ntry:\n    y = kernel(x)\nexcept Exception:\n    y = torch.exp(x) / torch.exp(x).sum()", "fallback"),
    ("try:\n    y = kernel(x)\nexcept RuntimeError:\n    y = x.softmax(-1)", "fallback"),
    ("exec('import socket')", "dynamic-code"),
    ("m = __import__('socket')", "dynamic-code"),
    ("import torch\nop = getattr(torch, 'to' + 'pk')", "dynamic-code"),
    ("import torch\nop = vars(torch)['topk']", "dynamic-code"),
    ('SRC = "void f() { cudaStream_t s; cudaStreamCreate(&s); }"', "stream"),
    ('SRC = "void f() { std::thread t(work); t.join(); }"', "thread"),
])
def test_each_rule_names_what_it_caught(source, rule):
    assert rule in rules(source)


def test_honest_code_passes_every_rule():
    source = '''
import os, ctypes, math
import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

SRC = "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }"

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(3))
        self.graph = None

    def forward(self, x):
        try:
            n = int(os.environ.get("BLOCK", "128"))
        except ValueError:
            n = 128
        y = torch.empty_like(x)
        return y
'''
    assert check_source(source, SOFTMAX) == []


def test_problem_can_extend_the_import_allow_list():
    assert "import" in rules("import einops")
    assert "import" not in rules("import einops", Policy(extra_imports=["einops"]))


def test_native_files_are_checked_too():
    from rooftop.integrity.native_policy import check_native
    [(rule, line, _)] = check_native("int main() {\n  // cudaStreamCreate(&s) in a comment is fine\n"
                                     "  cudaStreamCreateWithFlags(&s, 1);\n}")
    assert rule == "stream" and line == 3


def test_a_forbidden_private_op_is_caught_by_its_own_name():
    from rooftop.problem.spec import Policy

    policy = Policy(forbidden=["torch._scaled_mm", "torch._softmax"])
    for source in ("import torch\ny = torch._scaled_mm(a, b)", "import torch as t\ny = t._softmax(x, -1, False)",
                   "import torch\ny = torch.ops.aten._scaled_mm(a, b)", "y = x._softmax(-1, False)"):
        assert "forbidden-op" in [v.rule for v in check_source(source, policy, "s.py")], source
