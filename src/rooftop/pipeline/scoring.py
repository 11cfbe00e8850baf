"""The score gate: throughput, roofline fraction and speedup per shape, then the summary.

Runs on the trusted side from raw samples; the candidate never computes its own numbers.
"""

from __future__ import annotations

from rooftop.pipeline.verdict import Gate, GateRecord, Summary, Verdict
from rooftop.problem.spec import Problem
from rooftop.score.aggregate import geomean
from rooftop.score.hardware import lookup
from rooftop.score.roofline import implausible, roofline_fraction


def score(verdict: Verdict, problem: Problem, timed: bool) -> list[str]:
    """Fill in the figures; return the shapes whose times the hardware could not have produced."""
    spec = problem.spec
    env = verdict.environment
    gpu = lookup(env.device_name) if env is not None and env.device == "cuda" else None
    peak_dtype = spec.peak_dtype or spec.dtype
    shapes = {s.name: s for s in spec.all_shapes()}
    impossible = []
    for result in verdict.shapes:
        shape = shapes[result.shape]
        result.flops, result.bytes = spec.flops_for(shape), spec.bytes_for(shape)
        if not timed or result.candidate is None or result.reference is None:
            continue
        seconds = result.candidate.median
        if seconds > 0:
            result.tflops = result.flops / seconds / 1e12 if result.flops else None
            result.gbps = result.bytes / seconds / 1e9 if result.bytes else None
            result.speedup = result.reference.median / seconds
        result.roofline_fraction = roofline_fraction(gpu, peak_dtype, result.flops, result.bytes, seconds)
        why = implausible(gpu, peak_dtype, result.flops, result.bytes, seconds)
        if why:
            impossible.append(f"[roofline] shape '{result.shape}': {why}; work ran outside the timed call")
    verdict.summary = Summary(
        shapes=len(verdict.shapes),
        correct_shapes=sum(1 for r in verdict.shapes if r.correct),
        geomean_speedup=geomean(r.speedup for r in verdict.shapes),
        geomean_roofline=geomean(r.roofline_fraction for r in verdict.shapes),
        geomean_tflops=geomean(r.tflops for r in verdict.shapes),
        geomean_gbps=geomean(r.gbps for r in verdict.shapes),
    )
    detail = f"datasheet: {gpu.name}" if gpu else ("no datasheet entry for this device: no roofline"
                                                    if env and env.device == "cuda" else "CPU: no roofline")
    verdict.gates.append(GateRecord(gate=Gate.score, ok=not impossible, detail=detail))
    return impossible
