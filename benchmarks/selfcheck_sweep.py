"""Each reference judged as its own candidate, over whole decks, with the checks on and off: how far
the speedup strays from 1.0, and how often its 95 % interval admits 1.0.

A reference timed against itself must come out 1.0. What strays measures the harness (anything the
candidate's timed calls carry that the reference's do not) and the problem (kernels whose time moves
from one process to the next). With `--repeats N` every problem is self-checked N times with the
checks on, each in a fresh child, which gives the between-process spread of its speedup. With
`--shard K/N` a process takes every N-th problem from the K-th: one process per GPU, each with its own
CUDA_VISIBLE_DEVICES, sweeps a deck N times as fast.

    python benchmarks/selfcheck_sweep.py kernelbench/level1 [kernelbench/level2 ...] [--variants on,off]
        [--repeats 1] [--only 95_,36_] [--budget SECONDS] [--jsonl out.jsonl] [--shard K/N]
        [--min-wall-seconds S]
    python benchmarks/selfcheck_sweep.py --summary out.jsonl [more.jsonl ...]   # the table of earlier runs

Rows go to the JSONL file as they come, so a run cut short keeps what it measured. The table: per
variant, the problems timed, those within 0.5 % and 1 % of 1.0, the intervals that contain 1.0,
the statuses, and the worst problems.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rooftop.batch.selfcheck import selfcheck
from rooftop.errors import UserError
from rooftop.measure.stopping import TimingPolicy
from rooftop.problem.registry import resolve_many
from rooftop.vocabulary import DeviceChoice, Settings

VARIANTS = {"on": True, "off": False}  # the checks
CHUNK = 5  # problems self-checked per variant before the other variant takes them


def sweep(decks: list[str], variants: list[str], repeats: int, only: list[str], budget: float,
          out: Path | None, shard: tuple[int, int] = (0, 1), chunk: int = CHUNK,
          policy: TimingPolicy | None = None) -> list[dict[str, Any]]:
    """Self-check every problem of the decks (this shard's: every n-th from the k-th), a few
    problems at a time: each chunk once per variant, so drift hits the variants alike, and through
    one `selfcheck` call per chunk, which starts the next problem's child while one is judged."""
    problems = [p for deck in decks for p in resolve_many(deck)]
    if only:
        problems = [p for p in problems if any(o in p.name for o in only)]
    problems = problems[shard[0]::shard[1]]
    deadline = time.monotonic() + budget
    rows: list[dict[str, Any]] = []
    for start in range(0, len(problems), chunk):
        group = problems[start:start + chunk]
        for repeat in range(repeats):
            for variant in variants if repeat == 0 else ["on"]:
                if time.monotonic() > deadline:
                    print(f"stopped at the budget ({budget:.0f} s): {len(rows)} rows", file=sys.stderr)
                    return rows
                began = time.monotonic()

                def keep(row: Any, variant: str = variant, repeat: int = repeat) -> None:
                    nonlocal began
                    label = variant if policy is None else f"{variant} (min wall {policy.min_wall_seconds} s)"
                    record = {"variant": label, "repeat": repeat, "seconds": round(time.monotonic() - began, 2),
                              **row.model_dump(mode="json")}
                    began = time.monotonic()
                    rows.append(record)
                    if out is not None:
                        with out.open("a") as f:
                            f.write(json.dumps(record) + "\n")
                    print(_line(record), flush=True)

                selfcheck(group, Settings(device=DeviceChoice.cuda, checks=VARIANTS[variant], timing_policy=policy),
                          on_row=keep)
    return rows


def _line(record: dict[str, Any]) -> str:
    shapes = record.get("shapes") or []
    worst = max(shapes, key=lambda s: abs((s.get("speedup") or 1.0) - 1.0), default=None)
    interval = f"[{worst['low']:.4f}, {worst['high']:.4f}]" if worst and worst.get("low") is not None else "-"
    speedup = f"{worst['speedup']:.4f}" if worst and worst.get("speedup") is not None else "-"
    return (f"{record['problem']:60.60s} checks {record['variant']:3s} #{record['repeat']} {record['status']:14s} "
            f"{speedup:>7s} {interval:20s} {record['seconds']:6.1f} s")


def summary(rows: list[dict[str, Any]]) -> str:
    """The distribution table, per variant (first repeats only; repeats give the spread)."""
    lines = ["| checks | problems | correct | timed | within 0.5 % | within 1 % | interval holds 1.0 | host-bound "
             "| worst |",
             "|---|---|---|---|---|---|---|---|---|"]
    strays: list[str] = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        first = [r for r in rows if r["variant"] == variant and r["repeat"] == 0]
        correct = sum(r["status"] == "correct" for r in first)
        timed = [s for r in first for s in (r.get("shapes") or []) if s.get("speedup") is not None]
        off = [abs(s["speedup"] - 1.0) for s in timed]
        holds = [s for s in timed if s.get("low") is not None and s["low"] <= 1.0 <= s["high"]]
        ranked = sorted(((abs(s["speedup"] - 1.0), r["problem"].split("/")[-1][:28], s["speedup"])
                         for r in first for s in (r.get("shapes") or []) if s.get("speedup") is not None),
                        reverse=True)[:3]
        worst = ", ".join(f"{name} {speedup:.3f}" for _, name, speedup in ranked)
        bound = sum("host-bound" in (s.get("flags") or []) for s in timed)
        lines.append(f"| {variant} | {len(first)} | {correct} | {len(timed)} | {_share(off, 0.005)} | "
                     f"{_share(off, 0.01)} | {len(holds)} of {len(timed)} | {bound} | {worst} |")
        outside = [f"{r['problem'].split('/')[-1][:28]} {s['speedup']:.3f}"
                   + (f" ({', '.join(s['flags'] + _queued(s))})" if s.get("flags") or _queued(s) else "")
                   for r in first for s in (r.get("shapes") or [])
                   if s.get("speedup") is not None and abs(s["speedup"] - 1.0) > 0.005]
        if outside:
            strays.append(f"Outside ±0.5 % with the checks {variant}: " + "; ".join(outside))
    lines += [""] + strays if strays else []
    spread = _spread(rows)
    if spread:
        lines.append("")
        lines.append(f"Between-process spread (checks on, {len(spread)} problems with repeats): median "
                     f"{statistics.median(spread) * 100:.2f} %, max {max(spread) * 100:.2f} % (max - min of the "
                     "speedups, per shape)")
    statuses: dict[str, int] = {}
    for r in rows:
        if r["repeat"] == 0:
            statuses[f"{r['variant']}:{r['status']}"] = statuses.get(f"{r['variant']}:{r['status']}", 0) + 1
    lines.append("")
    lines.append("Statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    return "\n".join(lines)


def _queued(shape: dict[str, Any]) -> list[str]:
    """Each side's median host time to queue a call, where the row has them: `queue ref 12.1 ms`."""
    short = {"reference": "ref", "candidate": "cand"}
    queued = shape.get("queued") or {}
    return [f"queue {short.get(side, side)} {seconds * 1e3:.1f} ms" for side, seconds in queued.items()]


def _share(values: list[float], limit: float) -> str:
    inside = sum(v <= limit for v in values)
    return f"{inside} ({100 * inside / len(values):.1f} %)" if values else "-"


def _spread(rows: list[dict[str, Any]]) -> list[float]:
    by_shape: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if not r["variant"].startswith("on"):
            continue
        for s in r.get("shapes") or []:
            if s.get("speedup") is not None:
                by_shape.setdefault((r["problem"], s["shape"]), []).append(s["speedup"])
    return [max(v) - min(v) for v in by_shape.values() if len(v) > 1]


def _shard(text: str) -> tuple[int, int] | None:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit()) or not 0 <= int(k) < int(n):
        return None
    return int(k), int(n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("decks", nargs="*", help="decks or problems ('kernelbench/level1')")
    parser.add_argument("--variants", default="on,off", help="checks on, off, or both (on,off)")
    parser.add_argument("--repeats", type=int, default=1, help="self-checks per problem with the checks on")
    parser.add_argument("--only", default="", help="comma-separated substrings of the problem names to keep")
    parser.add_argument("--budget", type=float, default=float("inf"), help="stop starting new rows after SECONDS")
    parser.add_argument("--jsonl", type=Path, help="append each row to this file as it comes")
    parser.add_argument("--shard", default="0/1", help="K/N: every N-th problem from the K-th (one process per GPU)")
    parser.add_argument("--summary", type=Path, nargs="+", help="print the table of earlier runs' JSONL files")
    parser.add_argument("--min-wall-seconds", type=float, help="the stopping rule's wall-time minimum (default "
                        f"{TimingPolicy().min_wall_seconds} s): what a shorter one costs the self-checks")
    args = parser.parse_args()
    if args.summary:
        rows = [json.loads(line) for path in args.summary for line in path.read_text().splitlines() if line.strip()]
        print(summary(rows))
        return 0
    variants = [v for v in args.variants.split(",") if v]
    wrong = [v for v in variants if v not in VARIANTS]
    shard = _shard(args.shard)
    if not args.decks or wrong or args.repeats < 1 or shard is None:
        parser.error("give at least one deck, --variants from on,off, --repeats of 1 or more and --shard K/N "
                     "with 0 <= K < N")
    try:
        policy = None if args.min_wall_seconds is None else TimingPolicy(min_wall_seconds=args.min_wall_seconds)
        rows = sweep(args.decks, variants, args.repeats, [o for o in args.only.split(",") if o], args.budget,
                     args.jsonl, shard, policy=policy)
    except UserError as exc:
        print(f"selfcheck_sweep: {exc}", file=sys.stderr)
        return 2
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
