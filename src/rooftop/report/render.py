"""The leaderboard as Markdown and as one self-contained HTML page (inline CSS, no script, plots
linked relative to the page), both from the same tables so the two never disagree."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment

from rooftop.report.annotations import MARKS
from rooftop.report.leaderboard import Cell, Leaderboard

ALL = "all problems"


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""
    separators: list[int] = field(default_factory=list)  # indexes of rows that start a new group


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def number(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def roofline(cell: Cell) -> str:
    interval = cell.roofline
    if interval.mean is None:
        return "-"
    if interval.low is None or interval.high is None:
        return percent(interval.mean)
    return f"{percent(interval.mean)} ({interval.low * 100:.1f}-{interval.high * 100:.1f})"


def marks(cell: Cell) -> str:
    return "".join(MARKS[k] for k in cell.marks)


def headline(cell: Cell) -> str:
    speedup = cell.speedups.get("eager")
    return (f"{roofline(cell)} · {cell.passed}/{cell.runs}" + (f" · {times(speedup)}" if speedup else "")
            + (f" {marks(cell)}" if cell.marks else ""))


def tables(board: Leaderboard) -> list[Table]:
    columns = [p.display for p in board.problems]
    many_devices = len(board.devices) > 1
    main = Table("Leaderboard", ["", *columns, ALL],
                 note="Each cell: mean graded roofline fraction (95% interval) · graded correct / repeats · speedup "
                      "over eager (geometric mean over the correct repeats). "
                      "Reference rows: the reference's roofline fraction (geometric mean over its timed shapes).")
    for row in board.rows:
        main.rows.append([row.label, *[headline(row.cells[p.name]) if p.name in row.cells else "-"
                                       for p in board.problems], headline(row.overall)])
    if board.references:
        main.separators.append(len(main.rows))
    for ref in board.references:
        label = ref.kind + (f" ({ref.device})" if many_devices else "")
        main.rows.append([label, *[percent(ref.cells[p.name].roofline) if p.name in ref.cells else "-"
                                   for p in board.problems], ""])
    kinds = board.speedup_kinds or ["eager"]
    details = Table("Details", ["row", "problem", "repeats", "correct", "roofline mean", "95% interval",
                                "held-out pass", *[f"x {k}" for k in kinds], "tokens in", "tokens out", "cost $",
                                "wall s", "notes"],
                    note="Speedups: geometric means over the correct repeats. Held-out pass: repeats whose every "
                         "held-out shape is correct. Tokens, cost and wall time: means per repeat.")
    names = {p.name: p.display for p in board.problems}
    for row in board.rows:
        for problem, cell in [*row.cells.items(), (ALL, row.overall)]:
            interval = cell.roofline
            held = "-" if cell.held_out_rate is None else f"{cell.held_out_passed}/{cell.held_out_runs}"
            details.rows.append([
                row.label, names.get(problem, problem), str(cell.runs), str(cell.passed), percent(interval.mean),
                "-" if interval.low is None else f"{percent(interval.low)}-{percent(interval.high)}", held,
                *[times(cell.speedups.get(k)) for k in kinds], number(cell.input_tokens),
                number(cell.output_tokens), number(cell.cost_usd, "{:.2f}"), number(cell.wall_s),
                " ".join(f"{MARKS[k]} {k}" for k in cell.marks) or ""])
    references = Table("References", ["reference", "device", "problem", "roofline", "x eager", "shapes", "source"],
                       note="eager: the paired reference of the verdicts, or the stored baseline; compile and sota: "
                            "`rooftop baselines` records. '-': nothing stored.")
    for ref in board.references:
        for column in board.problems:
            got = ref.cells.get(column.name)
            references.rows.append([ref.kind, ref.device, column.display,
                                    percent(got.roofline) if got else "-",
                                    times(got.speedup_over_eager) if got and ref.kind != "eager" else "-",
                                    str(got.shapes) if got else "0", got.source if got else "-"])
    fast_p = Table("fast_p", ["row", *[f"fast_{p}" for p in next(iter(board.rows)).fast_p]] if board.rows else [],
                   note="Share of all the row's repeats whose graded solution is correct and faster than p x eager "
                        "(fast_0: correct).")
    for row in board.rows:
        fast_p.rows.append([row.label, *[percent(v) for v in row.fast_p.values()]])
    return [t for t in (main, details, references, fast_p) if t.rows]


def markdown(board: Leaderboard) -> str:
    lines = ["# rooftop leaderboard", "", _about(board), "", f"Roofline: {board.roofline}.", "",
             f"Interval: {board.interval}.", ""]
    for table in tables(board):
        lines += [f"## {table.title}", "", table.note, "", _md_row(table.headers),
                  "|" + "|".join("---" for _ in table.headers) + "|"]
        for i, row in enumerate(table.rows):
            if i in table.separators:
                lines.append(_md_row(["**references**", *[""] * (len(row) - 1)]))
            lines.append(_md_row(row))
        lines.append("")
    lines += ["Marks: " + ", ".join(f"{mark} {kind}" for kind, mark in MARKS.items()) + " (audit notes, "
              "`rooftop annotate`).", ""]
    if board.plots:
        lines += ["## Plots", ""]
        lines += [f"![{p.removeprefix('plots/').removesuffix('.png')}]({p})" for p in board.plots]
        lines.append("")
    if board.annotations:
        lines += ["## Annotations", ""]
        for note in board.annotations:
            lines.append(f"- {MARKS[note.verdict]} **{note.verdict}** run `{note.run_id}`"
                         + (f": {note.summary}" if note.summary else ""))
            for q in note.quotes:
                lines.append(f"  - `{q.file}:{q.start}-{q.end}`" + (f" ({q.label})" if q.label else "")
                             + ": " + _one_line(q.text, 200))
        lines.append("")
    return "\n".join(lines)


def _about(board: Leaderboard) -> str:
    runs = sum(r.overall.runs for r in board.rows)
    source = f"{runs} finished agent runs" if board.source == "agent_runs" else f"{runs} evaluations (no agent runs)"
    scope = "".join([f", deck {board.deck}" if board.deck else "", f", sweep {board.sweep}" if board.sweep else ""])
    devices = ", ".join(board.devices) or "no device"
    return f"From {Path(board.db).name}{scope}: {source} on {devices}; made {board.created_at}."


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return "`" + (flat[:limit] + "..." if len(flat) > limit else flat).replace("`", "'") + "`"


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rooftop leaderboard</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
p.note { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; font-weight: 600; }
tr.group td { background: #fafafa; font-style: italic; text-align: left; }
.mark { color: #b00; font-weight: 700; }
figure { display: inline-block; margin: 0.5em; } figure img { max-width: 640px; border: 1px solid #eee; }
.scroll { overflow-x: auto; }
pre { background: #f7f7f7; padding: 0.5em; overflow-x: auto; font-size: 12px; }
</style></head><body>
<h1>rooftop leaderboard</h1>
<p>{{ about }}</p>
<p class="note">Roofline: {{ board.roofline }}.<br>Interval: {{ board.interval }}.</p>
{% for table in tables %}
<h2>{{ table.title }}</h2>
<p class="note">{{ table.note }}</p>
<div class="scroll"><table><thead><tr>{% for h in table.headers %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{% for row in table.rows %}{% if loop.index0 in table.separators %}
<tr class="group"><td colspan="{{ table.headers|length }}">references</td></tr>{% endif %}
<tr>{% for c in row %}<td>{{ c | marked }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table></div>
{% endfor %}
<p class="note">Marks: {% for kind, mark in marks.items() %}<span class="mark">{{ mark }}</span> {{ kind }}
{{- ", " if not loop.last }}{% endfor %} (audit notes).</p>
{% if board.plots %}<h2>Plots</h2>
{% for plot in board.plots %}<figure><img src="{{ plot }}" alt="{{ plot }}">
<figcaption><a href="{{ plot[:-4] }}.svg">SVG</a></figcaption></figure>
{% endfor %}{% endif %}
{% if board.annotations %}<h2>Annotations</h2>
{% for note in board.annotations %}
<h3><span class="mark">{{ marks[note.verdict] }}</span> {{ note.verdict }}: run {{ note.run_id }}</h3>
{% if note.summary %}<p>{{ note.summary }}</p>{% endif %}
{% for q in note.quotes %}<p class="note">{{ q.file }}:{{ q.start }}-{{ q.end }} {{ q.label }}</p>
<pre>{{ q.text }}</pre>
{% endfor %}{% endfor %}{% endif %}
</body></html>
"""


def html(board: Leaderboard) -> str:
    from markupsafe import Markup, escape

    symbols = set(MARKS.values())

    def marked(text: str) -> Markup:
        """A cell's trailing audit marks in red."""
        head, _, tail = text.rpartition(" ")
        if head and tail and set(tail) <= symbols:
            return escape(head) + Markup(" <span class=\"mark\">") + escape(tail) + Markup("</span>")
        return escape(text)

    env = Environment(autoescape=True, trim_blocks=True)
    env.filters["marked"] = marked
    return env.from_string(PAGE).render(board=board, tables=tables(board), about=_about(board), marks=MARKS)
