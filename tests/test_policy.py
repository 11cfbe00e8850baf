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
    source = "import torch\nimport triton\ny = torch.empty_like(x)\nz = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)\n"
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
