"""`rooftop prompt`: one self-contained prompt per problem for a pipeline's own model, on folders
the tests write (held-out shapes, a PROMPT.md, a kernel-to-kernel task) and on a bundled problem."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run

from rooftop.env.prompt import CUDA_EXAMPLE, TRITON_EXAMPLE, one_shot_prompt
from rooftop.problem.loader import load_problem
from rooftop.problem.registry import resolve

SPEC = """\
name: row_scale
title: Row scale
description: y = x * alpha for a float32 matrix x (B, N), one scalar alpha
version: 1
dtype: float32
regime: memory
bytes: "8 * B * N"
shapes:
  - {name: wide_rows, params: {B: 4, N: 96}, note: "a few wide rows"}
  - {name: tall_odd, params: {B: 33, N: 5}}
  - {name: secret_prime, params: {B: 7, N: 12347}, split: held_out, note: "a prime width nobody is shown"}
smoke:
  - {name: tiny, params: {B: 2, N: 8}}
policy:
  forbidden: [torch.mul, Tensor.mul]
"""

REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return x * self.alpha


def get_init_inputs(**shape):
    return [0.25]


def get_inputs(B, N, **_):
    return [torch.randn(B, N)]
'''

BRIEF = """# Scale the rows

Multiply every element of `x` by `alpha`; the shapes below are the ones you are shown.
"""

K2K_SPEC = SPEC.replace("version: 1", "version: 1\nbaseline: starter").replace(
    "policy:\n  forbidden: [torch.mul, Tensor.mul]",
    "policy:\n  forbidden: [torch.mul, Tensor.mul]\n  language: triton\n  allow_torch_ops: false")

STARTER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _one_element_each(x_ptr, y_ptr, alpha):
    i = tl.program_id(0)  # slow on purpose: one element per program
    tl.store(y_ptr + i, tl.load(x_ptr + i) * alpha)


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _one_element_each[(x.numel(),)](x, y, self.alpha)
        return y
'''


def folder(root: Path, spec: str = SPEC, brief: str | None = None, starter: str | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "problem.yaml").write_text(spec)
    (root / "reference.py").write_text(REFERENCE)
    if brief is not None:
        (root / "PROMPT.md").write_text(brief)
    if starter is not None:
        (root / "starter").mkdir()
        (root / "starter" / "solution.py").write_text(starter)
    return root


def rooftop(*args):
    return subprocess.run([sys.executable, "-m", "rooftop", *args], capture_output=True, text=True, check=False,
                          env={**os.environ, "COLUMNS": "200"}, timeout=300)


def assert_no_held_out(text: str, problem) -> None:
    for shape in problem.spec.select("held_out"):
        assert shape.name not in text, shape.name
        if shape.note:
            assert shape.note not in text, shape.note
        distinctive = [v for v in shape.params.values() if isinstance(v, int) and v > 1000]
        for value in distinctive:
            assert str(value) not in text, value


def test_a_made_prompt_holds_the_task_contract_shapes_rules_and_example(tmp_path):
    problem = load_problem(folder(tmp_path / "row_scale"))
    made = one_shot_prompt(problem)
    text = made.prompt
    assert text.startswith("# Row scale\n\ny = x * alpha for a float32 matrix x (B, N), one scalar alpha\n")
    assert REFERENCE.rstrip() in text
    for contract in ("class `ModelNew(torch.nn.Module)`", "same arguments as `Model`'s",
                     "load_state_dict(state_dict, strict=True)", "device=x.device", "same structure",
                     "atol=0.0001 and rtol=0.0001"):
        assert contract in text, contract
    assert "## Shapes (float32)" in text and "| wide_rows | 4 | 96 | a few wide rows |" in text
    assert "| tall_odd | 33 | 5 |" in text and "tiny" not in text
    assert "Not allowed: `torch.mul`, `Tensor.mul`" in text
    assert "@triton.jit" in text and "load_inline" in text and "Do not pass `build_directory`" in text
    assert "one complete Python file in a single ```python block" in text
    assert TRITON_EXAMPLE.rstrip() in text and "## The kernel to optimise" not in text
    assert_no_held_out(text, problem)
    assert [s["name"] for s in made.shapes] == ["wide_rows", "tall_odd"]
    smoke = one_shot_prompt(problem, "smoke")
    assert "| tiny | 2 | 8 |" in smoke.prompt and "wide_rows" not in smoke.prompt
    assert_no_held_out(smoke.prompt, problem)


def test_a_problems_prompt_md_is_its_task(tmp_path):
    problem = load_problem(folder(tmp_path / "row_scale", brief=BRIEF))
    text = one_shot_prompt(problem).prompt
    assert text.startswith(BRIEF) and "y = x * alpha for a float32 matrix" not in text
    assert REFERENCE.rstrip() in text and "| wide_rows | 4 | 96 |" in text  # the rest is still there
    assert_no_held_out(text, problem)
    smoke = one_shot_prompt(problem, "smoke").prompt  # PROMPT.md is written for the visible shapes
    assert smoke.startswith("# Row scale\n") and BRIEF not in smoke


def test_a_bundled_problem(tmp_path):
    problem = resolve("examples/softmax")
    text = one_shot_prompt(problem).prompt
    assert problem.reference.read_text().rstrip() in text and "class `ModelNew" in text
    assert all(f"| {s.name} |" in text for s in problem.spec.select("visible"))
    assert problem.spec.select("held_out")
    assert_no_held_out(text, problem)


def test_a_kernel_to_kernel_task_shows_its_starter(tmp_path):
    problem = load_problem(folder(tmp_path / "k2k", spec=K2K_SPEC, starter=STARTER))
    text = one_shot_prompt(problem).prompt
    assert "## The kernel to optimise" in text and STARTER.rstrip() in text
    assert "must stay in Triton" in text and "measured against this starter" in text
    assert "torch may be used only for allocation and metadata" in text
    assert "build_directory" not in text  # the CUDA route is not offered to a Triton task
    assert TRITON_EXAMPLE.rstrip() in text
    assert_no_held_out(text, problem)
    cuda = load_problem(folder(tmp_path / "k2k_cuda", spec=K2K_SPEC.replace("language: triton", "language: cuda"),
                               starter=STARTER))
    text = one_shot_prompt(cuda).prompt
    assert "must stay in CUDA C++" in text and CUDA_EXAMPLE.rstrip() in text and "@triton.jit`, launched" not in text


def test_the_examples_pass_the_static_gate_of_their_language():
    from rooftop.integrity.policy import check_language, check_source
    from rooftop.problem.spec import Policy

    for language, example in (("triton", TRITON_EXAMPLE), ("cuda", CUDA_EXAMPLE)):
        policy = Policy(language=language, allow_torch_ops=False, forbidden=["torch.mul", "Tensor.mul"])
        assert check_source(example, policy) == [], language
        assert check_language({Path("solution.py"): example}, policy) == [], language


@pytest.mark.slow
def test_the_triton_example_is_a_correct_solution_of_its_toy_problem(tmp_path):
    """The worked example solves the problem it describes (y = x * alpha), here on the CPU
    through Triton's interpreter."""
    solution = tmp_path / "example.py"
    solution.write_text(TRITON_EXAMPLE)
    verdict = run("scale", solution, shapes="smoke", timing=False)
    assert verdict.status.value == "correct", verdict.messages


# -- the command ----------------------------------------------------------------------------------
def test_cli_prints_writes_and_answers_json(tmp_path):
    problem = folder(tmp_path / "row_scale")
    printed = rooftop("prompt", str(problem))
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == one_shot_prompt(load_problem(problem)).prompt
    target = tmp_path / "prompt.md"
    written = rooftop("prompt", str(problem), "-o", str(target), "--shapes", "smoke")
    assert written.returncode == 0 and str(target) in written.stdout
    assert target.read_text() == one_shot_prompt(load_problem(problem), "smoke").prompt
    doc = json.loads(rooftop("prompt", str(problem), "--json").stdout)
    assert set(doc) == {"problem", "shapes", "prompt"} and doc["prompt"] == printed.stdout
    assert [s["name"] for s in doc["shapes"]] == ["wide_rows", "tall_odd"]


@pytest.mark.parametrize("args,needle", [
    (["no/such/problem"], "no/such/problem"),
    (["examples/softmax", "--shapes", "held_out"], "--shapes"),
])
def test_cli_mistakes_are_one_line_errors(args, needle):
    proc = rooftop("prompt", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_cli_a_problem_without_smoke_shapes(tmp_path):
    problem = folder(tmp_path / "row_scale", spec=SPEC.split("smoke:")[0] + "policy:" + SPEC.split("policy:")[1])
    proc = rooftop("prompt", str(problem), "--shapes", "smoke")
    assert proc.returncode == 2 and "has no smoke shapes" in proc.stderr
