"""The wire between the trusted side and the child, which both sides import: the conversation on
the channel (pipeline/channel.py): one typed request, one typed reply.

The trusted side asks; the child answers exactly the request it was sent, echoing its `op` and
its random `id`. The child never reports a verdict ("correct", "fast"): it reports what it did
(the time one call took, values read from its outputs, what the audits saw), and every figure is
checked on the trusted side. A message nobody asked for, or with the wrong id, is a forgery.

A child is started before it knows its job: it says `hello` once its interpreter, torch and the
tamper guard are up, and learns the job from the first request. The modules its solution's
language will import (`job.WARM_IMPORTS`, in its environment) are imported before the hello too.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from rooftop.check.landing import Landed, LandingSpec
from rooftop.check.probe import Probe
from rooftop.pipeline.job import EvalJob
from rooftop.verdict import Environment, Gate, Status


class Failure(BaseModel):
    """The request could not be carried out: the status and messages the verdict should carry
    (status None: a crash, whose status the trusted side decides by the gate)."""

    status: Status | None
    messages: list[str] = []
    cached: bool | None = None


# every reply, and every model inside one that carries a float, writes NaN and infinities as the
# JSON constants the reader's json accepts (a candidate's outputs, read by probes, may hold them),
# where pydantic's JSON would write null
REPLY_JSON = ConfigDict(ser_json_inf_nan="constants")


class Kernel(BaseModel):
    """One GPU kernel of a traced call."""

    model_config = REPLY_JSON

    name: str
    microseconds: float
    stream: int
    start_us: float = 0.0  # start, from the opening of the call's timed window


class CallTrace(BaseModel):
    """One call's kernels as the tracer saw them (integrity/cupti.py), on every stream, in GPU
    time from the end of the harness's spin, where the call's timed window opened."""

    model_config = REPLY_JSON

    stream: int  # the caller's stream, as CUPTI numbers it
    kernels: int = 0  # the call's own kernels (the harness's flush, spin and closing kernel left out)
    early: int = 0  # of them, those that started before the window opened
    first_early: str = ""
    last_end_us: float = 0.0  # where the call's last kernel ended
    last_stream: int = 0
    last_name: str = ""


# -- requests ---------------------------------------------------------------------------------
class _Request(BaseModel):
    id: str = ""


class JobRequest(_Request):
    op: Literal["job"] = "job"
    job: EvalJob


class BuildRequest(_Request):
    op: Literal["build"] = "build"


class LoadRequest(_Request):
    op: Literal["load"] = "load"


class CallRequest(_Request):
    """One call of the candidate on the inputs of `seed`; the flags say what to read back."""

    op: Literal["call"] = "call"
    gate: Gate
    shape: str
    seed: int
    full: bool = False  # write the whole outputs into `landing` for a full comparison
    landing: LandingSpec | None = None  # full=True: where (a new id: its descriptor was sent just before)
    pool_sets: int | None = None  # input sets the child keeps alive per shape (the memory plan's figure)
    audit: bool = False  # count torch compute under the dispatch hook
    check_inputs: bool = False  # report probes of the inputs and whether the call changed them
    probe: bool = True  # read values at random positions of the outputs
    reuse: bool = False  # checks off: the same inputs for the same seed (as naive harnesses do)
    graph: bool = False  # time a CUDA-graph replay
    noop: bool = False  # time a call that does nothing, on the same path: the harness's own fixed cost


class BlockRequest(_Request):
    """Timed calls queued back to back (measure/timer.py), waited for once: their replies come
    together. Each call is a timed call's request (no full check, no input snapshot)."""

    op: Literal["block"] = "block"
    calls: list[CallRequest]


class TraceRequest(_Request):
    """The tracer's records of every call since the last such request, one summary per call."""

    op: Literal["trace"] = "trace"
    detail: int | None = None  # the index of a call (among those) whose kernels to list in full


class QuitRequest(_Request):
    op: Literal["quit"] = "quit"


Request = Annotated[JobRequest | BuildRequest | LoadRequest | CallRequest | BlockRequest | TraceRequest | QuitRequest,
                    Field(discriminator="op")]
REQUESTS: TypeAdapter[Request] = TypeAdapter(Request)


# -- replies ----------------------------------------------------------------------------------
class _Reply(BaseModel):
    model_config = REPLY_JSON

    type: Literal["reply"] = "reply"
    id: str = ""
    failure: Failure | None = None


class JobReply(_Reply):
    op: Literal["job"] = "job"
    environment: Environment | None = None
    sealed: str = ""  # how the timer was sealed (integrity/seal.py); empty for a build-stage child
    unsealed: str = ""  # why the timer could not be sealed, when it could not
    untraced: str = ""  # why calls are not traced (integrity/cupti.py); empty when every call is


class BuildReply(_Reply):
    op: Literal["build"] = "build"
    seconds: float = 0.0
    cached: bool | None = None


class LoadReply(_Reply):
    op: Literal["load"] = "load"
    seconds: float = 0.0
    detail: str = ""
    phases: dict[str, float] = {}  # the child's own start-up: imports, CUDA context, models


class CallReply(_Reply):
    op: Literal["call"] = "call"
    seconds: float | None = None  # the clock's time for the call
    hold: float = 0.0  # seconds the GPU spun before the start event (not timed, inside the round trip)
    # seconds the host took to queue the call's work: longer than `hold` means the events timed the
    # host's launches (the child's word: it flags a shape, never judges one)
    queued: float = 0.0
    outputs: list[Probe] = []  # values at random positions of each output
    inputs: list[Probe] = []  # values at random positions of the inputs it generated
    landed: list[Landed] | None = None  # full=True: every output's dtype and shape, and whether it was written
    findings: list[str] = []  # what the runtime audits saw
    changed_inputs: list[int] = []
    aliased_inputs: list[int] = []
    # the child's own seconds per step of this call (inputs, the timed call with its flush and spin,
    # probes, ...): where a round trip went, summed into the verdict's phases; never judged
    spent: dict[str, float] = {}


class BlockReply(_Reply):
    op: Literal["block"] = "block"
    calls: list[CallReply] = []


class TraceReply(_Reply):
    op: Literal["trace"] = "trace"
    calls: list[CallTrace] = []
    kernels: list[Kernel] | None = None  # the kernels of the call `detail` named
    dropped: int = 0  # records the tracer lost (more kernels than it holds between two requests)
    broken: str = ""  # why the records did not read as the harness's calls


class QuitReply(_Reply):
    op: Literal["quit"] = "quit"


Reply = Annotated[JobReply | BuildReply | LoadReply | CallReply | BlockReply | TraceReply | QuitReply,
                  Field(discriminator="op")]
REPLIES: TypeAdapter[Reply] = TypeAdapter(Reply)
REPLY_FOR: dict[str, type[_Reply]] = {"job": JobReply, "build": BuildReply, "load": LoadReply, "call": CallReply,
                                      "block": BlockReply, "trace": TraceReply, "quit": QuitReply}


class Hello(BaseModel):
    """The child is up (interpreter, torch, tamper guard) and waits for its job."""

    type: Literal["hello"]
