"""Set-up: what the trusted side makes ready before the first gate that runs the solution.

It starts the child (sandboxed); while the child's interpreter and torch come up, it sets up the
trusted reference and plans device memory (a shape that cannot fit is refused here, before any
candidate code runs); then it hands the child its job and, before any candidate code runs,
measures the harness's own cost per call (the wall floor's baseline) and sets the reference's
tracer to the child's. The gate runner (pipeline/trusted/runner.py) runs it once, under the
deadline of the first gate that needs it, so a failure here is that gate's (the build gate's).
"""

from __future__ import annotations

import time
from typing import Any

from rooftop.pipeline.trusted.calls import harness_costs
from rooftop.pipeline.trusted.context import Evaluation
from rooftop.pipeline.trusted.reference import TrustedReference
from rooftop.pipeline.trusted.spawn import start_child
from rooftop.pipeline.trusted.timing import FLOOR_CALLS
from rooftop.pipeline.wire import BuildReply, JobReply, JobRequest, LoadReply
from rooftop.verdict import GateFailed


def set_up(ev: Evaluation) -> None:
    """The child, the trusted reference, the memory plan and the harness's cost, for an evaluation."""
    started = time.perf_counter()
    ev.setup.child = start_child(ev)
    reference = ev.setup.reference = TrustedReference(ev.job.problem, ev.device, ev.job.weights_seed)
    if ev.device == "cuda":
        import torch

        from rooftop.pipeline.trusted.memory import plan_pools

        free, _ = torch.cuda.mem_get_info(reference.device)
        try:
            ev.setup.pool_sets = plan_pools(reference.instance, ev.shapes, free)
        except GateFailed:
            # memory of a process that has just ended (the previous evaluation's child) comes
            # back to the driver a moment after it exits: refuse only once it has stopped growing
            ev.setup.pool_sets = plan_pools(reference.instance, ev.shapes, _settled_free_memory(reference.device, free))
        _warm_fused_checks(ev)
    ev.phases["trusted_setup"] = time.perf_counter() - started
    ev.setup.child.hello(ev.state.deadline)
    ev.phases["child_start"] = time.perf_counter() - started
    hand_over(ev)


def set_up_build_only(ev: Evaluation) -> None:
    """A child that only builds (pipeline/prebuild.py): no reference, no device memory, no GPU."""
    ev.setup.child = start_child(ev, build_only=True)
    ev.setup.child.hello(ev.state.deadline)
    hand_over(ev)


def hand_over(ev: Evaluation) -> None:
    """Give the started child its job; what its reply says of its environment, timer and tracer."""
    assert ev.setup.child is not None
    reply, _ = ev.setup.child.request(JobRequest(job=ev.job), JobReply, ev.state.deadline)
    raise_failure(reply)
    if reply.environment is None:  # a build-stage child, which sees no GPU to describe
        return
    ev.verdict.environment = reply.environment
    if reply.unsealed:
        ev.verdict.warnings.append(f"[sealed] the timer could not be sealed in the evaluation child "
                                   f"({reply.unsealed}); its times rest on the trusted wall floor alone")
    ev.trace.untraced = reply.untraced
    if ev.device == "cuda" and ev.settings.checks and reply.untraced:
        ev.verdict.warnings.append(f"[trace] the calls' kernels were not traced ({reply.untraced}): work on "
                                   "side streams and forged spans were not checked")
    if ev.device == "cuda" and ev.setup.reference is not None:
        trace_reference(ev, traced=ev.settings.checks and not reply.untraced)
    if ev.settings.timing and ev.settings.checks:  # the harness's cost per call, before any candidate code
        for shape in ev.shapes:
            ev.setup.harness_cost[shape.name] = harness_costs(ev, shape, FLOOR_CALLS)


def raise_failure(reply: JobReply | BuildReply | LoadReply) -> None:
    """A child's reply that reports a failure ends the gate with it."""
    if reply.failure is not None:
        raise GateFailed(reply.failure.status, *reply.failure.messages, cached=reply.failure.cached)


def trace_reference(ev: Evaluation, traced: bool) -> None:
    """The reference's timed calls carry the kernel tracer exactly when the candidate's do; where
    the trusted side cannot attach it, the verdict says which way that leans."""
    from rooftop.measure.timer import native_timer

    assert ev.setup.reference is not None
    ev.setup.reference.traced = traced
    timer, why = native_timer(ev.setup.reference.device)
    if traced and (timer is None or why):
        ev.verdict.warnings.append(f"[trace] the reference's timed calls could not carry the kernel tracer the "
                                   f"candidate's carry ({why}); CUPTI's kernel records cost memory-bound kernels up "
                                   "to 5 % of their time, so the speedup leans against the candidate by as much")


def _warm_fused_checks(ev: Evaluation) -> None:
    """Outputs of gigabytes are compared by Triton kernels (check/fused.py): load them now, while
    the child's interpreter starts, rather than in the first correctness call."""
    from rooftop.check import fused
    from rooftop.pipeline.trusted.memory import input_bytes

    assert ev.setup.reference is not None
    if any((input_bytes(ev.setup.reference.instance, s) or 0) >= 4 * fused.MIN_ELEMENTS for s in ev.shapes):
        fused.warm(ev.setup.reference.device)


def _settled_free_memory(device: Any, free: int, wait: float = 5.0, every: float = 0.25) -> int:
    """The most free device memory seen over `wait` seconds (asked only when the plan failed)."""
    import torch

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(every)
        free = max(free, torch.cuda.mem_get_info(device)[0])
    return free
