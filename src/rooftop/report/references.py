"""Where the references (eager, torch.compile, SOTA) stand against the roof, shape by shape.

A shape's roofline time (the floor) is read back from verdicts: roofline fraction x measured
time, which is the floor the score gate used. Where no verdict timed the shape, it is computed
again from the problem's spec and the device's datasheet. A reference's time is the stored
baseline (`rooftop baselines`, newest row wins), else the median of what verdicts saw: the paired
eager reference of every timed shape, and the stored baselines applied to it.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field

from pydantic import BaseModel

from rooftop.problem.registry import resolve
from rooftop.problem.spec import ProblemSpec
from rooftop.report.collect import Entry
from rooftop.score.aggregate import geomean
from rooftop.score.hardware import GpuSpec, lookup
from rooftop.score.roofline import floor_seconds
from rooftop.store.baselines import TimedBaseline

KIND_ORDER = ("eager", "compile", "compile:max-autotune", "sota")


def kind_label(kind: str, mode: str) -> str:
    return f"compile:{mode}" if kind == "compile" and mode not in ("", "default") else kind


def kind_key(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


@dataclass
class ShapeFacts:
    """One shape of one problem on one device: its work, its floor and the references' times."""

    flops: float | None = None
    bytes: float | None = None
    floors: list[float] = field(default_factory=list)  # seconds, one per verdict that scored it
    spec_floor: float | None = None
    stored: dict[str, float] = field(default_factory=dict)  # kind -> seconds, from the baselines table
    seen: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds, from verdicts

    @property
    def floor(self) -> float | None:
        return statistics.median(self.floors) if self.floors else self.spec_floor

    def seconds(self, kind: str) -> tuple[float, str] | None:
        if kind in self.stored:
            return self.stored[kind], "baselines"
        times = self.seen.get(kind)
        return (statistics.median(times), "verdicts") if times else None


@dataclass
class Roofs:
    """The device's roofs for a problem: dense peak (FLOP/s) for its dtype and DRAM bandwidth (B/s)."""

    gpu: GpuSpec | None
    dtype: str | None
    peak: float | None
    bandwidth: float | None


@dataclass
class ProblemFacts:
    problem: str
    device_name: str
    device: str  # "cuda" or "cpu"
    shapes: dict[str, ShapeFacts] = field(default_factory=dict)

    def shape(self, name: str) -> ShapeFacts:
        return self.shapes.setdefault(name, ShapeFacts())

    def kinds(self) -> list[str]:
        found = {k for s in self.shapes.values() for k in [*s.stored, *s.seen]}
        return sorted(found, key=kind_key)

    def roofs(self) -> Roofs:
        gpu = lookup(self.device_name) if self.device == "cuda" else None
        spec = problem_spec(self.problem)
        dtype = (spec.peak_dtype or spec.dtype) if spec else None
        peak = gpu.peak_flops(dtype) if gpu and dtype else None
        if gpu and peak is None:  # no spec: a compute-bound shape's floor gives the peak it was read against
            bound = [s.flops / s.floor for s in self.shapes.values()
                     if s.flops and s.bytes and s.floor and s.floor > 1.001 * s.bytes / gpu.dram_bytes_per_s]
            peak = max(bound) if bound else None
        return Roofs(gpu, dtype, peak, gpu.dram_bytes_per_s if gpu else None)


class ReferenceCell(BaseModel):
    """A reference on one problem: geometric means over the shapes it was timed on."""

    roofline: float | None = None
    speedup_over_eager: float | None = None
    shapes: int = 0  # shapes with both a time and a floor: what the roofline is a mean over
    source: str = "-"  # baselines (the table), verdicts, or both


@functools.cache
def problem_spec(problem: str) -> ProblemSpec | None:
    """The problem's spec where its name still resolves (a deck name, or a folder that exists)."""
    try:
        return resolve(problem).spec
    except Exception:
        return None


def gather(entries: list[Entry], baselines: list[TimedBaseline]) -> dict[tuple[str, str], ProblemFacts]:
    """Facts per (problem, device name), from the entries' verdicts and the stored baselines."""
    facts: dict[tuple[str, str], ProblemFacts] = {}
    versions: dict[str, int] = {}
    for entry in entries:
        verdict = entry.verdict
        env = verdict.environment if verdict else None
        if verdict is None or env is None or verdict.graphs:
            continue
        versions[entry.problem] = max(versions.get(entry.problem, 0), verdict.problem_version)
        problem = facts.setdefault((entry.problem, env.device_name),
                                   ProblemFacts(entry.problem, env.device_name, env.device))
        for result in verdict.shapes:
            shape = problem.shape(result.shape)
            shape.flops = result.flops if result.flops is not None else shape.flops
            shape.bytes = result.bytes if result.bytes is not None else shape.bytes
            if "contention" in result.flags:
                continue
            if result.candidate is not None and result.candidate.median > 0 and result.roofline_fraction:
                shape.floors.append(result.roofline_fraction * result.candidate.median)
            if result.reference is not None and result.reference.median > 0:
                shape.seen.setdefault("eager", []).append(result.reference.median)
            for kind, seconds in result.baselines.items():
                if kind != "eager" and seconds > 0:
                    shape.seen.setdefault(kind, []).append(seconds)
    for row in baselines:
        if row.problem in versions and row.problem_version != versions[row.problem]:
            continue
        problem = facts.setdefault((row.problem, row.device_name), ProblemFacts(row.problem, row.device_name,
                                                                                row.device))
        problem.shape(row.shape).stored[kind_label(row.kind, row.mode)] = row.median_s
    for problem in facts.values():
        _fill_from_spec(problem)
    return facts


def _fill_from_spec(problem: ProblemFacts) -> None:
    """Work and floors the verdicts did not give, from the spec and the datasheet."""
    spec = problem_spec(problem.problem)
    if spec is None:
        return
    gpu = lookup(problem.device_name) if problem.device == "cuda" else None
    by_name = {s.name: s for s in spec.all_shapes()}
    for name, shape in problem.shapes.items():
        if name not in by_name:
            continue
        shape.flops = shape.flops if shape.flops is not None else spec.flops_for(by_name[name])
        shape.bytes = shape.bytes if shape.bytes is not None else spec.bytes_for(by_name[name])
        if gpu is not None:
            shape.spec_floor = floor_seconds(gpu, spec.peak_dtype or spec.dtype, shape.flops, shape.bytes)


def reference_cells(problem: ProblemFacts) -> dict[str, ReferenceCell]:
    """Each reference's roofline fraction and speedup over eager on this problem."""
    cells = {}
    for kind in problem.kinds():
        fractions, speedups, sources = [], [], set()
        for shape in problem.shapes.values():
            timed = shape.seconds(kind)
            if timed is None:
                continue
            seconds, source = timed
            sources.add(source)
            eager = shape.seconds("eager")
            if eager is not None and kind != "eager":
                speedups.append(eager[0] / seconds)
            if shape.floor is not None:
                fractions.append(shape.floor / seconds)
        cells[kind] = ReferenceCell(roofline=geomean(fractions), speedup_over_eager=geomean(speedups),
                                    shapes=len(fractions), source="+".join(sorted(sources)) or "-")
    return cells
