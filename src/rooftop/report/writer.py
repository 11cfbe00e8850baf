"""`rooftop report`'s work: read the store, build the document, draw, write the three files."""

from __future__ import annotations

from pathlib import Path

from rooftop.report.collect import load
from rooftop.report.leaderboard import Leaderboard, build
from rooftop.report.plots import PLOTS, draw
from rooftop.report.references import gather
from rooftop.report.render import html, markdown
from rooftop.store.db import Store

FILES = ("leaderboard.md", "leaderboard.html", "leaderboard.json")


def write_report(store: Store, out: Path, deck: str | None = None, sweep: str | None = None) -> Leaderboard:
    """The leaderboard of the store's finished agent runs (or, with none, its evaluations), written
    to `out` with its plots; the document."""
    source, entries, baselines = load(store, sweep, deck)
    facts = gather(entries, baselines)
    board = build(str(store.path), source, entries, facts, deck=deck, sweep=sweep)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (out / PLOTS).glob("*") if (out / PLOTS).is_dir() else []:
        if stale.suffix in (".png", ".svg") and stale.stem.startswith(("roofline-", "speedup-", "fast_p")):
            stale.unlink()  # a plot of the last report that this one does not draw
    draw(board, entries, facts, out)
    (out / "leaderboard.json").write_text(board.model_dump_json(indent=2) + "\n")
    (out / "leaderboard.md").write_text(markdown(board))
    (out / "leaderboard.html").write_text(html(board))
    return board
