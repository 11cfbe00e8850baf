"""`rooftop baselines` and `rooftop calibrate`: the references and the ceilings scores are read against."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from rooftop.cli.common import (
    DbOpt,
    Device,
    DeviceOpt,
    GraphsOpt,
    JsonOpt,
    ShapesOpt,
    out,
    progress_bar,
)
from rooftop.errors import UserError
from rooftop.measure.references import BaselineKind, CompileMode

if TYPE_CHECKING:
    from rooftop.measure.baselines import BaselineRecord
    from rooftop.problem.spec import Problem


def register(app: typer.Typer) -> None:
    app.command("baselines")(baselines_command)
    app.command("calibrate")(calibrate_command)


def baselines_command(
    target: Annotated[str, typer.Argument(
        metavar="TARGET", help="problem folder or '<deck>/<name>', or a bundled deck name")],
    kinds: Annotated[str, typer.Option(
        "--kinds", metavar="KIND[,KIND]",
        help=f"comma-separated references to time: {', '.join(BaselineKind)}")] = ",".join(BaselineKind),
    compile_mode: Annotated[CompileMode, typer.Option(
        "--compile-mode", help="torch.compile mode of the compile reference")] = CompileMode.default,
    device: DeviceOpt = Device.auto,
    shapes: ShapesOpt = "auto",
    graphs: GraphsOpt = False,
    self_checks: Annotated[int, typer.Option(
        "--self-checks", min=2, metavar="N",
        help="fresh self-checks per problem for the `self` kind (how far a speedup moves between processes)")] = 3,
    json_output: JsonOpt = False,
    db: DbOpt = Path("rooftop.db"),
) -> None:
    """Time the references (eager, torch.compile, the problem's sota.py, a kernel-to-kernel task's
    starter), judge the reference against itself in fresh processes (`self`: the spread every
    later interval is widened by), and store them for reuse."""
    chosen = _baseline_kinds(kinds)
    problems = _targets(target)  # before torch is imported: a mistyped target is answered at once
    from rooftop.batch.spread import spread_records
    from rooftop.measure.baselines import time_baselines
    from rooftop.pipeline.evaluate import resolve_device, select_shapes
    from rooftop.store.db import Store

    dev = resolve_device(Device(device).value)
    if graphs and dev != "cuda":
        raise UserError("--graphs: CUDA graphs need a GPU")
    store = Store(db)
    records = []
    with progress_bar(not json_output) as bar:
        task = bar.add_task("baselines", total=None)
        for problem in problems:
            _, selected = select_shapes(problem, shapes, dev)
            def step(what: str) -> None:
                bar.update(task, description=what)

            made = time_baselines(problem, selected, dev, chosen, CompileMode(compile_mode).value, graphs,
                                  progress=step)
            if "self" in chosen and not graphs:
                made += spread_records(problem, selected, dev, self_checks, progress=step)
            store.baselines.save(made)  # each problem's records are kept as soon as they exist
            records += [(problem, r) for r in made]
    store.close()
    if json_output:
        sys.stdout.write(json.dumps([json.loads(r.model_dump_json()) for _, r in records], indent=2) + "\n")
        return
    out.print(_baselines_table(records, dev))
    out.print(f"[dim]stored in {db}; evaluations on this platform reuse them[/dim]")


def _baseline_kinds(kinds: str) -> tuple[str, ...]:
    chosen = tuple(k.strip() for k in kinds.split(",") if k.strip())
    known = {k.value for k in BaselineKind}
    if not chosen or any(k not in known for k in chosen):
        raise UserError(f"--kinds: expected a comma-separated subset of {', '.join(BaselineKind)} (got '{kinds}')")
    return chosen


def _targets(target: str) -> list[Problem]:
    """A deck's problems (bundled, imported such as 'kernelbench/level1', or a folder of problem
    folders), or the one problem a path or name gives."""
    from rooftop.problem.registry import resolve_many

    return resolve_many(target)


def _baselines_table(records: list[tuple[Problem, BaselineRecord]], dev: str) -> Table:
    from rooftop.cli.render import seconds
    from rooftop.score.hardware import lookup
    from rooftop.score.roofline import roofline_fraction

    table = Table(title=f"baselines on {records[0][1].platform.device_name if records else dev}", header_style="bold")
    for col in ("problem", "shape", "kind", "median", "±", "n", "stop", "TFLOP/s", "GB/s", "roof", "note"):
        table.add_column(col, justify="left" if col in ("problem", "shape", "kind", "note") else "right")
    for problem, r in records:
        spec, shape = problem.spec, next(s for s in problem.spec.all_shapes() if s.name == r.shape)
        flops, nbytes = spec.flops_for(shape), spec.bytes_for(shape)
        st = r.stats
        if r.kind == "self":
            table.add_row(problem.name, r.shape, r.kind, "-", "-", str(len(r.speedups)), "-", "-", "-", "-",
                          r.error[:80] or _spread_note(r.speedups))
            continue
        gpu = lookup(r.platform.device_name) if r.platform.device == "cuda" else None
        roof = roofline_fraction(gpu, spec.peak_dtype or spec.dtype, flops, nbytes, st.median) if st else None
        table.add_row(problem.name, r.shape, r.kind + (f":{r.mode}" if r.mode not in ("", "default") else ""),
                      seconds(st.median) if st else "-", f"{st.rse:.1%}" if st and st.rse is not None else "-",
                      str(st.n) if st else "-", st.stopped_by if st else "-",
                      f"{flops / st.median / 1e12:.2f}" if st and flops else "-",
                      f"{nbytes / st.median / 1e9:.1f}" if st and nbytes else "-",
                      f"{roof:.1%}" if roof is not None else "-", r.error[:80])
    return table


def _spread_note(speedups: list[float]) -> str:
    from rooftop.measure.spread import spread_of

    spread = spread_of(speedups)
    listed = ", ".join(f"{x:.4f}" for x in speedups)
    return f"between processes ±{spread:.2%} (speedups over itself: {listed})" if spread is not None else listed


def calibrate_command(json_output: JsonOpt = False, db: DbOpt = Path("rooftop.db")) -> None:
    """Measure this GPU's ceilings (matmul per dtype, copy bandwidth) and store its hardware profile."""
    import torch

    from rooftop.score.calibrate import calibrate
    from rooftop.store.db import Store

    if not torch.cuda.is_available():
        raise UserError("calibrate: no CUDA GPU is visible to torch on this machine")
    with progress_bar(not json_output) as bar:
        task = bar.add_task("calibrate", total=None)
        profile = calibrate(progress=lambda step: bar.update(task, description=f"calibrate: {step}"))
    store = Store(db)
    store.baselines.save_profile(profile)
    store.close()
    if json_output:
        sys.stdout.write(profile.model_dump_json(indent=2) + "\n")
        return
    out.print(f"[bold]{profile.device_name}[/bold] (datasheet entry {profile.gpu_key or 'none'}) · "
              f"{profile.sms} SMs · L2 {profile.l2_bytes / 2**20:.1f} MiB · {profile.memory_bytes / 2**30:.1f} GiB · "
              f"SM clock max {profile.sm_max_mhz or '-'} MHz · driver {profile.driver or '-'}", highlight=False)
    table = Table(header_style="bold")
    for col in ("ceiling", "measured", "datasheet", "fraction", "±", "clock MHz", "how"):
        table.add_column(col, justify="left" if col in ("ceiling", "how") else "right")
    rows = [(f"matmul {k} TFLOP/s", c) for k, c in profile.matmul_tflops.items()] + \
        [("copy GB/s", profile.copy_gbps)]
    for label, c in rows:
        table.add_row(label, f"{c.measured:.1f}" if c.measured else "-", f"{c.datasheet:g}" if c.datasheet else "-",
                      f"{c.fraction:.1%}" if c.fraction else "-", f"{c.rse:.2%}" if c.rse is not None else "-",
                      f"{c.clock_median_mhz:.0f}" if c.clock_median_mhz else "-", c.error or c.what)
    out.print(table)
    out.print(f"[dim]the datasheet stays the roofline's denominator; profile stored in {db}[/dim]")
