"""What an episode shows its agent: the task, the shapes it may see, and the tools.

Held-out shapes never appear here: not their names, parameters or notes. A problem's own
PROMPT.md is written to that rule (tests/test_env.py checks every bundled one); a problem without
one gets a prompt made from its spec, its reference code and its visible shapes.
"""

from __future__ import annotations

from pydantic import BaseModel

from rooftop.build.backends import ordered
from rooftop.problem.spec import Problem, ProblemSpec, Shape

TOOLS = """\
## Tools

- `run_kernel(code)`: evaluate `code`, a complete Python file defining `ModelNew`, on the shapes
  above. You get its status, error messages, and per shape its correctness, time, speedup over
  the reference and fraction of the hardware roof.
- `finish()`: end the episode. Your best kernel so far is then graded on more shapes than you
  have seen, so write it for any shape, not only these.
"""


class TaskCard(BaseModel):
    """A task as an agent or a trainer may list it: nothing held out."""

    name: str
    title: str
    description: str
    dtype: str
    shapes: list[dict[str, object]]


def task_card(problem: Problem, group: str = "visible") -> TaskCard:
    spec = problem.spec
    return TaskCard(name=problem.name, title=spec.title, description=spec.description,
                    dtype=spec.dtype, shapes=[{"name": s.name, "params": dict(s.params), "note": s.note}
                                              for s in problem.spec.select(group)])


def task_prompt(problem: Problem, group: str = "visible", max_turns: int | None = None) -> str:
    body = task_body(problem, group)
    budget = f"\nYou have {max_turns} tool calls.\n" if max_turns else ""
    return f"{body}\n{TOOLS}{budget}"


def task_body(problem: Problem, group: str = "visible") -> str:
    """The task itself, tools aside: the problem's PROMPT.md for its visible shapes, else one made
    from its spec, reference and the group's shapes."""
    if problem.prompt is not None and group == "visible":
        return problem.prompt.read_text().rstrip() + "\n"
    return _made_prompt(problem, group)


def _made_prompt(problem: Problem, group: str) -> str:
    spec = problem.spec
    forbidden = _forbidden(spec)
    return "\n".join([
        f"# {spec.title}", "",
        spec.description, "",
        "Write a faster `ModelNew` for the reference below: same constructor arguments as `Model`, same "
        "outputs from `forward`, on the evaluation device. Weights are copied from the reference.",
        *([f"Not allowed: {forbidden}."] if forbidden else []), "",
        "## Reference", "", "```python", problem.reference.read_text().rstrip(), "```", "",
        f"## Shapes ({spec.dtype})", "", *_shape_rows(spec.select(group)), "",
    ])


def _shape_rows(shapes: list[Shape], notes: bool = False) -> list[str]:
    """A markdown table of the shapes' params (and notes, when asked)."""
    names = sorted({k for s in shapes for k in s.params})
    extra = notes and any(s.note for s in shapes)
    rows = ["| name | " + " | ".join(names) + (" | note" if extra else "") + " |",
            "| --- |" + " --- |" * (len(names) + extra)]
    rows += [f"| {s.name} | " + " | ".join(str(s.params.get(k, "")) for k in names)
             + (f" | {s.note}" if extra else "") + " |" for s in shapes]
    return rows


def _forbidden(spec: ProblemSpec) -> str:
    return ", ".join(f"`{f}`" for f in spec.policy.forbidden)


# -- one-shot prompts: the whole task in one message, for a model that answers with one file -------
LANGUAGES = {"triton": "Triton", "cuda": "CUDA C++"}
TORCH_ALLOCATION = "`torch.empty`, `torch.empty_like`, `torch.zeros`, `torch.full`, `torch.arange`"

TRITON_EXAMPLE = '''\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n_elements, alpha, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_bounds = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=in_bounds)
    tl.store(y_ptr + offsets, x * alpha, mask=in_bounds)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)  # on x's device, with x's dtype
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        scale_kernel[grid](x, y, n, self.alpha, BLOCK_SIZE=1024)
        return y
'''

CUDA_EXAMPLE = '''\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * alpha;
}

torch::Tensor scale(torch::Tensor x, double alpha) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32,
                "x must be a contiguous float32 tensor on the GPU");
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    if (n > 0) {
        scale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<float>(), y.data_ptr<float>(), (float)alpha, n);
    }
    return y;
}
"""

_ext = load_inline(name="toy_scale", cpp_sources="torch::Tensor scale(torch::Tensor x, double alpha);",
                   cuda_sources=CUDA_SOURCE, functions=["scale"])


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale(x.contiguous(), self.alpha)
'''


class OneShot(BaseModel):
    """A prompt for one reply, and the shapes it shows."""

    problem: str
    shapes: list[dict[str, object]]
    prompt: str


def one_shot_prompt(problem: Problem, group: str = "visible") -> OneShot:
    """Everything a model needs to answer with one solution file, in one message: the task (the
    problem's PROMPT.md for its visible shapes, else its title and description), the reference,
    the starter of a kernel-to-kernel task, the contract, the group's shapes, the rules and a worked
    example. Held-out shapes never appear (`group` is visible or smoke)."""
    if group not in ("visible", "smoke"):
        raise ValueError(f"group must be visible or smoke, not {group}")
    spec = problem.spec
    shapes = spec.select(group)
    if problem.prompt is not None and group == "visible":
        task = problem.prompt.read_text().rstrip()
    else:
        task = f"# {spec.title}\n\n{spec.description.strip()}"
    reference = problem.reference.read_text().rstrip()
    per_shape = "(they take no arguments: the sizes are the file's constants)" if spec.kernelbench else \
        "for one shape's parameters"
    shown = "The smoke shapes: small ones, for checking on a CPU (where Triton runs in its interpreter)" \
        if group == "smoke" else "The shapes you are shown"
    parts = [task, "",
             *([] if reference in task else ["## Reference", "", "The reference implementation: `get_init_inputs` "
                "gives `Model`'s constructor arguments and `get_inputs` the arguments of `forward`, "
                f"{per_shape}.", "", "```python", reference, "```", ""]),
             *_starter_part(problem),
             f"## Shapes ({spec.dtype})", "",
             f"{shown}, by their parameters:", "",
             *_shape_rows(shapes, notes=True), "",
             "The solution may also be checked on shapes not listed here: make it correct for any sizes the "
             "reference accepts, not only these.", "",
             *_contract(spec), *_rules(spec), *_routes(spec), *_answer(spec)]
    return OneShot(problem=problem.name, prompt="\n".join(parts).rstrip() + "\n",
                   shapes=[{"name": s.name, "params": dict(s.params), "note": s.note} for s in shapes])


def _starter_part(problem: Problem) -> list[str]:
    if problem.starter is None or problem.spec.baseline != "starter":
        return []
    language = LANGUAGES.get(problem.spec.policy.language or "", "the starter's language")
    return ["## The kernel to optimise", "",
            f"This is a kernel-to-kernel task: the starter below (`starter/solution.py`) is a correct but slow "
            f"{language} solution. Write a faster one. Your solution must stay in {language}, and its speedup is "
            "measured against this starter, not against the reference.", "",
            "```python", problem.starter.read_text().rstrip(), "```", ""]


def _contract(spec: ProblemSpec) -> list[str]:
    tolerance = spec.tolerance_for(spec.dtype)
    judged = ("outputs are compared exactly" if tolerance is None else
              f"each output must match the reference's elementwise within atol={tolerance.atol:g} and "
              f"rtol={tolerance.rtol:g}, and its normwise relative error must be at most {tolerance.norm_bound:g}")
    special = [f"  Output `{o.name}` is compared by {o.compare.value}"
               + (f" (the input {o.gather.input} gathered at these indices along dim {o.gather.dim} must match "
                  f"output {o.gather.values_output}, so ties in any order pass)." if o.gather else ".")
               for o in spec.outputs if o.compare.value != "close"]
    return ["## What to write", "",
            "- A class `ModelNew(torch.nn.Module)` whose constructor takes the same arguments as `Model`'s.",
            "- The reference's weights are copied into it with `load_state_dict(state_dict, strict=True)`: keep "
            "its parameters and buffers under the same names and shapes (a model without weights needs none).",
            "- `forward` takes the same arguments as `Model.forward`. They arrive on the evaluation device (a "
            "GPU, or the CPU for smoke shapes); allocate outputs there (`device=x.device`, or "
            "`torch.empty_like(x)`).",
            "- Return the same structure as the reference (one tensor, or a tuple in the same order), with the "
            "same shapes and dtypes.",
            f"- Correctness is judged on every shape and several random inputs: {judged}.",
            *special, ""]


def _rules(spec: ProblemSpec) -> list[str]:
    from rooftop.integrity.policy import ALLOWED_IMPORTS

    policy = spec.policy
    imports = sorted((ALLOWED_IMPORTS | set(policy.extra_imports)) - {"__future__"})
    rules = ["## Rules", ""]
    if policy.forbidden:
        rules.append(f"- Not allowed: {_forbidden(spec)}, under any alias (`F.x` is `torch.nn.functional.x`; "
                     "`Tensor.x` means the method `.x(...)` on any tensor).")
    if not policy.allow_torch_ops:
        rules.append(f"- torch may be used only for allocation and metadata ({TORCH_ALLOCATION}, `.shape`, "
                     "`.stride()`, `.contiguous()`, dtypes and devices): every computation happens in your own "
                     "kernels, and native code may not call library compute (cuBLAS, cuDNN, CUTLASS, ATen ops).")
    if policy.language:
        other = "CUDA C++ (load_inline, ctypes, .cu files)" if policy.language == "triton" else "Triton"
        rules.append(f"- The solution stays in {LANGUAGES[policy.language]}: it must define its own "
                     f"{LANGUAGES[policy.language]} kernels and may not use {other}.")
    rules += [f"- Imports: {', '.join(imports)} only.",
              "- All work runs inside `forward`, on the caller's current CUDA stream: no extra streams, threads or "
              "processes, no `exec`/`eval`, no falling back to torch when a kernel fails, no caching results "
              "between calls.", ""]
    return rules


def _routes(spec: ProblemSpec) -> list[str]:
    """The language backends that offer a route, those of the task's language only when it has one."""
    language = spec.policy.language
    routes = [backend.prompt_route for backend in ordered()
              if backend.prompt_route and language in (None, backend.family)]
    return ["## Kernels", "", "Accepted ways to write the kernels:", "", *routes, ""]


def _answer(spec: ProblemSpec) -> list[str]:
    cuda = spec.policy.language == "cuda"
    example = CUDA_EXAMPLE if cuda else TRITON_EXAMPLE
    return ["## Answer format", "",
            "Answer with one complete Python file in a single ```python block: its imports, its kernels and "
            "`class ModelNew`. Only that file is read (if there are several blocks, the last one).", "",
            "## Example", "",
            "For a different, toy problem (the reference `Model(alpha)` returns `x * alpha` for a float32 tensor "
            f"`x`), a complete answer with a {'CUDA C++' if cuda else 'Triton'} kernel looks like this:", "",
            "```python", example.rstrip(), "```", ""]
