"""The evaluation child: the only process that imports and runs candidate code.

Started by the trusted side as `python -m rooftop.pipeline.child.harness REQUEST_FD REPLY_FD DESCRIPTOR_FD` in a fresh
interpreter (inside bubblewrap when available), before its job is known: it imports torch, arms
the tamper guard, says hello and waits. Then it serves typed requests one at a time through a
dispatch table: the job, build the solution, load one model per shape, and run one call —
generating that call's inputs from the seed in the request, timing it, and reading back values at
random positions of its outputs. It never sees an expected output, a tolerance or a statistic:
the trusted side keeps those. Its own stdout and stderr go to a log file.
"""

from __future__ import annotations

import importlib
import inspect
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from rooftop import config
from rooftop.environment import process_age
from rooftop.errors import is_out_of_memory
from rooftop.integrity.audit import TamperGuard
from rooftop.integrity.seal import TIMER_ENV, mark_child
from rooftop.pipeline.channel import ChannelWriter
from rooftop.pipeline.child.build import build, describe, prepare_build_folder, status_for_exception
from rooftop.pipeline.job import WARM_CUDA, WARM_IMPORTS, EvalJob
from rooftop.pipeline.wire import (
    REPLY_FOR,
    REQUESTS,
    BlockReply,
    BlockRequest,
    BuildReply,
    BuildRequest,
    CallReply,
    CallRequest,
    Failure,
    JobReply,
    JobRequest,
    LoadReply,
    LoadRequest,
    QuitRequest,
    Request,
    TraceReply,
    TraceRequest,
    _Reply,
)
from rooftop.verdict import Gate, GateFailed, Status


def main(argv: list[str]) -> int:
    request_fd, reply_fd, descriptor_fd = int(argv[0]), int(argv[1]), int(argv[2])
    mark_child()
    for fd in (request_fd, reply_fd, descriptor_fd):
        os.set_inheritable(fd, False)  # compilers and other children the solution starts do not get them
    channel = ChannelWriter(reply_fd)
    requests = os.fdopen(request_fd, "r")
    import torch  # imported before the greeting: a started child is a warm child

    for name in filter(None, config.take(WARM_IMPORTS).split(",")):
        try:  # what the solution's language will import (cpp_extension, triton), while the parent starts
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (missing here: the build gate says so, in its own words)
            pass

    if config.take(WARM_CUDA) == "1":  # started ahead by a GPU worker: the context too
        try:
            torch.empty(1, device="cuda")
        except Exception:  # noqa: BLE001  (the load gate makes it again and reports what fails)
            pass

    # the guard is armed before any candidate code runs; the timer is sealed when the job comes
    harness = Harness(TamperGuard(), socket.socket(fileno=descriptor_fd))
    harness.timer_library = config.take(TIMER_ENV)
    harness.phases["interpreter_and_imports"] = process_age()
    channel.send("hello")
    for line in requests:
        try:
            request = REQUESTS.validate_json(line)
        except ValidationError:
            return 2  # only the trusted side writes here
        if isinstance(request, QuitRequest):
            break
        channel.send_model(harness.handle(request))
    return 0


class Harness:
    """The child's side of each request; holds the job, the built module and one model per shape."""

    def __init__(self, guard: TamperGuard, descriptors: socket.socket) -> None:
        self.guard, self.descriptors = guard, descriptors
        self.phases: dict[str, float] = {}
        self.gate = Gate.build
        self.job: EvalJob | None = None
        self.module: ModuleType | None = None
        self.models: dict[str, Any] = {}
        self.instance: Any = None  # ProblemInstance, made at load
        self.runner: Any = None  # CallRunner, made at load
        self.timer_library = ""  # the sealed timer's path (integrity/seal.py), given at spawn
        self.untraced = "the job asked for no tracing"  # why calls are not traced; empty when they are

    def handle(self, request: Request) -> _Reply:
        op = request.op
        try:
            reply = HANDLERS[op](self, request)
        except GateFailed as failed:
            reply = REPLY_FOR[op](failure=Failure(status=failed.status, messages=failed.messages, cached=failed.cached))
        except Exception as exc:  # candidate code raised where no gate expected it
            message = describe(exc, self.job) if self.job else repr(exc)
            if is_out_of_memory(exc):
                message = "[memory] an allocation of the candidate's own failed (the harness's inputs and " \
                    f"snapshots were already made): {message}"
            reply = REPLY_FOR[op](failure=Failure(status=status_for_exception(exc, self.gate), messages=[message]))
        reply.id = request.id
        return reply

    def take_job(self, request: JobRequest) -> JobReply:
        from rooftop.environment import collect_environment

        self.job = request.job
        if self.job.build_only:  # the build stage: no GPU here to describe, nothing timed
            return JobReply()
        environment = collect_environment(self.job.device, self.job.solution)
        started = time.monotonic()
        if self.job.device == "cuda":
            import torch

            torch.empty(1, device="cuda")  # the CUDA context (the sealed timer's events and kernels belong to it)
            self.phases["cuda_context"] = time.monotonic() - started
            started = time.monotonic()
        sealed, unsealed = self._seal()
        self.phases["sealed_timer"] = time.monotonic() - started
        self._prepare_calls()
        return JobReply(environment=environment, sealed=sealed, unsealed=unsealed, untraced=self.untraced)

    def _prepare_calls(self) -> None:
        """The reference's instance and the call runner, before any candidate code: no-op calls
        measure the harness's own cost per call here, untouched by it (pipeline/trusted/timing.py)."""
        from rooftop.pipeline.child.call import CallRunner
        from rooftop.problem.instance import ProblemInstance, set_precision

        job = self._job()
        set_precision(job.problem.spec)
        self.instance = ProblemInstance(job.problem, job.device, job.weights_seed, module_name="rooftop_reference")
        self.runner = CallRunner(job, self.instance, self.models, self.guard, self.descriptors, self.untraced)

    def _seal(self) -> tuple[str, str]:
        """Load and seal the timer before the build imports any candidate code: (how, why not)."""
        from rooftop.integrity.seal import SealError, seal_timer, setup_cuda

        job = self._job()
        traced = job.device == "cuda" and job.traced
        if traced:  # until the tracer is attached to a timer that was then sealed
            self.untraced = "no sealed timer, whose callbacks the tracer uses"
        if not self.timer_library:
            return "", "no sealed timer was built for this child (no C compiler on the trusted side)"
        cuda = None
        if job.device == "cuda":
            def cuda(timer: Any) -> None:
                why = setup_cuda(timer, job.traced)
                if job.traced:
                    self.untraced = why
        try:
            return seal_timer(Path(self.timer_library), cuda).describe(), ""
        except (SealError, OSError) as exc:
            if traced:  # attached or not, the clock does not mark calls for it without the sealed timer
                self.untraced = f"the sealed timer, whose callbacks the tracer uses, could not be sealed: {exc}"
            return "", str(exc)

    def build(self, _request: BuildRequest) -> BuildReply:
        from rooftop.problem.instance import set_precision

        job = self._job()
        set_precision(job.problem.spec)
        folder = prepare_build_folder(job)
        started = time.monotonic()
        self.module, cached = build(job, folder)
        return BuildReply(seconds=time.monotonic() - started, cached=cached)

    def load(self, _request: LoadRequest) -> LoadReply:
        job = self._job()
        self.gate = Gate.load
        started = time.monotonic()
        if self.instance is None:
            self._prepare_calls()
        cls = candidate_class(self.module)
        copied = True
        for shape in job.shapes:
            self.models[shape.name], same = self._construct(cls, shape)
            copied = copied and same
        self.gate = Gate.correctness
        self.phases["models"] = time.monotonic() - started
        return LoadReply(seconds=time.monotonic() - started, phases=self.phases, detail="weights copied" if copied
                         else "parameter names differ from the reference: constructed under the same seed")

    def call(self, request: CallRequest) -> CallReply:
        self.gate = request.gate
        if self.runner is None:
            raise GateFailed(Status.internal_error, "the child was asked for a call before it had a job")
        return self.runner.call(request)

    def block(self, request: BlockRequest) -> BlockReply:
        if self.runner is None:
            raise GateFailed(Status.internal_error, "the child was asked for calls before it had a job")
        self.gate = request.calls[0].gate if request.calls else self.gate
        return self.runner.block(request)

    def trace(self, request: TraceRequest) -> TraceReply:
        if self.runner is None:
            raise GateFailed(Status.internal_error, "the child was asked for its trace before it had a job")
        return self.runner.trace(request)

    def _job(self) -> EvalJob:
        if self.job is None:
            raise GateFailed(Status.internal_error, "the child was asked to work before it was given a job")
        return self.job

    def _construct(self, cls: type, shape: Any) -> tuple[Any, bool]:
        """The candidate model for one shape, with the reference's weights when the names match."""
        import torch

        job, instance = self._job(), self.instance
        from rooftop.problem.instance import blame_reference

        with blame_reference("constructing the reference Model"):
            ref_state = instance.construct(instance.module.Model, shape).state_dict()
        try:
            model = instance.construct(cls, shape)
        except GateFailed:
            raise
        except Exception as exc:
            raise GateFailed(Status.init_error, f"constructing {cls.__name__} for shape '{shape.name}' failed: "
                             + describe(exc, job))
        if not isinstance(model, torch.nn.Module):
            return model, not ref_state
        return self._with_reference_weights(model, cls, ref_state), _same_names(ref_state, model.state_dict()) \
            or not ref_state

    def _with_reference_weights(self, model: Any, cls: type, ref_state: dict) -> Any:
        job = self._job()
        if ref_state and _same_names(ref_state, model.state_dict()):
            try:
                model.load_state_dict(ref_state, strict=True)
            except Exception as exc:
                raise GateFailed(Status.init_error, f"copying the reference weights failed: {exc}")
        try:
            return model.to(job.device).eval()
        except Exception as exc:
            raise GateFailed(Status.init_error, f"moving {cls.__name__} to {job.device} failed: " + describe(exc, job))


HANDLERS: dict[str, Callable[[Harness, Any], _Reply]] = {
    "job": Harness.take_job, "build": Harness.build, "load": Harness.load, "call": Harness.call,
    "block": Harness.block, "trace": Harness.trace,
}


def candidate_class(module: ModuleType | None) -> type:
    """ModelNew; a module without it is an init_error that lists the classes it has. A module with
    only `Model` is one too: a KernelBench user expects the class named ModelNew, and a file that
    is the reference unchanged would otherwise pass as a solution without a word."""
    cls = getattr(module, "ModelNew", None)
    if cls is not None:
        return cls
    found = sorted(name for name, value in vars(module).items()
                   if inspect.isclass(value) and getattr(value, "__module__", "") == getattr(module, "__name__", ""))
    listed = f"; it defines {', '.join(found)}" if found else "; it defines no classes"
    hint = " (to judge a reference as its own solution, add `ModelNew = Model`)" if "Model" in found else ""
    raise GateFailed(Status.init_error, f"the solution defines no ModelNew{listed}: the class to evaluate must be "
                     f"named ModelNew{hint}")


def _same_names(ref_state: dict, state: dict) -> bool:
    return bool(ref_state) and ref_state.keys() == state.keys() and \
        all(ref_state[k].shape == state[k].shape for k in ref_state)
