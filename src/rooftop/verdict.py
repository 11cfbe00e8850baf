"""The verdict: one versioned pydantic document per evaluation.

It is what the store keeps, what `--json` prints and what later readers (reports, the RL
environment, the viewer) consume, so its fields change only with `SCHEMA_VERSION`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from rooftop.measure.measurement import TimingStats, interval_note

# 2: paired speedup interval, stored baselines, clocks, cross-check flags, graphs; 3: no interval
# (None, with `ci_note` and `no_interval` saying why) from fewer samples than one needs; the
# speedup's interval widened by the spread between processes (`speedup_spread`, `spread_source`)
SCHEMA_VERSION = 3

# shape flags whose times the summary and the reward leave out, with what they mean to a reader
# (the flag is set by the timing gate: pipeline/trusted/timing.py)
UNTRUSTED_TIMING = {"contention": "machine shared"}


class Status(str, Enum):
    correct = "correct"
    incorrect = "incorrect"
    runtime_error = "runtime_error"
    init_error = "init_error"
    compile_error = "compile_error"
    rejected = "rejected"
    timeout = "timeout"
    internal_error = "internal_error"
    needs_gpu = "needs_gpu"  # CUDA code on a machine without a GPU: compiled at most, never run


class Gate(str, Enum):
    static = "static"
    build = "build"
    load = "load"
    correctness = "correctness"
    timing = "timing"
    score = "score"


# a child that dies mid-gate: what its death means depends on what it was doing
_CRASH_STATUS = {Gate.build: Status.compile_error, Gate.load: Status.init_error}


def crash_status(gate: Gate) -> Status:
    """The status of candidate code that raised or died where no gate expected it."""
    return _CRASH_STATUS.get(gate, Status.runtime_error)


class GateFailed(Exception):
    """A gate failed: the one failure type of the engine, on both sides of the trust boundary.

    `status` None means "decide by the gate" (a crash: see `crash_status`); `gate` is filled in by
    the gate runner when the raiser does not know which gate it is in (the child, the session).
    """

    def __init__(self, status: Status | None, *messages: str, gate: Gate | None = None,
                 cached: bool | None = None, lost: str | None = None) -> None:
        super().__init__(messages[0] if messages else (status.value if status else "failed"))
        self.status, self.gate, self.cached = status, gate, cached
        self.lost = lost  # the child stopped answering: "timeout", "crash" or "protocol"
        self.messages = [m for m in messages if m]

    def resolved(self, gate: Gate) -> tuple[Gate, Status]:
        where = self.gate or gate
        return where, self.status or crash_status(where)


class GateRecord(BaseModel):
    gate: Gate
    ok: bool
    seconds: float = 0.0
    detail: str = ""
    cached: bool | None = None  # build gate: reused a build of the same source


class SeedCheck(BaseModel):
    """One correctness trial: one seed's fresh inputs, compared output by output."""

    seed: int
    ok: bool
    output: str | None = None  # the output that failed
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    norm_rel_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    norm_bound: float | None = None
    message: str = ""


class ShapeKey(BaseModel):
    shape: str
    split: str
    params: dict[str, int | float | bool | str]


class ShapeChecks(BaseModel):
    """What the correctness gate finds on a shape (pipeline/trusted/correctness.py)."""

    correct: bool | None = None
    checks: list[SeedCheck] = []


class ShapeTiming(BaseModel):
    """What the timing gate measures on a shape (pipeline/trusted/timing.py)."""

    candidate: TimingStats | None = None
    reference: TimingStats | None = None  # eager reference, timed the same way in the same process
    timed_calls: int = 0  # warm-up and timed calls
    timed_checks: int = 0  # of them, those whose probed outputs were checked against the reference's
    kernel_share: float | None = None  # share of the listed call's GPU kernel time in the solution's own kernels
    profiled_kernel_seconds: float | None = None  # GPU busy time of the listed call's kernels, all streams
    profiled_event_seconds: float | None = None  # the same call's reported time
    untimed_seconds: float | None = None  # per call: round trip less reported time, spin and harness cost
    harness_seconds: float | None = None  # the harness's own cost per call (no-op calls before the solution)
    # per side ("candidate", "reference"): the median host seconds to queue a timed call's work (its
    # launches; GPU only). Past the spin before the start event, that is what the events time (`host-bound`)
    queue_seconds: dict[str, float] = {}
    flags: list[str] = []  # cross-checks that failed on this shape: clocks, wall, roofline (under an
    # estimated floor), contention (details in warnings)


class ShapeFigures(BaseModel):
    """What the score gate derives for a shape from its samples (pipeline/trusted/scoring.py)."""

    flops: float | None = None
    bytes: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    speedup: float | None = None  # over eager: median of the paired ratios reference / candidate, call by call
    speedup_low: float | None = None  # the speedup's 95 % interval
    speedup_high: float | None = None
    # the between-process half-width (a fraction) folded into that interval, and where it came from:
    # "default" or "host-bound default" (a GPU verdict without stored self-checks) or the stored
    # self-checks (measure/spread.py)
    speedup_spread: float | None = None
    spread_source: str = ""
    speedups: dict[str, float] = {}  # over each reference: eager (paired, as `speedup`), compile, sota


class ShapeResult(ShapeFigures, ShapeTiming, ShapeChecks, ShapeKey):
    """One shape's part of the verdict: which shape, then what each gate found on it (the groups
    above, in the order the gates run), then the stored baselines applied after the gates."""

    baselines: dict[str, float] = {}  # stored baseline medians in seconds: compile, sota (and eager)

    @property
    def untrusted(self) -> str | None:
        """Why this shape's times are not a measurement (a flag of UNTRUSTED_TIMING), None when they
        are: the summary and the reward ignore them."""
        return next((UNTRUSTED_TIMING[f] for f in self.flags if f in UNTRUSTED_TIMING), None)

    @computed_field  # type: ignore[prop-decorator]  # mypy rejects any decorator over a @property
    @property
    def no_interval(self) -> str | None:
        """Why a timed shape's speedup has no 95 % interval (too few paired samples); None when it has one."""
        if self.speedup is None or self.speedup_low is not None or self.candidate is None or self.reference is None:
            return None
        # the paired ratios are as many as the side with fewer samples (a slow reference leaves early)
        fewer = min(self.candidate, self.reference, key=lambda stats: stats.n)
        return interval_note(fewer.n, fewer.stopped_by) or "no 95 % interval"


class Environment(BaseModel):
    device: str  # "cuda" or "cpu"
    device_name: str
    mode: str  # "gpu", "cpu", "cpu+triton-interpreter", "cpu (compile check only)"
    gpu_key: str | None = None  # datasheet entry the roofline used
    python: str
    torch: str
    triton: str | None = None
    cuda: str | None = None
    nvcc: str | None = None
    driver: str | None = None
    platform: str
    hostname: str
    rooftop: str


class Summary(BaseModel):
    shapes: int = 0
    correct_shapes: int = 0
    geomean_speedup: float | None = None
    geomean_speedups: dict[str, float] = {}  # over each reference with a figure on every timed shape
    geomean_roofline: float | None = None
    geomean_tflops: float | None = None
    geomean_gbps: float | None = None


class Verdict(BaseModel):
    schema_version: int = SCHEMA_VERSION
    status: Status
    reward: float | None
    reward_fn: str = "default"
    # what the reward's speedup is over: the paired eager reference, or (kernel-to-kernel tasks) the
    # starter kernel's stored baseline on this platform (`rooftop baselines` times it)
    baseline: Literal["eager", "starter"] = "eager"
    problem: str
    problem_version: int
    solution: str
    source_hash: str
    languages: list[str] = []
    shapes_selected: str = ""
    failed_gate: Gate | None = None
    messages: list[str] = []
    warnings: list[str] = []  # about the evaluation itself (e.g. it ran without a sandbox)
    sandbox: str = "none"
    graphs: bool = False  # timed calls (candidate and reference) replayed from CUDA graphs
    # the roofline's flops and bytes: the problem's own formulas (exact), or counted by rooftop for a
    # problem that has none, such as an imported KernelBench file (estimated)
    figures: Literal["exact", "estimated"] = "exact"
    gates: list[GateRecord] = []
    # where the wall time went, in seconds: the child's start, the trusted side's set-up, the
    # child's imports, CUDA context and models, the trusted side's input making and reference
    # calls, and each gate's wall time (gate_*)
    phases: dict[str, float] = {}
    inputs: str = ""  # where both sides made the inputs, and how often they were seen to agree
    traced_calls: int = 0  # calls whose kernels were traced on every stream and held to their reported time
    shapes: list[ShapeResult] = []
    summary: Summary = Summary()
    environment: Environment | None = None
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    wall_seconds: float = 0.0
