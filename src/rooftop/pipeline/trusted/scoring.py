"""The score gate: throughput, roofline fraction and speedup per shape, then the summary.

Runs on the trusted side from raw samples; the candidate never computes its own numbers.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rooftop.measure.measurement import TimingStats, ratio_interval
from rooftop.measure.spread import default_spread, spread_of, widen
from rooftop.pipeline.trusted.outcomes import Scored
from rooftop.problem.spec import Problem
from rooftop.score.aggregate import geomean
from rooftop.score.hardware import lookup
from rooftop.score.roofline import implausible, roofline_fraction
from rooftop.verdict import Gate, ShapeFigures, ShapeResult, Summary, Verdict

if TYPE_CHECKING:
    from rooftop.store.db import Store


def score(verdict: Verdict, problem: Problem, timed: bool) -> tuple[Scored, list[str]]:
    """Each shape's figures from the verdict's samples, and the summary over them (written into the
    verdict by `outcomes.assemble`); the shapes whose times the hardware could not have produced."""
    spec = problem.spec
    env = verdict.environment
    gpu = lookup(env.device_name) if env is not None and env.device == "cuda" else None
    peak_dtype = spec.peak_dtype or spec.dtype
    shapes = {s.name: s for s in spec.all_shapes()}
    detail = f"datasheet: {gpu.name}" if gpu else ("no datasheet entry for this device: no roofline"
                                                    if env and env.device == "cuda" else "CPU: no roofline")
    scored, impossible = Scored(gate=Gate.score, detail=detail), []
    for result in verdict.shapes:
        shape = shapes[result.shape]
        figures = scored.figures[result.shape] = ShapeFigures(flops=spec.flops_for(shape), bytes=spec.bytes_for(shape))
        if not timed or result.candidate is None or result.reference is None:
            continue
        seconds = result.candidate.median
        if seconds > 0:
            figures.tflops = figures.flops / seconds / 1e12 if figures.flops else None
            figures.gbps = figures.bytes / seconds / 1e9 if figures.bytes else None
        spread = default_spread(result.flags) if env is not None and env.device == "cuda" else (None, "")
        for name, value in paired_speedup(result.candidate, result.reference, *spread).items():
            setattr(figures, name, value)
        figures.roofline_fraction = roofline_fraction(gpu, peak_dtype, figures.flops, figures.bytes, seconds)
        why = implausible(gpu, peak_dtype, figures.flops, figures.bytes, seconds)
        if why and spec.figures == "estimated":
            # counted flops are a direct algorithm's (an FFT or Winograd convolution does fewer) and
            # an input read in part counts whole: an estimate is no floor to reject a time against
            scored.flags[result.shape] = ["roofline"]
            scored.warnings.append(f"[roofline] shape '{result.shape}': {why}, against the flops and bytes rooftop "
                                   "estimated for this problem; an estimate is not a floor, so this is not "
                                   "taken as proof that work ran outside the timed call")
        elif why:
            impossible.append(f"[roofline] shape '{result.shape}': {why}; work ran outside the timed call")
        why = implausible(gpu, peak_dtype, figures.flops, figures.bytes, result.reference.median)
        if why:  # the trusted reference cannot cheat: the datasheet entry or the problem's formulas are wrong
            scored.warnings.append(f"[roofline] shape '{result.shape}': the eager reference's {why}; check the "
                                   "problem's flops/bytes formulas and the datasheet entry")
    merged = [_with_figures(result, scored.figures.get(result.shape), scored.flags.get(result.shape, []))
              for result in verdict.shapes]
    scored.summary = summary_of(merged)
    return scored, impossible


def _with_figures(result: ShapeResult, figures: ShapeFigures | None, flags: list[str]) -> ShapeResult:
    """The shape as it will read once the figures are in (what the summary is taken over)."""
    if figures is None:
        return result
    update = {name: getattr(figures, name) for name in ShapeFigures.model_fields}
    return result.model_copy(update={**update, "flags": result.flags + flags,
                                     "speedups": {**result.speedups, **figures.speedups}})


def paired_speedup(candidate: TimingStats, reference: TimingStats, spread: float | None,
                   source: str) -> dict[str, Any]:
    """The paired speedup over eager, its interval widened by the between-process `spread`
    (measure/spread.py) where there is one, and where that came from: the fields to set (none
    without enough pairs)."""
    paired = ratio_interval(reference.samples, candidate.samples)
    if paired is None:
        return {}
    speedup, low, high = paired
    if spread is not None:
        low, high = widen(speedup, low, high, spread)
    return {"speedup": speedup, "speedups": {"eager": speedup}, "speedup_low": low, "speedup_high": high,
            "speedup_spread": spread, "spread_source": source if spread is not None else ""}


def set_speedup(result: ShapeResult, spread: float | None, source: str) -> None:
    """A stored self-check's spread applied to a verdict already made (`apply_baselines`)."""
    assert result.candidate is not None and result.reference is not None
    for name, value in paired_speedup(result.candidate, result.reference, spread, source).items():
        if name == "speedups":
            result.speedups.update(value)
        else:
            setattr(result, name, value)


def summary_of(shapes: list[ShapeResult]) -> Summary:
    """Geometric means over shapes; a reference counts only when every timed shape has its figure.
    A shape timed on a shared CPU (flag `contention`) is left out: its speedup measured a neighbour."""
    trusted = [r for r in shapes if "contention" not in r.flags]
    timed = [r for r in trusted if r.candidate is not None]
    kinds = sorted({k for r in timed for k in r.speedups})
    return Summary(
        shapes=len(shapes),
        correct_shapes=sum(1 for r in shapes if r.correct),
        geomean_speedup=geomean(r.speedup for r in trusted),
        geomean_speedups={k: g for k in kinds if all(k in r.speedups for r in timed)
                          and (g := geomean(r.speedups[k] for r in timed)) is not None},
        geomean_roofline=geomean(r.roofline_fraction for r in trusted),
        geomean_tflops=geomean(r.tflops for r in trusted),
        geomean_gbps=geomean(r.gbps for r in trusted),
    )


def summarize(verdict: Verdict) -> None:
    verdict.summary = summary_of(verdict.shapes)


def baseline_label(kind: str, mode: str) -> str:
    return f"compile:{mode}" if kind == "compile" and mode not in ("", "default") else kind


def apply_baselines(verdict: Verdict, records: list) -> None:
    """Speedups over the stored references (compile, sota); eager stays the live, paired one, its
    interval widened by the stored self-checks' spread between processes where there are some.

    A record counts only for the same shape with the same parameters, measured in the same mode
    (events or graphs) on the same platform, which is how the store looks them up, and on a GPU
    only when it was timed under the kernel tracer exactly when the candidate was."""
    by_shape: dict[tuple[str, str], list] = {}
    traced = verdict.traced_calls > 0
    stale = sorted({r.kind for r in records if r.kind != "self" and r.platform.device == "cuda"
                    and bool(r.traced) != traced})
    for record in records:
        if record.kind in stale:
            continue
        by_shape.setdefault((record.shape, record.params_key), []).append(record)
    if stale:
        verdict.warnings.append(f"[baselines] the stored {', '.join(stale)} baselines were timed "
                                f"{'without' if traced else 'under'} the kernel tracer this candidate's calls "
                                f"{'carry' if traced else 'did not carry'} (up to 5 % apart on memory-bound "
                                "kernels), so they are not applied; `rooftop baselines` times them again")
    for result in verdict.shapes:
        if result.candidate is None or not result.candidate.n or result.candidate.median <= 0:
            continue
        key = (result.shape, json.dumps(result.params, sort_keys=True))
        for record in by_shape.get(key, []):
            spread = spread_of(record.speedups) if record.kind == "self" else None
            if spread is not None and result.reference is not None:
                set_speedup(result, spread, f"{len(record.speedups)} self-checks in fresh processes")
            if record.stats is None or not record.stats.n:
                continue
            label = baseline_label(record.kind, record.mode)
            result.baselines[label] = record.stats.median
            if record.kind != "eager":
                result.speedups[label] = record.stats.median / result.candidate.median
    summarize(verdict)


def attach_stored_baselines(verdict: Verdict, store: Store) -> int:
    """Look up the stored baselines for the verdict's platform and problem version and apply them;
    returns how many records applied (0: none stored, `rooftop baselines` makes them)."""
    from rooftop.measure.baselines import Platform

    env = verdict.environment
    if env is None or not any(r.candidate for r in verdict.shapes):
        return 0
    platform = Platform(device=env.device, device_name=env.device_name, torch=env.torch, triton=env.triton,
                        cuda=env.cuda)
    records = store.baselines.newest(platform, verdict.problem, verdict.problem_version, verdict.graphs)
    apply_baselines(verdict, records)
    if verdict.baseline == "starter":  # the reward's speedup is over the starter: known only now
        from rooftop.score.reward import compute_reward

        if "starter" not in verdict.summary.geomean_speedups and verdict.status.value == "correct":
            verdict.messages.append("no starter baseline stored for this platform: the speedup over the starter "
                                    "is unknown (`rooftop baselines PROBLEM --kinds starter` records it)")
        verdict.reward = compute_reward(verdict, verdict.reward_fn)
    return len(records)
