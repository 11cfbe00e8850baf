"""What an evaluation reports while it runs: structured events, one stream for every consumer.

The gate runner emits them; the CLI turns them into a progress display (a live line on a
terminal, one line per gate when piped), and the service and the HTTP API forward them as they
are. They describe progress only: the verdict stays the one record of the outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from rooftop.verdict import Gate, Status


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
