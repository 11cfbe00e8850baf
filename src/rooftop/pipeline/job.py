"""What the trusted side asks of the evaluation child, and the settings it is derived from."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from rooftop import config
from rooftop.integrity.sandbox import SandboxKind
from rooftop.measure.stopping import TimingPolicy
from rooftop.problem.spec import Problem, Shape
from rooftop.solution.loader import Solution


class DeviceChoice(StrEnum):
    """Where to evaluate: auto picks cuda when torch sees a GPU."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


# comma-separated modules a child imports before its hello (what its solution's language needs),
# named in its environment: it is started before the job that says so reaches it
WARM_IMPORTS = config.WARM_IMPORTS
# set (to 1) for a child started ahead by a GPU worker: it makes its CUDA context before its hello
WARM_CUDA = config.WARM_CUDA

# the device type an evaluation runs on, once auto is resolved
DeviceType = Literal["cpu", "cuda"]


class ShapeGroup(StrEnum):
    """The groups `--shapes` accepts besides shape names (auto: all on a GPU, smoke on a CPU)."""

    auto = "auto"
    visible = "visible"
    held_out = "held_out"
    all = "all"
    smoke = "smoke"


SHAPE_GROUPS = tuple(g.value for g in ShapeGroup)


class Settings(BaseModel):
    """Knobs of one evaluation; every field has a sensible default."""

    device: DeviceChoice = DeviceChoice.auto
    # a group (auto: all shapes on a GPU, smoke shapes (if any) on a CPU; visible; held_out; all;
    # smoke) or comma-separated shape names
    shapes: str = "auto"
    # wall-clock seconds per gate (load; correctness and timing: per shape); None: chosen per gate
    # from the device and what the problem's reference takes (pipeline/trusted/gates.py)
    timeout: float | None = Field(default=None, gt=0)
    build_timeout: float = Field(default=900.0, gt=0)  # the build gate: first load_inline builds take tens of seconds
    seeds_per_shape: int = Field(default=3, ge=1)
    seed: int | None = None  # base seed for reproducible inputs; None draws secret random seeds
    timing: bool = True
    timing_policy: TimingPolicy | None = None  # None: TimingPolicy.for_device(device)
    reward_fn: str = "default"
    sandbox: SandboxKind = SandboxKind.auto
    # integrity checks (output probes, audits, fresh inputs per call); off only to measure their cost
    checks: bool = True
    graphs: bool = False  # GPU: time candidate and reference as CUDA-graph replays (launch-bound shapes)
    profile: bool = True  # GPU: one call's kernels listed (kernel share; forced when the problem sets a minimum share)

    # what can be told from the settings alone is checked here, for every surface that makes them
    # (the CLI, the API, the env, the server, the agents); what the machine must have (a GPU for
    # cuda, bubblewrap for bwrap) is checked where they are used (pipeline/evaluate.check_settings)
    @field_validator("shapes")
    @classmethod
    def _shapes(cls, value: str) -> str:
        if not value.strip(" ,"):
            raise ValueError(f"expected a group ({', '.join(SHAPE_GROUPS)}) or shape names (got '{value}')")
        return value

    @field_validator("reward_fn")
    @classmethod
    def _reward(cls, value: str) -> str:
        from rooftop.score.reward import REWARDS

        if value not in REWARDS:
            raise ValueError(f"unknown reward function '{value}' (known: {', '.join(REWARDS.names())})")
        return value

    @model_validator(mode="after")
    def _graphs_need_a_gpu(self) -> Settings:
        if self.graphs and self.device is DeviceChoice.cpu:
            raise ValueError("graphs: CUDA graphs need a GPU (the device is cpu)")
        return self


class EvalJob(BaseModel):
    """The document the child receives: everything it needs, nothing it should not see (no seeds:
    those arrive one call at a time)."""

    problem: Problem
    solution: Solution
    device: DeviceType
    shapes: list[Shape]
    weights_seed: int
    cache_root: Path  # the child keys its build folder by source hash and its own platform
    build_timeout: float
    traced: bool = False  # GPU: every call's kernels traced, all streams (integrity/cupti.py); with the checks
    # the build stage (pipeline/prebuild.py): a child that sees no GPU builds for this one's
    # architecture, and only builds
    capability: tuple[int, int] | None = None
    build_only: bool = False
