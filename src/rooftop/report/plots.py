"""The report's figures, each as PNG and SVG: a roofline per problem and device, fast_p curves, and
the spread of speedups per deck.

Matplotlib's object API on the Agg canvas (no pyplot, no display, no global figure state); file
names follow from the problem, device and deck names, and the SVGs carry no date or random ids,
so the same store gives the same files.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import matplotlib
from matplotlib.axes import Axes
from matplotlib.axis import XAxis, YAxis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from rooftop.report.collect import Entry, deck_of
from rooftop.report.leaderboard import Leaderboard, fast
from rooftop.report.references import ProblemFacts

PLOTS = "plots"  # the folder under the report's, and the prefix of every plot's relative path
REFERENCE_MARKERS = {"eager": "X", "compile": "^", "compile:max-autotune": "v", "sota": "*"}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
          "#7f7f7f")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-")[:80] or "x"


def draw(board: Leaderboard, entries: list[Entry], facts: dict[tuple[str, str], ProblemFacts], out: Path) -> None:
    """Every plot, into `out`/plots; their paths go into the document (problems' and `plots`)."""
    folder = out / PLOTS
    folder.mkdir(parents=True, exist_ok=True)
    colors = {row.label: COLORS[i % len(COLORS)] for i, row in enumerate(board.rows)}
    written: list[str] = []
    for column in board.problems:
        devices = sorted(d for p, d in facts if p == column.name)
        for device in devices:
            name = f"roofline-{slug(column.display)}" + (f"-{slug(device)}" if len(devices) > 1 else "")
            mine = [e for e in entries if e.problem == column.name and e.device == device]
            if _roofline(facts[(column.name, device)], mine, colors, f"{column.display} on {device}", folder / name):
                column.plots.append(f"{PLOTS}/{name}.png")
                written.append(f"{PLOTS}/{name}.png")
    if entries and _fast_p(board, entries, colors, folder / "fast_p"):
        written.append(f"{PLOTS}/fast_p.png")
    for deck in sorted({deck_of(e.problem) for e in entries}):
        name = f"speedup-{slug(deck)}"
        if _speedups(board, [e for e in entries if deck_of(e.problem) == deck], colors, deck, folder / name):
            written.append(f"{PLOTS}/{name}.png")
    board.plots = written


def _save(fig: Figure, stem: Path) -> None:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    with matplotlib.rc_context({"svg.hashsalt": "rooftop", "svg.fonttype": "none"}):
        fig.savefig(stem.with_suffix(".png"), dpi=110, metadata={"Software": None})
        fig.savefig(stem.with_suffix(".svg"), metadata={"Date": None, "Creator": None})


def _plain(axis: XAxis | YAxis, unit: str = "") -> None:
    """Log-axis ticks as plain numbers (2x, 0.5), not powers of ten; minor ones at 2 and 5."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{unit}"))
    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}{unit}"))


def _roofline(problem: ProblemFacts, entries: list[Entry], colors: dict[str, str], title: str, stem: Path) -> bool:
    """Achieved FLOP/s against FLOP/byte, shape by shape, under the device's two roofs."""
    fig = Figure(figsize=(7, 4.8))
    ax = fig.add_subplot()
    xs: list[float] = []
    labelled: set[str] = set()
    for entry in entries:
        verdict = entry.verdict
        if verdict is None or not entry.correct:
            continue
        points = [(r.flops / r.bytes, r.flops / r.candidate.median / 1e12) for r in verdict.shapes
                  if r.correct and r.candidate and r.candidate.median > 0 and r.flops and r.bytes]
        if points:
            ax.scatter([x for x, _ in points], [y for _, y in points], s=28, color=colors.get(entry.row, "#333333"),
                       alpha=0.8, zorder=3, label=None if entry.row in labelled else entry.row)
            labelled.add(entry.row)
            xs += [x for x, _ in points]
    for kind in problem.kinds():
        points = [(s.flops / s.bytes, s.flops / timed[0] / 1e12) for s in problem.shapes.values()
                  if s.flops and s.bytes and (timed := s.seconds(kind)) is not None]
        if points:
            ax.scatter([x for x, _ in points], [y for _, y in points], s=60, marker=REFERENCE_MARKERS.get(kind, "D"),
                       color="#222222", facecolors="none" if kind != "eager" else "#222222", zorder=4, label=kind,
                       linewidths=1.2)
            xs += [x for x, _ in points]
    if not xs:
        return False
    roofs = problem.roofs()
    low, high = min(xs) / 4, max(xs) * 4
    if roofs.bandwidth:
        if roofs.peak:
            ridge = roofs.peak / roofs.bandwidth
            low, high = min(low, ridge / 4), max(high, ridge * 4)
        grid = [low * (high / low) ** (i / 200) for i in range(201)]
        roof = [min(roofs.peak or float("inf"), roofs.bandwidth * x) / 1e12 for x in grid]
        ax.plot(grid, roof, color="#555555", linewidth=1.5, zorder=2)
        gpu = roofs.gpu.name if roofs.gpu else ""
        note = f"{gpu}: {roofs.bandwidth / 1e9:.0f} GB/s"
        if roofs.peak:
            note += f", {roofs.peak / 1e12:.4g} TFLOP/s {roofs.dtype or ''} (dense)"
        ax.text(0.01, 0.99, note, transform=ax.transAxes, va="top", fontsize=8, color="#555555")
    else:
        ax.text(0.01, 0.99, "no datasheet entry for this device: no roofs", transform=ax.transAxes, va="top",
                fontsize=8, color="#555555")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain(ax.xaxis)
    _plain(ax.yaxis)
    ax.set_xlim(low, high)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    _save(fig, stem)
    return True


def _fast_p(board: Leaderboard, entries: list[Entry], colors: dict[str, str], stem: Path) -> bool:
    """Share of a row's repeats that are correct and faster than p x eager, over p."""
    by_row: dict[str, list[Entry]] = defaultdict(list)
    for entry in entries:
        by_row[entry.row].append(entry)
    speeds = [e.speedup for e in entries if e.correct and e.speedup]
    top = max(2.0, max(speeds, default=1.0) * 1.1)
    low = min(0.1, min(speeds, default=1.0) * 0.9)  # below every speedup: the curve starts at the correct share
    grid = [low * (top / low) ** (i / 400) for i in range(401)]  # speedups span decades: a log axis
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    for row in board.rows:
        mine = by_row.get(row.label, [])
        if mine:
            ax.step(grid, [sum(fast(e, p) for e in mine) / len(mine) for p in grid], where="post",
                    color=colors[row.label], label=f"{row.label} (n={len(mine)})")
    ax.axvline(1.0, color="#999999", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlim(low, top)
    _plain(ax.xaxis, "x")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("p: speedup over eager")
    ax.set_ylabel("fast_p: correct and faster than p x eager")
    ax.set_title("fast_p over every problem", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    _save(fig, stem)
    return True


def _speedups(board: Leaderboard, entries: list[Entry], colors: dict[str, str], deck: str, stem: Path) -> bool:
    """Each row's speedups over eager on one deck, one value per correct repeat (and problem)."""
    rows = [(row.label, [e.speedup for e in entries if e.row == row.label and e.correct and e.speedup])
            for row in board.rows]
    rows = [(label, values) for label, values in rows if values]
    if not rows:
        return False
    fig = Figure(figsize=(max(5.0, 1.3 * len(rows) + 2), 4.5))
    ax: Axes = fig.add_subplot()
    ax.boxplot([v for _, v in rows], showfliers=False, widths=0.5)
    for i, (label, values) in enumerate(rows, start=1):
        spread = [i + 0.3 * ((k + 0.5) / len(values) - 0.5) for k in range(len(values))]  # even, not random
        ax.scatter(spread, sorted(values), s=16, color=colors[label], alpha=0.8, zorder=3)
    ax.set_xticks(range(1, len(rows) + 1), [label for label, _ in rows], rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    _plain(ax.yaxis, "x")
    ax.axhline(1.0, color="#999999", linestyle=":", linewidth=1)
    ax.set_ylabel("speedup over eager (correct repeats)")
    ax.set_title(f"speedups on deck {deck}", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    _save(fig, stem)
    return True
