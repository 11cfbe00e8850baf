"""The conversation between the trusted side and the child: requests out, one reply each.

The trusted side asks; the child answers exactly the request it was sent, echoing the request's
random id. The child never reports a verdict ("correct", "fast"): it reports what it did (the
time one call took, values read from its outputs, what the audits saw), and every figure is
checked on the trusted side. A message nobody asked for, or with the wrong id, is a forgery.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from rooftop.check.probe import Probe
from rooftop.pipeline.tensorfile import TensorEntry


class Failure(BaseModel):
    """The request could not be carried out: the status and messages the verdict should carry."""

    status: str
    messages: list[str] = []
    cached: bool | None = None


class Kernel(BaseModel):
    """One GPU kernel seen by the profiler during a profiled call."""

    name: str
    microseconds: float
    stream: int


class Reply(BaseModel):
    type: Literal["reply"]
    id: str
    failure: Failure | None = None
    seconds: float | None = None  # build, load: how long it took; call: the clock's time for the call
    cached: bool | None = None  # build
    detail: str = ""  # load; a profiled call: why it ran unprofiled
    outputs: list[Probe] = []  # call: values at random positions of each output
    inputs: list[Probe] = []  # call: values at random positions of the inputs it generated
    dump: list[TensorEntry] | None = None  # call with full=True: the outputs, written to the dump file
    findings: list[str] = []  # call: what the runtime audits saw
    changed_inputs: list[int] = []
    aliased_inputs: list[int] = []
    kernels: list[Kernel] | None = None  # call with profile=True
    stream: int | None = None  # call with profile=True: the caller's stream, where the call's kernels belong


class Hello(BaseModel):
    type: Literal["hello"]
    environment: dict[str, Any]
