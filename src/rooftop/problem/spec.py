"""The problem specification: what `problem.yaml` may say, validated by pydantic.

Every model forbids unknown keys, so a typo in a problem file is an error, not a silently ignored
field. `ProblemSpec` crosses process boundaries (it is sent to the evaluation child as JSON).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from rooftop.problem import dtypes, expr

ParamValue = int | float | bool | str


def _parsed(formula: str) -> str:
    expr.parse(formula)
    return formula


Formula = Annotated[str, AfterValidator(_parsed)]  # a count (flops, bytes) over a shape's params, parsed to check it


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Split(str, Enum):
    """Who may see a shape: agents see `visible`; `held_out` tests generalization; `smoke` is for CPUs."""

    visible = "visible"
    held_out = "held_out"
    smoke = "smoke"


class Shape(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")]
    params: dict[str, ParamValue] = {}
    split: Split = Split.visible
    note: str = ""
    # this shape's own counts where the problem's do not apply (the smoke shape derived from a
    # KernelBench file's constants, whose problem-wide counts are its full size's)
    flops: Formula | None = None
    bytes: Formula | None = None


class Tolerance(Strict):
    """Elementwise `|c - r| <= atol + rtol*|r|` and normwise `||c - r|| / ||r|| <= norm`."""

    atol: Annotated[float, Field(ge=0)]
    rtol: Annotated[float, Field(ge=0)]
    norm: Annotated[float, Field(ge=0)] | None = None

    @property
    def norm_bound(self) -> float:
        return self.rtol if self.norm is None else self.norm

    @classmethod
    def default_for(cls, dtype: str) -> Tolerance | None:
        """Default for a canonical dtype; None for integer types (compared exactly)."""
        if dtypes.is_integer(dtype):
            return None
        atol, rtol = dtypes.DEFAULT_TOLERANCE[dtypes.canonical(dtype)]
        return cls(atol=atol, rtol=rtol)


class Compare(str, Enum):
    close = "close"  # tolerance by the problem's dtype (exact for integer outputs)
    exact = "exact"
    gather = "gather"  # indices: gather the named input at them and compare with the reference values
    ignore = "ignore"


class GatherRule(Strict):
    input: Annotated[int, Field(ge=0)] = 0
    dim: int = -1
    values_output: Annotated[int, Field(ge=0)] = 0


class OutputSpec(Strict):
    name: str
    compare: Compare = Compare.close
    gather: GatherRule | None = None
    tolerance: Tolerance | None = None

    @model_validator(mode="after")
    def _gather_needs_rule(self) -> OutputSpec:
        if self.compare is Compare.gather and self.gather is None:
            raise ValueError("compare: gather needs a 'gather' block (input, dim, values_output)")
        return self


class Policy(Strict):
    """What a candidate may call. Deeper rules (streams, threads, fallbacks) belong to integrity."""

    forbidden: list[str] = []
    allow_torch_ops: bool = True
    extra_imports: list[str] = []
    min_kernel_share: Annotated[float, Field(ge=0.0, le=1.0)] | None = None  # GPU time in the solution's own kernels
    # kernel-to-kernel tasks: the solution stays in the starter's language (its kernels are Triton
    # `@triton.jit` functions, or CUDA C++ built by load_inline / .cu files), and calls no library compute
    language: Literal["triton", "cuda"] | None = None


class ProblemSpec(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")]
    title: str
    description: str
    version: Annotated[int, Field(ge=1)]
    dtype: str
    regime: Literal["compute", "memory"]
    flops: Formula | None = None
    bytes: Formula | None = None
    peak_dtype: str | None = None  # datasheet column for the compute roof; defaults to dtype
    tolerance: dict[str, Tolerance] = {}
    shapes: Annotated[list[Shape], Field(min_length=1)]
    smoke: list[Shape] = []
    outputs: list[OutputSpec] = []
    policy: Policy = Policy()
    tags: list[str] = []
    # baselines this problem does not time, each with the reason shown in its place (eager is
    # always timed: it is the paired reference of every verdict)
    skip_baselines: dict[Literal["compile", "sota"], Annotated[str, Field(min_length=1)]] = {}
    # what the speedup is measured against: the eager reference, or (kernel-to-kernel tasks) the
    # problem's starter solution, `starter/solution.py`, timed as its own baseline
    baseline: Literal["eager", "starter"] = "eager"
    kernelbench: bool = False  # loaded from a single file: get_inputs() takes no shape arguments
    # Where `flops` and `bytes` come from. `exact`: formulas the problem's author wrote.
    # `estimated`: counted by rooftop for a problem that came without formulas (a KernelBench file):
    # FLOPs of the ops torch's FlopCounterMode knows (matmuls, convolutions, attention; elementwise
    # work counts nothing) and bytes = inputs + outputs + parameters + buffers, each storage once,
    # all while the reference runs on the meta device. The regime then follows from the arithmetic
    # intensity: `compute` when flops / bytes reaches the ridge point of the reference GPU's
    # datasheet for the problem's dtype (H100 SXM: fp32 peak / DRAM bandwidth, about 20 FLOP/byte),
    # else `memory` (problem/figures.py). Verdicts carry this, so a roofline read against
    # estimated figures says so.
    figures: Literal["exact", "estimated"] = "exact"

    @field_validator("dtype", "peak_dtype")
    @classmethod
    def _dtype(cls, value: str | None) -> str | None:
        return None if value is None else dtypes.canonical(value)

    @field_validator("tolerance", mode="before")
    @classmethod
    def _tolerance(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        out = {}
        for key, tol in value.items():
            name = dtypes.canonical(key)
            if dtypes.is_integer(name):
                raise ValueError(f"'{key}' is an integer dtype; integers are compared exactly")
            out[name] = {"atol": tol, "rtol": tol} if isinstance(tol, (int, float)) else tol
        return out

    @field_validator("smoke", mode="before")
    @classmethod
    def _smoke_split(cls, value: object) -> object:
        if isinstance(value, list):
            return [{**s, "split": "smoke"} if isinstance(s, dict) else s for s in value]
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ProblemSpec:
        dead = [k for k in self.tolerance if k != self.dtype]
        if dead:  # an override that never applies is worse than none: it reads as if it did
            raise ValueError(f"tolerance: the override for {', '.join(dead)} never applies; the tolerance is "
                             f"chosen by the problem's dtype ({self.dtype}), so key it '{self.dtype}' (or use "
                             "an output's own 'tolerance')")
        seen: set[str] = set()
        for shape in self.all_shapes():
            if shape.name in seen:
                raise ValueError(f"shape name '{shape.name}' is used twice")
            seen.add(shape.name)
        for field in ("flops", "bytes"):
            formula = getattr(self, field)
            if formula is None:
                continue
            for shape in self.all_shapes():
                if getattr(shape, field) is not None:
                    continue  # its own count
                missing = expr.names(formula) - set(shape.params)
                if missing:
                    raise ValueError(f"{field} formula uses {', '.join(sorted(missing))}, "
                                     f"which shape '{shape.name}' does not define")
        if any(s.split is Split.smoke for s in self.shapes):
            raise ValueError("smoke shapes go in the 'smoke' list, not in 'shapes'")
        return self

    # -- queries -----------------------------------------------------------------------------
    def all_shapes(self) -> list[Shape]:
        return [*self.shapes, *self.smoke]

    def select(self, which: str) -> list[Shape]:
        """Shapes for `visible`, `held_out`, `all` (visible + held-out) or `smoke`."""
        if which == "all":
            return list(self.shapes)
        if which == "smoke":
            return list(self.smoke)
        return [s for s in self.shapes if s.split.value == which]

    def tolerance_for(self, output_dtype: str, output: OutputSpec | None = None) -> Tolerance | None:
        """Tolerance for one float output: chosen by the dtype the *problem* names.

        The output's own dtype only decides whether the comparison is exact (integers): a bf16
        output of an fp8 problem is judged by the fp8 tolerance, as the problem says.
        """
        if dtypes.is_integer(output_dtype):
            return None
        if output is not None and output.tolerance is not None:
            return output.tolerance
        return self.tolerance.get(self.dtype) or Tolerance.default_for(self.dtype) \
            or Tolerance.default_for("float32")

    def flops_for(self, shape: Shape) -> float | None:
        formula = shape.flops or self.flops
        return None if formula is None else expr.evaluate(formula, _numeric(shape.params))

    def bytes_for(self, shape: Shape) -> float | None:
        formula = shape.bytes or self.bytes
        return None if formula is None else expr.evaluate(formula, _numeric(shape.params))


def _numeric(params: dict[str, ParamValue]) -> dict[str, float]:
    return {k: v for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class Problem(BaseModel):
    """A validated spec plus where its files live."""

    model_config = ConfigDict(frozen=True)

    spec: ProblemSpec
    root: Path  # folder of the problem, or the single KernelBench file's folder
    reference: Path
    sota: Path | None = None
    prompt: Path | None = None
    starter: Path | None = None  # starter/solution.py: the kernel a kernel-to-kernel task starts from
    bundled_name: str | None = None  # '<deck>/<problem>' when it came from the bundled decks

    @property
    def name(self) -> str:
        """The name verdicts and baselines are stored under, unique per problem: '<deck>/<name>'
        for a bundled problem, else its path (the folder, or the KernelBench-style file; the
        loader resolves both), since two folders may hold specs of the same name."""
        if self.bundled_name:
            return self.bundled_name
        return str(self.reference if self.spec.kernelbench else self.root)


# the tag of a problem whose shapes are all sized for a GPU and that has no smoke shapes: `rooftop
# eval` on a CPU refuses it unless --shapes names what to run (minutes of CPU work per shape otherwise)
GPU_ONLY = "gpu-only"


def cpu_refusal(problems: list[Problem]) -> str | None:
    """Why these problems are not evaluated on a CPU with the default shapes: one tagged gpu-only has
    no smoke shapes and shapes sized for a GPU (minutes each on a CPU); None when none is."""
    gpu_only = [p for p in problems if GPU_ONLY in p.spec.tags and not p.spec.smoke]
    if not gpu_only:
        return None
    first = gpu_only[0]
    others = f" (and {len(gpu_only) - 1} more)" if len(gpu_only) > 1 else ""
    return (f"{first.name}{others}: no smoke shapes, and its shapes are sized for a GPU ({GPU_ONLY}), so it is not "
            f"evaluated on a CPU by default; run it on a GPU, or name what to run here with --shapes "
            f"(e.g. --shapes {first.spec.shapes[0].name}, or --shapes visible)")
