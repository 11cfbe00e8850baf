"""A deck's numbers: eager, torch.compile, SOTA and our own solutions on every shape, each as a
fraction of the datasheet roofline, with the geometric mean over shapes per problem (docs/DECK.md).

The baselines are timed in process by the same loop `rooftop baselines` uses; "ours" are the deck's
bundled Triton solutions (files named triton_*.py that expected.yaml marks correct on cuda),
evaluated end to end by the engine (sandboxed child, every shape's correctness seeds, paired timing
against eager). Every row is written to --json as soon as it exists, so a run cut short keeps what
it measured; --merge joins the files of separate runs.

    python benchmarks/deck_numbers.py [--deck hard] [--problems a,b] [--kinds eager,compile,sota]
                                      [--shapes s1,s2] [--no-solutions] [--compile-largest]
                                      [--json out.json] [--markdown out.md]
    python benchmarks/deck_numbers.py --merge a.json b.json --markdown out.md [--per-shape]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from rooftop.cli.common import progress_bar
from rooftop.measure.baselines import KINDS, time_baselines
from rooftop.measure.stopping import TimingPolicy
from rooftop.pipeline.evaluate import evaluate
from rooftop.problem.registry import bundled_names, expected_statuses, resolve
from rooftop.problem.spec import Problem
from rooftop.score.aggregate import geomean
from rooftop.score.hardware import GpuSpec, lookup
from rooftop.score.roofline import floor_seconds, roofline_fraction
from rooftop.solution.loader import load_solution
from rooftop.vocabulary import Settings


def our_solutions(problem: Problem) -> list[Path]:
    return [problem.root / "solutions" / entry for entry, statuses in sorted(expected_statuses(problem).items())
            if entry.startswith("triton_") and statuses.get("cuda") == "correct"]


def _row(problem: Problem, gpu: GpuSpec | None, shape, kind: str, seconds: float | None, error: str = "") -> dict:
    spec = problem.spec
    fraction = None
    if seconds:
        fraction = roofline_fraction(gpu, spec.peak_dtype or spec.dtype, spec.flops_for(shape),
                                     spec.bytes_for(shape), seconds)
    return {"problem": problem.name, "shape": shape.name, "split": getattr(shape.split, "value", shape.split),
            "kind": kind, "seconds": seconds, "fraction": fraction, "error": error}


def _roof_seconds(problem: Problem, gpu: GpuSpec | None, shape) -> float:
    spec = problem.spec
    return (floor_seconds(gpu, spec.peak_dtype or spec.dtype, spec.flops_for(shape), spec.bytes_for(shape)) or 0.0) \
        if gpu else (spec.bytes_for(shape) or 0.0)


def measure_deck(problems: list[str], kinds: tuple[str, ...], solutions: bool, policy: TimingPolicy,
                 sink: Path | None, only_shapes: frozenset[str] = frozenset(),
                 compile_largest: bool = False) -> list[dict]:
    rows: list[dict] = []
    gpu = lookup(torch.cuda.get_device_name())
    env = environment()

    def keep(new: list[dict]) -> None:
        rows.extend(new)
        if sink:
            sink.write_text(json.dumps({"environment": env, "rows": rows}, indent=1))

    with progress_bar(True) as bar:
        task = bar.add_task("deck", total=len(problems))
        for name in problems:
            problem = resolve(name)
            shapes = problem.spec.select("all")
            timed = [s for s in shapes if not only_shapes or s.name in only_shapes] if kinds else []
            largest = max(problem.spec.select("visible"), key=lambda s: _roof_seconds(problem, gpu, s))
            for shape in timed:  # one shape at a time: a run cut short keeps the rest
                here = tuple(k for k in kinds if k != "compile" or not compile_largest or shape is largest)
                records = time_baselines(problem, [shape], "cuda", here, policy=policy,
                                         progress=lambda step: bar.update(task, description=step))
                keep([_row(problem, gpu, shape, r.kind, r.stats.median if r.stats else None, r.error or "")
                      for r in records])
            for path in our_solutions(problem) if solutions else []:
                bar.update(task, description=f"{name}: {path.name}")
                verdict = evaluate(problem, load_solution(path),
                                   Settings(device="cuda", shapes="all", timing_policy=policy))
                found = {r.shape: r for r in verdict.shapes}
                new = []
                for shape in shapes:
                    result = found.get(shape.name)
                    ok = result is not None and result.correct and result.candidate is not None
                    error = "" if ok else f"{verdict.status.value}: {'; '.join(verdict.messages)[:300]}"
                    median = result.candidate.median if ok else None
                    new.append(_row(problem, gpu, shape, f"ours:{path.stem}", median, error))
                keep(new)
            bar.advance(task)
    return rows


def environment() -> dict:
    import triton

    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%d")}


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def markdown(env: dict, rows: list[dict], per_shape: bool) -> str:
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    kinds = [k for k in KINDS if any(r["kind"] == k for r in rows)]
    lines = [f"{env['device']}, torch {env['torch']}, Triton {env['triton']}, CUDA {env['cuda']}, {env['date']}.",
             "", "Geometric mean over shapes of the fraction of the datasheet roofline (1.0 = at the roof); "
             "(n/m): the kind ran correctly on n of the problem's m shapes.", "",
             "| problem | " + " | ".join(kinds + ["ours", "ours vs eager", "ours vs best baseline", "our solution"])
             + " |", "|---|" + "---:|" * (len(kinds) + 3) + "---|"]
    for name in problems:
        mine = [r for r in rows if r["problem"] == name]
        shapes = list(dict.fromkeys(r["shape"] for r in mine))
        best = _best_ours(mine)
        cells = []
        for kind in kinds + ([best] if best else []):
            got = [r["fraction"] for r in mine if r["kind"] == kind and r["fraction"]]
            ran = [r for r in mine if r["kind"] == kind]
            cell = _fmt(geomean(got)) if ran else "—"
            if ran and len(got) != len(shapes):
                cell += f" ({len(got)}/{len(shapes)})"
            if not got and ran:
                cell = "n/a" if any(r["error"].startswith(("not available", "not measured")) for r in ran) else "fails"
            cells.append(cell)
        while len(cells) < len(kinds) + 1:
            cells.append("—")
        cells += [_speedup(mine, best, ["eager"]), _speedup(mine, best, kinds), best[5:] if best else "—"]
        lines.append(f"| {name.split('/')[-1]} | " + " | ".join(cells) + " |")
    if per_shape:
        lines += ["", "| problem | shape | split | " + " | ".join(kinds + ["ours"]) + " |",
                  "|---|---|---|" + "---:|" * (len(kinds) + 1)]
        for name in problems:
            mine = [r for r in rows if r["problem"] == name]
            best = _best_ours(mine)
            for shape in dict.fromkeys(r["shape"] for r in mine):
                cells = []
                for kind in kinds + [best]:
                    found = [r for r in mine if r["shape"] == shape and r["kind"] == kind]
                    r = found[0] if found else None
                    cells.append("—" if r is None or not r["seconds"] else
                                 f"{r['seconds'] * 1e6:,.1f} µs ({_fmt(r['fraction'])})")
                split = next(r["split"] for r in mine if r["shape"] == shape)
                lines.append(f"| {name.split('/')[-1]} | {shape} | {split} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def largest_table(rows: list[dict]) -> str:
    """Per problem, the shape where torch.compile was timed (the largest visible one, --compile-largest):
    eager and compile there, and eager's geometric mean over every shape."""
    lines = ["| level | problem | dtype | regime | shapes (visible + held-out) | largest visible shape | eager "
             "| compile | compile vs eager | eager, all shapes |", "|---|---|---|---|---:|---|---:|---:|---:|---:|"]
    for name in dict.fromkeys(r["problem"] for r in rows):
        problem = resolve(name)
        spec = problem.spec
        mine = [r for r in rows if r["problem"] == name]
        compiled = next((r for r in mine if r["kind"] == "compile"), None)
        shape = compiled["shape"] if compiled else max(spec.select("visible"), key=spec.bytes_for).name
        eager = next((r for r in mine if r["kind"] == "eager" and r["shape"] == shape), None)

        def cell(r: dict | None) -> str:
            if r is None or not r["seconds"]:
                return "n/a" if r is not None and r["error"].startswith(("not available", "not measured")) \
                    else ("fails" if r is not None else "—")
            return f"{r['seconds'] * 1e6:,.0f} µs ({_fmt(r['fraction'], 2)})"

        ratio = "—"
        if eager and compiled and eager["seconds"] and compiled["seconds"]:
            ratio = f"{eager['seconds'] / compiled['seconds']:.2f}x"
        fractions = [r["fraction"] for r in mine if r["kind"] == "eager" and r["fraction"]]
        level = name.split("/")[-2]
        lines.append(f"| {level} | {name.split('/')[-1]} | {spec.dtype} | {spec.regime} | "
                     f"{len(spec.select('visible'))} + {len(spec.select('held_out'))} | {shape} | {cell(eager)} | "
                     f"{cell(compiled)} | {ratio} | {_fmt(geomean(fractions))} |")
    return "\n".join(lines) + "\n"


def _best_ours(mine: list[dict]) -> str | None:
    """The problem's solution that is shown: the one correct on most shapes, then the fastest."""
    ours = {r["kind"] for r in mine if r["kind"].startswith("ours:")}

    def rank(kind: str) -> tuple[int, float]:
        got = [r["fraction"] for r in mine if r["kind"] == kind and r["fraction"]]
        return len(got), geomean(got) or 0.0

    return max(sorted(ours), key=rank) if ours else None


def _speedup(mine: list[dict], ours: str | None, against: list[str]) -> str:
    """Geomean over shapes of (best of `against`) / ours, where both have a time."""
    ratios = []
    for shape in dict.fromkeys(r["shape"] for r in mine):
        times = {r["kind"]: r["seconds"] for r in mine if r["shape"] == shape and r["seconds"]}
        mine_t = times.get(ours)
        base = [times[k] for k in against if k in times]
        if mine_t and base:
            ratios.append(min(base) / mine_t)
    value = geomean(ratios)
    return "—" if value is None else f"{value:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deck", default="hard")
    parser.add_argument("--problems", default="", help="comma-separated problem names (default: the whole deck)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="baselines to time ('' for none)")
    parser.add_argument("--shapes", default="", help="time the baselines on these shapes only (comma-separated; "
                        "solutions are always judged on every shape)")
    parser.add_argument("--no-solutions", action="store_true")
    parser.add_argument("--compile-largest", action="store_true", help="time torch.compile on each problem's "
                        "largest visible shape only (each shape compiles anew: minutes a deck)")
    parser.add_argument("--max-seconds", type=float, default=5.0, help="measured seconds per timing, at most")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--per-shape", action="store_true")
    parser.add_argument("--largest", action="store_true", help="render the largest-visible-shape table "
                        "(for runs made with --compile-largest)")
    parser.add_argument("--merge", type=Path, nargs="+", help="render the --json files of separate runs")
    args = parser.parse_args()
    if args.merge:
        docs = [json.loads(p.read_text()) for p in args.merge]
        env, rows = docs[0]["environment"], [r for d in docs for r in d["rows"]]
    else:
        names = [n for n in args.problems.split(",") if n] or list(bundled_names(args.deck))
        names = [n if "/" in n else f"{args.deck}/{n}" for n in names]
        kinds = tuple(k for k in args.kinds.split(",") if k)
        policy = TimingPolicy(max_seconds=args.max_seconds, max_wall_seconds=4 * args.max_seconds + 10)
        only = frozenset(n for n in args.shapes.split(",") if n)
        unknown = only - {shape.name for n in names for shape in resolve(n).spec.select("all")}
        if unknown:
            parser.error(f"--shapes: no shape named {', '.join(sorted(unknown))} in {', '.join(names)}")
        if not torch.cuda.is_available():
            parser.error("measuring needs a CUDA GPU (--merge renders saved runs anywhere)")
        env = environment()
        rows = measure_deck(names, kinds, not args.no_solutions, policy, args.json, only, args.compile_largest)
    text = largest_table(rows) if args.largest else markdown(env, rows, args.per_shape)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
