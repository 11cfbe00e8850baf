"""What the trusted side asks of the evaluation child (the settings it is derived from are the
public vocabulary's: rooftop/vocabulary.py)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from rooftop import config
from rooftop.problem.spec import Problem, Shape
from rooftop.solution.loader import Solution
from rooftop.vocabulary import DeviceType

# comma-separated modules a child imports before its hello (what its solution's language needs),
# named in its environment: it is started before the job that says so reaches it
WARM_IMPORTS = config.WARM_IMPORTS
# set (to 1) for a child started ahead by a GPU worker: it makes its CUDA context before its hello
WARM_CUDA = config.WARM_CUDA

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
