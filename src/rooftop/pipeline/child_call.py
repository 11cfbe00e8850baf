"""One call of the candidate, as the child runs it: the same path for every call, checked or timed.

The inputs come from the seed in the request; the call runs under the clock (or the profiler, or
as a CUDA-graph replay); then the child reads back what the trusted side asked for. Runs only in
the evaluation child.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from rooftop.check.compare import as_outputs, storage_overlaps
from rooftop.check.inputs import InputPool, device_memory, modified_inputs, release_cached
from rooftop.check.landing import LandingSpec, LandingTarget
from rooftop.check.probe import probe_output, probe_outputs
from rooftop.errors import is_out_of_memory
from rooftop.integrity.audit import Audit, TamperGuard
from rooftop.measure.graphs import GraphCache, GraphCaptureFailed
from rooftop.measure.timer import CudaEventClock, clock_for
from rooftop.pipeline.job import EvalJob
from rooftop.pipeline.protocol import CallReply, CallRequest, Kernel
from rooftop.problem.instance import ProblemInstance
from rooftop.values import clone, tensors
from rooftop.verdict import GateFailed, Status

PROFILE_HOLD_SECONDS = 2e-3  # the spin before the profiled call's start event (its launches queue meanwhile)


def _first_input(*inputs: Any) -> Any:
    """The no-op call's model: it returns its first input, so the probes that follow read a tensor."""
    return inputs[0] if inputs else None


@contextmanager
def harness_step(what: str) -> Iterator[None]:
    """A step of the harness's own (making inputs, snapshots, copying outputs out) that fails is
    the harness's failure, `internal_error`, never the candidate's status. The candidate's call has
    finished and been synchronized before any step after it, so its own errors surface there."""
    try:
        yield
    except GateFailed:
        raise
    except Exception as exc:
        raise GateFailed(Status.internal_error, f"[harness] {what} failed in the evaluation child: "
                         f"{type(exc).__name__}: {str(exc).strip()[:400]}{_memory_note(exc)}") from exc


def _memory_note(exc: Exception) -> str:
    if not is_out_of_memory(exc) or not torch.cuda.is_available():
        return ""
    held = torch.cuda.memory_allocated()
    return f" (the child held {held / 2**30:.2f} GiB of device memory, inputs and the candidate's allocations)"


class CallRunner:
    def __init__(self, job: EvalJob, instance: ProblemInstance, models: dict[str, Any], guard: TamperGuard,
                 descriptors: socket.socket | None = None) -> None:
        self.job, self.instance, self.models, self.guard = job, instance, models, guard
        self.descriptors = descriptors
        self.landing: LandingTarget | None = None
        self.device = instance.device
        self.shapes = {s.name: s for s in job.shapes}
        self.clock = clock_for(self.device)
        self.pool = InputPool(device_memory(self.device))
        self.graphs = GraphCache()
        self.reused: dict[tuple[str, int], list] = {}  # checks off: a fixed pool, as naive harnesses do

    def call(self, request: CallRequest) -> CallReply:
        shape = self.shapes[request.shape]
        model = _first_input if request.noop else self.models[request.shape]
        with harness_step("making the inputs"):
            inputs = self._inputs(request)
        reply = CallReply()
        with harness_step("snapshotting the inputs"):
            if request.check_inputs:
                reply.inputs = [probe_output(x) for x in inputs]
            pristine = clone(inputs) if request.check_inputs else None
        audit = Audit(count_compute=request.audit and not request.noop and
                      not self.job.problem.spec.policy.allow_torch_ops)
        result, inputs = self._run(request, shape.name, model, inputs, audit, reply)
        reply.findings = audit.findings() + self._tampering()
        if request.probe:
            reply.outputs = probe_outputs(result)
        outs = [t for t in tensors(result) if type(t) is torch.Tensor]
        reply.aliased_inputs = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)
                                and any(storage_overlaps(o, x) for o in outs)]
        with harness_step("comparing the inputs with their snapshot"):
            if pristine is not None:
                reply.changed_inputs = modified_inputs(pristine, inputs)
            del pristine
        if request.full and request.landing is not None:
            values = as_outputs(result)
            if all(type(v) is torch.Tensor for v in values):
                with harness_step("copying the outputs to the trusted side"):
                    reply.landed = self._target(request.landing).write(values)
        if request.full:
            release_cached(self.device)
        return reply

    def _target(self, spec: LandingSpec) -> LandingTarget:
        """The mapping of the landing the request names; a new one's descriptor is waiting on the socket."""
        if self.landing is None or self.landing.spec.id != spec.id:
            if self.landing is not None:
                self.landing.close()
                self.landing = None
            assert self.descriptors is not None
            _, fds, _, _ = socket.recv_fds(self.descriptors, 16, 1)
            if not fds:
                raise RuntimeError("no descriptor arrived for the shared output memory")
            self.landing = LandingTarget(spec, fds[0], self.device)
        return self.landing

    def _inputs(self, request: CallRequest) -> list[Any]:
        shape = self.shapes[request.shape]
        key = (shape.name, request.seed)
        if request.reuse and key in self.reused:
            return self.reused[key]
        if not request.reuse:
            self.pool.make_room(shape.name)
        inputs = self.instance.inputs(shape, request.seed)
        if request.reuse:
            self.reused[key] = inputs
        else:
            self.pool.admit(inputs, shape.name, request.pool_sets)
        return inputs

    def _run(self, request: CallRequest, shape: str, model: Any, inputs: list[Any], audit: Audit,
             reply: CallReply) -> tuple[Any, list[Any]]:
        """The call itself, under the profiler, as a graph replay, or under the clock."""
        from rooftop.integrity.cupti import ProfilerUnavailable
        from rooftop.integrity.kernels import profile_kernels

        box: dict[str, Any] = {}

        def run() -> None:
            with audit:
                box["result"] = model(*inputs)

        with torch.no_grad():
            if request.profile:
                self.clock.prepare()
                if self.device.type == "cuda":  # the cache flush is over before the tracer starts
                    torch.cuda.synchronize(self.device)
                try:
                    _, kernels, reply.stream = profile_kernels(lambda: self._event_timed(run, reply))
                    reply.kernels = [Kernel(**k) for k in kernels]
                except ProfilerUnavailable as exc:
                    reply.detail = f"the profiler is unavailable: {exc}"
                    if "result" not in box:
                        run()
            elif request.graph and self.device.type == "cuda":
                graphed = self._graphed(shape, model, inputs)
                inputs = graphed.static
                reply.seconds = self.clock.time(graphed.replay)
                box["result"] = graphed.outputs
            else:
                reply.seconds = self.clock.time(run)
                reply.hold = getattr(self.clock, "last_hold", 0.0)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        return box["result"], inputs

    def _event_timed(self, run: Any, reply: CallReply) -> None:
        """The profiled call, also timed by events on the caller's stream: the cross-check compares
        its kernels with this same call's event time (tracing slows each kernel a little, so a
        median of untraced calls is not the measure to hold them to).

        The caller's stream spins before the start event: work the call puts on another stream
        without waiting for the caller's starts during the spin, before the start event, while work
        joined to the caller's stream (cuDNN's own streams) starts after it. A marker before the
        end event closes the window: the side-stream rule accepts what ran between the two."""
        from rooftop.integrity.cupti import mark

        if self.device.type != "cuda":
            run()
            return
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        assert isinstance(self.clock, CudaEventClock)  # a CUDA device's clock
        torch.cuda._sleep(self.clock.cycles_for(max(PROFILE_HOLD_SECONDS, self.clock.hold)))
        start.record()
        run()
        mark()
        end.record()
        end.synchronize()
        reply.seconds = start.elapsed_time(end) / 1e3

    def _graphed(self, shape: str, model: Any, inputs: list) -> Any:
        try:
            return self.graphs.load(shape, model, inputs)
        except GraphCaptureFailed as exc:
            raise GateFailed(Status.runtime_error, f"[graphs] shape '{shape}': the call could not be captured in "
                             f"or replayed from a CUDA graph: {exc}")

    def _tampering(self) -> list[str]:
        replaced = self.guard.replaced()
        return [f"[tamper] the solution replaced {', '.join(replaced[:5])}, which the harness's own timing and "
                "reports rely on"] if replaced else []
