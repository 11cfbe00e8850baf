"""rooftop's public vocabulary: the words every surface speaks (the CLI, the Python API, the RL
environment, the server, the service and the agents).

- `Settings`: the knobs of one evaluation, checked where they are made, whatever makes them;
- the choices among them: `DeviceChoice` (and `DeviceType`, a choice resolved), `ShapeGroup`,
  `SandboxKind`;
- the events an evaluation reports while it runs, one stream for every consumer: the gate runner
  emits them; the CLI turns them into a progress display (a live line on a terminal, one line
  per gate when piped), and the service and the HTTP API forward them as they are. They describe
  progress only: the verdict (rooftop/verdict.py) stays the one record of the outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from rooftop.integrity.sandbox import SandboxKind
from rooftop.measure.stopping import TimingPolicy
from rooftop.verdict import Gate, Status

__all__ = ["SHAPE_GROUPS", "DeviceChoice", "DeviceType", "DeviceWait", "EvaluationFinished", "EvaluationStarted",
           "Event", "EventSink", "GateFinished", "GateStarted", "SandboxKind", "Samples", "Settings", "ShapeDone",
           "ShapeGroup", "ignore"]


class DeviceChoice(StrEnum):
    """Where to evaluate: auto picks cuda when torch sees a GPU."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


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


# -- events ----------------------------------------------------------------------------------------
class EvaluationStarted(BaseModel):
    kind: Literal["evaluation_started"] = "evaluation_started"
    problem: str
    solution: str
    device: str
    shapes: list[str]


class GateStarted(BaseModel):
    kind: Literal["gate_started"] = "gate_started"
    gate: Gate
    shapes: int = 0  # how many shapes the gate goes through (0: a gate that is not per shape)
    timeout: float | None = None  # seconds allowed (per shape for per-shape gates)


class ShapeDone(BaseModel):
    kind: Literal["shape_done"] = "shape_done"
    gate: Gate
    shape: str
    index: int  # 1-based
    of: int
    seconds: float
    samples: int | None = None  # timing: samples kept for the candidate


class Samples(BaseModel):
    """Sample counts while a shape is being timed (at most a few a second)."""

    kind: Literal["samples"] = "samples"
    gate: Gate
    shape: str
    kept: int
    warming: bool


class DeviceWait(BaseModel):
    """The GPU is held by another evaluation (pipeline/trusted/device_lease.py): this one waits its turn."""

    kind: Literal["device_wait"] = "device_wait"
    device: str
    holder: str  # as the holder wrote it: its pid, host and since when ("" if unknown)


class GateFinished(BaseModel):
    kind: Literal["gate_finished"] = "gate_finished"
    gate: Gate
    ok: bool
    seconds: float
    status: Status | None = None  # the failure's status when not ok
    detail: str = ""


class EvaluationFinished(BaseModel):
    kind: Literal["evaluation_finished"] = "evaluation_finished"
    status: Status
    reward: float | None
    seconds: float


Event = Annotated[EvaluationStarted | GateStarted | ShapeDone | Samples | DeviceWait | GateFinished
                  | EvaluationFinished, Field(discriminator="kind")]
EventSink = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """The sink of an evaluation nobody watches."""
