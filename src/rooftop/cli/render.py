"""Rich tables for verdicts. Presentation only: it reads verdicts and never computes scores."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rooftop.score.reward import unmeasured, unmeasured_note
from rooftop.verdict import ShapeResult, Status, Verdict

STATUS_STYLE = {
    Status.correct: "bold green", Status.incorrect: "bold red", Status.runtime_error: "bold red",
    Status.init_error: "bold red", Status.compile_error: "bold red", Status.rejected: "bold magenta",
    Status.timeout: "bold yellow", Status.internal_error: "bold red reverse", Status.needs_gpu: "bold cyan",
}


NOT_TIMED = "not timed"


def seconds(value: float | None) -> str:
    if value is None or value != value:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.1f} µs"
    if value < 1:
        return f"{value * 1e3:.4g} ms"
    return f"{value:.2f} s"


def number(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def status_text(status: Status) -> Text:
    return Text(status.value, style=STATUS_STYLE.get(status, ""))


def untimed(verdict: Verdict) -> bool:
    """A correct verdict with no candidate timing on any shape was evaluated with timing off: its
    reward and speedups say nothing, so they are shown as "not timed" rather than as numbers."""
    return verdict.status is Status.correct and all(r.candidate is None for r in verdict.shapes)


def estimated(verdict: Verdict) -> str:
    """The marker beside every roofline figure read against flops/bytes rooftop estimated."""
    return " (est.)" if verdict.figures == "estimated" else ""


def print_verdict(verdict: Verdict, console: Console) -> None:
    env = verdict.environment
    reward = Text(NOT_TIMED, style="dim") if untimed(verdict) else \
        Text.assemble("reward ", Text(number(verdict.reward, "{:+.3f}"), style="bold"))
    console.print(Text.assemble(status_text(verdict.status), "  ", reward,
                                f"  {verdict.problem} v{verdict.problem_version}  ",
                                Text(verdict.solution.rsplit("/", 1)[-1], style="bold")))
    if env:
        console.print(f"{env.device_name} · {env.mode} · sandbox {verdict.sandbox} · torch {env.torch}"
                      + (f" · triton {env.triton}" if env.triton else "")
                      + (f" · CUDA {env.cuda}" if env.cuda else ""), style="dim", highlight=False)
    if any(r.checks or r.candidate for r in verdict.shapes):
        console.print(shape_table(verdict, console.width))
    if verdict.inputs:
        console.print(f"inputs: {verdict.inputs}", style="dim", highlight=False)
    if verdict.traced_calls:
        console.print(f"kernels: {verdict.traced_calls} calls traced on every stream, each held to its own "
                      "reported time", style="dim", highlight=False)
    calls, checked = sum(r.timed_calls for r in verdict.shapes), sum(r.timed_checks for r in verdict.shapes)
    if checked < calls:
        console.print(f"timed outputs: {checked} of {calls} checked against the reference (a slow reference "
                      "leaves the calls once its own samples suffice; the rest are drawn after each reply)",
                      style="dim", highlight=False)
    for message in verdict.messages:
        console.print(message, style="yellow", highlight=False, markup=False)
    for warning in verdict.warnings:
        console.print(f"warning: {warning}", style="bold yellow", highlight=False, markup=False)
    if verdict.status is Status.correct and verdict.summary.geomean_speedup is not None:
        others = "".join(f" · over {k} {v:.3f}x" for k, v in verdict.summary.geomean_speedups.items()
                         if k != "eager")
        missed = unmeasured_note(verdict)
        partial = f" (measured shapes only; {missed}: the reward counts 0x)" if missed else ""
        console.print(f"geomean speedup over eager {verdict.summary.geomean_speedup:.3f}x{partial}{others}"
                      + (f" · geomean roofline {verdict.summary.geomean_roofline:.1%}{estimated(verdict)}"
                         if verdict.summary.geomean_roofline is not None else "")
                      + f" · {verdict.wall_seconds:.1f} s wall", style="bold")


def phase_table(verdict: Verdict) -> Table:
    """Where the wall time went: the child's start, the trusted side's set-up, each gate."""
    table = Table("phase", "seconds", title=f"{verdict.wall_seconds:.2f} s wall", title_justify="left")
    for name, value in verdict.phases.items():
        table.add_row(name.replace("_", " "), f"{value:.3f}")
    return table


def figure(value: float | None) -> str:
    """A rate (TFLOP/s, GB/s) with three significant digits, and no exponent from 100 up."""
    if value is None or value != value:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def ratio(value: float | None) -> str:
    """A speedup with the digits that matter: two decimals from 0.1x, two significant digits below
    (0.0031x, not 0.00x)."""
    if value is None or value != value:
        return "-"
    return f"{value:.2f}x" if value >= 0.095 else f"{value:.2g}x"


# columns a narrow terminal goes without, first to last; the caption names them (--json has all)
OPTIONAL = ("MHz", "max err", "±", "split", "n", "vs ")


def shape_table(verdict: Verdict, width: int | None = None) -> Table:
    """One row per shape, each on one line within `width` columns: a figure no shape has (TFLOP/s
    of an elementwise op, the SM clock on a CPU) gets no column, what is said at length (why a
    speedup was not measured, what stopped the sampling) goes under the table, and where the rest
    is still too wide the `OPTIONAL` columns go, in that order, and the caption says so."""
    shapes = verdict.shapes
    clocks = {r.candidate.clock for r in shapes if r.candidate}
    caption = {"cuda_event": "times: CUDA events, one pair per call, L2 flushed before each"
               + (", CUDA-graph replays" if verdict.graphs else ""),
               "cpu_perf_counter": "times: CPU timings (time.perf_counter), not GPU times"}
    others = sorted({k for r in shapes for k in r.speedups if k != "eager"})
    figures = [(col, key) for col, key in (("TFLOP/s", "tflops"), ("GB/s", "gbps"))
               if any(getattr(r, key) is not None for r in shapes)]
    cells: dict[str, list[str]] = {"shape": [r.shape for r in shapes], "split": [r.split for r in shapes]}
    cells["ok"] = ["-" if r.correct is None else ("yes" if r.correct else "NO") for r in shapes]
    cells["max err"] = [number(max((c.max_abs_error for c in r.checks if c.max_abs_error is not None), default=None),
                               "{:.1e}") for r in shapes]
    # ±: the median's relative standard error (from its 95 % distribution-free interval); the
    # speedup over eager is the median of paired per-call ratios, with its 95 % interval
    cells["median"] = [seconds(r.candidate.median) if r.candidate else "-" for r in shapes]
    cells["±"] = [number(r.candidate.rse if r.candidate else None, "{:.2%}") for r in shapes]
    cells["n"] = [str(r.candidate.n) if r.candidate else "-" for r in shapes]
    if any(r.candidate and r.candidate.clock_median_mhz for r in shapes):
        cells["MHz"] = [number(r.candidate.clock_median_mhz if r.candidate else None, "{:.0f}") for r in shapes]
    cells["eager"] = [seconds(r.reference.median) if r.reference else "-" for r in shapes]
    cells["speedup"] = [_speedup(r) for r in shapes]
    for k in others:
        cells[f"vs {k}"] = [ratio(r.speedups.get(k)) for r in shapes]
    for col, key in figures:
        cells[col + estimated(verdict)] = [figure(getattr(r, key)) for r in shapes]
    cells["roof" + estimated(verdict)] = [number(r.roofline_fraction, "{:.1%}") for r in shapes]
    if any(r.flags for r in shapes):
        cells["flags"] = [", ".join(r.flags) for r in shapes]
    notes = [caption.get(c, c) for c in sorted(clocks)]
    if estimated(verdict):
        notes.append("est.: flops and bytes estimated by rooftop, not the problem's formulas")
    notes += spread_notes(verdict)
    notes += sorted({r.no_interval for r in shapes if r.no_interval})
    for why in sorted({r.untrusted for r in shapes if r.untrusted}):
        named = ", ".join(f"'{r.shape}'" for r in shapes if r.untrusted == why)
        notes.append(f"* not measured on {named} ({why}): ignored by the reward")
    stops = sorted({r.candidate.stopped_by for r in shapes if r.candidate and r.candidate.stopped_by})
    if stops:
        notes.append("sampling stopped by " + ", ".join(stops))
    left_out: list[str] = []
    for optional in ("", *OPTIONAL):
        for col in [c for c in cells if optional and c.startswith(optional)]:
            left_out.append(col)
            del cells[col]
        if width is None or _width(cells) <= width:
            break
    if left_out:
        notes.append(f"left out for width: {', '.join(left_out)} (a wider terminal or --json shows them)")
    table = Table(show_edge=False, header_style="bold", caption=" · ".join(notes) or None, box=box.SIMPLE_HEAD,
                  padding=(0, 1, 0, 0))
    for col in cells:
        table.add_column(col, justify="left" if col in ("shape", "split", "flags") else "right", no_wrap=True)
    for row in zip(*cells.values()):
        table.add_row(*row)
    return table


def _width(cells: dict[str, list[str]]) -> int:
    """The table's width: each column's widest cell or header, its padding and the rule between columns."""
    return sum(max(len(col), *(len(v) for v in values)) + 2 for col, values in cells.items())


def _speedup(r: ShapeResult) -> str:
    speedup = ratio(r.speedup)
    if r.speedup_low is not None and r.speedup_high is not None:
        speedup += f" ({ratio(r.speedup_low)[:-1]}–{ratio(r.speedup_high)[:-1]})"
    if r.untrusted:
        speedup += "*"
    elif r.speedup is not None and r.speedup_low is None:
        speedup += " (no interval)"
    return speedup


def spread_notes(verdict: Verdict) -> list[str]:
    """What the speedup intervals hold besides the paired samples: the spread between processes."""
    notes = []
    for source in sorted({r.spread_source for r in verdict.shapes if r.speedup_spread is not None}):
        spread = max(r.speedup_spread or 0.0 for r in verdict.shapes if r.spread_source == source)
        where = {"default": "GPU default; `rooftop baselines --kinds self` measures this problem's",
                 "host-bound default": "the default for a host-bound shape, whose launch rate moves between "
                 "processes; `rooftop baselines --kinds self` measures this problem's"}.get(source, source)
        notes.append(f"speedup intervals include ±{spread:.2%} between processes ({where})")
    if any(r.speedup_low is not None and r.speedup_spread is None for r in verdict.shapes):
        notes.append("speedup intervals: the paired samples' alone, no spread between processes "
                     "(`rooftop baselines --kinds self` measures it)")
    return notes


def summary_table(rows: Sequence[tuple[str, str, Verdict, str | None]]) -> Table:
    """One line per (problem, solution) verdict, with the expected status when one is declared."""
    starred = any(unmeasured(row[2]) for row in rows)
    table = Table(title="rooftop", header_style="bold", caption="* not measured on some shape (the machine was "
                  "shared): the reward counts its speedup as 0x" if starred else None)
    expecting = any(row[3] is not None for row in rows)
    for col in ("problem", "solution", "status", "expected", "reward", "speedup", "roofline", "mode", "wall"):
        if col != "expected" or expecting:
            table.add_column(col, justify="right" if col in ("reward", "speedup", "roofline", "wall") else "left")
    for problem, solution, verdict, expected in rows:
        ok = expected is None or expected == verdict.status.value
        reward, speedup = ((NOT_TIMED, NOT_TIMED) if untimed(verdict) else
                           (number(verdict.reward, "{:+.2f}"), ratio(verdict.summary.geomean_speedup)
                            + ("*" if unmeasured(verdict) else "")))
        table.add_row(problem, solution, status_text(verdict.status),
                      *([Text(expected or "-", style="" if ok else "bold red")] if expecting else []), reward, speedup,
                      number(verdict.summary.geomean_roofline, "{:.1%}") if verdict.summary.geomean_roofline else "-",
                      verdict.environment.mode if verdict.environment else "-", f"{verdict.wall_seconds:.1f} s")
    return table


