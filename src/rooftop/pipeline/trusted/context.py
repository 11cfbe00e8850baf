"""The state of one evaluation, in one place: what is evaluated, where the gate runner is, and
the parts the gates share (the child, the trusted reference, the caller)."""

from __future__ import annotations

import os
import random
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from rooftop.errors import RooftopError
from rooftop.pipeline.job import EvalJob
from rooftop.problem.spec import Problem, Shape
from rooftop.solution.loader import Solution
from rooftop.verdict import Gate, Verdict
from rooftop.vocabulary import DeviceType, EventSink, Settings, ignore

if TYPE_CHECKING:
    from rooftop.check.landing import Landing
    from rooftop.measure.clocks import SmClock
    from rooftop.measure.contention import LoadSample
    from rooftop.pipeline.trusted.device_lease import DeviceLease
    from rooftop.pipeline.trusted.reference import TrustedReference
    from rooftop.pipeline.trusted.session import ChildSession
    from rooftop.pipeline.wire import Kernel


class Noted(NamedTuple):
    """A call whose kernel trace is still to be taken (tracing.py): its shape and the time it reported."""

    shape: str
    seconds: float | None


class Cancelled(RooftopError):
    """The caller cancelled the evaluation: it stopped between two calls and left no verdict."""


class Seeds:
    """Fresh secret seeds, or a reproducible stream when the settings fix a base seed."""

    def __init__(self, base: int | None) -> None:
        self._rng = random.Random(base) if base is not None else None

    def next(self) -> int:
        return self._rng.randrange(2**31 - 1) if self._rng else secrets.randbits(31)


@dataclass
class RunState:
    """Where the gate runner is: the only writer is the runner, every gate and call reads it."""

    gate: Gate = Gate.static
    shape: Shape | None = None
    deadline: float = 0.0
    limit: float = 0.0  # the seconds the current deadline allows (for the timeout message)
    emit: EventSink = ignore
    cancel: threading.Event | None = None

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("the evaluation was cancelled")

    @property
    def where(self) -> str:
        return f" (shape '{self.shape.name}')" if self.shape is not None else ""


@dataclass
class Setup:
    """What the trusted side sets up for an evaluation before the gates that need it (the child,
    the trusted reference, the memory plan, the harness's own cost per call, the clocks) and
    releases when it closes."""

    child: ChildSession | None = None
    reference: TrustedReference | None = None
    pool_sets: dict[str, int] = field(default_factory=dict)  # input sets per shape, from the memory plan
    harness_cost: dict[str, list[float]] = field(default_factory=dict)  # no-op calls per shape, before the solution
    sm_clock: SmClock | None = None
    cpu_load: LoadSample | None = None  # machine load when CPU timing began (measure/contention.py)
    landing: Landing | None = None  # where full calls write their outputs (check/landing.py)
    scratch: Path | None = None  # the child's working folder
    lease: DeviceLease | None = None  # this evaluation's hold on its GPU (pipeline/trusted/device_lease.py)

    def close(self) -> None:
        if self.child is not None:
            self.child.close()
        if self.landing is not None:
            self.landing.close()
            self.landing = None
        if self.reference is not None:
            self.reference.release()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        if self.lease is not None:  # last: the GPU is free for the next evaluation once all of this is gone
            self.lease.release()


@dataclass
class TraceLog:
    """The kernel tracer's account (pipeline/trusted/tracing.py): why the child does not trace its
    calls ("" when it does), the calls whose traces are still to be taken and the one among them to
    list in full, the calls judged, what was wrong with those that ended past their time and how
    many of those were warned about, and each shape's listed kernels."""

    untraced: str = "no evaluation child has said it traces its calls"
    pending: list[Noted] = field(default_factory=list)
    listed: int | None = None
    calls: int = 0
    late: list[str] = field(default_factory=list)
    warned: int = 0
    listed_kernels: dict[str, tuple[list[Kernel], float | None]] = field(default_factory=dict)


@dataclass
class CallLog:
    """The candidate's calls so far: where their seeds come from, the seeds timing cycles over with
    the checks off, how many checked calls had their inputs agree on both sides at the sampled
    positions, and when (time.monotonic()) the child last answered one."""

    seeds: Seeds = field(default_factory=lambda: Seeds(None))
    checked_seeds: dict[str, list[int]] = field(default_factory=dict)
    inputs_checked: int = 0
    last: float | None = None


@dataclass
class Evaluation:
    """One evaluation as the gates share it: what is judged (the problem, the solution, the
    settings, the job the child gets, with its device and shapes), the verdict being written,
    where the runner is, and the set-up, tracer and call accounts."""

    problem: Problem
    solution: Solution
    settings: Settings
    job: EvalJob
    verdict: Verdict
    state: RunState
    phases: dict[str, float] = field(default_factory=dict)  # where the time went (seconds per phase)
    setup: Setup = field(default_factory=Setup)
    trace: TraceLog = field(default_factory=TraceLog)
    calls: CallLog = field(default_factory=CallLog)

    @property
    def device(self) -> DeviceType:
        return self.job.device

    @property
    def shapes(self) -> list[Shape]:
        return self.job.shapes

    def add_time(self, phase: str, seconds: float) -> None:
        """Add to a phase that recurs (input making, reference calls)."""
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds

    def own_pids(self) -> list[int]:
        """This process and the child (the load probe counts their descendants as theirs too)."""
        return [os.getpid()] + ([self.setup.child.proc.pid] if self.setup.child is not None else [])

    def close(self) -> None:
        self.setup.close()
