"""One call of the candidate, as the child runs it: the same path for every call, checked or timed.

The inputs come from the seed in the request; the call runs under the clock (or the profiler, or
as a CUDA-graph replay); then the child reads back what the trusted side asked for. Runs only in
the evaluation child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rooftop.check.compare import as_outputs, storage_overlaps
from rooftop.check.inputs import InputPool, device_memory, modified_inputs
from rooftop.check.probe import probe_output, probe_outputs
from rooftop.check.tensorfile import dump_tensors
from rooftop.integrity.audit import Audit, TamperGuard
from rooftop.measure.graphs import GraphCache, GraphCaptureFailed
from rooftop.measure.timer import clock_for
from rooftop.pipeline.job import EvalJob
from rooftop.pipeline.protocol import CallReply, CallRequest, Kernel
from rooftop.problem.instance import ProblemInstance
from rooftop.values import clone, tensors
from rooftop.verdict import GateFailed, Status


class CallRunner:
    def __init__(self, job: EvalJob, instance: ProblemInstance, models: dict[str, Any], guard: TamperGuard) -> None:
        self.job, self.instance, self.models, self.guard = job, instance, models, guard
        self.device = instance.device
        self.shapes = {s.name: s for s in job.shapes}
        self.clock = clock_for(self.device)
        self.pool = InputPool(device_memory(self.device))
        self.graphs = GraphCache()
        self.reused: dict[tuple[str, int], list] = {}  # checks off: a fixed pool, as naive harnesses do

    def call(self, request: CallRequest) -> CallReply:
        shape, model = self.shapes[request.shape], self.models[request.shape]
        inputs = self._inputs(request)
        reply = CallReply()
        if request.check_inputs:
            reply.inputs = [probe_output(x) for x in inputs]
        pristine = clone(inputs) if request.check_inputs else None
        audit = Audit(count_compute=request.audit and not self.job.problem.spec.policy.allow_torch_ops)
        result, inputs = self._run(request, shape.name, model, inputs, audit, reply)
        reply.findings = audit.findings() + self._tampering()
        if request.probe:
            reply.outputs = probe_outputs(result)
        outs = [t for t in tensors(result) if type(t) is torch.Tensor]
        reply.aliased_inputs = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)
                                and any(storage_overlaps(o, x) for o in outs)]
        if pristine is not None:
            reply.changed_inputs = modified_inputs(pristine, inputs)
        if request.full:
            values = as_outputs(result)
            if all(type(v) is torch.Tensor for v in values):
                reply.dump = dump_tensors(Path.cwd() / "outputs.bin", values)
        return reply

    def _inputs(self, request: CallRequest) -> list[Any]:
        shape = self.shapes[request.shape]
        key = (shape.name, request.seed)
        if request.reuse and key in self.reused:
            return self.reused[key]
        inputs = self.instance.inputs(shape, request.seed)
        if request.reuse:
            self.reused[key] = inputs
        else:
            self.pool.admit(inputs, shape.name)
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
                try:
                    _, kernels, reply.stream = profile_kernels(run)
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
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        return box["result"], inputs

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
